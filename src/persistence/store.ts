/**
 * The `SessionStore` seam (DESIGN §4): every backend keeps the append-only log durable and
 * exactly-once under retries, and passes one conformance suite (test/conformance).
 */
import type { NewEvent, SessionHeader, SessionView, StoredEvent } from '../session/index.js';
import type { ArtifactStore } from './artifacts.js';
import type { ProjectionCacheStore } from './projection-cache.js';

export type AppendOptions = {
  /** The seq the batch must start at (the stored next seq). A mismatch is SEQ_CONFLICT. */
  expectedSeq: number;
  /** Idempotency key of the batch. A batch whose op is already stored is not written again. */
  op: string;
};

export type AppendResult = {
  firstSeq: number;
  lastSeq: number;
  /** True when a batch with this op was already stored; nothing was written. */
  replayed: boolean;
};

export type LoadedSession = {
  header: SessionHeader;
  events: StoredEvent[];
  /** Events appended by crash repair during this load (0 when the log was balanced). */
  repaired: number;
  /** Records dropped from a torn tail during this load. */
  truncated: number;
};

export type WatchOptions = { signal?: AbortSignal };

export interface SessionStore {
  readonly kind: 'sqlite' | 'jsonl' | 'postgres';
  /** Registers a session. Idempotent for an identical header; SESSION_ALREADY_EXISTS otherwise. */
  create(header: SessionHeader): Promise<void>;
  /** The stored header, or SESSION_NOT_FOUND. */
  header(id: string): Promise<SessionHeader>;
  /** Whether the session exists. */
  exists(id: string): Promise<boolean>;
  /**
   * Appends `events` at `expectedSeq` in one durable transaction, each stamped with `op`.
   * Returns the stored seqs; a batch whose op exists returns its seqs with `replayed: true`
   * (checked first, whatever `expectedSeq` says). Throws SEQ_CONFLICT (nothing written) when
   * the stored next seq is not `expectedSeq`; INVALID_ARGUMENT for an empty batch; INVALID_EVENT,
   * NON_JSON_VALUE or SURFACE_VIOLATION for a batch that is not a valid transition of the stored
   * log (including an event type this build does not know, since it could not read it back).
   * A torn tail left by a crashed writer is truncated before the batch is written.
   */
  append(id: string, events: readonly NewEvent[], options: AppendOptions): Promise<AppendResult>;
  /** Stored events with seq >= fromSeq (at most `limit`), no repair, no closers. */
  readFrom(id: string, fromSeq: number, limit?: number): Promise<StoredEvent[]>;
  /**
   * The store's one validated copy of the session in this process, brought up to the stored
   * head (only the tail is read). Live: appends through this store are committed into it.
   */
  session(id: string): Promise<SessionView>;
  /** The stored next seq (= number of events). */
  nextSeq(id: string): Promise<number>;
  /** Header and events; a cold interrupted turn is repaired durably, a torn tail truncated. */
  load(id: string): Promise<LoadedSession>;
  /** Like load, but writes nothing: closers are applied in memory only. */
  inspect(id: string): Promise<LoadedSession>;
  /** Headers of every stored session. */
  list(): Promise<SessionHeader[]>;
  /** Live tail: yields stored events from `fromSeq` on, then each new one as it is appended (also by another process). */
  watch(id: string, fromSeq: number, options?: WatchOptions): AsyncIterable<StoredEvent>;
  readonly artifacts: ArtifactStore;
  readonly projectionCache: ProjectionCacheStore;
  close(): Promise<void>;
}
