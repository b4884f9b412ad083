/**
 * Where the fake model's replies come from: a queue of scripted replies, else a matcher, else
 * an echo of the last user message (JSON of the requested shape for a structured output).
 */
import type { JsonValue } from '../../session/json.js';
import { wireContentText } from '../deepseek-tokens.js';
import type { FakeReply, FakeReplyMatcher, NormalizedReply } from './types.js';
import type { FakeChatBody } from './wire.js';

export class ReplyScript {
  private readonly queue: FakeReply[] = [];
  private matcher: FakeReplyMatcher | undefined;
  private toolCallCounter = 0;

  constructor(replies: FakeReply[], matcher: FakeReplyMatcher | undefined) {
    this.queue.push(...replies);
    this.matcher = matcher;
  }

  enqueue(replies: FakeReply[]): void {
    this.queue.push(...replies);
  }
  setMatcher(matcher: FakeReplyMatcher | undefined): void {
    this.matcher = matcher;
  }
  /** How many scripted replies wait. */
  get queued(): number {
    return this.queue.length;
  }
  /** Forgets the queue and the matcher, and numbers tool calls from 1 again. */
  reset(): void {
    this.queue.length = 0;
    this.matcher = undefined;
    this.toolCallCounter = 0;
  }

  /** The reply to `body`: the next scripted one, else the matcher's, else the echo. */
  next(body: FakeChatBody, headers: () => Record<string, string>, echoPrefix: string): NormalizedReply {
    const lastUserText = lastUserMessageText(body);
    const scripted = this.queue.shift() ?? this.matcher?.({ body, headers: headers(), lastUserText });
    return this.normalize(
      scripted ?? { text: structuredEcho(body.response_format, lastUserText) ?? `${echoPrefix}${lastUserText}` },
    );
  }

  /** A tool-call id the script did not give. */
  nextCallId(): string {
    return `call_fake_${++this.toolCallCounter}`;
  }

  private normalize(reply: FakeReply): NormalizedReply {
    const toolCalls = (reply.toolCalls ?? []).map((call) => ({
      id: call.id ?? this.nextCallId(),
      name: call.name,
      arguments: typeof call.arguments === 'string' ? call.arguments : JSON.stringify(call.arguments),
    }));
    return {
      reasoning: reply.reasoning ?? '',
      text: reply.text ?? '',
      toolCalls,
      finishReason: reply.finishReason ?? (toolCalls.length > 0 ? 'tool_calls' : 'stop'),
    };
  }
}

/** The text of the request's last user message ('' when it has none). */
export function lastUserMessageText(body: FakeChatBody): string {
  for (let i = body.messages.length - 1; i >= 0; i--) {
    const message = body.messages[i];
    if (message?.role === 'user') return wireContentText(message.content);
  }
  return '';
}

/**
 * The fake's answer to a structured output format: JSON that echoes the last user message
 * (`{"echo": …}` for any JSON object; for a JSON Schema, a value of that shape whose strings
 * are the message). Undefined for text replies.
 */
function structuredEcho(format: FakeChatBody['response_format'], text: string): string | undefined {
  if (format === undefined || format.type === 'text') return undefined;
  if (format.type === 'json_object') return JSON.stringify({ echo: text });
  return JSON.stringify(valueOfSchema(format.json_schema.schema ?? {}, text, 0));
}

/** A value of the JSON Schema `schema` whose strings are `text` (depth: how deep the recursion is). */
export function valueOfSchema(schema: unknown, text: string, depth: number): JsonValue {
  const s = (typeof schema === 'object' && schema !== null ? schema : {}) as Record<string, unknown>;
  if (Array.isArray(s.enum) && s.enum.length > 0) return s.enum[0] as JsonValue;
  if (s.const !== undefined) return s.const as JsonValue;
  const type = Array.isArray(s.type) ? s.type.find((t) => t !== 'null') : s.type;
  if (depth > 8) return null;
  switch (type) {
    case 'string':
      return text;
    case 'number':
    case 'integer':
      return 0;
    case 'boolean':
      return false;
    case 'array':
      return [valueOfSchema(s.items, text, depth + 1)];
    case 'null':
      return null;
    default: {
      const properties = (typeof s.properties === 'object' && s.properties !== null ? s.properties : {}) as Record<
        string,
        unknown
      >;
      return Object.fromEntries(
        Object.entries(properties).map(([key, value]) => [key, valueOfSchema(value, text, depth + 1)]),
      );
    }
  }
}
