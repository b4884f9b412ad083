/**
 * Turn outcomes as the log states them (DESIGN §5): what a `send` is answered with comes from
 * the logged `turn/end`, never from how an activity failed.
 */
import { isEventOfType, type SessionView, type StoredEvent } from '../session/index.js';
import type { LiveModelStepResult, RecentMessage, ToolCallRef, TurnEndRef } from './types.js';

/** How turn `turn` ended according to the log, or undefined while it is open (or unknown). */
export function loggedTurnEnd(session: SessionView, turn: number): TurnEndRef | undefined {
  const record = session.turns.turns.get(turn);
  if (record?.outcome === undefined) return undefined;
  return { outcome: record.outcome, replySeq: record.replySeq };
}

/** The newest user messages in the log with the outcome of the turn that consumed each. */
export function recentMessages(session: SessionView): RecentMessage[] {
  return session.turns.recentUserMessages.map((m) => {
    const ended = loggedTurnEnd(session, m.turn);
    return { id: m.id, turn: m.turn, replySeq: ended?.replySeq ?? null, outcome: ended?.outcome ?? 'interrupted' };
  });
}

/** The result of a step whose reply (or closing batch) is already logged: the model is not called again. */
export function loggedStepResult(
  session: SessionView,
  turn: number,
  batch: readonly StoredEvent[],
  closing: boolean,
): LiveModelStepResult {
  let replySeq: number | null = null;
  const toolCalls: ToolCallRef[] = [];
  for (const event of batch) {
    if (event.type === 'assistant/message') replySeq = event.seq;
    if (!closing && isEventOfType(event, 'tool/call'))
      toolCalls.push({ callId: event.data.callId, name: event.data.name, callSeq: event.seq });
  }
  const turnEnd = loggedTurnEnd(session, turn);
  const ended = turnEnd?.outcome;
  const outcome =
    toolCalls.length > 0
      ? 'tools'
      : ended === 'max-tokens' || ended === 'aborted' || ended === 'error'
        ? ended
        : 'completed';
  return { headSeq: session.nextSeq, replySeq, toolCalls, outcome, replayed: true, ...(turnEnd ? { turnEnd } : {}) };
}
