/**
 * The OpenAI-compatible API (`/openai/v1`, DESIGN §8): its route table. Conversations are
 * sessions (conversations.ts), Responses are turns (responses.ts), Chat Completions answer a
 * reconciled transcript (chat.ts). Everything goes through `SessionClient`: commands (create,
 * post, cancel) through the session's workflow, reads (the log, followed live) from the store;
 * every answer is derived from the log (response-fold.ts, items.ts), so it is the same on any
 * gateway and after any crash.
 */
import { z } from 'zod';
import { defineRoute, noParams, noQuery, type RouteResult, type RouteSpec } from '../route-table.js';
import { createChatCompletion } from './chat.js';
import {
  addConversationItems,
  createConversation,
  deleteConversation,
  deleteConversationItem,
  getConversationItem,
  listConversationItems,
  readConversation,
  updateConversation,
} from './conversations.js';
import { decodeResponseId } from './ids.js';
import { modelById, modelList } from './models.js';
import { cancelResponse, createResponse, retrieveResponse } from './responses.js';
import {
  chatCompletionBody,
  conversationCreateBody,
  conversationDeletedObject,
  conversationObject,
  conversationParams,
  conversationUpdateBody,
  conversationItemsBody,
  itemListObject,
  itemObjectSchema,
  itemParams,
  itemsListQuery,
  refuseUnloggableItems,
  responseCreateBody,
  responseObject,
  responseParams,
  responseRetrieveQuery,
  chatCompletionObject,
  modelListObject,
  modelObjectSchema,
} from './schemas.js';

/** Prefix of every route of this API. */
export const OPENAI_PREFIX = '/openai/v1';

const ok = (body: unknown): RouteResult => ({ status: 200, body });

// ---- the route table ----------------------------------------------------------------------

const COMMON_ERRORS = [400, 401, 404];

/** The session a response id names, for the request's span (a conversation id is its session's id). */
function sessionOfResponse(params: Record<string, unknown>): string | undefined {
  return typeof params.id === 'string' ? decodeResponseId(params.id)?.sessionId : undefined;
}

/** The items a request body lists under `field`, before its schema has checked the body. */
function itemsOf(body: unknown, field: 'input' | 'items'): unknown {
  return typeof body === 'object' && body !== null ? (body as Record<string, unknown>)[field] : undefined;
}

const modelParams = z.strictObject({ id: z.string().min(1).max(200).describe('a model name') });

/** Every route of the OpenAI-compatible API. */
export const OPENAI_ROUTES: readonly RouteSpec[] = [
  defineRoute({
    method: 'POST',
    path: `${OPENAI_PREFIX}/chat/completions`,
    operationId: 'openaiCreateChatCompletion',
    right: 'write',
    summary:
      "OpenAI Chat Completions: the request's transcript is reconciled with a session's log (found by x-session-id, metadata.session_id, prompt_cache_key, user, or the transcript's own prefix), only its new tail is logged, and one turn answers (streamed with stream: true); a diverging transcript forks the session. Headers x-session-id and x-sessionlog-forked-from name the sessions.",
    params: noParams,
    query: noQuery,
    body: chatCompletionBody,
    responses: {
      200: {
        description: 'the chat completion (or, with stream: true, its chunks)',
        schema: chatCompletionObject,
        eventStream:
          '`data: {chat.completion.chunk}` per delta, a usage chunk with stream_options.include_usage, then `data: [DONE]`',
      },
    },
    errors: [...COMMON_ERRORS, 409, 413, 415, 422],
    handler: async (ctx, { body, request, reply }) => createChatCompletion(ctx, body, request, reply),
  }),
  defineRoute({
    method: 'GET',
    path: `${OPENAI_PREFIX}/models`,
    operationId: 'openaiListModels',
    right: 'read',
    summary: 'OpenAI Models: the model names requests may use (catalogue models, aliases and the default)',
    params: noParams,
    query: noQuery,
    responses: { 200: { description: 'the models', schema: modelListObject } },
    errors: [401],
    handler: async (ctx) => ok(modelList(ctx)),
  }),
  defineRoute({
    method: 'GET',
    path: `${OPENAI_PREFIX}/models/:id`,
    operationId: 'openaiGetModel',
    right: 'read',
    summary: 'OpenAI Models: one model name requests may use',
    params: modelParams,
    query: noQuery,
    responses: { 200: { description: 'the model', schema: modelObjectSchema } },
    errors: COMMON_ERRORS,
    handler: async (ctx, { params }) => ok(modelById(ctx, params.id)),
  }),
  defineRoute({
    method: 'POST',
    path: `${OPENAI_PREFIX}/conversations`,
    operationId: 'openaiCreateConversation',
    right: 'write',
    summary: 'OpenAI Conversations: create a conversation (a new session)',
    params: noParams,
    query: noQuery,
    body: conversationCreateBody,
    precheckBody: (body) => refuseUnloggableItems(itemsOf(body, 'items'), 'items'),
    responses: { 200: { description: 'the conversation', schema: conversationObject } },
    errors: [400, 401, 413, 415],
    handler: async (ctx, { body }) => ok(await createConversation(ctx, body)),
  }),
  defineRoute({
    method: 'GET',
    path: `${OPENAI_PREFIX}/conversations/:id`,
    operationId: 'openaiGetConversation',
    right: 'read',
    summary: 'OpenAI Conversations: a conversation (session)',
    params: conversationParams,
    query: noQuery,
    responses: { 200: { description: 'the conversation', schema: conversationObject } },
    errors: COMMON_ERRORS,
    handler: async (ctx, { params }) => ok(await readConversation(ctx, params.id)),
  }),
  defineRoute({
    method: 'POST',
    path: `${OPENAI_PREFIX}/conversations/:id`,
    operationId: 'openaiUpdateConversation',
    right: 'write',
    summary: "OpenAI Conversations: replace a conversation's metadata",
    params: conversationParams,
    query: noQuery,
    body: conversationUpdateBody,
    responses: { 200: { description: 'the conversation', schema: conversationObject } },
    errors: [...COMMON_ERRORS, 413, 415],
    handler: async (ctx, { params, body }) => ok(await updateConversation(ctx, params.id, body.metadata)),
  }),
  defineRoute({
    method: 'DELETE',
    path: `${OPENAI_PREFIX}/conversations/:id`,
    operationId: 'openaiDeleteConversation',
    right: 'admin',
    summary:
      'OpenAI Conversations: erase a conversation: its log, artifacts, checkpoints and workflow histories (DESIGN §4.2); the id is refused for the tombstone period',
    params: conversationParams,
    query: noQuery,
    responses: { 200: { description: 'the conversation is erased', schema: conversationDeletedObject } },
    errors: COMMON_ERRORS,
    handler: async (ctx, { params }) => ok(await deleteConversation(ctx, params.id)),
  }),
  defineRoute({
    method: 'POST',
    path: `${OPENAI_PREFIX}/conversations/:id/items`,
    operationId: 'openaiCreateConversationItems',
    right: 'write',
    summary:
      "OpenAI Conversations: add items to a conversation between turns: user messages, and assistant messages, function calls and their outputs as caller-supplied history (logged as such, never as the model's replies)",
    params: conversationParams,
    query: noQuery,
    body: conversationItemsBody,
    precheckBody: (body) => refuseUnloggableItems(itemsOf(body, 'items'), 'items'),
    responses: { 200: { description: 'the items added', schema: itemListObject } },
    errors: [...COMMON_ERRORS, 413, 415],
    handler: async (ctx, { params, body }) => ok(await addConversationItems(ctx, params.id, body.items)),
  }),
  defineRoute({
    method: 'GET',
    path: `${OPENAI_PREFIX}/conversations/:id/items`,
    operationId: 'openaiListConversationItems',
    right: 'read',
    summary:
      "OpenAI Conversations: the conversation's derived history as items (message, reasoning, function_call, function_call_output)",
    params: conversationParams,
    query: itemsListQuery,
    responses: { 200: { description: 'a page of items', schema: itemListObject } },
    errors: COMMON_ERRORS,
    handler: async (ctx, { params, query }) => ok(await listConversationItems(ctx, params.id, query)),
  }),
  defineRoute({
    method: 'GET',
    path: `${OPENAI_PREFIX}/conversations/:id/items/:item_id`,
    operationId: 'openaiGetConversationItem',
    right: 'read',
    summary: 'OpenAI Conversations: one item of the derived history',
    params: itemParams,
    query: noQuery,
    responses: { 200: { description: 'the item', schema: itemObjectSchema } },
    errors: COMMON_ERRORS,
    handler: async (ctx, { params }) => ok(await getConversationItem(ctx, params.id, params.item_id)),
  }),
  defineRoute({
    method: 'DELETE',
    path: `${OPENAI_PREFIX}/conversations/:id/items/:item_id`,
    operationId: 'openaiDeleteConversationItem',
    right: 'write',
    summary:
      'OpenAI Conversations: delete a message item: it is hidden from the derived history by a logged replacement (the log keeps it)',
    params: itemParams,
    query: noQuery,
    responses: { 200: { description: 'the conversation', schema: conversationObject } },
    errors: COMMON_ERRORS,
    handler: async (ctx, { params }) => ok(await deleteConversationItem(ctx, params.id, params.item_id)),
  }),
  defineRoute({
    method: 'POST',
    path: `${OPENAI_PREFIX}/responses`,
    operationId: 'openaiCreateResponse',
    right: 'write',
    summary:
      'OpenAI Responses: run one turn of a conversation (streamed with stream: true, at once with background: true)',
    params: noParams,
    query: noQuery,
    body: responseCreateBody,
    precheckBody: (body) => refuseUnloggableItems(itemsOf(body, 'input'), 'input'),
    responses: {
      200: {
        description: 'the response (or, with stream: true, its events)',
        schema: responseObject,
        eventStream:
          'the SDK\'s own events (`event: response.created`, `data: {…, "sequence_number": N}`), sequence numbers derived from the log',
      },
    },
    errors: [...COMMON_ERRORS, 409, 413, 415, 422],
    handler: async (ctx, { body, request, reply }) => createResponse(ctx, body, request, reply),
  }),
  defineRoute({
    method: 'GET',
    path: `${OPENAI_PREFIX}/responses/:id`,
    operationId: 'openaiGetResponse',
    right: 'read',
    summary:
      'OpenAI Responses: a response (a turn) as the log has it; with stream=true its events, replayed and then live (starting_after=N resumes)',
    params: responseParams,
    query: responseRetrieveQuery,
    sessionOf: sessionOfResponse,
    responses: {
      200: {
        description: 'the response, or its events',
        schema: responseObject,
        eventStream: "the response's events with sequence_number greater than starting_after, until its terminal event",
      },
    },
    errors: COMMON_ERRORS,
    handler: async (ctx, { params, query, request, reply }) => retrieveResponse(ctx, params.id, query, request, reply),
  }),
  defineRoute({
    method: 'POST',
    path: `${OPENAI_PREFIX}/responses/:id/cancel`,
    operationId: 'openaiCancelResponse',
    right: 'write',
    summary:
      "OpenAI Responses: cancel a queued or running response (its turn's partial reply is logged as interrupted)",
    params: responseParams,
    query: noQuery,
    sessionOf: sessionOfResponse,
    responses: { 200: { description: 'the response, cancelled', schema: responseObject } },
    errors: COMMON_ERRORS,
    handler: async (ctx, { params }) => ok(await cancelResponse(ctx, params.id)),
  }),
];
