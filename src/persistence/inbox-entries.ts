/**
 * What the inbox holds (DESIGN §5.2): the key of each kind of caller input, and its body as JSON
 * text. The client writes an entry and sends its {@link InboxRef} through Temporal; the engine
 * reads it back with {@link readInboxEntry}, which checks it is the body that was sent, and
 * removes it once it is logged.
 */
import {
  SessionlogError,
  isEventOfType,
  parseOpKey,
  hideProblem,
  turnHintsProblem,
  turnToolsProblem,
  suppliedHistoryProblem,
  userContentProblem,
  type AskedAgent,
  type ContentBlock,
  type StoredEvent,
  type SuppliedItem,
  type ToolSchema,
  type TurnHints,
} from '../session/index.js';
import { digestOf } from './inbox.js';
import type { InboxRef, InboxStore } from './store.js';

/**
 * A user message: its text and, for a message that starts a turn with them, the caller's tools
 * and the model and/or instructions the caller asks for from that turn on, and the request
 * options of that turn alone (`hints`).
 */
export type MessageBody = {
  /** The message's text (with `content`: its text blocks joined). */
  text: string;
  /**
   * The message's blocks when it holds media (issue 50): text, image and file blocks, each medium
   * stored before the entry was written (a reference, never bytes). Absent: the message is `text`.
   */
  content?: ContentBlock[];
  tools?: ToolSchema[];
  agent?: AskedAgent;
  hints?: TurnHints;
};

/**
 * A caller's note: metadata, user messages and caller-supplied history (session/supplied.ts)
 * logged between turns (engine/ops/log-note.ts).
 */
export type NoteBody = {
  metadata?: { values: Record<string, string>; messageId?: string };
  messages?: Array<{ id: string; text: string }>;
  history?: SuppliedItem[];
  /** Surface nodes (seqs of user or text-only assistant messages) to hide (session/hide.ts). */
  hide?: number[];
};

/** An external tool's result, as the caller posted it. */
export type ToolResultBody = { output: string; by?: string };

/** What an approval answer says besides its decision: why, edited arguments (a JSON object's text), who. */
export type ApprovalBody = { reason?: string; arguments?: string; by?: string };

/** The inbox key of each kind of input, from the caller's own id. */
export const inboxKeys = {
  message: (id: string) => `message/${id}`,
  note: (id: string) => `note/${id}`,
  /** One per distinct result body: a second, different result for the same call is its own entry. */
  toolResult: (callId: string, body: string) => `tool-result/${callId}/${digestOf(body).slice(0, 16)}`,
  /** One per distinct answer body, as for tool results. */
  approval: (callId: string, body: string) => `approval/${callId}/${digestOf(body).slice(0, 16)}`,
};

/** The id of the message an inbox key names, or undefined for another kind. */
export function messageIdOfKey(key: string): string | undefined {
  return key.startsWith('message/') ? key.slice('message/'.length) : undefined;
}

/** What an inbox key names: a message or note by id, an answer (approval or tool result) by its call. */
function inputOfKey(key: string): { kind: 'message' | 'note' | 'answer'; id: string } | undefined {
  const message = messageIdOfKey(key);
  if (message !== undefined) return { kind: 'message', id: message };
  if (key.startsWith('note/')) return { kind: 'note', id: key.slice('note/'.length) };
  for (const prefix of ['approval/', 'tool-result/']) {
    // `<prefix><callId>/<digest>`: the call id is everything before the last `/`.
    const end = key.lastIndexOf('/');
    if (key.startsWith(prefix) && end > prefix.length) return { kind: 'answer', id: key.slice(prefix.length, end) };
  }
  return undefined;
}

/**
 * The keys of `entries` split by whether `events` (a session's log) is done with them: `logged`
 * entries are a message the log holds, a note whose batch it holds, or an answer (approval or
 * external result) to a call the log shows answered or closed, whichever answer counted; the rest
 * wait for an update or signal that may never come. A call id asked for again later counts by its
 * newest call, so an answer still awaited is never taken for done.
 */
export function inboxEntriesByLogged(
  entries: readonly { key: string }[],
  events: readonly StoredEvent[],
): { logged: string[]; waiting: string[] } {
  const messages = new Set<string>();
  const notes = new Set<string>();
  /** Each call id's newest call: whether the log holds its answer or its result yet. */
  const calls = new Map<string, 'open' | 'done'>();
  let lastOp: string | undefined;
  for (const event of events) {
    if (isEventOfType(event, 'user/message')) messages.add(event.data.id);
    else if (isEventOfType(event, 'tool/call')) calls.set(event.data.callId, 'open');
    else if (isEventOfType(event, 'tool/approval')) calls.set(event.data.callId, 'done');
    else if (isEventOfType(event, 'tool/result')) calls.set(event.data.message.source.callId, 'done');
    // A batch's events share its op: each op is read once.
    if (event.op !== undefined && event.op !== lastOp) {
      lastOp = event.op;
      const op = parseOpKey(event.op);
      if (op?.kind === 'note') notes.add(op.noteId);
    }
  }
  const logged: string[] = [];
  const waiting: string[] = [];
  for (const { key } of entries) {
    const input = inputOfKey(key);
    const done =
      input?.kind === 'message'
        ? messages.has(input.id)
        : input?.kind === 'note'
          ? notes.has(input.id)
          : input?.kind === 'answer' && calls.get(input.id) === 'done';
    (done ? logged : waiting).push(key);
  }
  return { logged, waiting };
}

/**
 * Reads the body `ref` names and parses it: INVALID_ARGUMENT when the inbox no longer holds it
 * (removed by an erase) or holds another body (its digest differs), or when `parse` refuses it.
 */
export async function readInboxEntry<T>(
  inbox: InboxStore,
  sessionId: string,
  ref: InboxRef,
  parse: (value: unknown) => T | string,
): Promise<T> {
  const body = await inbox.get(sessionId, ref.key);
  if (body === undefined) {
    throw new SessionlogError(
      'INVALID_ARGUMENT',
      `session ${sessionId}: inbox entry ${ref.key} is gone (erased, or removed before it was logged); send it again`,
    );
  }
  if (digestOf(body) !== ref.digest) {
    throw new SessionlogError(
      'INVALID_ARGUMENT',
      `session ${sessionId}: inbox entry ${ref.key} is not the input that was sent (its digest differs)`,
    );
  }
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch {
    value = undefined;
  }
  const parsed = parse(value);
  if (typeof parsed === 'string')
    throw new SessionlogError('INVALID_ARGUMENT', `session ${sessionId}: inbox entry ${ref.key}: ${parsed}`);
  return parsed;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** A {@link MessageBody}, or what is wrong with `value`. */
export function parseMessageBody(value: unknown): MessageBody | string {
  if (!isRecord(value) || typeof value.text !== 'string') return 'a message needs text';
  const contentProblem = value.content === undefined ? undefined : userContentProblem(value.content);
  if (contentProblem) return contentProblem;
  const hasMedia =
    Array.isArray(value.content) && (value.content as ContentBlock[]).some((block) => block.type !== 'text');
  if (value.text.trim().length === 0 && !hasMedia) return 'a message needs non-blank text or media';
  const agent = value.agent === undefined ? undefined : askedAgentOf(value.agent);
  if (typeof agent === 'string') return agent;
  const problem = value.tools === undefined ? undefined : turnToolsProblem(value.tools);
  if (problem) return problem;
  const hintsProblem = value.hints === undefined ? undefined : turnHintsProblem(value.hints);
  if (hintsProblem) return hintsProblem;
  return {
    text: value.text,
    ...(value.content !== undefined ? { content: value.content as ContentBlock[] } : {}),
    ...(value.tools !== undefined ? { tools: value.tools as ToolSchema[] } : {}),
    ...(agent ? { agent } : {}),
    ...(value.hints !== undefined ? { hints: value.hints as TurnHints } : {}),
  };
}

/** An {@link AskedAgent}, or what is wrong with `value`. */
function askedAgentOf(value: unknown): AskedAgent | string {
  if (!isRecord(value)) return "a message's agent is an object {model?, system?}";
  const { model, system } = value;
  if (model !== undefined && (typeof model !== 'string' || model.length === 0 || model.length > 200))
    return 'the model a message asks for is a name of 1-200 characters';
  if (system !== undefined && typeof system !== 'string') return 'the instructions a message asks for are text';
  return {
    ...(model !== undefined ? { model: model as string } : {}),
    ...(system !== undefined ? { system: system as string } : {}),
  };
}

/** A {@link NoteBody}, or what is wrong with `value` (the workflow bounded its size already). */
export function parseNoteBody(value: unknown): NoteBody | string {
  if (!isRecord(value)) return 'a note must be a JSON object';
  const { metadata, messages, history, hide } = value;
  if (hide !== undefined) {
    const problem = hideProblem(hide);
    if (problem) return problem;
  }
  if (history !== undefined) {
    const problem = suppliedHistoryProblem(history);
    if (problem) return problem;
  }
  if (metadata !== undefined) {
    if (!isRecord(metadata) || !isRecord(metadata.values)) return 'note metadata needs string values';
    if (!Object.values(metadata.values).every((v) => typeof v === 'string')) return 'note metadata values are strings';
    if (metadata.messageId !== undefined && typeof metadata.messageId !== 'string')
      return 'note metadata messageId is a string';
  }
  if (messages !== undefined) {
    if (!Array.isArray(messages)) return 'note messages must be a list';
    for (const m of messages as unknown[]) {
      if (!isRecord(m) || typeof m.id !== 'string' || typeof m.text !== 'string' || m.text.trim().length === 0)
        return 'each note message needs an id and non-blank text';
    }
  }
  return value as NoteBody;
}

/** A {@link ToolResultBody}, or what is wrong with `value`. */
export function parseToolResultBody(value: unknown): ToolResultBody | string {
  if (!isRecord(value) || typeof value.output !== 'string') return 'a tool result needs output text';
  if (value.by !== undefined && typeof value.by !== 'string') return 'a tool result "by" is text';
  return value as ToolResultBody;
}

/** An {@link ApprovalBody}, or what is wrong with `value`. */
export function parseApprovalBody(value: unknown): ApprovalBody | string {
  if (!isRecord(value)) return 'an approval must be a JSON object';
  for (const field of ['reason', 'arguments', 'by'] as const)
    if (value[field] !== undefined && typeof value[field] !== 'string') return `an approval's "${field}" is text`;
  if (value.arguments !== undefined && !isJsonObjectText(value.arguments as string))
    return 'edited arguments must be the text of a JSON object';
  return value as ApprovalBody;
}

/** True when `text` is the JSON text of an object (edited tool-call arguments). */
export function isJsonObjectText(text: string): boolean {
  try {
    return isRecord(JSON.parse(text));
  } catch {
    return false;
  }
}
