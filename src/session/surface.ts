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
  return ak.every((k) => Object.prototype.hasOwnProperty.call(bo, k) && jsonEqual((a as Record<string, unknown>)[k], bo[k]));
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

/**
 * Incremental surface fold. `plan` validates a candidate without mutating; `apply` commits.
 * `lookup` returns an earlier event by seq (needed for tool-result rewrite checks).
 */
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
   * Validates `event` (already placed at its seq) and applies it. Returns the replacement
   * record for a replace, `undefined` otherwise. Throws SURFACE_VIOLATION and leaves state
   * untouched on a rejected event.
   */
  apply(event: StoredEvent, lookup: (seq: number) => StoredEvent | undefined): Replacement | undefined {
    const op = this.check(event, lookup);
    if (op === undefined) return undefined;
    if (op === 'append') {
      this.nodes.push(event.seq);
      return undefined;
    }
    const shadowed = this.nodes.splice(op.startIndex, op.endIndex - op.startIndex + 1, event.seq);
    this.generation += 1;
    return { seq: event.seq, start: op.start, end: op.end, shadowedSeqs: shadowed };
  }

  private check(
    event: StoredEvent,
    lookup: (seq: number) => StoredEvent | undefined,
  ): undefined | 'append' | { start: number; end: number; startIndex: number; endIndex: number } {
    const surface = isSurfaceType(event.type);
    if (!surface) {
      if (event.surfaceOp !== undefined || event.sourceEventSeqs !== undefined) {
        throw violation(`${event.type} at seq ${event.seq} is not a surface event and cannot carry surfaceOp or sourceEventSeqs`);
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
    const startIndex = this.nodes.indexOf(op.start);
    const endIndex = this.nodes.indexOf(op.end);
    if (startIndex < 0) throw violation(`replace start ${op.start} not found in surface`);
    if (endIndex < 0) throw violation(`replace end ${op.end} not found in surface`);
    if (startIndex > endIndex) throw violation(`replace start ${op.start} is positioned after end ${op.end}`);
    const shadowed = this.nodes.slice(startIndex, endIndex + 1);
    const sourceSet = new Set(sources ?? []);
    for (const s of shadowed) {
      if (!sourceSet.has(s)) throw violation(`replace at seq ${event.seq} must list shadowed node ${s} in sourceEventSeqs`);
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
}

/** Pure full replay: the surface of `events` plus every replacement made along the way. */
export function foldSurface(events: readonly StoredEvent[]): { nodes: number[]; replaceGeneration: number; replacements: Replacement[] } {
  const fold = new SurfaceFold();
  const replacements: Replacement[] = [];
  for (const event of events) {
    const r = fold.apply(event, (seq) => events[seq]);
    if (r) replacements.push(r);
  }
  return { nodes: [...fold.nodeList], replaceGeneration: fold.replaceGeneration, replacements };
}
