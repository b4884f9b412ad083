/**
 * OpenAI Chat Completions (`POST /openai/v1/chat/completions`, issue 24): the stateless API most
 * applications call. Each request carries its whole transcript; it is reconciled with a
 * session's log (../transcripts.ts), one turn runs, and the answer is derived from the log as the
 * Responses API's is (the same tracker), then spelled as a `chat.completion` or as
 * `chat.completion.chunk` events. Every answer names the session in `x-session-id` (and the
 * session it forked from in `x-sessionlog-forked-from`).
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { ResponseStreamEvent } from 'openai/resources/responses/responses';
import { turnToolsProblem, type ToolSchema } from '../../session/index.js';
import { STREAMED, type RouteContext, type RouteResult } from '../route-table.js';
import { OpenAiError, invalidRequest, toOpenAiErrorResponse } from '../openai-errors.js';
import { encodeResponseId } from './ids.js';
import { chatHints, refuseUnforcedToolChoice } from './hints.js';
import { resolveModelName } from './models.js';
import { CHAT_IGNORED_HINTS, type ChatBody } from './schemas.js';
import {
  callerScope,
  explicitSessionId,
  loggedTranscript,
  reconcile,
  retryOf,
  recordTranscriptEnd,
  type Reconciled,
  type Transcript,
  type TranscriptMessage,
  userTranscriptMessage,
} from '../transcripts.js';
import { ResponseTracker } from './response-fold.js';
import type { UserPart } from '../../session/media.js';
import { checkMessageParts, imageDetail, imageFromUrl, mediaFromData, mediaFromReference } from '../media-parts.js';
import { hijackEventStream } from '../sse.js';
import { followResponse, followUntilDone } from '../turn-stream/follow.js';

const contentText = (content: string | Array<{ text?: string }> | null | undefined): string =>
  content == null ? '' : typeof content === 'string' ? content : content.map((part) => part.text ?? '').join('');

type ChatUserPart = Extract<
  Exclude<Extract<ChatBody['messages'][number], { role: 'user' }>['content'], string>[number],
  object
>;

/** A user message's content part as a caller part: text, an `image_url` (data: or http(s) URL) or a `file` (data URL or a stored medium's locator). */
function userPartOf(part: ChatUserPart, param: string): UserPart {
  switch (part.type) {
    case 'text':
      return { type: 'text', text: part.text };
    case 'image_url':
      return imageFromUrl(part.image_url.url, param, imageDetail(part.image_url.detail, `${param}.image_url.detail`));
    case 'file': {
      const { file_id: fileId, file_data: fileData, filename } = part.file;
      if ((fileId == null) === (fileData == null))
        throw invalidRequest(
          `${param}.file`,
          `Invalid '${param}.file': send exactly one of file_data and file_id`,
          'invalid_value',
        );
      const options = { filename: filename ?? undefined };
      return fileId != null ? mediaFromReference(fileId, param, options) : mediaFromData(fileData, param, options);
    }
  }
}

/**
 * The body's messages as a transcript: system and developer messages are its instructions. A
 * user message's image and file parts are checked here (`maxMediaBytes`), before anything is
 * created, each refusal naming its part (`messages[0].content[1]`).
 */
export function chatTranscript(messages: ChatBody['messages'], maxMediaBytes: number): Transcript {
  const system: string[] = [];
  const out: TranscriptMessage[] = [];
  messages.forEach((message, i) => {
    switch (message.role) {
      case 'system':
      case 'developer':
        system.push(contentText(message.content));
        break;
      case 'user': {
        if (typeof message.content === 'string') {
          out.push({ role: 'user', text: message.content });
          break;
        }
        const at = (j: number) => `messages[${i}].content[${j}]`;
        const read = checkMessageParts(
          message.content.map((part, j) => userPartOf(part, at(j))),
          maxMediaBytes,
          at,
        );
        out.push(userTranscriptMessage(read));
        break;
      }
      case 'assistant':
        out.push({
          role: 'assistant',
          text: contentText(message.content as Array<{ text?: string }> | string | null | undefined),
          toolCalls: (message.tool_calls ?? []).map((call) => ({
            callId: call.id,
            name: call.function.name,
            arguments: call.function.arguments,
          })),
        });
        break;
      case 'tool':
        out.push({ role: 'tool', callId: message.tool_call_id, output: contentText(message.content) });
        break;
    }
  });
  return { system: system.length > 0 ? system.join('\n\n') : undefined, messages: out };
}

/** The explicit session a request names: the header, then metadata.session_id (ids); prompt_cache_key, then user (keys). */
function sessionKeyOf(request: FastifyRequest, body: ChatBody): { sessionId: string } | { key: string } | undefined {
  const header = request.headers['x-session-id'];
  if (typeof header === 'string' && header !== '') return { sessionId: explicitSessionId(header, 'x-session-id') };
  const fromMetadata = body.metadata?.session_id;
  if (fromMetadata) return { sessionId: explicitSessionId(fromMetadata, 'metadata.session_id') };
  for (const name of ['prompt_cache_key', 'user'] as const) {
    const value = body[name];
    if (typeof value === 'string' && value !== '') return { key: `${name}:${value}` };
  }
  return undefined;
}

/** The request's tools, for the turn it starts (with `tool_choice: 'none'` too: the model sees them and calls none). */
function toolsOf(body: ChatBody): ToolSchema[] | undefined {
  if (!body.tools || body.tools.length === 0) return undefined;
  const tools = body.tools.map((tool) => ({
    name: tool.function.name,
    description: tool.function.description ?? '',
    parameters: (tool.function.parameters ?? { type: 'object', properties: {} }) as ToolSchema['parameters'],
    ...(tool.function.strict != null ? { strict: tool.function.strict } : {}),
  }));
  const problem = turnToolsProblem(tools);
  if (problem) throw invalidRequest('tools', problem, 'invalid_value');
  return tools;
}

// ---- the answer -------------------------------------------------------------------------------

type ChatAnswer = {
  content: string;
  toolCalls: Array<{ id: string; type: 'function'; function: { name: string; arguments: string } }>;
  finishReason: 'stop' | 'length' | 'tool_calls';
};

/** The answer as the transcript will hold it: the visible assistant message after the request's messages. */
async function answerOf(
  ctx: RouteContext,
  reconciled: Reconciled,
  tracker: ResponseTracker,
): Promise<{ answer: ChatAnswer }> {
  const events = await ctx.client.events(reconciled.sessionId, 0);
  const logged = loggedTranscript(events);
  const message = logged.messages[reconciled.answerAt]?.message;
  const snapshot = tracker.snapshot();
  const assistant = message?.role === 'assistant' ? message : undefined;
  const toolCalls = (assistant?.toolCalls ?? []).map((call) => ({
    id: call.callId,
    type: 'function' as const,
    function: { name: call.name, arguments: call.arguments },
  }));
  return {
    answer: {
      content: assistant?.text ?? snapshot.output_text,
      toolCalls,
      finishReason: toolCalls.length > 0 ? 'tool_calls' : snapshot.status === 'incomplete' ? 'length' : 'stop',
    },
  };
}

function failureOf(tracker: ResponseTracker): OpenAiError | undefined {
  const snapshot = tracker.snapshot();
  // A spent budget is the caller's quota, as OpenAI answers one (429); any other failure is upstream's.
  if (snapshot.error?.code === ('budget_exceeded' as string))
    return new OpenAiError(429, snapshot.error.message, { code: 'budget_exceeded' });
  if (snapshot.status === 'failed')
    return new OpenAiError(502, snapshot.error?.message ?? 'the model call failed', {
      code: snapshot.error?.code ?? 'server_error',
    });
  if (snapshot.status === 'cancelled')
    return new OpenAiError(409, 'the turn was cancelled before it answered', { code: 'cancelled' });
  return undefined;
}

function usageOf(tracker: ResponseTracker) {
  const usage = tracker.snapshot().usage;
  if (!usage) return undefined;
  return {
    prompt_tokens: usage.input_tokens,
    completion_tokens: usage.output_tokens,
    total_tokens: usage.total_tokens,
    prompt_tokens_details: { cached_tokens: usage.input_tokens_details?.cached_tokens ?? 0 },
    completion_tokens_details: { reasoning_tokens: usage.output_tokens_details?.reasoning_tokens ?? 0 },
  };
}

function completionId(reconciled: Reconciled): string {
  return `chatcmpl-${encodeResponseId({ sessionId: reconciled.sessionId, anchor: reconciled.anchor }).slice(5)}`;
}

function sessionHeaders(reconciled: Reconciled): Record<string, string> {
  return {
    'x-session-id': reconciled.sessionId,
    ...(reconciled.forkedFrom ? { 'x-sessionlog-forked-from': reconciled.forkedFrom } : {}),
  };
}

export async function createChatCompletion(
  ctx: RouteContext,
  body: ChatBody,
  request: FastifyRequest,
  reply: FastifyReply,
): Promise<RouteResult> {
  const transcript = chatTranscript(body.messages, ctx.client.maxMediaBytes);
  const scope = callerScope(request);
  const model = body.model === undefined ? undefined : resolveModelName(ctx, body.model);
  const tools = toolsOf(body);
  const hints = chatHints(
    body,
    CHAT_IGNORED_HINTS,
    (tools ?? []).map((tool) => tool.name),
  );
  refuseUnforcedToolChoice(ctx, model, hints);
  const reconciled = await reconcile(ctx, {
    transcript,
    key: sessionKeyOf(request, body),
    scope,
    model,
    tools,
    hints,
    metadata: body.metadata ?? undefined,
    regenerate: request.headers['x-sessionlog-regenerate'] === 'true',
    retry: retryOf(request),
  });
  const header = await ctx.client.header(reconciled.sessionId);
  const tracker = new ResponseTracker({
    responseId: encodeResponseId({ sessionId: reconciled.sessionId, anchor: reconciled.anchor }),
    sessionId: reconciled.sessionId,
    anchor: reconciled.anchor,
    header,
    defaults: ctx.defaults,
  });
  for (const event of reconciled.events) tracker.push(event);
  const created = Math.floor(Date.now() / 1000);
  const id = completionId(reconciled);
  if (body.stream === true)
    return streamChat(ctx, request, reply, {
      reconciled,
      tracker,
      created,
      id,
      scope,
      transcript,
      includeUsage: body.stream_options?.include_usage === true,
    });
  await followUntilDone(request, ctx.client, tracker, reconciled.events.length, ctx.streams);
  const failure = failureOf(tracker);
  if (failure) throw failure;
  const { answer } = await answerOf(ctx, reconciled, tracker);
  await recordTranscriptEnd(ctx, scope, reconciled.sessionId);
  for (const [name, value] of Object.entries(sessionHeaders(reconciled))) void reply.header(name, value);
  const usage = usageOf(tracker);
  return {
    status: 200,
    body: {
      id,
      object: 'chat.completion',
      created,
      model: tracker.snapshot().model,
      system_fingerprint: null,
      service_tier: 'default',
      choices: [
        {
          index: 0,
          message: {
            role: 'assistant',
            content: answer.content === '' && answer.toolCalls.length > 0 ? null : answer.content,
            refusal: null,
            annotations: [],
            ...(answer.toolCalls.length > 0 ? { tool_calls: answer.toolCalls } : {}),
          },
          logprobs: null,
          finish_reason: answer.finishReason,
        },
      ],
      ...(usage ? { usage } : {}),
    },
  };
}

// ---- streaming --------------------------------------------------------------------------------

async function streamChat(
  ctx: RouteContext,
  request: FastifyRequest,
  reply: FastifyReply,
  options: {
    reconciled: Reconciled;
    tracker: ResponseTracker;
    created: number;
    id: string;
    scope: string;
    transcript: Transcript;
    includeUsage: boolean;
  },
): Promise<RouteResult> {
  const { reconciled, tracker } = options;
  let started = false;
  const chunk = (delta: Record<string, unknown>, finishReason: string | null, extra: Record<string, unknown> = {}) => {
    const first = !started;
    started = true;
    return `data: ${JSON.stringify({
      id: options.id,
      object: 'chat.completion.chunk',
      created: options.created,
      model: tracker.snapshot().model,
      system_fingerprint: null,
      choices: [
        {
          index: 0,
          delta: first ? { role: 'assistant', content: '', ...delta } : delta,
          logprobs: null,
          finish_reason: finishReason,
        },
      ],
      ...(options.includeUsage ? { usage: null } : {}),
      ...extra,
    })}\n\n`;
  };
  await hijackEventStream(
    reply,
    { streams: ctx.streams, heartbeatMs: ctx.sseHeartbeatMs, headers: sessionHeaders(reconciled) },
    async (stream) => {
      const send = async (events: readonly ResponseStreamEvent[]): Promise<void> => {
        for (const event of events)
          if (event.type === 'response.output_text.delta' && event.delta !== '')
            await stream.write(chunk({ content: event.delta }, null));
      };
      await followResponse(ctx.client, tracker, reconciled.events.length, stream.signal, send);
      if (stream.signal.aborted) return;
      const failure = failureOf(tracker);
      if (failure) throw failure;
      const { answer } = await answerOf(ctx, reconciled, tracker);
      await recordTranscriptEnd(ctx, options.scope, reconciled.sessionId);
      // A retry of an answered request replays nothing live: its text comes whole.
      if (!started && answer.content !== '') await stream.write(chunk({ content: answer.content }, null));
      if (answer.toolCalls.length > 0)
        await stream.write(chunk({ tool_calls: answer.toolCalls.map((call, index) => ({ index, ...call })) }, null));
      await stream.write(chunk({}, answer.finishReason));
      if (options.includeUsage)
        await stream.write(
          `data: ${JSON.stringify({
            id: options.id,
            object: 'chat.completion.chunk',
            created: options.created,
            model: tracker.snapshot().model,
            system_fingerprint: null,
            choices: [],
            usage: usageOf(tracker) ?? { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 },
          })}\n\n`,
        );
      await stream.write('data: [DONE]\n\n');
    },
    (error) => {
      const response = toOpenAiErrorResponse(error);
      if (response.logDetail) request.log.error({ err: error, sessionId: reconciled.sessionId }, 'chat stream failed');
      return `data: ${JSON.stringify(response.body)}\n\n`;
    },
  );
  return STREAMED;
}
