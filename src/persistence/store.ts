/**
 * The `SessionStore` seam (DESIGN §4): every backend keeps the append-only log durable and
 * exactly-once under retries, refuses damaged data instead of repairing it away (§4.1), can erase
 * a session (§4.2), and passes one conformance suite (test/conformance); and the tunables every
 * backend takes, resolved in one step.
 */
import {
  SessionlogError,
  assertTenant,
  tenantOf,
  type NewEvent,
  type SessionHeader,
  type SessionView,
  type StoredEvent,
  type StoredMedia,
  type SurfaceSnapshot,
} from '../session/index.js';
import type { Clock, PaceCost, PaceGrant, PaceLimits, PaceState } from './pacing.js';
import type { TenantSpend } from './spend.js';
import type { ArtifactPut, ArtifactRef, MediaPut } from './artifacts.js';
import type { ProjectionCacheRecord } from './projection-cache.js';
import type { PrefixAnchor } from './anchor.js';
import type { SearchHit, SearchOptions } from './search.js';

/**
 * Whose sessions a `list` or an `erase` may touch (DESIGN §5.3): one tenant's (`{ tenant }`),
 * or, said explicitly, every tenant's ({@link ALL_TENANTS}: operators, the CLI, maintenance).
 * The store API has no list or erase without one; the backend applies it.
 */
export type TenantScope = { readonly tenant: string } | typeof ALL_TENANTS;

/** The scope of an operator: every tenant's sessions. */
export const ALL_TENANTS: { readonly allTenants: true } = Object.freeze({ allTenants: true });

/** One tenant's scope (INVALID_ARGUMENT for a name that is not a tenant's). */
export function tenantScope(tenant: string): TenantScope {
  assertTenant(tenant);
  return Object.freeze({ tenant });
}

/** Throws INVALID_ARGUMENT unless `scope` is {@link ALL_TENANTS} or one valid tenant's scope. */
export function assertTenantScope(scope: unknown): asserts scope is TenantScope {
  if (scope === ALL_TENANTS) return;
  if (typeof scope !== 'object' || scope === null || !('tenant' in scope))
    throw new SessionlogError('INVALID_ARGUMENT', 'a tenant scope is required: { tenant } or ALL_TENANTS');
  assertTenant(scope.tenant);
}

/** Whether a session with this header is inside `scope`. */
export function inTenantScope(scope: TenantScope, header: { tenant?: string }): boolean {
  return 'tenant' in scope ? tenantOf(header) === scope.tenant : true;
}

/** Tunables shared by every backend. See {@link resolveStoreOptions} for the defaults. */
export type StoreOptions = {
  /** How often `watch` polls for appends made by another process (ms). Default 40. */
  pollIntervalMs?: number;
  /** SQLite: how long a writer waits for another connection's lock before UNAVAILABLE (ms). Default 5000. */
  busyTimeoutMs?: number;
  /**
   * How long a writer waits for a session's lock before UNAVAILABLE (ms): the JSONL lock file,
   * PostgreSQL's row lock (`lock_timeout`). Default 30000.
   */
  lockTimeoutMs?: number;
  /**
   * How long a lock holder may make no progress before it loses the lock (ms): a JSONL lock file
   * whose holder stopped refreshing it for this long is broken (the holder's write is then
   * fenced off and fails with SEQ_CONFLICT); a PostgreSQL connection idle inside a transaction
   * this long is ended by the server (`idle_in_transaction_session_timeout`). Default 15000.
   */
  lockStaleMs?: number;
  /** How many sessions keep their validated in-memory copy between calls. Default 32. */
  sessionCacheSize?: number;
  /** How long an erased session's id stays refused by `create` (SESSION_ERASED), in ms. Default 30 days. */
  tombstoneMs?: number;
};

export type ResolvedStoreOptions = Required<StoreOptions>;

const DAY_MS = 24 * 60 * 60 * 1000;

function positiveInteger(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!Number.isSafeInteger(value) || value <= 0) {
    throw new SessionlogError(
      'INVALID_ARGUMENT',
      `store option ${name} must be a positive integer, got ${String(value)}`,
    );
  }
  return value;
}

/** Fills defaults and validates; everything downstream takes the resolved value. */
export function resolveStoreOptions(options: StoreOptions = {}): ResolvedStoreOptions {
  return {
    pollIntervalMs: positiveInteger('pollIntervalMs', options.pollIntervalMs, 40),
    busyTimeoutMs: positiveInteger('busyTimeoutMs', options.busyTimeoutMs, 5000),
    lockTimeoutMs: positiveInteger('lockTimeoutMs', options.lockTimeoutMs, 30_000),
    lockStaleMs: positiveInteger('lockStaleMs', options.lockStaleMs, 15_000),
    sessionCacheSize: positiveInteger('sessionCacheSize', options.sessionCacheSize, 32),
    tombstoneMs: positiveInteger('tombstoneMs', options.tombstoneMs, 30 * DAY_MS),
  };
}

/**
 * How a batch is appended: the seq it must start at and its idempotency key (`op`), so a retried
 * append writes nothing twice and a second writer gets `SEQ_CONFLICT`.
 */
export type AppendOptions = {
  /** The seq the batch must start at (the stored next seq). A mismatch is SEQ_CONFLICT. */
  expectedSeq: number;
  /** Idempotency key of the batch. A batch whose op is already stored is not written again. */
  op: string;
  /**
   * Inbox keys of the entries this batch logs (the messages it carries): removed in the batch's
   * own transaction (SQLite, PostgreSQL: no commit of their own) or right after it (JSONL).
   */
  delivered?: readonly string[];
};

/** The seqs an appended batch got, and whether it had been stored before (`replayed`). */
export type AppendResult = {
  firstSeq: number;
  lastSeq: number;
  /** True when a batch with this op was already stored; nothing was written. */
  replayed: boolean;
};

/**
 * A session's header and events as `SessionStore.load` read them, with what crash repair appended
 * and what a JSONL torn final write dropped.
 */
export type LoadedSession = {
  header: SessionHeader;
  events: StoredEvent[];
  /** Events appended by crash repair during this load (0 when the log was balanced). */
  repaired: number;
  /** Records of a JSONL torn final write dropped during this load (always 0 on SQLite and PostgreSQL). */
  truncated: number;
};

/**
 * A session read from a checkpoint's anchor (anchor.ts): the prefix verified by its digest, the
 * events after it validated; what a cold derived-history read needs of it.
 */
export type AnchoredRead = {
  header: SessionHeader;
  /** The stored next seq. */
  nextSeq: number;
  /** The event at `seq`: at or after the anchor's seq, or a node of the anchored surface; else undefined. */
  storedAt(seq: number): StoredEvent | undefined;
  /** The anchor of the whole log read (through `nextSeq - 1`), for the checkpoint of this read. */
  anchor: PrefixAnchor;
};

/** Options of `SessionStore.watch`: `signal` ends the live tail. */
export type WatchOptions = { signal?: AbortSignal };

/** The first thing wrong with a stored log, found by a scan. */
export type ScanProblem = {
  /** The first seq that is not part of the valid prefix. */
  seq: number;
  reason: string;
  /** UNSUPPORTED_FORMAT for an intact record of a type this build does not know (a newer version wrote it). */
  code: 'CORRUPT_LOG' | 'UNSUPPORTED_FORMAT';
  /**
   * JSONL only: the problem is a torn final write (the final batch never finished: its last line
   * incomplete, or lines of it missing). Reads ignore it, the next `load` or `append` removes it;
   * it is not corruption, unless a writer was acknowledged the batch (see `append`).
   */
  torn: boolean;
  /** A torn final write's first seq that is not intact (its incomplete line or first missing line). */
  badSeq?: number;
};

/** What `scan` found: everything `verify` and `salvage` need, read without changing anything. */
export type ScanReport = {
  sessionId: string;
  /** The stored header, or undefined when it is damaged or of a newer format (see `headerProblem`). */
  header: SessionHeader | undefined;
  headerProblem?: { code: 'CORRUPT_LOG' | 'UNSUPPORTED_FORMAT'; reason: string };
  /** The longest valid prefix of the log (every event validated as a live append would be). */
  events: readonly StoredEvent[];
  /** The first problem after that prefix, if any. */
  problem?: ScanProblem;
};

/** One place `erase` removed data from, and how many records or files it removed there. */
export type ErasedPlace = { place: string; removed: number };

/** What `erase` removed (DESIGN §4.2). */
export type StoreEraseReceipt = {
  sessionId: string;
  /** False when nothing of the session was left to remove (it was erased before). */
  erased: boolean;
  /**
   * Counts by kind: the header (0 or 1), events, artifacts, media (distinct stored contents,
   * issue 50), projection checkpoints, inbox entries, the session's data key (0 or 1) and the
   * transcript index entries that named it.
   */
  removed: {
    header: number;
    events: number;
    artifacts: number;
    media: number;
    projectionCheckpoints: number;
    inboxEntries: number;
    sessionKey: number;
    transcriptEntries: number;
  };
  /** Where the data was removed from (tables, files, directories), with counts. */
  places: ErasedPlace[];
  /** Until when (epoch ms) `create` refuses this id with SESSION_ERASED. */
  tombstoneUntil: number;
  /** Anything the caller should know about how completely the bytes are gone. */
  notes: string[];
};

/**
 * A session store: the append-only logs of sessions and everything kept beside them (artifacts,
 * projection checkpoints, the inbox, session keys, pacing and spend). Three backends (SQLite,
 * JSONL, PostgreSQL) behind one interface and one conformance suite; `openStore(url)` opens one.
 */
export interface SessionStore {
  readonly kind: 'sqlite' | 'jsonl' | 'postgres';
  /**
   * Registers a session. Idempotent for an identical header; SESSION_ALREADY_EXISTS otherwise;
   * SESSION_ERASED while the id's tombstone lasts.
   */
  create(header: SessionHeader): Promise<void>;
  /** The stored header, or SESSION_NOT_FOUND. */
  header(id: string): Promise<SessionHeader>;
  /** Whether the session exists. */
  exists(id: string): Promise<boolean>;
  /**
   * Appends `events` at `expectedSeq` in one durable transaction, each stamped with `op`, and
   * commits them into the store's validated copy of the session. A batch whose op is already
   * stored returns its seqs with `replayed: true` (checked first, whatever `expectedSeq` says)
   * when it has the same event count and types, and is OP_CONFLICT otherwise. Throws
   * SEQ_CONFLICT (nothing written) when the stored next seq is not `expectedSeq` or the writer
   * lost its lock; INVALID_ARGUMENT for an empty batch; INVALID_EVENT, NON_JSON_VALUE or
   * SURFACE_VIOLATION for a batch that is not a valid transition of the stored log;
   * CORRUPT_LOG for a damaged stored log. A JSONL torn final write is removed before writing,
   * unless it starts below `expectedSeq`: that batch was acknowledged to this writer, so it was
   * damaged after it was committed, and the append is CORRUPT_LOG naming its first bad seq.
   */
  append(id: string, events: readonly NewEvent[], options: AppendOptions): Promise<AppendResult>;
  /** Stored events with seq >= fromSeq (at most `limit`), no repair, no closers. CORRUPT_LOG for a damaged log. */
  readFrom(id: string, fromSeq: number, limit?: number): Promise<StoredEvent[]>;
  /** The stored next seq (= number of events). */
  nextSeq(id: string): Promise<number>;
  /** Header and events; a cold interrupted turn is repaired durably (an append of closers), a JSONL torn final write removed. */
  load(id: string): Promise<LoadedSession>;
  /** Like load, but writes nothing: closers are applied in memory only. */
  inspect(id: string): Promise<LoadedSession>;
  /**
   * The store's one validated copy of the session in this process, brought up to the stored head
   * (reading only the tail). Appends through this store commit into the same object. A new
   * object replaces it when the stored log no longer extends it (restored from a backup, erased
   * and created again) or it was evicted from the cache (`sessionCacheSize`).
   */
  session(id: string): Promise<SessionView>;
  /**
   * A cold read from a checkpoint: when the stored log through `anchor.seq` is the prefix the
   * anchor sealed with the checkpoint's `surface`, only the events after it are read and
   * validated (in the context the anchor holds). `held`, having read nothing of the log, when the
   * store holds a validated copy of the session (read it through `session`); `differs` when the
   * stored prefix or the checkpoint is not what the anchor sealed, or the events after it do not
   * validate: the checkpoint does not describe this log, and `session` reads and validates the
   * whole log, refusing damage as always. SESSION_NOT_FOUND for an unknown session.
   */
  readAnchored(id: string, anchor: PrefixAnchor, surface: SurfaceSnapshot): Promise<AnchoredRead | 'held' | 'differs'>;
  /**
   * The anchor of the store's validated copy of the session at `seq`, for a checkpoint written at
   * that seq; undefined when the store holds no copy whose last seq is `seq`.
   */
  prefixAnchor(id: string, seq: number): Promise<PrefixAnchor | undefined>;
  /**
   * Reads and checks the whole stored log without changing anything and without throwing
   * CORRUPT_LOG: the header (or its problem), the longest valid prefix and the first problem.
   */
  scan(id: string): Promise<ScanReport>;
  /**
   * Removes the session's events, header, artifacts, projection checkpoint, inbox entries, data
   * key and the transcript index entries that name it (sessions forked from it keep their own
   * copies) and leaves a tombstone that refuses `create`, `inbox.put` and `transcripts.put` of the
   * id for `tombstoneMs`. An id with inbox entries or a key but no session (they may come first)
   * is erased the same way. Idempotent: erasing again returns a
   * receipt with `erased: false`. SESSION_NOT_FOUND when the id has none of these and no
   * tombstone, and, exactly the same, when the session is outside `scope` (another tenant's):
   * the check and the erase are one transaction (one lock on JSONL).
   */
  erase(id: string, scope: TenantScope): Promise<StoreEraseReceipt>;
  /** Headers of the stored sessions inside `scope` (one tenant's, or every tenant's). */
  list(scope: TenantScope): Promise<SessionHeader[]>;
  /**
   * Full-text search of the session's whole log, shadowed events included (search.ts): the events
   * whose text (message text and reasoning, tool-call arguments, tool results, compaction
   * summaries) holds every word of `query`, case- and accent-insensitively, best first, at most
   * `limit` (default 20, at most 100), each with a snippet of at most 300 characters. The query is
   * plain words, never query syntax; one without any word (only punctuation) finds nothing.
   * INVALID_ARGUMENT for an empty or oversized query or a bad limit; SESSION_NOT_FOUND,
   * CORRUPT_LOG as for reads. Never returns another session's events.
   */
  search(id: string, query: string, options?: SearchOptions): Promise<SearchHit[]>;
  /** Live tail: yields stored events from `fromSeq` on, then each new one as it is appended (also by another process). */
  watch(id: string, fromSeq: number, options?: WatchOptions): AsyncIterable<StoredEvent>;
  readonly artifacts: ArtifactStore;
  readonly projectionCache: ProjectionCacheStore;
  /** What callers send, waiting outside the log for the engine to log it (DESIGN §5.2). */
  readonly inbox: InboxStore;
  /** Each session's data key: what Temporal holds of the session is encrypted with it (DESIGN §5.2). */
  readonly sessionKeys: SessionKeyStore;
  /** Which session a stateless caller's resent transcript continues. */
  readonly transcripts: TranscriptIndex;
  /** Provider pacing buckets shared by every worker of the store (pacing.ts). */
  readonly pacing: PacingStore;
  /** What each tenant's sessions spent, kept as batches are appended (spend.ts). */
  readonly spend: SpendStore;
  close(): Promise<void>;
}

/**
 * A caller's input as it crosses Temporal: where it waits in the inbox (`key`), its size in
 * UTF-8 bytes and the hex SHA-256 `digest` of its body. Never the content itself.
 */
export type InboxRef = { key: string; bytes: number; digest: string };

/** An entry the inbox holds, as `list` gives it (no body). */
export type InboxEntry = InboxRef & { storedAt: number };

/**
 * The inbox (DESIGN §5.2): a caller's message, note, tool definitions, approval answer or tool
 * result is written here, keyed by session and a key the caller derives from its own id, before
 * the signal or update that names it reaches Temporal; the engine reads it from here, logs it,
 * and removes it. Outside the single-writer log: any process may write it, at any time (the
 * session need not exist yet). `erase` removes a session's entries.
 */
export interface InboxStore {
  /**
   * Stores `body` (any text, at most 32 MiB of UTF-8) under `key` (1-300 characters) and returns
   * its reference. Idempotent: storing the same body again returns the same reference;
   * a different body under a key already held is INVALID_MESSAGE (nothing changes).
   * SESSION_ERASED while the session id's tombstone lasts.
   */
  put(sessionId: string, key: string, body: string): Promise<InboxRef>;
  /** The body stored under `key`, or undefined. */
  get(sessionId: string, key: string): Promise<string | undefined>;
  /** Removes the entries under `keys` (missing ones are ignored); how many were removed. */
  remove(sessionId: string, keys: readonly string[]): Promise<number>;
  /** The session's entries, oldest first. */
  list(sessionId: string): Promise<InboxEntry[]>;
}

/**
 * Where a caller's transcript continues: a digest of a transcript prefix, for one caller scope,
 * names the session (branch) whose surface equalled it at `seq`.
 */
export type TranscriptEntry = { sessionId: string; seq: number };

/**
 * The transcript index: lets the OpenAI-compatible gateway find, for a stateless client that
 * resends its whole transcript on each call, the session whose derived history equals that
 * transcript's prefix. Keyed by a caller `scope` (1-200 characters of printable ASCII, such as a
 * hash of the caller's API token, so callers never find each other's sessions) and the hex
 * SHA-256 `digest` of the prefix (64 lowercase hex digits); INVALID_ARGUMENT for either out of
 * shape. Outside the log: an index, not a record of the session. `erase` removes the entries
 * that name the session.
 */
export interface TranscriptIndex {
  /**
   * Records (scope, digest) -> entry (one upsert statement in SQLite and PostgreSQL). Putting
   * again replaces the entry (newest wins, also when it names another session). `entry.sessionId` must name a stored session
   * (SESSION_NOT_FOUND; SESSION_ERASED while its tombstone lasts) and `entry.seq` be a
   * non-negative safe integer (INVALID_ARGUMENT); the seq is not checked against the log.
   */
  put(scope: string, digest: string, entry: TranscriptEntry): Promise<void>;
  /** The entry, or undefined. An entry naming an erased or missing session is not returned. */
  get(scope: string, digest: string): Promise<TranscriptEntry | undefined>;
}

/** A session's data key: a 32-byte AES key and its id (hex), which names it in what it encrypted. */
export type SessionKey = { id: string; key: Buffer };

/**
 * Session data keys (DESIGN §5.2, §4.2). The key is made once per session id, by whichever
 * process first needs it, and is the same for every process; `erase` destroys it, after which
 * anything encrypted with it cannot be read by anyone.
 */
export interface SessionKeyStore {
  /** The session's key, made (32 random bytes, a random 16-hex-digit id) if it has none; the first one stored wins a race. */
  obtain(sessionId: string): Promise<SessionKey>;
  /** The session's key, or undefined when it has none (never made, or erased). */
  find(sessionId: string): Promise<SessionKey | undefined>;
}

// ---------------------------------------------------------------------------------------------
// The other sub-stores. Each backend implements every sub-store in a file of the same name
// (jsonl/ and relational/: artifacts, projection-cache, inbox, keys, transcripts, pacing, spend).

/**
 * Full tool output and spilled text, addressed by an opaque locator, per session (DESIGN §4);
 * the naming and checks every backend shares are in artifacts.ts.
 */
export interface ArtifactStore {
  /**
   * Stores `content` under a sanitized, unique name (a second put with the same suggested name
   * gets a new locator). SESSION_NOT_FOUND unless the session exists. Owner-only where it is a file.
   */
  put(input: ArtifactPut): Promise<ArtifactRef>;
  /**
   * The whole content of an artifact of session `sessionId`. ARTIFACT_FOREIGN for a locator of
   * another session; ARTIFACT_NOT_FOUND for an unknown locator or one not of the form
   * `artifact:<sessionId>/<name>`.
   */
  get(sessionId: string, locator: string): Promise<string>;
  /** A window of the content, `offset` and `limit` in UTF-16 code units; same refusals as {@link get}. */
  read(sessionId: string, locator: string, offset: number, limit: number): Promise<{ text: string; total: number }>;
  /**
   * Stores media bytes (issue 50) content-addressed in the session's namespace, as
   * `media-<sha256>.<ext>`: the same bytes put twice are stored once (the second put returns the
   * same StoredMedia). Never shared across sessions or tenants. The bytes are stored as given; the
   * caller has checked them (session/media.ts `inspectMedia`). SESSION_NOT_FOUND unless the
   * session exists.
   */
  putMedia(input: MediaPut): Promise<StoredMedia>;
  /**
   * The bytes of a medium of session `sessionId`. ARTIFACT_FOREIGN for another session's locator;
   * ARTIFACT_NOT_FOUND for an unknown one or one not of the form `artifact:<sessionId>/media-<sha256>.<ext>`.
   */
  readMedia(sessionId: string, locator: string): Promise<Uint8Array>;
}

/** Checkpoints of projection views at a seq (dsh-spec §9.3); the record's format is projection-cache.ts. */
export interface ProjectionCacheStore {
  /** The stored record, or undefined when there is none or it cannot be parsed. */
  get(sessionId: string): Promise<ProjectionCacheRecord | undefined>;
  /** Replaces the session's record. SESSION_NOT_FOUND for an unknown session. */
  put(sessionId: string, record: ProjectionCacheRecord): Promise<void>;
}

/** Provider pacing buckets shared by every worker (DESIGN §5.3); the algorithm is pacing.ts. */
export interface PacingStore {
  /**
   * Reserves `cost` in bucket `key` under `limits` at `now`: the time the call may start. A slot
   * more than `maxWaitMs` away is not taken (`taken: false`, the bucket unchanged).
   */
  reserve(key: string, limits: PaceLimits, cost: PaceCost, now: Clock, maxWaitMs: number): Promise<PaceGrant>;
  /** Gives back (negative) or takes (positive) `tokens` after a call used other than it reserved. */
  adjust(key: string, limits: PaceLimits, tokens: number, now: number): Promise<void>;
  /** The bucket's state (undefined: never used). */
  state(key: string): Promise<PaceState | undefined>;
}

/** What each tenant's sessions spent (DESIGN §5.3); how the sums are kept is spend.ts. */
export interface SpendStore {
  /** What the tenant's sessions spent in total. INVALID_ARGUMENT for a malformed tenant name. */
  tenant(tenant: string): Promise<TenantSpend>;
}
