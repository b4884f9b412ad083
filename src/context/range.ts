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
 * Selects `[nodes[0], nodes[k-1]]` where node k is the first kept node: walking from the tail,
 * the kept tail reaches `retainTokens`, then k moves head-ward until the cut is balanced.
 * Returns null when nothing can be compacted. `prices` must match `nodes` element-wise.
 */
export function selectCompactableRange(
  nodes: readonly number[],
  prices: readonly NodePrice[],
  retainTokens: number,
  eventAt: (seq: number) => SessionEvent | undefined,
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
  const cuts = balancedCuts(nodes, eventAt);
  while (k > 0 && !cuts[k]) k -= 1;
  if (k === 0) return null;
  const seqs = nodes.slice(0, k);
  return { start: seqs[0]!, end: seqs[k - 1]!, seqs, tokens: prices.slice(0, k).reduce((sum, p) => sum + p.tokens, 0) };
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
  const cuts = balancedCuts(nodes, eventAt);
  let tokens = range.tokens;
  for (let k = range.seqs.length - 1; k > 0; k--) {
    tokens -= prices[k]!.tokens;
    if (tokens * 2 <= range.tokens && cuts[k]) {
      const seqs = nodes.slice(0, k);
      return { start: seqs[0]!, end: seqs[k - 1]!, seqs, tokens };
    }
  }
  return null;
}
