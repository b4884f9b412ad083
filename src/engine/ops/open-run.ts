/**
 * A workflow run taking over its session (DESIGN §5): create the session if it is new (seeded
 * from another session for a fork or a salvage), log `session/run` (from here on, activities
 * of older runs are fenced out), close a turn a crash left open with the repair closers, and
 * clear inbox entries the log already holds.
 */
import { closersFor, newSessionHeader, repairOp, type SessionHeader } from '../../session/index.js';
import type { EngineDeps } from '../deps.js';
import { waitingStep } from './record-answers.js';
import { removeLogged } from '../inbox.js';
import { LogWriter } from '../log-writer.js';
import { runOp } from '../ops.js';
import { recentMessages } from '../outcomes.js';
import { seedSession } from '../seed.js';
import type { OpenRunInput, OpenRunResult } from '../types.js';

export async function openRun(deps: EngineDeps, input: OpenRunInput): Promise<OpenRunResult> {
  if (input.seed) await seedSession(deps, input.sessionId, input.seed);
  else if (!(await deps.store.exists(input.sessionId))) await deps.store.create(defaultHeader(deps, input.sessionId));
  const writer = await LogWriter.takeOver(deps.store, input.sessionId, input.runId);
  // Logged once per run (a retried takeover finds its marker stored under the same op).
  await writer.claim(
    { type: 'session/run', time: deps.now(), data: { workflowId: input.workflowId, runId: input.runId } },
    runOp(input.runId),
  );
  const session = writer.session;
  // A step waiting for answers (approvals, external results) is not interrupted: the run re-enters the wait.
  const waiting = waitingStep(session);
  const closers = waiting ? [] : closersFor(session.turns, session.storedAt(session.nextSeq - 1));
  if (closers.length > 0) await writer.append(closers, repairOp(session.nextSeq - 1));
  const inboxWaiting = await removeLogged(deps.store, writer.session);
  return {
    headSeq: writer.session.nextSeq,
    lastTurn: writer.session.turns.lastTurn,
    repaired: closers.length,
    recent: recentMessages(writer.session),
    ...(waiting ? { waiting } : {}),
    ...(inboxWaiting > 0 ? { inboxWaiting } : {}),
  };
}

/** The header of a session no client created (its workflow started by other means): it keeps the worker's agent. */
function defaultHeader(deps: EngineDeps, sessionId: string): SessionHeader {
  return newSessionHeader({
    id: sessionId,
    createdAt: deps.now(),
    agent: {
      model: deps.agent.model,
      tools: deps.agent.tools,
      ...(deps.agent.system ? { system: deps.agent.system } : {}),
    },
  });
}
