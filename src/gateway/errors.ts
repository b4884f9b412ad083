/**
 * HTTP error mapping for the gateway (DESIGN §8): every failure leaves as
 * `{error: {code, message}}` with a status taken from one table. 4xx messages tell the caller
 * what to change; 5xx messages are generic and the detail goes to the log.
 */
import type { FastifyError } from 'fastify';
import { SessionlogError, type SessionErrorCode } from '../session/index.js';

/** Codes the gateway itself raises (request shape, routing, auth, server faults). */
export type GatewayErrorCode =
  | 'INVALID_JSON'
  | 'INVALID_REQUEST'
  | 'NOT_FOUND'
  | 'METHOD_NOT_ALLOWED'
  | 'UNAUTHORIZED'
  | 'BODY_TOO_LARGE'
  | 'UNSUPPORTED_MEDIA_TYPE'
  | 'INTERNAL'
  | 'UNAVAILABLE';

export type ErrorCode = SessionErrorCode | GatewayErrorCode;

/** The body of every error response. */
export type ErrorBody = { error: { code: ErrorCode; message: string } };

/**
 * The one status table. A `Record` over the closed code unions, so a new SessionlogError code
 * does not compile until it is given a status here.
 */
export const ERROR_STATUS: Record<ErrorCode, number> = {
  // Request shape and routing.
  INVALID_JSON: 400,
  INVALID_REQUEST: 400,
  INVALID_SESSION_ID: 400,
  INVALID_ARGUMENT: 400,
  INVALID_BOUNDARY: 400,
  UNAUTHORIZED: 401,
  NOT_FOUND: 404,
  SESSION_NOT_FOUND: 404,
  ARTIFACT_NOT_FOUND: 404,
  ARTIFACT_FOREIGN: 403,
  SESSION_ERASED: 410,
  METHOD_NOT_ALLOWED: 405,
  BODY_TOO_LARGE: 413,
  UNSUPPORTED_MEDIA_TYPE: 415,
  // State conflicts: the request was well formed but the session's state refuses it.
  SESSION_ALREADY_EXISTS: 409,
  SEQ_CONFLICT: 409,
  OP_CONFLICT: 409,
  OPEN_TURN: 409,
  HEADER_MISMATCH: 409,
  SESSION_CLOSED: 409,
  // Messages the session refuses.
  EMPTY_MESSAGE: 422,
  MESSAGE_TOO_LARGE: 422,
  INVALID_MESSAGE: 422,
  // The log or the server is at fault, not the request.
  INVALID_EVENT: 500,
  SURFACE_VIOLATION: 500,
  NON_JSON_VALUE: 500,
  CORRUPT_LOG: 500,
  UNSUPPORTED_FORMAT: 500,
  INTERNAL: 500,
  STORE_CLOSED: 503,
  UNAVAILABLE: 503,
};

/** An error the gateway raises about the request itself. */
export class GatewayError extends Error {
  constructor(
    readonly code: GatewayErrorCode,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = 'GatewayError';
  }

  get status(): number {
    return ERROR_STATUS[this.code];
  }
}

/** What to send for a failure, and whether its detail must be logged (server faults). */
export type ErrorResponse = { status: number; body: ErrorBody; headers: Record<string, string>; logDetail: boolean };

/** Fastify's own request errors (body parsing, limits), by their FST_ code. */
const FASTIFY_ERROR_CODES: Record<string, GatewayErrorCode> = {
  FST_ERR_CTP_BODY_TOO_LARGE: 'BODY_TOO_LARGE',
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 'UNSUPPORTED_MEDIA_TYPE',
  FST_ERR_CTP_INVALID_JSON_BODY: 'INVALID_JSON',
  FST_ERR_CTP_EMPTY_JSON_BODY: 'INVALID_JSON',
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: 'INVALID_REQUEST',
  FST_ERR_BAD_URL: 'INVALID_REQUEST',
};

const FASTIFY_MESSAGES: Partial<Record<GatewayErrorCode, string>> = {
  BODY_TOO_LARGE: 'request body is larger than the gateway accepts; send a smaller body (limit: SESSIONLOG_BODY_LIMIT_BYTES)',
  UNSUPPORTED_MEDIA_TYPE: 'request bodies must be JSON; send Content-Type: application/json',
  INVALID_JSON: 'request body is not valid JSON; send a JSON object with Content-Type: application/json',
};

function errorResponse(code: ErrorCode, message: string, headers: Record<string, string> = {}): ErrorResponse {
  const status = ERROR_STATUS[code];
  return { status, body: { error: { code, message } }, headers, logDetail: status >= 500 };
}

function isFastifyError(error: unknown): error is FastifyError {
  return error instanceof Error && typeof (error as FastifyError).code === 'string' && (error as FastifyError).code.startsWith('FST_');
}

/** Maps any thrown value to the response the gateway sends. Unknown errors become a generic 500. */
export function toErrorResponse(error: unknown): ErrorResponse {
  if (error instanceof GatewayError) return errorResponse(error.code, error.message, error.headers);
  if (error instanceof SessionlogError) {
    if (ERROR_STATUS[error.code] >= 500) return errorResponse(error.code, serverFaultMessage(error.code));
    return errorResponse(error.code, error.message);
  }
  if (isFastifyError(error)) {
    const code = FASTIFY_ERROR_CODES[error.code];
    if (code) return errorResponse(code, FASTIFY_MESSAGES[code] ?? error.message);
    const status = error.statusCode ?? 500;
    if (status >= 400 && status < 500) return { ...errorResponse('INVALID_REQUEST', error.message), status };
  }
  return errorResponse('INTERNAL', serverFaultMessage('INTERNAL'));
}

function serverFaultMessage(code: ErrorCode): string {
  if (code === 'STORE_CLOSED' || code === 'UNAVAILABLE') return 'the gateway is shutting down or its store is unavailable; retry shortly';
  return 'internal error; the gateway logged the details';
}
