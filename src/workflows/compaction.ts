/**
 * One compaction bracket, as the run asks for it: a manual compaction between turns
 * (between-turns.ts), or one a model step of an earlier version asked for (replay-only.ts).
 */
import type { CompactInput } from '../engine/types.js';
import type { CompactResult } from './api.js';
import { describeFailure, fatalOf } from './failures.js';
import type { RunContext } from './run-context.js';

/** Runs one compaction bracket; failures are reported, never fatal to the turn. */
export async function runCompaction(
  ctx: RunContext,
  trigger: CompactInput['trigger'],
  owner: number | null,
  key: CompactInput['key'],
): Promise<CompactResult | null> {
  const { state, act, base, tunables } = ctx;
  const previous = state.phase;
  state.enter('compacting');
  try {
    const done = await act.compactor.compact({
      ...base,
      key,
      trigger,
      turn: owner,
      knownHead: state.headSeq,
      maxAttempts: tunables.compactionMaxAttempts,
      ...(tunables.rateLimitPauseMs > 0 ? { pauseAfterMs: tunables.rateLimitPauseMs } : {}),
    });
    state.atHead(done.headSeq);
    if (done.error !== undefined) state.report(`compaction ${done.result?.compactionId ?? ''}: ${done.error}`);
    return done.result;
  } catch (error) {
    if (fatalOf(error)) throw error;
    const reported = `compaction: ${describeFailure(error)}`;
    state.report(reported);
    // The activity gave up (timeouts, crashes): close its bracket so no lock outlives it.
    const abandoned = await act.local.abandonCompaction({
      ...base,
      key,
      turn: owner,
      knownHead: state.headSeq,
      error: reported,
    });
    state.atHead(abandoned.headSeq);
    return null;
  } finally {
    state.enter(previous);
  }
}
