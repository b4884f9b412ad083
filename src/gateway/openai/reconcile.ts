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
import { SESSION_ID_PATTERN, isSessionlogError, type StoredEvent, type ToolSchema } from '../../session/index.js';
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
} from './transcript.js';

/** How long an identical transcript counts as a retry of the request that ran it (afterwards: a regenerate). */
export const RETRY_WINDOW_MS = 10 * 60_000;

/** What the caller asked for besides its transcript. */
export type ReconcileRequest = {
  transcript: Transcript;
  /** The session the caller named (`x-session-id`, `metadata.session_id`) or a key to make one from. */
  key: { sessionId: string } | { key: string } | undefined;
  /** The caller's identity (a digest of its Authorization header): keys and index entries are its own. */
  scope: string;
  model: string | undefined;
  tools: ToolSchema[] | undefined;
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
  // Twice at most: in the session found, then (when the transcript diverged from it) in its branch.
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
    if (shared >= logged.messages.length) return applyTail(ctx, request, { ...at, events, logged, shared, digests });
    if (pass > 0)
      throw new OpenAiError(
        409,
        `the branch ${at.sessionId} made for this transcript has moved on; retry the request`,
        {
          code: 'conversation_locked',
        },
      );
    // Diverged: a new branch from the last turn boundary before the divergence. The same
    // transcript forks into the same branch (a retried request), unless it asks for a new reply.
    const cut = cutAtOrBefore(logged, shared);
    const fresh = reanswer ? `_${Date.now().toString(36)}` : '';
    const branchId = `${sessionIdForKey(shortDigest(digests[messages.length]!), request.scope).slice(0, 37)}${fresh}_b`;
    at = { sessionId: await forkOnce(ctx, at.sessionId, branchId, cut?.seq), forkedFrom: at.sessionId };
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
  // The transcript index: the longest prefix of this transcript some answer of this caller ended.
  for (let i = request.transcript.messages.length - 1; i > 0; i--) {
    if (request.transcript.messages[i - 1]!.role !== 'assistant') continue;
    const entry = await ctx.client.findTranscript(request.scope, digests[i]!);
    if (entry) return { sessionId: entry.sessionId, exists: true };
  }
  // No key: the transcript names its session, so a retried first request finds the session its first try made.
  const key = request.key ?? { key: `transcript:${digests[request.transcript.messages.length]!}` };
  const sessionId = 'sessionId' in key ? key.sessionId : sessionIdForKey(key.key, request.scope);
  return { sessionId, exists: await ctx.client.exists(sessionId) };
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
  if (earlier.length > 0)
    await ctx.client.note(sessionId, { id: `h_${stamp}`, history: suppliedItems(earlier, `h_${stamp}`) });
  const messageId = `m_${stamp}`;
  const agent = {
    ...(request.model !== undefined ? { model: request.model } : {}),
    ...(request.transcript.system !== undefined ? { system: request.transcript.system } : {}),
  };
  await ctx.client.post(sessionId, last.text, {
    id: messageId,
    ...(request.tools ? { tools: request.tools } : {}),
    ...(Object.keys(agent).length > 0 ? { agent } : {}),
  });
  return { ...base, anchor: { kind: 'message', messageId } };
}

/**
 * Records in the transcript index, for callers of `scope`, that `sessionId`'s transcript as its
 * log now holds it continues in that session: the next request that carries it (plus a new
 * message) finds the session by its own prefix. Best effort: a lost entry costs a lookup by key
 * or a new session, never a wrong answer (the log is compared by content either way).
 */
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
