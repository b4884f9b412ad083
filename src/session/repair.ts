/**
 * Crash repair (dsh-spec §8.5): the events that close a turn left open by a crash. Every
 * pending tool call gets an error result, an open step gets `step/end`, and the turn gets
 * `turn/end {interrupted}`. The interrupted turn's real events are never removed.
 */
import type { NewEvent, StoredEvent, TurnEndReason } from './events.js';
import type { ToolResultMessage } from './messages.js';
import { TurnFold, type TurnState } from './turns.js';

export const TOOL_OUTCOME_UNKNOWN = 'TOOL_OUTCOME_UNKNOWN';
export const TOOL_NOT_STARTED = 'TOOL_NOT_STARTED';

/**
 * The closers for `events` (empty when the last turn is closed). Seqs follow the last event;
 * `time` defaults to the last event's time (crash repair), `reason` to `interrupted`.
 */
export function interruptedTurnClosers(
  events: readonly StoredEvent[],
  reason: TurnEndReason = { kind: 'interrupted' },
  time?: number,
): NewEvent[] {
  return closersFor(TurnFold.of(events), events[events.length - 1], reason, time);
}

/** The closers for a fold's open turn; `last` is the log's last event. */
export function closersFor(
  fold: TurnState,
  last: StoredEvent | undefined,
  reason: TurnEndReason = { kind: 'interrupted' },
  time?: number,
): NewEvent[] {
  const openTurn = fold.openTurn;
  if (openTurn === undefined || last === undefined) return [];
  const closedAt = time ?? last.time;
  let seq = last.seq + 1;
  const closers: NewEvent[] = [];
  for (const call of fold.pending.values()) {
    const recorded = call.callSeq !== undefined;
    const text = recorded
      ? 'The tool call was recorded as started, but the session was interrupted and its outcome is unknown. Retry it only if it is read-only or idempotent; otherwise verify the external state or ask the user first. Never retry it blindly.'
      : 'The tool call was interrupted before it was recorded as started. It may be retried if it is still needed.';
    const message: ToolResultMessage = {
      id: `interrupted-tool-result-${call.callId}-${seq}`,
      role: 'user',
      content: [{ type: 'tool-result', toolCallId: call.callId, content: [{ type: 'text', text }], isError: true }],
      source: { kind: 'tool', callId: call.callId },
    };
    closers.push({
      type: 'tool/result',
      time: closedAt,
      data: {
        turn: call.turn,
        step: call.step,
        message,
        error: recorded
          ? { name: 'ToolOutcomeUnknownError', code: TOOL_OUTCOME_UNKNOWN }
          : { name: 'ToolNotStartedError', code: TOOL_NOT_STARTED },
      },
      surfaceOp: 'append',
      ...(recorded ? { sourceEventSeqs: [call.callSeq!] } : {}),
    });
    seq += 1;
  }
  if (fold.openStep !== undefined)
    closers.push({ type: 'step/end', time: closedAt, data: { turn: openTurn, step: fold.openStep } });
  closers.push({ type: 'turn/end', time: closedAt, data: { turn: openTurn, reason } });
  return closers;
}

/** Turn state at the end of the log: the last turn number and whether it is open. */
export function turnState(events: readonly StoredEvent[]): { lastTurn: number; open: boolean; openStep?: number } {
  const fold = TurnFold.of(events);
  return fold.open
    ? { lastTurn: fold.lastTurn, open: true, ...(fold.openStep !== undefined ? { openStep: fold.openStep } : {}) }
    : { lastTurn: fold.lastTurn, open: false };
}
