/** The fake model's vocabulary: its scripted replies, faults, runtime config and recorded requests. */
import type { JsonValue } from '../../session/json.js';
import type { FakeChatBody } from './wire.js';

export type FakeToolCall = { id?: string; name: string; arguments: string | JsonValue };

/** One scripted reply. Empty fields are left out of the reply. */
export type FakeReply = {
  text?: string;
  /** Sent as DeepSeek `reasoning_content`. */
  reasoning?: string;
  toolCalls?: FakeToolCall[];
  /** Default: `tool_calls` when there are tool calls, else `stop`. */
  finishReason?: 'stop' | 'length' | 'tool_calls' | 'content_filter';
};

/** A chat request as the matcher sees it. */
export type FakeChatRequest = { body: FakeChatBody; headers: Record<string, string>; lastUserText: string };

/** Returns a reply for a request, or undefined to fall through to the echo reply. */
export type FakeReplyMatcher = (request: FakeChatRequest) => FakeReply | undefined;

/** A fault applied to the next `times` chat requests (default 1). */
export type FakeFault =
  | { kind: 'rate_limit'; retryAfterSeconds?: number; times?: number }
  | { kind: 'server_error'; status?: number; times?: number }
  | { kind: 'hang'; times?: number }
  | { kind: 'drop_stream'; afterChunks?: number; times?: number }
  | { kind: 'malformed_tool_json'; times?: number }
  /** A 401 whose message quotes the API key the request carried, as several providers do. */
  | { kind: 'auth_echo'; times?: number };

/** Runtime-adjustable behaviour. */
export type FakeModelConfig = {
  /** Delay before the first streamed chunk (or the whole non-streamed reply), ms. */
  firstTokenDelayMs: number;
  /** Delay between streamed chunks, ms. */
  tokenDelayMs: number;
  /** Prompts with more tokens than this get a context-overflow 400; null: no limit. */
  contextLimitTokens: number | null;
  /** The model id listed by `/v1/models`. */
  model: string;
  /** Prefix of the default echo reply. */
  echoPrefix: string;
  /** When set, chat requests must carry `Authorization: Bearer <apiKey>` (else 401). */
  apiKey: string | null;
  /**
   * Enforce a provider's limits as a token bucket per dimension (capacity: `burstMs` worth of
   * the rate, default 1 s; refilled continuously): a request over them gets a 429 with
   * `retry-after`. Every chat response states the limits in `x-ratelimit-limit-requests` /
   * `x-ratelimit-limit-tokens` (as OpenAI does) unless `stateLimits` is false. Null: no limits.
   */
  rateLimit: { requestsPerMinute: number; tokensPerMinute?: number; burstMs?: number; stateLimits?: boolean } | null;
};

/** A request the server received. `status` is filled in when the response starts. */
export type RecordedRequest = {
  method: string;
  path: string;
  /** Parsed JSON body, or the raw text when it was not JSON, or undefined when empty. */
  body: unknown;
  headers: Record<string, string>;
  time: number;
  status?: number;
};

export const DEFAULT_FAKE_MODEL_CONFIG: FakeModelConfig = {
  firstTokenDelayMs: 0,
  tokenDelayMs: 0,
  contextLimitTokens: null,
  model: 'fake',
  echoPrefix: 'echo: ',
  apiKey: null,
  rateLimit: null,
};

/** A reply as it is sent: every field present, tool calls with ids and their arguments as text. */
export type NormalizedReply = {
  reasoning: string;
  text: string;
  toolCalls: { id: string; name: string; arguments: string }[];
  finishReason: string;
};
