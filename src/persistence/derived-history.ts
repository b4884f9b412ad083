/**
 * Cold reads of derived history through the projection cache (dsh-spec §9.3): restore the
 * checkpointed surface projection and fold only the log's tail. Any problem with the cache
 * (absent, foreign, stale, broken, a log truncated below the checkpoint) falls back to a full
 * fold from seq 0, so the answer is always the one a full fold gives. A store with no validated
 * copy of the session verifies the checkpointed prefix by the record's anchor and parses only
 * the tail (anchor.ts); without a usable anchor it validates the whole log first, as every read.
 */
import {
  ProjectionRegistry,
  SessionlogError,
  isSessionlogError,
  surfaceMessages,
  surfaceProjection,
  type JsonValue,
  type Message,
  type SessionView,
  type SurfaceNodeState,
} from '../session/index.js';
import { LRUCache } from 'lru-cache';
import { sliceEvents } from './plan.js';
import type { ProjectionCacheRecord } from './projection-cache.js';
import type { AnchoredRead, SessionStore } from './store.js';

export type DerivedHistory = {
  /** The model-visible messages, in surface order. */
  messages: Message[];
  /** Every registered projection's state, keyed by projection key. */
  states: Record<string, JsonValue>;
  /** The last seq folded (-1 for an empty log). */
  asOfSeq: number;
  /** Whether a cache checkpoint was used (false: full fold from seq 0). */
  fromCache: boolean;
};

export type DerivedHistoryOptions = {
  /** Write the refreshed checkpoint even if the cache already holds one at `asOfSeq`. */
  forceWrite?: boolean;
  /** Called when the cache could not be used or written (fail-soft); defaults to nothing. */
  onCacheProblem?: (problem: unknown) => void;
};

/** A registry with the surface projection, the default for {@link readDerivedHistory}. */
export function defaultProjectionRegistry(): ProjectionRegistry {
  return new ProjectionRegistry().register(surfaceProjection);
}

/**
 * Reads a session's derived history cold. `registry` must include {@link surfaceProjection};
 * other projections in it are restored and checkpointed alongside.
 */
export async function readDerivedHistory(
  store: SessionStore,
  id: string,
  registry: ProjectionRegistry = defaultProjectionRegistry(),
  options: DerivedHistoryOptions = {},
): Promise<DerivedHistory> {
  const { restored, session } = await restoreProjections(store, id, registry, options);
  const surface = restored.states[surfaceProjection.key] as SurfaceNodeState & JsonValue;
  return { messages: surfaceMessages(surface, (seq) => session.storedAt(seq)), ...restored };
}

/**
 * Writes a fresh checkpoint of `id`'s projections (call after `turn/end`, once the turn is
 * durable). Incremental: folds only what the existing checkpoint lacks. Fail-soft.
 */
export async function writeProjectionCheckpoint(
  store: SessionStore,
  id: string,
  registry: ProjectionRegistry = defaultProjectionRegistry(),
  options: Omit<DerivedHistoryOptions, 'forceWrite'> = {},
): Promise<{ asOfSeq: number }> {
  const { restored } = await restoreProjections(store, id, registry, { ...options, forceWrite: true });
  return { asOfSeq: restored.asOfSeq };
}

/** What a restore reads of the session: the store's validated copy, or an anchored read (store.ts). */
type SessionReads = Pick<SessionView, 'header' | 'nextSeq' | 'storedAt'>;

/**
 * Every projection restored from the cache plus the log's tail (or folded from seq 0), the
 * checkpoint refreshed; with the session the events came from. A cold store reads the session
 * from the checkpoint's anchor when it verifies (only the tail parsed, anchor.ts), else the
 * store's validated copy is read.
 */
async function restoreProjections(
  store: SessionStore,
  id: string,
  registry: ProjectionRegistry,
  options: DerivedHistoryOptions,
): Promise<{ restored: Omit<DerivedHistory, 'messages'>; session: SessionReads }> {
  if (registry.definition(surfaceProjection.key) === undefined) {
    throw new SessionlogError(
      'INVALID_ARGUMENT',
      `the projection registry must include surfaceProjection (key "${surfaceProjection.key}")`,
    );
  }
  const report = options.onCacheProblem ?? (() => undefined);
  let record = await cacheRecord(store, id, report);
  const anchored = record && (await readAnchored(store, id, record, report));
  // The stored log is not the one the record's anchor sealed (damaged, or changed under it even
  // into another valid log): its checkpoint describes another log and is not used at all.
  if (anchored === 'differs') record = undefined;
  const fromAnchor = typeof anchored === 'object' ? restoreFromCache(record!, anchored, registry, report) : undefined;
  let session: SessionReads;
  let cached: Restored | undefined;
  let read: AnchoredRead | undefined;
  if (typeof anchored === 'object' && fromAnchor?.used) {
    session = read = anchored;
    cached = fromAnchor;
  } else {
    const copy = await store.session(id);
    session = copy;
    cached = record && restoreFromCache(record, copy, registry, report);
    // Read through the store's validated copy, the checkpoint is checked against the copy's own
    // surface fold (its anchor is not: that would hash the prefix the copy saves reading). One
    // that disagrees describes another log (changed under it, even into another valid log): it
    // is not used, and the read folds from seq 0.
    if (cached?.used && !sameSurface(cached.states[surfaceProjection.key], copy)) {
      report(
        new SessionlogError(
          'INVALID_ARGUMENT',
          `session ${id}: the surface of the projection checkpoint at seq ${record!.rows[surfaceProjection.key]?.seq} ` +
            "is not the stored log's; refolded from seq 0",
        ),
      );
      record = undefined;
      cached = undefined;
    }
  }
  const restored = cached ?? registry.restore({}, sliceEvents(session, 0, undefined), 0);
  if (options.forceWrite || writeBackDue(record, cached, restored.asOfSeq)) {
    try {
      const anchor = read ? read.anchor : await store.prefixAnchor(id, restored.asOfSeq);
      await store.projectionCache.put(id, {
        identity: { createdAt: session.header.createdAt },
        rows: registry.checkpoint(restored.states, restored.asOfSeq),
        ...(anchor?.seq === restored.asOfSeq ? { anchor } : {}),
      });
    } catch (error) {
      // Fail-soft: a cache that cannot be written stays stale; the read itself succeeded.
      report(error);
    }
  }
  return {
    restored: { states: restored.states, asOfSeq: restored.asOfSeq, fromCache: cached?.used === true },
    session,
  };
}

/**
 * Whether a read writes its checkpoint back: when it had none it could use; otherwise, once the
 * log grew past it, when the record has no anchor yet or on the schedule a writer keeps
 * ({@link checkpointDue}), so that repeated reads of a growing log do not rewrite the record (and
 * sync it to disk) each time.
 */
function writeBackDue(
  record: ProjectionCacheRecord | undefined,
  cached: Restored | undefined,
  asOfSeq: number,
): boolean {
  if (cached?.used !== true || Number.isNaN(cached.previousSeq)) return true;
  if (cached.previousSeq === asOfSeq) return false;
  return record?.anchor === undefined || checkpointDue(cached.previousSeq, asOfSeq);
}

/** Whether a restored surface state is the surface `session` folded itself. */
function sameSurface(state: JsonValue | undefined, session: SessionView): boolean {
  const surface = state as SurfaceNodeState | undefined;
  const nodes = session.surfaceNodes;
  return (
    surface !== undefined &&
    surface.replaceGeneration === session.replaceGeneration &&
    surface.nodes.length === nodes.length &&
    surface.nodes.every((node, i) => node === nodes[i])
  );
}

/** The session's checkpoint record; undefined when there is none or it cannot be read (fail-soft). */
async function cacheRecord(
  store: SessionStore,
  id: string,
  report: (problem: unknown) => void,
): Promise<ProjectionCacheRecord | undefined> {
  try {
    return await store.projectionCache.get(id);
  } catch (error) {
    // A session that does not exist is reported by the read of the session itself.
    if (isSessionlogError(error, 'SESSION_NOT_FOUND')) return undefined;
    report(error);
    return undefined;
  }
}

/**
 * The session read from the record's anchor (store.ts `readAnchored`), or what kept the store from
 * it; undefined when the record has no anchor at its surface row's seq, or the read failed.
 */
async function readAnchored(
  store: SessionStore,
  id: string,
  record: ProjectionCacheRecord,
  report: (problem: unknown) => void,
): Promise<AnchoredRead | 'held' | 'differs' | undefined> {
  const anchor = record.anchor;
  const row = record.rows[surfaceProjection.key];
  if (anchor === undefined || row === undefined || row.ver !== surfaceProjection.stateVersion || row.seq !== anchor.seq)
    return undefined;
  const surface = surfaceProjection.stateSchema.safeParse(row.val);
  if (!surface.success) return undefined;
  try {
    return await store.readAnchored(id, anchor, surface.data);
  } catch (error) {
    // The full read that follows reports a session that is gone or damaged as it always does.
    report(error);
    return undefined;
  }
}

/**
 * When a writer refreshes the checkpoint (dsh-spec §9.3): once the log has grown past it by at
 * least `minEvents` and by `ratio` of its length. A checkpoint holds the whole surface node
 * list (a few bytes per node), so writing it after every turn would still grow with the
 * conversation; written this way, its bytes and
 * CPU per turn stay bounded (each write is paid for by `ratio` × the log's events), and a cold
 * read folds a tail of at most max(`minEvents`, `ratio` × the log) events past it.
 */
export type CheckpointPolicy = { minEvents: number; ratio: number };

export const DEFAULT_CHECKPOINT_POLICY: CheckpointPolicy = { minEvents: 256, ratio: 0.25 };

/** Whether a log whose last seq is `headSeq`, checkpointed at `checkpointSeq` (-1: none), is due a new checkpoint. */
export function checkpointDue(
  checkpointSeq: number,
  headSeq: number,
  policy: CheckpointPolicy = DEFAULT_CHECKPOINT_POLICY,
): boolean {
  const grown = headSeq - checkpointSeq;
  return grown >= policy.minEvents && grown >= policy.ratio * (headSeq + 1);
}

/**
 * The checkpoint seqs a worker wrote, per session (bounded, least recently used out). A session
 * it has not written counts as checkpointed at seq -1: its first checkpoint comes once its log
 * holds `minEvents` events.
 */
export class CheckpointSchedule {
  private readonly written: LRUCache<string, number>;

  constructor(
    readonly policy: CheckpointPolicy = DEFAULT_CHECKPOINT_POLICY,
    maxSessions = 10_000,
  ) {
    if (!(Number.isSafeInteger(policy.minEvents) && policy.minEvents > 0))
      throw new SessionlogError('INVALID_ARGUMENT', 'checkpoint minEvents must be a positive integer');
    if (!(policy.ratio >= 0 && policy.ratio <= 1))
      throw new SessionlogError('INVALID_ARGUMENT', 'checkpoint ratio must be in [0, 1]');
    this.written = new LRUCache({ max: maxSessions });
  }

  /** Whether session `id`, whose log now ends at `headSeq`, is due a checkpoint. */
  due(id: string, headSeq: number): boolean {
    return checkpointDue(this.written.get(id) ?? -1, headSeq, this.policy);
  }

  /** Notes a checkpoint written for `id` at `seq`. */
  wrote(id: string, seq: number): void {
    this.written.set(id, Math.max(seq, this.written.get(id) ?? -1));
  }
}

type Restored = { states: Record<string, JsonValue>; asOfSeq: number; previousSeq: number; used: boolean };

function restoreFromCache(
  record: ProjectionCacheRecord,
  session: SessionReads,
  registry: ProjectionRegistry,
  report: (problem: unknown) => void,
): Restored | undefined {
  try {
    if (record.identity.createdAt !== session.header.createdAt) return undefined;
    const floor = registry.restoreFloor(record.rows);
    const tail = sliceEvents(session, floor, undefined);
    const restored = registry.restore(record.rows, tail, floor);
    // A row of another state version (e.g. before an upgrade) was refolded, not used: the
    // read is then not from the cache, and the record is rewritten in the current version.
    const usable = registry.keys.map((key) => {
      const row = record.rows[key];
      return row !== undefined && row.ver === registry.definition(key)!.stateVersion ? row.seq : Number.NaN;
    });
    if (usable.some((seq) => Number.isNaN(seq))) return { ...restored, previousSeq: Number.NaN, used: false };
    const previousSeq = usable.every((seq) => seq === usable[0]) ? usable[0]! : Number.NaN;
    return { ...restored, previousSeq, used: true };
  } catch (error) {
    // Stale, broken or foreign checkpoint (or a log shorter than it): refold from seq 0.
    report(error);
    return undefined;
  }
}
