/**
 * The compaction transaction (dsh-spec §4, DESIGN §6): one bracket per compaction id, over an
 * injected log port and summarizer. A retried call with the same id resumes its own bracket: a
 * finished bracket is reported, a logged summary is never requested again, and the last
 * attempt closes the bracket with an error rather than leave it open.
 *
 * Batches (each appended once under `<compactionId>/<suffix>`): `prune` (overflow only),
 * `start`, `commit` (summary + replacement, adjacent), `end`.
 */
import { classifyModelError, ModelCallError } from '../model/errors.js';
import type { ModelPort, ModelReply } from '../model/provider.js';
import {
  SessionlogError,
  scrubSecrets,
  type ContentBlock,
  type RequestHeader,
  type SessionView,
} from '../session/index.js';
import {
  bracketState,
  liveBracket,
  planCommit,
  summarizerMessages,
  summaryBlocks,
  type BracketState,
  type CompactionTrigger,
} from './compaction.js';
import { contextLimits, priceOf, type ContextDeps, type LogPort } from './pressure.js';
import { planPrune } from './pruner.js';
import { halveCompactableRange, selectCompactableRange, type CompactableRange } from './range.js';

export type CompactionRequest = {
  compactionId: string;
  trigger: CompactionTrigger;
  /** The open turn that owns the bracket; null for a manual compaction between turns. */
  turn: number | null;
  /** Where this compaction's own events can start (the head the caller knew). */
  fromSeq: number;
  /** This try and the caller's retry budget: the last attempt closes the bracket instead of throwing. */
  attempt: number;
  maxAttempts: number;
  /** A window the provider stated (learned limit); caps the budget like the catalogue's window. */
  learnedWindow?: number;
};

export type CompactionOutcome = {
  /** What was shadowed, or null when nothing was compacted (see `error`). */
  result: { compactionId: string; shadowedSeqs: number[]; tokensBefore: number; tokensAfter: number } | null;
  error?: string;
  /** True when this compaction tripped the circuit breaker (`compaction/stalled` is logged). */
  stalled?: boolean;
};

export type CompactionPorts = {
  log: LogPort;
  summarizer: ModelPort;
  context: ContextDeps;
  /** The session has the recall tools (search_history, read_history): the checkpoint points to them. */
  recall?: boolean;
  now(): number;
  signal?: AbortSignal;
  /** Called while the summary streams (keeps a caller's liveness check fed). */
  heartbeat?(): void;
};

function flattenError(error: unknown): string {
  const parts: string[] = [];
  let current: unknown = error;
  while (current instanceof Error && parts.length < 5) {
    parts.push(current.message);
    current = current.cause;
  }
  return scrubSecrets(parts.join(': ') || String(error));
}

/**
 * Runs (or resumes) bracket `request.compactionId`. Throws a retryable `ModelCallError` when
 * the summarizer failed transiently and attempts remain; SessionlogError INVALID_ARGUMENT when
 * another bracket is live.
 */
export async function runCompaction(ports: CompactionPorts, request: CompactionRequest): Promise<CompactionOutcome> {
  const { log, context } = ports;
  const session = (): SessionView => log.session;
  let state = bracketState(session(), request.compactionId, request.fromSeq);

  const header0 = session().requestHeader;
  const tokensBefore = header0 ? context.meter.measure(session(), header0).totalTokens : 0;
  const finish = async (error?: string): Promise<CompactionOutcome> => {
    const header = session().requestHeader;
    const tokensAfter = header ? context.meter.measure(session(), header).totalTokens : 0;
    if (state.endSeq === undefined) {
      const measured = error === undefined && state.summarySeq !== undefined ? { tokensBefore, tokensAfter } : {};
      const end = {
        compactionId: request.compactionId,
        turn: request.turn,
        ...(error !== undefined ? { error } : {}),
        ...measured,
      };
      await log.append([{ type: 'compaction/end', time: ports.now(), data: end }], 'end');
      state = bracketState(session(), request.compactionId, request.fromSeq);
    }
    const err = error ?? state.error;
    if (err !== undefined || state.shadowedSeqs === undefined)
      return { result: null, ...(err !== undefined ? { error: err } : {}) };
    const result = resultOf(ports, request.compactionId, state);
    // An automatic compaction that restored too little headroom trips the breaker (logged, so it holds across restarts).
    const stall =
      header && request.trigger !== 'manual' ? stallOf(context, header.model, request, result.tokensAfter) : undefined;
    if (stall) {
      await logStall(ports, request, {
        tokensBefore: result.tokensBefore,
        tokensAfter: result.tokensAfter,
        ...stall,
        reason: `the compaction left ${result.tokensAfter} tokens, above its target of ${stall.target}`,
      });
      return {
        result,
        stalled: true,
        error: `compaction stalled: it left ${result.tokensAfter} tokens, above the target of ${stall.target}`,
      };
    }
    return { result };
  };

  // A retried call: the bracket is finished, or its summary is logged and only the end is missing.
  if (state.endSeq !== undefined || state.summarySeq !== undefined) return finish();

  const header = session().requestHeader;
  if (!header) return { result: null };
  if (state.startSeq === undefined) {
    const live = liveBracket(session());
    if (live)
      throw new SessionlogError(
        'INVALID_ARGUMENT',
        `compaction ${live.compactionId} opened at seq ${live.seq} is still running`,
      );
    if (request.trigger === 'context-overflow' && context.pruner) {
      // Overflow recovery prunes first (dsh-spec §4.8); the summary then covers what is left.
      const events = planPrune(
        session(),
        context.pruner,
        priceOf(context.meter.measure(session(), header)),
        ports.now(),
      );
      if (events.length > 0) await log.append(events, 'prune');
    }
    const planned = selectRange(session(), header, context, request);
    // What no compaction can shrink (system prompt, tools, the retained tail): above the target, compacting cannot help.
    const measurement = context.meter.measure(session(), header);
    const irreducible = measurement.totalTokens - (planned?.tokens ?? 0);
    const stall = request.trigger !== 'manual' ? stallOf(context, header.model, request, irreducible) : undefined;
    if (stall) {
      const reason = `the system prompt, tools and retained tail alone take ${irreducible} tokens, above the compaction target of ${stall.target}`;
      await logStall(ports, request, {
        tokensBefore: measurement.totalTokens,
        tokensAfter: measurement.totalTokens,
        ...stall,
        reason,
      });
      return { result: null, stalled: true, error: `compaction stalled: ${reason}` };
    }
    if (!planned) return { result: null };
    const start = { compactionId: request.compactionId, turn: request.turn, trigger: request.trigger };
    await log.append([{ type: 'compaction/start', time: ports.now(), data: start }], 'start');
    state = bracketState(session(), request.compactionId, request.fromSeq);
  }
  // One writer: the surface cannot have changed since the start, so the selection is the same.
  let plan = selectRange(session(), header, context, request);
  if (!plan) return finish('nothing left to compact');
  let reply: ModelReply;
  for (;;) {
    try {
      reply = await ports.summarizer.stream({
        messages: summarizerMessages(session(), plan.seqs, request.compactionId),
        header: { ...header, maxTokens: context.policy.summaryMaxTokens },
        ...(ports.signal ? { signal: ports.signal } : {}),
        onChunks: () => ports.heartbeat?.(),
      });
      break;
    } catch (error) {
      const failure = classifyModelError(error);
      if (failure.code === 'context_overflow') {
        // The summarizer request itself is too large: summarise a smaller head-anchored span.
        const measurement = context.meter.measure(session(), header);
        const smaller = halveCompactableRange(plan, session().surfaceNodes, measurement.nodes, (seq) =>
          session().eventAt(seq),
        );
        if (smaller) {
          plan = smaller;
          continue;
        }
      }
      if (failure.retryable && request.attempt < request.maxAttempts)
        throw new ModelCallError(failure, undefined, { cause: error });
      return finish(`summarizer failed: ${flattenError(error)}`);
    }
  }
  let summary: ContentBlock[];
  try {
    summary = summaryBlocks(reply.content, reply.finishReason);
  } catch (error) {
    return finish(`summary refused: ${flattenError(error)}`);
  }
  let checkpointTokens = 0;
  const events = planCommit({
    compactionId: request.compactionId,
    startSeq: state.startSeq!,
    nextSeq: session().nextSeq,
    shadowedSeqs: plan.seqs,
    shadowedTokenCount: plan.tokens,
    summary,
    provider: reply.provider,
    model: reply.model,
    ...(reply.usage ? { usage: reply.usage } : {}),
    time: ports.now(),
    ...(ports.recall ? { recall: true } : {}),
    price: (checkpoint) => (checkpointTokens = context.meter.messageTokens(checkpoint, header.model)),
  });
  if (checkpointTokens >= plan.tokens) {
    return finish(
      `the summary (${checkpointTokens} tokens) is not smaller than what it would replace (${plan.tokens} tokens)`,
    );
  }
  await log.append(events, 'commit');
  state = bracketState(session(), request.compactionId, request.fromSeq);
  return finish();
}

/**
 * Closes bracket `compactionId` with `error` when it was opened and never ended (its caller
 * gave up: timeouts, crashes on the last attempt); a no-op otherwise. No lock outlives it.
 */
export async function abandonCompaction(
  log: LogPort,
  input: { compactionId: string; turn: number | null; fromSeq: number; error: string; time: number },
): Promise<void> {
  const state = bracketState(log.session, input.compactionId, input.fromSeq);
  if (state.startSeq === undefined || state.endSeq !== undefined) return;
  await log.append(
    [
      {
        type: 'compaction/end',
        time: input.time,
        data: { compactionId: input.compactionId, turn: input.turn, error: input.error },
      },
    ],
    'end',
  );
}

function resultOf(
  ports: CompactionPorts,
  compactionId: string,
  state: BracketState,
): NonNullable<CompactionOutcome['result']> {
  const session = ports.log.session;
  const header = session.requestHeader;
  const tokensAfter = header ? ports.context.meter.measure(session, header).totalTokens : 0;
  const replacement = state.replacementSeq === undefined ? undefined : session.eventAt(state.replacementSeq);
  const checkpointPrice =
    header && replacement?.type === 'user/message'
      ? ports.context.meter.messageTokens(replacement.data, header.model)
      : 0;
  return {
    compactionId,
    shadowedSeqs: state.shadowedSeqs!,
    tokensBefore: tokensAfter + state.shadowedTokenCount! - checkpointPrice,
    tokensAfter,
  };
}

/** The breaker's verdict: `tokens` above floor(threshold × (1 − minHeadroomRatio)) restores too little. */
function stallOf(
  context: ContextDeps,
  model: string,
  request: CompactionRequest,
  tokens: number,
): { budget: number; threshold: number; irreducible: number; target: number } | undefined {
  const limits = contextLimits(context, model, request.learnedWindow);
  const target = Math.floor(limits.threshold * (1 - context.policy.minHeadroomRatio));
  return tokens > target
    ? { budget: limits.budget, threshold: limits.threshold, irreducible: tokens, target }
    : undefined;
}

async function logStall(
  ports: CompactionPorts,
  request: CompactionRequest,
  numbers: {
    tokensBefore: number;
    tokensAfter: number;
    budget: number;
    threshold: number;
    irreducible: number;
    reason: string;
  },
): Promise<void> {
  const { tokensBefore, tokensAfter, budget, threshold, irreducible, reason } = numbers;
  await ports.log.append(
    [
      {
        type: 'compaction/stalled',
        time: ports.now(),
        data: { compactionId: request.compactionId, tokensBefore, tokensAfter, budget, threshold, irreducible, reason },
      },
    ],
    'stalled',
  );
}

function selectRange(
  session: SessionView,
  header: RequestHeader,
  context: ContextDeps,
  request: CompactionRequest,
): CompactableRange | null {
  const measurement = context.meter.measure(session, header);
  const retain =
    request.trigger === 'pressure' ? contextLimits(context, header.model, request.learnedWindow).retain : 0;
  return selectCompactableRange(session.surfaceNodes, measurement.nodes, retain, (seq) => session.eventAt(seq));
}
