/**
 * The AI SDK UI message stream (`/ai-sdk`, issue 25): its route table. What `useChat`'s
 * `DefaultChatTransport` calls with `api: '<gateway>/ai-sdk/chat'`: `POST /ai-sdk/chat` runs one
 * turn over the resent UI messages and streams it, `GET /ai-sdk/chat/:id/stream` resumes the
 * running turn (chat.ts).
 */
import { defineRoute, noParams, noQuery, type RouteSpec } from '../route-table.js';
import { answerChat, resumeChat } from './chat.js';
import { chatParams, chatRequestBody } from './schemas.js';

export const AI_SDK_PREFIX = '/ai-sdk';

const ERRORS = [400, 401, 404, 409, 413, 415, 429, 500, 503];

export const AI_SDK_ROUTES: readonly RouteSpec[] = [
  defineRoute({
    method: 'POST',
    path: `${AI_SDK_PREFIX}/chat`,
    operationId: 'aiSdkChat',
    right: 'write',
    summary:
      "AI SDK UI message stream: one turn of the chat `id` over the resent UI messages (DefaultChatTransport's request)",
    params: noParams,
    query: noQuery,
    body: chatRequestBody,
    responses: {
      200: {
        description: 'the turn as a UI message stream',
        eventStream:
          '`x-vercel-ai-ui-message-stream: v1`: `data: <chunk JSON>` per chunk (start, start-step, text-*, reasoning-*, tool-input-available, tool-output-available, tool-approval-request, finish-step, finish with usage as messageMetadata, error), then `data: [DONE]`',
      },
    },
    errors: ERRORS,
    handler: async (ctx, { body, request, reply }) => answerChat(ctx, body, request, reply),
  }),
  defineRoute({
    method: 'GET',
    path: `${AI_SDK_PREFIX}/chat/:id/stream`,
    operationId: 'aiSdkResumeStream',
    right: 'read',
    summary:
      "AI SDK UI message stream: resume the chat's running turn (what was missed at once, coalesced, then live); 204 when none runs",
    params: chatParams,
    query: noQuery,
    responses: {
      200: { description: 'the running turn as a UI message stream', eventStream: 'as POST /ai-sdk/chat' },
      204: { description: 'no turn of the chat is running' },
    },
    errors: ERRORS,
    handler: async (ctx, { params, request, reply }) => resumeChat(ctx, params.id, request, reply),
  }),
];
