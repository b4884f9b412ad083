/**
 * Ending a turn that did not end by itself (DESIGN §5): a cancel, or a failure that stopped a
 * step or a tool round (its activity gave up). The closers the log calls for are appended once,
 * under the turn's op key.
 */
import { closersFor, type TurnEndReason } from '../../session/index.js';
import type { EngineDeps } from '../deps.js';
import { LogWriter } from '../log-writer.js';
import { endTurnOp } from '../ops.js';
import { loggedTurnEnd } from '../outcomes.js';
import type { EndTurnInput, HeadResult } from '../types.js';

/**
 * Closes a turn that did not end by itself (cancel, failure): every open call gets an error
 * result, then the step and the turn end. A no-op when the log shows the turn closed; either
 * way the result is how the log says the turn ended.
 */
export async function endTurn(deps: EngineDeps, input: EndTurnInput): Promise<HeadResult> {
  const writer = await LogWriter.open(deps.store, input.sessionId, input.runId, input.knownHead);
  const reason: TurnEndReason =
    input.reason.kind === 'aborted'
      ? { kind: 'aborted', reason: { kind: 'user' } }
      : { kind: 'error', error: { code: input.reason.code, message: input.reason.message } };
  const closers = closersFor(
    writer.session.turns,
    writer.session.storedAt(writer.session.nextSeq - 1),
    reason,
    deps.now(),
  );
  if (closers.length > 0) {
    await writer.append(closers, endTurnOp(input.runId, input.turn));
    deps.onTurnEnded?.(input.sessionId, writer.session.nextSeq - 1);
  }
  const turnEnd = loggedTurnEnd(writer.session, input.turn);
  return { headSeq: writer.session.nextSeq, ...(turnEnd ? { turnEnd } : {}) };
}
