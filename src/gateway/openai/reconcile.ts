/**
 * Reconciling a stateless client's transcript with a session (issue 24, transcript.ts): finds
 * the session (an explicit key, else the transcript index by the transcript's own prefix, else
 * a new session), reuses the longest prefix the log holds, and logs only the new tail: earlier
 * messages as caller-supplied history (a note), the last user message as the turn's message,
 * or the results a waiting turn asked for. A transcript that diverges from the log forks it at
 * the last turn boundary before the divergence. What is decided here is derived from the
 * transcript's digests, so a retried request takes the same path and runs no second turn.
 */
import { createHash } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import {
  SESSION_ID_PATTERN,
  isSessionlogError,
  type StoredEvent,
  type ToolSchema,
  type TurnHints,
} from '../../session/index.js';
import type { RouteContext } from '../route-table.js';
import { OpenAiError, invalidRequest } from './errors.js';
import type { ResponseAnchor } from './ids.js';
import {
  commonPrefix,
  cutAtOrBefore,
  loggedTranscript,
  prefixDigests,
  suppliedItems,
  type LoggedTranscript,
  type Transcript,
  type TranscriptMessage,
} from './transcript.js';

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
  anchor: ResponseAnchor;
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
  const earlier = tail.slice(0, -1);
  const stamp = shortDigest(digests[answerAt]!);
  const messageId = `m_${stamp}`;
  const metadata = request.metadata && Object.keys(request.metadata).length > 0 ? request.metadata : undefined;
  if (earlier.length > 0 || metadata)
    await ctx.client.note(sessionId, {
      id: `h_${stamp}`,
      ...(earlier.length > 0 ? { history: suppliedItems(earlier, `h_${stamp}`) } : {}),
      ...(metadata ? { metadata: { values: metadata, messageId } } : {}),
    });
  const agent = {
    ...(request.model !== undefined ? { model: request.model } : {}),
    ...(request.transcript.system !== undefined ? { system: request.transcript.system } : {}),
  };
  await ctx.client.post(sessionId, last.text, {
    id: messageId,
    ...(request.tools ? { tools: request.tools } : {}),
    ...(Object.keys(agent).length > 0 ? { agent } : {}),
    ...(request.hints ? { hints: request.hints } : {}),
  });
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
