/**
 * The token meter's contract (DESIGN §6, dsh-spec §7). The meter measures the request a
 * session would send now — system prompt, tool schemas and derived messages — in the routed
 * model's own tokens. Compaction, pruning and the pressure policy depend only on this.
 */
import type { Message, RequestHeader, SessionView } from '../session/index.js';

/** One surface node's price: the tokens its derived message costs in a request (0 when it derives none). */
export type NodePrice = { seq: number; tokens: number };

export type TokenMeasurement = {
  /** Events consumed (= the session's next seq when measured). */
  logRevision: number;
  /** System prompt + tool schemas + fixed per-request template overhead. */
  headerTokens: number;
  /** Sum of node prices. */
  surfaceTokens: number;
  /** The best estimate of the whole request's prompt tokens. */
  totalTokens: number;
  /** 'usage' when anchored on provider-reported usage for an unchanged envelope, else 'estimated'. */
  baseline: 'usage' | 'estimated';
  /** Prices in surface order; `nodes[i].seq === session.surface.nodes[i]`. */
  nodes: readonly NodePrice[];
};

export interface TokenMeter {
  /** Tokens one message costs in a request to `model` (content plus its chat-template overhead). */
  messageTokens(message: Message, model: string): number;
  /** Tokens of the request envelope for `header` (system, tools, fixed overhead). */
  headerTokens(header: RequestHeader): number;
  /**
   * Measures the request `session` would send with `header`. Incremental: node prices are
   * cached per session and per model, so a measurement after an append costs O(new content).
   * The result is a frozen snapshot.
   */
  measure(session: SessionView, header: RequestHeader): TokenMeasurement;
}
