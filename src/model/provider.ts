/**
 * The `ModelProvider` port the workflow activities call, and its implementation on the
 * `openai` client against any OpenAI-compatible endpoint (DeepSeek by default, DESIGN §7).
 */
import OpenAI from 'openai';
import type { RequestHeader } from '../session/events.js';
import type { Message, StreamChunk } from '../session/messages.js';
import { DEFAULT_MODEL_CATALOGUE, lookupModel } from './catalogue.js';
import type { ModelCatalogue, ResolvedModel } from './catalogue.js';
import { buildChatRequest } from './request.js';
import { DEFAULT_COALESCE, streamCompletion } from './stream.js';
import type { CoalesceOptions, CompletionResult } from './stream.js';

export type StreamCompletionInput = {
  /** The derived model-visible history (from the log). */
  messages: readonly Message[];
  /** Model, system prompt, tool schemas and limits of this call. */
  header: RequestHeader;
  signal?: AbortSignal;
  onChunk?: (chunk: StreamChunk) => void | Promise<void>;
};

/** What the model-call activity needs from a provider. */
export interface ModelProvider {
  /** Resolves a model name (or alias) to its catalogue entry; throws `UNKNOWN_MODEL`. */
  model(name: string): ResolvedModel;
  /**
   * Streams one completion. Resolves with the reply (or, when `signal` aborted, the partial
   * reply with `aborted: true`); rejects with a `ModelCallError` whose `failure` says whether
   * to retry.
   */
  streamCompletion(input: StreamCompletionInput): Promise<CompletionResult>;
}

export type OpenAIProviderConfig = {
  /** e.g. `https://api.deepseek.com` or a fake server's `…/v1`. */
  baseURL: string;
  apiKey: string;
  catalogue?: ModelCatalogue;
  /** Per-request timeout of the HTTP client (default 600 000 ms). */
  timeoutMs?: number;
  /** Fail with `timeout` when a stream goes quiet this long (default 120 000 ms). */
  idleTimeoutMs?: number;
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
    catalogue: config.catalogue ?? DEFAULT_MODEL_CATALOGUE,
    timeoutMs: config.timeoutMs ?? 600_000,
    idleTimeoutMs: config.idleTimeoutMs ?? 120_000,
    coalesce: { ...DEFAULT_COALESCE, ...config.coalesce },
    maxRetries: config.maxRetries ?? 0,
    defaultHeaders: config.defaultHeaders ?? {},
  };
}

export function createOpenAIProvider(input: OpenAIProviderConfig): ModelProvider {
  const config = resolveOpenAIProviderConfig(input);
  const client = new OpenAI({
    baseURL: config.baseURL,
    apiKey: config.apiKey,
    timeout: config.timeoutMs,
    maxRetries: config.maxRetries,
    defaultHeaders: config.defaultHeaders,
  });
  const model = (name: string) => lookupModel(config.catalogue, name);
  return {
    model,
    streamCompletion({ messages, header, signal, onChunk }) {
      const request = buildChatRequest({ messages, header, model: model(header.model) });
      return streamCompletion({
        client,
        request,
        coalesce: config.coalesce,
        idleTimeoutMs: config.idleTimeoutMs,
        ...(signal ? { signal } : {}),
        ...(onChunk ? { onChunk } : {}),
      });
    },
  };
}
