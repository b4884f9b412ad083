/**
 * Building a chat.completions request from derived messages (DESIGN §7). The request is a pure
 * function of the messages and the request header, so the same log gives the same request
 * byte for byte (prefix caching depends on it).
 */
import type {
  ChatCompletionAssistantMessageParam,
  ChatCompletionContentPart,
  ChatCompletionCreateParamsStreaming,
  ChatCompletionMessageParam,
  ChatCompletionMessageToolCall,
  ChatCompletionTool,
} from 'openai/resources/chat/completions';
import type { RequestHeader } from '../session/events.js';
import type { ResponseFormat, ToolChoice } from '../session/turn-hints.js';
import { assertNever, textOf } from '../session/messages.js';
import type {
  AssistantMessage,
  ContentBlock,
  MediaBlock,
  Message,
  StoredMedia,
  ToolResultBlock,
} from '../session/messages.js';
import type { ResolvedModel } from './catalogue.js';

/** DeepSeek's extension of the assistant message: the reasoning it sends back. */
export type WireAssistantMessage = ChatCompletionAssistantMessageParam & { reasoning_content?: string };

/** A streaming request body with DeepSeek's `thinking` extra field. */
export type ChatRequestBody = Omit<ChatCompletionCreateParamsStreaming, 'messages'> & {
  messages: Array<ChatCompletionMessageParam | WireAssistantMessage>;
  thinking?: { type: 'enabled' | 'disabled' };
};

/**
 * The bytes of the stored media a request carries, by locator: read from the artifact store by
 * the caller, in the activity, so the request stays a pure function of what it is given (a `Map`
 * will do). Bytes never travel through Temporal.
 */
export type MediaBytes = { get(locator: string): Uint8Array | undefined };

export type BuildChatRequestInput = {
  messages: readonly Message[];
  header: RequestHeader;
  model: ResolvedModel;
  /** The bytes of every stored medium `messages` hold (see {@link storedMediaOf}); needed only when they hold some. */
  media?: MediaBytes;
};

/**
 * Maps derived messages and the header to a streaming request:
 * - the header's system prompt becomes the first `system` message;
 * - user text blocks become one user message; tool results become `role: 'tool'` messages;
 * - a user message with media becomes an array of parts: text, `image_url` (a stored image as a
 *   `data:` URL of its bytes, a remote one as its URL, with the caller's `detail`), `file` (a PDF
 *   as a `data:` URL) and a plain-text file as a text part headed by its name. A message without
 *   media keeps its one string, so a log without media gives the request it gave before;
 * - assistant text becomes `content`, tool-call blocks become `tool_calls`, and reasoning is
 *   sent back as `reasoning_content` only on assistant messages that made tool calls, and only
 *   to models that speak that field (DeepSeek's rule: required there, dropped elsewhere);
 * - `thinking` is sent to models that accept it when the header (or a model alias) sets it;
 * - the turn's hints (sampling, stop, seed, a response format, a tool choice and
 *   `parallel_tool_calls`) are sent as given, the tool options only with tools, and its token
 *   cap only below the worker's.
 */
export function buildChatRequest({ messages, header, model, media }: BuildChatRequestInput): ChatRequestBody {
  const wire: ChatRequestBody['messages'] = [];
  if (header.system !== undefined && header.system !== '') wire.push({ role: 'system', content: header.system });
  // OpenAI's tool role takes text only, so the media of tool results go in a user message after
  // the run of tool messages (a user message between two tool messages of one round is refused).
  let toolMedia: ChatRequestBody['messages'] = [];
  for (const message of messages) {
    const out = toWireMessages(message, model, media);
    if (out.wire[0]?.role !== 'tool' && toolMedia.length > 0) {
      wire.push(...toolMedia);
      toolMedia = [];
    }
    wire.push(...out.wire);
    toolMedia.push(...out.toolMedia);
  }
  wire.push(...toolMedia);

  const body: ChatRequestBody = {
    model: model.id,
    messages: wire,
    stream: true,
    stream_options: { include_usage: true },
  };
  const hints = header.hints ?? {};
  if (header.tools && header.tools.length > 0) {
    body.tools = header.tools.map(toWireTool);
    // Only with tools: a provider refuses either field without them.
    if (hints.toolChoice !== undefined) body.tool_choice = toWireToolChoice(hints.toolChoice);
    if (hints.parallelToolCalls !== undefined) body.parallel_tool_calls = hints.parallelToolCalls;
  }
  const maxTokens = Math.min(header.maxTokens ?? Infinity, hints.maxTokens ?? Infinity);
  if (maxTokens !== Infinity) body.max_tokens = maxTokens;
  if (hints.temperature !== undefined) body.temperature = hints.temperature;
  if (hints.topP !== undefined) body.top_p = hints.topP;
  if (hints.seed !== undefined) body.seed = hints.seed;
  if (hints.stop !== undefined) body.stop = hints.stop;
  if (hints.presencePenalty !== undefined) body.presence_penalty = hints.presencePenalty;
  if (hints.frequencyPenalty !== undefined) body.frequency_penalty = hints.frequencyPenalty;
  if (hints.responseFormat !== undefined) body.response_format = toWireFormat(hints.responseFormat);
  const thinking = model.forcedThinking ?? header.thinking ?? model.thinkingDefault;
  if (model.thinkingParam && thinking !== undefined) body.thinking = { type: thinking ? 'enabled' : 'disabled' };
  if (header.reasoningEffort !== undefined) {
    body.reasoning_effort = header.reasoningEffort as ChatCompletionCreateParamsStreaming['reasoning_effort'];
  }
  return body;
}

function toWireToolChoice(choice: ToolChoice): NonNullable<ChatRequestBody['tool_choice']> {
  return typeof choice === 'string' ? choice : { type: 'function', function: { name: choice.name } };
}

function toWireFormat(format: ResponseFormat): NonNullable<ChatRequestBody['response_format']> {
  if (format.type === 'json_object') return { type: 'json_object' };
  const { name, schema, strict, description } = format;
  return {
    type: 'json_schema',
    json_schema: {
      name,
      schema,
      ...(strict !== undefined ? { strict } : {}),
      ...(description !== undefined ? { description } : {}),
    },
  };
}

function toWireTool(tool: NonNullable<RequestHeader['tools']>[number]): ChatCompletionTool {
  return {
    type: 'function',
    function: {
      name: tool.name,
      description: tool.description,
      parameters: tool.parameters as Record<string, unknown>,
      ...(tool.strict !== undefined ? { strict: tool.strict } : {}),
    },
  };
}

function toWireMessages(
  message: Message,
  model: ResolvedModel,
  media: MediaBytes | undefined,
): { wire: ChatRequestBody['messages']; toolMedia: ChatRequestBody['messages'] } {
  switch (message.role) {
    case 'user': {
      const content: readonly ContentBlock[] = message.content;
      const results = content.filter((b): b is ToolResultBlock => b.type === 'tool-result');
      if (results.length > 0) {
        const toolMedia: ChatRequestBody['messages'] = [];
        for (const result of results) {
          if (!result.content.some(isMedia)) continue;
          const parts = toWireParts(result.content.filter(isMedia), media);
          toolMedia.push({
            role: 'user',
            content: [{ type: 'text', text: `The media of tool call ${result.toolCallId}:` }, ...parts],
          });
        }
        const wire = results.map((result) => ({
          role: 'tool' as const,
          tool_call_id: result.toolCallId,
          content: textOf(result.content),
        }));
        return { wire, toolMedia };
      }
      if (!content.some(isMedia)) return { wire: [{ role: 'user', content: textOf(message.content) }], toolMedia: [] };
      return { wire: [{ role: 'user', content: toWireParts(content, media) }], toolMedia: [] };
    }
    case 'assistant':
      return { wire: [toWireAssistant(message, model)], toolMedia: [] };
    default:
      return assertNever(message, 'message role');
  }
}

function isMedia(block: ContentBlock): block is MediaBlock {
  return block.type === 'image' || block.type === 'file';
}

/** The stored media `messages` hold (in user messages and tool results), each once, in order. */
export function storedMediaOf(messages: readonly Message[]): StoredMedia[] {
  const found = new Map<string, StoredMedia>();
  const visit = (blocks: readonly ContentBlock[]): void => {
    for (const block of blocks) {
      if (block.type === 'tool-result') visit(block.content);
      else if (isMedia(block) && block.source.kind === 'artifact' && !found.has(block.source.locator))
        found.set(block.source.locator, block.source);
    }
  };
  for (const message of messages) if (message.role === 'user') visit(message.content);
  return [...found.values()];
}

function bytesOf(source: StoredMedia, media: MediaBytes | undefined): Uint8Array {
  const bytes = media?.get(source.locator);
  // A bug of the caller: the step reads every stored medium of the request before building it.
  if (bytes === undefined) throw new Error(`the bytes of ${source.locator} were not read before building the request`);
  return bytes;
}

function dataUrl(source: StoredMedia, media: MediaBytes | undefined): string {
  return `data:${source.mediaType};base64,${Buffer.from(bytesOf(source, media)).toString('base64')}`;
}

/** A user message's text and media blocks as Chat Completions content parts (other blocks are not the user's). */
function toWireParts(blocks: readonly ContentBlock[], media: MediaBytes | undefined): ChatCompletionContentPart[] {
  const parts: ChatCompletionContentPart[] = [];
  for (const block of blocks) {
    if (block.type === 'text') parts.push({ type: 'text', text: block.text });
    else if (block.type === 'image') {
      const url = block.source.kind === 'url' ? block.source.url : dataUrl(block.source, media);
      parts.push({
        type: 'image_url',
        image_url: { url, ...(block.detail !== undefined ? { detail: block.detail } : {}) },
      });
    } else if (block.type === 'file') {
      const filename = block.filename ?? block.source.locator.slice(block.source.locator.lastIndexOf('/') + 1);
      if (block.source.mediaType === 'text/plain') {
        const text = Buffer.from(bytesOf(block.source, media)).toString('utf8');
        parts.push({ type: 'text', text: `[file ${JSON.stringify(filename)}]\n${text}` });
      } else {
        parts.push({ type: 'file', file: { filename, file_data: dataUrl(block.source, media) } });
      }
    }
  }
  return parts;
}

function toWireAssistant(message: AssistantMessage, model: ResolvedModel): WireAssistantMessage {
  const toolCalls: ChatCompletionMessageToolCall[] = [];
  let reasoning = '';
  for (const block of message.content) {
    if (block.type === 'tool-call') {
      toolCalls.push({ id: block.id, type: 'function', function: { name: block.name, arguments: block.arguments } });
    } else if (block.type === 'reasoning') {
      reasoning += block.text;
    }
  }
  const text = textOf(message.content);
  const wire: WireAssistantMessage = { role: 'assistant', content: text === '' && toolCalls.length > 0 ? null : text };
  if (toolCalls.length > 0) {
    wire.tool_calls = toolCalls;
    if (model.reasoningContent && reasoning !== '') wire.reasoning_content = reasoning;
  }
  return wire;
}

/** The content blocks an assistant message is made of, in the order the adapter emits them. */
export function assistantBlocks(parts: {
  reasoning: string;
  text: string;
  toolCalls: { id: string; name: string; arguments: string }[];
}): ContentBlock[] {
  const blocks: ContentBlock[] = [];
  if (parts.reasoning !== '') blocks.push({ type: 'reasoning', text: parts.reasoning });
  if (parts.text !== '') blocks.push({ type: 'text', text: parts.text });
  for (const call of parts.toolCalls)
    blocks.push({ type: 'tool-call', id: call.id, name: call.name, arguments: call.arguments });
  return blocks;
}
