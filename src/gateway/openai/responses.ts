/**
 * OpenAI Responses (`/openai/v1/responses`): a response is one turn of a conversation, started
 * by the user message it posts or carried on by the tool results it submits, or (a whole
 * transcript as its input) reconciled with a session's log (../transcripts.ts). It is answered
 * at once (background), when its turn ends, or streamed; a response is read back, rejoined and
 * cancelled by its id, which names its session and anchor (ids.ts), so every answer is folded
 * from the log (response-fold.ts).
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Response, ResponseStreamEvent } from 'openai/resources/responses/responses';
import type { z } from 'zod';
import {
  isKnownEvent,
  jsonEqual,
  turnToolsProblem,
  type AgentSpec,
  type AskedAgent,
  type SessionHeader,
  type StoredEvent,
  type ToolSchema,
} from '../../session/index.js';
import { OpenAiError, invalidRequest, notFound } from '../openai-errors.js';
import { STREAMED, type AgentDefaults, type RouteContext, type RouteResult } from '../route-table.js';
import {
  callerScope,
  explicitSessionId,
  reconcile,
  recordTranscriptEnd,
  recordTranscriptWith,
  retryOf,
  userTranscriptMessage,
} from '../transcripts.js';
import { namingPart, refuseForeignMedia, type ReadMessage } from '../media-parts.js';
import { feedLive, followUntilDone } from '../turn-stream/follow.js';
import { checkText, requireConversation } from './conversations.js';
import { refuseUnforcedToolChoice, responseHints } from './hints.js';
import {
  decodeResponseId,
  encodeResponseId,
  newConversationId,
  newMessageId,
  type ResponseAnchor,
  type ResponseRef,
} from './ids.js';
import { resolveModelName } from './models.js';
import { ResponseTracker } from './response-fold.js';
import { instructionsText, isTranscriptInput, readInputContent, responsesTranscript } from './responses-input.js';
import {
  contentText,
  RESPONSE_IGNORED_HINTS,
  type FunctionTool,
  type InputItem,
  type responseCreateBody,
  type responseRetrieveQuery,
} from './schemas.js';
import { streamResponseEvents } from './stream.js';

const ok = (body: unknown): RouteResult => ({ status: 200, body });
const seconds = (ms: number): number => Math.floor(ms / 1000);

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
export async function findResponse(
  ctx: RouteContext,
  id: string,
  param: string | null = null,
): Promise<LoadedResponse> {
  const ref = decodeResponseId(id);
  const missing = notFound(param, `No response found with id '${id}'.`);
  if (!ref || !(await ctx.client.exists(ref.sessionId))) throw missing;
  const loaded = await loadResponse(ctx, id, ref, param);
  if (loaded.tracker.state() === 'queued' && !(await ctx.client.isRunning(ref.sessionId))) throw missing;
  return loaded;
}

type ResponseInput = {
  /** The user messages, each with its media when it has any (media-parts.ts). */
  messages: Array<ReadMessage & { index: number }>;
  toolOutputs: Array<{ callId: string; output: string; index: number }>;
  /** System and developer messages of the input: the instructions from this response on. */
  system: string | undefined;
};

/** A conversation's input: user messages, results for its waiting calls, and instructions. */
function normalizeInput(input: z.output<typeof responseCreateBody>['input'], maxMediaBytes: number): ResponseInput {
  if (typeof input === 'string')
    return {
      messages: [{ content: undefined, text: input, mediaKeys: [], index: 0 }],
      toolOutputs: [],
      system: undefined,
    };
  const messages: ResponseInput['messages'] = [];
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
    const content = (item as { content: string | Array<{ type: string }> }).content;
    if (role === 'user') messages.push({ ...readInputContent(content, `input[${i}]`, maxMediaBytes), index: i });
    else system.push(instructionsText(content, `input[${i}]`));
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

const toolNamesOf = (tools: readonly ToolSchema[] | undefined): string[] => (tools ?? []).map((tool) => tool.name);

export async function createResponse(
  ctx: RouteContext,
  body: z.output<typeof responseCreateBody>,
  request: FastifyRequest,
  reply: FastifyReply,
): Promise<RouteResult> {
  // With tool_choice 'none' too: the model sees the tools and calls none.
  const tools = body.tools && body.tools.length > 0 ? body.tools.map(toolSchemaOf) : undefined;
  if (tools) {
    const problem = turnToolsProblem(tools);
    if (problem) throw invalidRequest('tools', problem, 'invalid_value');
  }
  // Checked before anything is created (a bad tool_choice is a 400 naming it); a response that answers tool calls carries on its turn's.
  const hints = responseHints(body, RESPONSE_IGNORED_HINTS, toolNamesOf(tools));
  refuseUnforcedToolChoice(ctx, body.model === undefined ? undefined : resolveModelName(ctx, body.model), hints);
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

  const input = normalizeInput(body.input, ctx.client.maxMediaBytes);
  const answering = input.toolOutputs.length > 0;
  if (!answering && input.messages.length === 0)
    throw invalidRequest(
      'input',
      'input must hold a user message or function_call_output items',
      'missing_required_parameter',
    );
  for (const message of input.messages) if (!message.content) checkText(ctx, message.text, 'input');
  // Earlier user messages are logged by a note, which holds text: media go in the message that starts the turn.
  if (!answering)
    for (const message of input.messages.slice(0, -1))
      if (message.content)
        throw invalidRequest(
          `input[${message.index}]`,
          'only the last user message of an input may hold images or files (the earlier ones are logged as text before the turn); send it as its own response',
          'unsupported_value',
        );
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
    const sessionId = newConversationId();
    // A medium another session stored is refused before the conversation exists.
    for (const message of input.messages) refuseForeignMedia(message, sessionId);
    header = await ctx.client.create({ sessionId, ...(Object.keys(agent).length > 0 ? { agent } : {}) });
  }
  const sessionId = header.id;
  for (const message of input.messages) refuseForeignMedia(message, sessionId);
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
    for (const [i, message] of input.messages.entries())
      await ctx.client
        .post(sessionId, message.text, {
          id: `${messageId}.${i}`,
          ...(message.content ? { content: message.content } : {}),
        })
        .catch((error: unknown) => {
          throw namingPart(error, message);
        });
  } else {
    // Earlier user messages of the input and the response's metadata are logged first, between turns; the last message starts the turn.
    const earlier = input.messages.slice(0, -1);
    if (earlier.length > 0 || metadata) {
      await ctx.client.note(sessionId, {
        id: `${messageId}.input`,
        ...(metadata ? { metadata: { values: metadata, messageId } } : {}),
        ...(earlier.length > 0
          ? { messages: earlier.map((message, i) => ({ id: `${messageId}.${i}`, text: message.text })) }
          : {}),
      });
    }
    const last = input.messages.at(-1)!;
    await ctx.client
      .post(sessionId, last.text, {
        id: messageId,
        ...(last.content ? { content: last.content } : {}),
        ...(tools ? { tools } : {}),
        ...(agent ? { agent } : {}),
        ...(hints ? { hints } : {}),
      })
      .catch((error: unknown) => {
        throw namingPart(error, last);
      });
    // A stateless client that leaves before the answer still finds this conversation by its transcript.
    if (earlier.length === 0) await recordTranscriptWith(ctx, scope, sessionId, events, userTranscriptMessage(last));
  }
  return answerResponse(ctx, body, request, reply, { sessionId, anchor, header, events, scope, previous });
}

/** A response whose input is a whole transcript: reconciled with a session's log (../transcripts.ts), then answered. */
async function answerTranscript(
  ctx: RouteContext,
  body: z.output<typeof responseCreateBody>,
  request: FastifyRequest,
  reply: FastifyReply,
  options: { tools: ToolSchema[] | undefined; scope: string },
): Promise<RouteResult> {
  const transcript = await responsesTranscript(ctx, body.input as InputItem[], body.instructions ?? undefined);
  for (const [i, message] of transcript.messages.entries())
    if (message.role === 'user' && !message.content) checkText(ctx, message.text, `input[${i}]`);
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
    hints: responseHints(body, RESPONSE_IGNORED_HINTS, toolNamesOf(options.tools)),
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
export async function cancelResponse(ctx: RouteContext, id: string): Promise<Response> {
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

/** `GET /responses/:id`: the response as the log has it, or (stream=true) its events, replayed and then live. */
export async function retrieveResponse(
  ctx: RouteContext,
  id: string,
  query: z.output<typeof responseRetrieveQuery>,
  request: FastifyRequest,
  reply: FastifyReply,
): Promise<RouteResult> {
  const loaded = await findResponse(ctx, id);
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
}
