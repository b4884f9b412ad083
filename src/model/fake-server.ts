/**
 * A fake OpenAI-compatible chat model over HTTP (DESIGN §7, §10). It is the model in tests
 * and the offline model of `sessionlog dev`, so it ships with the package.
 *
 * - `POST /v1/chat/completions`, streaming (SSE `chat.completion.chunk`s, then `[DONE]`) and
 *   not; `GET /v1/models`.
 * - Replies come from a queue of scripted replies, else a matcher function, else an echo of
 *   the last user message (`echo: <text>`).
 * - Usage counts the prompt with the DeepSeek V3 tokenizer under its chat template, and
 *   reports cache hits as the common token prefix with the previous request.
 * - Faults can be injected for the next N requests (429 with `retry-after`, 5xx, hang,
 *   dropped stream, malformed tool-call JSON), and prompts above `contextLimitTokens` get a
 *   context-overflow 400.
 * - Every `/v1` request is recorded. All of this is reachable from JS and from another
 *   process through `/_control/*` (see `FakeModelServer`).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import type { JsonValue } from '../session/json.js';
import { countOrdinaryTokens, deepseekPromptTokenIds, wireContentText } from './deepseek-tokens.js';

// ---- types ------------------------------------------------------------------------------

export type FakeToolCall = { id?: string; name: string; arguments: string | JsonValue };

/** One scripted reply. Empty fields are left out of the reply. */
export type FakeReply = {
  text?: string;
  /** Sent as DeepSeek `reasoning_content`. */
  reasoning?: string;
  toolCalls?: FakeToolCall[];
  /** Default: `tool_calls` when there are tool calls, else `stop`. */
  finishReason?: 'stop' | 'length' | 'tool_calls' | 'content_filter';
};

/** A chat request as the matcher sees it. */
export type FakeChatRequest = { body: FakeChatBody; headers: Record<string, string>; lastUserText: string };

/** Returns a reply for a request, or undefined to fall through to the echo reply. */
export type FakeReplyMatcher = (request: FakeChatRequest) => FakeReply | undefined;

/** A fault applied to the next `times` chat requests (default 1). */
export type FakeFault =
  | { kind: 'rate_limit'; retryAfterSeconds?: number; times?: number }
  | { kind: 'server_error'; status?: number; times?: number }
  | { kind: 'hang'; times?: number }
  | { kind: 'drop_stream'; afterChunks?: number; times?: number }
  | { kind: 'malformed_tool_json'; times?: number }
  /** A 401 whose message quotes the API key the request carried, as several providers do. */
  | { kind: 'auth_echo'; times?: number };

/** Runtime-adjustable behaviour. */
export type FakeModelConfig = {
  /** Delay before the first streamed chunk (or the whole non-streamed reply), ms. */
  firstTokenDelayMs: number;
  /** Delay between streamed chunks, ms. */
  tokenDelayMs: number;
  /** Prompts with more tokens than this get a context-overflow 400; null: no limit. */
  contextLimitTokens: number | null;
  /** The model id listed by `/v1/models`. */
  model: string;
  /** Prefix of the default echo reply. */
  echoPrefix: string;
  /** When set, chat requests must carry `Authorization: Bearer <apiKey>` (else 401). */
  apiKey: string | null;
  /**
   * Enforce a provider's limits as a token bucket per dimension (capacity: `burstMs` worth of
   * the rate, default 1 s; refilled continuously): a request over them gets a 429 with
   * `retry-after`. Every chat response states the limits in `x-ratelimit-limit-requests` /
   * `x-ratelimit-limit-tokens` (as OpenAI does) unless `stateLimits` is false. Null: no limits.
   */
  rateLimit: { requestsPerMinute: number; tokensPerMinute?: number; burstMs?: number; stateLimits?: boolean } | null;
};

/**
 * How the offline model server answers (its script, latency, usage) and where it listens (default a
 * free port on 127.0.0.1).
 */
export type FakeModelServerOptions = Partial<FakeModelConfig> & {
  /** Default 127.0.0.1. */
  host?: string;
  /** Default 0: a free port. */
  port?: number;
  replies?: FakeReply[];
  matcher?: FakeReplyMatcher;
};

/** A request the server received. `status` is filled in when the response starts. */
export type RecordedRequest = {
  method: string;
  path: string;
  /** Parsed JSON body, or the raw text when it was not JSON, or undefined when empty. */
  body: unknown;
  headers: Record<string, string>;
  time: number;
  status?: number;
};

export const DEFAULT_FAKE_MODEL_CONFIG: FakeModelConfig = {
  firstTokenDelayMs: 0,
  tokenDelayMs: 0,
  contextLimitTokens: null,
  model: 'fake',
  echoPrefix: 'echo: ',
  apiKey: null,
  rateLimit: null,
};

const RECORDED_HEADERS = [
  'authorization',
  'content-type',
  'accept',
  'user-agent',
  'idempotency-key',
  'x-request-id',
  'x-stainless-retry-count',
  'x-stainless-timeout',
];
const MAX_BODY_BYTES = 64 * 1024 * 1024;

// ---- wire validation ---------------------------------------------------------------------

const contentSchema = z.union([
  z.string(),
  z.null(),
  z.array(z.looseObject({ type: z.string(), text: z.string().optional() })),
]);
const toolCallSchema = z.looseObject({
  id: z.string(),
  type: z.string().optional(),
  function: z.object({ name: z.string(), arguments: z.string() }),
});
const messageSchema = z.looseObject({
  role: z.enum(['system', 'developer', 'user', 'assistant', 'tool']),
  content: contentSchema.optional(),
  reasoning_content: z.string().nullable().optional(),
  tool_calls: z.array(toolCallSchema).optional(),
  tool_call_id: z.string().optional(),
});
const chatBodySchema = z.looseObject({
  model: z.string().min(1, 'model must be a non-empty string'),
  messages: z.array(messageSchema).min(1, 'messages must be a non-empty array'),
  stream: z.boolean().optional(),
  stream_options: z.looseObject({ include_usage: z.boolean().optional() }).nullable().optional(),
  tools: z.array(z.looseObject({ type: z.string(), function: z.looseObject({ name: z.string() }) })).optional(),
  max_tokens: z.number().int().positive().optional(),
  response_format: z
    .discriminatedUnion('type', [
      z.looseObject({ type: z.literal('text') }),
      z.looseObject({ type: z.literal('json_object') }),
      z.looseObject({
        type: z.literal('json_schema'),
        json_schema: z.looseObject({ name: z.string().min(1), schema: z.record(z.string(), z.unknown()).optional() }),
      }),
    ])
    .optional(),
});
export type FakeChatBody = z.infer<typeof chatBodySchema>;

const jsonValueSchema: z.ZodType<JsonValue> = z.lazy(() =>
  z.union([
    z.string(),
    z.number(),
    z.boolean(),
    z.null(),
    z.array(jsonValueSchema),
    z.record(z.string(), jsonValueSchema),
  ]),
);
const replySchema = z.object({
  text: z.string().optional(),
  reasoning: z.string().optional(),
  toolCalls: z
    .array(z.object({ id: z.string().optional(), name: z.string(), arguments: z.union([z.string(), jsonValueSchema]) }))
    .optional(),
  finishReason: z.enum(['stop', 'length', 'tool_calls', 'content_filter']).optional(),
});
const times = z.number().int().positive().optional();
const faultSchema = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('rate_limit'), retryAfterSeconds: z.number().nonnegative().optional(), times }),
  z.object({ kind: z.literal('server_error'), status: z.number().int().min(500).max(599).optional(), times }),
  z.object({ kind: z.literal('auth_echo'), times }),
  z.object({ kind: z.literal('hang'), times }),
  z.object({ kind: z.literal('drop_stream'), afterChunks: z.number().int().nonnegative().optional(), times }),
  z.object({ kind: z.literal('malformed_tool_json'), times }),
]);
const configSchema = z
  .object({
    firstTokenDelayMs: z.number().nonnegative(),
    tokenDelayMs: z.number().nonnegative(),
    contextLimitTokens: z.number().int().positive().nullable(),
    model: z.string().min(1),
    echoPrefix: z.string(),
    apiKey: z.string().min(1).nullable(),
    rateLimit: z
      .strictObject({
        requestsPerMinute: z.number().positive(),
        tokensPerMinute: z.number().positive().optional(),
        burstMs: z.number().positive().optional(),
        stateLimits: z.boolean().optional(),
      })
      .nullable(),
  })
  .partial();

// ---- the server --------------------------------------------------------------------------

type NormalizedReply = {
  reasoning: string;
  text: string;
  toolCalls: { id: string; name: string; arguments: string }[];
  finishReason: string;
};

class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly body: { message: string; type: string; code: string | null },
    readonly headers: Record<string, string> = {},
  ) {
    super(body.message);
  }
}

/** A running fake model server. Create it with `startFakeModelServer`. */
export class FakeModelServer {
  private config: FakeModelConfig;
  private readonly replies: FakeReply[] = [];
  private matcher: FakeReplyMatcher | undefined;
  private faults: Array<FakeFault & { remaining: number }> = [];
  private recorded: RecordedRequest[] = [];
  private sentUsage: Array<ReturnType<typeof usageOf>> = [];
  private previousPromptIds: number[] = [];
  private completionCounter = 0;
  private toolCallCounter = 0;
  /** The rate-limit buckets: the time each would be full again (ms), and what was let in or refused. */
  private limitState = { requestsAt: 0, tokensAt: 0 };
  private admitted: number[] = [];
  private refusedAt: number[] = [];

  private constructor(
    private readonly server: http.Server,
    options: FakeModelServerOptions,
  ) {
    this.config = { ...DEFAULT_FAKE_MODEL_CONFIG, ...pickConfig(options) };
    this.replies.push(...(options.replies ?? []));
    this.matcher = options.matcher;
  }

  /** Starts listening (default 127.0.0.1 on a free port). */
  static async start(options: FakeModelServerOptions = {}): Promise<FakeModelServer> {
    const server = http.createServer();
    const fake = new FakeModelServer(server, options);
    server.on('request', (req, res) => {
      fake.handle(req, res).catch((error: unknown) => {
        if (!res.headersSent)
          sendJson(res, 500, { error: { message: String(error), type: 'server_error', code: null } });
        else res.destroy();
      });
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(options.port ?? 0, options.host ?? '127.0.0.1', () => {
        server.off('error', reject);
        resolve();
      });
    });
    return fake;
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }
  /** `http://HOST:PORT` (control endpoints live under it). */
  get url(): string {
    const address = this.server.address() as AddressInfo;
    const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
    return `http://${host}:${address.port}`;
  }
  /** The OpenAI client's `baseURL`: `http://HOST:PORT/v1`. */
  get baseURL(): string {
    return `${this.url}/v1`;
  }

  /** Queues replies; each chat request takes the next one before the matcher or echo apply. */
  enqueueReplies(...replies: FakeReply[]): void {
    this.replies.push(...replies);
  }
  setMatcher(matcher: FakeReplyMatcher | undefined): void {
    this.matcher = matcher;
  }
  /** Applies `fault` to the next `fault.times` (default 1) chat requests, after earlier faults. */
  injectFault(fault: FakeFault): void {
    this.faults.push({ ...fault, remaining: fault.times ?? 1 });
  }
  clearFaults(): void {
    this.faults = [];
  }
  configure(patch: Partial<FakeModelConfig>): void {
    this.config = { ...this.config, ...patch };
  }
  currentConfig(): FakeModelConfig {
    return { ...this.config };
  }
  /** Every `/v1` request received since the last reset, oldest first. */
  requests(): RecordedRequest[] {
    return this.recorded.slice();
  }
  /** The bodies of the chat-completion requests received, oldest first. */
  chatRequests(): FakeChatBody[] {
    return this.recorded
      .filter((r) => r.method === 'POST' && r.path === '/v1/chat/completions')
      .map((r) => r.body as FakeChatBody);
  }
  /** The usage the server reported for each completion it answered since the last reset (as sent). */
  reportedUsage(): Array<ReturnType<typeof usageOf>> {
    return this.sentUsage.slice();
  }
  /** Clears recorded requests, reported usage, queued replies, faults, the matcher, the cache prefix and ids. */
  reset(): void {
    this.recorded = [];
    this.sentUsage = [];
    this.replies.length = 0;
    this.faults = [];
    this.matcher = undefined;
    this.previousPromptIds = [];
    this.completionCounter = 0;
    this.toolCallCounter = 0;
    this.limitState = { requestsAt: 0, tokensAt: 0 };
    this.admitted = [];
    this.refusedAt = [];
  }

  /** Under `rateLimit`: when each chat request was let in and when one was refused with a 429 (epoch ms). */
  rateLimitCounts(): { admitted: number[]; refused: number; refusedAt: number[] } {
    return { admitted: [...this.admitted], refused: this.refusedAt.length, refusedAt: [...this.refusedAt] };
  }

  /** Under `rateLimit`: the most requests let in within any window of `ms`. */
  mostAdmittedWithin(ms: number): number {
    let most = 0;
    for (let i = 0, j = 0; i < this.admitted.length; i++) {
      while (this.admitted[i]! - this.admitted[j]! >= ms) j++;
      most = Math.max(most, i - j + 1);
    }
    return most;
  }

  /** Lets a request of `tokens` prompt tokens in under `rateLimit`, or refuses it with a 429 saying when to retry. */
  private admit(tokens: number, res: http.ServerResponse): void {
    const limit = this.config.rateLimit;
    if (!limit) return;
    if (limit.stateLimits !== false) {
      res.setHeader('x-ratelimit-limit-requests', String(limit.requestsPerMinute));
      if (limit.tokensPerMinute !== undefined) res.setHeader('x-ratelimit-limit-tokens', String(limit.tokensPerMinute));
    }
    const now = Date.now();
    const burstMs = limit.burstMs ?? 1_000;
    // Each dimension: full again at `at`; a request fits while `at + cost·interval - now <= burst`.
    const over = (at: number, perMinute: number | undefined, units: number): number => {
      if (perMinute === undefined) return 0;
      const interval = 60_000 / perMinute;
      return Math.max(0, Math.max(at, now) + units * interval - now - Math.max(burstMs, interval));
    };
    const waitMs = Math.max(
      over(this.limitState.requestsAt, limit.requestsPerMinute, 1),
      over(this.limitState.tokensAt, limit.tokensPerMinute, tokens),
    );
    if (waitMs > 0) {
      this.refusedAt.push(now);
      throw new HttpError(
        429,
        {
          message: 'Rate limit reached for requests. Please retry after the time in the retry-after header.',
          type: 'rate_limit_error',
          code: 'rate_limit_exceeded',
        },
        { 'retry-after': String(Math.ceil(waitMs / 1000)), 'retry-after-ms': String(Math.ceil(waitMs)) },
      );
    }
    this.limitState.requestsAt = Math.max(this.limitState.requestsAt, now) + 60_000 / limit.requestsPerMinute;
    if (limit.tokensPerMinute !== undefined)
      this.limitState.tokensAt = Math.max(this.limitState.tokensAt, now) + (tokens * 60_000) / limit.tokensPerMinute;
    this.admitted.push(now);
  }
  /** Stops the server, cutting any open (e.g. hanging) connections. */
  async close(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeAllConnections();
    await closed;
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const path = new URL(req.url ?? '/', 'http://fake').pathname;
    const method = req.method ?? 'GET';
    let raw: string;
    try {
      raw = await readBody(req);
    } catch (error) {
      if (error instanceof HttpError) return sendError(res, error);
      throw error;
    }
    if (path.startsWith('/_control/')) return this.handleControl(method, path, raw, res);

    const record: RecordedRequest = {
      method,
      path,
      body: parseJsonOrText(raw),
      headers: pickHeaders(req),
      time: Date.now(),
    };
    if (path.startsWith('/v1/')) this.recorded.push(record);
    res.on('finish', () => (record.status = res.statusCode));
    res.on('close', () => (record.status ??= res.headersSent ? res.statusCode : 0));

    if (method === 'GET' && path === '/v1/models') {
      const created = Math.floor(Date.now() / 1000);
      const ids = [...new Set([this.config.model, 'fake'])];
      return sendJson(res, 200, {
        object: 'list',
        data: ids.map((id) => ({ id, object: 'model', created, owned_by: 'sessionlog-fake' })),
      });
    }
    if (method === 'POST' && path === '/v1/chat/completions') {
      try {
        await this.handleChat(req, res, record);
      } catch (error) {
        if (error instanceof HttpError) return sendError(res, error);
        throw error;
      }
      return;
    }
    sendError(
      res,
      new HttpError(404, {
        message: `no route for ${method} ${path}`,
        type: 'invalid_request_error',
        code: 'not_found',
      }),
    );
  }

  private async handleChat(
    req: http.IncomingMessage,
    res: http.ServerResponse,
    record: RecordedRequest,
  ): Promise<void> {
    if (this.config.apiKey !== null && record.headers.authorization !== `Bearer ${this.config.apiKey}`) {
      throw new HttpError(401, {
        message: 'Authentication Fails, your api key is invalid',
        type: 'authentication_error',
        code: 'invalid_api_key',
      });
    }
    if (typeof record.body !== 'object' || record.body === null) {
      throw invalidRequest('the request body must be a JSON object with `model` and `messages`');
    }
    const parsed = chatBodySchema.safeParse(record.body);
    if (!parsed.success) throw invalidRequest(`invalid request body: ${z.prettifyError(parsed.error)}`);
    const body = parsed.data;

    const fault = this.takeFault();
    const clientGone = new AbortController();
    res.on('close', () => clientGone.abort());

    if (fault?.kind === 'rate_limit') {
      const seconds = fault.retryAfterSeconds ?? 1;
      throw new HttpError(
        429,
        {
          message: 'Rate limit reached for requests. Please retry after the time in the retry-after header.',
          type: 'rate_limit_error',
          code: 'rate_limit_exceeded',
        },
        { 'retry-after': String(seconds) },
      );
    }
    if (fault?.kind === 'auth_echo') {
      const presented = record.headers.authorization?.replace(/^Bearer\s+/i, '') ?? '(none)';
      throw new HttpError(401, {
        message: `Incorrect API key provided: ${presented}. You can find your API key in your account settings.`,
        type: 'invalid_request_error',
        code: 'invalid_api_key',
      });
    }
    if (fault?.kind === 'server_error') {
      throw new HttpError(fault.status ?? 500, {
        message: 'The server had an error while processing your request.',
        type: 'server_error',
        code: 'internal_error',
      });
    }
    if (fault?.kind === 'hang') {
      // Answer nothing; the client's timeout or abort (or `close()`) ends the exchange.
      await waitForAbort(clientGone.signal);
      return;
    }

    const promptIds = deepseekPromptTokenIds(body.messages, body.tools);
    const limit = this.config.contextLimitTokens;
    if (limit !== null && promptIds.length > limit) {
      throw new HttpError(400, {
        message: `This model's maximum context length is ${limit} tokens. However, you requested ${promptIds.length} tokens (${promptIds.length} in the messages, 0 in the completion). Please reduce the length of the messages.`,
        type: 'invalid_request_error',
        code: 'context_length_exceeded',
      });
    }
    this.admit(promptIds.length, res);
    const cacheHit = commonPrefixLength(this.previousPromptIds, promptIds);
    this.previousPromptIds = promptIds;

    let reply = this.nextReply(body, req);
    if (fault?.kind === 'malformed_tool_json') reply = this.malformToolJson(reply, body);
    const usage = usageOf(promptIds.length, cacheHit, reply);
    this.sentUsage.push(usage);
    const id = `chatcmpl-fake-${++this.completionCounter}`;
    const created = Math.floor(Date.now() / 1000);

    if (body.stream) {
      const dropAfter = fault?.kind === 'drop_stream' ? (fault.afterChunks ?? 2) : undefined;
      await this.streamReply(res, clientGone.signal, {
        id,
        created,
        model: body.model,
        reply,
        usage,
        includeUsage: body.stream_options?.include_usage === true,
        dropAfter,
      });
      return;
    }
    if (fault?.kind === 'drop_stream') {
      res.socket?.destroy();
      return;
    }
    if (!(await pause(this.config.firstTokenDelayMs, clientGone.signal))) return;
    const message: Record<string, unknown> = {
      role: 'assistant',
      content: reply.text === '' && reply.toolCalls.length > 0 ? null : reply.text,
    };
    if (reply.reasoning !== '') message.reasoning_content = reply.reasoning;
    if (reply.toolCalls.length > 0) {
      message.tool_calls = reply.toolCalls.map((c) => ({
        id: c.id,
        type: 'function',
        function: { name: c.name, arguments: c.arguments },
      }));
    }
    sendJson(res, 200, {
      id,
      object: 'chat.completion',
      created,
      model: body.model,
      choices: [{ index: 0, message, finish_reason: reply.finishReason, logprobs: null }],
      usage,
    });
  }

  private async streamReply(
    res: http.ServerResponse,
    signal: AbortSignal,
    s: {
      id: string;
      created: number;
      model: string;
      reply: NormalizedReply;
      usage: object;
      includeUsage: boolean;
      dropAfter: number | undefined;
    },
  ): Promise<void> {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
    const base = { id: s.id, object: 'chat.completion.chunk', created: s.created, model: s.model };
    const choiceChunk = (delta: object, finishReason: string | null = null) => ({
      ...base,
      choices: [{ index: 0, delta, finish_reason: finishReason, logprobs: null }],
    });
    const chunks: object[] = [choiceChunk({ role: 'assistant', content: '' })];
    for (const piece of splitPieces(s.reply.reasoning)) chunks.push(choiceChunk({ reasoning_content: piece }));
    for (const piece of splitPieces(s.reply.text)) chunks.push(choiceChunk({ content: piece }));
    s.reply.toolCalls.forEach((call, index) => {
      chunks.push(
        choiceChunk({
          tool_calls: [{ index, id: call.id, type: 'function', function: { name: call.name, arguments: '' } }],
        }),
      );
      for (const piece of splitArguments(call.arguments))
        chunks.push(choiceChunk({ tool_calls: [{ index, function: { arguments: piece } }] }));
    });
    chunks.push(choiceChunk({}, s.reply.finishReason));
    if (s.includeUsage) chunks.push({ ...base, choices: [], usage: s.usage });

    for (let i = 0; i < chunks.length; i++) {
      if (s.dropAfter !== undefined && i >= s.dropAfter) {
        res.socket?.destroy();
        return;
      }
      const delay = i === 0 ? this.config.firstTokenDelayMs : this.config.tokenDelayMs;
      if (!(await pause(delay, signal))) return;
      // Wait until the chunk is handed to the socket, so a later drop cuts after it, not before.
      await writeAndFlush(res, `data: ${JSON.stringify(chunks[i])}\n\n`, signal);
    }
    if (s.dropAfter !== undefined) {
      res.socket?.destroy();
      return;
    }
    res.end('data: [DONE]\n\n');
  }

  private takeFault(): FakeFault | undefined {
    const fault = this.faults[0];
    if (!fault) return undefined;
    fault.remaining -= 1;
    if (fault.remaining <= 0) this.faults.shift();
    return fault;
  }

  private nextReply(body: FakeChatBody, req: http.IncomingMessage): NormalizedReply {
    const lastUserText = lastUserMessageText(body);
    const scripted = this.replies.shift() ?? this.matcher?.({ body, headers: pickHeaders(req), lastUserText });
    return this.normalize(
      scripted ?? {
        text: structuredEcho(body.response_format, lastUserText) ?? `${this.config.echoPrefix}${lastUserText}`,
      },
    );
  }

  private normalize(reply: FakeReply): NormalizedReply {
    const toolCalls = (reply.toolCalls ?? []).map((call) => ({
      id: call.id ?? `call_fake_${++this.toolCallCounter}`,
      name: call.name,
      arguments: typeof call.arguments === 'string' ? call.arguments : JSON.stringify(call.arguments),
    }));
    return {
      reasoning: reply.reasoning ?? '',
      text: reply.text ?? '',
      toolCalls,
      finishReason: reply.finishReason ?? (toolCalls.length > 0 ? 'tool_calls' : 'stop'),
    };
  }

  private malformToolJson(reply: NormalizedReply, body: FakeChatBody): NormalizedReply {
    const broken = (args: string) => `${args.slice(0, Math.ceil(args.length / 2))}<<malformed`;
    if (reply.toolCalls.length > 0) {
      return { ...reply, toolCalls: reply.toolCalls.map((c) => ({ ...c, arguments: broken(c.arguments) })) };
    }
    const name = body.tools?.[0]?.function.name ?? 'unknown_tool';
    return {
      ...reply,
      toolCalls: [{ id: `call_fake_${++this.toolCallCounter}`, name, arguments: broken('{"input": "x"}') }],
      finishReason: 'tool_calls',
    };
  }

  private handleControl(method: string, path: string, raw: string, res: http.ServerResponse): void {
    const body = parseJsonOrText(raw);
    const route = `${method} ${path}`;
    const bad = (message: string) => sendError(res, invalidRequest(message));
    switch (route) {
      case 'GET /_control/requests':
        return sendJson(res, 200, this.requests());
      case 'POST /_control/reset':
        this.reset();
        return sendJson(res, 200, { ok: true });
      case 'POST /_control/faults': {
        const parsed = z.union([faultSchema, z.array(faultSchema)]).safeParse(body);
        if (!parsed.success) return bad(`invalid fault: ${z.prettifyError(parsed.error)}`);
        for (const fault of [parsed.data].flat()) this.injectFault(fault);
        return sendJson(res, 200, { ok: true, pending: this.faults.length });
      }
      case 'DELETE /_control/faults':
        this.clearFaults();
        return sendJson(res, 200, { ok: true });
      case 'POST /_control/replies': {
        const parsed = z.union([replySchema, z.array(replySchema)]).safeParse(body);
        if (!parsed.success) return bad(`invalid reply: ${z.prettifyError(parsed.error)}`);
        this.enqueueReplies(...[parsed.data].flat());
        return sendJson(res, 200, { ok: true, queued: this.replies.length });
      }
      case 'POST /_control/config': {
        const parsed = configSchema.safeParse(body);
        if (!parsed.success) return bad(`invalid config: ${z.prettifyError(parsed.error)}`);
        this.configure(stripUndefined(parsed.data));
        return sendJson(res, 200, this.currentConfig());
      }
      case 'GET /_control/config':
        return sendJson(res, 200, this.currentConfig());
      default:
        return sendError(
          res,
          new HttpError(404, {
            message: `no control route ${route}`,
            type: 'invalid_request_error',
            code: 'not_found',
          }),
        );
    }
  }
}

/** Starts a fake model server; see `FakeModelServerOptions` for the knobs. */
export function startFakeModelServer(options: FakeModelServerOptions = {}): Promise<FakeModelServer> {
  return FakeModelServer.start(options);
}

// ---- helpers -----------------------------------------------------------------------------

function pickConfig(options: FakeModelServerOptions): Partial<FakeModelConfig> {
  const picked: Partial<FakeModelConfig> = {};
  if (options.firstTokenDelayMs !== undefined) picked.firstTokenDelayMs = options.firstTokenDelayMs;
  if (options.tokenDelayMs !== undefined) picked.tokenDelayMs = options.tokenDelayMs;
  if (options.contextLimitTokens !== undefined) picked.contextLimitTokens = options.contextLimitTokens;
  if (options.model !== undefined) picked.model = options.model;
  if (options.echoPrefix !== undefined) picked.echoPrefix = options.echoPrefix;
  if (options.apiKey !== undefined) picked.apiKey = options.apiKey;
  if (options.rateLimit !== undefined) picked.rateLimit = options.rateLimit;
  return picked;
}

function stripUndefined<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}

function invalidRequest(message: string): HttpError {
  return new HttpError(400, { message, type: 'invalid_request_error', code: 'invalid_request_error' });
}

function sendJson(res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
}

function sendError(res: http.ServerResponse, error: HttpError): void {
  sendJson(res, error.status, { error: { ...error.body, param: null } }, error.headers);
}

async function readBody(req: http.IncomingMessage): Promise<string> {
  const parts: Buffer[] = [];
  let size = 0;
  for await (const part of req as AsyncIterable<Buffer>) {
    size += part.length;
    if (size > MAX_BODY_BYTES) {
      throw new HttpError(413, {
        message: `request body exceeds ${MAX_BODY_BYTES} bytes`,
        type: 'invalid_request_error',
        code: 'request_too_large',
      });
    }
    parts.push(part);
  }
  return Buffer.concat(parts).toString('utf8');
}

function parseJsonOrText(raw: string): unknown {
  if (raw === '') return undefined;
  try {
    return JSON.parse(raw) as unknown;
  } catch {
    // Not JSON: keep the text so the recording shows what arrived; validation rejects it.
    return raw;
  }
}

function pickHeaders(req: http.IncomingMessage): Record<string, string> {
  const picked: Record<string, string> = {};
  for (const name of RECORDED_HEADERS) {
    const value = req.headers[name];
    if (typeof value === 'string') picked[name] = value;
  }
  return picked;
}

function lastUserMessageText(body: FakeChatBody): string {
  for (let i = body.messages.length - 1; i >= 0; i--) {
    const message = body.messages[i];
    if (message?.role === 'user') return wireContentText(message.content);
  }
  return '';
}

function commonPrefixLength(a: readonly number[], b: readonly number[]): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}

function usageOf(promptTokens: number, cacheHit: number, reply: NormalizedReply) {
  const reasoningTokens = countOrdinaryTokens(reply.reasoning);
  let completionTokens = reasoningTokens + countOrdinaryTokens(reply.text);
  for (const call of reply.toolCalls)
    completionTokens += countOrdinaryTokens(call.name) + countOrdinaryTokens(call.arguments);
  return {
    prompt_tokens: promptTokens,
    completion_tokens: completionTokens,
    total_tokens: promptTokens + completionTokens,
    prompt_cache_hit_tokens: cacheHit,
    prompt_cache_miss_tokens: promptTokens - cacheHit,
    prompt_tokens_details: { cached_tokens: cacheHit },
    completion_tokens_details: { reasoning_tokens: reasoningTokens },
  };
}

/** Word-sized pieces, so a stream has roughly one chunk per token. */
function splitPieces(text: string): string[] {
  return text === '' ? [] : (text.match(/\s*\S+|\s+/g) ?? [text]);
}

function splitArguments(args: string): string[] {
  const pieces: string[] = [];
  for (let i = 0; i < args.length; i += 8) pieces.push(args.slice(i, i + 8));
  return pieces;
}

/** Waits `ms`; false when the client went away meanwhile. */
async function pause(ms: number, signal: AbortSignal): Promise<boolean> {
  if (signal.aborted) return false;
  if (ms <= 0) return true;
  try {
    await sleep(ms, undefined, { signal });
    return true;
  } catch {
    // Aborted because the client disconnected: stop producing output.
    return false;
  }
}

/** Writes and resolves once the data reached the socket (or the client went away). */
function writeAndFlush(res: http.ServerResponse, data: string, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const onAbort = () => resolve();
    signal.addEventListener('abort', onAbort, { once: true });
    res.write(data, () => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    });
  });
}

function waitForAbort(signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
}

/**
 * The fake's answer to a structured output format: JSON that echoes the last user message
 * (`{"echo": …}` for any JSON object; for a JSON Schema, a value of that shape whose strings
 * are the message). Undefined for text replies.
 */
function structuredEcho(format: FakeChatBody['response_format'], text: string): string | undefined {
  if (format === undefined || format.type === 'text') return undefined;
  if (format.type === 'json_object') return JSON.stringify({ echo: text });
  return JSON.stringify(valueOfSchema(format.json_schema.schema ?? {}, text, 0));
}

function valueOfSchema(schema: unknown, text: string, depth: number): JsonValue {
  const s = (typeof schema === 'object' && schema !== null ? schema : {}) as Record<string, unknown>;
  if (Array.isArray(s.enum) && s.enum.length > 0) return s.enum[0] as JsonValue;
  if (s.const !== undefined) return s.const as JsonValue;
  const type = Array.isArray(s.type) ? s.type.find((t) => t !== 'null') : s.type;
  if (depth > 8) return null;
  switch (type) {
    case 'string':
      return text;
    case 'number':
    case 'integer':
      return 0;
    case 'boolean':
      return false;
    case 'array':
      return [valueOfSchema(s.items, text, depth + 1)];
    case 'null':
      return null;
    default: {
      const properties = (typeof s.properties === 'object' && s.properties !== null ? s.properties : {}) as Record<
        string,
        unknown
      >;
      return Object.fromEntries(
        Object.entries(properties).map(([key, value]) => [key, valueOfSchema(value, text, depth + 1)]),
      );
    }
  }
}
