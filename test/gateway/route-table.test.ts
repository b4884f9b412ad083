/**
 * The one route table (src/gateway/route-table.ts) with an API of neither built-in shape: a
 * table mounted under its own prefix with `{detail}` errors (as LangGraph's API answers) is
 * registered by one call, parses requests with its schemas and answers every failure under its
 * prefix in its own shape, wraps each request in a span, lets a handler stream its own reply,
 * and is documented in the OpenAPI document beside the native API.
 */
import { WebhookSender } from '../../src/gateway/langgraph/webhooks.js';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { SessionClient } from '../../src/client/session-client.js';
import { NATIVE_TABLE } from '../../src/gateway/index.js';
import {
  STREAMED,
  buildOpenApiDocument,
  defineRoute,
  noParams,
  noQuery,
  registerRouteTable,
  type ErrorShape,
  type RequestTracer,
  type RouteContext,
  type RouteTable,
} from '../../src/gateway/route-table.js';
import { createStreamTokenSigner } from '../../src/gateway/stream-token.js';

type DetailBody = { detail: string };

class DetailError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

const DETAIL_ERRORS: ErrorShape<DetailBody> = {
  component: { name: 'DetailError', schema: z.object({ detail: z.string() }), description: '`{detail}` errors' },
  parse(schema, value, where) {
    const parsed = schema.safeParse(value);
    if (parsed.success) return parsed.data;
    throw new DetailError(422, `${where}: ${parsed.error.issues[0]!.message}`);
  },
  toReply: (error) =>
    error instanceof DetailError
      ? { status: error.status, body: { detail: error.message }, headers: error.headers, logDetail: false }
      : { status: 500, body: { detail: 'internal' }, headers: {}, logDetail: true },
  unknownRoute: (method, path, allowed) =>
    allowed.length > 0
      ? new DetailError(405, `${method} ${path}: use ${allowed.join(', ')}`, { allow: allowed.join(', ') })
      : new DetailError(404, `no ${path}`),
};

const threadParams = z.strictObject({ thread_id: z.string().regex(/^[a-z0-9-]+$/) });

const DETAIL_TABLE: RouteTable<DetailBody> = {
  prefix: '/toy',
  errors: DETAIL_ERRORS,
  routes: [
    defineRoute({
      method: 'POST',
      path: '/toy/threads',
      operationId: 'toyCreateThread',
      right: 'write',
      summary: 'create a thread',
      params: noParams,
      query: noQuery,
      body: z.strictObject({ name: z.string().min(1) }),
      responses: { 200: { description: 'the thread', schema: z.object({ name: z.string() }) } },
      errors: [422],
      handler: async (_ctx, { body }) => ({ status: 200, body: { name: body.name } }),
    }),
    defineRoute({
      method: 'GET',
      path: '/toy/threads/:thread_id',
      operationId: 'toyGetThread',
      right: 'read',
      summary: 'a thread',
      params: threadParams,
      query: z.strictObject({ turn: z.enum(['1', '2']).transform(Number).optional() }),
      responses: { 200: { description: 'the thread' } },
      errors: [404, 422],
      sessionOf: (params) => `session-of-${String(params.thread_id)}`,
      handler: async (_ctx, { params, query }) => ({ status: 200, body: { id: params.thread_id, turn: query.turn } }),
    }),
    defineRoute({
      method: 'GET',
      path: '/toy/threads/:thread_id/stream',
      operationId: 'toyStreamThread',
      right: 'read',
      summary: 'the thread as a stream the handler writes itself',
      params: threadParams,
      query: noQuery,
      responses: { 200: { description: 'text', eventStream: 'one line' } },
      errors: [422],
      handler: async (_ctx, { params, reply }) => {
        reply.hijack();
        reply.raw.writeHead(200, { 'content-type': 'text/event-stream' });
        reply.raw.end(`data: ${params.thread_id}\n\n`);
        return STREAMED;
      },
    }),
  ],
};

const spans: Array<{ method: string; route: string; sessionId?: string; status?: number }> = [];
const tracer: RequestTracer = {
  traceRequest: async (request, run) => {
    const span: (typeof spans)[number] = { ...request };
    spans.push(span);
    return run({ setTurn: () => {}, setStatus: (status) => (span.status = status) });
  },
};

// The toy routes use nothing of the context; a gateway's handlers would reach sessions through its client.
const context: RouteContext = {
  client: {} as SessionClient,
  sseHeartbeatMs: 15_000,
  streams: new Set(),
  openapi: () => ({}),
  streamTokens: createStreamTokenSigner(undefined),
  webhooks: new WebhookSender(undefined, undefined),
  defaults: {},
  models: { names: {}, unknown: 'default' },
};

let app: FastifyInstance;
let base: string;
beforeAll(async () => {
  app = Fastify();
  registerRouteTable(app, DETAIL_TABLE, context, tracer);
  await app.listen({ host: '127.0.0.1', port: 0 });
  base = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
});
afterAll(async () => {
  await app?.close();
});

const json = async (response: Response) => ({ status: response.status, body: (await response.json()) as unknown });

describe('a route table registered by one call', () => {
  it('parses path, query and body with the route schemas and answers with the handler result', async () => {
    expect(
      await json(
        await fetch(`${base}/toy/threads`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ name: 'a' }),
        }),
      ),
    ).toEqual({ status: 200, body: { name: 'a' } });
    expect(await json(await fetch(`${base}/toy/threads/t-1?turn=2`))).toEqual({
      status: 200,
      body: { id: 't-1', turn: 2 },
    });
  });

  it('answers a request its schemas refuse in the table error shape, naming the part', async () => {
    expect(await json(await fetch(`${base}/toy/threads/T_1`))).toMatchObject({
      status: 422,
      body: { detail: expect.stringMatching(/^path: /) },
    });
    expect(await json(await fetch(`${base}/toy/threads/t-1?turn=3`))).toMatchObject({
      status: 422,
      body: { detail: expect.stringMatching(/^query: /) },
    });
    const noName = await fetch(`${base}/toy/threads`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({}),
    });
    expect(await json(noName)).toMatchObject({ status: 422, body: { detail: expect.stringMatching(/^body: /) } });
  });

  it('answers unknown paths and methods under its prefix in its own shape, with the allowed methods', async () => {
    expect(await json(await fetch(`${base}/toy/assistants`))).toEqual({
      status: 404,
      body: { detail: 'no /toy/assistants' },
    });
    const wrongMethod = await fetch(`${base}/toy/threads`, { method: 'DELETE' });
    expect(wrongMethod.headers.get('allow')).toBe('POST');
    expect(await json(wrongMethod)).toEqual({ status: 405, body: { detail: 'DELETE /toy/threads: use POST' } });
  });

  it('lets a handler stream its own reply', async () => {
    const response = await fetch(`${base}/toy/threads/t-2/stream`);
    expect(response.headers.get('content-type')).toBe('text/event-stream');
    expect(await response.text()).toBe('data: t-2\n\n');
  });

  it('wraps each request in a span naming its route, its session and its status', async () => {
    spans.length = 0;
    await fetch(`${base}/toy/threads/t-3`);
    await fetch(`${base}/toy/threads/t-3/stream`);
    expect(spans).toEqual([
      { method: 'GET', route: '/toy/threads/:thread_id', sessionId: 'session-of-t-3', status: 200 },
      // No `id` param and no sessionOf: no session; a streamed reply sets no status of its own.
      { method: 'GET', route: '/toy/threads/:thread_id/stream' },
    ]);
  });

  it('is documented beside the native API, its errors by its own component', () => {
    const document = buildOpenApiDocument([NATIVE_TABLE, DETAIL_TABLE], {
      title: 't',
      version: '0',
      description: 'd',
    }) as {
      paths: Record<string, Record<string, { operationId: string; responses: Record<string, unknown> }>>;
      components: { schemas: Record<string, { description?: string }> };
    };
    expect(document.paths['/toy/threads/{thread_id}']!.get!.operationId).toBe('toyGetThread');
    expect(document.paths['/toy/threads/{thread_id}']!.get!.responses['422']).toMatchObject({
      content: { 'application/json': { schema: { $ref: '#/components/schemas/DetailError' } } },
    });
    expect(document.paths['/v1/sessions/{id}']!.get!.operationId).toBe('getSession');
    expect(Object.keys(document.components.schemas)).toEqual(['Error', 'DetailError']);
    expect(document.components.schemas.DetailError!.description).toBe('`{detail}` errors');
  });

  it('refuses a route that lies outside its table prefix', () => {
    const stray = { ...DETAIL_TABLE, routes: [{ ...DETAIL_TABLE.routes[0]!, path: '/elsewhere/threads' }] };
    expect(() => registerRouteTable(Fastify(), stray, context, undefined)).toThrow(
      /toyCreateThread \(\/elsewhere\/threads\) lies outside its table's prefix \/toy/,
    );
  });
});
