/**
 * The gateway's route table (DESIGN §8). Each route names its params, query, body and
 * responses as zod schemas: the server parses requests with them and the OpenAPI document is
 * generated from the same table, so the two cannot drift apart.
 */
import { Buffer } from 'node:buffer';
import { randomUUID } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { z } from 'zod';
import type { SessionClient } from '../client/session-client.js';
import type { SessionStore } from '../persistence/store.js';
import { SESSION_FORMAT_VERSION, SessionlogError, type SessionHeader } from '../session/index.js';
import { GatewayError } from './errors.js';
import {
  acceptedMessageResponse,
  cancelResponse,
  compactResponse,
  createSessionBody,
  emptyBody,
  eventsQuery,
  eventsResponse,
  forkBody,
  healthResponse,
  lastEventIdSchema,
  messagesResponse,
  noParams,
  noQuery,
  openApiResponse,
  postMessageBody,
  postMessageQuery,
  replyResponse,
  resumeResponse,
  sessionDetailResponse,
  sessionListResponse,
  sessionParams,
  sessionResponse,
  transcriptResponse,
} from './schemas.js';
import { checkReadiness, probeStore, probeTemporal, readinessResponse } from './readiness.js';
import { streamEvents, wantsEventStream, type StreamRegistry } from './sse.js';

/** What route handlers work with. */
export type RouteContext = {
  client: SessionClient;
  store: SessionStore;
  /** Largest accepted user message (UTF-8 bytes); longer ones are refused with 422 before they reach the workflow. */
  maxMessageBytes: number;
  sseHeartbeatMs: number;
  streams: StreamRegistry;
  /** The OpenAPI document of this gateway. */
  openapi: () => unknown;
};

export type HttpMethod = 'GET' | 'POST';

/** A documented response of a route. */
export type ResponseSpec = { description: string; schema?: z.ZodType; eventStream?: string };

/** What a handler produces: a JSON reply, or STREAMED when it wrote the response itself. */
export type RouteResult = { status: number; body: unknown } | typeof STREAMED;
export const STREAMED = Symbol('streamed');

type HandlerInput<P extends z.ZodType, Q extends z.ZodType, B extends z.ZodType> = {
  params: z.output<P>;
  query: z.output<Q>;
  body: z.output<B>;
  request: FastifyRequest;
  reply: FastifyReply;
};

/** A route as the server and the OpenAPI generator see it. */
export type RouteSpec = {
  method: HttpMethod;
  /** Fastify path syntax (`:id`). */
  path: string;
  operationId: string;
  summary: string;
  /** No bearer token needed. */
  public?: true;
  params: z.ZodType;
  query: z.ZodType;
  /** Absent for routes that take no body. */
  body?: z.ZodType;
  headers?: Array<{ name: string; description: string; schema: z.ZodType }>;
  responses: Record<number, ResponseSpec>;
  /** Error statuses this route can answer with (documented with the error shape). */
  errors: number[];
  handler(ctx: RouteContext, input: HandlerInput<z.ZodType, z.ZodType, z.ZodType>): Promise<RouteResult>;
};

/** Types a route's handler by its schemas, then erases them for the table. */
function defineRoute<P extends z.ZodType, Q extends z.ZodType, B extends z.ZodType = z.ZodUndefined>(
  spec: Omit<RouteSpec, 'params' | 'query' | 'body' | 'handler'> & {
    params: P;
    query: Q;
    body?: B;
    handler(ctx: RouteContext, input: HandlerInput<P, Q, B>): Promise<RouteResult>;
  },
): RouteSpec {
  return spec as unknown as RouteSpec;
}

const AUTH_ERRORS = [401];
const SESSION_ERRORS = [400, 401, 404];

async function requireSession(ctx: RouteContext, id: string): Promise<SessionHeader> {
  if (!(await ctx.store.exists(id))) {
    throw new SessionlogError('SESSION_NOT_FOUND', `session ${id} does not exist; create it with POST /v1/sessions or list sessions with GET /v1/sessions`);
  }
  return ctx.store.header(id);
}

/** The checks the workflow's send validator makes, made here so a posted (not awaited) message is refused visibly. */
function assertAcceptableText(text: string, maxBytes: number): void {
  if (text.trim().length === 0) throw new SessionlogError('EMPTY_MESSAGE', 'message text must not be empty or blank; send some text in "text"');
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes > maxBytes) throw new SessionlogError('MESSAGE_TOO_LARGE', `message is ${bytes} bytes; the limit is ${maxBytes}; split it or attach it as a file`);
}

const ok = (body: unknown): RouteResult => ({ status: 200, body });

/** Every route the gateway serves. */
export const ROUTES: readonly RouteSpec[] = [
  defineRoute({
    method: 'GET',
    path: '/healthz',
    operationId: 'health',
    summary: 'Liveness probe (no token needed)',
    public: true,
    params: noParams,
    query: noQuery,
    responses: { 200: { description: 'the gateway is up', schema: healthResponse } },
    errors: [400],
    handler: async () => ok({ ok: true }),
  }),
  defineRoute({
    method: 'GET',
    path: '/readyz',
    operationId: 'ready',
    summary: 'Readiness probe: the store and Temporal answer (no token needed)',
    public: true,
    params: noParams,
    query: noQuery,
    responses: {
      200: { description: 'the store and the Temporal frontend answer', schema: readinessResponse },
      503: { description: 'a dependency does not answer; `reason` names it', schema: readinessResponse },
    },
    errors: [400],
    handler: async (ctx) => {
      const report = await checkReadiness({ store: () => probeStore(ctx.store), temporal: () => probeTemporal(ctx.client.temporal.connection) });
      return { status: report.ready ? 200 : 503, body: report };
    },
  }),
  defineRoute({
    method: 'GET',
    path: '/v1/openapi.json',
    operationId: 'openapi',
    summary: 'This OpenAPI 3.1 document',
    params: noParams,
    query: noQuery,
    responses: { 200: { description: 'the OpenAPI document', schema: openApiResponse } },
    errors: [400, ...AUTH_ERRORS],
    handler: async (ctx) => ok(ctx.openapi()),
  }),
  defineRoute({
    method: 'POST',
    path: '/v1/sessions',
    operationId: 'createSession',
    summary: 'Create a session and start its workflow',
    params: noParams,
    query: noQuery,
    body: createSessionBody,
    responses: { 201: { description: 'the new session', schema: sessionResponse } },
    errors: [400, 401, 409, 413, 415],
    handler: async (ctx, { body }) => {
      const sessionId = body?.id ?? randomUUID();
      const header: SessionHeader = { version: SESSION_FORMAT_VERSION, id: sessionId, createdAt: Date.now(), ...(body?.agent ? { agent: body.agent } : {}) };
      // Creating the header first makes a taken id a clean 409 even when two requests race.
      await ctx.store.create(header);
      const started = await ctx.client.start({ sessionId, ...(body?.agent ? { agent: body.agent } : {}) });
      return { status: 201, body: { session: started.header } };
    },
  }),
  defineRoute({
    method: 'GET',
    path: '/v1/sessions',
    operationId: 'listSessions',
    summary: 'List the headers of every stored session',
    params: noParams,
    query: noQuery,
    responses: { 200: { description: 'session headers', schema: sessionListResponse } },
    errors: [400, ...AUTH_ERRORS],
    handler: async (ctx) => ok({ sessions: await ctx.store.list() }),
  }),
  defineRoute({
    method: 'GET',
    path: '/v1/sessions/:id',
    operationId: 'getSession',
    summary: "A session's header and, when its workflow runs, its live status",
    params: sessionParams,
    query: noQuery,
    responses: { 200: { description: 'header and status', schema: sessionDetailResponse } },
    errors: SESSION_ERRORS,
    handler: async (ctx, { params }) => {
      const session = await requireSession(ctx, params.id);
      let status = null;
      if (await ctx.client.isRunning(params.id)) {
        try {
          status = await ctx.client.status(params.id);
        } catch (error) {
          // The run ended between the two calls: report it as not running.
          if (!(error instanceof SessionlogError && error.code === 'SESSION_NOT_FOUND')) throw error;
        }
      }
      return ok({ session, status });
    },
  }),
  defineRoute({
    method: 'POST',
    path: '/v1/sessions/:id/messages',
    operationId: 'postMessage',
    summary: 'Send a user message (queued at once, or with ?wait=true answered with the reply)',
    params: sessionParams,
    query: postMessageQuery,
    body: postMessageBody,
    responses: {
      200: { description: 'with ?wait=true: the turn that answered and its reply', schema: replyResponse },
      202: { description: 'the message is queued', schema: acceptedMessageResponse },
    },
    errors: [...SESSION_ERRORS, 409, 413, 415, 422],
    handler: async (ctx, { params, query, body }) => {
      await requireSession(ctx, params.id);
      assertAcceptableText(body.text, ctx.maxMessageBytes);
      const options = body.id !== undefined ? { id: body.id } : {};
      if (query.wait === 'true') return ok(await ctx.client.send(params.id, body.text, options));
      return { status: 202, body: await ctx.client.post(params.id, body.text, options) };
    },
  }),
  defineRoute({
    method: 'GET',
    path: '/v1/sessions/:id/messages',
    operationId: 'getHistory',
    summary: 'The derived model history (what the model would be sent next)',
    params: sessionParams,
    query: noQuery,
    responses: { 200: { description: 'derived messages', schema: messagesResponse } },
    errors: SESSION_ERRORS,
    handler: async (ctx, { params }) => {
      await requireSession(ctx, params.id);
      return ok({ messages: await ctx.client.history(params.id) });
    },
  }),
  defineRoute({
    method: 'GET',
    path: '/v1/sessions/:id/transcript',
    operationId: 'getTranscript',
    summary: 'The human transcript: every user, assistant and tool message as appended',
    params: sessionParams,
    query: noQuery,
    responses: { 200: { description: 'message events in log order', schema: transcriptResponse } },
    errors: SESSION_ERRORS,
    handler: async (ctx, { params }) => {
      await requireSession(ctx, params.id);
      return ok({ events: await ctx.client.transcript(params.id) });
    },
  }),
  defineRoute({
    method: 'GET',
    path: '/v1/sessions/:id/events',
    operationId: 'getEvents',
    summary: 'Stored events from a seq (JSON), or a live SSE tail with Accept: text/event-stream',
    params: sessionParams,
    query: eventsQuery,
    headers: [
      { name: 'Last-Event-ID', description: 'SSE reconnect: the seq of the last event received; the stream resumes after it', schema: lastEventIdSchema },
    ],
    responses: {
      200: {
        description: 'events',
        schema: eventsResponse,
        eventStream: 'one SSE event per log event: `id: <seq>`, `event: <type>`, `data: <event JSON>`; `: heartbeat` comments every 15 s',
      },
    },
    errors: SESSION_ERRORS,
    handler: async (ctx, { params, query, request, reply }) => {
      await requireSession(ctx, params.id);
      if (!wantsEventStream(request)) return ok({ events: await ctx.client.events(params.id, query.from ?? 0, query.limit) });
      const lastEventId = request.headers['last-event-id'];
      let fromSeq = query.from ?? 0;
      if (lastEventId !== undefined) {
        const parsed = lastEventIdSchema.safeParse(lastEventId);
        if (!parsed.success) throw new GatewayError('INVALID_REQUEST', 'Last-Event-ID must be the seq (a whole number) of the last event received');
        fromSeq = parsed.data + 1;
      }
      await streamEvents(request, reply, {
        client: ctx.client,
        sessionId: params.id,
        fromSeq,
        limit: query.limit,
        heartbeatMs: ctx.sseHeartbeatMs,
        streams: ctx.streams,
      });
      return STREAMED;
    },
  }),
  defineRoute({
    method: 'POST',
    path: '/v1/sessions/:id/compact',
    operationId: 'compactSession',
    summary: 'Run a manual compaction when the session is idle',
    params: sessionParams,
    query: noQuery,
    body: emptyBody,
    responses: { 200: { description: 'what the compaction shadowed, or null', schema: compactResponse } },
    errors: [...SESSION_ERRORS, 409, 415],
    handler: async (ctx, { params }) => {
      await requireSession(ctx, params.id);
      return ok({ compaction: await ctx.client.compact(params.id) });
    },
  }),
  defineRoute({
    method: 'POST',
    path: '/v1/sessions/:id/fork',
    operationId: 'forkSession',
    summary: "Fork a session: a new session seeded with the parent's log up to a seq",
    params: sessionParams,
    query: noQuery,
    body: forkBody,
    responses: { 201: { description: 'the child session; its header names the parent', schema: sessionResponse } },
    errors: [...SESSION_ERRORS, 409, 413, 415],
    handler: async (ctx, { params, body }) => {
      await requireSession(ctx, params.id);
      const forked = await ctx.client.fork(params.id, { ...(body?.id !== undefined ? { childId: body.id } : {}), ...(body?.at !== undefined ? { at: body.at } : {}) });
      return { status: 201, body: { session: forked.header } };
    },
  }),
  defineRoute({
    method: 'POST',
    path: '/v1/sessions/:id/cancel',
    operationId: 'cancelTurn',
    summary: 'Abort the running turn (its partial reply is logged as interrupted)',
    params: sessionParams,
    query: noQuery,
    body: emptyBody,
    responses: { 200: { description: 'whether a cancel was sent to a running workflow', schema: cancelResponse } },
    errors: [...SESSION_ERRORS, 415],
    handler: async (ctx, { params }) => {
      await requireSession(ctx, params.id);
      if (!(await ctx.client.isRunning(params.id))) return ok({ cancelRequested: false });
      await ctx.client.cancel(params.id);
      return ok({ cancelRequested: true });
    },
  }),
  defineRoute({
    method: 'POST',
    path: '/v1/sessions/:id/resume',
    operationId: 'resumeSession',
    summary: 'Start a run for a session whose workflow is gone (no-op when one runs)',
    params: sessionParams,
    query: noQuery,
    body: emptyBody,
    responses: { 200: { description: 'the run', schema: resumeResponse } },
    errors: [...SESSION_ERRORS, 415],
    handler: async (ctx, { params }) => {
      await requireSession(ctx, params.id);
      return ok(await ctx.client.resume(params.id));
    },
  }),
];
