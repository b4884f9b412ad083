/**
 * The surface: the ordered list of message-producing event seqs the model sees (dsh-spec §2).
 * Nodes are appended, or a positional span of nodes is replaced by one new node. The log
 * itself never changes; only this derived order does.
 */
import { SessionlogError } from './errors.js';
import { isSurfaceType, type StoredEvent, type SurfaceOp } from './events.js';

export type SurfaceSnapshot = { readonly nodes: readonly number[]; readonly replaceGeneration: number };

export type Replacement = { seq: number; start: number; end: number; shadowedSeqs: number[] };

function violation(message: string): SessionlogError {
  return new SessionlogError('SURFACE_VIOLATION', message);
}

function isSafeSeq(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;
}

/** Structural equality of two JSON values (key order ignored). */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) {
    const bb = b as unknown[];
    return a.length === bb.length && a.every((item, i) => jsonEqual(item, bb[i]));
  }
  const ak = Object.keys(a);
  const bk = Object.keys(b);
  if (ak.length !== bk.length) return false;
  const bo = b as Record<string, unknown>;
  return ak.every(
    (k) => Object.prototype.hasOwnProperty.call(bo, k) && jsonEqual((a as Record<string, unknown>)[k], bo[k]),
  );
}

/** A tool-result rewrite may change only the inner content of its single tool-result block. */
function withoutToolResultContent(data: unknown): unknown {
  const d = data as { message?: { content?: Array<Record<string, unknown>> } };
  const block = d.message?.content?.[0];
  if (!block) return data;
  return {
    ...d,
    message: { ...d.message, content: [{ ...block, content: null }, ...d.message!.content!.slice(1)] },
  };
}

/** How one event changes a surface node list: appended at the end, or a span replaced by the event's node. */
export type SurfaceChange =
  | { kind: 'append'; index: number; seq: number }
  | {
      kind: 'replace';
      index: number;
      seq: number;
      removed: number;
      start: number;
      end: number;
      shadowedSeqs: number[];
    };

/**
 * The surface rule in one place (dsh-spec §2): what `event` does to the node list `nodes`, or
 * undefined for a non-surface event. With `lookup` (an earlier event by seq) the event is
 * validated fully and a bad one throws SURFACE_VIOLATION; without it the event is trusted
 * (already validated by the log that holds it) and only located.
 */
export function surfaceChange(
  nodes: readonly number[],
  event: StoredEvent,
  lookup?: (seq: number) => StoredEvent | undefined,
): SurfaceChange | undefined {
  const op = lookup ? checkSurfaceEvent(nodes, event, lookup) : locate(nodes, event);
  if (op === undefined) return undefined;
  if (op === 'append') return { kind: 'append', index: nodes.length, seq: event.seq };
  const shadowedSeqs = nodes.slice(op.startIndex, op.endIndex + 1);
  return {
    kind: 'replace',
    index: op.startIndex,
    seq: event.seq,
    removed: shadowedSeqs.length,
    start: op.start,
    end: op.end,
    shadowedSeqs,
  };
}

/** Applies a change to a mutable node list (of seqs, or of anything mirrored by position). */
export function applySurfaceChange<T>(nodes: T[], change: SurfaceChange, node: T): void {
  if (change.kind === 'append') nodes.push(node);
  else nodes.splice(change.index, change.removed, node);
}

type Located = undefined | 'append' | { start: number; end: number; startIndex: number; endIndex: number };

function locate(nodes: readonly number[], event: StoredEvent): Located {
  const op = event.surfaceOp;
  if (op === undefined || !isSurfaceType(event.type)) return undefined;
  if (op === 'append') return 'append';
  const startIndex = nodes.lastIndexOf(op.start);
  const endIndex = nodes.lastIndexOf(op.end);
  if (startIndex < 0 || endIndex < startIndex) {
    throw new SessionlogError(
      'CORRUPT_LOG',
      `surface replace at seq ${event.seq} names nodes ${op.start}..${op.end}, which are not on this surface`,
    );
  }
  return { start: op.start, end: op.end, startIndex, endIndex };
}

function checkSurfaceEvent(
  nodes: readonly number[],
  event: StoredEvent,
  lookup: (seq: number) => StoredEvent | undefined,
): Located {
  const surface = isSurfaceType(event.type);
  if (!surface) {
    if (event.surfaceOp !== undefined || event.sourceEventSeqs !== undefined) {
      throw violation(
        `${event.type} at seq ${event.seq} is not a surface event and cannot carry surfaceOp or sourceEventSeqs`,
      );
    }
    return undefined;
  }
  if (event.surfaceOp === undefined) {
    throw violation(`${event.type} at seq ${event.seq} needs a surfaceOp ('append' or a replace)`);
  }
  const sources = event.sourceEventSeqs;
  if (sources !== undefined) {
    if (!Array.isArray(sources)) throw violation(`sourceEventSeqs at seq ${event.seq} must be an array`);
    if (sources.length === 0 && event.type !== 'assistant/message') {
      throw violation(`sourceEventSeqs at seq ${event.seq} may be empty only on assistant/message`);
    }
    const seen = new Set<number>();
    for (const s of sources) {
      if (!isSafeSeq(s)) throw violation(`sourceEventSeqs at seq ${event.seq} holds a non-seq value ${String(s)}`);
      if (s >= event.seq) throw violation(`sourceEventSeqs at seq ${event.seq} names a later or equal seq ${s}`);
      if (seen.has(s)) throw violation(`sourceEventSeqs at seq ${event.seq} names seq ${s} twice`);
      seen.add(s);
    }
  }
  const op: SurfaceOp = event.surfaceOp;
  if (op === 'append') return 'append';
  if (
    typeof op !== 'object' ||
    op === null ||
    op.op !== 'replace' ||
    Object.keys(op).length !== 3 ||
    !isSafeSeq(op.start) ||
    !isSafeSeq(op.end)
  ) {
    throw violation(`surfaceOp at seq ${event.seq} must be 'append' or {op:'replace', start, end}`);
  }
  const startIndex = nodes.indexOf(op.start);
  const endIndex = nodes.indexOf(op.end);
  if (startIndex < 0) throw violation(`replace start ${op.start} not found in surface`);
  if (endIndex < 0) throw violation(`replace end ${op.end} not found in surface`);
  if (startIndex > endIndex) throw violation(`replace start ${op.start} is positioned after end ${op.end}`);
  const shadowed = nodes.slice(startIndex, endIndex + 1);
  const sourceSet = new Set(sources ?? []);
  for (const s of shadowed) {
    if (!sourceSet.has(s))
      throw violation(`replace at seq ${event.seq} must list shadowed node ${s} in sourceEventSeqs`);
  }
  if (event.type === 'tool/result') {
    if (shadowed.length !== 1) throw violation(`a tool/result replace must shadow exactly one node`);
    const original = lookup(shadowed[0]!);
    if (original?.type !== 'tool/result') throw violation(`a tool/result replace must shadow a tool/result node`);
    if (!jsonEqual(withoutToolResultContent(original.data), withoutToolResultContent(event.data))) {
      throw violation(`a tool/result replace may change only the tool result's inner content`);
    }
  }
  return { start: op.start, end: op.end, startIndex, endIndex };
}

/** The incremental surface fold of a `Session`: the node list, validated on every apply. */
export class SurfaceFold {
  private nodes: number[];
  private generation: number;

  constructor(nodes: readonly number[] = [], generation = 0) {
    this.nodes = [...nodes];
    this.generation = generation;
  }

  snapshot(): SurfaceSnapshot {
    return Object.freeze({ nodes: Object.freeze([...this.nodes]), replaceGeneration: this.generation });
  }

  get nodeList(): readonly number[] {
    return this.nodes;
  }

  get replaceGeneration(): number {
    return this.generation;
  }

  clone(): SurfaceFold {
    return new SurfaceFold(this.nodes, this.generation);
  }

  /**
   * Validates `event` (already placed at its seq) and applies it. Returns the change it made;
   * throws SURFACE_VIOLATION and leaves state untouched on a rejected event.
   */
  apply(event: StoredEvent, lookup: (seq: number) => StoredEvent | undefined): SurfaceChange | undefined {
    const change = surfaceChange(this.nodes, event, lookup);
    if (change === undefined) return undefined;
    applySurfaceChange(this.nodes, change, event.seq);
    if (change.kind === 'replace') this.generation += 1;
    return change;
  }
}

/** Pure full replay: the surface of `events` plus every replacement made along the way. */
export function foldSurface(events: readonly StoredEvent[]): {
  nodes: number[];
  replaceGeneration: number;
  replacements: Replacement[];
} {
  const fold = new SurfaceFold();
  const replacements: Replacement[] = [];
  for (const event of events) {
    const change = fold.apply(event, (seq) => events[seq]);
    if (change?.kind === 'replace')
      replacements.push({ seq: change.seq, start: change.start, end: change.end, shadowedSeqs: change.shadowedSeqs });
  }
  return { nodes: [...fold.nodeList], replaceGeneration: fold.replaceGeneration, replacements };
}
