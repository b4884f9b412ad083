/**
 * The gateway's OpenAPI 3.1 document, generated from the route table's zod schemas (so a
 * route cannot exist without being described, nor be described differently from how it is
 * parsed).
 */
import { z } from 'zod';
import { ERROR_STATUS } from './errors.js';
import { openAiErrorSchema } from './openai/schemas.js';
import { errorResponseSchema } from './native/schemas.js';
import type { ResponseSpec } from './native/routes.js';

/** What the document needs of a route: its shape, not its handler. */
export type DocumentedRoute = {
  method: string;
  path: string;
  operationId: string;
  summary: string;
  public?: true;
  params: z.ZodType;
  query: z.ZodType;
  body?: z.ZodType;
  headers?: Array<{ name: string; description: string; schema: z.ZodType }>;
  responses: Record<number, ResponseSpec>;
  errors: number[];
  /** The component its errors are described by: `Error` (`{error: {code, message}}`) unless named. */
  errorSchema?: 'Error' | 'OpenAIError';
};

type JsonSchema = Record<string, unknown>;

/** JSON Schema (2020-12, as OpenAPI 3.1 uses) of what a schema accepts on input. */
function inputSchema(schema: z.ZodType): JsonSchema {
  const { $schema: _dialect, ...rest } = z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as JsonSchema;
  return rest;
}

function outputSchema(schema: z.ZodType): JsonSchema {
  const { $schema: _dialect, ...rest } = z.toJSONSchema(schema, { io: 'output', unrepresentable: 'any' }) as JsonSchema;
  return rest;
}

/** `/v1/sessions/:id` → `/v1/sessions/{id}`. */
export function openApiPath(path: string): string {
  return path.replace(/:([A-Za-z_]\w*)/g, '{$1}');
}

function parametersOf(route: DocumentedRoute): JsonSchema[] {
  const parameters: JsonSchema[] = [];
  for (const [where, schema] of [
    ['path', route.params],
    ['query', route.query],
  ] as const) {
    const json = inputSchema(schema);
    const properties = (json.properties ?? {}) as Record<string, JsonSchema>;
    const required = new Set((json.required ?? []) as string[]);
    for (const [name, property] of Object.entries(properties)) {
      const { description, ...propertySchema } = property;
      parameters.push({
        name,
        in: where,
        required: where === 'path' || required.has(name),
        ...(description ? { description } : {}),
        schema: propertySchema,
      });
    }
  }
  for (const header of route.headers ?? []) {
    parameters.push({
      name: header.name,
      in: 'header',
      required: false,
      description: header.description,
      schema: inputSchema(header.schema),
    });
  }
  return parameters;
}

const STATUS_TEXT: Record<number, string> = {
  400: 'invalid request: malformed JSON, wrong types, an invalid session id or query value',
  401: 'missing or wrong bearer token',
  404: 'unknown session or route',
  408: "the request (headers or body) did not arrive within the gateway's timeouts (REQUEST_TIMEOUT)",
  409: 'conflicts with the session state (SESSION_ALREADY_EXISTS, SEQ_CONFLICT, OPEN_TURN, SESSION_CLOSED)',
  413: 'request body too large',
  415: 'request body is not application/json',
  422: 'message refused (EMPTY_MESSAGE, MESSAGE_TOO_LARGE, INVALID_MESSAGE)',
  417: 'an Expect header other than 100-continue (EXPECTATION_FAILED)',
  431: 'request headers too large (HEADERS_TOO_LARGE)',
  410: 'the session was erased (SESSION_ERASED)',
  500: 'internal error (details are in the gateway log)',
  501: 'not available in this build',
};

/** Builds the OpenAPI 3.1 document for `routes`. */
export function buildOpenApiDocument(
  routes: readonly DocumentedRoute[],
  info: { title: string; version: string },
): JsonSchema {
  const paths: Record<string, Record<string, JsonSchema>> = {};
  for (const route of routes) {
    const responses: Record<string, JsonSchema> = {};
    for (const [status, response] of Object.entries(route.responses)) {
      const content: Record<string, JsonSchema> = {};
      if (response.schema) content['application/json'] = { schema: outputSchema(response.schema) };
      if (response.eventStream)
        content['text/event-stream'] = { schema: { type: 'string', description: response.eventStream } };
      responses[status] = {
        description: response.description,
        ...(Object.keys(content).length > 0 ? { content } : {}),
      };
    }
    // Every route can time out or get headers too large for the server: those come from the HTTP layer, not the route.
    for (const status of [...route.errors, 408, 417, 431, 500]) {
      const ref = `#/components/schemas/${route.errorSchema ?? 'Error'}`;
      responses[String(status)] ??= {
        description: STATUS_TEXT[status] ?? 'error',
        content: { 'application/json': { schema: { $ref: ref } } },
      };
    }
    const operation: JsonSchema = {
      operationId: route.operationId,
      summary: route.summary,
      parameters: parametersOf(route),
      responses,
      ...(route.public ? { security: [] } : {}),
    };
    if (route.body) {
      operation.requestBody = {
        required: !route.body.safeParse(undefined).success,
        content: { 'application/json': { schema: inputSchema(route.body) } },
      };
    }
    (paths[openApiPath(route.path)] ??= {})[route.method.toLowerCase()] = operation;
  }
  return {
    openapi: '3.1.0',
    info: {
      ...info,
      description:
        "sessionlog HTTP gateway: LLM chat sessions as durable workflows over an append-only event log. Errors are `{error: {code, message}}` under /v1 and OpenAI's `{error: {message, type, param, code}}` under /openai/v1 (the OpenAI-compatible Conversations and Responses API).",
    },
    servers: [{ url: '/' }],
    security: [{ bearerAuth: [] }],
    paths,
    components: {
      securitySchemes: {
        bearerAuth: {
          type: 'http',
          scheme: 'bearer',
          description: 'SESSIONLOG_GATEWAY_TOKEN; required whenever a token is configured',
        },
      },
      schemas: {
        Error: {
          ...outputSchema(errorResponseSchema),
          description: `error codes and statuses: ${Object.entries(ERROR_STATUS)
            .map(([code, status]) => `${code}=${status}`)
            .join(', ')}`,
        },
        OpenAIError: {
          ...outputSchema(openAiErrorSchema),
          description:
            "errors under /openai/v1, in OpenAI's shape (`code` is the sessionlog code in lower case, or an OpenAI-style code)",
        },
      },
    },
  };
}
