/**
 * Model-free pruning of oversized tool results (dsh-spec §5): the middle of a long result is
 * replaced by a marker, keeping its head and tail. Each rewrite is a `tool/result`
 * replacement preceded by `compaction/prune`, so the original stays in the log.
 */
import { SessionlogError, type ContentBlock, type NewEvent, type SessionView } from '../session/index.js';
import { spillText } from './spill.js';

export type PrunerConfig = {
  /** Results whose text exceeds this many code points are pruned. */
  thresholdChars: number;
  headChars: number;
  tailChars: number;
};

export const PRUNE_MARKER = '\n\n[... tool result middle pruned ...]\n\n';
const MARKER_LENGTH = [...PRUNE_MARKER].length;

export const DEFAULT_PRUNER_CONFIG: PrunerConfig = { thresholdChars: 8192, headChars: 4096, tailChars: 1024 };

/** Validates a pruner config; throws with the field to fix. */
export function resolvePrunerConfig(config: Partial<PrunerConfig> = {}): PrunerConfig {
  const resolved = { ...DEFAULT_PRUNER_CONFIG, ...config };
  for (const [key, value] of Object.entries(resolved)) {
    if (!Number.isSafeInteger(value) || value < 0)
      throw new SessionlogError(
        'INVALID_ARGUMENT',
        `pruner ${key} must be a non-negative integer, got ${String(value)}`,
      );
  }
  if (resolved.thresholdChars <= 0)
    throw new SessionlogError('INVALID_ARGUMENT', 'pruner thresholdChars must be positive');
  if (resolved.headChars + MARKER_LENGTH + resolved.tailChars > resolved.thresholdChars) {
    throw new SessionlogError(
      'INVALID_ARGUMENT',
      `pruner headChars + marker (${MARKER_LENGTH}) + tailChars must not exceed thresholdChars`,
    );
  }
  return resolved;
}

/**
 * Head/marker/tail replacement of `blocks`' text (code points, never splitting a surrogate
 * pair), or null when the text is within the threshold. Non-text blocks keep their order.
 */
export function pruneContent(blocks: readonly ContentBlock[], config: PrunerConfig): ContentBlock[] | null {
  const lengths = blocks.map((b) => (b.type === 'text' ? [...b.text].length : 0));
  const total = lengths.reduce((a, b) => a + b, 0);
  if (total <= config.thresholdChars) return null;
  const cutStart = config.headChars;
  const cutEnd = total - config.tailChars;
  const out: ContentBlock[] = [];
  let offset = 0;
  let markerPlaced = false;
  for (const [i, block] of blocks.entries()) {
    if (block.type !== 'text') {
      out.push(block);
      continue;
    }
    const chars = [...block.text];
    const start = offset;
    const end = offset + lengths[i]!;
    offset = end;
    if (end <= cutStart || start >= cutEnd) {
      out.push(block);
      continue;
    }
    const keepHead = chars.slice(0, Math.max(0, cutStart - start)).join('');
    const keepTail = chars.slice(Math.max(0, cutEnd - start)).join('');
    const text = keepHead + (markerPlaced ? '' : PRUNE_MARKER) + keepTail;
    markerPlaced = true;
    if (text.length > 0) out.push({ type: 'text', text });
  }
  return out;
}

/**
 * The pruner's escalation for a small budget (the pressure ladder's "prune harder"): a result
 * over an eighth of the budget (about 4 characters a token) is cut, never more leniently than
 * `config` itself.
 */
export function escalatedPrunerConfig(config: PrunerConfig, budgetTokens: number): PrunerConfig {
  const thresholdChars = Math.min(config.thresholdChars, Math.max(512, Math.floor((budgetTokens * 4) / 8)));
  if (thresholdChars === config.thresholdChars) return config;
  const tailChars = Math.floor(thresholdChars * 0.2);
  return { thresholdChars, headChars: thresholdChars - MARKER_LENGTH - tailChars, tailChars };
}

/** How a prune pass shapes the results it cuts. */
export type PruneOptions = {
  /**
   * The escalation: a result whose whole output is stored as an artifact is spilled behind a
   * preview and its locator (read_artifact pages through it) rather than cut in the middle.
   */
  escalation?: boolean;
};

/**
 * The preview and locator of a result whose whole output is an artifact (its `meta.locator`),
 * within `maxBytes`; null when the result names no artifact or the preview would not be shorter.
 * Under escalation even a `read_artifact` page is spilled: its own artifact holds the page.
 */
function spilled(meta: unknown, text: string, maxBytes: number): string | null {
  const locator = (meta as { locator?: unknown } | undefined)?.locator;
  if (typeof locator !== 'string') return null;
  const inline = spillText({ text, locator, toolName: '', maxInlineBytes: maxBytes });
  return inline === text ? null : inline;
}

/**
 * The events that prune every oversized `tool/result` on the current surface: for each, a
 * `compaction/prune` pricing the original, immediately followed by the replacement. `price`
 * gives a node's current token price. Empty when nothing needs pruning (idempotent).
 */
export function planPrune(
  session: SessionView,
  config: PrunerConfig,
  price: (seq: number) => number,
  time: number,
  options: PruneOptions = {},
): NewEvent[] {
  const events: NewEvent[] = [];
  for (const seq of session.surfaceNodes) {
    const event = session.eventAt(seq);
    if (event?.type !== 'tool/result') continue;
    const data = event.data;
    const block = data.message.content[0];
    let content = pruneContent(block.content, config);
    if (!content) continue;
    if (options.escalation) {
      const text = block.content.map((b) => (b.type === 'text' ? b.text : '')).join('');
      const inline = spilled(data.meta, text, config.thresholdChars);
      // Spill takes the text only: the result's images and files stay, in their order, after the preview.
      if (inline !== null)
        content = [
          { type: 'text', text: inline },
          ...block.content.filter((b) => b.type === 'image' || b.type === 'file'),
        ];
    }
    events.push({
      type: 'compaction/prune',
      time,
      data: {
        shadowedRange: { start: seq, end: seq },
        shadowedSeqs: [seq],
        shadowedTokenCount: price(seq),
        ...(options.escalation ? { reason: 'escalation' as const } : {}),
      },
    });
    events.push({
      type: 'tool/result',
      time,
      data: { ...data, message: { ...data.message, content: [{ ...block, content }] } },
      surfaceOp: { op: 'replace', start: seq, end: seq },
      sourceEventSeqs: [seq],
    });
  }
  return events;
}
