/**
 * The LangGraph Agent Server subset (`/langgraph`, issue 25): what `@langchain/langgraph-sdk`'s
 * `Client` (and `useStream` over it) calls, with `apiUrl: '<gateway>/langgraph'`.
 *
 * - One assistant, `agent` (the workers' configured agent): `GET /assistants/:id`, `POST /assistants/search`.
 * - Threads are sessions: create (`if_exists`), get, patch (metadata), delete (= erase, DESIGN
 *   §4.2), search (metadata, status, ids), copy (= fork), state (now, or at a checkpoint:
 *   the log's length at a turn's end), history (checkpoints newest first).
 * - Runs are turns (threads.ts): create, stream, wait, list, get, join, rejoin the stream
 *   (`Last-Event-ID`: exact; what was missed comes coalesced, then the live tail), cancel.
 *   `multitask_strategy` `reject` (default) answers a busy thread with 409, `enqueue` queues the
 *   run as a turn of its own, `interrupt` cancels the running turn first. Tool calls that wait
 *   for an answer end a run as an interrupt; a run with `command: {resume}` answers them.
 * - What only a LangGraph graph can honour (node names in `interrupt_before`, state keys other
 *   than `messages`, a foreign `checkpoint_id`, `context`, `after_seconds`…) is a 422 naming it.
 */
import { randomUUID } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import {
  SESSION_ID_PATTERN,
  SessionlogError,
  TurnFold,
  type SessionHeader,
  type StoredEvent,
} from '../../session/index.js';
import { followResponse } from '../turn-stream/follow.js';
import { defineRoute, noParams, noQuery, STREAMED, type RouteContext, type RouteSpec } from '../route-table.js';
import { hijackEventStream } from '../sse.js';
import { LangGraphError, notFound, toLangGraphErrorResponse, unsupported } from './errors.js';
import { inputTexts } from './messages.js';
import {
  RunFold,
  STREAM_MODES,
  coalesceFrames,
  isAfter,
  type RunAnchor,
  type RunFrame,
  type StreamMode,
} from './run-fold.js';
import {
  ASSISTANT_ID,
  RESUME_BY,
  checkpointId,
  checkpoints,
  encodeMetadata,
  matchesMetadata,
  parseCheckpointId,
  pendingInterrupts,
  runObject,
  threadMetadata,
  threadObject,
  threadRuns,
  threadState,
  threadStatus,
  type RunRecord,
} from './threads.js';
import { webhookUrlProblem } from './webhooks.js';
import { answersOf } from './resume.js';

export const LANGGRAPH_PREFIX = '/langgraph';

const ERRORS = [400, 401, 404, 409, 413, 415, 422, 429, 500, 503];

const iso = (ms: number) => new Date(ms).toISOString();

// ---- schemas ------------------------------------------------------------------------------------

const threadId = z.string().regex(SESSION_ID_PATTERN, 'must be a thread (session) id').describe('the thread id');
const runId = z.string().min(1).max(300).describe('the run id');
const threadParams = z.strictObject({ thread_id: threadId });
const runParams = z.strictObject({ thread_id: threadId, run_id: runId });
const assistantParams = z.strictObject({ assistant_id: z.string().min(1).max(200) });
const jsonRecord = z.record(z.string(), z.unknown());

const createThreadBody = z
  .object({
    thread_id: threadId.optional(),
    metadata: jsonRecord.nullish(),
    if_exists: z.enum(['raise', 'do_nothing']).nullish(),
    supersteps: z.unknown().optional(),
    ttl: z.unknown().optional(),
    graph_id: z.string().nullish(),
  })
  .strict();

const patchThreadBody = z.object({ metadata: jsonRecord.nullish(), ttl: z.unknown().optional() }).strict();

const searchThreadsBody = z
  .object({
    metadata: jsonRecord.nullish(),
    ids: z.array(threadId).max(1000).nullish(),
    values: jsonRecord.nullish(),
    status: z.enum(['idle', 'busy', 'interrupted', 'error']).nullish(),
    limit: z.number().int().min(1).max(1000).default(10),
    offset: z.number().int().min(0).default(0),
    sort_by: z.enum(['thread_id', 'status', 'created_at', 'updated_at', 'state_updated_at']).nullish(),
    sort_order: z.enum(['asc', 'desc']).nullish(),
    select: z.array(z.string()).nullish(),
    extract: z.unknown().optional(),
  })
  .strict();

const searchAssistantsBody = z
  .object({
    graph_id: z.string().nullish(),
    name: z.string().nullish(),
    metadata: jsonRecord.nullish(),
    limit: z.number().int().min(1).max(1000).default(10),
    offset: z.number().int().min(0).default(0),
    sort_by: z.string().nullish(),
    sort_order: z.enum(['asc', 'desc']).nullish(),
    select: z.array(z.string()).nullish(),
  })
  .strict();

const historyBody = z
  .object({
    limit: z.number().int().min(1).max(1000).default(10),
    before: z.union([z.string(), z.object({ checkpoint_id: z.string().nullish() }).passthrough()]).nullish(),
    metadata: jsonRecord.nullish(),
    checkpoint: z.object({ checkpoint_id: z.string().nullish() }).passthrough().nullish(),
    select: z.array(z.string()).nullish(),
  })
  .strict();

const streamModeField = z.union([z.string(), z.array(z.string())]);

const runBody = z
  .object({
    assistant_id: z.string().min(1).max(200),
    input: z.unknown().optional(),
    command: z
      .object({ resume: z.unknown().optional(), update: z.unknown().optional(), goto: z.unknown().optional() })
      .strict()
      .nullish(),
    config: z
      .object({
        tags: z.array(z.string()).optional(),
        recursion_limit: z.number().optional(),
        configurable: jsonRecord.optional(),
      })
      .passthrough()
      .nullish(),
    context: z.unknown().optional(),
    metadata: jsonRecord.nullish(),
    stream_mode: streamModeField.nullish(),
    stream_subgraphs: z.boolean().nullish(),
    stream_resumable: z.boolean().nullish(),
    feedback_keys: z.array(z.string()).nullish(),
    interrupt_before: z.union([z.literal('*'), z.array(z.string())]).nullish(),
    interrupt_after: z.union([z.literal('*'), z.array(z.string())]).nullish(),
    checkpoint: z.object({ checkpoint_id: z.string().nullish() }).passthrough().nullish(),
    checkpoint_id: z.string().nullish(),
    checkpoint_during: z.boolean().nullish(),
    durability: z.string().nullish(),
    webhook: z.string().max(2048).nullish(),
    strict_resume: z.boolean().nullish(),
    multitask_strategy: z.enum(['reject', 'enqueue', 'interrupt', 'rollback']).nullish(),
    on_completion: z.enum(['delete', 'keep']).nullish(),
    on_disconnect: z.enum(['cancel', 'continue']).nullish(),
    after_seconds: z.number().nullish(),
    if_not_exists: z.enum(['create', 'reject']).nullish(),
    langsmith_tracer: z.unknown().optional(),
  })
  .strict();
type RunBody = z.output<typeof runBody>;

const joinStreamQuery = z
  .object({
    stream_mode: streamModeField.optional(),
    cancel_on_disconnect: z.enum(['0', '1', 'true', 'false']).optional(),
    namespace: z.unknown().optional(),
    checkpoint_id: z.string().optional(),
  })
  .strict();

const listRunsQuery = z
  .object({
    limit: z.coerce.number().int().min(1).max(1000).default(10),
    offset: z.coerce.number().int().min(0).default(0),
    status: z.enum(['pending', 'running', 'error', 'success', 'timeout', 'interrupted']).optional(),
    select: z.unknown().optional(),
  })
  .strict();

const cancelQuery = z
  .object({
    wait: z.enum(['0', '1', 'true', 'false']).optional(),
    action: z.enum(['interrupt', 'rollback']).optional(),
    reason: z.string().max(1000).optional(),
  })
  .strict();

// ---- helpers ------------------------------------------------------------------------------------

function assistantObject(ctx: RouteContext) {
  const created = iso(0);
  return {
    assistant_id: ASSISTANT_ID,
    graph_id: ASSISTANT_ID,
    name: ASSISTANT_ID,
    description: `the workers' agent${ctx.defaults.model ? ` (model ${ctx.defaults.model})` : ''}`,
    config: {},
    context: {},
    metadata: { created_by: 'system', ...(ctx.defaults.model ? { model: ctx.defaults.model } : {}) },
    version: 1,
    created_at: created,
    updated_at: created,
  };
}

function requireAssistant(id: string): void {
  if (id !== ASSISTANT_ID) throw notFound(`assistant ${id} (this server has one assistant, "${ASSISTANT_ID}")`);
}

type Thread = { header: SessionHeader; events: StoredEvent[] };

async function readThread(ctx: RouteContext, id: string): Promise<Thread> {
  if (!(await ctx.client.exists(id))) throw notFound(`thread ${id}`);
  const [header, events] = await Promise.all([ctx.client.header(id), ctx.client.events(id, 0)]);
  return { header, events };
}

async function threadJson(ctx: RouteContext, thread: Thread) {
  const waiting = await ctx.client.waitingMessages(thread.header.id);
  return threadObject(thread.header, thread.events, waiting.length > 0);
}

/** The run `runId` of a thread: from its log, or pending (its message delivered, not logged yet). */
async function findRun(
  ctx: RouteContext,
  thread: Thread,
  runId: string,
): Promise<RunRecord | { runId: string; status: 'pending'; createdAt: number; updatedAt: number }> {
  const run = threadRuns(thread.events).find((r) => r.runId === runId);
  if (run) return run;
  if ((await ctx.client.waitingMessages(thread.header.id)).includes(runId)) {
    const now = Date.now();
    return { runId, status: 'pending', createdAt: now, updatedAt: now };
  }
  throw notFound(`run ${runId} of thread ${thread.header.id}`);
}

function anchorOf(run: RunRecord | { runId: string; status: 'pending' }): RunAnchor {
  return 'kind' in run && run.kind === 'resume'
    ? { kind: 'resume', turn: run.turn, fromSeq: run.startSeq }
    : { kind: 'message', messageId: run.runId };
}

/**
 * The stream modes asked for; `fallback` when none (a run: `values`, as the Agent Server; a
 * rejoin, which does not know the modes its run was started with: every mode but `custom`).
 */
function streamModesOf(
  value: string | string[] | null | undefined,
  field: string,
  fallback: readonly StreamMode[] = ['values'],
): StreamMode[] {
  const asked = value === null || value === undefined ? fallback : Array.isArray(value) ? value : [value];
  const modes = new Set<StreamMode>();
  for (const mode of asked) {
    // `messages` and `messages-tuple` are the same stream on the wire (event `messages`).
    const name = mode === 'messages' ? 'messages-tuple' : mode;
    if (!(STREAM_MODES as readonly string[]).includes(name))
      throw unsupported(field, `stream mode "${mode}" is not served; use ${STREAM_MODES.join(', ')}`);
    modes.add(name as StreamMode);
  }
  return [...modes];
}

/** Refuses what only a LangGraph graph could honour, naming the field. */
function refuseGraphFields(body: RunBody, events: readonly StoredEvent[]): void {
  const nonEmpty = (v: unknown) => v !== undefined && v !== null && !(Array.isArray(v) && v.length === 0);
  if (nonEmpty(body.interrupt_before))
    throw unsupported(
      'interrupt_before',
      'there are no graph nodes to stop before; tool calls that need approval interrupt the run by themselves',
    );
  if (nonEmpty(body.interrupt_after)) throw unsupported('interrupt_after', 'there are no graph nodes to stop after');
  if (
    body.context !== undefined &&
    body.context !== null &&
    !(typeof body.context === 'object' && Object.keys(body.context).length === 0)
  )
    throw unsupported(
      'context',
      'the agent takes no graph runtime context; send what the model should see as a message',
    );
  if (body.command?.update !== undefined && body.command.update !== null)
    throw unsupported('command.update', 'the state changes only through the log (send a message)');
  if (body.command?.goto !== undefined && body.command.goto !== null)
    throw unsupported('command.goto', 'there are no graph nodes to go to');
  if (body.after_seconds) throw unsupported('after_seconds', 'delayed runs are not supported');
  if (body.on_completion === 'delete')
    throw unsupported('on_completion', 'threads are deleted (erased) only by DELETE /threads/:id');
  if (body.multitask_strategy === 'rollback')
    throw unsupported(
      'multitask_strategy',
      'rollback would delete a run from the log, which never loses what it holds; use interrupt, enqueue or reject',
    );
  const configurable = body.config?.configurable ?? {};
  const asked =
    body.checkpoint_id ?? body.checkpoint?.checkpoint_id ?? (configurable.checkpoint_id as string | undefined | null);
  if (asked !== undefined && asked !== null) {
    const field = body.checkpoint_id
      ? 'checkpoint_id'
      : body.checkpoint?.checkpoint_id
        ? 'checkpoint.checkpoint_id'
        : 'config.configurable.checkpoint_id';
    const at = parseCheckpointId(asked);
    if (at === undefined)
      throw unsupported(field, `"${asked}" is not a checkpoint of this thread (they look like seq-<n>)`);
    if (at !== events.length)
      throw unsupported(
        field,
        `running from an earlier checkpoint (${asked}; the thread is at ${checkpointId(events.length)}) is not supported: copy the thread (POST /threads/:id/copy) to branch`,
      );
  }
}

/** The frames of a run's stream as SSE. */
function formatFrame(frame: RunFrame): string {
  return `event: ${frame.event}\n${frame.id !== undefined ? `id: ${frame.id}\n` : ''}data: ${JSON.stringify(frame.data)}\n\n`;
}

function failureFrame(request: FastifyRequest, sessionId: string, error: unknown): string {
  const response = toLangGraphErrorResponse(error);
  if (response.logDetail) request.log.error({ err: error, sessionId }, 'langgraph run stream failed');
  return formatFrame({ event: 'error', data: { error: response.body.code, message: response.body.detail } });
}

/** A fold of the run over the whole stored log: the fold, the frames it made, and where the log ended. */
function replayRun(
  sessionId: string,
  runId: string,
  anchor: RunAnchor,
  modes: readonly StreamMode[],
  events: readonly StoredEvent[],
) {
  const fold = new RunFold({ sessionId, runId, anchor, modes });
  const frames: RunFrame[] = [];
  for (const event of events) frames.push(...fold.push(event));
  if (fold.awaitingCaller()) frames.push(...fold.flush());
  return { fold, frames, fromSeq: events.length };
}

/** Streams a run: `metadata`, the replayed frames after `lastEventId` (coalesced when `coalesce`), then live until it ends. */
async function streamRun(
  ctx: RouteContext,
  request: FastifyRequest,
  reply: FastifyReply,
  run: {
    threadId: string;
    runId: string;
    fold: RunFold;
    frames: RunFrame[];
    fromSeq: number;
    lastEventId?: string;
    coalesce: boolean;
    cancelOnDisconnect: boolean;
  },
): Promise<typeof STREAMED> {
  const { fold, threadId: tid, runId: rid } = run;
  await hijackEventStream(
    reply,
    {
      streams: ctx.streams,
      heartbeatMs: ctx.sseHeartbeatMs,
      headers: {
        location: `${runPath(tid, rid)}/stream`,
        'content-location': runPath(tid, rid),
      },
    },
    async (stream) => {
      const send = async (frames: readonly RunFrame[]) => {
        for (const frame of frames)
          if (isAfter(frame.id ?? '', run.lastEventId)) await stream.write(formatFrame(frame));
      };
      await stream.write(formatFrame({ event: 'metadata', data: { run_id: rid, thread_id: tid, attempt: 1 } }));
      await send(
        run.coalesce ? coalesceFrames(run.frames.filter((f) => isAfter(f.id ?? '', run.lastEventId))) : run.frames,
      );
      if (fold.state() !== 'done') await followResponse(ctx.client, fold, run.fromSeq, stream.signal, send);
      // The client left (its connection is gone; a closing gateway ends streams with theirs open).
      if (reply.raw.destroyed && fold.state() !== 'done' && run.cancelOnDisconnect)
        await ctx.client.cancel(tid).catch(() => false);
    },
    (error) => failureFrame(request, tid, error),
  );
  return STREAMED;
}

/**
 * Waits until the run's fold is done (the client leaving or the gateway closing stops the
 * wait); with `cancelOnDisconnect`, a client that leaves first cancels the run's turn.
 */
async function waitRun(
  ctx: RouteContext,
  request: FastifyRequest,
  fold: RunFold,
  fromSeq: number,
  cancelOnDisconnect = false,
): Promise<void> {
  if (fold.state() === 'done') return;
  const abort = new AbortController();
  ctx.streams.add(abort);
  let left = false;
  const onClose = (): void => {
    left = true;
    abort.abort();
  };
  request.raw.socket.on('close', onClose);
  try {
    await followResponse(ctx.client, fold, fromSeq, abort.signal, async () => undefined);
  } finally {
    request.raw.socket.off('close', onClose);
    ctx.streams.delete(abort);
  }
  if (left && fold.state() !== 'done' && cancelOnDisconnect)
    await ctx.client.cancel(fold.context.sessionId).catch(() => false);
}

/** What `runs.wait` and `runs.join` answer: the thread's values after the run (with the interrupt, or the error). */
function finalValues(fold: RunFold) {
  const values: Record<string, unknown> = { messages: fold.messages() };
  if (fold.outcome?.interrupt) values.__interrupt__ = [fold.outcome.interrupt];
  if (fold.outcome?.error) values.__error__ = fold.outcome.error;
  return values;
}

/**
 * Starts a run: answers the interrupts (`command.resume`) or posts the input messages, after
 * the thread (created when `if_not_exists: 'create'`) and the multitask strategy allow it.
 */
async function startRun(
  ctx: RouteContext,
  tid: string,
  body: RunBody,
): Promise<{ runId: string; anchor: RunAnchor; events: StoredEvent[] }> {
  requireAssistant(body.assistant_id);
  if (!(await ctx.client.exists(tid))) {
    if (body.if_not_exists !== 'create')
      throw notFound(`thread ${tid} (send if_not_exists: "create" to create it with the run)`);
    await ctx.client.create({ sessionId: tid }).catch((error: unknown) => {
      // Created by a concurrent request: use it.
      if (!(error instanceof SessionlogError && error.code === 'SESSION_ALREADY_EXISTS')) throw error;
    });
  }
  if (body.webhook) {
    const problem = webhookUrlProblem(body.webhook);
    if (problem) throw unsupported('webhook', problem);
    if (ctx.webhooks.secret === undefined)
      throw unsupported('webhook', 'webhooks are signed and this gateway has no SESSIONLOG_WEBHOOK_SECRET');
  }
  const events = await ctx.client.events(tid, 0);
  refuseGraphFields(body, events);
  const runId = randomUUID();
  const resume = body.command?.resume;
  if (resume !== undefined) {
    if (inputTexts(body.input).length > 0)
      throw unsupported('input', 'a run resumes an interrupt (command.resume) or brings input, not both');
    const interrupts = pendingInterrupts(events);
    if (interrupts.length === 0)
      throw new LangGraphError(409, `thread ${tid} has no interrupt waiting for an answer`, 'nothing_waiting');
    const answers = answersOf(resume, interrupts);
    const turn = TurnFold.of(events).openTurn ?? 0;
    const by = `${RESUME_BY}${runId}`;
    for (const answer of answers) {
      if (answer.kind === 'budget') await ctx.client.setBudget(tid, answer.budget, { by });
      else if (answer.kind === 'result') await ctx.client.submitToolResult(tid, answer.callId, answer.output, { by });
      else
        await ctx.client.approve(tid, answer.callId, {
          decision: answer.decision,
          ...(answer.reason !== undefined ? { reason: answer.reason } : {}),
          ...(answer.arguments !== undefined ? { arguments: answer.arguments } : {}),
          by,
        });
    }
    // The run starts at its first logged answer (where a rejoin's fold starts it too).
    const logged = threadRuns(await ctx.client.events(tid, 0)).find((run) => run.runId === runId);
    return { runId, anchor: { kind: 'resume', turn, fromSeq: logged?.startSeq ?? events.length }, events };
  }
  const texts = inputTexts(body.input);
  if (texts.length === 0)
    throw new LangGraphError(
      422,
      'input.messages: a run needs at least one human message (or command.resume to answer an interrupt)',
      'invalid_request',
    );
  const strategy = body.multitask_strategy ?? 'reject';
  const waiting = await ctx.client.waitingMessages(tid);
  const busy = threadStatus(events, waiting.length > 0);
  if (busy === 'busy' || busy === 'interrupted') {
    if (strategy === 'reject')
      throw new LangGraphError(
        409,
        `thread ${tid} is ${busy === 'busy' ? 'running a run' : 'waiting for an interrupt to be resumed'}; wait for it, resume it, or send multitask_strategy "enqueue" or "interrupt"`,
        'busy',
      );
    if (strategy === 'interrupt') await ctx.client.cancel(tid);
  }
  const metadata = body.metadata && Object.keys(body.metadata).length > 0 ? encodeMetadata(body.metadata) : undefined;
  // A run's metadata is logged with its turn; a note waits for the session to be between turns.
  if (metadata && busy === 'idle') await ctx.client.note(tid, { metadata: { values: metadata, messageId: runId } });
  for (const [i, text] of texts.entries())
    await ctx.client.post(tid, text, { id: i === 0 ? runId : `${runId}.${i}`, ownTurn: i === 0 });
  return { runId, anchor: { kind: 'message', messageId: runId }, events };
}

/** The path of a run under the API's prefix (what `Content-Location` names). */
function runPath(tid: string, runId: string): string {
  return `/threads/${tid}/runs/${encodeURIComponent(runId)}`;
}

/** Starts a run as every run route does: its stream modes checked, then started, its webhook scheduled. */
async function beginRun(ctx: RouteContext, request: FastifyRequest, tid: string, body: RunBody) {
  const modes = streamModesOf(body.stream_mode, 'stream_mode');
  const started = await startRun(ctx, tid, body);
  if (body.webhook) webhookWhenDone(ctx, request, tid, started.runId, started.anchor, body.webhook, started.events);
  return { ...started, modes };
}

/** Sends the run's webhook once the run ends (in the background). */
function webhookWhenDone(
  ctx: RouteContext,
  request: FastifyRequest,
  tid: string,
  runId: string,
  anchor: RunAnchor,
  url: string,
  events: StoredEvent[],
): void {
  const { fold, fromSeq } = replayRun(tid, runId, anchor, ['values'], events);
  const abort = new AbortController();
  ctx.streams.add(abort);
  void (async () => {
    try {
      if (fold.state() !== 'done') await followResponse(ctx.client, fold, fromSeq, abort.signal, async () => undefined);
      if (fold.state() !== 'done') return;
      const run = threadRuns(await ctx.client.events(tid, 0)).find((r) => r.runId === runId);
      await ctx.webhooks.send(url, {
        ...(run ? runObject(tid, run) : { run_id: runId, thread_id: tid, status: fold.outcome?.status }),
        webhook_sent_at: new Date().toISOString(),
        values: finalValues(fold),
        ...(fold.outcome?.error ? { error: fold.outcome.error.message } : {}),
      });
    } catch (error) {
      request.log.error({ err: error, sessionId: tid, runId }, 'webhook follow failed');
    } finally {
      ctx.streams.delete(abort);
    }
  })();
}

const threadResponse = { 200: { description: 'the thread (Thread)' } };

export const LANGGRAPH_ROUTES: readonly RouteSpec[] = [
  // ---- assistants ----
  defineRoute({
    method: 'GET',
    path: `${LANGGRAPH_PREFIX}/assistants/:assistant_id`,
    operationId: 'langgraphGetAssistant',
    right: 'read',
    summary: "LangGraph: the assistant (`agent`, the workers' configured agent)",
    params: assistantParams,
    query: noQuery,
    responses: { 200: { description: 'the assistant (Assistant)' } },
    errors: ERRORS,
    sessionOf: () => undefined,
    handler: async (ctx, { params }) => {
      requireAssistant(params.assistant_id);
      return { status: 200, body: assistantObject(ctx) };
    },
  }),
  defineRoute({
    method: 'POST',
    path: `${LANGGRAPH_PREFIX}/assistants/search`,
    operationId: 'langgraphSearchAssistants',
    right: 'read',
    summary: 'LangGraph: search assistants (by graph_id, name, metadata)',
    params: noParams,
    query: noQuery,
    body: searchAssistantsBody.default({ limit: 10, offset: 0 }),
    responses: { 200: { description: 'the matching assistants (Assistant[])' } },
    errors: ERRORS,
    handler: async (ctx, { body }) => {
      const assistant = assistantObject(ctx);
      const match =
        (!body.graph_id || body.graph_id === assistant.graph_id) &&
        (!body.name || assistant.name.includes(body.name)) &&
        matchesMetadata(assistant.metadata, body.metadata ?? undefined);
      return { status: 200, body: (match ? [assistant] : []).slice(body.offset, body.offset + body.limit) };
    },
  }),
  // ---- threads ----
  defineRoute({
    method: 'POST',
    path: `${LANGGRAPH_PREFIX}/threads`,
    operationId: 'langgraphCreateThread',
    right: 'write',
    summary: 'LangGraph: create a thread (a session); if_exists "raise" (409) or "do_nothing" (the existing thread)',
    params: noParams,
    query: noQuery,
    body: createThreadBody.default({}),
    responses: threadResponse,
    errors: ERRORS,
    handler: async (ctx, { body }) => {
      if (body.supersteps !== undefined && body.supersteps !== null)
        throw unsupported('supersteps', 'a thread starts empty; send its messages as runs');
      if (body.ttl !== undefined && body.ttl !== null)
        throw unsupported('ttl', 'threads are kept until deleted (erased)');
      const id = body.thread_id ?? randomUUID();
      if (await ctx.client.exists(id)) {
        if (body.if_exists === 'do_nothing')
          return { status: 200, body: await threadJson(ctx, await readThread(ctx, id)) };
        throw new LangGraphError(
          409,
          `thread ${id} already exists (send if_exists: "do_nothing" to get it)`,
          'session_already_exists',
        );
      }
      await ctx.client.create({ sessionId: id });
      const metadata = Object.fromEntries(
        Object.entries(body.metadata ?? {}).filter(([, v]) => v !== undefined && v !== null),
      );
      if (Object.keys(metadata).length > 0)
        await ctx.client.note(id, { metadata: { values: encodeMetadata(metadata) } });
      return { status: 200, body: await threadJson(ctx, await readThread(ctx, id)) };
    },
  }),
  defineRoute({
    method: 'POST',
    path: `${LANGGRAPH_PREFIX}/threads/search`,
    operationId: 'langgraphSearchThreads',
    right: 'read',
    summary: 'LangGraph: search threads by metadata, ids and status, newest first by default',
    params: noParams,
    query: noQuery,
    body: searchThreadsBody.default({ limit: 10, offset: 0 }),
    responses: { 200: { description: 'the matching threads (Thread[])' } },
    errors: ERRORS,
    handler: async (ctx, { body }) => {
      if (body.values && Object.keys(body.values).length > 0)
        throw unsupported(
          'values',
          'threads are searched by metadata, ids and status (use GET /v1/search for their text)',
        );
      const ids = body.ids ? new Set(body.ids) : undefined;
      const found: Array<ReturnType<typeof threadObject>> = [];
      for (const header of await ctx.client.list()) {
        if (ids && !ids.has(header.id)) continue;
        let thread: Thread;
        try {
          // The listing gave the header: only the log is read.
          thread = { header, events: await ctx.client.events(header.id, 0) };
        } catch {
          continue; // erased or damaged since it was listed: it does not hide the others.
        }
        if (!matchesMetadata(threadMetadata(thread.events), body.metadata ?? undefined)) continue;
        const json = await threadJson(ctx, thread);
        if (body.status && json.status !== body.status) continue;
        found.push(json);
      }
      const key = body.sort_by ?? 'created_at';
      const sign = (body.sort_order ?? 'desc') === 'asc' ? 1 : -1;
      found.sort((a, b) => sign * String(a[key]).localeCompare(String(b[key])));
      return { status: 200, body: found.slice(body.offset, body.offset + body.limit) };
    },
  }),
  defineRoute({
    method: 'GET',
    path: `${LANGGRAPH_PREFIX}/threads/:thread_id`,
    operationId: 'langgraphGetThread',
    right: 'read',
    summary: 'LangGraph: a thread: status, metadata, values ({messages} derived from the log) and waiting interrupts',
    params: threadParams,
    query: z.object({ include: z.unknown().optional() }).strict(),
    responses: threadResponse,
    errors: ERRORS,
    sessionOf: (params) => params.thread_id as string,
    handler: async (ctx, { params }) => ({
      status: 200,
      body: await threadJson(ctx, await readThread(ctx, params.thread_id)),
    }),
  }),
  defineRoute({
    method: 'PATCH',
    path: `${LANGGRAPH_PREFIX}/threads/:thread_id`,
    operationId: 'langgraphPatchThread',
    right: 'write',
    summary: "LangGraph: merge metadata into the thread's (logged between turns)",
    params: threadParams,
    query: noQuery,
    body: patchThreadBody,
    responses: threadResponse,
    errors: ERRORS,
    sessionOf: (params) => params.thread_id as string,
    handler: async (ctx, { params, body }) => {
      if (body.ttl !== undefined && body.ttl !== null)
        throw unsupported('ttl', 'threads are kept until deleted (erased)');
      const thread = await readThread(ctx, params.thread_id);
      if (body.metadata) {
        const merged: Record<string, unknown> = { ...threadMetadata(thread.events), ...body.metadata };
        for (const [key, value] of Object.entries(merged))
          if (value === null || value === undefined) delete merged[key];
        await ctx.client.note(params.thread_id, { metadata: { values: encodeMetadata(merged) } });
      }
      return { status: 200, body: await threadJson(ctx, await readThread(ctx, params.thread_id)) };
    },
  }),
  defineRoute({
    method: 'DELETE',
    path: `${LANGGRAPH_PREFIX}/threads/:thread_id`,
    operationId: 'langgraphDeleteThread',
    right: 'admin',
    summary:
      'LangGraph: delete a thread = erase its session (log, artifacts, checkpoints, workflow histories; DESIGN §4.2)',
    params: threadParams,
    query: noQuery,
    responses: { 204: { description: 'erased' } },
    errors: ERRORS,
    sessionOf: (params) => params.thread_id as string,
    handler: async (ctx, { params }) => {
      if (!(await ctx.client.exists(params.thread_id))) throw notFound(`thread ${params.thread_id}`);
      await ctx.client.erase(params.thread_id);
      return { status: 204, body: undefined };
    },
  }),
  defineRoute({
    method: 'POST',
    path: `${LANGGRAPH_PREFIX}/threads/:thread_id/copy`,
    operationId: 'langgraphCopyThread',
    right: 'write',
    summary: 'LangGraph: copy a thread = fork its session (the copy shares the history by reference)',
    params: threadParams,
    query: noQuery,
    responses: threadResponse,
    errors: ERRORS,
    sessionOf: (params) => params.thread_id as string,
    handler: async (ctx, { params }) => {
      await readThread(ctx, params.thread_id);
      const { sessionId } = await ctx.client.fork(params.thread_id);
      return { status: 200, body: await threadJson(ctx, await readThread(ctx, sessionId)) };
    },
  }),
  defineRoute({
    method: 'GET',
    path: `${LANGGRAPH_PREFIX}/threads/:thread_id/state`,
    operationId: 'langgraphThreadState',
    right: 'read',
    summary: "LangGraph: the thread's state now (ThreadState: values, next, checkpoint, tasks with interrupts)",
    params: threadParams,
    query: z.object({ subgraphs: z.unknown().optional(), select: z.unknown().optional() }).strict(),
    responses: { 200: { description: 'the state (ThreadState)' } },
    errors: ERRORS,
    sessionOf: (params) => params.thread_id as string,
    handler: async (ctx, { params }) => {
      const { header, events } = await readThread(ctx, params.thread_id);
      const points = checkpoints(events);
      return { status: 200, body: threadState(header, events, events.length, points[1]) };
    },
  }),
  defineRoute({
    method: 'GET',
    path: `${LANGGRAPH_PREFIX}/threads/:thread_id/state/:checkpoint_id`,
    operationId: 'langgraphThreadStateAt',
    right: 'read',
    summary: "LangGraph: the thread's state at a checkpoint (seq-<n>: the log's first n events)",
    params: z.strictObject({ thread_id: threadId, checkpoint_id: z.string().min(1).max(100) }),
    query: z.object({ subgraphs: z.unknown().optional(), select: z.unknown().optional() }).strict(),
    responses: { 200: { description: 'the state (ThreadState)' } },
    errors: ERRORS,
    sessionOf: (params) => params.thread_id as string,
    handler: async (ctx, { params }) => {
      const { header, events } = await readThread(ctx, params.thread_id);
      const at = parseCheckpointId(params.checkpoint_id);
      if (at === undefined || at > events.length)
        throw notFound(`checkpoint ${params.checkpoint_id} of thread ${params.thread_id}`);
      const parent = checkpoints(events).find((n) => n < at);
      return { status: 200, body: threadState(header, events, at, parent) };
    },
  }),
  defineRoute({
    method: 'POST',
    path: `${LANGGRAPH_PREFIX}/threads/:thread_id/state`,
    operationId: 'langgraphUpdateState',
    right: 'write',
    summary: 'LangGraph: update state: refused (422); the state changes only through runs',
    params: threadParams,
    query: noQuery,
    body: z.unknown(),
    responses: {},
    errors: ERRORS,
    sessionOf: (params) => params.thread_id as string,
    handler: async () => {
      throw unsupported(
        'values',
        "a thread's state is derived from its log and changes only through runs (send a message; DELETE an item through /openai/v1 to hide it)",
      );
    },
  }),
  defineRoute({
    method: 'POST',
    path: `${LANGGRAPH_PREFIX}/threads/:thread_id/history`,
    operationId: 'langgraphThreadHistory',
    right: 'read',
    summary:
      "LangGraph: the thread's states, newest first: now and at the end of each turn (before: older than a checkpoint)",
    params: threadParams,
    query: noQuery,
    body: historyBody.default({ limit: 10 }),
    responses: { 200: { description: 'the states (ThreadState[])' } },
    errors: ERRORS,
    sessionOf: (params) => params.thread_id as string,
    handler: async (ctx, { params, body }) => {
      const { header, events } = await readThread(ctx, params.thread_id);
      const points = checkpoints(events);
      const beforeId = typeof body.before === 'string' ? body.before : body.before?.checkpoint_id;
      const before = beforeId ? parseCheckpointId(beforeId) : undefined;
      if (beforeId && before === undefined)
        throw unsupported('before', `"${beforeId}" is not a checkpoint of this thread`);
      const chosen = points.filter((n) => before === undefined || n < before).slice(0, body.limit);
      return {
        status: 200,
        body: chosen.map((n) =>
          threadState(
            header,
            events,
            n,
            points.find((p) => p < n),
          ),
        ),
      };
    },
  }),
  // ---- runs ----
  defineRoute({
    method: 'POST',
    path: `${LANGGRAPH_PREFIX}/threads/:thread_id/runs`,
    operationId: 'langgraphCreateRun',
    right: 'write',
    summary: 'LangGraph: start a run (a turn) in the background; the Run, pending',
    params: threadParams,
    query: noQuery,
    body: runBody,
    responses: { 200: { description: 'the run (Run)' } },
    errors: ERRORS,
    sessionOf: (params) => params.thread_id as string,
    handler: async (ctx, { params, body, request, reply }) => {
      const started = await beginRun(ctx, request, params.thread_id, body);
      const now = Date.now();
      void reply.header('content-location', runPath(params.thread_id, started.runId));
      return {
        status: 200,
        body: {
          ...runObject(
            params.thread_id,
            { runId: started.runId, status: 'pending', createdAt: now, updatedAt: now },
            body.metadata ?? {},
          ),
          multitask_strategy: body.multitask_strategy ?? 'reject',
        },
      };
    },
  }),
  defineRoute({
    method: 'POST',
    path: `${LANGGRAPH_PREFIX}/threads/:thread_id/runs/stream`,
    operationId: 'langgraphStreamRun',
    right: 'write',
    summary: 'LangGraph: start a run and stream it (stream_mode values, updates, messages-tuple, custom)',
    params: threadParams,
    query: z.object({ namespace: z.unknown().optional() }).strict(),
    body: runBody,
    responses: {
      200: {
        description: 'the run as Server-Sent Events',
        eventStream:
          '`metadata` ({run_id}), then per stream mode `values`, `updates`, `messages` ([chunk, metadata]), `custom` (log events), and `error`; each with id `<seq>-<n>` for Last-Event-ID. Location names the rejoin path.',
      },
    },
    errors: ERRORS,
    sessionOf: (params) => params.thread_id as string,
    handler: async (ctx, { params, body, request, reply }) => {
      const started = await beginRun(ctx, request, params.thread_id, body);
      const { fold, frames, fromSeq } = replayRun(
        params.thread_id,
        started.runId,
        started.anchor,
        started.modes,
        started.events,
      );
      return streamRun(ctx, request, reply, {
        threadId: params.thread_id,
        runId: started.runId,
        fold,
        frames,
        fromSeq,
        coalesce: false,
        cancelOnDisconnect: body.on_disconnect === 'cancel',
      });
    },
  }),
  defineRoute({
    method: 'POST',
    path: `${LANGGRAPH_PREFIX}/threads/:thread_id/runs/wait`,
    operationId: 'langgraphWaitRun',
    right: 'write',
    summary: "LangGraph: start a run and wait for it; the thread's values after it (with __interrupt__, or __error__)",
    params: threadParams,
    query: noQuery,
    body: runBody,
    responses: { 200: { description: 'the values ({messages})' } },
    errors: ERRORS,
    sessionOf: (params) => params.thread_id as string,
    handler: async (ctx, { params, body, request, reply }) => {
      const started = await beginRun(ctx, request, params.thread_id, body);
      const { fold, fromSeq } = replayRun(params.thread_id, started.runId, started.anchor, ['values'], started.events);
      await waitRun(ctx, request, fold, fromSeq, body.on_disconnect === 'cancel');
      void reply.header('content-location', runPath(params.thread_id, started.runId));
      return { status: 200, body: finalValues(fold) };
    },
  }),
  defineRoute({
    method: 'GET',
    path: `${LANGGRAPH_PREFIX}/threads/:thread_id/runs`,
    operationId: 'langgraphListRuns',
    right: 'read',
    summary: "LangGraph: the thread's runs, newest first (every turn is one, whichever API started it)",
    params: threadParams,
    query: listRunsQuery,
    responses: { 200: { description: 'the runs (Run[])' } },
    errors: ERRORS,
    sessionOf: (params) => params.thread_id as string,
    handler: async (ctx, { params, query }) => {
      const thread = await readThread(ctx, params.thread_id);
      const now = Date.now();
      const logged = new Set(threadRuns(thread.events).map((run) => run.runId));
      const pending = (await ctx.client.waitingMessages(params.thread_id))
        .filter((id) => !logged.has(id))
        .map((id) => ({ runId: id, status: 'pending' as const, createdAt: now, updatedAt: now }));
      const runs = [...threadRuns(thread.events), ...pending]
        .reverse()
        .filter((run) => !query.status || run.status === query.status)
        .slice(query.offset, query.offset + query.limit);
      return { status: 200, body: runs.map((run) => runObject(params.thread_id, run)) };
    },
  }),
  defineRoute({
    method: 'GET',
    path: `${LANGGRAPH_PREFIX}/threads/:thread_id/runs/:run_id`,
    operationId: 'langgraphGetRun',
    right: 'read',
    summary: 'LangGraph: a run (status pending, running, success, error or interrupted)',
    params: runParams,
    query: noQuery,
    responses: { 200: { description: 'the run (Run)' } },
    errors: ERRORS,
    sessionOf: (params) => params.thread_id as string,
    handler: async (ctx, { params }) => {
      const thread = await readThread(ctx, params.thread_id);
      return { status: 200, body: runObject(params.thread_id, await findRun(ctx, thread, params.run_id)) };
    },
  }),
  defineRoute({
    method: 'GET',
    path: `${LANGGRAPH_PREFIX}/threads/:thread_id/runs/:run_id/join`,
    operationId: 'langgraphJoinRun',
    right: 'read',
    summary: "LangGraph: wait for a run to end; the thread's values after it",
    params: runParams,
    query: z.object({ cancel_on_disconnect: z.enum(['0', '1', 'true', 'false']).optional() }).strict(),
    responses: { 200: { description: 'the values ({messages})' } },
    errors: ERRORS,
    sessionOf: (params) => params.thread_id as string,
    handler: async (ctx, { params, request }) => {
      const thread = await readThread(ctx, params.thread_id);
      const run = await findRun(ctx, thread, params.run_id);
      const { fold, fromSeq } = replayRun(params.thread_id, params.run_id, anchorOf(run), ['values'], thread.events);
      await waitRun(ctx, request, fold, fromSeq);
      return { status: 200, body: finalValues(fold) };
    },
  }),
  defineRoute({
    method: 'GET',
    path: `${LANGGRAPH_PREFIX}/threads/:thread_id/runs/:run_id/stream`,
    operationId: 'langgraphJoinRunStream',
    right: 'read',
    summary:
      "LangGraph: rejoin a run's stream: after Last-Event-ID (or from the start), what was missed coalesced, then live",
    params: runParams,
    query: joinStreamQuery,
    headers: [
      { name: 'last-event-id', description: 'the id of the last frame received (`<seq>-<n>`)', schema: z.string() },
    ],
    responses: {
      200: { description: 'the run as Server-Sent Events', eventStream: 'as POST /threads/:id/runs/stream' },
    },
    errors: ERRORS,
    sessionOf: (params) => params.thread_id as string,
    handler: async (ctx, { params, query, request, reply }) => {
      const thread = await readThread(ctx, params.thread_id);
      const run = await findRun(ctx, thread, params.run_id);
      const modes = streamModesOf(query.stream_mode, 'stream_mode', ['values', 'updates', 'messages-tuple']);
      const last = request.headers['last-event-id'];
      const { fold, frames, fromSeq } = replayRun(params.thread_id, params.run_id, anchorOf(run), modes, thread.events);
      return streamRun(ctx, request, reply, {
        threadId: params.thread_id,
        runId: params.run_id,
        fold,
        frames,
        fromSeq,
        ...(typeof last === 'string' && last !== '' ? { lastEventId: last } : {}),
        coalesce: true,
        cancelOnDisconnect: query.cancel_on_disconnect === '1' || query.cancel_on_disconnect === 'true',
      });
    },
  }),
  defineRoute({
    method: 'POST',
    path: `${LANGGRAPH_PREFIX}/threads/:thread_id/runs/:run_id/cancel`,
    operationId: 'langgraphCancelRun',
    right: 'write',
    summary:
      'LangGraph: cancel a running run (its turn ends as cancelled; what it logged stays); wait=1 waits for it to end',
    params: runParams,
    query: cancelQuery,
    responses: { 202: { description: 'cancel sent' }, 204: { description: 'cancelled (wait=1)' } },
    errors: ERRORS,
    sessionOf: (params) => params.thread_id as string,
    handler: async (ctx, { params, query, request }) => {
      if (query.action === 'rollback')
        throw unsupported(
          'action',
          'rollback would delete the run from the log, which never loses what it holds; use interrupt',
        );
      const thread = await readThread(ctx, params.thread_id);
      const run = await findRun(ctx, thread, params.run_id);
      if (run.status !== 'running')
        throw new LangGraphError(
          409,
          `run ${params.run_id} is ${run.status}, not running; only a running run can be cancelled`,
          'run_not_running',
        );
      await ctx.client.cancel(params.thread_id);
      if (query.wait !== '1' && query.wait !== 'true') return { status: 202, body: undefined };
      const { fold, fromSeq } = replayRun(params.thread_id, params.run_id, anchorOf(run), ['values'], thread.events);
      await waitRun(ctx, request, fold, fromSeq);
      return { status: 204, body: undefined };
    },
  }),
];
