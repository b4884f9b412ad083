/** The fake model's HTTP plumbing: its errors in OpenAI's shape, JSON answers, and reading a request. */
import type http from 'node:http';

const RECORDED_HEADERS = [
  'authorization',
  'content-type',
  'accept',
  'user-agent',
  'idempotency-key',
  'x-request-id',
  'x-stainless-retry-count',
  'x-stainless-timeout',
];
const MAX_BODY_BYTES = 64 * 1024 * 1024;

/** An answer with an error status, thrown where it is found and sent by `sendError`. */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly body: { message: string; type: string; code: string | null },
    readonly headers: Record<string, string> = {},
  ) {
    super(body.message);
  }
}

export function invalidRequest(message: string): HttpError {
  return new HttpError(400, { message, type: 'invalid_request_error', code: 'invalid_request_error' });
}

export function notFound(message: string): HttpError {
  return new HttpError(404, { message, type: 'invalid_request_error', code: 'not_found' });
}

/** A 429 as OpenAI words it, with the retry headers given. */
export function rateLimited(headers: Record<string, string>): HttpError {
  return new HttpError(
    429,
    {
      message: 'Rate limit reached for requests. Please retry after the time in the retry-after header.',
      type: 'rate_limit_error',
      code: 'rate_limit_exceeded',
    },
    headers,
  );
}

export function sendJson(
  res: http.ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
}

export function sendError(res: http.ServerResponse, error: HttpError): void {
  sendJson(res, error.status, { error: { ...error.body, param: null } }, error.headers);
}

export async function readBody(req: http.IncomingMessage): Promise<string> {
  const parts: Buffer[] = [];
  let size = 0;
  for await (const part of req as AsyncIterable<Buffer>) {
    size += part.length;
    if (size > MAX_BODY_BYTES) {
      throw new HttpError(413, {
        message: `request body exceeds ${MAX_BODY_BYTES} bytes`,
        type: 'invalid_request_error',
        code: 'request_too_large',
      });
    }
    parts.push(part);
  }
  return Buffer.concat(parts).toString('utf8');
}

export function parseJsonOrText(raw: string): unknown {
  if (raw === '') return undefined;
  try {
    return JSON.parse(raw) as unknown;
  } catch {
    // Not JSON: keep the text so the recording shows what arrived; validation rejects it.
    return raw;
  }
}

/** The request headers a recording (and a matcher) sees. */
export function pickHeaders(req: http.IncomingMessage): Record<string, string> {
  const picked: Record<string, string> = {};
  for (const name of RECORDED_HEADERS) {
    const value = req.headers[name];
    if (typeof value === 'string') picked[name] = value;
  }
  return picked;
}
