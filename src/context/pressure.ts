/**
 * The pressure ladder (DESIGN §6, "a session never stops answering because of context"): before
 * a model call the request is measured against the budget, and while it is over the
 * compaction threshold the ladder climbs one rung at a time, remeasuring after each:
 *
 * 1. prune old tool results (the pruner's own threshold);
 * 2. summarise head-anchored spans of history, keeping the retained tail verbatim: as many
 *    compaction brackets as it takes, each no larger than one summarizer request can hold
 *    within the budget (so a small window never sees a refused summarizer call);
 * 3. escalate: prune harder (results over an eighth of the budget are cut, or spilled behind a
 *    preview and their artifact's locator), then summarise again without a retained tail,
 *    everything up to the current turn's own message.
 *
 * The current turn's user message and what follows it are never summarised. When even the top
 * rung leaves the request above its target, `compaction/stalled` is logged with the numbers;
 * the request is still sent if it fits the window. A stall is evidence about one climb, not a
 * verdict on the session: the breaker only spares the next steps another climb while the
 * request fits and has not grown by the headroom a compaction must win. A turn fails for
 * context only when the request cannot fit the window after the climb, and the error names the
 * parts (system prompt, tools, the current message) and the excess.
 *
 * Runs over injected ports, so the turn engine decides op keys, fencing and compaction ids.
 */
import type { ModelPort } from '../model/provider.js';
import type { RequestHeader, SessionView } from '../session/index.js';
import { liveBracket } from './compaction.js';
import { runCompaction, type CompactionPorts } from './compactor.js';
import { contextLimits, priceOf, type ContextDeps, type ContextLimits, type LogPort } from './deps.js';
import type { TokenMeasurement } from './meter-types.js';
import { escalatedPrunerConfig, planPrune } from './pruner.js';
import { originalSeq } from './range.js';

export type PressureReport = { tokens: number; contextWindow: number; budget: number; threshold: number };

/** Most compaction brackets one rung runs before it gives up on progress. */
const MAX_ROUNDS_PER_RUNG = 6;

export type ReliefPorts = {
  /** Appends of the ladder itself (`prune`, `escalation-prune`, `stalled`), keyed by suffix. */
  log: LogPort;
  /** The log port of compaction bracket `compactionId` (its own op keys). */
  compactionLog(compactionId: string): LogPort;
  summarizer: ModelPort;
  context: ContextDeps;
  /** The session has the recall tools: checkpoints point to them. */
  recall?: boolean;
  now(): number;
  signal?: AbortSignal;
  heartbeat?(): void;
};

export type ReliefRequest = {
  header: RequestHeader;
  /** The open turn (owner of the brackets). */
  turn: number;
  /** The ladder's compaction ids: this one, then `<compactionBase>.r<n>` (deterministic, so a retried step resumes them). */
  compactionBase: string;
  /**
   * Every compaction id of the caller's step starts with this: a bracket of the step left open
   * by an earlier attempt (its summarizer failed, its worker died) is resumed before anything else.
   */
  ownedPrefix: string;
  /** `context-overflow`: the provider refused a request the meter thought would fit. */
  trigger: 'pressure' | 'context-overflow';
  /** With `context-overflow`: what the refused request measured; the window is taken to be below it. */
  refusedTokens?: number;
  /** A window the provider stated (learned limit). */
  learnedWindow?: number;
  /** Surface nodes from this seq on (the current turn's own message and what follows it) are never summarised. */
  protectFromSeq: number;
  /** Where the brackets' events can start (the head the caller knew before the step). */
  fromSeq: number;
  attempt: number;
  maxAttempts: number;
};

export type ReliefOutcome = {
  measurement: TokenMeasurement;
  report: PressureReport;
  /** Compaction brackets that shadowed history in this climb. */
  compactions: number;
  /** The climb reached the escalation rung. */
  escalated: boolean;
  /** The climb ended above its target (`compaction/stalled` logged), or the breaker held. */
  stalled: boolean;
  /** Why a bracket shadowed nothing (a summarizer that failed for good, a summary too long). */
  errors: string[];
  /** Set when the request cannot fit the window: the message names the parts and the excess. */
  tooLarge?: string;
};

/** The parts of a request, in tokens: what no compaction can shrink and the rest. */
type RequestParts = { system: number; tools: number; current: number; history: number };

function partsOf(
  context: ContextDeps,
  session: SessionView,
  request: ReliefRequest,
  m: TokenMeasurement,
): RequestParts {
  const system = context.meter.headerTokens({ ...request.header, tools: [] });
  const tools = m.headerTokens - system;
  const eventAt = (seq: number) => session.eventAt(seq);
  const current = m.nodes
    .filter((n) => originalSeq(n.seq, eventAt) >= request.protectFromSeq)
    .reduce((sum, n) => sum + n.tokens, 0);
  return { system, tools, current, history: Math.max(0, m.totalTokens - m.headerTokens - current) };
}

function tooLargeMessage(limits: ContextLimits, m: TokenMeasurement, parts: RequestParts, source: string): string {
  const irreducible = parts.system + parts.tools + parts.current;
  const named: Array<[string, number]> = [
    ['the system prompt', parts.system],
    ['the tool schemas', parts.tools],
    ["the current message and this turn's replies and tool results", parts.current],
  ];
  const [largest, largestTokens] = named.reduce((a, b) => (b[1] > a[1] ? b : a));
  const head =
    irreducible >= limits.contextWindow
      ? `what no compaction can shrink takes ${irreducible} tokens, ${irreducible - limits.contextWindow} over the ${limits.contextWindow}-token context window (${source})`
      : `the request still needs ${m.totalTokens} tokens after pruning, summarising and spilling, ${m.totalTokens - limits.contextWindow} over the ${limits.contextWindow}-token context window (${source})`;
  return (
    `${head}: the system prompt takes ${parts.system}, the tool schemas ${parts.tools}, the current message and this turn's replies and tool results ${parts.current}, the rest of the history ${parts.history}; ` +
    `the largest is ${largest} (${largestTokens}). Send a shorter message, fewer tools or a shorter system prompt, or use a model with a larger window`
  );
}

/**
 * Climbs the ladder until the request is within its target, or nothing more can be done.
 * Throws what a compaction throws (a retryable summarizer failure while attempts remain).
 */
export async function relieveContext(ports: ReliefPorts, request: ReliefRequest): Promise<ReliefOutcome> {
  const { context, log } = ports;
  const session = (): SessionView => log.session;
  const measure = (): TokenMeasurement => context.meter.measure(session(), request.header);
  // After a refusal the meter was wrong about this request: take the window to be below what it measured.
  const refusedCap =
    request.trigger === 'context-overflow' && request.refusedTokens !== undefined
      ? Math.floor(request.refusedTokens * 0.9)
      : undefined;
  const windowCap =
    refusedCap === undefined ? request.learnedWindow : Math.min(refusedCap, request.learnedWindow ?? refusedCap);
  const limits = contextLimits(context, request.header.model, windowCap);
  const target = Math.floor(limits.threshold * (1 - context.policy.minHeadroomRatio));
  const source =
    refusedCap !== undefined && windowCap === refusedCap
      ? 'below the size of a request the provider refused'
      : request.learnedWindow !== undefined && request.learnedWindow === limits.contextWindow
        ? 'as the provider stated it'
        : "the model catalogue's";

  let m = measure();
  const tokensBefore = m.totalTokens;
  const outcome = { compactions: 0, escalated: false, stalled: false, errors: [] as string[] };
  const done = (): ReliefOutcome => {
    const report = {
      tokens: m.totalTokens,
      contextWindow: limits.contextWindow,
      budget: limits.budget,
      threshold: limits.threshold,
    };
    const tooLarge =
      m.totalTokens >= limits.contextWindow
        ? tooLargeMessage(limits, m, partsOf(context, session(), request, m), source)
        : undefined;
    return { measurement: m, report, ...outcome, ...(tooLarge !== undefined ? { tooLarge } : {}) };
  };
  const below = (tokens: number) => m.totalTokens < tokens;
  const compactionPorts = (compactionId: string): CompactionPorts => ({
    log: ports.compactionLog(compactionId),
    summarizer: ports.summarizer,
    context,
    ...(ports.recall ? { recall: true } : {}),
    now: ports.now,
    ...(ports.signal ? { signal: ports.signal } : {}),
    ...(ports.heartbeat ? { heartbeat: ports.heartbeat } : {}),
  });

  const live = liveBracket(session());
  if (live && live.compactionId.startsWith(request.ownedPrefix)) {
    const start = session().eventAt(live.seq);
    const trigger = start?.type === 'compaction/start' ? start.data.trigger : request.trigger;
    const resumed = await runCompaction(compactionPorts(live.compactionId), {
      compactionId: live.compactionId,
      trigger,
      turn: request.turn,
      fromSeq: live.seq,
      attempt: request.attempt,
      maxAttempts: request.maxAttempts,
      ...(windowCap !== undefined ? { learnedWindow: windowCap } : {}),
    });
    if (resumed.result) outcome.compactions += 1;
    else if (resumed.error !== undefined) outcome.errors.push(resumed.error);
    m = measure();
  }

  if (request.trigger === 'pressure' && below(limits.threshold)) return done();
  const stall = session().compactionStall;
  if (
    request.trigger === 'pressure' &&
    stall !== undefined &&
    stall.budget === limits.budget &&
    below(limits.contextWindow) &&
    below(stall.tokensAfter + (limits.threshold - target))
  ) {
    // The breaker holds: since the last climb stalled, the request has not grown by the headroom
    // a compaction must win, and it still fits. Send it rather than climb again for nothing.
    outcome.stalled = true;
    return done();
  }

  const prune = async (escalation: boolean): Promise<void> => {
    if (!context.pruner) return;
    const config = escalation ? escalatedPrunerConfig(context.pruner, limits.budget) : context.pruner;
    const events = planPrune(session(), config, priceOf(m), ports.now(), escalation ? { escalation } : {});
    if (events.length === 0) return;
    await log.append(events, escalation ? 'escalation-prune' : 'prune');
    m = measure();
  };

  let round = 0;
  const summarise = async (retainTokens: number, escalation?: number): Promise<void> => {
    for (let n = 0; n < MAX_ROUNDS_PER_RUNG && !below(target + 1); n++) {
      const compactionId = round === 0 ? request.compactionBase : `${request.compactionBase}.r${round}`;
      round += 1;
      const result = await runCompaction(compactionPorts(compactionId), {
        compactionId,
        trigger: request.trigger,
        turn: request.turn,
        fromSeq: request.fromSeq,
        attempt: request.attempt,
        maxAttempts: request.maxAttempts,
        ...(windowCap !== undefined ? { learnedWindow: windowCap } : {}),
        selection: { retainTokens, protectFromSeq: request.protectFromSeq },
        ...(escalation !== undefined ? { escalation } : {}),
      });
      if (!result.result) {
        if (result.error !== undefined) outcome.errors.push(result.error);
        return;
      }
      outcome.compactions += 1;
      m = measure();
      // A bracket that won nothing (its summary as long as its span) ends the rung. A bracket
      // finished by an earlier attempt of this step counts as it did then.
      if (result.result.tokensAfter >= result.result.tokensBefore) return;
    }
  };

  await prune(false);
  if (request.trigger === 'pressure' && below(limits.threshold)) return done();
  await summarise(request.trigger === 'pressure' ? limits.retain : 0);
  if (!below(target + 1)) {
    outcome.escalated = true;
    await prune(true);
    await summarise(0, 1);
  }
  if (!below(target + 1)) {
    outcome.stalled = true;
    const parts = partsOf(context, session(), request, m);
    const reason = `after pruning, ${outcome.compactions} compaction(s)${outcome.escalated ? ' and an escalation' : ''} the request needs ${m.totalTokens} tokens, above its target of ${target}`;
    await log.append(
      [
        {
          type: 'compaction/stalled',
          time: ports.now(),
          data: {
            compactionId: round > 0 ? request.compactionBase : null,
            tokensBefore,
            tokensAfter: m.totalTokens,
            budget: limits.budget,
            threshold: limits.threshold,
            irreducible: parts.system + parts.tools + parts.current,
            reason,
          },
        },
      ],
      'stalled',
    );
  }
  return done();
}
