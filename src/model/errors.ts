/**
 * Classification of model-call failures into a closed union (DESIGN §7). Each class has a
 * fixed retry behaviour: rate limits, server errors, timeouts and network failures are worth
 * retrying; bad requests, auth failures and context overflow are not (overflow is handled by
 * compaction and one retry of the step, not by repeating the same request). Anything not
 * recognised as a provider or network failure is `internal` (a bug, most likely): never
 * retried, reported with its message and logged with its stack.
 */
import { APIConnectionError, APIConnectionTimeoutError, APIError, APIUserAbortError, OpenAIError } from 'openai';
import type { ContentBlock } from '../session/messages.js';
import { scrubSecrets } from '../session/secrets.js';
import { ModelCatalogueError } from './catalogue.js';

export type ModelFailureCode =
  | 'rate_limit'
  | 'server'
  | 'timeout'
  | 'network'
  | 'context_overflow'
  | 'bad_request'
  | 'auth'
  | 'unknown_model'
  | 'internal';

/** Whether each failure class may be retried with the same request. */
export const RETRYABLE_FAILURES: Readonly<Record<ModelFailureCode, boolean>> = {
  rate_limit: true,
  server: true,
  timeout: true,
  network: true,
  context_overflow: false,
  bad_request: false,
  auth: false,
  unknown_model: false,
  internal: false,
};

/** A classified model failure: the one failure type of the model port. */
export type ModelFailure = {
  code: ModelFailureCode;
  retryable: boolean;
  message: string;
  status?: number;
  /** From `retry-after-ms` / `retry-after` (seconds or HTTP date) on a rate limit. */
  retryAfterMs?: number;
  /** The provider's own error code, e.g. `context_length_exceeded`. */
  providerCode?: string;
  /** On a context overflow: the context window the provider's message states, in tokens. */
  contextLimit?: number;
};

/** What had streamed before a call failed or was aborted. */
export type PartialCompletion = { content: ContentBlock[] };

/** A failed model call. `code` is the failure class, stable for callers to switch on. */
export class ModelCallError extends Error {
  readonly code: ModelFailureCode;
  constructor(
    readonly failure: ModelFailure,
    readonly partial: PartialCompletion = { content: [] },
    options?: { cause?: unknown },
  ) {
    super(failure.message, options);
    this.name = 'ModelCallError';
    this.code = failure.code;
  }
  get retryable(): boolean {
    return this.failure.retryable;
  }
}

const CONTEXT_OVERFLOW_CODES = new Set([
  'context_length_exceeded',
  'context_window_exceeded',
  'string_above_max_length',
]);
const CONTEXT_OVERFLOW_MESSAGE =
  /maximum context length|context length|context window|too many tokens|reduce the length/i;
const NETWORK_ERROR_CODES = new Set([
  'ECONNRESET',
  'ECONNREFUSED',
  'EPIPE',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'UND_ERR_SOCKET',
  'UND_ERR_CLOSED',
]);
const TIMEOUT_ERROR_CODES = new Set([
  'ETIMEDOUT',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
]);

/** A failure of class `code` with that class's retry behaviour. */
export function modelFailure(code: ModelFailureCode, message: string, extra: Partial<ModelFailure> = {}): ModelFailure {
  // Providers echo keys in their error text (a 401 that quotes the key): never keep one.
  return { code, retryable: RETRYABLE_FAILURES[code], message: scrubSecrets(message), ...extra };
}

/**
 * Maps anything a model call can throw (openai client errors, fetch/undici errors, our own
 * `ModelCallError`) to a `ModelFailure`. An error that fits no class is `internal`: a
 * programming error retried as a network failure would only fail the same way again, slower,
 * and hide its cause.
 */
export function classifyModelError(error: unknown): ModelFailure {
  if (error instanceof ModelCallError) return error.failure;
  if (error instanceof ModelCatalogueError) return modelFailure('unknown_model', error.message);
  if (error instanceof APIConnectionTimeoutError) return modelFailure('timeout', error.message);
  if (error instanceof APIUserAbortError) return modelFailure('network', 'the request was aborted before it completed');
  if (error instanceof APIConnectionError) {
    const inner = causeCode(error.cause);
    if (inner && TIMEOUT_ERROR_CODES.has(inner)) return modelFailure('timeout', describe(error));
    return modelFailure('network', describe(error));
  }
  if (error instanceof APIError && typeof error.status === 'number') return classifyStatus(error);
  const code = causeCode(error);
  if (code && TIMEOUT_ERROR_CODES.has(code)) return modelFailure('timeout', describe(error));
  if (code && NETWORK_ERROR_CODES.has(code)) return modelFailure('network', describe(error));
  // The client's own errors about what the provider sent (a stream it could not parse): the provider's fault.
  if (error instanceof OpenAIError) return modelFailure('server', describe(error));
  return modelFailure('internal', `${error instanceof Error ? `${error.name}: ` : ''}${describe(error)}`);
}

function classifyStatus(error: APIError): ModelFailure {
  const status = error.status as number;
  const providerCode = typeof error.code === 'string' ? error.code : undefined;
  const extra: Partial<ModelFailure> = providerCode ? { status, providerCode } : { status };
  const message = error.message;
  if (status === 429) {
    const retryAfterMs = retryAfterFromHeaders(error.headers);
    return modelFailure('rate_limit', message, retryAfterMs === undefined ? extra : { ...extra, retryAfterMs });
  }
  if (status === 401 || status === 403) return modelFailure('auth', message, extra);
  if (status === 408) return modelFailure('timeout', message, extra);
  if (status === 400 || status === 413) {
    // A 413 is the request body being too large for the provider: the context, in effect.
    const overflow =
      status === 413 ||
      (providerCode && CONTEXT_OVERFLOW_CODES.has(providerCode)) ||
      CONTEXT_OVERFLOW_MESSAGE.test(message);
    if (!overflow) return modelFailure('bad_request', message, extra);
    const contextLimit = statedContextLimit(message);
    return modelFailure('context_overflow', message, contextLimit === undefined ? extra : { ...extra, contextLimit });
  }
  if (status === 409 || status >= 500) return modelFailure('server', message, extra);
  return modelFailure('bad_request', message, extra);
}

const STATED_LIMITS: readonly RegExp[] = [
  // OpenAI and DeepSeek: "This model's maximum context length is 65536 tokens. However, …"
  /maximum context length (?:is|of) (\d[\d,_]*) tokens/i,
  // "… exceeds the context window of 8192 tokens", "context window is 8192 tokens"
  /context (?:window|length|size) (?:of|is) (\d[\d,_]*)(?: tokens)?/i,
  // "prompt is too long: 2600 tokens > 2500 maximum", "… (2600 > 2500)"
  /(\d[\d,_]*) tokens? > (\d[\d,_]*)(?: maximum)?/i,
  // "maximum allowed is 2500 tokens", "limit of 2500 tokens", "max 2500 tokens"
  /(?:maximum(?: allowed)?|limit|max)(?: is| of)? (\d[\d,_]*) tokens/i,
];

/** The context window a provider's overflow message states, in tokens; undefined when it states none. */
export function statedContextLimit(message: string): number | undefined {
  for (const pattern of STATED_LIMITS) {
    const match = pattern.exec(message);
    if (!match) continue;
    const raw = match[match.length - 1]!.replace(/[,_]/g, '');
    const limit = Number(raw);
    if (Number.isSafeInteger(limit) && limit > 0) return limit;
  }
  return undefined;
}

/** Reads `retry-after-ms`, then `retry-after` as seconds or an HTTP date. */
export function retryAfterFromHeaders(headers: Headers | undefined, now: number = Date.now()): number | undefined {
  if (!headers) return undefined;
  const ms = headers.get('retry-after-ms');
  if (ms !== null && ms.trim() !== '' && Number.isFinite(Number(ms))) return Math.max(0, Number(ms));
  const value = headers.get('retry-after');
  if (value === null || value.trim() === '') return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds)) return Math.max(0, Math.round(seconds * 1000));
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

function causeCode(error: unknown): string | undefined {
  let current: unknown = error;
  for (let depth = 0; depth < 5 && current && typeof current === 'object'; depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string') return code;
    current = (current as { cause?: unknown }).cause;
  }
  return undefined;
}

function describe(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = error.cause instanceof Error ? `: ${error.cause.message}` : '';
  return `${error.message}${cause}`;
}
