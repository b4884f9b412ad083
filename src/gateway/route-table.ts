/**
 * One route table for every HTTP API of the gateway (DESIGN §2, §8): the native API (`/v1`),
 * the OpenAI-compatible one (`/openai/v1`), and any API added later, each a `RouteTable` of
 * routes and the error shape the API answers in. Each route names its params, query, body and
 * responses as zod schemas: `registerRouteTable` parses requests with them and
 * `buildOpenApiDocument` describes the same tables, so a route cannot exist without being
 * described, nor be described differently from how it is parsed.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { SessionClient } from '../client/session-client.js';
import type { StreamRegistry } from './sse.js';
import type { StreamTokenSigner } from './stream-token.js';
import type { WebhookSender } from './langgraph/webhooks.js';
import { OPEN_ACCESS, type RouteAccess, type Right } from './access.js';
import { GatewayError } from './errors.js';
import { tenantOf } from '../session/index.js';

/** The model and system prompt the workers give a session whose header names none. */
export type AgentDefaults = { model?: string | undefined; system?: string | undefined };

/** What model names requests may use (openai/models.ts). */
export type ModelRouting = {
  /** Each name a request may use, with the model it runs (itself, or what it aliases). */
  names: Readonly<Record<string, string>>;
  /** A name not listed: run the default model (`default`) or refuse it (`refuse`). */
  unknown: 'default' | 'refuse';
  /**
   * The models (as `names` maps to them) that refuse a forced tool choice (DeepSeek in thinking
   * mode: model/tool-choice.ts): a request that forces one on them is a 400 naming `tool_choice`.
   */
  unforcedToolChoice?: readonly string[];
};

/** What route handlers work with: sessions only through the client. */
export type RouteContext = {
  client: SessionClient;
  sseHeartbeatMs: number;
  streams: StreamRegistry;
  /** The OpenAPI document of this gateway. */
  openapi: () => unknown;
  /** Mints the signed query tokens that let a browser EventSource open the events route. */
  streamTokens: StreamTokenSigner;
  /** The workers' agent defaults, for APIs that report or check a session's model and instructions. */
  defaults: AgentDefaults;
  /** The model names requests may use and what they run (openai/models.ts). */
  models: ModelRouting;
  /** Delivers the LangGraph API's signed run webhooks (langgraph/webhooks.ts). */
  webhooks: WebhookSender;
};

export type HttpMethod = 'GET' | 'POST' | 'PATCH' | 'DELETE';

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

/** A route as its registration and the OpenAPI generator see it. */
export type RouteSpec = {
  method: HttpMethod;
  /** Fastify path syntax (`:id`), the table's prefix included. */
  path: string;
  operationId: string;
  summary: string;
  /** No bearer token needed. */
  public?: true;
  /**
   * The right a token needs (access.ts), from what the route does, not its method: a search or
   * a history the LangGraph API asks for by POST is a read; minting a stream token to read a
   * session's events is a read. Public routes read too (they need no token at all).
   */
  right: Right;
  params: z.ZodType;
  query: z.ZodType;
  /** Absent for routes that take no body. */
  body?: z.ZodType;
  headers?: Array<{ name: string; description: string; schema: z.ZodType }>;
  responses: Record<number, ResponseSpec>;
  /** Error statuses this route can answer with (documented with the table's error shape). */
  errors: number[];
  /** Refuses, before the body's schema sees it, what that schema's first issue would name less clearly. */
  precheckBody?(body: unknown): void;
  /** The session a request concerns, for its span, from the raw path params; default: the `id` param. */
  sessionOf?(params: Record<string, unknown>): string | undefined;
  handler(ctx: RouteContext, input: HandlerInput<z.ZodType, z.ZodType, z.ZodType>): Promise<RouteResult>;
};

/** Types a route's handler by its schemas, then erases them for the table. */
export function defineRoute<P extends z.ZodType, Q extends z.ZodType, B extends z.ZodType = z.ZodUndefined>(
  spec: Omit<RouteSpec, 'params' | 'query' | 'body' | 'handler'> & {
    params: P;
    query: Q;
    body?: B;
    handler(ctx: RouteContext, input: HandlerInput<P, Q, B>): Promise<RouteResult>;
  },
): RouteSpec {
  return spec as unknown as RouteSpec;
}

/** The params of a route without path parameters, and the query of one that takes none. */
export const noParams = z.strictObject({});
export const noQuery = z.strictObject({});

/** Where in the request a value was parsed from. */
export type RequestPart = 'path' | 'query' | 'body';

/** What to send for a failure, in an API's error shape, and whether its detail must be logged (server faults). */
export type ErrorReply<Body> = { status: number; body: Body; headers: Record<string, string>; logDetail: boolean };

/** How an API answers what goes wrong, `Body` being its error body. */
export type ErrorShape<Body> = {
  /** The OpenAPI component its error responses refer to, with its schema and description. */
  component: { name: string; schema: z.ZodType; description: string };
  /** Parses one part of a request, or throws the API's 400 naming what is wrong. */
  parse<T extends z.ZodType>(schema: T, value: unknown, where: RequestPart): z.output<T>;
  /** Any thrown value as the API's error reply. */
  toReply(error: unknown): ErrorReply<Body>;
  /** The error for a path no route serves (`allowed` empty), or a method the path does not allow. */
  unknownRoute(method: string, path: string, allowed: readonly string[]): Error;
};

/** One HTTP API: its routes and its error shape. */
export type RouteTable<Body = unknown> = {
  /**
   * Where the API is mounted. A table with a prefix is registered in its own fastify scope,
   * so that everything under the prefix (a bad body, a wrong token, an unknown route) is
   * answered in its error shape; the table without one is the gateway's own, whose error and
   * not-found handlers answer in that table's shape.
   */
  prefix: string;
  routes: readonly RouteSpec[];
  errors: ErrorShape<Body>;
};

/** The request's trace span as a route sees it. */
export type RequestSpan = { setTurn(turn: number): void; setStatus(status: number): void };

/** Puts a span around each request (src/telemetry's `gateway`, injected). */
export type RequestTracer = {
  traceRequest<T>(
    request: { method: string; route: string; sessionId?: string },
    run: (span: RequestSpan) => Promise<T>,
  ): Promise<T>;
};

/** A fastify path pattern (`/v1/sessions/:id`) as a regular expression over request paths. */
function pathPattern(url: string): RegExp {
  const escaped = url
    .split('/')
    .map((segment) => (segment.startsWith(':') ? '[^/]+' : segment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
    .join('/');
  return new RegExp(`^${escaped}$`);
}

/** Sends `error` as the reply to `request`, in some API's error shape. */
export type ErrorSender = (request: FastifyRequest, reply: FastifyReply, error: unknown) => FastifyReply;

/**
 * Answers, in `errors`' shape, a request no route of `app`'s scope takes: 405 naming the
 * methods `routes` allow on its path (read at request time, each once, in route order), or 404.
 * It is answered as soon as its headers are in: an unknown route's body is never read (the
 * connection closes after the answer), so a stalled body cannot hold it. Paths under
 * `otherPrefixes` belong to scopes of their own, which answer them in their own shape.
 */
export function answerUnknownRoutes<Body>(
  app: FastifyInstance,
  errors: ErrorShape<Body>,
  routes: Iterable<{ method: string; url: string }>,
  sendError: ErrorSender,
  otherPrefixes: readonly string[] = [],
): void {
  const answer = (request: FastifyRequest, reply: FastifyReply): FastifyReply => {
    const path = request.url.split('?')[0] ?? '';
    const allowed = new Set<string>();
    for (const route of routes) if (pathPattern(route.url).test(path)) allowed.add(route.method);
    return sendError(request, reply, errors.unknownRoute(request.method, path, [...allowed]));
  };
  app.addHook('onRequest', async (request, reply) => {
    if (!request.is404) return;
    const path = request.url.split('?')[0] ?? '';
    if (otherPrefixes.some((prefix) => path === prefix || path.startsWith(`${prefix}/`))) return;
    return answer(request, reply);
  });
  app.setNotFoundHandler(answer);
}

/**
 * Registers every route of `table` on the gateway: each request is parsed with the route's
 * schemas in the table's error shape, runs its handler inside a span when a tracer is given,
 * and is answered with the handler's result unless the handler streamed the reply itself.
 */
export function registerRouteTable<Body>(
  app: FastifyInstance,
  table: RouteTable<Body>,
  context: RouteContext,
  tracer: RequestTracer | undefined,
  access: RouteAccess = OPEN_ACCESS,
): void {
  for (const route of table.routes) {
    if (!route.path.startsWith(`${table.prefix}/`))
      throw new Error(`route ${route.operationId} (${route.path}) lies outside its table's prefix ${table.prefix}`);
  }
  if (table.prefix === '') {
    for (const route of table.routes) registerRoute(app, table, route, route.path, context, tracer, access);
    return;
  }
  void app.register(
    async (scope) => {
      const sendError: ErrorSender = (request, reply, error) => {
        const response = table.errors.toReply(error);
        if (response.logDetail)
          request.log.error({ err: error, method: request.method, url: request.url }, 'request failed');
        return reply.code(response.status).headers(response.headers).send(response.body);
      };
      scope.setErrorHandler((error, request, reply) => sendError(request, reply, error));
      const patterns = table.routes.map((route) => ({ method: route.method, url: route.path }));
      answerUnknownRoutes(scope, table.errors, patterns, sendError);
      for (const route of table.routes)
        registerRoute(scope, table, route, route.path.slice(table.prefix.length), context, tracer, access);
    },
    { prefix: table.prefix },
  );
}

function registerRoute<Body>(
  app: FastifyInstance,
  table: RouteTable<Body>,
  route: RouteSpec,
  url: string,
  context: RouteContext,
  tracer: RequestTracer | undefined,
  access: RouteAccess,
): void {
  const { errors } = table;
  const { right } = route;
  /** The context of one request: the client scoped to its token's tenant, once the token has the route's right. */
  const contextOf = async (request: FastifyRequest): Promise<RouteContext> => {
    if (route.public) return context;
    const grant = access.grantOf(request);
    if (grant === undefined) throw new GatewayError('UNAUTHORIZED', 'missing or wrong bearer token');
    if (grant === 'stream') {
      // A stream token opens one session's events, minted by a caller who could read it: its tenant.
      const id = (request.params as { id?: unknown }).id;
      const header = await context.client.header(typeof id === 'string' ? id : '');
      return { ...context, client: context.client.forTenant(tenantOf(header), access.onCrossTenant) };
    }
    if (!grant.rights.has(right))
      throw new GatewayError(
        'FORBIDDEN',
        `this token of tenant ${grant.tenant ?? '(any)'} lacks the ${right} right ${route.method} ${route.path} needs`,
      );
    if (grant.tenant === undefined) return context;
    return { ...context, client: context.client.forTenant(grant.tenant, access.onCrossTenant) };
  };
  const handle = async (request: FastifyRequest, reply: FastifyReply, span?: RequestSpan): Promise<FastifyReply> => {
    const scoped = await contextOf(request);
    route.precheckBody?.(request.body);
    const input = {
      params: errors.parse(route.params, request.params, 'path'),
      query: errors.parse(route.query, request.query, 'query'),
      body: route.body ? errors.parse(route.body, request.body, 'body') : undefined,
      request,
      reply,
    };
    const result = await route.handler(scoped, input);
    if (result === STREAMED) return reply;
    const turn = (result.body as { turn?: unknown } | null | undefined)?.turn;
    if (typeof turn === 'number') span?.setTurn(turn);
    span?.setStatus(result.status);
    return reply.code(result.status).send(result.body);
  };
  const sessionOf = route.sessionOf ?? ((params) => (typeof params.id === 'string' ? params.id : undefined));
  app.route({
    method: route.method,
    url,
    handler: tracer
      ? (request, reply) => {
          const sessionId = sessionOf(request.params as Record<string, unknown>);
          return tracer.traceRequest(
            { method: route.method, route: route.path, ...(sessionId !== undefined ? { sessionId } : {}) },
            (span) => handle(request, reply, span),
          );
        }
      : (request, reply) => handle(request, reply),
  });
}

// ---- the OpenAPI document -------------------------------------------------------------------

type JsonSchema = Record<string, unknown>;

/** JSON Schema (2020-12, as OpenAPI 3.1 uses) of what a schema accepts on input. */
function inputSchema(schema: z.ZodType): JsonSchema {
  const { $schema: _dialect, ...rest } = z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as JsonSchema;
  return rest;
}

function outputSchema(schema: z.ZodType): JsonSchema {
  const { $schema: _dialect, ...rest } = z.toJSONSchema(schema, { io: 'output', unrepresentable: 'any' }) as JsonSchema;
  return rest;
}

/** `/v1/sessions/:id` → `/v1/sessions/{id}`. */
export function openApiPath(path: string): string {
  return path.replace(/:([A-Za-z_]\w*)/g, '{$1}');
}

function parametersOf(route: RouteSpec): JsonSchema[] {
  const parameters: JsonSchema[] = [];
  for (const [where, schema] of [
    ['path', route.params],
    ['query', route.query],
  ] as const) {
    const json = inputSchema(schema);
    const properties = (json.properties ?? {}) as Record<string, JsonSchema>;
    const required = new Set((json.required ?? []) as string[]);
    for (const [name, property] of Object.entries(properties)) {
      const { description, ...propertySchema } = property;
      parameters.push({
        name,
        in: where,
        required: where === 'path' || required.has(name),
        ...(description ? { description } : {}),
        schema: propertySchema,
      });
    }
  }
  for (const header of route.headers ?? []) {
    parameters.push({
      name: header.name,
      in: 'header',
      required: false,
      description: header.description,
      schema: inputSchema(header.schema),
    });
  }
  return parameters;
}

const STATUS_TEXT: Record<number, string> = {
  400: 'invalid request: malformed JSON, wrong types, an invalid session id or query value',
  401: 'missing or wrong bearer token',
  404: 'unknown session or route',
  408: "the request (headers or body) did not arrive within the gateway's timeouts (REQUEST_TIMEOUT)",
  409: 'conflicts with the session state (SESSION_ALREADY_EXISTS, SEQ_CONFLICT, OPEN_TURN, SESSION_CLOSED)',
  413: 'request body too large',
  415: 'request body is not application/json',
  422: 'message refused (EMPTY_MESSAGE, MESSAGE_TOO_LARGE, INVALID_MESSAGE)',
  417: 'an Expect header other than 100-continue (EXPECTATION_FAILED)',
  431: 'request headers too large (HEADERS_TOO_LARGE)',
  410: 'the session was erased (SESSION_ERASED)',
  500: 'internal error (details are in the gateway log)',
  501: 'not available in this build',
};

function operationOf(route: RouteSpec, errorRef: string): JsonSchema {
  const responses: Record<string, JsonSchema> = {};
  for (const [status, response] of Object.entries(route.responses)) {
    const content: Record<string, JsonSchema> = {};
    if (response.schema) content['application/json'] = { schema: outputSchema(response.schema) };
    if (response.eventStream)
      content['text/event-stream'] = { schema: { type: 'string', description: response.eventStream } };
    responses[status] = {
      description: response.description,
      ...(Object.keys(content).length > 0 ? { content } : {}),
    };
  }
  // Every route can time out or get headers too large for the server: those come from the HTTP layer, not the route.
  for (const status of [...route.errors, 408, 417, 431, 500]) {
    responses[String(status)] ??= {
      description: STATUS_TEXT[status] ?? 'error',
      content: { 'application/json': { schema: { $ref: errorRef } } },
    };
  }
  const operation: JsonSchema = {
    operationId: route.operationId,
    summary: route.summary,
    parameters: parametersOf(route),
    responses,
    ...(route.public ? { security: [] } : {}),
  };
  if (route.body) {
    operation.requestBody = {
      required: !route.body.safeParse(undefined).success,
      content: { 'application/json': { schema: inputSchema(route.body) } },
    };
  }
  return operation;
}

/** Builds the OpenAPI 3.1 document of every route of `tables`, each table's errors in its own component. */
export function buildOpenApiDocument(
  tables: readonly RouteTable[],
  info: { title: string; version: string; description: string },
): JsonSchema {
  const paths: Record<string, Record<string, JsonSchema>> = {};
  const schemas: Record<string, JsonSchema> = {};
  for (const table of tables) {
    const { name, schema, description } = table.errors.component;
    schemas[name] = { ...outputSchema(schema), description };
    for (const route of table.routes)
      (paths[openApiPath(route.path)] ??= {})[route.method.toLowerCase()] = operationOf(
        route,
        `#/components/schemas/${name}`,
      );
  }
  return {
    openapi: '3.1.0',
    info,
    servers: [{ url: '/' }],
    security: [{ bearerAuth: [] }],
    paths,
    components: {
      securitySchemes: {
        bearerAuth: {
          type: 'http',
          scheme: 'bearer',
          description: 'SESSIONLOG_GATEWAY_TOKEN; required whenever a token is configured',
        },
      },
      schemas,
    },
  };
}
