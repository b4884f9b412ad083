/**
 * Mounts the OpenAI-compatible API (routes.ts) on the gateway at `/openai/v1`, in its own
 * fastify scope so that every error under the prefix — a bad body, a wrong token, an unknown
 * route — leaves in OpenAI's error shape while `/v1` keeps its own. The gateway's hooks (bearer
 * token, body deadline, JSON parsing) apply here as everywhere.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { OpenAiError, toOpenAiErrorResponse } from './errors.js';
import { OPENAI_PREFIX, OPENAI_ROUTES, STREAMED_RESPONSE, type OpenAiContext, type OpenAiRouteSpec } from './routes.js';
import { parseOpenAi, refuseUnloggableItems } from './schemas.js';

export {
  OPENAI_PREFIX,
  OPENAI_ROUTES,
  type AgentDefaults,
  type OpenAiContext,
  type OpenAiRouteSpec,
} from './routes.js';
export { openAiErrorSchema } from './schemas.js';

function sendOpenAiError(request: FastifyRequest, reply: FastifyReply, error: unknown): FastifyReply {
  const response = toOpenAiErrorResponse(error);
  if (response.logDetail) request.log.error({ err: error, method: request.method, url: request.url }, 'request failed');
  return reply.code(response.status).headers(response.headers).send(response.body);
}

function pathPattern(url: string): RegExp {
  const escaped = url
    .split('/')
    .map((segment) => (segment.startsWith(':') ? '[^/]+' : segment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
    .join('/');
  return new RegExp(`^${escaped}$`);
}

/** Request bodies whose input items are checked for what cannot be logged before the schema sees them. */
function precheck(route: OpenAiRouteSpec, body: unknown): void {
  if (typeof body !== 'object' || body === null) return;
  if (route.operationId === 'openaiCreateResponse') refuseUnloggableItems((body as { input?: unknown }).input, 'input');
  if (route.operationId === 'openaiCreateConversation')
    refuseUnloggableItems((body as { items?: unknown }).items, 'items');
}

/** Registers the OpenAI-compatible API under `/openai/v1`. */
export function registerOpenAiApi(app: FastifyInstance, context: OpenAiContext): void {
  void app.register(
    async (scope) => {
      scope.setErrorHandler((error, request, reply) => sendOpenAiError(request, reply, error));
      scope.setNotFoundHandler((request, reply) => {
        const path = request.url.split('?')[0] ?? '';
        const allowed = OPENAI_ROUTES.filter((r) => pathPattern(r.path).test(path)).map((r) => r.method);
        if (allowed.length > 0) {
          return sendOpenAiError(
            request,
            reply,
            new OpenAiError(405, `${request.method} is not allowed on ${path}; use ${allowed.join(', ')}`, {
              code: 'method_not_allowed',
              headers: { allow: allowed.join(', ') },
            }),
          );
        }
        return sendOpenAiError(
          request,
          reply,
          new OpenAiError(
            404,
            `sessionlog's OpenAI-compatible API has no route ${request.method} ${path}; its routes are listed in GET /v1/openapi.json`,
            { code: 'unknown_url' },
          ),
        );
      });
      for (const route of OPENAI_ROUTES) {
        scope.route({
          method: route.method,
          url: route.path.slice(OPENAI_PREFIX.length),
          handler: async (request, reply) => {
            precheck(route, request.body);
            const input = {
              params: parseOpenAi(route.params, request.params),
              query: parseOpenAi(route.query, request.query),
              body: route.body ? parseOpenAi(route.body, request.body) : undefined,
              request,
              reply,
            };
            const result = await route.handler(context, input);
            if (result === STREAMED_RESPONSE) return reply;
            return reply.code(result.status).send(result.body);
          },
        });
      }
    },
    { prefix: OPENAI_PREFIX },
  );
}
