/**
 * Context management under Temporal (DESIGN §6): the pressure check run before each model
 * call (prune, remeasure, ask the workflow for compaction) and the compaction activity. The
 * compaction id comes from the workflow, so a retried activity resumes its own bracket and a
 * summary already logged is never requested again.
 */
import { ApplicationFailure, Context } from '@temporalio/activity';
import {
  bracketState,
  liveBracket,
  planCommit,
  resolveContextPolicy,
  summarizerMessages,
  summaryBlocks,
  type CompactionTrigger,
  type ContextPolicy,
} from '../context/compaction.js';
import type { TokenMeasurement, TokenMeter } from '../context/meter-types.js';
import { planPrune, resolvePrunerConfig, type PrunerConfig } from '../context/pruner.js';
import { halveCompactableRange, selectCompactableRange } from '../context/range.js';
import { SessionlogError, isSessionlogError, latestRequestHeader, type ContentBlock, type RequestHeader, type Session, type TokenUsage } from '../session/index.js';
import type { CompactResult } from '../workflows/api.js';
import type { ModelCallResult, ModelPort } from './ports.js';
import { appendBatch, assertOwnTail, type SessionCache } from './session-writer.js';
import type { SessionStore } from '../persistence/store.js';

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

export type PressureReport = { tokens: number; contextWindow: number; budget: number; threshold: number };

export type CompactInput = {
  sessionId: string;
  runId: string;
  compactionId: string;
  trigger: CompactionTrigger;
  /** The open turn that owns the bracket; null for a manual compaction between turns. */
  turn: number | null;
  knownHead: number;
  /** The activity's retry budget (the workflow's maximumAttempts): the last attempt closes the bracket with an error instead of throwing. */
  maxAttempts: number;
};

/** Closes a bracket whose activity gave up (timeout, crash on its last attempt): no lock may outlive it. */
export type AbandonCompactionInput = { sessionId: string; runId: string; compactionId: string; turn: number | null; knownHead: number; error: string };

export type CompactActivityResult = { headSeq: number; result: CompactResult | null; error?: string };

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

function limits(context: ContextDeps, model: string): PressureReport & { retain: number } {
  const contextWindow = context.contextWindow(model);
  const budget = Math.min(context.policy.budgetTokens ?? contextWindow, contextWindow);
  return {
    tokens: 0,
    contextWindow,
    budget,
    threshold: Math.floor(budget * context.policy.thresholdRatio),
    retain: Math.floor(budget * context.policy.retainRatio),
  };
}

function priceOf(measurement: TokenMeasurement): (seq: number) => number {
  const prices = new Map(measurement.nodes.map((n) => [n.seq, n.tokens]));
  return (seq) => prices.get(seq) ?? 0;
}

/**
 * Pressure policy before a model call: when the request reaches the threshold, prune old
 * tool results and remeasure; report whether compaction is still needed.
 */
export async function relievePressure(input: {
  store: SessionStore;
  session: Session;
  context: ContextDeps;
  header: RequestHeader;
  op: string;
  runId: string;
  time: number;
}): Promise<PressureReport & { needsCompaction: boolean; measurement: TokenMeasurement }> {
  const { context, session, header } = input;
  const lim = limits(context, header.model);
  let measurement = context.meter.measure(session, header);
  if (measurement.totalTokens >= lim.threshold && context.pruner) {
    const events = planPrune(session, context.pruner, priceOf(measurement), input.time);
    if (events.length > 0) {
      await appendBatch(input.store, session, events, input.op, input.runId);
      measurement = context.meter.measure(session, header);
    }
  }
  return { ...lim, tokens: measurement.totalTokens, needsCompaction: measurement.totalTokens >= lim.threshold, measurement };
}

function flattenError(error: unknown): string {
  const parts: string[] = [];
  let current: unknown = error;
  while (current instanceof Error && parts.length < 5) {
    parts.push(current.message);
    current = current.cause;
  }
  return parts.join(': ') || String(error);
}

/** The compaction activity (one bracket per compaction id). */
export function createCompactionActivity(deps: { store: SessionStore; model: ModelPort; context: ContextDeps; cache: SessionCache; now: () => number }) {
  return async function compact(input: CompactInput): Promise<CompactActivityResult> {
    const ctx = Context.current();
    try {
      return await deps.cache.with(input.sessionId, async (session) => {
        assertOwnTail(session, input.knownHead, input.runId);
        const op = (suffix: string) => `${input.runId}/${input.compactionId}/${suffix}`;
        let state = bracketState(session.events, input.compactionId, input.knownHead);
        const finish = async (error?: string): Promise<CompactActivityResult> => {
          if (state.endSeq === undefined) {
            await appendBatch(
              deps.store,
              session,
              [{ type: 'compaction/end', time: deps.now(), data: { compactionId: input.compactionId, turn: input.turn, ...(error !== undefined ? { error } : {}) } }],
              op('end'),
              input.runId,
            );
            state = bracketState(session.events, input.compactionId, input.knownHead);
          }
          const err = error ?? state.error;
          if (err !== undefined || state.shadowedSeqs === undefined) return { headSeq: session.nextSeq, result: null, ...(err !== undefined ? { error: err } : {}) };
          const header = latestRequestHeader(session);
          const tokensAfter = header ? deps.context.meter.measure(session, header).totalTokens : 0;
          return {
            headSeq: session.nextSeq,
            result: {
              compactionId: input.compactionId,
              shadowedSeqs: state.shadowedSeqs,
              tokensBefore: tokensAfter + state.shadowedTokenCount! - checkpointPrice(session, state.replacementSeq),
              tokensAfter,
            },
          };
        };
        // A retried activity: the bracket is finished, or its summary is logged and only the end is missing.
        if (state.endSeq !== undefined || state.summarySeq !== undefined) return finish();

        const header = latestRequestHeader(session);
        if (!header) return { headSeq: session.nextSeq, result: null };
        if (state.startSeq === undefined) {
          const live = liveBracket(session.events);
          if (live) throw new SessionlogError('INVALID_ARGUMENT', `compaction ${live.compactionId} opened at seq ${live.seq} is still running`);
          if (input.trigger === 'context-overflow' && deps.context.pruner) {
            // Overflow recovery prunes first (dsh-spec §4.8); the summary then covers what is left.
            const events = planPrune(session, deps.context.pruner, priceOf(deps.context.meter.measure(session, header)), deps.now());
            if (events.length > 0) await appendBatch(deps.store, session, events, op('prune'), input.runId);
          }
          const plan = selectRange(session, header, deps.context, input.trigger);
          if (!plan) return { headSeq: session.nextSeq, result: null };
          await appendBatch(
            deps.store,
            session,
            [{ type: 'compaction/start', time: deps.now(), data: { compactionId: input.compactionId, turn: input.turn, trigger: input.trigger } }],
            op('start'),
            input.runId,
          );
          state = bracketState(session.events, input.compactionId, input.knownHead);
        }
        // Single writer: the surface cannot have changed since the start, so the selection is the same.
        let plan = selectRange(session, header, deps.context, input.trigger);
        if (!plan) return finish('nothing left to compact');
        let reply: ModelCallResult;
        for (;;) {
          try {
            reply = await deps.model.stream({
              messages: summarizerMessages(session, plan.seqs, input.compactionId),
              header: { ...header, maxTokens: deps.context.policy.summaryMaxTokens },
              signal: ctx.cancellationSignal,
              onChunk: () => ctx.heartbeat(),
            });
            break;
          } catch (error) {
            const failure = deps.model.classify(error);
            if (failure.code === 'context_overflow') {
              // The summarizer request itself is too large: summarise a smaller head-anchored span.
              const measurement = deps.context.meter.measure(session, header);
              const smaller = halveCompactableRange(plan, session.surfaceNodes, measurement.nodes, (seq) => session.eventAt(seq));
              if (smaller) {
                plan = smaller;
                continue;
              }
            }
            if (failure.retryable && ctx.info.attempt < input.maxAttempts) {
              throw ApplicationFailure.create({ message: failure.message, type: failure.code, ...(failure.retryAfterMs !== undefined ? { nextRetryDelay: failure.retryAfterMs } : {}) });
            }
            return finish(`summarizer failed: ${flattenError(error)}`);
          }
        }
        let summary: { blocks: ContentBlock[]; reply: ModelCallResult };
        try {
          summary = { blocks: summaryBlocks(reply.content, reply.finishReason), reply };
        } catch (error) {
          return finish(`summary refused: ${flattenError(error)}`);
        }
        const events = planCommit({
          compactionId: input.compactionId,
          startSeq: state.startSeq!,
          nextSeq: session.nextSeq,
          shadowedSeqs: plan.seqs,
          shadowedTokenCount: plan.tokens,
          summary: summary.blocks,
          provider: summary.reply.provider,
          model: summary.reply.model,
          ...(summary.reply.usage ? { usage: summary.reply.usage } : {}),
          time: deps.now(),
        });
        const checkpointTokens = deps.context.meter.messageTokens(events[1]!.data as never, header.model);
        if (checkpointTokens >= plan.tokens) {
          return finish(`the summary (${checkpointTokens} tokens) is not smaller than what it would replace (${plan.tokens} tokens)`);
        }
        await appendBatch(deps.store, session, events, op('commit'), input.runId);
        state = bracketState(session.events, input.compactionId, input.knownHead);
        return finish();
      });
    } catch (error) {
      if (error instanceof ApplicationFailure) throw error;
      if (isSessionlogError(error)) throw ApplicationFailure.nonRetryable(error.message, error.code);
      throw error;
    }
  };

  function checkpointPrice(session: Session, seq: number | undefined): number {
    const header = latestRequestHeader(session);
    const event = seq === undefined ? undefined : session.eventAt(seq);
    if (!header || !event) return 0;
    return deps.context.meter.messageTokens(event.data as never, header.model);
  }
}

/** The activity that closes an abandoned bracket with an error; a no-op when it is closed or was never opened. */
export function createAbandonCompactionActivity(deps: { store: SessionStore; cache: SessionCache; now: () => number }) {
  return async function abandonCompaction(input: AbandonCompactionInput): Promise<{ headSeq: number }> {
    try {
      return await deps.cache.with(input.sessionId, async (session) => {
        assertOwnTail(session, input.knownHead, input.runId);
        const state = bracketState(session.events, input.compactionId, input.knownHead);
        if (state.startSeq !== undefined && state.endSeq === undefined) {
          await appendBatch(
            deps.store,
            session,
            [{ type: 'compaction/end', time: deps.now(), data: { compactionId: input.compactionId, turn: input.turn, error: input.error } }],
            `${input.runId}/${input.compactionId}/end`,
            input.runId,
          );
        }
        return { headSeq: session.nextSeq };
      });
    } catch (error) {
      if (isSessionlogError(error)) throw ApplicationFailure.nonRetryable(error.message, error.code);
      throw error;
    }
  };
}

function selectRange(session: Session, header: RequestHeader, context: ContextDeps, trigger: CompactionTrigger) {
  const measurement = context.meter.measure(session, header);
  const retain = trigger === 'pressure' ? limits(context, header.model).retain : 0;
  return selectCompactableRange(session.surfaceNodes, measurement.nodes, retain, (seq) => session.eventAt(seq));
}
