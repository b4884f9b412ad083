/**
 * Errors of the OpenAI-compatible API: every failure under `/openai/v1` leaves in OpenAI's
 * shape, `{error: {message, type, param, code}}`, so the official SDK raises its own classes
 * (`BadRequestError` for 400, `AuthenticationError` for 401, `NotFoundError` for 404, …). The
 * status comes from the gateway's one table (../errors.ts) for everything raised elsewhere;
 * `code` is then that table's code in lower case.
 */
import { toErrorResponse } from '../errors.js';

/** The body of every error response under `/openai/v1`. */
export type OpenAiErrorBody = { error: { message: string; type: string; param: string | null; code: string | null } };

/** An error raised by the OpenAI-compatible API itself, naming the offending request field. */
export class OpenAiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly details: { param?: string | null; code?: string | null; headers?: Record<string, string> } = {},
  ) {
    super(message);
    this.name = 'OpenAiError';
  }
}

/** A 400 naming the request field (`param`) that cannot be honoured. */
export function invalidRequest(param: string | null, message: string, code: string | null = null): OpenAiError {
  return new OpenAiError(400, message, { param, code });
}

/** A 404 for an id that names nothing. */
export function notFound(param: string | null, message: string): OpenAiError {
  return new OpenAiError(404, message, { param, code: 'not_found' });
}

/** OpenAI's own types: `invalid_request_error` for every client error (401 included), `server_error` otherwise. */
function errorType(status: number): string {
  return status >= 500 ? 'server_error' : 'invalid_request_error';
}

export type OpenAiErrorResponse = {
  status: number;
  body: OpenAiErrorBody;
  headers: Record<string, string>;
  logDetail: boolean;
};

/** Maps any thrown value to the OpenAI-shaped response; server faults keep their detail for the log. */
export function toOpenAiErrorResponse(error: unknown): OpenAiErrorResponse {
  if (error instanceof OpenAiError) {
    return {
      status: error.status,
      body: {
        error: {
          message: error.message,
          type: errorType(error.status),
          param: error.details.param ?? null,
          code: error.details.code ?? null,
        },
      },
      headers: error.details.headers ?? {},
      logDetail: error.status >= 500,
    };
  }
  const native = toErrorResponse(error);
  const code = native.status === 401 ? 'invalid_api_key' : native.body.error.code.toLowerCase();
  // A model the catalogue does not know can only have come from the request's `model`.
  const param = native.body.error.code === 'UNKNOWN_MODEL' ? 'model' : null;
  return {
    status: native.status,
    body: { error: { message: native.body.error.message, type: errorType(native.status), param, code } },
    headers: native.headers,
    logDetail: native.logDetail,
  };
}
