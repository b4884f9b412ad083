/**
 * The AI SDK chat (`/ai-sdk/chat`, issue 25): one turn of a chat over the UI messages
 * `useChat` resends, and the resumption of its running turn.
 *
 * - A request's messages are a stateless transcript, reconciled with the session's log as the
 *   OpenAI API's are (../transcripts.ts: only the new tail is logged, a retry runs no second
 *   turn, a regenerated or edited message is answered in a branch). A last assistant message
 *   that answers tool approvals the stream asked for carries its turn on instead (sent again,
 *   it streams what followed the logged answers). The answer is the turn as a UI message
 *   stream (`x-vercel-ai-ui-message-stream: v1`), folded from the log (ui-fold.ts), with
 *   `x-session-id` naming the session (or branch) that answered.
 * - A resumed stream is the running turn of the chat (or of its newest branch): what the client
 *   missed comes at once, coalesced (one delta per text part), then the live tail; 204 when no
 *   turn runs. The log is the stream's store: no Redis.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { TurnFold, isEventOfType, type StoredEvent, type TurnHints } from '../../session/index.js';
import { OpenAiError, toOpenAiErrorResponse } from '../openai-errors.js';
import { STREAMED, type RouteContext, type RouteResult } from '../route-table.js';
import { hijackEventStream } from '../sse.js';
import { callerScope, reconcile, recordTranscriptEnd, retryOf } from '../transcripts.js';
import { followResponse } from '../turn-stream/follow.js';
import type { ChatRequestBody } from './schemas.js';
import { UiMessageFold, coalesceChunks, type UiAnchor, type UiChunk } from './ui-fold.js';
import { readUiMessages, type ApprovalAnswerPart } from './ui-messages.js';

const UI_STREAM_HEADERS = { 'x-vercel-ai-ui-message-stream': 'v1' };

/** The chat's session and its branches (edits, regenerations), newest first after the chat's own. */
async function lineage(ctx: RouteContext, id: string): Promise<string[]> {
  if (!(await ctx.client.exists(id))) return [];
  // One listing of the store for the whole tree (not one per branch).
  const children = new Map<string, Array<{ id: string; createdAt: number }>>();
  for (const header of await ctx.client.list())
    if (header.parentSession !== undefined)
      children.set(header.parentSession, [...(children.get(header.parentSession) ?? []), header]);
  const found = [id];
  for (let i = 0; i < found.length && found.length < 256; i++)
    for (const branch of children.get(found[i]!) ?? []) found.push(branch.id);
  const created = new Map([...children.values()].flat().map((branch) => [branch.id, branch.createdAt]));
  return [id, ...found.slice(1).sort((a, b) => created.get(b)! - created.get(a)!)];
}

/** The first session of the chat with a turn open: its id, the turn and where the turn starts. */
async function runningTurn(
  ctx: RouteContext,
  id: string,
): Promise<{ sessionId: string; turn: number; startSeq: number; events: StoredEvent[] } | undefined> {
  const open = async (sessionId: string) => {
    const events = await ctx.client.events(sessionId, 0);
    const turns = TurnFold.of(events);
    const turn = turns.openTurn;
    return turn === undefined ? undefined : { sessionId, turn, startSeq: turns.turns.get(turn)?.startSeq ?? 0, events };
  };
  // The chat's own session first (the common case, no listing), then its branches.
  if (!(await ctx.client.exists(id))) return undefined;
  const own = await open(id);
  if (own) return own;
  for (const sessionId of (await lineage(ctx, id)).slice(1)) {
    const found = await open(sessionId);
    if (found) return found;
  }
  return undefined;
}

/** Answers the approvals a resent assistant message carries; returns the session and its open turn. */
async function answerApprovals(
  ctx: RouteContext,
  id: string,
  approvals: readonly ApprovalAnswerPart[],
): Promise<{ sessionId: string; turn: number; fromSeq: number }> {
  const sessions = await lineage(ctx, id);
  for (const sessionId of sessions) {
    const waiting = new Map(
      (await ctx.client.pendingApprovals({ sessionId })).filter((p) => p.kind === 'approval').map((p) => [p.callId, p]),
    );
    const answered = approvals.filter((a) => waiting.has(a.callId));
    if (answered.length === 0) continue;
    const fromSeq = await ctx.client.nextSeq(sessionId);
    for (const answer of answered)
      await ctx.client.approve(sessionId, answer.callId, {
        decision: answer.approved ? 'approve' : 'deny',
        ...(answer.reason !== undefined ? { reason: answer.reason } : {}),
        by: 'ai-sdk',
      });
    return { sessionId, turn: waiting.get(answered[0]!.callId)!.turn, fromSeq };
  }
  // None waits: a retried request whose answers are logged already streams what followed them.
  const calls = new Set(approvals.map((a) => a.callId));
  for (const sessionId of sessions) {
    const answer = (await ctx.client.events(sessionId, 0)).find(
      (event) => isEventOfType(event, 'tool/approval') && calls.has(event.data.callId),
    );
    if (answer && isEventOfType(answer, 'tool/approval'))
      return { sessionId, turn: answer.data.turn, fromSeq: answer.seq };
  }
  throw new OpenAiError(
    409,
    `chat ${id} has no tool call waiting for the approvals this message answers (${approvals.map((a) => a.callId).join(', ')}); they were answered already or the turn ended`,
    { code: 'nothing_waiting' },
  );
}

/**
 * Streams `fold` as the UI message stream: `replayed` first (coalesced when `coalesce`), then
 * the live tail from `fromSeq`, until the answer ends or the client leaves; a failure while
 * streaming is an `error` part.
 */
async function streamUi(
  ctx: RouteContext,
  request: FastifyRequest,
  reply: FastifyReply,
  answer: { fold: UiMessageFold; replayed: UiChunk[]; fromSeq: number; coalesce: boolean; scope?: string },
): Promise<typeof STREAMED> {
  const { fold } = answer;
  await hijackEventStream(
    reply,
    {
      streams: ctx.streams,
      heartbeatMs: ctx.sseHeartbeatMs,
      headers: { ...UI_STREAM_HEADERS, 'x-session-id': fold.context.sessionId },
    },
    async (stream) => {
      const send = async (chunks: readonly UiChunk[]): Promise<void> => {
        for (const chunk of chunks) await stream.write(`data: ${JSON.stringify(chunk)}\n\n`);
      };
      await send(answer.coalesce ? coalesceChunks(answer.replayed) : answer.replayed);
      if (fold.state() !== 'done') await followResponse(ctx.client, fold, answer.fromSeq, stream.signal, send);
      if (stream.signal.aborted) return;
      await stream.write('data: [DONE]\n\n');
      if (answer.scope !== undefined) await recordTranscriptEnd(ctx, answer.scope, fold.context.sessionId);
    },
    (error) => {
      const response = toOpenAiErrorResponse(error);
      if (response.logDetail)
        request.log.error({ err: error, sessionId: fold.context.sessionId }, 'ui message stream failed');
      return `data: ${JSON.stringify({ type: 'error', errorText: response.body.error.message })}\n\n`;
    },
  );
  return STREAMED;
}

/** Folds `events` (a log from seq 0, or a suffix) into what the answer anchored at `anchor` has produced so far. */
function foldOf(sessionId: string, anchor: UiAnchor, events: readonly StoredEvent[]) {
  const fold = new UiMessageFold({ sessionId, anchor });
  const replayed: UiChunk[] = [];
  for (const event of events) replayed.push(...fold.push(event));
  return { fold, replayed };
}

/** The body's tool options (AI SDK spelling) as the hints of the turn it starts. */
function uiToolHints(body: ChatRequestBody): TurnHints | undefined {
  const choice = body.toolChoice;
  const hints: TurnHints = {
    ...(choice !== undefined ? { toolChoice: typeof choice === 'string' ? choice : { name: choice.toolName } } : {}),
    ...(body.parallelToolCalls !== undefined ? { parallelToolCalls: body.parallelToolCalls } : {}),
  };
  return Object.keys(hints).length > 0 ? hints : undefined;
}

/** `POST /ai-sdk/chat`: the turn the resent messages ask for, as a UI message stream. */
export async function answerChat(
  ctx: RouteContext,
  body: ChatRequestBody,
  request: FastifyRequest,
  reply: FastifyReply,
): Promise<RouteResult> {
  const { transcript, approvals } = readUiMessages(body.messages, ctx.client.maxMediaBytes);
  if (approvals.length > 0) {
    const at = await answerApprovals(ctx, body.id, approvals);
    const { fold, replayed } = foldOf(at.sessionId, { kind: 'turn', turn: at.turn }, []);
    return streamUi(ctx, request, reply, { fold, replayed, fromSeq: at.fromSeq, coalesce: false });
  }
  const scope = callerScope(request);
  const reconciled = await reconcile(ctx, {
    transcript,
    key: { sessionId: body.id },
    scope,
    model: undefined,
    tools: undefined,
    hints: uiToolHints(body),
    regenerate: body.trigger === 'regenerate-message',
    retry: retryOf(request),
  });
  const anchor: UiAnchor =
    reconciled.anchor.kind === 'message'
      ? { kind: 'message', messageId: reconciled.anchor.messageId }
      : { kind: 'turn', turn: TurnFold.of(reconciled.events).openTurn ?? 0 };
  const { fold, replayed } = foldOf(reconciled.sessionId, anchor, anchor.kind === 'message' ? reconciled.events : []);
  return streamUi(ctx, request, reply, {
    fold,
    replayed,
    fromSeq: reconciled.events.length,
    coalesce: false,
    scope,
  });
}

/** `GET /ai-sdk/chat/:id/stream`: the chat's running turn, rejoined (204 when none runs). */
export async function resumeChat(
  ctx: RouteContext,
  id: string,
  request: FastifyRequest,
  reply: FastifyReply,
): Promise<RouteResult> {
  const running = await runningTurn(ctx, id);
  if (!running) return { status: 204, body: undefined };
  const { fold, replayed } = foldOf(
    running.sessionId,
    { kind: 'turn', turn: running.turn },
    running.events.slice(running.startSeq),
  );
  return streamUi(ctx, request, reply, { fold, replayed, fromSeq: running.events.length, coalesce: true });
}
