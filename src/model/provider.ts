import { createHash } from 'node:crypto';
/**
 * The model port (DESIGN §7): the one seam between the turn engine and a model, and its
 * implementation on the `openai` client against any OpenAI-compatible endpoint (DeepSeek by
 * default). Failures reject with a `ModelCallError` carrying the one failure type,
 * `ModelFailure`; `classifyModelError` maps anything else a call can throw.
 */
import OpenAI from 'openai';
import type { RequestHeader } from '../session/events.js';
import { registerSecret } from '../session/secrets.js';
import type { ContentBlock, Message, StreamChunk, TokenUsage } from '../session/messages.js';
import { DEFAULT_MODEL_CATALOGUE, lookupModel } from './catalogue.js';
import type { ModelCatalogue, ModelPrices, ResolvedModel } from './catalogue.js';
import { costOf } from '../session/usage.js';
import { buildChatRequest, storedMediaOf } from './request.js';
import { DEFAULT_COALESCE, streamCompletion } from './stream.js';
import type { CoalesceOptions } from './stream.js';

/**
 * One model call: the derived history, the request header (model, system prompt, tools, limits),
 * and how to stream and abort it.
 */
export type ModelRequest = {
  /** The derived model-visible history (from the log). */
  messages: readonly Message[];
  /** Model, system prompt, tool schemas and limits of this call. */
  header: RequestHeader;
  signal?: AbortSignal;
  /** Receives the reply's coalesced chunks as they stream, a batch at a time (awaited). */
  onChunks?: (chunks: StreamChunk[]) => void | Promise<void>;
  /** Called once, when the first delta arrives (before coalescing): the time to first token. */
  onFirstDelta?: () => void;
  /**
   * Return the chunks still buffered when the reply completes in `ModelReply.heldChunks`
   * instead of passing them to `onChunks` (a port may ignore this and deliver them all).
   */
  holdLastChunks?: boolean;
  /**
   * Reads the bytes of a stored medium the messages hold (the session's artifact store, in the
   * activity that makes the call). Required when they hold one; the port reads each once per call.
   */
  readMedia?: (locator: string) => Promise<Uint8Array>;
};

/** A model's reply: its blocks, finish reason, usage, the provider and model that answered, and whether it was aborted. */
export type ModelReply = {
  /** The reply's blocks; when `aborted`, what had streamed before the signal aborted. */
  content: ContentBlock[];
  /** 'stop' | 'tool_calls' | 'length' | 'content_filter' | provider-specific. */
  finishReason: string;
  usage?: TokenUsage;
  /** The provider name logged in message sources. */
  provider: string;
  /** The canonical model id that answered. */
  model: string;
  aborted: boolean;
  /** With `holdLastChunks`: the reply's last coalesced chunks, not passed to `onChunks`. */
  heldChunks?: StreamChunk[];
};

/** What the turn engine calls to reach a model. */
export interface ModelPort {
  /** The provider name logged in request headers and message sources (`deepseek`, `openai`, `fake`). */
  readonly provider: string;
  /** Resolves a model name (or alias) to its catalogue entry; throws `ModelCatalogueError` `UNKNOWN_MODEL`. */
  model(name: string): ResolvedModel;
  /** Streams one completion; rejects with a `ModelCallError` (see `classifyModelError`). */
  stream(request: ModelRequest): Promise<ModelReply>;
  /**
   * The requests- and tokens-per-minute limits the provider stated in its last response's
   * rate-limit headers (`x-ratelimit-limit-requests`, `x-ratelimit-limit-tokens`), if it sends them.
   */
  statedLimits?(): { requestsPerMinute?: number; tokensPerMinute?: number } | undefined;
  /** Names the provider account whose limits apply (the provider and a digest of its API key): the pacing bucket's key. */
  readonly paceKey?: string;
}

/** The per-minute limits a response's `x-ratelimit-limit-*` headers state (OpenAI's names). */
export function limitsFromHeaders(
  headers: Headers,
): { requestsPerMinute?: number; tokensPerMinute?: number } | undefined {
  const read = (name: string): number | undefined => {
    const value = Number(headers.get(name) ?? Number.NaN);
    return Number.isFinite(value) && value > 0 ? value : undefined;
  };
  const requests = read('x-ratelimit-limit-requests');
  const tokens = read('x-ratelimit-limit-tokens');
  if (requests === undefined && tokens === undefined) return undefined;
  return {
    ...(requests !== undefined ? { requestsPerMinute: requests } : {}),
    ...(tokens !== undefined ? { tokensPerMinute: tokens } : {}),
  };
}

/**
 * What a reply of `model` with `usage` cost in USD at the port's catalogue prices (issue 26's
 * ledger); undefined when the usage is unknown or the model has no prices.
 */
export function replyCost(
  port: Pick<ModelPort, 'model'>,
  model: string,
  usage: TokenUsage | undefined,
): number | undefined {
  if (!usage) return undefined;
  let prices: ModelPrices | undefined;
  try {
    prices = port.model(model).prices;
  } catch {
    return undefined; // a model the catalogue does not know (renamed since): no price to apply
  }
  return prices ? costOf(usage, prices) : undefined;
}

/**
 * An OpenAI-compatible endpoint for `createOpenAIProvider`: base URL, key, provider name, timeouts
 * and how streamed deltas are coalesced.
 */
export type OpenAIProviderConfig = {
  /** e.g. `https://api.deepseek.com` or a fake server's `…/v1`. */
  baseURL: string;
  apiKey: string;
  /** Provider name logged with each request (default `openai`). */
  provider?: string;
  catalogue?: ModelCatalogue;
  /** Per-request timeout of the HTTP client (default 600 000 ms). */
  timeoutMs?: number;
  /** Fail with `timeout` when a stream goes quiet this long (default 120 000 ms). */
  idleTimeoutMs?: number;
  /** How streamed deltas are coalesced into chunks (the log's `assistant/chunk` events). */
  coalesce?: Partial<CoalesceOptions>;
  /** The client's own retries. Default 0: retries belong to the caller (Temporal). */
  maxRetries?: number;
  /** Extra headers for every request. */
  defaultHeaders?: Record<string, string>;
};

/** `OpenAIProviderConfig` with every default filled in. */
export type ResolvedOpenAIProviderConfig = Required<Omit<OpenAIProviderConfig, 'coalesce' | 'defaultHeaders'>> & {
  coalesce: CoalesceOptions;
  defaultHeaders: Record<string, string>;
};

export function resolveOpenAIProviderConfig(config: OpenAIProviderConfig): ResolvedOpenAIProviderConfig {
  return {
    baseURL: config.baseURL,
    apiKey: config.apiKey,
    provider: config.provider ?? 'openai',
    catalogue: config.catalogue ?? DEFAULT_MODEL_CATALOGUE,
    timeoutMs: config.timeoutMs ?? 600_000,
    idleTimeoutMs: config.idleTimeoutMs ?? 120_000,
    coalesce: { ...DEFAULT_COALESCE, ...config.coalesce },
    maxRetries: config.maxRetries ?? 0,
    defaultHeaders: config.defaultHeaders ?? {},
  };
}

/** The model port over an OpenAI-compatible endpoint. */
export function createOpenAIProvider(input: OpenAIProviderConfig): ModelPort {
  const config = resolveOpenAIProviderConfig(input);
  registerSecret(config.apiKey);
  let stated: ReturnType<typeof limitsFromHeaders>;
  const client = new OpenAI({
    baseURL: config.baseURL,
    apiKey: config.apiKey,
    timeout: config.timeoutMs,
    maxRetries: config.maxRetries,
    defaultHeaders: config.defaultHeaders,
    // Every response's rate-limit headers, for pacing (persistence/pacing.ts).
    fetch: async (url, init) => {
      const response = await fetch(url, init);
      stated = limitsFromHeaders(response.headers) ?? stated;
      return response;
    },
  });
  const model = (name: string) => lookupModel(config.catalogue, name);
  return {
    provider: config.provider,
    model,
    statedLimits: () => stated,
    paceKey: `${config.provider}:${createHash('sha256').update(config.apiKey, 'utf8').digest('hex').slice(0, 16)}`,
    async stream({ messages, header, signal, onChunks, onFirstDelta, holdLastChunks, readMedia }) {
      const resolved = model(header.model);
      const media = await readMediaOf(messages, readMedia);
      const request = buildChatRequest({ messages, header, model: resolved, ...(media ? { media } : {}) });
      const result = await streamCompletion({
        client,
        request,
        coalesce: config.coalesce,
        idleTimeoutMs: config.idleTimeoutMs,
        ...(signal ? { signal } : {}),
        ...(onChunks ? { onChunks } : {}),
        ...(onFirstDelta ? { onFirstDelta } : {}),
        ...(holdLastChunks ? { holdLastChunks } : {}),
      });
      return {
        content: result.content,
        finishReason: result.finishReason ?? 'stop',
        ...(result.usage ? { usage: result.usage } : {}),
        provider: config.provider,
        model: resolved.id,
        aborted: result.aborted,
        ...(result.heldChunks ? { heldChunks: result.heldChunks } : {}),
      };
    },
  };
}

/** The bytes of every stored medium `messages` hold, by locator (undefined when they hold none). */
async function readMediaOf(
  messages: readonly Message[],
  readMedia: ModelRequest['readMedia'],
): Promise<Map<string, Uint8Array> | undefined> {
  const stored = storedMediaOf(messages);
  if (stored.length === 0) return undefined;
  if (!readMedia)
    throw new Error(`the request holds stored media (${stored[0]!.locator}) but the caller gave no way to read them`);
  const entries = await Promise.all(stored.map(async (s) => [s.locator, await readMedia(s.locator)] as const));
  return new Map(entries);
}
