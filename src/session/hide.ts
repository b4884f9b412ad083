/**
 * Hiding a message from the surface (issue 24: DELETE of a conversation item). The log is never
 * rewritten: a caller's note logs, per hidden node, an empty `assistant/message` (`hides: true`)
 * that replaces exactly that node, so it no longer reaches the model, the conversation's items
 * or a stateless client's transcript, while the hidden event stays in the log (and in search,
 * export and the inspector). Only messages whose removal leaves a well-formed history can be
 * hidden: user messages and assistant messages without tool calls (a call and its result go
 * together or not at all).
 */
import type { NewEvent, StoredEvent } from './events.js';
import { isKnownEvent } from './events.js';

/** At most this many nodes per note. */
export const MAX_HIDDEN_PER_NOTE = 100;

/** What is wrong with `value` as the seqs a note hides, or undefined. */
export function hideProblem(value: unknown): string | undefined {
  if (!Array.isArray(value) || value.length === 0 || value.length > MAX_HIDDEN_PER_NOTE)
    return `hide must be a list of 1-${MAX_HIDDEN_PER_NOTE} seqs`;
  if (!value.every((seq) => Number.isSafeInteger(seq) && (seq as number) >= 0))
    return 'hide holds seqs (whole numbers)';
  return undefined;
}

/** Why the event at a surface node cannot be hidden, or undefined when it can. */
export function unhideableReason(event: StoredEvent): string | undefined {
  if (!isKnownEvent(event)) return `seq ${event.seq} is not a message`;
  switch (event.type) {
    case 'user/message':
      return undefined;
    case 'assistant/message':
      return event.data.message.content.some((block) => block.type === 'tool-call')
        ? `seq ${event.seq} is an assistant message with tool calls: a call and its result are hidden together or not at all`
        : undefined;
    case 'tool/result':
      return `seq ${event.seq} is a tool result: a call and its result are hidden together or not at all`;
    default:
      return `seq ${event.seq} is not a message`;
  }
}

/**
 * The events that hide `seqs` from a surface whose nodes are `nodes`: one replacement per seq
 * on the surface that can be hidden (a seq already off the surface, or one that cannot be
 * hidden, gets none: callers check first, see {@link unhideableReason}). `turn` is the last
 * turn (a replacement names a turn; a hide belongs to none, so it names the latest).
 */
export function hideEvents(
  seqs: readonly number[],
  nodes: readonly number[],
  eventAt: (seq: number) => StoredEvent | undefined,
  turn: number,
  now: number,
): NewEvent[] {
  const onSurface = new Set(nodes);
  const events: NewEvent[] = [];
  for (const seq of new Set(seqs)) {
    const event = eventAt(seq);
    if (!onSurface.has(seq) || event === undefined || unhideableReason(event) !== undefined) continue;
    events.push({
      type: 'assistant/message',
      time: now,
      data: {
        turn: Math.max(1, turn),
        step: 1,
        message: { id: `hidden-${seq}`, role: 'assistant', content: [], source: { kind: 'caller' } },
        hides: true,
      },
      surfaceOp: { op: 'replace', start: seq, end: seq },
      sourceEventSeqs: [seq],
    });
  }
  return events;
}

/** The seqs a log's hide events have hidden. */
export function hiddenSeqs(events: readonly StoredEvent[]): Set<number> {
  const hidden = new Set<number>();
  for (const event of events)
    if (isKnownEvent(event) && event.type === 'assistant/message' && event.data.hides === true)
      for (const seq of event.sourceEventSeqs ?? []) hidden.add(seq);
  return hidden;
}
