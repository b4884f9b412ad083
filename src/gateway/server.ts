/**
 * The HTTP gateway (DESIGN §8): a fastify server over `SessionClient`. Commands go to the
 * session workflows, reads come from the store; every error leaves as
 * `{error: {code, message}}` (see errors.ts for the status table).
 */
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { PassThrough } from 'node:stream';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type { SessionClient } from '../client/session-client.js';
import { isLoopbackHost, resolveGatewayTimeouts, type GatewayTimeouts } from './settings.js';
import { ConfigError } from '../session/index.js';
import { OPEN_GRANT, TokenGrants, type RequestGrant, type RouteAccess, type TokenGrant } from './access.js';
import { GatewayError, clientErrorResponse, rawHttpResponse, toErrorResponse, type ErrorResponse } from './errors.js';
import {
  guardListener,
  resolveListenerLimits,
  type ListenerGuardStats,
  type ListenerLimits,
} from './listener-guard.js';
import { NATIVE_TABLE } from './native/index.js';
import { registerMediaBodyParsers } from './native/media.js';
import { AI_SDK_TABLE } from './ai-sdk/index.js';
import { LANGGRAPH_TABLE } from './langgraph/index.js';
import { WebhookSender } from './langgraph/webhooks.js';
import { OPENAI_TABLE } from './openai/index.js';
import { defaultModelRouting } from './openai/models.js';
import { closeLingering } from './listener-guard.js';
import { currentRequestScope, runInRequestScope } from './request-scope.js';
import {
  answerUnknownRoutes,
  buildOpenApiDocument,
  registerRouteTable,
  type AgentDefaults,
  type ModelRouting,
  type RequestTracer,
  type RouteContext,
  type RouteTable,
} from './route-table.js';
import type { StreamRegistry } from './sse.js';
import { createStreamTokenSigner, streamTokenAuthorizes } from './stream-token.js';
import { INSPECTOR_UI_PATHS, registerInspectorUi } from './ui-routes.js';

/**
 * Operations telemetry of the gateway (src/telemetry's `gateway`), injected so the gateway
 * depends on no telemetry code: the `GET /metrics` answer, and a span around each request.
 */
export type GatewayTelemetry = RequestTracer & {
  exposition(state: {
    sseClients: number;
    connections?: ListenerGuardStats;
  }): Promise<{ contentType: string; text: string }>;
  /** Counts a request refused for naming another tenant's session. */
  crossTenant?(tenant: string): void;
};

/**
 * What a gateway serves and how: the client its routes use, its tokens, listen address, body limit,
 * timeouts and telemetry.
 */
export type GatewayOptions = {
  /** Every request reaches sessions through this client (its store serves the reads). */
  client: SessionClient;
  /** Bearer token (SESSIONLOG_GATEWAY_TOKEN): the `default` tenant, every right. A token is required when `host` is not loopback; when any is set one is required on loopback too. */
  token?: string | undefined;
  /** Tokens scoped to a tenant and rights (SESSIONLOG_GATEWAY_TOKENS, access.ts). */
  tokens?: readonly TokenGrant[] | undefined;
  /** The host the gateway will listen on; decides whether a token is mandatory. */
  host: string;
  /** Largest request body in bytes (larger ones get 413). */
  bodyLimitBytes: number;
  /** A pino-compatible logger; default: fastify's own at level `warn`. */
  logger?: FastifyBaseLogger;
  /** Interval of SSE heartbeat comments, ms. Default 15000. */
  sseHeartbeatMs?: number;
  /**
   * The model and system prompt the workers give a session whose header names none (their
   * `agent`): the OpenAI-compatible API reports them and checks `model` and `instructions`
   * against them.
   */
  defaultAgent?: AgentDefaults;
  /** Model names requests may use and what each runs; default: the default model's name, any other name runs it. */
  models?: ModelRouting;
  /** Metrics at `GET /metrics` (behind the token when one is set) and request spans; absent: neither. */
  telemetry?: GatewayTelemetry;
  /** Connection limits per client address and for connections waiting on their clients (listener-guard.ts). */
  listenerLimits?: Partial<ListenerLimits>;
  /** Signs the LangGraph API's run webhooks (langgraph/webhooks.ts); without it a run asking for one gets a 422. */
  webhookSecret?: string | undefined;
} & Partial<GatewayTimeouts>;

export type ResolvedGatewayOptions = Required<
  Omit<GatewayOptions, 'logger' | 'token' | 'tokens' | 'telemetry' | 'listenerLimits' | 'webhookSecret'>
> & {
  webhookSecret: string | undefined;
  grants: TokenGrants;
  listenerLimits: ListenerLimits;
  token: string | undefined;
  logger: FastifyBaseLogger | undefined;
  telemetry: GatewayTelemetry | undefined;
};

/** Version of the HTTP API described by the OpenAPI document. */
export const GATEWAY_API_VERSION = '1.0.0';

/** Every HTTP API the gateway serves, each registered and documented from its route table. */
const ROUTE_TABLES: readonly RouteTable[] = [NATIVE_TABLE, OPENAI_TABLE, AI_SDK_TABLE, LANGGRAPH_TABLE];

const API_DESCRIPTION =
  "sessionlog HTTP gateway: LLM chat sessions as durable workflows over an append-only event log. Errors are `{error: {code, message}}` under /v1 and OpenAI's `{error: {message, type, param, code}}` under /openai/v1 (the OpenAI-compatible Conversations and Responses API) and /ai-sdk (the AI SDK UI message stream), and `{detail, code}` under /langgraph (the LangGraph Agent Server subset).";

/**
 * Fills defaults and enforces the listening rule: beyond loopback a token is mandatory. Throws
 * ConfigError (naming SESSIONLOG_GATEWAY_TOKEN) rather than serve sessions to the network.
 */
export function resolveGatewayOptions(options: GatewayOptions): ResolvedGatewayOptions {
  if (options.token !== undefined && options.token.length === 0) {
    throw new ConfigError(
      'SESSIONLOG_GATEWAY_TOKEN is empty: set a secret of at least 16 characters, or unset it to serve loopback only without a token',
    );
  }
  const grants = new TokenGrants(options.token, options.tokens ?? []);
  if (!isLoopbackHost(options.host) && !grants.required) {
    throw new ConfigError(
      `the gateway would listen on ${options.host}, beyond loopback, without a token: set SESSIONLOG_GATEWAY_TOKEN (clients send "Authorization: Bearer <token>") or listen on 127.0.0.1`,
    );
  }
  if (!Number.isSafeInteger(options.bodyLimitBytes) || options.bodyLimitBytes < 1) {
    throw new ConfigError(
      `gateway bodyLimitBytes must be a positive whole number, got ${String(options.bodyLimitBytes)} (SESSIONLOG_BODY_LIMIT_BYTES)`,
    );
  }
  const timeouts = resolveGatewayTimeouts(options);
  return {
    ...timeouts,
    client: options.client,
    token: options.token,
    grants,
    host: options.host,
    bodyLimitBytes: options.bodyLimitBytes,
    logger: options.logger,
    sseHeartbeatMs: options.sseHeartbeatMs ?? 15_000,
    defaultAgent: options.defaultAgent ?? {},
    models: options.models ?? defaultModelRouting(options.defaultAgent?.model),
    telemetry: options.telemetry,
    listenerLimits: resolveListenerLimits(options.listenerLimits ?? {}),
    webhookSecret: options.webhookSecret,
  };
}

/** A route as fastify registered it (method and path pattern). */
export type RegisteredRoute = { method: string; url: string };

const registeredRoutes = new WeakMap<FastifyInstance, RegisteredRoute[]>();
const eventStreams = new WeakMap<FastifyInstance, StreamRegistry>();

/** Every route fastify registered on a gateway (as seen by its onRoute hook, HEAD included). */
export function listRegisteredRoutes(app: FastifyInstance): RegisteredRoute[] {
  return [...(registeredRoutes.get(app) ?? [])];
}

/** How many SSE event streams the gateway is serving right now. */
export function openEventStreamCount(app: FastifyInstance): number {
  return eventStreams.get(app)?.size ?? 0;
}

function sendError(request: FastifyRequest, reply: FastifyReply, error: unknown): FastifyReply {
  const response: ErrorResponse = toErrorResponse(error);
  if (isClientAbort(request, error)) {
    // The client closed the connection mid-request (or a request timeout closed it): nobody
    // reads the answer, and it is not a server fault.
    request.log.debug({ err: error, method: request.method, url: request.url }, 'client aborted the request');
  } else if (response.logDetail)
    request.log.error({ err: error, method: request.method, url: request.url }, 'request failed');
  return reply.code(response.status).headers(response.headers).send(response.body);
}

/**
 * Node's "aborted" error: the connection closed before the request had fully arrived. (A reset
 * of some other connection, a database's say, after the request arrived is a server fault.)
 */
function isClientAbort(request: FastifyRequest, error: unknown): boolean {
  return error instanceof Error && (error as NodeJS.ErrnoException).code === 'ECONNRESET' && !request.raw.complete;
}

/**
 * Answers what Node's HTTP parser refused (or a request that timed out before fastify had it)
 * with the documented error shape, written to the socket by hand since no response object
 * exists yet.
 */
function answerClientError(
  log: FastifyBaseLogger,
  error: NodeJS.ErrnoException & { reason?: string },
  socket: Socket,
): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) {
    log.debug({ err: error }, 'client connection reset');
    socket.destroy();
    return;
  }
  const response = clientErrorResponse(error);
  log.debug({ err: error, code: response.body.error.code }, 'refused a malformed or late request');
  // As Node's own handler does: never write into a response this connection has already started (an SSE stream, say).
  const inFlight = (socket as Socket & { _httpMessage?: ServerResponse | null })._httpMessage;
  if (socket.writable && inFlight?.headersSent !== true) socket.write(rawHttpResponse(response));
  socket.destroy(error);
}

/**
 * Requests Node answers by itself, bypassing fastify, get the documented shape too: CONNECT
 * (Node would drop the connection silently) and an `Expect` other than 100-continue (a bare 417).
 */
function answerOutsideRoutes(app: FastifyInstance): void {
  app.server.on('connect', (_request: IncomingMessage, socket: Socket) => {
    app.log.debug('refused a CONNECT request');
    const answer = rawHttpResponse(
      toErrorResponse(
        new GatewayError('METHOD_NOT_ALLOWED', 'the gateway is not a proxy: CONNECT is not served', {
          allow: 'GET, HEAD, POST',
        }),
      ),
    );
    socket.end(answer, () => socket.destroy());
  });
  app.server.on('checkExpectation', (request: IncomingMessage, response: ServerResponse) => {
    const answer = toErrorResponse(
      new GatewayError(
        'EXPECTATION_FAILED',
        `the gateway meets only "Expect: 100-continue", not ${JSON.stringify(String(request.headers.expect).slice(0, 60))}; drop the Expect header`,
        { connection: 'close' },
      ),
    );
    const body = JSON.stringify(answer.body);
    response
      .writeHead(answer.status, {
        ...answer.headers,
        'content-type': 'application/json; charset=utf-8',
        'content-length': Buffer.byteLength(body, 'utf8'),
      })
      .end(body);
  });
}

/** Whether the request announces a body (fastify reads one only then). */
function hasBody(request: FastifyRequest): boolean {
  const length = request.headers['content-length'];
  return request.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

/**
 * Makes Node's close of a connection answered before its request body was read (it calls
 * `destroySoon` once the answer is written) a lingering close, so the client reads the answer
 * rather than a reset (see closeLingering).
 */
function lingerOnClose(socket: Socket): void {
  socket.destroySoon = function lingeringClose(this: Socket): void {
    closeLingering(this);
  };
}

/**
 * The request body as fastify reads it, failing with 408 REQUEST_TIMEOUT unless it has all
 * arrived within `timeoutMs`: a body that trickles or never ends cannot hold a request open.
 * The 408 goes through fastify's error path (closing the connection, whose body was not read).
 *
 * Every way this stream can fail is handled here: fastify listens for its errors only while it
 * reads the body, and a request can be answered without its body being read at all (a 404, a
 * 415, a GET that announces a body) or lose its client mid-upload. The deadline ends with the
 * response or the connection, and an error nobody reads any more is logged at debug level,
 * never thrown out of the request.
 */
function bodyWithDeadline(request: FastifyRequest, reply: FastifyReply, timeoutMs: number): PassThrough {
  const raw = request.raw;
  const body = new PassThrough();
  body.on('error', (error) => request.log.debug({ err: error }, 'request body ended with an error'));
  const timer = setTimeout(() => {
    raw.unpipe(body);
    body.destroy(
      new GatewayError(
        'REQUEST_TIMEOUT',
        `the request body did not arrive within ${timeoutMs} ms of its headers; send it without pauses (limit: SESSIONLOG_BODY_TIMEOUT_MS)`,
        { connection: 'close' },
      ),
    );
  }, timeoutMs);
  const stop = (): void => clearTimeout(timer);
  raw.once('end', stop);
  raw.once('close', stop);
  reply.raw.once('close', stop);
  // pipe() does not forward errors: an aborted upload must still end the body read.
  raw.on('error', (error) => {
    stop();
    body.destroy(error);
  });
  raw.pipe(body);
  return body;
}

/** How often Node checks the header and request deadlines (its default, 30 s, would let a 10 s limit run to 40 s). */
function deadlineCheckIntervalMs(timeouts: GatewayTimeouts): number {
  return Math.max(50, Math.min(1_000, Math.floor(Math.min(timeouts.headersTimeoutMs, timeouts.requestTimeoutMs) / 4)));
}

/** The token of an `Authorization: Bearer …` header. */
function bearerOf(header: string | undefined): string | undefined {
  return /^Bearer[ ]+(\S+)\s*$/i.exec(header ?? '')?.[1];
}

/**
 * Builds the gateway (not listening yet). Throws ConfigError when `host` is beyond loopback
 * and no token is set.
 */
export function createGateway(options: GatewayOptions): FastifyInstance {
  const resolved = resolveGatewayOptions(options);
  let connections: ListenerGuardStats | undefined;
  const app: FastifyInstance = Fastify({
    bodyLimit: resolved.bodyLimitBytes,
    ...(resolved.logger ? { loggerInstance: resolved.logger } : { logger: { level: 'warn' } }),
    // Long enough that an over-long session id reaches the handler and gets a 400 naming the id rule.
    routerOptions: { maxParamLength: 1024 },
    frameworkErrors: (error, request, reply) => {
      sendError(request, reply, error);
    },
    // Socket idle timeout; cleared once a request has begun (see the onRequest hook below).
    connectionTimeout: resolved.connectionTimeoutMs,
    requestTimeout: resolved.requestTimeoutMs,
    // Every request runs in its own async context (request-scope.ts): fastify logs its id, and
    // the process's fault policy tells a fault of one request from a fault of the process.
    genReqId: () => currentRequestScope()?.id ?? 'req-?',
    serverFactory: (handler) => {
      const server = http.createServer(
        {
          headersTimeout: resolved.headersTimeoutMs,
          requestTimeout: resolved.requestTimeoutMs,
          connectionsCheckingInterval: deadlineCheckIntervalMs(resolved),
          // Node answers a missing Host with a bare 400; the onRequest hook below answers it in the error shape.
          requireHostHeader: false,
        },
        (request, response) => runInRequestScope(request, response, () => handler(request, response)),
      );
      server.setTimeout(resolved.connectionTimeoutMs);
      connections = guardListener(server, resolved.listenerLimits);
      return server;
    },
    clientErrorHandler: (error, socket) => answerClientError(app.log, error, socket),
  }) as unknown as FastifyInstance;
  answerOutsideRoutes(app);

  app.addHook('onRequest', async (request) => {
    // Once a request has begun, its own deadlines take over: the body timeout while it
    // uploads, then none, so a `?wait=true` turn or an SSE stream is never cut for being quiet.
    request.raw.socket.setTimeout(0);
    if (request.raw.httpVersion === '1.1' && request.headers.host === undefined) {
      throw new GatewayError('INVALID_REQUEST', 'an HTTP/1.1 request must carry a Host header', {
        connection: 'close',
      });
    }
  });
  app.addHook('preParsing', async (request, reply, payload) => {
    if (!hasBody(request)) return payload;
    const encoding = request.headers['content-encoding'];
    if (encoding !== undefined && encoding.trim().toLowerCase() !== 'identity') {
      throw new GatewayError(
        'UNSUPPORTED_MEDIA_TYPE',
        `request bodies must be plain JSON; Content-Encoding ${JSON.stringify(encoding.slice(0, 40))} is not accepted`,
        { connection: 'close' },
      );
    }
    return bodyWithDeadline(request, reply, resolved.bodyTimeoutMs);
  });

  // A request answered before its body arrived (a 404, a 413, a 415, a GET announcing a body)
  // leaves unread bytes on the connection: close it rather than parse them as the next request,
  // lingering so that the client reads the answer (see lingerOnClose).
  app.addHook('onSend', async (request, reply, payload) => {
    if (hasBody(request) && !request.raw.complete) {
      reply.header('connection', 'close');
      lingerOnClose(request.raw.socket);
    }
    return payload;
  });

  const routes: RegisteredRoute[] = [];
  registeredRoutes.set(app, routes);
  app.addHook('onRoute', (route) => {
    for (const method of [route.method].flat()) routes.push({ method, url: route.url });
  });

  // JSON is the only body type; anything else is 415. An empty body counts as no body, so
  // argument-less commands work with or without `Content-Type: application/json`.
  app.removeAllContentTypeParsers();
  const parseJson = app.getDefaultJsonParser('error', 'error');
  // JSON is UTF-8 (RFC 8259): a body that is not is refused, never read with replacement characters.
  const utf8 = new TextDecoder('utf-8', { fatal: true });
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
    let text: string;
    try {
      text = typeof body === 'string' ? body : utf8.decode(body);
    } catch {
      // TypeError from the fatal decoder: the bytes are not UTF-8.
      done(new GatewayError('INVALID_JSON', 'request body is not valid UTF-8; send JSON encoded as UTF-8'), undefined);
      return;
    }
    if (text.length === 0) {
      done(null, undefined);
      return;
    }
    parseJson(request, text, done);
  });
  // A media upload's form or raw bytes, for its route alone (native/media.ts).
  registerMediaBodyParsers(app);

  const streams: StreamRegistry = new Set();
  eventStreams.set(app, streams);
  let openapi: unknown;
  const streamTokens = createStreamTokenSigner(resolved.grants.signingSecret(resolved.token));
  const context: RouteContext = {
    client: resolved.client,
    sseHeartbeatMs: resolved.sseHeartbeatMs,
    streams,
    openapi: () =>
      (openapi ??= buildOpenApiDocument(ROUTE_TABLES, {
        title: 'sessionlog gateway',
        version: GATEWAY_API_VERSION,
        description: API_DESCRIPTION,
      })),
    streamTokens,
    defaults: resolved.defaultAgent,
    models: resolved.models,
    webhooks: new WebhookSender(resolved.webhookSecret, resolved.logger),
  };

  const publicUrls = new Set([
    ...ROUTE_TABLES.flatMap((table) => table.routes.filter((r) => r.public).map((r) => r.path)),
    ...INSPECTOR_UI_PATHS,
  ]);
  const grants = resolved.grants;
  const requestGrants = new WeakMap<FastifyRequest, RequestGrant>();
  if (grants.required) {
    app.addHook('onRequest', async (request) => {
      if (request.routeOptions.url !== undefined && publicUrls.has(request.routeOptions.url)) return;
      // `x-api-key` is how the LangGraph SDK sends its `apiKey`.
      const apiKey = request.headers['x-api-key'];
      const bearer = bearerOf(request.headers.authorization);
      const grant =
        (bearer !== undefined ? grants.find(bearer) : undefined) ??
        (typeof apiKey === 'string' ? grants.find(apiKey) : undefined);
      if (grant) requestGrants.set(request, grant);
      else if (streamTokenAuthorizes(request, streamTokens)) requestGrants.set(request, 'stream');
      else
        throw new GatewayError(
          'UNAUTHORIZED',
          'missing or wrong bearer token: send "Authorization: Bearer <SESSIONLOG_GATEWAY_TOKEN>" (or "x-api-key: <token>")',
          {
            'www-authenticate': 'Bearer realm="sessionlog"',
          },
        );
    });
  }
  const access: RouteAccess = {
    grantOf: (request) => requestGrants.get(request) ?? (grants.required ? undefined : OPEN_GRANT),
    onCrossTenant: (attempt) => {
      resolved.logger?.warn(attempt, 'refused: a session of another tenant');
      resolved.telemetry?.crossTenant?.(attempt.tenant);
    },
  };

  // Open SSE streams would hold the server open; end them when the gateway closes.
  app.addHook('preClose', async () => {
    for (const stream of streams) stream.abort();
    context.webhooks.close();
  });

  app.setErrorHandler((error, request, reply) => sendError(request, reply, error));

  // Outside every prefixed API: the native API's shape, the allowed methods from every route fastify has (HEAD, /ui, /metrics too).
  answerUnknownRoutes(
    app,
    NATIVE_TABLE.errors,
    routes,
    sendError,
    ROUTE_TABLES.map((table) => table.prefix).filter((prefix) => prefix !== ''),
  );

  for (const table of ROUTE_TABLES) registerRouteTable(app, table, context, resolved.telemetry, access);
  const telemetry = resolved.telemetry;
  if (telemetry) {
    app.get('/metrics', async (_request, reply) => {
      const { contentType, text } = await telemetry.exposition({
        sseClients: streams.size,
        ...(connections ? { connections } : {}),
      });
      return reply.header('content-type', contentType).header('cache-control', 'no-store').send(text);
    });
  }
  registerInspectorUi(app, { tokenRequired: grants.required });
  return app;
}

/** `GatewayOptions` and the port to listen on (0: a free one). */
export type StartGatewayOptions = GatewayOptions & { port: number };

/** A listening gateway: its URL, the fastify instance, and `close()`, which stops it. */
export type RunningGateway = { url: string; app: FastifyInstance; close(): Promise<void> };

/** Creates the gateway and listens on `host:port` (port 0 picks a free one). */
export async function startGateway(options: StartGatewayOptions): Promise<RunningGateway> {
  const app = createGateway(options);
  await app.listen({ host: options.host, port: options.port });
  const address = app.server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return { url: `http://${host}:${address.port}`, app, close: () => app.close() };
}
