/**
 * The LangGraph Agent Server subset (`/langgraph`, issue 25): its route table. What
 * `@langchain/langgraph-sdk`'s `Client` (and `useStream` over it) calls, with
 * `apiUrl: '<gateway>/langgraph'`.
 *
 * - One assistant, `agent` (the workers' configured agent): assistants.ts.
 * - Threads are sessions: create (`if_exists`), get, patch (metadata), delete (= erase, DESIGN
 *   §4.2), search (metadata, status, ids), copy (= fork), state (now, or at a checkpoint:
 *   the log's length at a turn's end), history (checkpoints newest first): thread-requests.ts.
 * - Runs are turns: create, stream, wait, list, get, join, rejoin the stream, cancel: runs.ts.
 * - What only a LangGraph graph can honour (node names in `interrupt_before`, state keys other
 *   than `messages`, a foreign `checkpoint_id`, `context`, `after_seconds`…) is a 422 naming it.
 */
import { z } from 'zod';
import { defineRoute, noParams, noQuery, type RouteSpec } from '../route-table.js';
import { assistantObject, requireAssistant, searchAssistants } from './assistants.js';
import { cancelRun, createRun, getRun, joinRun, joinRunStream, listRuns, streamNewRun, waitNewRun } from './runs.js';
import {
  assistantParams,
  cancelQuery,
  createThreadBody,
  historyBody,
  joinStreamQuery,
  listRunsQuery,
  patchThreadBody,
  runBody,
  runParams,
  searchAssistantsBody,
  searchThreadsBody,
  threadId,
  threadParams,
} from './schemas.js';
import {
  copyThread,
  createThread,
  deleteThread,
  getThread,
  patchThread,
  refuseStateUpdate,
  searchThreads,
  stateAt,
  stateHistory,
  stateNow,
} from './thread-requests.js';

export const LANGGRAPH_PREFIX = '/langgraph';

const ERRORS = [400, 401, 404, 409, 413, 415, 422, 429, 500, 503];

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
    handler: async (ctx, { body }) => ({ status: 200, body: searchAssistants(ctx, body) }),
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
    handler: async (ctx, { body }) => ({ status: 200, body: await createThread(ctx, body) }),
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
    handler: async (ctx, { body }) => ({ status: 200, body: await searchThreads(ctx, body) }),
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
    handler: async (ctx, { params }) => ({ status: 200, body: await getThread(ctx, params.thread_id) }),
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
    handler: async (ctx, { params, body }) => ({ status: 200, body: await patchThread(ctx, params.thread_id, body) }),
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
      await deleteThread(ctx, params.thread_id);
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
    handler: async (ctx, { params }) => ({ status: 200, body: await copyThread(ctx, params.thread_id) }),
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
    handler: async (ctx, { params }) => ({ status: 200, body: await stateNow(ctx, params.thread_id) }),
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
    handler: async (ctx, { params }) => ({
      status: 200,
      body: await stateAt(ctx, params.thread_id, params.checkpoint_id),
    }),
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
    handler: async () => refuseStateUpdate(),
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
    handler: async (ctx, { params, body }) => ({ status: 200, body: await stateHistory(ctx, params.thread_id, body) }),
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
    handler: async (ctx, { params, body, request, reply }) => ({
      status: 200,
      body: await createRun(ctx, params.thread_id, body, request, reply),
    }),
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
    handler: async (ctx, { params, body, request, reply }) => streamNewRun(ctx, params.thread_id, body, request, reply),
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
    handler: async (ctx, { params, body, request, reply }) => ({
      status: 200,
      body: await waitNewRun(ctx, params.thread_id, body, request, reply),
    }),
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
    handler: async (ctx, { params, query }) => ({ status: 200, body: await listRuns(ctx, params.thread_id, query) }),
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
    handler: async (ctx, { params }) => ({ status: 200, body: await getRun(ctx, params.thread_id, params.run_id) }),
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
    handler: async (ctx, { params, request }) => ({
      status: 200,
      body: await joinRun(ctx, params.thread_id, params.run_id, request),
    }),
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
    handler: async (ctx, { params, query, request, reply }) =>
      joinRunStream(ctx, params.thread_id, params.run_id, query, request, reply),
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
    handler: async (ctx, { params, query, request }) => cancelRun(ctx, params.thread_id, params.run_id, query, request),
  }),
];
