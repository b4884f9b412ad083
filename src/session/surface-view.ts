/**
 * The surface view (served as `GET /v1/sessions/:id/surface`, drawn by the inspector beside the
 * log): which surface events the next request carries, in surface order, and for every
 * surface event it no longer carries, the replacement that shadowed it and why — a compaction
 * summary, a prune, or another replacement. Pure: a thin reading of `foldSurface`.
 */
import { isEventOfType, type StoredEvent } from './events.js';
import { deriveEventMessage } from './session.js';
import { foldSurface } from './surface.js';

export type ShadowKind = 'summary' | 'prune' | 'replace';

export type SurfaceNodeView = {
  seq: number;
  type: string;
  /** Id of the message the node contributes to the next request; null when it contributes none. */
  messageId: string | null;
};

export type ShadowedView = {
  seq: number;
  /** Seq of the replacement event that took its place on the surface. */
  by: number;
  kind: ShadowKind;
  /** The compaction that shadowed it, for kind `summary`. */
  compactionId: string | null;
};

export type SurfaceView = {
  /** The surface nodes in surface order (which is not seq order after replacements). */
  nodes: SurfaceNodeView[];
  /** Every surface event no longer on the surface, in seq order. */
  shadowed: ShadowedView[];
  replaceGeneration: number;
};

function shadowKind(
  events: readonly StoredEvent[],
  replacement: StoredEvent,
): { kind: ShadowKind; compactionId: string | null } {
  // The pruner appends `compaction/prune` immediately before its replacement tool result.
  if (replacement.type === 'tool/result' && events[replacement.seq - 1]?.type === 'compaction/prune')
    return { kind: 'prune', compactionId: null };
  if (isEventOfType(replacement, 'user/message')) {
    const source = replacement.data.source;
    if (source.kind === 'plugin' && source.compactionId !== undefined)
      return { kind: 'summary', compactionId: source.compactionId };
  }
  return { kind: 'replace', compactionId: null };
}

/** The surface view of a whole log (seq 0 first). Throws SURFACE_VIOLATION as `foldSurface` does. */
export function foldSurfaceView(events: readonly StoredEvent[]): SurfaceView {
  const folded = foldSurface(events);
  const shadowed: ShadowedView[] = [];
  for (const replacement of folded.replacements) {
    const { kind, compactionId } = shadowKind(events, events[replacement.seq]!);
    for (const seq of replacement.shadowedSeqs) shadowed.push({ seq, by: replacement.seq, kind, compactionId });
  }
  shadowed.sort((a, b) => a.seq - b.seq);
  const nodes = folded.nodes.map((seq) => {
    const event = events[seq]!;
    return { seq, type: event.type, messageId: deriveEventMessage(event)?.id ?? null };
  });
  return { nodes, shadowed, replaceGeneration: folded.replaceGeneration };
}
