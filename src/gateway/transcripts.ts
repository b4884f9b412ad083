/**
 * Stateless transcripts (issue 24): clients that resend the whole conversation each call (Chat
 * Completions, the AI SDK, LangChain, the Agents SDK's tool loop) are reconciled with a
 * session's log by content. A transcript is compared, message by message (by digest), with the
 * messages the log holds; the longest common prefix is reused and only the new tail is logged.
 * A transcript that diverges (an edited message, a regenerated reply) forks the session at the
 * last turn boundary before the divergence; the log itself is never rewritten.
 *
 * Reconciling (`reconcile`) finds the session (an explicit key, else the transcript index by
 * the transcript's own prefix, else a new session), reuses the longest prefix the log holds,
 * and logs only the new tail: earlier messages as caller-supplied history (a note), the last
 * user message as the turn's message, or the results a waiting turn asked for. What is decided
 * here is derived from the transcript's digests, so a retried request takes the same path and
 * runs no second turn. Its refusals are in the OpenAI error shape, which both APIs that take a
 * transcript answer in (the OpenAI-compatible API and the AI SDK's).
 */
import { createHash } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import {
  SESSION_ID_PATTERN,
  hiddenSeqs,
  isKnownEvent,
  isSessionlogError,
  type StoredEvent,
  type SuppliedItem,
  type SuppliedToolCall,
  type ToolSchema,
  type TurnHints,
  type ContentBlock,
} from '../session/index.js';
import type { UserPart } from '../session/media.js';
import { mediaKeyOfBlock, namingPart, refuseForeignMedia, type ReadMessage } from './media-parts.js';
import { OpenAiError, invalidRequest } from './openai-errors.js';
import type { RouteContext } from './route-table.js';

/**
 * One message of a transcript as a client sends it (system messages are kept apart: they are
 * instructions). A user message with media (issue 50) carries its parts and its media's identities
 * (media-parts.ts), which its digest includes; a text-only message's digest is what it always was.
 */
export type TranscriptMessage =
  | { role: 'user'; text: string; content?: UserPart[]; mediaKeys?: string[]; params?: string[] }
  | { role: 'assistant'; text: string; toolCalls: SuppliedToolCall[] }
  | { role: 'tool'; callId: string; output: string };

/** A client's transcript: its instructions (system/developer messages, joined) and its messages in order. */
export type Transcript = { system: string | undefined; messages: TranscriptMessage[] };

/** Tool-call arguments as JSON in one spelling (clients parse and re-serialise them). */
function canonicalArguments(text: string): string {
  try {
    return JSON.stringify(JSON.parse(text) as unknown);
  } catch {
    return text;
  }
}

/** A user message read by media-parts.ts as a transcript message (text only: as it always was). */
export function userTranscriptMessage({ content, text, mediaKeys, params }: ReadMessage): TranscriptMessage {
  return content ? { role: 'user', text, content, mediaKeys, ...(params && { params }) } : { role: 'user', text };
}

/** A digest of one message's content: what makes two messages the same message. */
export function messageDigest(message: TranscriptMessage): string {
  const hash = createHash('sha256');
  switch (message.role) {
    case 'user':
      hash.update(`user\0${message.text}`);
      for (const key of message.mediaKeys ?? []) hash.update(`\0media\0${key}`);
      break;
    case 'assistant':
      hash.update(`assistant\0${message.text.trim()}`);
      for (const call of message.toolCalls)
        hash.update(`\0call\0${call.callId}\0${call.name}\0${canonicalArguments(call.arguments)}`);
      break;
    case 'tool':
      hash.update(`tool\0${message.callId}\0${message.output}`);
      break;
  }
  return hash.digest('hex');
}

/**
 * The digest of each prefix of `messages`: `[0]` of none, `[i]` of the first `i` messages. A
 * prefix digest names a transcript point in the transcript index (store `transcripts`).
 */
export function prefixDigests(messages: readonly TranscriptMessage[]): string[] {
  const digests = [createHash('sha256').update('sessionlog-transcript-v1').digest('hex')];
  for (const message of messages)
    digests.push(createHash('sha256').update(digests.at(-1)!).update(messageDigest(message)).digest('hex'));
  return digests;
}

/** A message the log holds, with where it is. */
export type LoggedMessage = {
  message: TranscriptMessage;
  seq: number;
  /** The id it is logged under (a user message's id answers "which turn did this start"). */
  id: string;
  /** The turn it belongs to (user messages: the turn they started; outside a turn: undefined). */
  turn: number | undefined;
};

/** What a session's log says for reconciliation: its messages and where a fork may cut it. */
export type LoggedTranscript = {
  messages: LoggedMessage[];
  /**
   * Fork points: `[seq, kept]` pairs, in order, where the log may be cut (not inside a turn)
   * keeping exactly the first `kept` messages.
   */
  cuts: Array<{ seq: number; kept: number }>;
  /** The open turn, if any, and the calls of its last step still waiting for results. */
  openTurn: number | undefined;
};

const textOfBlocks = (content: ReadonlyArray<{ type: string; text?: string }>): string =>
  content
    .filter((block) => block.type === 'text')
    .map((block) => block.text ?? '')
    .join('');

/** A logged user message as a transcript message: its text, and its media's identities when it has media. */
function userMessageOf(content: readonly ContentBlock[]): TranscriptMessage {
  const mediaKeys = content.flatMap((block) => mediaKeyOfBlock(block) ?? []);
  return { role: 'user', text: textOfBlocks(content), ...(mediaKeys.length > 0 ? { mediaKeys } : {}) };
}

/**
 * The transcript a log holds as its clients saw it: the user's messages; for each model turn,
 * one assistant message per stretch between the caller's tool rounds (its texts joined, as
 * `output_text` joins them, with the calls the caller was asked to run), then the caller's
 * results; caller-supplied history as it was supplied. Calls the worker ran itself and their
 * results never reached the client, so they are not part of it; compaction and pruning do not
 * change it (they shadow the surface, not the log); messages the caller hid (session/hide.ts)
 * are gone from it.
 */
export function loggedTranscript(events: readonly StoredEvent[]): LoggedTranscript {
  // Messages a caller hid (a deleted item) are not part of it either.
  const hidden = hiddenSeqs(events);
  const messages: LoggedMessage[] = [];
  const cuts: LoggedTranscript['cuts'] = [];
  let openTurn: number | undefined;
  let callerTurn = false;
  // The stretch of a model turn not yet shown: its texts, calls and where its last message is.
  let stretch:
    { texts: string[]; calls: SuppliedToolCall[]; external: Set<string>; seq: number; id: string } | undefined;
  const flush = (turn: number | undefined) => {
    if (!stretch) return;
    const calls = stretch.calls.filter((call) => stretch!.external.has(call.callId));
    const text = stretch.texts.join('');
    if (text !== '' || calls.length > 0)
      messages.push({
        message: { role: 'assistant', text, toolCalls: calls },
        seq: stretch.seq,
        id: stretch.id,
        turn,
      });
    stretch = undefined;
  };
  for (const event of events) {
    if (!isKnownEvent(event)) continue;
    switch (event.type) {
      case 'turn/start':
        // Just before a turn is a place to cut too (before the first one: keeping no message).
        if (event.seq > 0 && cuts.at(-1)?.seq !== event.seq - 1)
          cuts.push({ seq: event.seq - 1, kept: messages.length });
        openTurn = event.data.turn;
        callerTurn = event.data.origin === 'caller';
        break;
      case 'turn/end':
        flush(openTurn);
        openTurn = undefined;
        cuts.push({ seq: event.seq, kept: messages.length });
        break;
      case 'user/message':
        if (event.surfaceOp !== 'append' || event.data.source.kind !== 'user' || hidden.has(event.seq)) break;
        messages.push({
          message: userMessageOf(event.data.content),
          seq: event.seq,
          id: event.data.id,
          turn: openTurn,
        });
        if (openTurn === undefined) cuts.push({ seq: event.seq, kept: messages.length });
        break;
      case 'assistant/message': {
        if (event.surfaceOp !== 'append' || hidden.has(event.seq)) break;
        const content = event.data.message.content;
        const calls = content.flatMap((block) =>
          block.type === 'tool-call' ? [{ callId: block.id, name: block.name, arguments: block.arguments }] : [],
        );
        if (callerTurn) {
          messages.push({
            message: { role: 'assistant', text: textOfBlocks(content), toolCalls: calls },
            seq: event.seq,
            id: event.data.message.id,
            turn: event.data.turn,
          });
          break;
        }
        stretch ??= { texts: [], calls: [], external: new Set(), seq: event.seq, id: event.data.message.id };
        stretch.texts.push(textOfBlocks(content));
        stretch.calls.push(...calls);
        stretch.seq = event.seq;
        stretch.id = event.data.message.id;
        break;
      }
      case 'tool/approval-request':
        if (event.data.kind === 'external') stretch?.external.add(event.data.callId);
        break;
      case 'tool/result': {
        if (event.surfaceOp !== 'append') break;
        // A result the worker produced stays inside the stretch; the caller's close it.
        if (!callerTurn && event.data.origin !== 'external') break;
        flush(event.data.turn);
        const block = event.data.message.content[0];
        messages.push({
          message: { role: 'tool', callId: block.toolCallId, output: textOfBlocks(block.content) },
          seq: event.seq,
          id: event.data.message.id,
          turn: event.data.turn,
        });
        break;
      }
      default:
        break;
    }
  }
  // A turn waiting for the caller's results shows the calls it asked for.
  flush(openTurn);
  return { messages, cuts, openTurn };
}

/** How many leading messages two transcripts share. */
export function commonPrefix(a: readonly TranscriptMessage[], b: readonly TranscriptMessage[]): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (messageDigest(a[i]!) !== messageDigest(b[i]!)) return i;
  return n;
}

/** The last fork point that keeps at most `kept` messages (undefined: the log has none). */
export function cutAtOrBefore(logged: LoggedTranscript, kept: number): { seq: number; kept: number } | undefined {
  let best: { seq: number; kept: number } | undefined;
  for (const cut of logged.cuts) if (cut.kept <= kept) best = cut;
  return best;
}

const EARLIER_MEDIA =
  'a user message with images or files that this conversation has not logged can only be its last message; send the messages before it first, or the media as a new message';

/**
 * The messages `tail` holds as caller-supplied history items, with ids made from `idPrefix`.
 * Caller-supplied history is text (session/supplied.ts): a user message with media is refused
 * (`at` names the request's field); media come in a request's last message.
 */
export function suppliedItems(tail: readonly TranscriptMessage[], idPrefix: string, at = 'messages'): SuppliedItem[] {
  return tail.map((message, i) => {
    const id = `${idPrefix}.${i}`;
    switch (message.role) {
      case 'user':
        if (message.content !== undefined) throw invalidRequest(at, EARLIER_MEDIA, 'unsupported_value');
        return { role: 'user', id, text: message.text };
      case 'assistant':
        return {
          role: 'assistant',
          id,
          ...(message.text !== '' ? { text: message.text } : {}),
          ...(message.toolCalls.length > 0 ? { toolCalls: message.toolCalls } : {}),
        };
      case 'tool':
        return { role: 'tool', id, callId: message.callId, output: message.output };
    }
  });
}

// ---------------------------------------------------------------------------------------------
// Reconciling a transcript with a session

/** What starts the answer a transcript asks for: its last user message, or the tool results it ends with. */
export type AnswerAnchor = { kind: 'message'; messageId: string } | { kind: 'tool-results'; callId: string };

/** How long an identical transcript counts as a retry of the request that ran it (afterwards: a regenerate). */
export const RETRY_WINDOW_MS = 10 * 60_000;

/** How many prefixes of a transcript are looked up in the index (longest first). */
const MAX_INDEX_LOOKUPS = 64;

/** What the caller asked for besides its transcript. */
export type ReconcileRequest = {
  transcript: Transcript;
  /** The session the caller named (`x-session-id`, `metadata.session_id`) or a key to make one from. */
  key: { sessionId: string } | { key: string } | undefined;
  /** The caller's identity (a digest of its Authorization header): keys and index entries are its own. */
  scope: string;
  model: string | undefined;
  tools: ToolSchema[] | undefined;
  /** The request's options for the turn it starts (passed to the provider, or named as ignored). */
  hints?: TurnHints | undefined;
  /** The request's metadata: logged with the turn it starts (`session/metadata` naming its message). */
  metadata?: Record<string, string> | undefined;
  /** Force a new reply for a transcript already answered (a regenerate), even within the retry window. */
  regenerate: boolean;
  /**
   * Whether the client says this request is a retry (the openai SDK's `x-stainless-retry-count`):
   * true or false when it says, undefined when it does not (the retry window decides).
   */
  retry?: boolean | undefined;
};

/** Where the request's answer comes from. */
export type Reconciled = {
  sessionId: string;
  /** The session this request forked (its transcript diverged from that session's log). */
  forkedFrom: string | undefined;
  anchor: AnswerAnchor;
  /** The log before this request changed anything (the answer follows it from its end). */
  events: StoredEvent[];
  /** How many messages of the transcript precede the answer. */
  answerAt: number;
  /** The digest of each prefix of the transcript (index 0: empty). */
  digests: string[];
};

/**
 * What the request says of itself: a retry or not (the openai SDK counts its attempts in
 * `x-stainless-retry-count`), or nothing.
 */
export function retryOf(request: FastifyRequest): boolean | undefined {
  const count = request.headers['x-stainless-retry-count'];
  return typeof count === 'string' && /^\d+$/.test(count) ? Number(count) > 0 : undefined;
}

/** The caller's scope: a digest of the credentials it sends (loopback clients without a token still send an api key). */
export function callerScope(request: FastifyRequest): string {
  const credentials = request.headers.authorization ?? '';
  return createHash('sha256').update(`scope\0${credentials}`).digest('hex').slice(0, 32);
}

/** The session an explicit key names: a session id as it is; any other key, per caller scope. */
export function sessionIdForKey(key: string, scope: string): string {
  return `chat_${createHash('sha256').update(`${scope}\0${key}`).digest('hex').slice(0, 32)}`;
}

/** An explicit session id a caller gave, checked. */
export function explicitSessionId(value: string, param: string): string {
  if (!SESSION_ID_PATTERN.test(value))
    throw invalidRequest(
      param,
      `${JSON.stringify(value)} is not a session id (1-128 of A-Z a-z 0-9 _ . : -)`,
      'invalid_value',
    );
  return value;
}

const shortDigest = (digest: string): string => digest.slice(0, 32);

export async function reconcile(ctx: RouteContext, request: ReconcileRequest): Promise<Reconciled> {
  const { transcript } = request;
  const messages = transcript.messages;
  const last = messages.at(-1);
  if (!last || last.role === 'assistant')
    throw invalidRequest(
      'messages',
      'the transcript must end with a user message or the results of the tool calls of the assistant message before them',
      'invalid_value',
    );
  const digests = prefixDigests(messages);
  const target = await findSession(ctx, request, digests);
  let at: { sessionId: string; forkedFrom: string | undefined } = {
    sessionId: target.sessionId,
    forkedFrom: undefined,
  };
  let reanswer = false;
  // Where a diverging transcript leaves the session it was found in: the parent and the cut.
  let origin: { sessionId: string; seq: number | undefined } | undefined;
  // At most three passes: the session found; its branch for this transcript; a fresh branch
  // when that one has moved on (or this request asks for a new reply it already holds).
  for (let pass = 0; ; pass++) {
    const events = pass > 0 || target.exists ? await ctx.client.events(at.sessionId, 0) : [];
    const logged = loggedTranscript(events);
    let shared = commonPrefix(
      logged.messages.map((m) => m.message),
      messages,
    );
    if (shared === messages.length && last.role === 'user') {
      // The log holds the transcript's last message already: a retry (answered, or still running), or a regenerate.
      const asked = logged.messages[shared - 1]!;
      const running = asked.turn !== undefined && logged.openTurn === asked.turn;
      const answered = shared < logged.messages.length;
      const recent = Date.now() - (events[asked.seq]?.time ?? 0) < RETRY_WINDOW_MS;
      const retried = request.retry ?? recent;
      if (asked.turn !== undefined && (running || (answered && retried && !request.regenerate)))
        return {
          ...at,
          anchor: { kind: 'message', messageId: asked.id },
          events: events.slice(0, turnStartOf(events, asked.seq)),
          answerAt: shared,
          digests,
        };
      // Regenerated, retried after the window, or its turn ended without a reply: a new branch answers it again.
      shared -= 1;
      reanswer = true;
    }
    if (shared === messages.length && last.role === 'tool') {
      // The log holds these results already (a retried request): their turn carried on from them,
      // and its answer is read from the log. (A new reply to the same results would re-run a turn
      // from its middle, which a fork at a turn boundary cannot give.)
      let first = messages.length - 1;
      while (first > 0 && messages[first - 1]!.role === 'tool') first -= 1;
      const result = logged.messages[first]!;
      return {
        ...at,
        anchor: { kind: 'tool-results', callId: (messages[first] as { callId: string }).callId },
        events: events.slice(0, result.seq),
        answerAt: shared,
        digests,
      };
    }
    if (shared >= logged.messages.length) return applyTail(ctx, request, { ...at, events, logged, shared, digests });
    if (pass === 2)
      throw new OpenAiError(
        409,
        `the branch ${at.sessionId} made for this transcript has moved on; retry the request`,
        {
          code: 'conversation_locked',
        },
      );
    // Diverged: a branch from the last turn boundary before the divergence. The same transcript
    // forks into the same branch (a retried request), unless it asks for a new reply or that
    // branch has moved on since.
    origin ??= { sessionId: at.sessionId, seq: cutAtOrBefore(logged, shared)?.seq };
    const digest = shortDigest(digests[messages.length]!);
    const fresh = reanswer || pass === 1 ? `_${Date.now().toString(36)}` : '';
    const branchId = `${sessionIdForKey(digest, request.scope).slice(0, 37)}${fresh}_b`;
    at = { sessionId: await forkOnce(ctx, origin.sessionId, branchId, origin.seq), forkedFrom: origin.sessionId };
  }
}

/** The seq of the `turn/start` before `seq` (the user message that starts a turn is logged inside it). */
function turnStartOf(events: readonly StoredEvent[], seq: number): number {
  for (let i = seq; i >= 0; i--) if (events[i]!.type === 'turn/start') return i;
  return seq;
}

async function findSession(
  ctx: RouteContext,
  request: ReconcileRequest,
  digests: readonly string[],
): Promise<{ sessionId: string; exists: boolean }> {
  const key = request.key;
  const named =
    key === undefined ? undefined : 'sessionId' in key ? key.sessionId : sessionIdForKey(key.key, request.scope);
  // The transcript index: the longest prefix of this transcript an answer or an accepted request
  // of this caller left (a named session: only it or its branches), a bounded number of tries.
  const first = request.transcript.messages.length;
  for (let i = first; i > 0 && i > first - MAX_INDEX_LOOKUPS; i--) {
    const entry = await ctx.client.findTranscript(request.scope, digests[i]!);
    if (entry && (named === undefined || (await descendsFrom(ctx, entry.sessionId, named))))
      return { sessionId: entry.sessionId, exists: true };
  }
  // No key: the transcript names its session, so a retried first request finds the session its first try made.
  const sessionId = named ?? sessionIdForKey(`transcript:${digests[first]!}`, request.scope);
  return { sessionId, exists: await ctx.client.exists(sessionId) };
}

/** Whether `sessionId` is `ancestor` or was forked from it (through at most a few generations). */
async function descendsFrom(ctx: RouteContext, sessionId: string, ancestor: string): Promise<boolean> {
  let current: string | undefined = sessionId;
  for (let depth = 0; current !== undefined && depth < 32; depth++) {
    if (current === ancestor) return true;
    if (!(await ctx.client.exists(current))) return false;
    current = (await ctx.client.header(current)).parentSession;
  }
  return false;
}

/** Forks `parentId` at `at` into `childId` (the same transcript forks into the same branch: a retried request reuses it). */
async function forkOnce(ctx: RouteContext, parentId: string, childId: string, at: number | undefined): Promise<string> {
  if (await ctx.client.exists(childId)) return childId;
  if (at === undefined) {
    await ctx.client.create({ sessionId: childId });
    return childId;
  }
  try {
    await ctx.client.fork(parentId, { childId, at });
  } catch (error) {
    if (!isSessionlogError(error, 'SESSION_ALREADY_EXISTS')) throw error;
  }
  return childId;
}

async function applyTail(
  ctx: RouteContext,
  request: ReconcileRequest,
  at: {
    sessionId: string;
    forkedFrom: string | undefined;
    events: StoredEvent[];
    logged: LoggedTranscript;
    shared: number;
    digests: string[];
  },
): Promise<Reconciled> {
  const { sessionId, events, logged, shared, digests } = at;
  const messages = request.transcript.messages;
  const tail = messages.slice(shared);
  const last = messages.at(-1)!;
  const answerAt = messages.length;
  const base = { sessionId, forkedFrom: at.forkedFrom, events, answerAt, digests };
  const stamp = shortDigest(digests[answerAt]!);
  const earlier = tail.slice(0, -1);
  // Refused (media in an earlier message) before the session is created.
  const history = last.role === 'user' && earlier.length > 0 ? suppliedItems(earlier, `h_${stamp}`) : undefined;
  if (last.role === 'user') refuseForeignMedia(last, sessionId);
  if (!(await ctx.client.exists(sessionId))) await ctx.client.create({ sessionId });

  // Results for the calls a waiting turn asked the caller to run: the turn carries on.
  if (last.role === 'tool') {
    const results = tail.filter((m) => m.role === 'tool');
    if (logged.openTurn === undefined || results.length !== tail.length)
      throw invalidRequest(
        'messages',
        'these tool results answer no call waiting in this conversation: send the transcript up to and including the assistant message that made the calls',
        'invalid_value',
      );
    for (const result of results) await ctx.client.submitToolResult(sessionId, result.callId, result.output);
    return { ...base, anchor: { kind: 'tool-results', callId: results[0]!.callId } };
  }
  if (logged.openTurn !== undefined)
    throw new OpenAiError(
      409,
      `conversation ${sessionId} is answering another request (turn ${logged.openTurn} is running or waits for tool results); retry once it has finished`,
      { code: 'conversation_locked' },
    );
  const messageId = `m_${stamp}`;
  const metadata = request.metadata && Object.keys(request.metadata).length > 0 ? request.metadata : undefined;
  if (history || metadata)
    await ctx.client.note(sessionId, {
      id: `h_${stamp}`,
      ...(history ? { history } : {}),
      ...(metadata ? { metadata: { values: metadata, messageId } } : {}),
    });
  const agent = {
    ...(request.model !== undefined ? { model: request.model } : {}),
    ...(request.transcript.system !== undefined ? { system: request.transcript.system } : {}),
  };
  try {
    await ctx.client.post(sessionId, last.text, {
      id: messageId,
      ...(last.role === 'user' && last.content ? { content: last.content } : {}),
      ...(request.tools ? { tools: request.tools } : {}),
      ...(Object.keys(agent).length > 0 ? { agent } : {}),
      ...(request.hints ? { hints: request.hints } : {}),
    });
  } catch (error) {
    throw last.role === 'user' ? namingPart(error, last) : error;
  }
  // A client that leaves before the answer (an aborted stream) still finds this session by its transcript.
  await recordTranscriptDigest(ctx, request.scope, sessionId, digests[answerAt]!, events.length);
  return { ...base, anchor: { kind: 'message', messageId } };
}

/**
 * Records in the transcript index, for callers of `scope`, that `sessionId`'s transcript as its
 * log now holds it continues in that session: the next request that carries it (plus a new
 * message) finds the session by its own prefix. Best effort: a lost entry costs a lookup by key
 * or a new session, never a wrong answer (the log is compared by content either way).
 */
export async function recordTranscriptDigest(
  ctx: RouteContext,
  scope: string,
  sessionId: string,
  digest: string,
  seq: number,
): Promise<void> {
  await ctx.client.recordTranscript(scope, digest, { sessionId, seq }).catch(() => undefined);
}

/** {@link recordTranscriptDigest} of a transcript that adds `message` to what the log holds. */
export async function recordTranscriptWith(
  ctx: RouteContext,
  scope: string,
  sessionId: string,
  events: readonly StoredEvent[],
  message: TranscriptMessage,
): Promise<void> {
  const digests = prefixDigests([...loggedTranscript(events).messages.map((m) => m.message), message]);
  await recordTranscriptDigest(ctx, scope, sessionId, digests.at(-1)!, events.length);
}

export async function recordTranscriptEnd(ctx: RouteContext, scope: string, sessionId: string): Promise<void> {
  try {
    const events = await ctx.client.events(sessionId, 0);
    const digests = prefixDigests(loggedTranscript(events).messages.map((m) => m.message));
    if (digests.length > 1)
      await ctx.client.recordTranscript(scope, digests.at(-1)!, { sessionId, seq: events.length - 1 });
  } catch {
    // The index is a shortcut; the answer stands without it.
  }
}
