/**
 * The one error table (DESIGN §2): every code a SessionlogError carries, with its class and its
 * HTTP status. Every set of codes elsewhere (what stops a workflow run, what an activity retries,
 * what a client reports as a refusal, what a listing skips) and the gateway's status mapping are
 * derived from it, so a new code cannot be added without deciding all of them at once.
 *
 * Classes:
 * - `refusal`: the request or its input is refused and nothing changed; the caller changes the
 *   request (4xx).
 * - `fatal`: the session's log cannot be written safely by this workflow run (another writer, a
 *   damaged or erased log): the run stops and every waiting caller is told why.
 * - `retryable`: an activity that failed with it is retried: the store was unreachable for a
 *   moment, or another attempt of the same step wrote first; a retry can succeed.
 * - `internal`: the server or a stored log is at fault; the caller cannot fix it (5xx).
 *
 * `unreadableLog`: reading the session's log failed because it is gone or cannot be read; a
 * listing across sessions leaves the session out instead of failing.
 *
 * These codes are public API (HTTP error bodies, CLI output): they are never renamed.
 */
export const SESSION_ERRORS = {
  INVALID_SESSION_ID: { class: 'refusal', status: 400 },
  INVALID_ARGUMENT: { class: 'refusal', status: 400 },
  INVALID_BOUNDARY: { class: 'refusal', status: 400 },
  UNKNOWN_MODEL: { class: 'refusal', status: 400 },
  ARTIFACT_FOREIGN: { class: 'refusal', status: 403 },
  SESSION_NOT_FOUND: { class: 'refusal', status: 404, unreadableLog: true },
  ARTIFACT_NOT_FOUND: { class: 'refusal', status: 404 },
  UNKNOWN_CALL: { class: 'refusal', status: 404 },
  SESSION_ALREADY_EXISTS: { class: 'refusal', status: 409 },
  OPEN_TURN: { class: 'refusal', status: 409 },
  HEADER_MISMATCH: { class: 'refusal', status: 409 },
  SESSION_CLOSED: { class: 'refusal', status: 409 },
  ALREADY_ANSWERED: { class: 'refusal', status: 409 },
  INVALID_MESSAGE: { class: 'refusal', status: 422 },
  EMPTY_MESSAGE: { class: 'refusal', status: 422 },
  MESSAGE_TOO_LARGE: { class: 'refusal', status: 422 },
  // Media a caller sends (session/media.ts): bytes that are not what they claim, too many bytes,
  // a type sessionlog does not store.
  INVALID_MEDIA: { class: 'refusal', status: 400 },
  MEDIA_TOO_LARGE: { class: 'refusal', status: 413 },
  UNSUPPORTED_MEDIA_TYPE: { class: 'refusal', status: 415 },
  // A medium the routed model cannot take (the model catalogue's `input`), refused before the turn.
  MEDIA_NOT_SUPPORTED: { class: 'refusal', status: 400 },
  // The log is ahead of or behind this run's idea of it, or another writer used the same op key.
  LOG_BEHIND: { class: 'fatal', status: 409 },
  LOG_AHEAD: { class: 'fatal', status: 409 },
  OP_CONFLICT: { class: 'fatal', status: 409 },
  SESSION_ERASED: { class: 'fatal', status: 410, unreadableLog: true },
  CORRUPT_LOG: { class: 'fatal', status: 500, unreadableLog: true },
  UNSUPPORTED_FORMAT: { class: 'fatal', status: 500, unreadableLog: true },
  // The store or a lock was unreachable for a moment.
  UNAVAILABLE: { class: 'retryable', status: 503 },
  // Another attempt of the same step appended after this one opened the log (an attempt that
  // timed out on a live, overloaded worker carried on beside its retry). A new attempt opens the
  // log afresh and finds the other attempt's batches under their ops; the stale attempt's own
  // failure is discarded by Temporal. A newer run owning the session is LOG_AHEAD, never retried.
  SEQ_CONFLICT: { class: 'retryable', status: 409 },
  INVALID_EVENT: { class: 'internal', status: 500 },
  SURFACE_VIOLATION: { class: 'internal', status: 500 },
  NON_JSON_VALUE: { class: 'internal', status: 500 },
  SUMMARY_REFUSED: { class: 'internal', status: 500 },
  STORE_CLOSED: { class: 'internal', status: 503 },
} as const satisfies Record<string, SessionErrorSpec>;

/** How a code is handled: see {@link SESSION_ERRORS}. */
export type SessionErrorClass = 'refusal' | 'fatal' | 'retryable' | 'internal';

/** One row of {@link SESSION_ERRORS}. */
export type SessionErrorSpec = { class: SessionErrorClass; status: number; unreadableLog?: true };

/** Errors with a stable `code` that callers (HTTP, CLI, activities) can map and act on. */
export type SessionErrorCode = keyof typeof SESSION_ERRORS;

/** Every session error code, in table order. */
export const SESSION_ERROR_CODES = Object.keys(SESSION_ERRORS) as SessionErrorCode[];

function codesWhere(test: (spec: SessionErrorSpec) => boolean): ReadonlySet<SessionErrorCode> {
  return new Set(SESSION_ERROR_CODES.filter((code) => test(SESSION_ERRORS[code])));
}

/** Whether `code` is a session error code (a failure type read back from Temporal is only a string). */
export function isSessionErrorCode(code: string | undefined | null): code is SessionErrorCode {
  return code != null && Object.prototype.hasOwnProperty.call(SESSION_ERRORS, code);
}

/** Codes after which a workflow run must not write the session's log any more (class `fatal`). */
export const FATAL_CODES = codesWhere((spec) => spec.class === 'fatal');

/** Codes a retry can fix (class `retryable`); an activity fails every other code as non-retryable. */
export const RETRYABLE_CODES = codesWhere((spec) => spec.class === 'retryable');

/**
 * Codes a caller is told as a SessionlogError when a workflow update fails with them: every class
 * but `internal`, whose detail stays in the server's log.
 */
export const CALLER_VISIBLE_CODES = codesWhere((spec) => spec.class !== 'internal');

/** Codes that say a session's log is gone or unreadable: listings across sessions skip it. */
export const UNREADABLE_LOG_CODES = codesWhere((spec) => spec.unreadableLog === true);

/**
 * An error with a code from the one error table (`SESSION_ERRORS`): the code says what happened
 * and, through the table, its class and HTTP status.
 */
export class SessionlogError extends Error {
  /**
   * The index of the part of a message's `content` the error is about, when it is about one
   * (session/media.ts), so a surface can name its own parameter (`messages[0].content[1]`).
   */
  readonly part?: number;
  constructor(
    readonly code: SessionErrorCode,
    message: string,
    options?: { cause?: unknown; part?: number },
  ) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'SessionlogError';
    if (options?.part !== undefined) this.part = options.part;
  }
}

/** Whether `error` is a `SessionlogError`, and, given a `code`, one with that code. */
export function isSessionlogError(error: unknown, code?: SessionErrorCode): error is SessionlogError {
  return error instanceof SessionlogError && (code === undefined || error.code === code);
}

/** A setting that cannot work, found at start-up; the message names the setting and the fix (DESIGN §1.8). */
export class ConfigError extends Error {
  readonly code = 'INVALID_CONFIG';
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}
