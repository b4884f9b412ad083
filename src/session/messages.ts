/**
 * Provider-independent messages and content blocks (dsh-spec §3.1). Messages are what the
 * model sees; they are stored verbatim inside surface events and derived from the log.
 */
import type { JsonValue } from './json.js';

/** Text in a message. */
export type TextBlock = { type: 'text'; text: string };
/** The model's reasoning, as a provider returns it (DeepSeek thinking mode). */
export type ReasoningBlock = { type: 'reasoning'; text: string };
/**
 * A tool call in an assistant message: the call's id, the tool's name and its arguments as the
 * model wrote them (JSON text).
 */
export type ToolCallBlock = { type: 'tool-call'; id: string; name: string; arguments: string };
/**
 * The result of a tool call, naming the call it answers; `isError` when the tool failed or the call
 * was refused.
 */
export type ToolResultBlock = {
  type: 'tool-result';
  toolCallId: string;
  content: ContentBlock[];
  isError?: true;
};
/**
 * Media stored once in the session's artifact store (DESIGN §3), content-addressed: the block holds
 * the reference, never the bytes. `locator` is an artifact locator of the session itself
 * (`artifact:<sessionId>/media-<sha256>.<ext>`); `sha256` is the lowercase hex digest of the bytes.
 */
export type StoredMedia = {
  kind: 'artifact';
  locator: string;
  mediaType: MediaType;
  bytes: number;
  sha256: string;
  /** Pixel size, for images (read from the image's own header when it was stored). */
  width?: number;
  height?: number;
};
/** An image kept as the caller's `http(s)` URL: passed to the provider, never fetched by the worker. */
export type RemoteMedia = { kind: 'url'; url: string };
/** The media types sessionlog stores: images the providers take, PDF and plain text. */
export type ImageMediaType = 'image/png' | 'image/jpeg' | 'image/gif' | 'image/webp';
export type FileMediaType = 'application/pdf' | 'text/plain';
/** A media type sessionlog stores: an image's or a file's. */
export type MediaType = ImageMediaType | FileMediaType;
/** An image in a user message or a tool result. `detail` is the caller's OpenAI detail level, when given. */
export type ImageBlock = { type: 'image'; source: StoredMedia | RemoteMedia; detail?: 'auto' | 'low' | 'high' };
/** A file (PDF or plain text) in a user message or a tool result, with the caller's file name when given. */
export type FileBlock = { type: 'file'; source: StoredMedia; filename?: string };
/** Media of a message: an image or a file. */
export type MediaBlock = ImageBlock | FileBlock;
/** A block of a message's content: text, reasoning, a tool call, a tool result, an image or a file. */
export type ContentBlock = TextBlock | ReasoningBlock | ToolCallBlock | ToolResultBlock | ImageBlock | FileBlock;

export type UserSource =
  { kind: 'user' } | { kind: 'plugin'; plugin: string; compactionId?: string; sourceCommandId?: string };
export type ModelSource = { kind: 'model'; provider: string; model: string; replayState?: JsonValue };
/** An assistant message the caller supplied (a replayed or migrated transcript), never the model's own reply. */
export type CallerSource = { kind: 'caller' };
export type ToolSource = { kind: 'tool'; callId: string };

/** A message of the user (or of a plugin speaking as the user), as the derived history carries it. */
export type UserMessage = { id: string; role: 'user'; content: ContentBlock[]; source: UserSource };
/**
 * A reply of the model (or caller-supplied assistant history), with the model that wrote it and the
 * reply's usage.
 */
export type AssistantMessage = {
  id: string;
  role: 'assistant';
  content: ContentBlock[];
  source: ModelSource | CallerSource;
};
/**
 * A tool result as the derived history carries it: one result block, sent to the model in the user
 * role.
 */
export type ToolResultMessage = { id: string; role: 'user'; content: [ToolResultBlock]; source: ToolSource };
/**
 * A message of the derived history, the messages a model request carries: user, assistant or tool
 * result.
 */
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

/** The text of a message's blocks, joined (reasoning, tool calls and results left out). */
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
