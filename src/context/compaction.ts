/**
 * LLM-summary compaction as a logged bracket (dsh-spec §4): `compaction/start` →
 * `compaction/summary` + the replacement `user/message` (adjacent, one batch) →
 * `compaction/end`. The replacement shadows a head-anchored span of the surface; the
 * originals stay in the log. Everything here is pure: the activity does the I/O.
 */
import { SessionlogError, deriveEventMessage } from '../session/index.js';
import type {
  CompactionStartSelection,
  ContentBlock,
  EventLookup,
  Message,
  NewEvent,
  SessionView,
  TokenUsage,
  UserMessage,
} from '../session/index.js';
import { originalSeq } from './range.js';

export type CompactionTrigger = 'pressure' | 'context-overflow' | 'manual';

/** What one bracket may summarise (recorded on its `compaction/start`). */
export type CompactionSelection = CompactionStartSelection;

export type ContextPolicy = {
  /** Tokens the session may use before pressure handling starts; defaults to the model's window. */
  budgetTokens?: number;
  /** Compact when the request reaches floor(budget × thresholdRatio). In (0, 1]. */
  thresholdRatio: number;
  /** Keep at least floor(budget × retainRatio) tokens of the newest history verbatim. < thresholdRatio. */
  retainRatio: number;
  /** Summarizer output cap. */
  summaryMaxTokens: number;
  /** The summary never takes more than this share of the budget (a small window cannot hold a long summary). In (0, 0.5]. */
  summaryBudgetRatio: number;
  /**
   * The circuit breaker: an automatic compaction must bring the request to at most
   * floor(threshold × (1 − minHeadroomRatio)); one that cannot (or whose irreducible part —
   * system prompt, tools, retained tail — is already above that) logs `compaction/stalled` and
   * automatic compaction stops. In [0, 1).
   */
  minHeadroomRatio: number;
};

export const DEFAULT_CONTEXT_POLICY: ContextPolicy = {
  summaryBudgetRatio: 0.2,
  thresholdRatio: 0.8,
  retainRatio: 0.16,
  summaryMaxTokens: 8192,
  minHeadroomRatio: 0.1,
};

/** Validates the policy; throws naming the field to fix. */
export function resolveContextPolicy(policy: Partial<ContextPolicy> = {}): ContextPolicy {
  const p = { ...DEFAULT_CONTEXT_POLICY, ...policy };
  if (!(p.thresholdRatio > 0 && p.thresholdRatio <= 1))
    throw new SessionlogError('INVALID_ARGUMENT', 'context thresholdRatio must be in (0, 1]');
  if (!(p.retainRatio >= 0 && p.retainRatio < p.thresholdRatio))
    throw new SessionlogError('INVALID_ARGUMENT', 'context retainRatio must be at least 0 and below thresholdRatio');
  if (p.budgetTokens !== undefined && (!Number.isSafeInteger(p.budgetTokens) || p.budgetTokens <= 0))
    throw new SessionlogError('INVALID_ARGUMENT', 'context budgetTokens must be a positive integer');
  if (!Number.isSafeInteger(p.summaryMaxTokens) || p.summaryMaxTokens <= 0)
    throw new SessionlogError('INVALID_ARGUMENT', 'context summaryMaxTokens must be a positive integer');
  if (!(p.summaryBudgetRatio > 0 && p.summaryBudgetRatio <= 0.5))
    throw new SessionlogError('INVALID_ARGUMENT', 'context summaryBudgetRatio must be in (0, 0.5]');
  if (!(p.minHeadroomRatio >= 0 && p.minHeadroomRatio < 1))
    throw new SessionlogError('INVALID_ARGUMENT', 'context minHeadroomRatio must be in [0, 1)');
  return p;
}

/** The instruction appended after the shadowed messages (our own wording of dsh-spec §4.5). */
export const COMPACTION_INSTRUCTION = [
  'You are now acting as the compaction engine of this assistant. Condense the whole conversation above into a checkpoint from which the work can resume without it.',
  'Output exactly one Markdown document with these six sections, in this order, each a "## " heading:',
  '## Goal (what the user wants; quote the user where the wording matters)',
  '## Decisions (what was decided, and why)',
  '## Facts (exact dates, numbers, names, identifiers, commands, error messages, results)',
  '## Files and artifacts (exact paths, and stored artifacts by their locators exactly as written, e.g. artifact:<session>/<name>)',
  '## Open tasks (what is still to do; the single next step first)',
  '## Current state (where the work stands, constraints, preferences, open questions)',
  'Rules: terse bullet points; write "(none)" for an empty section and never drop a section; concise English; keep exact paths, commands, errors, identifiers, dates, numbers and signatures; record corrections faithfully; do not mention that this is a summary; call no tools.',
  'If the conversation already contains a <compacted-summary> block, it is an earlier checkpoint: merge it with what followed into one consolidated checkpoint, keeping facts that are still true and dropping stale ones, rather than copying it.',
].join('\n');

export const CHECKPOINT_PREAMBLE =
  'This is an automatically generated checkpoint that condenses an earlier part of this conversation. Treat it as established background: do not restate or acknowledge it, and continue from the messages that follow it.';

/**
 * The replacement message's content: preamble + opening tag, the summary's text blocks, closing
 * tag. With `recall` (the session has the recall tools), the preamble also says which seqs the
 * summary replaced and that they can be searched and read.
 */
export function frameCheckpoint(
  summary: readonly ContentBlock[],
  recall?: { start: number; end: number },
): ContentBlock[] {
  const note = recall
    ? `\n\nThe original messages it replaces (log seqs ${recall.start}-${recall.end}) are kept: find facts in them with the search_history tool and read them exactly with read_history.`
    : '';
  return [
    { type: 'text', text: `${CHECKPOINT_PREAMBLE}${note}\n\n<compacted-summary>` },
    ...summary,
    { type: 'text', text: '</compacted-summary>' },
  ];
}

/** Keeps only the text of a summarizer reply; throws when it has none or contains tool calls only. */
export function summaryBlocks(content: readonly ContentBlock[], finishReason: string): ContentBlock[] {
  if (finishReason === 'length')
    throw new SessionlogError(
      'SUMMARY_REFUSED',
      'the summary was cut off at the output limit (MAX_TOKENS); a truncated checkpoint is refused',
    );
  if (finishReason === 'content_filter')
    throw new SessionlogError(
      'SUMMARY_REFUSED',
      "the summary was stopped by the provider's content filter; a partial checkpoint is refused",
    );
  const text = content.filter((b): b is Extract<ContentBlock, { type: 'text' }> => b.type === 'text');
  if (!text.some((b) => b.text.trim().length > 0))
    throw new SessionlogError('SUMMARY_REFUSED', 'the summarizer returned no text');
  return text.map((b) => ({ type: 'text', text: b.text }));
}

/** The summarizer's messages: the shadowed nodes' derived messages, then one instruction. */
export function summarizerMessages(
  session: SessionView,
  shadowedSeqs: readonly number[],
  compactionId: string,
): Message[] {
  const messages: Message[] = [];
  for (const seq of shadowedSeqs) {
    const event = session.eventAt(seq);
    if (!event) continue;
    const message = deriveEventMessage(event);
    if (message) messages.push(message);
  }
  const instruction: UserMessage = {
    id: `compaction-instruction-${compactionId}`,
    role: 'user',
    content: [{ type: 'text', text: COMPACTION_INSTRUCTION }],
    source: { kind: 'plugin', plugin: 'sessionlog-compaction' },
  };
  messages.push(instruction);
  return messages;
}

export type BracketState = {
  startSeq?: number;
  /** The selection the bracket's start recorded (absent in brackets of older versions). */
  selection?: CompactionSelection;
  summarySeq?: number;
  replacementSeq?: number;
  endSeq?: number;
  shadowedSeqs?: number[];
  shadowedTokenCount?: number;
  error?: string;
};

/** What the log holds of bracket `compactionId` (for resuming a retried compaction), scanning from `fromSeq`. */
export function bracketState(session: EventLookup, compactionId: string, fromSeq = 0): BracketState {
  const state: BracketState = {};
  for (let seq = Math.max(0, fromSeq); seq < session.nextSeq; seq++) {
    const e = session.eventAt(seq);
    if (!e) continue;
    switch (e.type) {
      case 'compaction/start':
        if (e.data.compactionId === compactionId) {
          state.startSeq = e.seq;
          if (e.data.selection) state.selection = e.data.selection;
        }
        break;
      case 'compaction/summary':
        if (e.data.compactionId === compactionId) {
          state.summarySeq = e.seq;
          state.shadowedSeqs = e.data.shadowedSeqs;
          state.shadowedTokenCount = e.data.shadowedTokenCount;
        }
        break;
      case 'user/message':
        if (e.data.source.kind === 'plugin' && e.data.source.compactionId === compactionId && e.surfaceOp !== 'append')
          state.replacementSeq = e.seq;
        break;
      case 'compaction/end':
        if (e.data.compactionId === compactionId) {
          state.endSeq = e.seq;
          if (e.data.error !== undefined) state.error = e.data.error;
        }
        break;
      default:
        break;
    }
  }
  return state;
}

/**
 * The open bracket that blocks a new compaction: the latest `compaction/start` without an end,
 * unless a later `session/run` or `session/end-seed` marks it stale (its run is gone).
 */
export function liveBracket(session: EventLookup): { compactionId: string; seq: number } | undefined {
  for (let seq = session.nextSeq - 1; seq >= 0; seq--) {
    const e = session.eventAt(seq);
    if (!e) continue;
    if (e.type === 'session/run' || e.type === 'session/end-seed' || e.type === 'compaction/end') return undefined;
    if (e.type === 'compaction/start') return { compactionId: e.data.compactionId, seq: e.seq };
  }
  return undefined;
}

/**
 * The span of original log seqs that surface nodes `seqs` (in surface order) stand for (see
 * `originalSeq`): what a checkpoint's preamble tells the model it can read again.
 */
export function originalSpan(session: EventLookup, seqs: readonly number[]): { start: number; end: number } {
  const eventAt = (seq: number) => session.eventAt(seq);
  return {
    start: Math.min(...seqs.map((seq) => originalSeq(seq, eventAt, 'start'))),
    end: Math.max(...seqs.map((seq) => originalSeq(seq, eventAt, 'end'))),
  };
}

/** The adjacent commit batch: `compaction/summary` then the replacement checkpoint message. */
export function planCommit(input: {
  compactionId: string;
  startSeq: number;
  nextSeq: number;
  shadowedSeqs: number[];
  shadowedTokenCount: number;
  summary: ContentBlock[];
  provider: string;
  model: string;
  usage?: TokenUsage;
  /** The summarizer call's cost in USD, when its model has prices. */
  cost?: number | undefined;
  time: number;
  /**
   * The session has the recall tools: the checkpoint says which log seqs it stands for (see
   * `originalSpan`) and how to read them.
   */
  recall?: { start: number; end: number };
  /** Prices the checkpoint message (logged as the summary's `summaryTokens`). */
  price?: (checkpoint: UserMessage) => number;
}): NewEvent[] {
  const start = input.shadowedSeqs[0]!;
  const end = input.shadowedSeqs[input.shadowedSeqs.length - 1]!;
  const checkpoint: UserMessage = {
    id: `checkpoint-${input.compactionId}`,
    role: 'user',
    content: frameCheckpoint(input.summary, input.recall),
    source: { kind: 'plugin', plugin: 'compact', compactionId: input.compactionId },
  };
  return [
    {
      type: 'compaction/summary',
      time: input.time,
      data: {
        compactionId: input.compactionId,
        summary: input.summary,
        shadowedRange: { start, end },
        shadowedSeqs: input.shadowedSeqs,
        shadowedTokenCount: input.shadowedTokenCount,
        provider: input.provider,
        model: input.model,
        ...(input.usage ? { usage: input.usage } : {}),
        ...(input.cost !== undefined ? { cost: input.cost } : {}),
        ...(input.price ? { summaryTokens: input.price(checkpoint) } : {}),
      },
    },
    {
      type: 'user/message',
      time: input.time,
      data: checkpoint,
      surfaceOp: { op: 'replace', start, end },
      sourceEventSeqs: [input.startSeq, input.nextSeq, ...input.shadowedSeqs],
    },
  ];
}
