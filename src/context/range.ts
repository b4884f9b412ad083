/**
 * Range selection for compaction (dsh-spec §4.3): a head-anchored span of surface nodes whose
 * edges never split a tool call from its result, leaving a recent tail of at least
 * `retainTokens` verbatim.
 */
import { SessionlogError, type SessionEvent } from '../session/index.js';
import type { NodePrice } from './meter-types.js';

export type CompactableRange = { start: number; end: number; seqs: number[]; tokens: number };

function openCallsDelta(event: SessionEvent | undefined): number {
  if (event?.type === 'assistant/message')
    return event.data.message.content.filter((b) => b.type === 'tool-call').length;
  if (event?.type === 'tool/result') return -1;
  return 0;
}

/**
 * For each cut position i (before node i, 0..n), whether it is tool-pairing balanced: no
 * assistant tool call before the cut waits for a result after it.
 */
export function balancedCuts(nodes: readonly number[], eventAt: (seq: number) => SessionEvent | undefined): boolean[] {
  const balanced: boolean[] = [true];
  let open = 0;
  for (const seq of nodes) {
    open += openCallsDelta(eventAt(seq));
    if (open < 0)
      throw new SessionlogError('CORRUPT_LOG', `corrupt surface: tool result at seq ${seq} has no open call`);
    balanced.push(open === 0);
  }
  return balanced;
}

/**
 * The original log seq a surface node stands for: a replacement (an earlier checkpoint, a pruned
 * result) stands for the nodes it replaced, back to the originals; `side` picks the first or the
 * last of them.
 */
export function originalSeq(
  seq: number,
  eventAt: (seq: number) => SessionEvent | undefined,
  side: 'start' | 'end' = 'start',
): number {
  for (;;) {
    const op = eventAt(seq)?.surfaceOp;
    if (op === undefined || op === 'append' || op.start >= seq) return seq;
    seq = side === 'start' ? op.start : op.end;
  }
}

/** Limits on a selection beyond the retained tail. */
export type RangeLimits = {
  /**
   * Nodes standing for log seqs at or after this one (`originalSeq`) are never compacted: the
   * current turn's own user message and what follows it.
   */
  protectFromSeq?: number;
  /** The selection holds at most this many tokens (what one summarizer request can take); the head-anchored part that fits is taken. */
  maxTokens?: number;
};

/**
 * Selects `[nodes[0], nodes[k-1]]` where node k is the first kept node: walking from the tail,
 * the kept tail reaches `retainTokens`, then k moves head-ward until the cut is balanced, is
 * before every protected node and leaves at most `limits.maxTokens` in the selection. Returns
 * null when nothing can be compacted. `prices` must match `nodes` element-wise.
 */
export function selectCompactableRange(
  nodes: readonly number[],
  prices: readonly NodePrice[],
  retainTokens: number,
  eventAt: (seq: number) => SessionEvent | undefined,
  limits: RangeLimits = {},
): CompactableRange | null {
  if (prices.length !== nodes.length || prices.some((p, i) => p.seq !== nodes[i])) {
    throw new SessionlogError(
      'INVALID_ARGUMENT',
      'token measurement does not match the current surface; measure again',
    );
  }
  let k = nodes.length;
  let kept = 0;
  if (k === 0) return null;
  // Keep at least the newest node; stop at the first index where the kept tail reaches the budget.
  for (let i = nodes.length - 1; i >= 0; i--) {
    kept += prices[i]!.tokens;
    k = i;
    if (kept >= retainTokens) break;
  }
  if (limits.protectFromSeq !== undefined) {
    const firstProtected = nodes.findIndex((seq) => originalSeq(seq, eventAt) >= limits.protectFromSeq!);
    if (firstProtected >= 0) k = Math.min(k, firstProtected);
  }
  const cuts = balancedCuts(nodes, eventAt);
  let tokens = prices.slice(0, k).reduce((sum, p) => sum + p.tokens, 0);
  while (k > 0 && (!cuts[k] || (limits.maxTokens !== undefined && tokens > limits.maxTokens))) {
    k -= 1;
    tokens -= prices[k]!.tokens;
  }
  if (k === 0) return null;
  const seqs = nodes.slice(0, k);
  // Summarising nothing but earlier checkpoints would only restate them.
  if (seqs.every((seq) => isCheckpoint(eventAt(seq)))) return null;
  return { start: seqs[0]!, end: seqs[k - 1]!, seqs, tokens };
}

/** A compaction's replacement message (a checkpoint standing for summarised history). */
function isCheckpoint(event: SessionEvent | undefined): boolean {
  return (
    event?.type === 'user/message' &&
    event.surfaceOp !== 'append' &&
    event.data.source.kind === 'plugin' &&
    event.data.source.compactionId !== undefined
  );
}

/**
 * A head-anchored sub-range of `range` holding at most half its tokens, ending on a balanced
 * cut (used when the summarizer request itself overflows), or null when none exists.
 */
export function halveCompactableRange(
  range: CompactableRange,
  nodes: readonly number[],
  prices: readonly NodePrice[],
  eventAt: (seq: number) => SessionEvent | undefined,
): CompactableRange | null {
  const half = selectCompactableRange(nodes, prices, 0, eventAt, {
    protectFromSeq: nodes[range.seqs.length] ?? Number.POSITIVE_INFINITY,
    maxTokens: Math.floor(range.tokens / 2),
  });
  return half && half.seqs.length < range.seqs.length ? half : null;
}
