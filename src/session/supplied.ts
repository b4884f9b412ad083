/**
 * Caller-supplied history (issue 24): messages a caller's transcript holds that this session
 * never logged, such as an application migrating a conversation or a stateless client whose
 * transcript carries replies of another system. They are logged as they were, in turns marked
 * `origin: 'caller'` whose assistant messages have `source: {kind: 'caller'}`, so the surface
 * (what the model sees next) includes them and nothing confuses them with the model's replies.
 */
import type { NewEvent } from './events.js';
import type { ContentBlock } from './messages.js';

export type SuppliedToolCall = { callId: string; name: string; arguments: string };

/** One message of a supplied transcript, in order. */
export type SuppliedItem =
  | { role: 'user'; id: string; text: string }
  | { role: 'assistant'; id: string; text?: string; reasoning?: string; toolCalls?: SuppliedToolCall[] }
  | { role: 'tool'; id: string; callId: string; output: string };

/** The most items one supplied history holds (a long conversation being migrated). */
export const MAX_SUPPLIED_ITEMS = 10_000;

const ID_PATTERN = /^[A-Za-z0-9._:-]{1,200}$/;

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function itemProblem(item: unknown, at: string): string | undefined {
  if (!isRecord(item)) return `${at} is not an object`;
  if (typeof item.id !== 'string' || !ID_PATTERN.test(item.id))
    return `${at}.id must be 1-200 characters of A-Z a-z 0-9 . _ : -`;
  switch (item.role) {
    case 'user':
      return typeof item.text === 'string' && item.text.trim().length > 0
        ? undefined
        : `${at} is a user message without text`;
    case 'assistant': {
      if (item.text !== undefined && typeof item.text !== 'string') return `${at}.text is not text`;
      if (item.reasoning !== undefined && typeof item.reasoning !== 'string') return `${at}.reasoning is not text`;
      const calls = item.toolCalls;
      if (calls !== undefined) {
        if (!Array.isArray(calls) || calls.length === 0) return `${at}.toolCalls is a non-empty list when given`;
        for (const [j, call] of calls.entries()) {
          if (
            !isRecord(call) ||
            typeof call.callId !== 'string' ||
            !ID_PATTERN.test(call.callId) ||
            typeof call.name !== 'string' ||
            call.name.length === 0 ||
            call.name.length > 200 ||
            typeof call.arguments !== 'string'
          )
            return `${at}.toolCalls[${j}] needs a callId, a name and arguments text`;
        }
      }
      if ((item.text ?? '') === '' && calls === undefined)
        return `${at} is an assistant message without text or tool calls`;
      return undefined;
    }
    case 'tool':
      if (typeof item.callId !== 'string' || !ID_PATTERN.test(item.callId)) return `${at}.callId is not a call id`;
      return typeof item.output === 'string' ? undefined : `${at}.output is not text`;
    default:
      return `${at}.role must be user, assistant or tool`;
  }
}

/**
 * What is wrong with `items` as a supplied history, or undefined: each item's shape, and the
 * order a model API needs (a tool message answers a call of the assistant message before it,
 * once; every call is answered before the next user or assistant message and at the end).
 */
export function suppliedHistoryProblem(items: unknown): string | undefined {
  if (!Array.isArray(items) || items.length === 0) return 'a supplied history is a non-empty list';
  if (items.length > MAX_SUPPLIED_ITEMS) return `a supplied history holds at most ${MAX_SUPPLIED_ITEMS} messages`;
  let waiting = new Set<string>();
  const ids = new Set<string>();
  for (const [i, item] of (items as unknown[]).entries()) {
    const at = `history[${i}]`;
    const problem = itemProblem(item, at);
    if (problem) return problem;
    const typed = item as SuppliedItem;
    if (ids.has(typed.id)) return `${at}.id repeats an earlier message's id`;
    ids.add(typed.id);
    if (typed.role === 'tool') {
      if (!waiting.delete(typed.callId))
        return `${at} answers call ${JSON.stringify(typed.callId)}, which no assistant message before it left waiting`;
      continue;
    }
    if (waiting.size > 0) return `${at} comes before the results of calls ${[...waiting].join(', ')}`;
    waiting = new Set(typed.role === 'assistant' ? (typed.toolCalls ?? []).map((c) => c.callId) : []);
  }
  if (waiting.size > 0) return `the history ends before the results of calls ${[...waiting].join(', ')}`;
  return undefined;
}

/**
 * The events that log `items` (already checked with {@link suppliedHistoryProblem}) after turn
 * `lastTurn`: user messages as they are, each run of assistant and tool messages as one caller
 * turn (a step per assistant message). Returns the events and the last turn number they use.
 */
export function suppliedHistoryEvents(
  items: readonly SuppliedItem[],
  lastTurn: number,
  now: number,
): { events: NewEvent[]; lastTurn: number } {
  const events: NewEvent[] = [];
  let turn: number | undefined;
  let step = 0;
  const closeTurn = () => {
    if (turn === undefined) return;
    events.push({ type: 'step/end', time: now, data: { turn, step } });
    events.push({ type: 'turn/end', time: now, data: { turn, reason: { kind: 'completed' } } });
    turn = undefined;
  };
  for (const item of items) {
    if (item.role === 'user') {
      closeTurn();
      events.push({
        type: 'user/message',
        time: now,
        data: { id: item.id, role: 'user', content: [{ type: 'text', text: item.text }], source: { kind: 'user' } },
        surfaceOp: 'append',
      });
      continue;
    }
    if (item.role === 'tool') {
      events.push({
        type: 'tool/result',
        time: now,
        data: {
          turn: turn!,
          step,
          message: {
            id: item.id,
            role: 'user',
            content: [{ type: 'tool-result', toolCallId: item.callId, content: [{ type: 'text', text: item.output }] }],
            source: { kind: 'tool', callId: item.callId },
          },
          origin: 'caller',
        },
        surfaceOp: 'append',
      });
      continue;
    }
    if (turn === undefined) {
      turn = ++lastTurn;
      step = 0;
      events.push({ type: 'turn/start', time: now, data: { turn, origin: 'caller' } });
    } else {
      events.push({ type: 'step/end', time: now, data: { turn, step } });
    }
    step += 1;
    events.push({ type: 'step/start', time: now, data: { turn, step } });
    const content: ContentBlock[] = [
      ...(item.reasoning ? [{ type: 'reasoning' as const, text: item.reasoning }] : []),
      ...(item.text ? [{ type: 'text' as const, text: item.text }] : []),
      ...(item.toolCalls ?? []).map((call) => ({
        type: 'tool-call' as const,
        id: call.callId,
        name: call.name,
        arguments: call.arguments,
      })),
    ];
    events.push({
      type: 'assistant/message',
      time: now,
      data: {
        turn,
        step,
        message: { id: item.id, role: 'assistant', content, source: { kind: 'caller' } },
        finishReason: item.toolCalls ? 'tool_calls' : 'stop',
      },
      surfaceOp: 'append',
    });
  }
  closeTurn();
  return { events, lastTurn };
}
