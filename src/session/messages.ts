/**
 * Provider-independent messages and content blocks (dsh-spec §3.1). Messages are what the
 * model sees; they are stored verbatim inside surface events and derived from the log.
 */
import type { JsonValue } from './json.js';

export type TextBlock = { type: 'text'; text: string };
export type ReasoningBlock = { type: 'reasoning'; text: string };
export type ToolCallBlock = { type: 'tool-call'; id: string; name: string; arguments: string };
export type ToolResultBlock = {
  type: 'tool-result';
  toolCallId: string;
  content: ContentBlock[];
  isError?: true;
};
export type ContentBlock = TextBlock | ReasoningBlock | ToolCallBlock | ToolResultBlock;

export type UserSource =
  { kind: 'user' } | { kind: 'plugin'; plugin: string; compactionId?: string; sourceCommandId?: string };
export type ModelSource = { kind: 'model'; provider: string; model: string; replayState?: JsonValue };
/** An assistant message the caller supplied (a replayed or migrated transcript), never the model's own reply. */
export type CallerSource = { kind: 'caller' };
export type ToolSource = { kind: 'tool'; callId: string };

export type UserMessage = { id: string; role: 'user'; content: ContentBlock[]; source: UserSource };
export type AssistantMessage = {
  id: string;
  role: 'assistant';
  content: ContentBlock[];
  source: ModelSource | CallerSource;
};
export type ToolResultMessage = { id: string; role: 'user'; content: [ToolResultBlock]; source: ToolSource };
export type Message = UserMessage | AssistantMessage | ToolResultMessage;

/** Disjoint token buckets reported by a provider. `reasoningTokens` is a subset of output. */
export type TokenUsage = {
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens?: number;
  cacheWriteTokens?: number;
  reasoningTokens?: number;
};

/** A streamed piece of an assistant reply, as logged in `assistant/chunk` (coalesced). */
export type StreamChunk =
  | { kind: 'text-delta'; text: string }
  | { kind: 'reasoning-delta'; text: string }
  | { kind: 'tool-call-delta'; index: number; id?: string; name?: string; argumentsDelta: string };

export function textOf(blocks: readonly ContentBlock[]): string {
  let out = '';
  for (const block of blocks) if (block.type === 'text') out += block.text;
  return out;
}

export function toolCallsOf(message: AssistantMessage): ToolCallBlock[] {
  return message.content.filter((b): b is ToolCallBlock => b.type === 'tool-call');
}

export function assertNever(value: never, what = 'value'): never {
  throw new Error(`unexpected ${what}: ${JSON.stringify(value)}`);
}
