/** Errors with a stable `code` that callers (HTTP, CLI, activities) can map and act on. */
export type SessionErrorCode =
  | 'INVALID_SESSION_ID'
  | 'INVALID_EVENT'
  | 'SURFACE_VIOLATION'
  | 'NON_JSON_VALUE'
  | 'SEQ_CONFLICT'
  | 'OP_CONFLICT'
  | 'SESSION_NOT_FOUND'
  | 'SESSION_ALREADY_EXISTS'
  | 'HEADER_MISMATCH'
  | 'CORRUPT_LOG'
  | 'UNSUPPORTED_FORMAT'
  | 'OPEN_TURN'
  | 'INVALID_BOUNDARY'
  | 'INVALID_ARGUMENT'
  | 'STORE_CLOSED'
  | 'UNAVAILABLE'
  | 'SESSION_ERASED'
  | 'ARTIFACT_NOT_FOUND'
  | 'ARTIFACT_FOREIGN'
  | 'INVALID_MESSAGE'
  | 'EMPTY_MESSAGE'
  | 'MESSAGE_TOO_LARGE'
  | 'SESSION_CLOSED'
  | 'SUMMARY_REFUSED'
  | 'UNKNOWN_MODEL'
  | 'LOG_BEHIND'
  | 'LOG_AHEAD'
  | 'OP_CONFLICT'
  | 'SESSION_ERASED'
  | 'UNAVAILABLE'
  | 'UNKNOWN_CALL'
  | 'ALREADY_ANSWERED';

export class SessionlogError extends Error {
  constructor(
    readonly code: SessionErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'SessionlogError';
  }
}

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
