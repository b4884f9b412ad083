/**
 * The OpenAI-compatible API (`/openai/v1`, DESIGN §8): Conversations are sessions, Responses
 * are turns. Everything goes through `SessionClient`: commands (create, post, cancel) through
 * the session's workflow, reads (the log, followed live) from the store; every answer is
 * derived from the log (response-fold.ts, items.ts), so it is the same on any gateway and after
 * any crash.
 */
import { randomUUID } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Response, ResponseStreamEvent } from 'openai/resources/responses/responses';
import { z } from 'zod';
import {
  isKnownEvent,
  jsonEqual,
  suppliedHistoryProblem,
  turnToolsProblem,
  unhideableReason,
  TurnFold,
  type AgentSpec,
  type AskedAgent,
  type SessionHeader,
  type StoredEvent,
  type ToolSchema,
} from '../../session/index.js';
import {
  STREAMED,
  defineRoute,
  noParams,
  noQuery,
  type AgentDefaults,
  type RouteContext,
  type RouteResult,
  type RouteSpec,
} from '../route-table.js';
import { chatCompletionBody, createChatCompletion } from './chat.js';
import { responseHints } from './hints.js';
import { OpenAiError, invalidRequest, notFound } from '../openai-errors.js';
import {
  decodeResponseId,
  encodeResponseId,
  newConversationId,
  newMessageId,
  type ResponseAnchor,
  type ResponseRef,
} from './ids.js';
import { conversationItems, placedConversationItems } from './items.js';
import {
  callerScope,
  explicitSessionId,
  reconcile,
  recordTranscriptEnd,
  recordTranscriptWith,
  retryOf,
  suppliedItems,
} from '../transcripts.js';
import { isTranscriptInput, responsesTranscript } from './responses-input.js';
import { modelList, modelObject, resolveModelName } from './models.js';
import { ResponseTracker } from './response-fold.js';
import {
  contentText,
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
  RESPONSE_IGNORED_HINTS,
  responseCreateBody,
  responseObject,
  responseParams,
  responseRetrieveQuery,
  chatCompletionObject,
  modelListObject,
  modelObjectSchema,
  type FunctionTool,
  type InputItem,
} from './schemas.js';
import { feedLive } from '../turn-stream/follow.js';
import { followUntilDone, streamResponseEvents } from './stream.js';

/** Prefix of every route of this API. */
export const OPENAI_PREFIX = '/openai/v1';

const ok = (body: unknown): RouteResult => ({ status: 200, body });
const seconds = (ms: number): number => Math.floor(ms / 1000);

// ---- conversations ------------------------------------------------------------------------

async function requireConversation(ctx: RouteContext, id: string, param: string | null = null): Promise<SessionHeader> {
  if (!(await ctx.client.exists(id))) throw notFound(param, `No conversation found with id '${id}'.`);
  return ctx.client.header(id);
}

/** The conversation's metadata: the last `session/metadata` of the session itself (not of a turn). */
function conversationMetadata(events: readonly StoredEvent[]): Record<string, string> {
  let metadata: Record<string, string> = {};
  for (const event of events) {
    if (isKnownEvent(event) && event.type === 'session/metadata' && event.data.messageId === undefined)
      metadata = event.data.metadata;
  }
  return metadata;
}

async function readConversation(ctx: RouteContext, id: string) {
  const header = await requireConversation(ctx, id);
  return conversationOf(header, conversationMetadata(await ctx.client.events(id, 0)));
}

function conversationOf(header: SessionHeader, metadata: Record<string, string>) {
  return { id: header.id, object: 'conversation' as const, created_at: seconds(header.createdAt), metadata };
}

/** What a conversation's log says about the next turn: the model and system prompt it runs with, and whether a turn is running. */
type ConversationState = {
  model: string | undefined;
  system: string | undefined;
  openTurn: number | undefined;
  /** Calls of the open turn that wait for the caller's result (external tools). */
  awaitingResults: Set<string>;
  /** The function tools the response that started the open turn gave it. */
  turnTools: ToolSchema[] | undefined;
};

function conversationState(
  header: SessionHeader,
  events: readonly StoredEvent[],
  defaults: AgentDefaults,
): ConversationState {
  let model = header.agent?.model ?? defaults.model;
  let system = header.agent?.system ?? defaults.system;
  let openTurn: number | undefined;
  let turnTools: ToolSchema[] | undefined;
  const awaitingResults = new Set<string>();
  for (const event of events) {
    if (!isKnownEvent(event)) continue;
    switch (event.type) {
      case 'request/header':
        model = event.data.header.model;
        system = event.data.header.system;
        break;
      case 'turn/start':
        openTurn = event.data.turn;
        turnTools = event.data.tools;
        break;
      case 'turn/end':
        if (event.data.turn === openTurn) openTurn = undefined;
        turnTools = undefined;
        awaitingResults.clear();
        break;
      case 'tool/approval-request':
        if (event.data.kind === 'external') awaitingResults.add(event.data.callId);
        break;
      case 'tool/approval':
        awaitingResults.delete(event.data.callId);
        break;
      case 'tool/result':
        awaitingResults.delete(event.data.message.source.callId);
        break;
      default:
        break;
    }
  }
  return { model, system, openTurn, awaitingResults, turnTools };
}

/** A function tool of the request as the model is told of it (no description: empty; no parameters: any object). */
function toolSchemaOf(tool: FunctionTool): ToolSchema {
  return {
    name: tool.name,
    description: tool.description ?? '',
    parameters: (tool.parameters ?? { type: 'object', properties: {} }) as ToolSchema['parameters'],
    ...(tool.strict != null ? { strict: tool.strict } : {}),
  };
}

/** Refuses, before anything is created, a message text the session would refuse (blank, too large). */
function checkText(ctx: RouteContext, text: string, param: string): void {
  if (text.trim().length === 0) throw invalidRequest(param, 'a message must not be empty or blank', 'empty_message');
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes > ctx.client.maxMessageBytes)
    throw invalidRequest(
      param,
      `the message is ${bytes} bytes; the limit is ${ctx.client.maxMessageBytes} (SESSIONLOG_MAX_MESSAGE_BYTES)`,
      'message_too_large',
    );
}

/** A system or developer message first in a new conversation's items sets its instructions; anything else is a user message. */
function splitInitialItems(items: readonly InputItem[]): {
  system: string | undefined;
  messages: Array<{ text: string; index: number }>;
} {
  let system: string | undefined;
  const messages: Array<{ text: string; index: number }> = [];
  items.forEach((item, i) => {
    if (item.type !== undefined && item.type !== 'message') {
      throw invalidRequest(
        `items[${i}].type`,
        `a new conversation takes messages; ${item.type} items belong in the input of a response (or in POST /conversations/{id}/items)`,
        'unsupported_value',
      );
    }
    const message = item as { role: string; content: string | Array<{ text?: string }> };
    if (message.role === 'user') messages.push({ text: contentText(message.content), index: i });
    else if (i === 0 && message.role !== 'assistant') system = contentText(message.content);
    else
      throw invalidRequest(
        `items[${i}].role`,
        message.role === 'assistant'
          ? 'assistant messages are added with POST /conversations/{id}/items (logged as caller-supplied history)'
          : `a ${message.role} message sets the conversation's instructions and must come first, once`,
        'unsupported_value',
      );
  });
  return { system, messages };
}

// ---- responses ----------------------------------------------------------------------------

type LoadedResponse = { tracker: ResponseTracker; replayed: ResponseStreamEvent[]; nextSeq: number };

/** Folds a session's stored log into the response `ref` names (404 when there is no such session). */
async function loadResponse(
  ctx: RouteContext,
  responseId: string,
  ref: ResponseRef,
  param: string | null,
): Promise<LoadedResponse> {
  const header = await requireConversation(ctx, ref.sessionId, param);
  const events = await ctx.client.events(ref.sessionId, 0);
  const tracker = new ResponseTracker({
    responseId,
    sessionId: ref.sessionId,
    anchor: ref.anchor,
    header,
    defaults: ctx.defaults,
  });
  const replayed = events.flatMap((event) => tracker.push(event));
  // The stored log ends with whole batches: a response waiting for the caller ends here.
  replayed.push(...tracker.flush());
  return { tracker, replayed, nextSeq: events.length };
}

/**
 * The response an id names. One whose anchor is not logged yet exists only while its
 * session's workflow runs (its message is queued there); otherwise the id names nothing.
 */
async function findResponse(ctx: RouteContext, id: string, param: string | null = null): Promise<LoadedResponse> {
  const ref = decodeResponseId(id);
  const missing = notFound(param, `No response found with id '${id}'.`);
  if (!ref || !(await ctx.client.exists(ref.sessionId))) throw missing;
  const loaded = await loadResponse(ctx, id, ref, param);
  if (loaded.tracker.state() === 'queued' && !(await ctx.client.isRunning(ref.sessionId))) throw missing;
  return loaded;
}

type ResponseInput = {
  messages: string[];
  toolOutputs: Array<{ callId: string; output: string; index: number }>;
  /** System and developer messages of the input: the instructions from this response on. */
  system: string | undefined;
};

/** A conversation's input: user messages, results for its waiting calls, and instructions. */
function normalizeInput(input: z.output<typeof responseCreateBody>['input']): ResponseInput {
  if (typeof input === 'string') return { messages: [input], toolOutputs: [], system: undefined };
  const messages: string[] = [];
  const toolOutputs: ResponseInput['toolOutputs'] = [];
  const system: string[] = [];
  input.forEach((item, i) => {
    if (item.type === 'reasoning') return;
    if (item.type === 'function_call_output') {
      if (messages.length > 0)
        throw invalidRequest(
          `input[${i}]`,
          'function_call_output items come before the user messages of an input (they answer the calls of the turn that is waiting)',
          'unsupported_value',
        );
      const output = item.output;
      toolOutputs.push({
        callId: item.call_id,
        output: typeof output === 'string' ? output : contentText(output as Array<{ text?: string }>),
        index: i,
      });
      return;
    }
    const role = (item as { role?: string }).role;
    if (item.type === 'function_call' || item.type === 'item_reference' || role === 'assistant') {
      throw invalidRequest(
        `input[${i}]`,
        "a conversation's earlier replies are in its log: send only new user messages and function_call_output items with conversation or previous_response_id, or send the whole transcript without them",
        'unsupported_value',
      );
    }
    const text = contentText((item as { content: string | Array<{ text?: string }> }).content);
    if (role === 'user') messages.push(text);
    else system.push(text);
  });
  return { messages, toolOutputs, system: system.length > 0 ? system.join('\n\n') : undefined };
}

/** What a response asks to change from this turn on: the model (resolved) and the instructions. */
function askedAgentOf(
  ctx: RouteContext,
  body: z.output<typeof responseCreateBody>,
  input: ResponseInput,
  state: ConversationState,
): AskedAgent | undefined {
  const model = body.model === undefined ? undefined : resolveModelName(ctx, body.model);
  const system = input.system ?? body.instructions ?? undefined;
  const asked: AskedAgent = {
    ...(model !== undefined && model !== state.model ? { model } : {}),
    ...(system !== undefined && system !== (state.system ?? '') ? { system } : {}),
  };
  return Object.keys(asked).length > 0 ? asked : undefined;
}

/** Refuses what the conversation's state cannot take: a response while a turn runs, or results nothing waits for. */
function checkTurnState(state: ConversationState, input: ResponseInput, sessionId: string): void {
  if (input.toolOutputs.length === 0) {
    if (state.openTurn === undefined) return;
    const waiting =
      state.awaitingResults.size > 0
        ? `; it waits for the results of ${[...state.awaitingResults].join(', ')}: send them as function_call_output items`
        : '';
    throw new OpenAiError(
      409,
      `conversation ${sessionId} is answering another response (turn ${state.openTurn} is running)${waiting}; otherwise retry once it has finished, or cancel it`,
      {
        code: 'conversation_locked',
      },
    );
  }
  const seen = new Set<string>();
  for (const output of input.toolOutputs) {
    if (!state.awaitingResults.has(output.callId) || seen.has(output.callId)) {
      const waiting =
        state.awaitingResults.size > 0
          ? `it waits for ${[...state.awaitingResults].join(', ')}`
          : 'no call waits for a result';
      throw invalidRequest(
        `input[${output.index}].call_id`,
        `conversation ${sessionId} has no call ${JSON.stringify(output.callId)} waiting for its result (${waiting})`,
        'invalid_call_id',
      );
    }
    seen.add(output.callId);
  }
}

async function createResponse(
  ctx: RouteContext,
  body: z.output<typeof responseCreateBody>,
  request: FastifyRequest,
  reply: FastifyReply,
): Promise<RouteResult> {
  const tools =
    body.tools && body.tools.length > 0 && body.tool_choice !== 'none' ? body.tools.map(toolSchemaOf) : undefined;
  if (tools) {
    const problem = turnToolsProblem(tools);
    if (problem) throw invalidRequest('tools', problem, 'invalid_value');
  }
  const conversation =
    typeof body.conversation === 'object' && body.conversation !== null
      ? body.conversation.id
      : (body.conversation ?? undefined);
  const previous = body.previous_response_id ?? undefined;
  if (conversation !== undefined && previous !== undefined) {
    throw invalidRequest(
      'previous_response_id',
      'set conversation or previous_response_id, not both: a previous response already names its conversation',
      'invalid_parameter_combination',
    );
  }
  const scope = callerScope(request);
  if (conversation === undefined && previous === undefined && isTranscriptInput(body.input))
    return answerTranscript(ctx, body, request, reply, { tools, scope });

  const input = normalizeInput(body.input);
  const answering = input.toolOutputs.length > 0;
  if (!answering && input.messages.length === 0)
    throw invalidRequest(
      'input',
      'input must hold a user message or function_call_output items',
      'missing_required_parameter',
    );
  for (const message of input.messages) checkText(ctx, message, 'input');
  const metadata = body.metadata && Object.keys(body.metadata).length > 0 ? body.metadata : undefined;
  if (answering && metadata)
    throw invalidRequest(
      'metadata',
      'a response that answers tool calls carries on a running turn; it takes no metadata of its own',
      'unsupported_parameter',
    );
  if (answering && conversation === undefined && previous === undefined) {
    throw invalidRequest(
      'input',
      'function_call_output items answer the calls of a conversation: send its conversation or previous_response_id, or the whole transcript with the function_call items they answer',
      'missing_required_parameter',
    );
  }

  let header: SessionHeader;
  if (conversation !== undefined) header = await requireConversation(ctx, conversation, 'conversation');
  else if (previous !== undefined) {
    const loaded = await findResponse(ctx, previous, 'previous_response_id');
    header = await ctx.client.header(loaded.tracker.context.sessionId);
  } else {
    const model = body.model === undefined ? undefined : resolveModelName(ctx, body.model);
    const system = input.system ?? body.instructions ?? undefined;
    const agent: AgentSpec = {
      ...(model !== undefined ? { model } : {}),
      ...(system != null ? { system } : {}),
    };
    header = await ctx.client.create({
      sessionId: newConversationId(),
      ...(Object.keys(agent).length > 0 ? { agent } : {}),
    });
  }
  const sessionId = header.id;
  const events = await ctx.client.events(sessionId, 0);
  const state = conversationState(header, events, ctx.defaults);
  checkTurnState(state, input, sessionId);
  // Results carry on the turn their calls belong to: its tools are those of the response that started it.
  if (answering && tools && !jsonEqual(tools, state.turnTools ?? [])) {
    throw invalidRequest(
      'tools',
      `these results carry on a turn whose tools were fixed by the response that started it (${(state.turnTools ?? []).map((t) => t.name).join(', ') || 'none'}); send the same tools or none`,
      'invalid_value',
    );
  }
  const agent = answering ? undefined : askedAgentOf(ctx, body, input, state);

  const messageId = newMessageId();
  const anchor: ResponseAnchor = answering
    ? { kind: 'tool-results', callId: input.toolOutputs[0]!.callId }
    : { kind: 'message', messageId };
  if (answering) {
    for (const output of input.toolOutputs) await ctx.client.submitToolResult(sessionId, output.callId, output.output);
    // User messages sent with the results join the running turn at its next step.
    for (const [i, text] of input.messages.entries())
      await ctx.client.post(sessionId, text, { id: `${messageId}.${i}` });
  } else {
    // Earlier user messages of the input and the response's metadata are logged first, between turns; the last message starts the turn.
    const earlier = input.messages.slice(0, -1);
    if (earlier.length > 0 || metadata) {
      await ctx.client.note(sessionId, {
        id: `${messageId}.input`,
        ...(metadata ? { metadata: { values: metadata, messageId } } : {}),
        ...(earlier.length > 0 ? { messages: earlier.map((text, i) => ({ id: `${messageId}.${i}`, text })) } : {}),
      });
    }
    const hints = responseHints(body, RESPONSE_IGNORED_HINTS);
    await ctx.client.post(sessionId, input.messages.at(-1)!, {
      id: messageId,
      ...(tools ? { tools } : {}),
      ...(agent ? { agent } : {}),
      ...(hints ? { hints } : {}),
    });
    // A stateless client that leaves before the answer still finds this conversation by its transcript.
    if (earlier.length === 0)
      await recordTranscriptWith(ctx, scope, sessionId, events, { role: 'user', text: input.messages.at(-1)! });
  }
  return answerResponse(ctx, body, request, reply, { sessionId, anchor, header, events, scope, previous });
}

/** A response whose input is a whole transcript: reconciled with a session's log (reconcile.ts), then answered. */
async function answerTranscript(
  ctx: RouteContext,
  body: z.output<typeof responseCreateBody>,
  request: FastifyRequest,
  reply: FastifyReply,
  options: { tools: ToolSchema[] | undefined; scope: string },
): Promise<RouteResult> {
  const transcript = await responsesTranscript(ctx, body.input as InputItem[], body.instructions ?? undefined);
  for (const [i, message] of transcript.messages.entries())
    if (message.role === 'user') checkText(ctx, message.text, `input[${i}]`);
  const header = request.headers['x-session-id'];
  // The session the caller names, else the one its replies' item ids name.
  const named =
    typeof header === 'string' && header !== '' ? header : (body.metadata?.session_id ?? transcript.sessionHint);
  const keyed = [(body as Record<string, unknown>).prompt_cache_key, (body as Record<string, unknown>).user].find(
    (v): v is string => typeof v === 'string' && v !== '',
  );
  const reconciled = await reconcile(ctx, {
    transcript,
    key:
      named !== undefined
        ? { sessionId: explicitSessionId(named, 'x-session-id') }
        : keyed !== undefined
          ? { key: keyed }
          : undefined,
    scope: options.scope,
    model: body.model === undefined ? undefined : resolveModelName(ctx, body.model),
    tools: options.tools,
    hints: responseHints(body, RESPONSE_IGNORED_HINTS),
    metadata: body.metadata ?? undefined,
    regenerate: request.headers['x-sessionlog-regenerate'] === 'true',
    retry: retryOf(request),
  });
  return answerResponse(ctx, body, request, reply, {
    sessionId: reconciled.sessionId,
    anchor: reconciled.anchor,
    header: await ctx.client.header(reconciled.sessionId),
    events: reconciled.events,
    scope: options.scope,
    previous: undefined,
    forkedFrom: reconciled.forkedFrom,
  });
}

/** Follows the turn a response started (or streams it), records where the transcript now ends, and answers. */
async function answerResponse(
  ctx: RouteContext,
  body: z.output<typeof responseCreateBody>,
  request: FastifyRequest,
  reply: FastifyReply,
  at: {
    sessionId: string;
    anchor: ResponseAnchor;
    header: SessionHeader;
    events: StoredEvent[];
    scope: string;
    previous: string | undefined;
    forkedFrom?: string | undefined;
  },
): Promise<RouteResult> {
  const { sessionId, anchor } = at;
  const tracker = new ResponseTracker({
    responseId: encodeResponseId({ sessionId, anchor }),
    sessionId,
    anchor,
    header: at.header,
    defaults: ctx.defaults,
    ...(at.previous !== undefined ? { previousResponseId: at.previous } : {}),
  });
  const replayed = at.events.flatMap((event) => tracker.push(event));
  void replayed;
  const postedAt = seconds(Date.now());
  const headers = {
    'x-session-id': sessionId,
    ...(at.forkedFrom ? { 'x-sessionlog-forked-from': at.forkedFrom } : {}),
  };
  if (body.stream === true) {
    for (const [name, value] of Object.entries(headers)) reply.raw.setHeader(name, value);
    await streamResponseEvents(request, reply, {
      client: ctx.client,
      tracker,
      replayed: [],
      fromSeq: at.events.length,
      startingAfter: -1,
      heartbeatMs: ctx.sseHeartbeatMs,
      streams: ctx.streams,
    });
    if (tracker.state() === 'done') await recordTranscriptEnd(ctx, at.scope, sessionId);
    return STREAMED;
  }
  if (body.background !== true) {
    await followUntilDone(request, ctx.client, tracker, at.events.length, ctx.streams);
    await recordTranscriptEnd(ctx, at.scope, sessionId);
  }
  for (const [name, value] of Object.entries(headers)) void reply.header(name, value);
  return ok(withBackground(tracker.snapshot(postedAt), body.background === true));
}

function withBackground(response: Response, background: boolean): Response {
  return { ...response, background };
}

/** Feeds the tracker what the log appends within `ms` (or until the response ends); returns the next seq to read. */
async function followFor(ctx: RouteContext, tracker: ResponseTracker, fromSeq: number, ms: number): Promise<number> {
  const stop = new AbortController();
  const timer = setTimeout(() => stop.abort(), ms);
  let next = fromSeq;
  try {
    for await (const event of ctx.client.follow(tracker.context.sessionId, fromSeq, stop.signal)) {
      await feedLive(ctx.client, tracker, event);
      next = event.seq + 1;
      if (tracker.state() === 'done') break;
    }
  } finally {
    clearTimeout(timer);
  }
  return next;
}

/** Cancels the turn of a response that is not over; waits (bounded) until the log says it ended. */
async function cancelResponse(ctx: RouteContext, id: string): Promise<Response> {
  const { tracker, nextSeq } = await findResponse(ctx, id);
  if (tracker.state() === 'done') {
    const current = tracker.snapshot();
    if (current.status === 'cancelled') return current;
    throw invalidRequest(
      null,
      `response ${id} has already ended (status ${current.status}); only a queued or running response can be cancelled`,
      'response_already_ended',
    );
  }
  const deadline = Date.now() + CANCEL_WAIT_MS;
  let seq = nextSeq;
  while (tracker.state() !== 'done' && Date.now() < deadline) {
    // A queued message has no turn to cancel yet, and a cancel the workflow gets between turns is dropped: cancel again until the log shows the end.
    if (tracker.state() === 'running') await ctx.client.cancel(tracker.context.sessionId);
    seq = await followFor(ctx, tracker, seq, CANCEL_RETRY_MS);
  }
  return tracker.snapshot();
}

const CANCEL_WAIT_MS = 30_000;
const CANCEL_RETRY_MS = 1_000;

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

/** A page of conversation items, as OpenAI lists them. */
function itemPage(data: ReadonlyArray<{ id?: string }>, hasMore: boolean) {
  return { object: 'list', data, first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null, has_more: hasMore };
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
    handler: async (ctx, { params }) => {
      if (ctx.models.names[params.id] === undefined)
        throw notFound('model', `The model '${params.id}' does not exist or you do not have access to it.`);
      return ok(modelObject(params.id));
    },
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
    handler: async (ctx, { body }) => {
      const { system, messages } = splitInitialItems(body?.items ?? []);
      const metadata = body?.metadata ?? {};
      for (const message of messages) checkText(ctx, message.text, `items[${message.index}].content`);
      const header = await ctx.client.create({
        sessionId: newConversationId(),
        ...(system !== undefined ? { agent: { system } } : {}),
      });
      // The initial messages are logged without a turn: the model gets them with the conversation's first response.
      if (messages.length > 0 || Object.keys(metadata).length > 0) {
        await ctx.client.note(header.id, {
          id: 'conversation.create',
          ...(Object.keys(metadata).length > 0 ? { metadata: { values: metadata } } : {}),
          ...(messages.length > 0
            ? { messages: messages.map((message) => ({ id: `${header.id}.item${message.index}`, text: message.text })) }
            : {}),
        });
      }
      return ok(conversationOf(header, metadata));
    },
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
    handler: async (ctx, { params, body }) => {
      await requireConversation(ctx, params.id);
      // Logged between turns: this waits for a running turn to end.
      await ctx.client.note(params.id, { metadata: { values: body.metadata ?? {} } });
      return ok(await readConversation(ctx, params.id));
    },
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
    handler: async (ctx, { params }) => {
      await requireConversation(ctx, params.id);
      await ctx.client.erase(params.id);
      return ok({ id: params.id, object: 'conversation.deleted', deleted: true });
    },
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
    handler: async (ctx, { params, body }) => {
      await requireConversation(ctx, params.id);
      const transcript = await responsesTranscript(ctx, body.items, undefined);
      if (transcript.system !== undefined)
        throw invalidRequest(
          'items',
          "system and developer messages are a conversation's instructions: send them as a response's instructions",
          'unsupported_value',
        );
      for (const [i, message] of transcript.messages.entries())
        if (message.role === 'user') checkText(ctx, message.text, `items[${i}]`);
      const before = conversationItems(params.id, await ctx.client.events(params.id, 0)).length;
      if (transcript.messages.length > 0) {
        const id = `items_${randomUUID().replaceAll('-', '')}`;
        const history = suppliedItems(transcript.messages, id);
        const problem = suppliedHistoryProblem(history);
        if (problem) throw invalidRequest('items', problem, 'invalid_value');
        await ctx.client.note(params.id, { id, history });
      }
      return ok(itemPage(conversationItems(params.id, await ctx.client.events(params.id, 0)).slice(before), false));
    },
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
    handler: async (ctx, { params, query }) => {
      await requireConversation(ctx, params.id);
      const items = conversationItems(params.id, await ctx.client.events(params.id, 0));
      if (query.order !== 'asc') items.reverse();
      let start = 0;
      if (query.after !== undefined) {
        const at = items.findIndex((item) => item.id === query.after);
        if (at < 0)
          throw invalidRequest('after', `conversation ${params.id} has no item '${query.after}'`, 'invalid_value');
        start = at + 1;
      }
      const limit = query.limit ?? 20;
      return ok(itemPage(items.slice(start, start + limit), start + limit < items.length));
    },
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
    handler: async (ctx, { params }) => {
      await requireConversation(ctx, params.id);
      const item = conversationItems(params.id, await ctx.client.events(params.id, 0)).find(
        (i) => i.id === params.item_id,
      );
      if (!item) throw notFound('item_id', `No item found with id '${params.item_id}' in conversation ${params.id}.`);
      return ok(item);
    },
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
    handler: async (ctx, { params }) => {
      const header = await requireConversation(ctx, params.id);
      const events = await ctx.client.events(params.id, 0);
      const found = placedConversationItems(params.id, events).find(({ item }) => item.id === params.item_id);
      if (!found) throw notFound('item_id', `No item found with id '${params.item_id}' in conversation ${params.id}.`);
      if (found.item.type === 'reasoning')
        throw invalidRequest(
          'item_id',
          'a reasoning item goes with the message it preceded: delete that message item',
          'invalid_value',
        );
      const unhideable = unhideableReason(events[found.seq]!);
      if (unhideable !== undefined)
        throw invalidRequest('item_id', `item '${params.item_id}' cannot be deleted: ${unhideable}`, 'invalid_value');
      const openTurn = TurnFold.of(events).openTurn;
      if (openTurn !== undefined)
        throw new OpenAiError(
          409,
          `conversation ${params.id} is answering a request (turn ${openTurn} is running or waits for tool results); delete items once it has finished`,
          { code: 'conversation_locked' },
        );
      await ctx.client.note(params.id, { id: `delete_${found.seq}`, hide: [found.seq] });
      return ok(conversationOf(header, conversationMetadata(events)));
    },
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
    handler: async (ctx, { params, query, request, reply }) => {
      const loaded = await findResponse(ctx, params.id);
      if (query.stream !== 'true') return ok(loaded.tracker.snapshot());
      await streamResponseEvents(request, reply, {
        client: ctx.client,
        tracker: loaded.tracker,
        replayed: loaded.replayed,
        fromSeq: loaded.nextSeq,
        startingAfter: query.starting_after ?? -1,
        heartbeatMs: ctx.sseHeartbeatMs,
        streams: ctx.streams,
      });
      return STREAMED;
    },
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
