/**
 * The session activities (DESIGN §5): each one call into the turn engine, with the attempt's
 * context taken from Temporal and the engine's errors mapped to Temporal failures.
 */
import { Context } from '@temporalio/activity';
import type { TurnEngine } from '../engine/engine.js';
import type { StepContext } from '../engine/types.js';
import { toTemporalFailure } from './failures.js';

/** The running activity's attempt, signal and heartbeat, as the engine sees them. */
function stepContext(): StepContext {
  const ctx = Context.current();
  return {
    attempt: ctx.info.attempt,
    signal: ctx.cancellationSignal,
    heartbeat: (details) => ctx.heartbeat(details),
    cancelRequested: () => ctx.cancellationDetails?.cancelRequested === true,
  };
}

async function mapped<T>(operation: () => Promise<T>): Promise<T> {
  try {
    return await operation();
  } catch (error) {
    throw toTemporalFailure(error);
  }
}

/** The activities the session workflow calls, by name. */
export function createActivities(engine: TurnEngine) {
  return {
    openRun: (input: Parameters<TurnEngine['openRun']>[0]) => mapped(() => engine.openRun(input)),
    modelStep: (input: Parameters<TurnEngine['modelStep']>[0]) => mapped(() => engine.modelStep(input, stepContext())),
    runTool: (input: Parameters<TurnEngine['runTool']>[0]) => mapped(() => engine.runTool(input, stepContext())),
    recordAnswers: (input: Parameters<TurnEngine['recordAnswers']>[0]) => mapped(() => engine.recordAnswers(input)),
    appendToolResults: (input: Parameters<TurnEngine['appendToolResults']>[0]) =>
      mapped(() => engine.appendToolResults(input)),
    endTurn: (input: Parameters<TurnEngine['endTurn']>[0]) => mapped(() => engine.endTurn(input)),
    compact: (input: Parameters<TurnEngine['compact']>[0]) => mapped(() => engine.compact(input, stepContext())),
    abandonCompaction: (input: Parameters<TurnEngine['abandonCompaction']>[0]) =>
      mapped(() => engine.abandonCompaction(input)),
    logNote: (input: Parameters<TurnEngine['logNote']>[0]) => mapped(() => engine.logNote(input)),
  };
}

export type SessionActivities = ReturnType<typeof createActivities>;
