/**
 * What a session's next request costs, by kind (the context breakdown users see with
 * `sessions context` and `GET /v1/sessions/:id/context`). Computed by src/context/report.ts
 * with the routed model's tokenizer; the type lives here so every layer can carry it.
 */

/** How a derived message counts in the breakdown. */
export type ContextMessageKind = 'user' | 'assistant' | 'tool-result' | 'summary';

/**
 * What the session's next model request costs, by kind (system, tools, user, assistant, tool
 * results, summaries) and per message, against the budget and the window, and where compaction
 * would run (`GET /v1/sessions/:id/context`).
 */
export type ContextReport = {
  sessionId: string;
  /** The log head the report was measured at (the last seq, -1 for an empty log). */
  asOfSeq: number;
  /** The model the request goes to (the session's latest request header, else its agent's). */
  model: string;
  /** Tokens of the request the session would send now, by kind; `total` may be anchored on provider usage. */
  tokens: {
    system: number;
    tools: number;
    user: number;
    assistant: number;
    toolResults: number;
    summaries: number;
    total: number;
  };
  /** 'usage' when the total is anchored on provider-reported usage, else 'estimated'. */
  baseline: 'usage' | 'estimated';
  /** The token budget pressure handling works against (≤ the window). */
  budget: number;
  contextWindow: number;
  /** Compaction runs before a request once `tokens.total` reaches this (the next compaction point). */
  compactAt: number;
  /** The derived messages the next request carries, in order, with each one's price. */
  messages: Array<{ seq: number; kind: ContextMessageKind; tokens: number }>;
};
