/**
 * What the activities need from the model layer. The OpenAI-compatible adapter in src/model
 * implements it; tests use the same adapter against the fake model server.
 */
import type { ContentBlock, Message, RequestHeader, StreamChunk, TokenUsage } from '../session/index.js';

export type ModelCallResult = {
  content: ContentBlock[];
  /** 'stop' | 'tool_calls' | 'length' | 'content_filter' | provider-specific. */
  finishReason: string;
  usage?: TokenUsage;
  provider: string;
  model: string;
};

export type ModelCallRequest = {
  messages: readonly Message[];
  header: RequestHeader;
  signal: AbortSignal;
  onChunk(chunk: StreamChunk): void;
};

/** A classified model failure. `retryable` decides between a Temporal retry and a logged turn error. */
export type ModelFailure = {
  code: string;
  message: string;
  retryable: boolean;
  status?: number;
  retryAfterMs?: number;
};

export interface ModelPort {
  /** Streams one completion. Rejects with an error that `classify` understands. */
  stream(request: ModelCallRequest): Promise<ModelCallResult>;
  classify(error: unknown): ModelFailure;
  /** The provider name logged in request headers and message sources. */
  readonly provider: string;
}
