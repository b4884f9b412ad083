/**
 * What context management runs on (DESIGN §6): the meter, the policy, the pruner and the routed
 * model's window, the log port it appends through, and the limits of one request derived from
 * them. The pressure ladder (pressure.ts) and the compaction transaction (compactor.ts) share it.
 */
import type { NewEvent, SessionView, StoredEvent, TokenUsage } from '../session/index.js';
import { resolveContextPolicy, type ContextPolicy } from './compaction.js';
import type { TokenMeasurement, TokenMeter } from './meter-types.js';
import { resolvePrunerConfig, type PrunerConfig } from './pruner.js';

/** Context management as the engine uses it: meter, policy, pruner and the routed model's window. */
export type ContextDeps = {
  meter: TokenMeter;
  policy: ContextPolicy;
  /** Omit to disable pruning. */
  pruner?: PrunerConfig;
  /** The routed model's context window (from the model catalogue). */
  contextWindow(model: string): number;
  /** Called with the pre-call measurement and the provider's usage of each reply (calibration). */
  onUsage?(sample: { model: string; measurement: TokenMeasurement; usage: TokenUsage }): void;
};

/** The session's log as context management sees it: the validated view and an append keyed by a suffix. */
export type LogPort = {
  readonly session: SessionView;
  /** Appends one batch under the op key the caller makes from `suffix`; returns the stored events. */
  append(events: readonly NewEvent[], suffix: string): Promise<StoredEvent[]>;
};

/** Where a request stands against its limits, in tokens. */
export type ContextLimits = { contextWindow: number; budget: number; threshold: number; retain: number };

export function resolveContextDeps(input: {
  meter: TokenMeter;
  contextWindow(model: string): number;
  policy?: Partial<ContextPolicy>;
  pruner?: Partial<PrunerConfig> | false;
  onUsage?: ContextDeps['onUsage'];
}): ContextDeps {
  return {
    meter: input.meter,
    contextWindow: input.contextWindow,
    ...(input.onUsage ? { onUsage: input.onUsage } : {}),
    policy: resolveContextPolicy(input.policy),
    ...(input.pruner === false ? {} : { pruner: resolvePrunerConfig(input.pruner ?? {}) }),
  };
}

/**
 * The budget of a request to `model`: the policy's budget capped by the window (and by a
 * window learned from the provider, when one is given), with the compaction threshold and the
 * verbatim tail to retain.
 */
export function contextLimits(context: ContextDeps, model: string, learnedWindow?: number): ContextLimits {
  const contextWindow = Math.min(context.contextWindow(model), learnedWindow ?? Number.POSITIVE_INFINITY);
  const budget = Math.min(context.policy.budgetTokens ?? contextWindow, contextWindow);
  return {
    contextWindow,
    budget,
    threshold: Math.floor(budget * context.policy.thresholdRatio),
    retain: Math.floor(budget * context.policy.retainRatio),
  };
}

/** A node's current price by seq, from a measurement. */
export function priceOf(measurement: TokenMeasurement): (seq: number) => number {
  const prices = new Map(measurement.nodes.map((n) => [n.seq, n.tokens]));
  return (seq) => prices.get(seq) ?? 0;
}
