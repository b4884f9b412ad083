/**
 * HTTP error mapping for the gateway (DESIGN §8): every failure leaves as
 * `{error: {code, message}}` with a status taken from one table. 4xx messages tell the caller
 * what to change; 5xx messages are generic and the detail goes to the log.
 */
import { STATUS_CODES, maxHeaderSize } from 'node:http';
import type { FastifyError } from 'fastify';
import {
  SESSION_ERRORS,
  SESSION_ERROR_CODES,
  SessionlogError,
  scrubSecrets,
  type SessionErrorCode,
} from '../session/index.js';

/** Codes the gateway itself raises (request shape, routing, auth, server faults). */
export type GatewayErrorCode =
  | 'INVALID_JSON'
  | 'INVALID_REQUEST'
  | 'NOT_FOUND'
  | 'METHOD_NOT_ALLOWED'
  | 'UNAUTHORIZED'
  | 'FORBIDDEN'
  | 'REQUEST_TIMEOUT'
  | 'EXPECTATION_FAILED'
  | 'BODY_TOO_LARGE'
  | 'HEADERS_TOO_LARGE'
  | 'UNSUPPORTED_MEDIA_TYPE'
  | 'TOO_MANY_CONNECTIONS'
  | 'INTERNAL'
  | 'UNAVAILABLE';

export type ErrorCode = SessionErrorCode | GatewayErrorCode;

/** The body of every error response. */
export type ErrorBody = { error: { code: ErrorCode; message: string } };

/** The status of each code the gateway itself raises. */
const GATEWAY_STATUS: Record<GatewayErrorCode, number> = {
  INVALID_JSON: 400,
  INVALID_REQUEST: 400,
  UNAUTHORIZED: 401,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  METHOD_NOT_ALLOWED: 405,
  REQUEST_TIMEOUT: 408,
  BODY_TOO_LARGE: 413,
  UNSUPPORTED_MEDIA_TYPE: 415,
  EXPECTATION_FAILED: 417,
  TOO_MANY_CONNECTIONS: 429,
  HEADERS_TOO_LARGE: 431,
  INTERNAL: 500,
  UNAVAILABLE: 503,
};

/**
 * The status of every code a response can carry: the gateway's own, and each session error's
 * from the one error table (session/errors.ts), so a new SessionlogError code has its status
 * where its class is decided.
 */
export const ERROR_STATUS: Readonly<Record<ErrorCode, number>> = {
  ...GATEWAY_STATUS,
  ...Object.fromEntries(SESSION_ERROR_CODES.map((code) => [code, SESSION_ERRORS[code].status])),
} as Record<ErrorCode, number>;

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
  BODY_TOO_LARGE:
    'request body is larger than the gateway accepts; send a smaller body (limit: SESSIONLOG_BODY_LIMIT_BYTES)',
  UNSUPPORTED_MEDIA_TYPE: 'request bodies must be JSON; send Content-Type: application/json',
  INVALID_JSON: 'request body is not valid JSON; send a JSON object with Content-Type: application/json',
};

function errorResponse(code: ErrorCode, rawMessage: string, headers: Record<string, string> = {}): ErrorResponse {
  const message = scrubSecrets(rawMessage);
  const status = ERROR_STATUS[code];
  return { status, body: { error: { code, message } }, headers, logDetail: status >= 500 };
}

function isFastifyError(error: unknown): error is FastifyError {
  return (
    error instanceof Error &&
    typeof (error as FastifyError).code === 'string' &&
    (error as FastifyError).code.startsWith('FST_')
  );
}

/** Maps any thrown value to the response the gateway sends. Unknown errors become a generic 500. */
export function toErrorResponse(error: unknown): ErrorResponse {
  if (error instanceof GatewayError) return errorResponse(error.code, error.message, error.headers);
  if (error instanceof SessionlogError) {
    if (ERROR_STATUS[error.code] >= 500)
      return errorResponse(error.code, serverFaultMessage(error.code, error.message));
    return errorResponse(error.code, error.message);
  }
  if (isFastifyError(error)) {
    const code = FASTIFY_ERROR_CODES[error.code];
    if (code) return errorResponse(code, FASTIFY_MESSAGES[code] ?? error.message);
    const status = error.statusCode ?? 500;
    if (status >= 400 && status < 500) return { ...errorResponse('INVALID_REQUEST', error.message), status };
  }
  // The HTTP layer's own client errors (a body the client stopped sending: `aborted`,
  // ECONNRESET, statusCode 400) are the client's doing, not a server fault to log.
  const statusCode = (error as { statusCode?: unknown } | null)?.statusCode;
  if (error instanceof Error && typeof statusCode === 'number' && statusCode >= 400 && statusCode < 500)
    return { ...errorResponse('INVALID_REQUEST', `the request failed: ${error.message}`), status: statusCode };
  return errorResponse('INTERNAL', serverFaultMessage('INTERNAL'));
}

/**
 * What a 5xx tells the caller. The store's own message names where the data lives (a path, a
 * database URL), so it never goes out; a refused log keeps the session and seq it names.
 */
function serverFaultMessage(code: ErrorCode, storeMessage = ''): string {
  if (code === 'STORE_CLOSED' || code === 'UNAVAILABLE')
    return 'the gateway is shutting down or its store is unavailable; retry shortly';
  if (code === 'CORRUPT_LOG' || code === 'UNSUPPORTED_FORMAT') {
    const session = /^session (\S+) in /.exec(storeMessage)?.[1];
    const seq = /damaged at seq (\d+)/.exec(storeMessage)?.[1];
    const id = session ?? 'ID';
    const subject = session === undefined ? "the session's stored log" : `session ${session}: the stored log`;
    if (code === 'UNSUPPORTED_FORMAT')
      return `${subject} was written by a newer version of sessionlog and was refused (nothing was changed); upgrade the server that reads it`;
    return `${subject} is damaged${seq === undefined ? '' : ` at seq ${seq}`} and was refused (nothing was changed, retrying will not help); \`sessionlog sessions verify ${id}\` shows where, \`sessionlog sessions salvage ${id} --into NEW_ID\` keeps the valid prefix`;
  }
  return 'internal error; the gateway logged the details';
}

/**
 * Node's HTTP parser and request-timeout errors (fastify's `clientError`), by code, each with
 * what to change; Node's own reason is appended. These arrive before fastify has a request,
 * so the answer is written to the socket by hand.
 */
const CLIENT_ERRORS: Record<string, { code: GatewayErrorCode; hint: string }> = {
  ERR_HTTP_REQUEST_TIMEOUT: {
    code: 'REQUEST_TIMEOUT',
    hint: 'the request did not arrive in time (headers within SESSIONLOG_HEADERS_TIMEOUT_MS, the whole request within SESSIONLOG_REQUEST_TIMEOUT_MS); send it without pauses',
  },
  HPE_HEADER_OVERFLOW: {
    code: 'HEADERS_TOO_LARGE',
    hint: `request headers are larger than the gateway accepts (${Math.round(maxHeaderSize / 1024)} KiB in total); send fewer or shorter headers`,
  },
  HPE_CHUNK_EXTENSIONS_OVERFLOW: {
    code: 'BODY_TOO_LARGE',
    hint: 'chunk extensions of the request body are too large; send the body without chunk extensions',
  },
  HPE_INVALID_METHOD: {
    code: 'INVALID_REQUEST',
    hint: 'unknown HTTP method; the gateway serves GET, HEAD and POST (routes in GET /v1/openapi.json)',
  },
  HPE_INVALID_VERSION: { code: 'INVALID_REQUEST', hint: 'the request line must end with HTTP/1.1 and CRLF' },
  HPE_INVALID_CONSTANT: {
    code: 'INVALID_REQUEST',
    hint: 'the request line must be "METHOD /path HTTP/1.1" with no spaces in the path',
  },
  HPE_STRICT: { code: 'INVALID_REQUEST', hint: 'every line of the request head must end with CRLF' },
  HPE_CR_EXPECTED: { code: 'INVALID_REQUEST', hint: 'every line of the request head must end with CRLF' },
  HPE_LF_EXPECTED: { code: 'INVALID_REQUEST', hint: 'every line of the request head must end with CRLF' },
  HPE_INVALID_URL: {
    code: 'INVALID_REQUEST',
    hint: 'the request target is not a valid path; percent-encode special characters',
  },
  HPE_INVALID_HEADER_TOKEN: {
    code: 'INVALID_REQUEST',
    hint: 'a header name or value contains characters HTTP does not allow',
  },
  HPE_INVALID_CONTENT_LENGTH: {
    code: 'INVALID_REQUEST',
    hint: 'send one Content-Length, a whole number, and no Transfer-Encoding with it',
  },
  HPE_UNEXPECTED_CONTENT_LENGTH: {
    code: 'INVALID_REQUEST',
    hint: 'send one Content-Length, a whole number, and no Transfer-Encoding with it',
  },
  HPE_INVALID_TRANSFER_ENCODING: {
    code: 'INVALID_REQUEST',
    hint: 'Transfer-Encoding must be chunked and must not come with Content-Length',
  },
  HPE_INVALID_CHUNK_SIZE: {
    code: 'INVALID_REQUEST',
    hint: 'the chunked request body is malformed: each chunk starts with its size in hex',
  },
  HPE_PAUSED_H2_UPGRADE: {
    code: 'INVALID_REQUEST',
    hint: 'the gateway speaks HTTP/1.1, not HTTP/2 with prior knowledge',
  },
};

/** The answer to a request Node's HTTP parser refused, or that did not arrive in time. */
export function clientErrorResponse(error: NodeJS.ErrnoException & { reason?: string }): ErrorResponse {
  const known = error.code !== undefined ? CLIENT_ERRORS[error.code] : undefined;
  const reason = typeof error.reason === 'string' && error.reason.length > 0 ? ` (${error.reason})` : '';
  if (known) return errorResponse(known.code, `${known.hint}${reason}`, { connection: 'close' });
  return errorResponse(
    'INVALID_REQUEST',
    `the request is not valid HTTP/1.1${reason}; check the request line, the headers and the body framing`,
    { connection: 'close' },
  );
}

/** A complete HTTP/1.1 response for `response`, for writing straight to a socket. */
export function rawHttpResponse(response: ErrorResponse): string {
  const body = JSON.stringify(response.body);
  const headers: Record<string, string | number> = {
    ...response.headers,
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(body, 'utf8'),
    connection: 'close',
  };
  const lines = Object.entries(headers).map(([name, value]) => `${name}: ${value}`);
  return `HTTP/1.1 ${response.status} ${STATUS_CODES[response.status] ?? 'Error'}\r\n${lines.join('\r\n')}\r\n\r\n${body}`;
}
