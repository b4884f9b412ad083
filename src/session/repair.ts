/**
 * Crash repair (dsh-spec §8.5): the events that close a turn left open by a crash. Every
 * pending tool call gets an error result, an open step gets `step/end`, and the turn gets
 * `turn/end {interrupted}`. The interrupted turn's real events are never removed.
 */
import type { StoredEvent, NewEvent, SessionEvent, TurnEndReason } from './events.js';
import type { ToolResultMessage } from './messages.js';

type PendingCall = { callId: string; turn: number; step: number; callSeq?: number };

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
  let openTurn: number | undefined;
  let openStep: number | undefined;
  let pending = new Map<string, PendingCall>();
  for (const event of events) {
    switch (event.type) {
      case 'turn/start':
        openTurn = (event as SessionEvent<'turn/start'>).data.turn;
        openStep = undefined;
        pending = new Map();
        break;
      case 'turn/end':
        openTurn = undefined;
        openStep = undefined;
        pending = new Map();
        break;
      case 'step/start':
        openStep = (event as SessionEvent<'step/start'>).data.step;
        break;
      case 'step/end':
        openStep = undefined;
        pending = new Map();
        break;
      case 'assistant/message': {
        const data = (event as SessionEvent<'assistant/message'>).data;
        for (const block of data.message.content) {
          if (block.type === 'tool-call') pending.set(block.id, { callId: block.id, turn: data.turn, step: data.step });
        }
        break;
      }
      case 'tool/call': {
        const data = (event as SessionEvent<'tool/call'>).data;
        const call = pending.get(data.callId);
        if (call) call.callSeq = event.seq;
        break;
      }
      case 'tool/result':
        pending.delete((event as SessionEvent<'tool/result'>).data.message.source.callId);
        break;
      default:
        break;
    }
  }
  if (openTurn === undefined) return [];
  const last = events[events.length - 1]!;
  const closedAt = time ?? last.time;
  let seq = last.seq + 1;
  const closers: NewEvent[] = [];
  for (const call of pending.values()) {
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
  if (openStep !== undefined) closers.push({ type: 'step/end', time: closedAt, data: { turn: openTurn, step: openStep } });
  closers.push({ type: 'turn/end', time: closedAt, data: { turn: openTurn, reason } });
  return closers;
}

/** The op key of a repair batch: deterministic in the head it repairs, so a retry is idempotent. */
export function repairOp(lastSeq: number): string {
  return `repair:${lastSeq}`;
}

/** Turn state at the end of the log: the last turn number and whether it is open. */
export function turnState(events: readonly StoredEvent[]): { lastTurn: number; open: boolean; openStep?: number } {
  let lastTurn = 0;
  let open = false;
  let openStep: number | undefined;
  for (const event of events) {
    if (event.type === 'turn/start') {
      lastTurn = (event as SessionEvent<'turn/start'>).data.turn;
      open = true;
      openStep = undefined;
    } else if (event.type === 'turn/end') {
      open = false;
      openStep = undefined;
    } else if (event.type === 'step/start') {
      openStep = (event as SessionEvent<'step/start'>).data.step;
    } else if (event.type === 'step/end') {
      openStep = undefined;
    }
  }
  return open ? { lastTurn, open, ...(openStep !== undefined ? { openStep } : {}) } : { lastTurn, open };
}
