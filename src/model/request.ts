/**
 * Building a chat.completions request from derived messages (DESIGN §7). The request is a pure
 * function of the messages and the request header, so the same log gives the same request
 * byte for byte (prefix caching depends on it).
 */
import type {
  ChatCompletionAssistantMessageParam,
  ChatCompletionCreateParamsStreaming,
  ChatCompletionMessageParam,
  ChatCompletionMessageToolCall,
  ChatCompletionTool,
} from 'openai/resources/chat/completions';
import type { RequestHeader } from '../session/events.js';
import type { ResponseFormat, ToolChoice } from '../session/turn-hints.js';
import { assertNever, textOf } from '../session/messages.js';
import type { AssistantMessage, ContentBlock, Message, ToolResultBlock } from '../session/messages.js';
import type { ResolvedModel } from './catalogue.js';

/** DeepSeek's extension of the assistant message: the reasoning it sends back. */
export type WireAssistantMessage = ChatCompletionAssistantMessageParam & { reasoning_content?: string };

/** A streaming request body with DeepSeek's `thinking` extra field. */
export type ChatRequestBody = Omit<ChatCompletionCreateParamsStreaming, 'messages'> & {
  messages: Array<ChatCompletionMessageParam | WireAssistantMessage>;
  thinking?: { type: 'enabled' | 'disabled' };
};

export type BuildChatRequestInput = {
  messages: readonly Message[];
  header: RequestHeader;
  model: ResolvedModel;
};

/**
 * Maps derived messages and the header to a streaming request:
 * - the header's system prompt becomes the first `system` message;
 * - user text blocks become one user message; tool results become `role: 'tool'` messages;
 * - assistant text becomes `content`, tool-call blocks become `tool_calls`, and reasoning is
 *   sent back as `reasoning_content` only on assistant messages that made tool calls, and only
 *   to models that speak that field (DeepSeek's rule: required there, dropped elsewhere);
 * - `thinking` is sent to models that accept it when the header (or a model alias) sets it;
 * - the turn's hints (sampling, stop, seed, a response format, a tool choice and
 *   `parallel_tool_calls`) are sent as given, the tool options only with tools, and its token
 *   cap only below the worker's.
 */
export function buildChatRequest({ messages, header, model }: BuildChatRequestInput): ChatRequestBody {
  const wire: ChatRequestBody['messages'] = [];
  if (header.system !== undefined && header.system !== '') wire.push({ role: 'system', content: header.system });
  for (const message of messages) wire.push(...toWireMessages(message, model));

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

function toWireMessages(message: Message, model: ResolvedModel): ChatRequestBody['messages'] {
  switch (message.role) {
    case 'user': {
      const content: readonly ContentBlock[] = message.content;
      const results = content.filter((b): b is ToolResultBlock => b.type === 'tool-result');
      if (results.length > 0) {
        return results.map((result) => ({
          role: 'tool' as const,
          tool_call_id: result.toolCallId,
          content: textOf(result.content),
        }));
      }
      return [{ role: 'user', content: textOf(message.content) }];
    }
    case 'assistant':
      return [toWireAssistant(message, model)];
    default:
      return assertNever(message, 'message role');
  }
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
