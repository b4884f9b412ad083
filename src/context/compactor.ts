/**
 * The compaction transaction (dsh-spec §4, DESIGN §6): one bracket per compaction id, over an
 * injected log port and summarizer. A retried call with the same id resumes its own bracket: a
 * finished bracket is reported, a logged summary is never requested again, and the last
 * attempt closes the bracket with an error rather than leave it open.
 *
 * One bracket summarises one head-anchored span of the surface. Which span is the caller's
 * choice (`selection`: the verbatim tail to keep, the current turn's own nodes that are never
 * compacted, and the most one summarizer request can take); it is recorded on
 * `compaction/start`, so a resumed bracket selects the same span. Whether the result was
 * enough is not decided here: the pressure ladder (pressure.ts) decides that.
 *
 * Batches (each appended once under `<compactionId>/<suffix>`): `start`, `commit` (summary +
 * replacement, adjacent), `end`.
 */
import { messageForRequest } from './media-policy.js';
import { ModelCatalogueError, TEXT_ONLY_INPUT, type ModelInputs } from '../model/catalogue.js';
import { classifyModelError, ModelCallError } from '../model/errors.js';
import { replyCost, type ModelPort, type ModelReply } from '../model/provider.js';
import {
  SessionlogError,
  scrubSecrets,
  type ContentBlock,
  type RequestHeader,
  type SessionView,
  type UserMessage,
} from '../session/index.js';
import {
  COMPACTION_INSTRUCTION,
  bracketState,
  frameCheckpoint,
  liveBracket,
  originalSpan,
  planCommit,
  summarizerMessages,
  summaryBlocks,
  type BracketState,
  type CompactionSelection,
  type CompactionTrigger,
} from './compaction.js';
import { contextLimits, type ContextDeps, type ContextLimits, type LogPort } from './deps.js';
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
  /**
   * What the bracket may summarise. Unset fields default to: the policy's retained tail for a
   * pressure compaction (none otherwise), no protected nodes, and what fits one summarizer
   * request within the budget.
   */
  selection?: Partial<CompactionSelection>;
  /** The pressure ladder's escalation level when it asked for this bracket (logged on its start). */
  escalation?: number;
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
 * The summary's output cap for a request budget: the policy's cap, but never more than
 * `summaryBudgetRatio` of the budget (a 2,500-token window cannot take an 8,192-token summary).
 */
export function summaryMaxTokens(context: ContextDeps, limits: ContextLimits): number {
  return Math.min(
    context.policy.summaryMaxTokens,
    Math.max(64, Math.floor(limits.budget * context.policy.summaryBudgetRatio)),
  );
}

/**
 * How many tokens of history one summarizer request can take: the context window (the
 * provider's hard limit; the budget is a soft one) less the summary's output cap, the request
 * envelope (system prompt and tools travel with it, for the provider's prompt cache), the
 * instruction, and a margin of 5% for the meter's error.
 */
export function summarizerRoom(context: ContextDeps, header: RequestHeader, limits: ContextLimits): number {
  const instruction: UserMessage = {
    id: 'compaction-instruction',
    role: 'user',
    content: [{ type: 'text', text: COMPACTION_INSTRUCTION }],
    source: { kind: 'plugin', plugin: 'sessionlog-compaction' },
  };
  return (
    limits.contextWindow -
    summaryMaxTokens(context, limits) -
    context.meter.headerTokens(header) -
    context.meter.messageTokens(instruction, header.model) -
    Math.ceil(limits.contextWindow * 0.05)
  );
}

/** `header` without its tools: a summarizer request that cannot otherwise hold any span. */
function withoutTools(header: RequestHeader): RequestHeader {
  const { tools: _tools, ...bare } = header;
  return bare;
}

/**
 * The selection with its defaults filled for `request` (see `CompactionRequest.selection`). The
 * summarizer request carries the session's system prompt and tools (for the provider's prompt
 * cache) unless, with the tools, it cannot hold any span at all (a small window, large tool
 * schemas): then it goes without them and the room is the larger one.
 */
function resolveSelection(
  context: ContextDeps,
  session: SessionView,
  header: RequestHeader,
  request: CompactionRequest,
): CompactionSelection {
  const limits = contextLimits(context, header.model, request.learnedWindow);
  const given = request.selection ?? {};
  const base = {
    retainTokens: given.retainTokens ?? (request.trigger === 'pressure' ? limits.retain : 0),
    ...(given.protectFromSeq !== undefined ? { protectFromSeq: given.protectFromSeq } : {}),
  };
  if (given.maxRangeTokens !== undefined) return { ...base, maxRangeTokens: given.maxRangeTokens };
  const room = summarizerRoom(context, header, limits);
  if (selectRange(session, header, context, { ...base, maxRangeTokens: room }))
    return { ...base, maxRangeTokens: room };
  return { ...base, maxRangeTokens: Math.max(room, summarizerRoom(context, withoutTools(header), limits)) };
}

/**
 * The envelope of the summarizer request for `selection`: without tools when its room needed
 * that, and never with the turn's hints (a caller's response format, stop sequences or token
 * cap are for its reply, not for a summary).
 */
function summarizerHeader(
  context: ContextDeps,
  header: RequestHeader,
  limits: ContextLimits,
  selection: CompactionSelection,
): RequestHeader {
  const { hints: _hints, ...bare } = header;
  return selection.maxRangeTokens > summarizerRoom(context, bare, limits) ? withoutTools(bare) : bare;
}

/**
 * The least a span must hold to be worth a summary: twice the checkpoint's own frame (preamble
 * and tags around an empty summary). A shorter span would come back no shorter.
 */
function minimumSpanTokens(context: ContextDeps, header: RequestHeader): number {
  const frame: UserMessage = {
    id: 'checkpoint',
    role: 'user',
    content: frameCheckpoint([], { start: 0, end: 0 }),
    source: { kind: 'plugin', plugin: 'compact' },
  };
  return 2 * context.meter.messageTokens(frame, header.model);
}

function selectRange(
  session: SessionView,
  header: RequestHeader,
  context: ContextDeps,
  selection: CompactionSelection,
): CompactableRange | null {
  if (selection.maxRangeTokens <= 0) return null;
  const measurement = context.meter.measure(session, header);
  const range = selectCompactableRange(
    session.surfaceNodes,
    measurement.nodes,
    selection.retainTokens,
    (seq) => session.eventAt(seq),
    {
      maxTokens: selection.maxRangeTokens,
      ...(selection.protectFromSeq !== undefined ? { protectFromSeq: selection.protectFromSeq } : {}),
    },
  );
  return range && range.tokens >= minimumSpanTokens(context, header) ? range : null;
}

/** The media the summarizer's model takes; a model its catalogue does not know gets stand-ins (as the meter prices it). */
function summarizerInputs(summarizer: ModelPort, model: string): ModelInputs {
  try {
    return summarizer.model(model).input;
  } catch (error) {
    if (error instanceof ModelCatalogueError) return TEXT_ONLY_INPUT;
    throw error;
  }
}

/**
 * Runs (or resumes) bracket `request.compactionId`. Throws a retryable `ModelCallError` when
 * the summarizer failed transiently and attempts remain; SessionlogError INVALID_ARGUMENT when
 * another bracket is live. `result` is null (without an error) when nothing could be selected.
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
    return { result: resultOf(ports, request.compactionId, state) };
  };

  // A retried call: the bracket is finished, or its summary is logged and only the end is missing.
  if (state.endSeq !== undefined || state.summarySeq !== undefined) return finish();

  const header = session().requestHeader;
  if (!header) return { result: null };
  let selection: CompactionSelection;
  if (state.startSeq === undefined) {
    const live = liveBracket(session());
    if (live)
      throw new SessionlogError(
        'INVALID_ARGUMENT',
        `compaction ${live.compactionId} opened at seq ${live.seq} is still running`,
      );
    selection = resolveSelection(context, session(), header, request);
    if (!selectRange(session(), header, context, selection)) return { result: null };
    const start = {
      compactionId: request.compactionId,
      turn: request.turn,
      trigger: request.trigger,
      selection,
      ...(request.escalation !== undefined ? { escalation: request.escalation } : {}),
    };
    await log.append([{ type: 'compaction/start', time: ports.now(), data: start }], 'start');
    state = bracketState(session(), request.compactionId, request.fromSeq);
  } else {
    // A resumed bracket selects what its start recorded (brackets of older versions recorded nothing).
    selection = state.selection ?? resolveSelection(context, session(), header, request);
  }
  // One writer: the surface cannot have changed since the start, so the selection is the same.
  let plan = selectRange(session(), header, context, selection);
  if (!plan) return finish('nothing left to compact');
  const limits = contextLimits(context, header.model, request.learnedWindow);
  const inputs = summarizerInputs(ports.summarizer, header.model);
  let reply: ModelReply;
  for (;;) {
    try {
      reply = await ports.summarizer.stream({
        // The summarizer sees every medium of the span it condenses (that its model takes); the checkpoint stays text.
        messages: summarizerMessages(session(), plan.seqs, request.compactionId).map((message) =>
          messageForRequest(message, true, inputs),
        ),
        header: {
          ...summarizerHeader(context, header, limits, selection),
          maxTokens: summaryMaxTokens(context, limits),
        },
        ...(ports.signal ? { signal: ports.signal } : {}),
        onChunks: () => ports.heartbeat?.(),
      });
      break;
    } catch (error) {
      const failure = classifyModelError(error);
      if (failure.code === 'context_overflow') {
        // The summarizer request itself is too large (the meter was wrong): summarise a smaller head-anchored span.
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
    cost: replyCost(ports.summarizer, reply.model, reply.usage),
    time: ports.now(),
    ...(ports.recall ? { recall: originalSpan(session(), plan.seqs) } : {}),
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
