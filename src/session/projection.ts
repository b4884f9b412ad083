/**
 * Projections (dsh-spec §9.1): pure folds of session events into JSON views for clients. A
 * projection's state can be checkpointed at a seq, so a cold read folds only the tail.
 */
import { z } from 'zod';
import { SessionlogError } from './errors.js';
import type { StoredEvent } from './events.js';
import type { JsonValue } from './json.js';
import type { Message } from './messages.js';
import { deriveEventMessage } from './session.js';
import { applySurfaceChange, surfaceChange } from './surface.js';

export type ProjectionDefinition<S extends JsonValue = JsonValue, V = S> = {
  key: string;
  /** Bump on any change of state shape or fold semantics; older checkpoints are then refolded. */
  stateVersion: number;
  stateSchema: z.ZodType<S>;
  init(): S;
  /** Pure. Must return the same reference when the event does not concern this projection. */
  apply(state: S, event: StoredEvent): S;
  view?(state: S): V;
  /** Optional consistency check of a checkpointed state taken at `seq`; throw to refuse it. */
  checkCheckpoint?(state: S, seq: number): void;
};

/** One projection's checkpoint: its state after folding events `0..seq`. */
export type ProjectionRow = { ver: number; seq: number; val: JsonValue };
export type ProjectionRows = Record<string, ProjectionRow>;

/** A set of projection definitions with fold, checkpoint and restore. */
export class ProjectionRegistry {
  private readonly defs = new Map<string, ProjectionDefinition>();

  register<S extends JsonValue, V>(def: ProjectionDefinition<S, V>): this {
    const existing = this.defs.get(def.key);
    if (existing && existing.stateVersion !== def.stateVersion) {
      throw new SessionlogError(
        'INVALID_ARGUMENT',
        `projection "${def.key}" is already registered with stateVersion ${existing.stateVersion}`,
      );
    }
    this.defs.set(def.key, def as unknown as ProjectionDefinition);
    return this;
  }

  get keys(): string[] {
    return [...this.defs.keys()];
  }

  definition(key: string): ProjectionDefinition | undefined {
    return this.defs.get(key);
  }

  /** Folds every projection from `init` over `events`. */
  foldAll(events: Iterable<StoredEvent>): Record<string, JsonValue> {
    const states: Record<string, JsonValue> = {};
    for (const [key, def] of this.defs) states[key] = def.init();
    for (const event of events) for (const [key, def] of this.defs) states[key] = def.apply(states[key]!, event);
    return states;
  }

  /**
   * The seq to read from for a cold restore: one below the first seq any usable row needs,
   * so the read also proves the log still reaches the checkpoint (dsh-spec §9.2).
   */
  restoreFloor(rows: ProjectionRows): number {
    let need = Number.POSITIVE_INFINITY;
    for (const [key, def] of this.defs) {
      const row = rows[key];
      need = Math.min(need, row && row.ver === def.stateVersion ? row.seq + 1 : 0);
    }
    return need === Number.POSITIVE_INFINITY ? 0 : Math.max(need - 1, 0);
  }

  /**
   * Restores every projection from `rows` plus `events` (a contiguous read starting at
   * `baseSeq`). Throws when a row cannot be used and `baseSeq > 0` (the caller must re-read
   * from 0); with `baseSeq = 0` unusable rows are refolded.
   */
  restore(
    rows: ProjectionRows,
    events: readonly StoredEvent[],
    baseSeq: number,
  ): { states: Record<string, JsonValue>; asOfSeq: number } {
    const endSeq = events.length > 0 ? events[events.length - 1]!.seq : baseSeq - 1;
    if (events.length > 0 && events[0]!.seq !== baseSeq) {
      throw new SessionlogError(
        'INVALID_ARGUMENT',
        `restore read starts at seq ${events[0]!.seq}, expected ${baseSeq}`,
      );
    }
    const states: Record<string, JsonValue> = {};
    for (const [key, def] of this.defs) {
      const row = rows[key];
      const usable = row !== undefined && row.ver === def.stateVersion && row.seq >= baseSeq - 1 && row.seq <= endSeq;
      let state: JsonValue;
      let from: number;
      if (usable) {
        const parsed = def.stateSchema.safeParse(row.val);
        if (!parsed.success)
          throw new SessionlogError('INVALID_ARGUMENT', `checkpoint of projection "${key}" does not match its schema`);
        state = parsed.data;
        def.checkCheckpoint?.(state, row.seq);
        from = row.seq + 1;
      } else if (baseSeq === 0) {
        state = def.init();
        from = 0;
      } else {
        throw new SessionlogError(
          'INVALID_ARGUMENT',
          `checkpoint of projection "${key}" is unusable at seq ${baseSeq}; re-read from seq 0`,
        );
      }
      for (let i = from - baseSeq; i < events.length; i++) state = def.apply(state, events[i]!);
      states[key] = state;
    }
    return { states, asOfSeq: endSeq };
  }

  /** Checkpoint rows for `states` folded through `seq`. */
  checkpoint(states: Record<string, JsonValue>, seq: number): ProjectionRows {
    const rows: ProjectionRows = {};
    for (const [key, def] of this.defs) rows[key] = { ver: def.stateVersion, seq, val: states[key] ?? def.init() };
    return rows;
  }
}

/**
 * The surface as a projection: the surface node list (the seqs of the events whose messages the
 * model sees, in surface order). Its checkpoint holds seqs, not messages (DESIGN §4: "the
 * surface node list"), so it costs a few bytes per node; the messages are derived from the
 * nodes' own events ({@link surfaceMessages}), which every reader holds in its validated copy.
 * Version 1 held each node's message and is refolded from the log when read.
 */
export type SurfaceNodeState = { nodes: number[]; replaceGeneration: number };

export const surfaceProjection: ProjectionDefinition<SurfaceNodeState & JsonValue, never> = {
  key: 'surface',
  stateVersion: 2,
  stateSchema: z
    .object({ nodes: z.array(z.number().int().nonnegative()), replaceGeneration: z.number().int().nonnegative() })
    .strict() as unknown as z.ZodType<SurfaceNodeState & JsonValue>,
  init: () => ({ nodes: [], replaceGeneration: 0 }) as SurfaceNodeState & JsonValue,
  apply(state, event) {
    const change = surfaceChange(state.nodes, event);
    if (change === undefined) return state;
    const nodes = [...state.nodes];
    applySurfaceChange(nodes, change, event.seq);
    return { nodes, replaceGeneration: state.replaceGeneration + (change.kind === 'replace' ? 1 : 0) } as typeof state;
  },
  checkCheckpoint(state, seq) {
    const seen = new Set<number>();
    for (const node of state.nodes) {
      if (node > seq || seen.has(node)) {
        throw new SessionlogError(
          'INVALID_ARGUMENT',
          `surface checkpoint at seq ${seq} names node ${node}, which it cannot hold`,
        );
      }
      seen.add(node);
    }
  },
};

/**
 * The model-visible messages of a surface state: each node's event's message, in surface
 * order. `eventAt` reads the log the state was folded from; a node it does not hold is a
 * checkpoint that does not belong to this log (INVALID_ARGUMENT).
 */
export function surfaceMessages(state: SurfaceNodeState, eventAt: (seq: number) => StoredEvent | undefined): Message[] {
  const messages: Message[] = [];
  for (const seq of state.nodes) {
    const event = eventAt(seq);
    if (event === undefined) throw new SessionlogError('INVALID_ARGUMENT', `surface node ${seq} is not in the log`);
    const message = deriveEventMessage(event);
    if (message) messages.push(message);
  }
  return messages;
}
