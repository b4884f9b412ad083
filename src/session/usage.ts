/**
 * The cost ledger (issue 26), read from the log: every model reply (`assistant/message`) and
 * every compaction summary (`compaction/summary`) logs the provider's token usage and its cost
 * in USD at the prices the worker had for that model when it answered (`cost`). The ledger sums
 * them per turn, per model and in total; a call logged without a cost (a model with no prices
 * in the catalogue, or a log from before costs were logged) counts its tokens and is counted in
 * `unpricedCalls`.
 */
import type { StoredEvent } from './events.js';
import { isKnownEvent } from './events.js';
import type { TokenUsage } from './messages.js';

/** USD per million tokens: uncached input, cached input (cache reads), output. */
export type TokenPrices = { input: number; cachedInput: number; output: number };

/** What a reply of `usage` costs at `prices`, in USD. A cache write is billed as uncached input. */
export function costOf(usage: TokenUsage, prices: TokenPrices): number {
  const cached = usage.cacheReadTokens ?? 0;
  const written = usage.cacheWriteTokens ?? 0;
  return (
    ((usage.inputTokens + written) * prices.input + cached * prices.cachedInput + usage.outputTokens * prices.output) /
    1_000_000
  );
}

/** Token and cost totals of some model calls. */
export type UsageTotals = {
  calls: number;
  inputTokens: number;
  cachedInputTokens: number;
  cacheWriteTokens: number;
  outputTokens: number;
  reasoningTokens: number;
  costUsd: number;
  /** Calls logged without a cost (no prices known): their tokens are counted, their cost is not. */
  unpricedCalls: number;
};

/** One turn's usage (`turn` null: compactions run between turns), with its calls by purpose. */
export type TurnUsage = UsageTotals & { turn: number | null; replies: number; compactions: number };

export type UsageLedger = {
  total: UsageTotals;
  byModel: Record<string, UsageTotals>;
  byTurn: TurnUsage[];
};

export function emptyTotals(): UsageTotals {
  return {
    calls: 0,
    inputTokens: 0,
    cachedInputTokens: 0,
    cacheWriteTokens: 0,
    outputTokens: 0,
    reasoningTokens: 0,
    costUsd: 0,
    unpricedCalls: 0,
  };
}

function add(totals: UsageTotals, usage: TokenUsage | undefined, cost: number | undefined): void {
  totals.calls += 1;
  totals.inputTokens += usage?.inputTokens ?? 0;
  totals.cachedInputTokens += usage?.cacheReadTokens ?? 0;
  totals.cacheWriteTokens += usage?.cacheWriteTokens ?? 0;
  totals.outputTokens += usage?.outputTokens ?? 0;
  totals.reasoningTokens += usage?.reasoningTokens ?? 0;
  if (cost === undefined) totals.unpricedCalls += 1;
  else totals.costUsd += cost;
}

/** Adds `more` into `into` (for sums across sessions). */
export function addTotals(into: UsageTotals, more: UsageTotals): void {
  for (const key of Object.keys(into) as Array<keyof UsageTotals>) into[key] += more[key];
}

/**
 * The ledger of `events` (a whole log), counting only calls logged at `from <= time < to`
 * (epoch ms) when given.
 */
export function foldUsage(events: readonly StoredEvent[], window: { from?: number; to?: number } = {}): UsageLedger {
  const total = emptyTotals();
  const byModel: Record<string, UsageTotals> = {};
  const byTurn = new Map<number | null, TurnUsage>();
  const compactionTurn = new Map<string, number | null>();
  const inWindow = (time: number) =>
    (window.from === undefined || time >= window.from) && (window.to === undefined || time < window.to);
  const count = (
    turn: number | null,
    model: string,
    usage: TokenUsage | undefined,
    cost: number | undefined,
    reply: boolean,
  ) => {
    add(total, usage, cost);
    add((byModel[model] ??= emptyTotals()), usage, cost);
    let entry = byTurn.get(turn);
    if (!entry) byTurn.set(turn, (entry = { turn, replies: 0, compactions: 0, ...emptyTotals() }));
    add(entry, usage, cost);
    if (reply) entry.replies += 1;
    else entry.compactions += 1;
  };
  for (const event of events) {
    if (!isKnownEvent(event)) continue;
    switch (event.type) {
      case 'compaction/start':
        compactionTurn.set(event.data.compactionId, event.data.turn);
        break;
      case 'assistant/message': {
        const { message, usage, cost, hides } = event.data;
        // A caller's message or a hiding replacement was no model call.
        if (hides || message.source.kind !== 'model' || !inWindow(event.time)) break;
        count(event.data.turn, message.source.model, usage, cost, true);
        break;
      }
      case 'compaction/summary': {
        if (!inWindow(event.time)) break;
        const { compactionId, model, usage, cost } = event.data;
        count(compactionTurn.get(compactionId) ?? null, model, usage, cost, false);
        break;
      }
      default:
        break;
    }
  }
  return {
    total,
    byModel,
    byTurn: [...byTurn.values()].sort((a, b) => (a.turn ?? 0) - (b.turn ?? 0)),
  };
}
