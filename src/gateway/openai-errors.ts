/**
 * The OpenAI error shape, answered by the OpenAI-compatible API (`/openai/v1`) and by the AI
 * SDK's (`/ai-sdk`, before its stream starts): every failure leaves as
 * `{error: {message, type, param, code}}`, so the official SDK raises its own classes
 * (`BadRequestError` for 400, `AuthenticationError` for 401, `NotFoundError` for 404, …). The
 * status comes from the gateway's one table (errors.ts) for everything raised elsewhere;
 * `code` is then that table's code in lower case. What these APIs share (reconciling a
 * transcript, following a turn) refuses in this shape too.
 */
import { z } from 'zod';
import { toErrorResponse } from './errors.js';
import type { ErrorShape } from './route-table.js';

/** The body of every error response under `/openai/v1`. */
export type OpenAiErrorBody = { error: { message: string; type: string; param: string | null; code: string | null } };

/** `OpenAiErrorBody` as the OpenAPI document describes it. */
export const openAiErrorSchema = z.object({
  error: z.object({ message: z.string(), type: z.string(), param: z.string().nullable(), code: z.string().nullable() }),
});

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

// ---------------------------------------------------------------------------------------------
// Parsing with OpenAI-style errors

type Issue = z.core.$ZodIssue;

/** `input[0].content` from a zod path. */
function paramOf(path: readonly PropertyKey[]): string | null {
  let out = '';
  for (const key of path)
    out += typeof key === 'number' ? `[${key}]` : out.length === 0 ? String(key) : `.${String(key)}`;
  return out.length === 0 ? null : out;
}

/** The issue to report: inside a union, the branch that got furthest. */
function deepestIssue(issue: Issue): { issue: Issue; path: PropertyKey[] } {
  if (issue.code === 'invalid_union' && issue.errors.length > 0) {
    let best: { issue: Issue; path: PropertyKey[] } | undefined;
    for (const branch of issue.errors) {
      for (const inner of branch) {
        const found = deepestIssue(inner);
        if (!best || found.path.length > best.path.length) best = found;
      }
    }
    if (best && best.path.length > 0) return { issue: best.issue, path: [...issue.path, ...best.path] };
  }
  return { issue, path: [...issue.path] };
}

function issueError(first: Issue): OpenAiError {
  if (first.code === 'unrecognized_keys') {
    const param = paramOf([...first.path, first.keys[0]!]);
    return invalidRequest(
      param,
      `Unrecognized request argument supplied: ${param ?? first.keys[0]!}`,
      'unknown_parameter',
    );
  }
  const { issue, path } = deepestIssue(first);
  const param = paramOf(path);
  return invalidRequest(
    param,
    `Invalid '${param ?? 'body'}': ${issue.message}`,
    issue.code === 'invalid_value' || issue.code === 'custom' ? 'invalid_value' : 'invalid_type',
  );
}

/** Parses `value` or throws a 400 in OpenAI's shape naming the first bad field. */
function parseOpenAi<T extends z.ZodType>(schema: T, value: unknown): z.output<T> {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  throw issueError(parsed.error.issues[0]!);
}

// ---------------------------------------------------------------------------------------------
// The API's error shape

/** How the OpenAI-compatible API answers everything that goes wrong under its prefix. */
export const OPENAI_ERRORS: ErrorShape<OpenAiErrorBody> = {
  component: {
    name: 'OpenAIError',
    schema: openAiErrorSchema,
    description:
      "errors under /openai/v1, in OpenAI's shape (`code` is the sessionlog code in lower case, or an OpenAI-style code)",
  },
  parse: parseOpenAi,
  toReply: toOpenAiErrorResponse,
  unknownRoute(method, path, allowed) {
    if (allowed.length > 0)
      return new OpenAiError(405, `${method} is not allowed on ${path}; use ${allowed.join(', ')}`, {
        code: 'method_not_allowed',
        headers: { allow: allowed.join(', ') },
      });
    return new OpenAiError(
      404,
      `sessionlog's OpenAI-compatible API has no route ${method} ${path}; its routes are listed in GET /v1/openapi.json`,
      { code: 'unknown_url' },
    );
  },
};
