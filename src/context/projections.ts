/**
 * Token projections (dsh-spec §7.3): pure folds of the log into what clients show about tokens.
 *
 * - `tokenUsage`: cumulative billed tokens in disjoint buckets.
 * - `contextPressure`: the latest prompt-side usage projected forward by the surface change since.
 * - `contextBreakdown`: system, tools and messages tokens of the request the session would send.
 *
 * State is O(1) in the log: the surface total is kept as a running sum, and replacements use
 * the shadow-price protocol — `compaction/summary` / `compaction/prune` carry the shadowed
 * nodes' price, which the immediately following replace of exactly that range subtracts.
 * Message prices come from a `ProjectionPricer`: the fixed §7.1 heuristic, or the token meter.
 */
import { z } from 'zod';
import { SessionlogError } from '../session/errors.js';
import type { StoredEvent, RequestHeader, SessionEvent } from '../session/events.js';
import type { JsonValue } from '../session/json.js';
import type { ContentBlock, Message, TokenUsage } from '../session/messages.js';
import type { ProjectionDefinition } from '../session/projection.js';
import { deriveEventMessage } from '../session/session.js';
import type { TokenMeter } from './meter-types.js';

// ---- pricers ------------------------------------------------------------------------------

/** How a projection prices messages and request headers. Must be deterministic. */
export type ProjectionPricer = {
  /** Names the price unit; stored in state, so a checkpoint priced in another unit is refolded. */
  id: string;
  /** A derived message's price for `model` (the latest header's model, if any). */
  message(message: Message, model: string | undefined): number;
  /** The system prompt's and the tool schemas' share of a request envelope. */
  header(header: RequestHeader): { systemTokens: number; toolsTokens: number };
};

const CHARS_PER_TOKEN = 4;
const BLOCK_OVERHEAD = 4;
const ROLE_OVERHEAD = 4;
const chars = (text: string): number => Math.ceil(text.length / CHARS_PER_TOKEN);

function heuristicBlock(block: ContentBlock): number {
  switch (block.type) {
    case 'text':
    case 'reasoning':
      return chars(block.text) + BLOCK_OVERHEAD;
    case 'tool-call':
      return chars(block.name) + chars(block.arguments) + BLOCK_OVERHEAD;
    case 'tool-result':
      return block.content.reduce((sum, inner) => sum + heuristicBlock(inner), 0) + BLOCK_OVERHEAD;
    default:
      // Blocks from a newer build (e.g. images) are priced by their JSON size.
      return BLOCK_OVERHEAD + chars(JSON.stringify(block));
  }
}

/** The fixed heuristic of dsh-spec §7.1 (4 characters per token plus block and role overhead). */
export const heuristicPricer: ProjectionPricer = {
  id: 'heuristic',
  message: (message) => message.content.reduce((sum, block) => sum + heuristicBlock(block), 0) + ROLE_OVERHEAD,
  header: (header) => ({
    systemTokens: header.system ? chars(header.system) + ROLE_OVERHEAD : 0,
    toolsTokens: header.tools && header.tools.length > 0 ? chars(JSON.stringify(header.tools)) + ROLE_OVERHEAD : 0,
  }),
};

/**
 * Prices with the token meter (the routed model's tokenizer). Messages are priced standalone:
 * the meter's in-context price can be 2 tokens lower where tool outputs share a bracket.
 * Before any `request/header`, messages are priced for `fallbackModel`. Prefer this pricer
 * where compaction and pruning run: their shadow prices (`shadowedTokenCount`) are meter node
 * prices, so a heuristic-priced running total drifts by the difference on every replacement.
 */
export function meterPricer(meter: TokenMeter, fallbackModel = 'fake'): ProjectionPricer {
  return {
    id: 'meter',
    message: (message, model) => meter.messageTokens(message, model ?? fallbackModel),
    header(header) {
      const { tools: _tools, ...withoutTools } = header;
      const systemTokens = meter.headerTokens(withoutTools);
      return { systemTokens, toolsTokens: meter.headerTokens(header) - systemTokens };
    },
  };
}

// ---- shared surface fold ------------------------------------------------------------------

/** A pending shadow price: the next event, if it replaces exactly `start..end`, subtracts `tokens`. */
type Claim = { start: number; end: number; tokens: number };

/** The part of a projection's state that tracks the surface total. */
type SurfaceTotal = { unit: string; model: string | null; surfaceTokens: number; claim: Claim | null };

const claimSchema = z.object({ start: z.number().int(), end: z.number().int(), tokens: z.number() }).strict().nullable();
const surfaceTotalShape = (unit: string) => ({
  unit: z.literal(unit),
  model: z.string().nullable(),
  surfaceTokens: z.number(),
  claim: claimSchema,
});

/**
 * Folds `event` into the surface total. Returns `state` itself when nothing changed. Throws
 * CORRUPT_LOG for a replace whose range differs from the pending claim.
 */
function foldSurfaceTotal<S extends SurfaceTotal>(state: S, event: StoredEvent, pricer: ProjectionPricer): S {
  if (event.type === 'compaction/summary' || event.type === 'compaction/prune') {
    const data = (event as SessionEvent<'compaction/summary' | 'compaction/prune'>).data;
    return { ...state, claim: { start: data.shadowedRange.start, end: data.shadowedRange.end, tokens: data.shadowedTokenCount } };
  }
  if (event.type === 'request/header') {
    const model = (event as SessionEvent<'request/header'>).data.header.model;
    return { ...state, model, claim: null };
  }
  const op = event.surfaceOp;
  if (op === undefined) return state.claim === null ? state : { ...state, claim: null };
  const message = deriveEventMessage(event);
  const price = message === null ? 0 : pricer.message(message, state.model ?? undefined);
  if (op === 'append') return { ...state, surfaceTokens: state.surfaceTokens + price, claim: null };
  const claim = state.claim;
  if (claim === null) {
    // A replace without a claim carries no shadowed price: fold with delta 0 (dsh-spec §7.3).
    return state;
  }
  if (claim.start !== op.start || claim.end !== op.end) {
    throw new SessionlogError('CORRUPT_LOG', `replace of ${op.start}..${op.end} at seq ${event.seq} follows a shadow price for ${claim.start}..${claim.end}; the log is inconsistent`);
  }
  return { ...state, surfaceTokens: Math.max(0, state.surfaceTokens + price - claim.tokens), claim: null };
}

// ---- tokenUsage ---------------------------------------------------------------------------

export type UsageBuckets = { uncachedInputTokens: number; outputTokens: number; cacheReadTokens: number; cacheWriteTokens: number };
export type TokenUsageState = UsageBuckets & {
  /** The latest sample, so a repeat for the same key replaces it instead of adding. */
  last: { key: string; usage: UsageBuckets } | null;
};

const bucketsShape = {
  uncachedInputTokens: z.number(),
  outputTokens: z.number(),
  cacheReadTokens: z.number(),
  cacheWriteTokens: z.number(),
};

function bucketsOf(usage: TokenUsage): UsageBuckets {
  return {
    uncachedInputTokens: usage.inputTokens,
    outputTokens: usage.outputTokens,
    cacheReadTokens: usage.cacheReadTokens ?? 0,
    cacheWriteTokens: usage.cacheWriteTokens ?? 0,
  };
}

function usageSample(event: StoredEvent): { key: string; usage: TokenUsage } | undefined {
  if (event.type === 'assistant/message') {
    const data = (event as SessionEvent<'assistant/message'>).data;
    return data.usage ? { key: `step:${data.turn}:${data.step}`, usage: data.usage } : undefined;
  }
  if (event.type === 'compaction/summary') {
    const data = (event as SessionEvent<'compaction/summary'>).data;
    return data.usage ? { key: `compaction:${data.compactionId}`, usage: data.usage } : undefined;
  }
  return undefined;
}

/**
 * Cumulative billed tokens in disjoint buckets, from `assistant/message.usage` and the
 * summarizer's `compaction/summary.usage`. A repeat sample for the same (turn, step) replaces
 * the earlier one rather than adding to it.
 */
export const tokenUsageProjection: ProjectionDefinition<TokenUsageState & JsonValue, UsageBuckets> = {
  key: 'tokenUsage',
  stateVersion: 1,
  stateSchema: z
    .object({
      ...bucketsShape,
      last: z.object({ key: z.string(), usage: z.object(bucketsShape).strict() }).strict().nullable(),
    })
    .strict() as unknown as z.ZodType<TokenUsageState & JsonValue>,
  init: () => ({ uncachedInputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0, last: null }) as TokenUsageState & JsonValue,
  apply(state, event) {
    const sample = usageSample(event);
    if (!sample) return state;
    const usage = bucketsOf(sample.usage);
    const previous = state.last !== null && state.last.key === sample.key ? state.last.usage : undefined;
    const add = (k: keyof UsageBuckets): number => state[k] + usage[k] - (previous ? previous[k] : 0);
    return {
      uncachedInputTokens: add('uncachedInputTokens'),
      outputTokens: add('outputTokens'),
      cacheReadTokens: add('cacheReadTokens'),
      cacheWriteTokens: add('cacheWriteTokens'),
      last: { key: sample.key, usage },
    } as TokenUsageState & JsonValue;
  },
  view: ({ uncachedInputTokens, outputTokens, cacheReadTokens, cacheWriteTokens }) =>
    ({ uncachedInputTokens, outputTokens, cacheReadTokens, cacheWriteTokens }),
};

// ---- contextPressure ----------------------------------------------------------------------

export type ContextPressureState = SurfaceTotal & {
  /** Prompt-side tokens (input + cache read + cache write) of the latest reply with usage. */
  pressureTokens: number | null;
  /** The surface total that prompt was sent with (the surface before the reply). */
  surfaceAtSample: number | null;
  /** `max(0, pressureTokens + surfaceTokens − surfaceAtSample)`. */
  projectedTokens: number | null;
  /** The routed model's window, when known. */
  contextWindow: number | null;
};

export type ContextPressureView = { pressureTokens: number | null; projectedTokens: number | null; contextWindow: number | null };

export type ContextPressureOptions = {
  pricer: ProjectionPricer;
  /** The context window of a model name, or undefined when unknown (e.g. from the model catalogue). */
  contextWindowOf: (model: string) => number | undefined;
};

/** `contextPressure`: how full the context is by the provider's latest count, projected to now. */
export function createContextPressureProjection(options: ContextPressureOptions): ProjectionDefinition<ContextPressureState & JsonValue, ContextPressureView> {
  const { pricer, contextWindowOf } = options;
  const project = (s: ContextPressureState): number | null =>
    s.pressureTokens === null || s.surfaceAtSample === null ? null : Math.max(0, s.pressureTokens + s.surfaceTokens - s.surfaceAtSample);
  return {
    key: 'contextPressure',
    stateVersion: 1,
    stateSchema: z
      .object({
        ...surfaceTotalShape(pricer.id),
        pressureTokens: z.number().nullable(),
        surfaceAtSample: z.number().nullable(),
        projectedTokens: z.number().nullable(),
        contextWindow: z.number().nullable(),
      })
      .strict() as unknown as z.ZodType<ContextPressureState & JsonValue>,
    init: () =>
      ({ unit: pricer.id, model: null, surfaceTokens: 0, claim: null, pressureTokens: null, surfaceAtSample: null, projectedTokens: null, contextWindow: null }) as ContextPressureState & JsonValue,
    apply(state, event) {
      let next: ContextPressureState = state;
      if (event.type === 'assistant/message') {
        const usage = (event as SessionEvent<'assistant/message'>).data.usage;
        if (usage) {
          const pressureTokens = usage.inputTokens + (usage.cacheReadTokens ?? 0) + (usage.cacheWriteTokens ?? 0);
          next = { ...next, pressureTokens, surfaceAtSample: next.surfaceTokens };
        }
      }
      next = foldSurfaceTotal(next, event, pricer);
      if (event.type === 'request/header') next = { ...next, contextWindow: contextWindowOf((event as SessionEvent<'request/header'>).data.header.model) ?? null };
      if (next === state) return state;
      return { ...next, projectedTokens: project(next) } as ContextPressureState & JsonValue;
    },
    view: ({ pressureTokens, projectedTokens, contextWindow }) => ({ pressureTokens, projectedTokens, contextWindow }),
  };
}

// ---- contextBreakdown ---------------------------------------------------------------------

export type ContextBreakdownState = SurfaceTotal & { systemTokens: number; toolsTokens: number };
export type ContextBreakdownView = { systemTokens: number; toolsTokens: number; messageTokens: number; totalTokens: number };

/** `contextBreakdown`: the latest header's system and tools tokens beside the running message total. */
export function createContextBreakdownProjection(options: { pricer: ProjectionPricer }): ProjectionDefinition<ContextBreakdownState & JsonValue, ContextBreakdownView> {
  const { pricer } = options;
  return {
    key: 'contextBreakdown',
    stateVersion: 1,
    stateSchema: z
      .object({ ...surfaceTotalShape(pricer.id), systemTokens: z.number(), toolsTokens: z.number() })
      .strict() as unknown as z.ZodType<ContextBreakdownState & JsonValue>,
    init: () => ({ unit: pricer.id, model: null, surfaceTokens: 0, claim: null, systemTokens: 0, toolsTokens: 0 }) as ContextBreakdownState & JsonValue,
    apply(state, event) {
      let next: ContextBreakdownState = foldSurfaceTotal(state, event, pricer);
      if (event.type === 'request/header') next = { ...next, ...pricer.header((event as SessionEvent<'request/header'>).data.header) };
      return next as ContextBreakdownState & JsonValue;
    },
    view: (s) => ({ systemTokens: s.systemTokens, toolsTokens: s.toolsTokens, messageTokens: s.surfaceTokens, totalTokens: s.systemTokens + s.toolsTokens + s.surfaceTokens }),
  };
}
