/**
 * LangGraph runs (`/langgraph/threads/:id/runs`): a run is a turn, folded from the log
 * (run-fold.ts). Started in the background, streamed or waited for; listed, read, joined, its
 * stream rejoined (`Last-Event-ID`: exact; what was missed comes coalesced, then the live tail)
 * and cancelled. `multitask_strategy` `reject` (default) answers a busy thread with 409,
 * `enqueue` queues the run as a turn of its own, `interrupt` cancels the running turn first.
 * Tool calls that wait for an answer end a run as an interrupt; a run with `command: {resume}`
 * answers them (resume.ts).
 */
import { randomUUID } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { z } from 'zod';
import { SessionlogError, TurnFold, type StoredEvent } from '../../session/index.js';
import { STREAMED, type RouteContext, type RouteResult } from '../route-table.js';
import { hijackEventStream } from '../sse.js';
import { followResponse, followUntilDone } from '../turn-stream/follow.js';
import { requireAssistant } from './assistants.js';
import { LangGraphError, notFound, toLangGraphErrorResponse, unsupported } from './errors.js';
import { inputMessages } from './messages.js';
import { namingPart, refuseForeignMedia } from '../media-parts.js';
import { answersOf } from './resume.js';
import {
  RunFold,
  STREAM_MODES,
  coalesceFrames,
  isAfter,
  type RunAnchor,
  type RunFrame,
  type StreamMode,
} from './run-fold.js';
import type { cancelQuery, joinStreamQuery, listRunsQuery, RunBody } from './schemas.js';
import { readThread, type Thread } from './thread-requests.js';
import {
  RESUME_BY,
  checkpointId,
  encodeMetadata,
  parseCheckpointId,
  pendingInterrupts,
  runObject,
  threadRuns,
  threadStatus,
  type RunRecord,
} from './threads.js';
import { runToolHints } from './tool-options.js';
import { webhookUrlProblem } from './webhooks.js';

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
  const { left } = await followUntilDone(request, ctx.client, fold, fromSeq, ctx.streams);
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
  const hints = runToolHints(body.config?.configurable ?? {});
  // Read (and its media checked) before a thread is created: a refused input leaves nothing behind.
  const messages = inputMessages(body.input, ctx.client.maxMediaBytes);
  for (const message of messages) refuseForeignMedia(message, tid);
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
    if (messages.length > 0)
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
  if (messages.length === 0)
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
  for (const [i, message] of messages.entries())
    await ctx.client
      .post(tid, message.text, {
        id: i === 0 ? runId : `${runId}.${i}`,
        ownTurn: i === 0,
        ...(i === 0 && hints ? { hints } : {}),
        ...(message.content ? { content: message.content } : {}),
      })
      .catch((error: unknown) => {
        throw namingPart(error, message);
      });
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

/** `POST /threads/:id/runs`: starts a run in the background; the Run, pending. */
export async function createRun(
  ctx: RouteContext,
  tid: string,
  body: RunBody,
  request: FastifyRequest,
  reply: FastifyReply,
) {
  const started = await beginRun(ctx, request, tid, body);
  const now = Date.now();
  void reply.header('content-location', runPath(tid, started.runId));
  return {
    ...runObject(tid, { runId: started.runId, status: 'pending', createdAt: now, updatedAt: now }, body.metadata ?? {}),
    multitask_strategy: body.multitask_strategy ?? 'reject',
  };
}

/** `POST /threads/:id/runs/stream`: starts a run and streams it. */
export async function streamNewRun(
  ctx: RouteContext,
  tid: string,
  body: RunBody,
  request: FastifyRequest,
  reply: FastifyReply,
): Promise<typeof STREAMED> {
  const started = await beginRun(ctx, request, tid, body);
  const { fold, frames, fromSeq } = replayRun(tid, started.runId, started.anchor, started.modes, started.events);
  return streamRun(ctx, request, reply, {
    threadId: tid,
    runId: started.runId,
    fold,
    frames,
    fromSeq,
    coalesce: false,
    cancelOnDisconnect: body.on_disconnect === 'cancel',
  });
}

/** `POST /threads/:id/runs/wait`: starts a run and waits for it; the thread's values after it. */
export async function waitNewRun(
  ctx: RouteContext,
  tid: string,
  body: RunBody,
  request: FastifyRequest,
  reply: FastifyReply,
) {
  const started = await beginRun(ctx, request, tid, body);
  const { fold, fromSeq } = replayRun(tid, started.runId, started.anchor, ['values'], started.events);
  await waitRun(ctx, request, fold, fromSeq, body.on_disconnect === 'cancel');
  void reply.header('content-location', runPath(tid, started.runId));
  return finalValues(fold);
}

/** `GET /threads/:id/runs`: the thread's runs, newest first (every turn is one, whichever API started it). */
export async function listRuns(ctx: RouteContext, tid: string, query: z.output<typeof listRunsQuery>) {
  const thread = await readThread(ctx, tid);
  const now = Date.now();
  const logged = new Set(threadRuns(thread.events).map((run) => run.runId));
  const pending = (await ctx.client.waitingMessages(tid))
    .filter((id) => !logged.has(id))
    .map((id) => ({ runId: id, status: 'pending' as const, createdAt: now, updatedAt: now }));
  const runs = [...threadRuns(thread.events), ...pending]
    .reverse()
    .filter((run) => !query.status || run.status === query.status)
    .slice(query.offset, query.offset + query.limit);
  return runs.map((run) => runObject(tid, run));
}

/** `GET /threads/:id/runs/:run_id`: a run. */
export async function getRun(ctx: RouteContext, tid: string, rid: string) {
  const thread = await readThread(ctx, tid);
  return runObject(tid, await findRun(ctx, thread, rid));
}

/** `GET /threads/:id/runs/:run_id/join`: waits for a run to end; the thread's values after it. */
export async function joinRun(ctx: RouteContext, tid: string, rid: string, request: FastifyRequest) {
  const thread = await readThread(ctx, tid);
  const run = await findRun(ctx, thread, rid);
  const { fold, fromSeq } = replayRun(tid, rid, anchorOf(run), ['values'], thread.events);
  await waitRun(ctx, request, fold, fromSeq);
  return finalValues(fold);
}

/** `GET /threads/:id/runs/:run_id/stream`: rejoins a run's stream after Last-Event-ID, what was missed coalesced. */
export async function joinRunStream(
  ctx: RouteContext,
  tid: string,
  rid: string,
  query: z.output<typeof joinStreamQuery>,
  request: FastifyRequest,
  reply: FastifyReply,
): Promise<typeof STREAMED> {
  const thread = await readThread(ctx, tid);
  const run = await findRun(ctx, thread, rid);
  const modes = streamModesOf(query.stream_mode, 'stream_mode', ['values', 'updates', 'messages-tuple']);
  const last = request.headers['last-event-id'];
  const { fold, frames, fromSeq } = replayRun(tid, rid, anchorOf(run), modes, thread.events);
  return streamRun(ctx, request, reply, {
    threadId: tid,
    runId: rid,
    fold,
    frames,
    fromSeq,
    ...(typeof last === 'string' && last !== '' ? { lastEventId: last } : {}),
    coalesce: true,
    cancelOnDisconnect: query.cancel_on_disconnect === '1' || query.cancel_on_disconnect === 'true',
  });
}

/** `POST /threads/:id/runs/:run_id/cancel`: cancels a running run (202), and with wait=1 waits for it to end (204). */
export async function cancelRun(
  ctx: RouteContext,
  tid: string,
  rid: string,
  query: z.output<typeof cancelQuery>,
  request: FastifyRequest,
): Promise<RouteResult> {
  if (query.action === 'rollback')
    throw unsupported(
      'action',
      'rollback would delete the run from the log, which never loses what it holds; use interrupt',
    );
  const thread = await readThread(ctx, tid);
  const run = await findRun(ctx, thread, rid);
  if (run.status !== 'running')
    throw new LangGraphError(
      409,
      `run ${rid} is ${run.status}, not running; only a running run can be cancelled`,
      'run_not_running',
    );
  await ctx.client.cancel(tid);
  if (query.wait !== '1' && query.wait !== 'true') return { status: 202, body: undefined };
  const { fold, fromSeq } = replayRun(tid, rid, anchorOf(run), ['values'], thread.events);
  await waitRun(ctx, request, fold, fromSeq);
  return { status: 204, body: undefined };
}
