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
import { SessionlogError, scrubSecrets, type ContentBlock, type RequestHeader, type SessionView } from '../session/index.js';
import { bracketState, liveBracket, planCommit, summarizerMessages, summaryBlocks, type BracketState, type CompactionTrigger } from './compaction.js';
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
};

export type CompactionPorts = {
  log: LogPort;
  summarizer: ModelPort;
  context: ContextDeps;
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

  const finish = async (error?: string): Promise<CompactionOutcome> => {
    if (state.endSeq === undefined) {
      const end = { compactionId: request.compactionId, turn: request.turn, ...(error !== undefined ? { error } : {}) };
      await log.append([{ type: 'compaction/end', time: ports.now(), data: end }], 'end');
      state = bracketState(session(), request.compactionId, request.fromSeq);
    }
    const err = error ?? state.error;
    if (err !== undefined || state.shadowedSeqs === undefined) return { result: null, ...(err !== undefined ? { error: err } : {}) };
    return { result: resultOf(ports, request.compactionId, state) };
  };

  // A retried call: the bracket is finished, or its summary is logged and only the end is missing.
  if (state.endSeq !== undefined || state.summarySeq !== undefined) return finish();

  const header = session().requestHeader;
  if (!header) return { result: null };
  if (state.startSeq === undefined) {
    const live = liveBracket(session());
    if (live) throw new SessionlogError('INVALID_ARGUMENT', `compaction ${live.compactionId} opened at seq ${live.seq} is still running`);
    if (request.trigger === 'context-overflow' && context.pruner) {
      // Overflow recovery prunes first (dsh-spec §4.8); the summary then covers what is left.
      const events = planPrune(session(), context.pruner, priceOf(context.meter.measure(session(), header)), ports.now());
      if (events.length > 0) await log.append(events, 'prune');
    }
    if (!selectRange(session(), header, context, request)) return { result: null };
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
        const smaller = halveCompactableRange(plan, session().surfaceNodes, measurement.nodes, (seq) => session().eventAt(seq));
        if (smaller) {
          plan = smaller;
          continue;
        }
      }
      if (failure.retryable && request.attempt < request.maxAttempts) throw new ModelCallError(failure, undefined, { cause: error });
      return finish(`summarizer failed: ${flattenError(error)}`);
    }
  }
  let summary: ContentBlock[];
  try {
    summary = summaryBlocks(reply.content, reply.finishReason);
  } catch (error) {
    return finish(`summary refused: ${flattenError(error)}`);
  }
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
  });
  const replacement = events[1]!;
  const checkpointTokens = replacement.type === 'user/message' ? context.meter.messageTokens(replacement.data, header.model) : 0;
  if (checkpointTokens >= plan.tokens) {
    return finish(`the summary (${checkpointTokens} tokens) is not smaller than what it would replace (${plan.tokens} tokens)`);
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
  await log.append([{ type: 'compaction/end', time: input.time, data: { compactionId: input.compactionId, turn: input.turn, error: input.error } }], 'end');
}

function resultOf(ports: CompactionPorts, compactionId: string, state: BracketState): NonNullable<CompactionOutcome['result']> {
  const session = ports.log.session;
  const header = session.requestHeader;
  const tokensAfter = header ? ports.context.meter.measure(session, header).totalTokens : 0;
  const replacement = state.replacementSeq === undefined ? undefined : session.eventAt(state.replacementSeq);
  const checkpointPrice = header && replacement?.type === 'user/message' ? ports.context.meter.messageTokens(replacement.data, header.model) : 0;
  return {
    compactionId,
    shadowedSeqs: state.shadowedSeqs!,
    tokensBefore: tokensAfter + state.shadowedTokenCount! - checkpointPrice,
    tokensAfter,
  };
}

function selectRange(session: SessionView, header: RequestHeader, context: ContextDeps, request: CompactionRequest): CompactableRange | null {
  const measurement = context.meter.measure(session, header);
  const retain = request.trigger === 'pressure' ? contextLimits(context, header.model, request.learnedWindow).retain : 0;
  return selectCompactableRange(session.surfaceNodes, measurement.nodes, retain, (seq) => session.eventAt(seq));
}
