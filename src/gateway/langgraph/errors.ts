/**
 * Errors of the LangGraph Agent Server subset (`/langgraph`): every failure leaves as
 * `{detail, code}` (the Agent Server's FastAPI shape, `detail` being what the SDK's `HTTPError`
 * shows), with the status from the gateway's one table for everything raised elsewhere. A
 * request part that does not parse, and a field only a LangGraph graph can honour, is a 422
 * naming the field, as the Agent Server answers.
 */
import { z } from 'zod';
import { toErrorResponse } from '../errors.js';
import { OpenAiError } from '../openai-errors.js';
import type { ErrorShape } from '../route-table.js';

export type LangGraphErrorBody = { detail: string; code: string };

export const langGraphErrorSchema = z.object({ detail: z.string(), code: z.string() });

/** An error raised by the LangGraph API itself. */
export class LangGraphError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly code: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = 'LangGraphError';
  }
}

export const notFound = (what: string): LangGraphError => new LangGraphError(404, `${what} not found`, 'not_found');

/** A 422 naming a request field sessionlog cannot honour (`field`: its path in the body). */
export function unsupported(field: string, why: string): LangGraphError {
  return new LangGraphError(
    422,
    `'${field}' is not supported by sessionlog's LangGraph API: ${why}`,
    'unsupported_field',
  );
}

export function toLangGraphErrorResponse(error: unknown): {
  status: number;
  body: LangGraphErrorBody;
  headers: Record<string, string>;
  logDetail: boolean;
} {
  if (error instanceof LangGraphError)
    return {
      status: error.status,
      body: { detail: error.message, code: error.code },
      headers: error.headers,
      logDetail: error.status >= 500,
    };
  // Raised by what this API shares with the OpenAI-compatible one (following a turn's stream).
  if (error instanceof OpenAiError)
    return {
      status: error.status,
      body: { detail: error.message, code: error.details.code ?? 'error' },
      headers: error.details.headers ?? {},
      logDetail: error.status >= 500,
    };
  const native = toErrorResponse(error);
  return {
    status: native.status,
    body: { detail: native.body.error.message, code: native.body.error.code.toLowerCase() },
    headers: native.headers,
    logDetail: native.logDetail,
  };
}

export const LANGGRAPH_ERRORS: ErrorShape<LangGraphErrorBody> = {
  component: {
    name: 'LangGraphError',
    schema: langGraphErrorSchema,
    description:
      'errors under /langgraph: `detail` says what to change, `code` is the sessionlog code in lower case (or unsupported_field, not_found, busy)',
  },
  parse(schema, value, where) {
    const parsed = schema.safeParse(value);
    if (parsed.success) return parsed.data;
    const detail = parsed.error.issues
      .slice(0, 5)
      .map((issue) => {
        const path = [where, ...issue.path.map(String)];
        if (issue.code === 'unrecognized_keys') return `${[...path, issue.keys[0]!].join('.')}: unknown field`;
        return `${path.join('.')}: ${issue.message}`;
      })
      .join('; ');
    throw new LangGraphError(where === 'body' ? 422 : 400, detail, 'invalid_request');
  },
  toReply: toLangGraphErrorResponse,
  unknownRoute(method, path, allowed) {
    if (allowed.length > 0)
      return new LangGraphError(
        405,
        `${method} is not allowed on ${path}; use ${allowed.join(', ')}`,
        'method_not_allowed',
        {
          allow: allowed.join(', '),
        },
      );
    return new LangGraphError(
      404,
      `sessionlog's LangGraph API has no route ${method} ${path}; its routes are listed in GET /v1/openapi.json`,
      'unknown_url',
    );
  },
};
