/**
 * Classification of model-call failures into a closed union (DESIGN §7). Each class has a
 * fixed retry behaviour: rate limits, server errors, timeouts and network failures are worth
 * retrying; bad requests, auth failures and context overflow are not (overflow is handled by
 * compaction and one retry of the step, not by repeating the same request).
 */
import { APIConnectionError, APIConnectionTimeoutError, APIError, APIUserAbortError } from 'openai';
import type { ContentBlock } from '../session/messages.js';

export type ModelFailureKind =
  | 'rate_limit'
  | 'server'
  | 'timeout'
  | 'network'
  | 'context_overflow'
  | 'bad_request'
  | 'auth';

/** Whether each failure class may be retried with the same request. */
export const RETRYABLE_FAILURES: Readonly<Record<ModelFailureKind, boolean>> = {
  rate_limit: true,
  server: true,
  timeout: true,
  network: true,
  context_overflow: false,
  bad_request: false,
  auth: false,
};

export type ModelFailure = {
  kind: ModelFailureKind;
  retryable: boolean;
  message: string;
  status?: number;
  /** From `retry-after-ms` / `retry-after` (seconds or HTTP date) on a rate limit. */
  retryAfterMs?: number;
  /** The provider's own error code, e.g. `context_length_exceeded`. */
  providerCode?: string;
};

/** What had streamed before a call failed or was aborted. */
export type PartialCompletion = { content: ContentBlock[] };

/** A failed model call. `code` is the failure kind, stable for callers to switch on. */
export class ModelCallError extends Error {
  readonly code: ModelFailureKind;
  constructor(
    readonly failure: ModelFailure,
    readonly partial: PartialCompletion = { content: [] },
    options?: { cause?: unknown },
  ) {
    super(failure.message, options);
    this.name = 'ModelCallError';
    this.code = failure.kind;
  }
  get retryable(): boolean {
    return this.failure.retryable;
  }
}

const CONTEXT_OVERFLOW_CODES = new Set(['context_length_exceeded', 'context_window_exceeded', 'string_above_max_length']);
const CONTEXT_OVERFLOW_MESSAGE = /maximum context length|context length|context window|too many tokens|reduce the length/i;
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
const TIMEOUT_ERROR_CODES = new Set(['ETIMEDOUT', 'UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT']);

function failure(kind: ModelFailureKind, message: string, extra: Partial<ModelFailure> = {}): ModelFailure {
  return { kind, retryable: RETRYABLE_FAILURES[kind], message, ...extra };
}

/**
 * Maps anything a model call can throw (openai client errors, fetch/undici errors, our own
 * `ModelCallError`) to a `ModelFailure`. Errors that fit no class are treated as network
 * failures: transient by assumption, and bounded by the caller's retry policy.
 */
export function classifyModelError(error: unknown): ModelFailure {
  if (error instanceof ModelCallError) return error.failure;
  if (error instanceof APIConnectionTimeoutError) return failure('timeout', error.message);
  if (error instanceof APIUserAbortError) return failure('network', 'the request was aborted before it completed');
  if (error instanceof APIConnectionError) {
    const inner = causeCode(error.cause);
    if (inner && TIMEOUT_ERROR_CODES.has(inner)) return failure('timeout', describe(error));
    return failure('network', describe(error));
  }
  if (error instanceof APIError && typeof error.status === 'number') return classifyStatus(error);
  const code = causeCode(error);
  if (code && TIMEOUT_ERROR_CODES.has(code)) return failure('timeout', describe(error));
  if (code && NETWORK_ERROR_CODES.has(code)) return failure('network', describe(error));
  return failure('network', describe(error));
}

function classifyStatus(error: APIError): ModelFailure {
  const status = error.status as number;
  const providerCode = typeof error.code === 'string' ? error.code : undefined;
  const extra: Partial<ModelFailure> = providerCode ? { status, providerCode } : { status };
  const message = error.message;
  if (status === 429) {
    const retryAfterMs = retryAfterFromHeaders(error.headers);
    return failure('rate_limit', message, retryAfterMs === undefined ? extra : { ...extra, retryAfterMs });
  }
  if (status === 401 || status === 403) return failure('auth', message, extra);
  if (status === 408) return failure('timeout', message, extra);
  if (status === 400 || status === 413) {
    const overflow = (providerCode && CONTEXT_OVERFLOW_CODES.has(providerCode)) || CONTEXT_OVERFLOW_MESSAGE.test(message);
    return failure(overflow ? 'context_overflow' : 'bad_request', message, extra);
  }
  if (status === 409 || status >= 500) return failure('server', message, extra);
  return failure('bad_request', message, extra);
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
