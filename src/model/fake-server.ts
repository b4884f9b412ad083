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
 * - Images and files (`image_url` and `file` parts, fake-server/media.ts) are checked, priced by
 *   the meter's rule (OpenAI's tile rule for images) and described on request ("describe the
 *   media" in the last user message).
 * - A request's `tool_choice` and `parallel_tool_calls` are honoured as a provider honours them
 *   (fake-server/tool-choice.ts): `required` or a named tool makes it call one, `none` never.
 * - Faults can be injected for the next N requests (429 with `retry-after`, 5xx, hang,
 *   dropped stream, malformed tool-call JSON), and prompts above `contextLimitTokens` get a
 *   context-overflow 400.
 * - Every `/v1` request is recorded. All of this is reachable from JS and from another
 *   process through `/_control/*` (see `FakeModelServer`).
 *
 * This file is the server and its state; the pieces live in fake-server/: the vocabulary
 * (types.ts), what it accepts (wire.ts), the reply script (replies.ts), faults (faults.ts),
 * rate limits (rate-limit.ts), usage (usage.ts), the reply on the wire (encoding.ts), the
 * control routes (control.ts) and its HTTP plumbing (http.ts).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { z } from 'zod';
import { deepseekPromptTokenIds } from './deepseek-tokens.js';
import { handleControl } from './fake-server/control.js';
import { completionObject, pause, streamReply, waitForAbort } from './fake-server/encoding.js';
import { FaultQueue, faultError, malformToolJson } from './fake-server/faults.js';
import {
  HttpError,
  invalidRequest,
  notFound,
  parseJsonOrText,
  pickHeaders,
  readBody,
  sendError,
  sendJson,
} from './fake-server/http.js';
import { RateLimiter } from './fake-server/rate-limit.js';
import { ReplyScript, lastUserMessageText } from './fake-server/replies.js';
import { checkToolOptions, honourToolOptions } from './fake-server/tool-choice.js';
import { DESCRIBE_MEDIA_TRIGGER, describeMedia, receivedMedia, receivedMediaTokens } from './fake-server/media.js';
import {
  DEFAULT_FAKE_MODEL_CONFIG,
  type FakeFault,
  type FakeModelConfig,
  type FakeReply,
  type FakeReplyMatcher,
  type RecordedRequest,
} from './fake-server/types.js';
import { commonPrefixLength, usageOf, type FakeUsage } from './fake-server/usage.js';
import { chatBodySchema, type FakeChatBody } from './fake-server/wire.js';

export {
  DEFAULT_FAKE_MODEL_CONFIG,
  type FakeChatRequest,
  type FakeFault,
  type FakeModelConfig,
  type FakeReply,
  type FakeReplyMatcher,
  type FakeToolCall,
  type RecordedRequest,
} from './fake-server/types.js';
export type { FakeChatBody } from './fake-server/wire.js';

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
  /**
   * How many of the latest `/v1` requests and reported usages `requests()`, `chatRequests()` and
   * `reportedUsage()` keep. Default: all of them, which tests read; a long-running offline model
   * (`sessionlog dev`, `sessionlog worker`) keeps a few, or every prompt it was sent stays in memory.
   */
  keepRequests?: number;
};

/** A running fake model server. Create it with `startFakeModelServer`. */
export class FakeModelServer {
  private config: FakeModelConfig;
  private readonly script: ReplyScript;
  private readonly faults = new FaultQueue();
  private readonly limiter = new RateLimiter();
  private recorded: RecordedRequest[] = [];
  private sentUsage: FakeUsage[] = [];
  private previousPromptIds: number[] = [];
  private completionCounter = 0;
  private readonly keepRequests: number;

  private constructor(
    private readonly server: http.Server,
    options: FakeModelServerOptions,
  ) {
    this.config = { ...DEFAULT_FAKE_MODEL_CONFIG, ...pickConfig(options) };
    this.script = new ReplyScript(options.replies ?? [], options.matcher);
    this.keepRequests = options.keepRequests ?? Number.POSITIVE_INFINITY;
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
    this.script.enqueue(replies);
  }
  setMatcher(matcher: FakeReplyMatcher | undefined): void {
    this.script.setMatcher(matcher);
  }
  /** Applies `fault` to the next `fault.times` (default 1) chat requests, after earlier faults. */
  injectFault(fault: FakeFault): void {
    this.faults.inject(fault);
  }
  clearFaults(): void {
    this.faults.clear();
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
  reportedUsage(): FakeUsage[] {
    return this.sentUsage.slice();
  }
  /** Clears recorded requests, reported usage, queued replies, faults, the matcher, the cache prefix and ids. */
  reset(): void {
    this.recorded = [];
    this.sentUsage = [];
    this.script.reset();
    this.faults.clear();
    this.previousPromptIds = [];
    this.completionCounter = 0;
    this.limiter.reset();
  }

  /** Under `rateLimit`: when each chat request was let in and when one was refused with a 429 (epoch ms). */
  rateLimitCounts(): { admitted: number[]; refused: number; refusedAt: number[] } {
    return this.limiter.counts();
  }

  /** Under `rateLimit`: the most requests let in within any window of `ms`. */
  mostAdmittedWithin(ms: number): number {
    return this.limiter.mostAdmittedWithin(ms);
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
    if (path.startsWith('/_control/')) {
      const target = { model: this, pendingFaults: () => this.faults.pending, queuedReplies: () => this.script.queued };
      return handleControl(target, method, path, raw, res);
    }

    const record: RecordedRequest = {
      method,
      path,
      body: parseJsonOrText(raw),
      headers: pickHeaders(req),
      time: Date.now(),
    };
    if (path.startsWith('/v1/')) keepLatest(this.recorded, record, this.keepRequests);
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
    sendError(res, notFound(`no route for ${method} ${path}`));
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
    checkToolOptions(body);
    const media = receivedMedia(body);
    const mediaTokens = receivedMediaTokens(media);

    const fault = this.faults.take();
    const clientGone = new AbortController();
    res.on('close', () => clientGone.abort());

    const refusal = faultError(fault, record.headers.authorization);
    if (refusal) throw refusal;
    if (fault?.kind === 'hang') {
      // Answer nothing; the client's timeout or abort (or `close()`) ends the exchange.
      await waitForAbort(clientGone.signal);
      return;
    }

    // Counted on the body as sent: the parsed copy orders an object's known keys first, and a tool's
    // JSON (name, description, parameters) must be counted in the order the client wrote it.
    const sent = record.body as FakeChatBody;
    const promptIds = deepseekPromptTokenIds(sent.messages, sent.tools);
    const promptTokens = promptIds.length + mediaTokens.images + mediaTokens.files;
    const limit = this.config.contextLimitTokens;
    if (limit !== null && promptTokens > limit) {
      throw new HttpError(400, {
        message: `This model's maximum context length is ${limit} tokens. However, you requested ${promptTokens} tokens (${promptTokens} in the messages, 0 in the completion). Please reduce the length of the messages.`,
        type: 'invalid_request_error',
        code: 'context_length_exceeded',
      });
    }
    this.limiter.admit(this.config.rateLimit, promptTokens, res);
    const cacheHit = commonPrefixLength(this.previousPromptIds, promptIds);
    this.previousPromptIds = promptIds;

    let reply =
      this.script.queued === 0 && lastUserMessageText(body).toLowerCase().includes(DESCRIBE_MEDIA_TRIGGER)
        ? { reasoning: '', text: describeMedia(media), toolCalls: [], finishReason: 'stop' as const }
        : this.script.next(body, () => pickHeaders(req), this.config.echoPrefix);
    reply = honourToolOptions(reply, body, {
      nextCallId: () => this.script.nextCallId(),
      textReply: () => `${this.config.echoPrefix}${lastUserMessageText(body)}`,
      lastUserText: lastUserMessageText(body),
    });
    if (fault?.kind === 'malformed_tool_json') reply = malformToolJson(reply, body, () => this.script.nextCallId());
    const usage = usageOf(promptTokens, cacheHit, reply, mediaTokens.images);
    keepLatest(this.sentUsage, usage, this.keepRequests);
    const completion = {
      id: `chatcmpl-fake-${++this.completionCounter}`,
      created: Math.floor(Date.now() / 1000),
      model: body.model,
      reply,
      usage,
    };

    if (body.stream) {
      const dropAfter = fault?.kind === 'drop_stream' ? (fault.afterChunks ?? 2) : undefined;
      const includeUsage = body.stream_options?.include_usage === true;
      await streamReply(res, clientGone.signal, () => this.config, { ...completion, includeUsage, dropAfter });
      return;
    }
    if (fault?.kind === 'drop_stream') {
      res.socket?.destroy();
      return;
    }
    if (!(await pause(this.config.firstTokenDelayMs, clientGone.signal))) return;
    sendJson(res, 200, completionObject(completion));
  }
}

/** Starts a fake model server; see `FakeModelServerOptions` for the knobs. */
export function startFakeModelServer(options: FakeModelServerOptions = {}): Promise<FakeModelServer> {
  return FakeModelServer.start(options);
}

/** Appends `item` to `list`, dropping the oldest items beyond `keep`. */
function keepLatest<T>(list: T[], item: T, keep: number): void {
  list.push(item);
  if (list.length > keep) list.splice(0, list.length - keep);
}

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
