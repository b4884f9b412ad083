/**
 * The seam between the relational core (core.ts) and one database: a driver runs the core's
 * transaction bodies and gives them a few statements in its dialect (sqlite/, postgres/).
 *
 * Synchronous and asynchronous databases behind one interface: a body is a generator that yields
 * each statement's result (`const row = yield* step(tx.sessionHead(id))`). A statement returns its
 * value (better-sqlite3) or a promise of it (pg), and the driver's runner feeds it back:
 * {@link runSteps} runs a body to its end synchronously, inside a better-sqlite3 transaction, which
 * must not await (nothing else may run on its connection while it is open); {@link runStepsAsync}
 * awaits each statement on a pg connection. So the core's sequences are written once and SQLite
 * keeps its transactions as they were: one synchronous call each.
 */
import type { BatchLayout } from '../anchor.js';
import type { SpendTotals, StoredEvent } from '../../session/index.js';
import type { TenantSpend } from '../spend.js';
import type { RankedSeq, SearchRequest } from '../search.js';
import type { ErasedPlace, InboxEntry, SessionKey, StoreEraseReceipt, TranscriptEntry } from '../store.js';
import type { RemoteAppends } from '../watch.js';
import { sessionErased } from '../errors.js';
import type { BatchRow, EventRow } from './rows.js';

/** A statement's result: the value itself from a synchronous driver, a promise of it from an asynchronous one. */
export type Awaitable<T> = T | Promise<T>;

/** A transaction body: yields statement results (see {@link step}) and returns its outcome. */
export type Steps<T> = Generator<Awaitable<unknown>, T, unknown>;

/** Inside a body, the value of one statement: `const row = yield* step(tx.sessionRow(id))`. */
export function* step<T>(statement: Awaitable<T>): Generator<Awaitable<T>, T, unknown> {
  return (yield statement) as T;
}

/** Runs a body whose statements all return values (a synchronous driver); a promise is a bug in the driver. */
export function runSteps<T>(body: Steps<T>): T {
  let next = body.next();
  while (!next.done) {
    if (next.value instanceof Promise) throw new Error('a synchronous driver statement returned a promise');
    next = body.next(next.value);
  }
  return next.value;
}

/** Runs a body, awaiting each statement; a statement's failure is thrown into the body where it yielded. */
export async function runStepsAsync<T>(body: Steps<T>): Promise<T> {
  let next = body.next();
  while (!next.done) {
    let value: unknown;
    try {
      value = await next.value;
    } catch (error) {
      next = body.throw(error);
      continue;
    }
    next = body.next(value);
  }
  return next.value;
}

/** A session's row: its key and the header JSON text as stored. */
export type SessionRow = { key: number; header: string };

/** A session's row and its stored head (the seq after the last event or batch), read in one statement. */
export type SessionHeadRow = SessionRow & { head: number };

/**
 * The stored rows of a range of seqs: the event rows and the batches that overlap them (rows of
 * PostgreSQL's `batches` table; in SQLite, read off the batches' first event rows), both ascending.
 */
export type StoredRows = { events: EventRow[]; batches: BatchRow[] };

/** Seqs `from <= seq < to`. */
export type SeqRange = { from: number; to: number };

/**
 * The stored rows of a range of seqs (within one chunk) as an anchored read hashes them (anchor.ts
 * `RelationalDigest`): the rows' digest text and the text of the batch records of their own
 * starting on them, in seq order and joined with U+001E, built from the stored columns by the
 * database; or, when asked and the database can, the SHA-256 of each, ended by U+001E
 * (PostgreSQL). `rows` is how many rows the range holds; `misplaced` how many of them are not
 * where their seq says (SQLite: a seq column that disagrees with the row's key; PostgreSQL: a
 * gap, or in the first range a batch record that starts before seq 0).
 */
export type PrefixDigestChunk = { rows: number; misplaced: number } & (
  | { hashed: false; rowsText: string | Uint8Array; batchesText: string | Uint8Array }
  | { hashed: true; rowsDigest: Uint8Array; batchesDigest: Uint8Array }
);

/** An erased id's tombstone: `create` refuses the id until `until` (epoch ms). */
export type Tombstone = { erasedAt: number; until: number };

/**
 * What deleting a session's rows removed, and where: the parts of an erase receipt the dialect
 * knows (the inbox and the key are counted by their own statements; the transcript index rows
 * name the session's row key, so they go with its rows).
 */
export type SessionRemoval = Pick<StoreEraseReceipt, 'notes'> & {
  removed: Omit<StoreEraseReceipt['removed'], 'inboxEntries' | 'sessionKey'>;
  places: ErasedPlace[];
};

/** An inbox row as stored: its reference, when it was stored, and the body. */
export type InboxRow = InboxEntry & { body: string };

/** The synced validated copy a search runs against: its session row and head. */
export type SearchScope = { id: string; key: number; header: string; head: number };

/**
 * The statements of one transaction (or of statements run on their own), in the driver's dialect.
 * Each returns its value, or a promise of it (see {@link Awaitable}).
 */
export interface RelationalTx {
  /** The session's row and its stored head, in one statement. */
  sessionHead(id: string): Awaitable<SessionHeadRow | undefined>;
  sessionRow(id: string): Awaitable<SessionRow | undefined>;
  /** Every session's id and header text, ordered by id bytewise. */
  listSessions(): Awaitable<Array<{ id: string; header: string }>>;
  /** Inserts a session unless its id is taken; false when it was. */
  insertSession(id: string, header: string): Awaitable<boolean>;
  /**
   * Takes the session's write lock for the rest of the transaction; false when the session does
   * not exist. (In SQLite `BEGIN IMMEDIATE` already holds the database's: always true there, and
   * the sync that follows finds a session that does not exist.)
   */
  lockSession(id: string): Awaitable<boolean>;
  /** Locks the session's row against every other transaction for its erasure; its key, or undefined. */
  lockSessionForErase(id: string): Awaitable<number | undefined>;
  /** The stored rows of seqs `from <= seq < to`. */
  rowsFrom(key: number, from: number, to: number): Awaitable<StoredRows>;
  /** The event rows of `seqs` that are stored, ascending. */
  rowsAt(key: number, seqs: readonly number[]): Awaitable<EventRow[]>;
  /** The digest text of the stored rows of seqs `from <= seq < to`, or its hashes when `hashed` (see {@link PrefixDigestChunk}). */
  prefixDigest(key: number, from: number, to: number, hashed: boolean): Awaitable<PrefixDigestChunk>;
  /**
   * The hashes of whole chunks (`ranges`, each `DIGEST_CHUNK_ROWS` seqs, anchor.ts), in order, where the
   * database hashes chunks itself and can hash several at once (PostgreSQL). Absent where chunks
   * come as text (SQLite): those are read one at a time, so only one chunk's text is held.
   */
  wholeChunkDigests?(key: number, ranges: readonly SeqRange[]): Promise<PrefixDigestChunk[]>;
  /**
   * Stores one planned batch: its event rows and its batch record (a `batches` row in PostgreSQL,
   * the op and last seq on the batch's first event row in SQLite); and
   * tells other processes watching the session, when the database can (on commit).
   */
  insertBatch(key: number, id: string, events: readonly StoredEvent[], op: string): Awaitable<void>;
  /**
   * Deletes every row of the session (events, batch records, artifacts, projection record, search rows,
   * transcript index entries, the session).
   */
  deleteSession(key: number, id: string): Awaitable<SessionRemoval>;
  tombstone(id: string): Awaitable<Tombstone | undefined>;
  putTombstone(id: string, tombstone: Tombstone): Awaitable<void>;
  dropExpiredTombstones(now: number): Awaitable<void>;
  /** Stores an artifact unless the name is taken; false when it was. */
  insertArtifact(key: number, name: string, content: string): Awaitable<boolean>;
  artifactContent(id: string, name: string): Awaitable<string | undefined>;
  /** Stores a medium's bytes unless the session has that name (the same content) already; false when it had. */
  insertMedia(key: number, name: string, content: Uint8Array): Awaitable<boolean>;
  mediaContent(id: string, name: string): Awaitable<Uint8Array | undefined>;
  projectionRecord(id: string): Awaitable<string | undefined>;
  putProjectionRecord(key: number, record: string): Awaitable<void>;
  /**
   * Serializes the rest of the transaction with every other writer of the id's inbox and key and
   * with its erasure, whether or not the session exists. (In SQLite `BEGIN IMMEDIATE` already
   * holds the database's lock.)
   */
  lockSessionId(id: string): Awaitable<void>;
  /** Stores an inbox entry unless its key is taken; false when it was. */
  insertInboxEntry(id: string, row: InboxRow): Awaitable<boolean>;
  /** The stored entry under `key`, without its body. */
  inboxEntry(id: string, key: string): Awaitable<InboxEntry | undefined>;
  inboxBody(id: string, key: string): Awaitable<string | undefined>;
  /** The id's entries, oldest first (ties by key). */
  listInbox(id: string): Awaitable<InboxEntry[]>;
  /** Deletes the entries under `keys`; how many there were. */
  deleteInboxEntries(id: string, keys: readonly string[]): Awaitable<number>;
  /** Deletes every inbox entry of the id (its erasure): the table and how many. */
  deleteInbox(id: string): Awaitable<ErasedPlace>;
  /** Stores the id's key unless it has one (the first stored wins). */
  insertSessionKey(id: string, key: SessionKey, createdAt: number): Awaitable<void>;
  /** The id's key as stored (checked by the core), or undefined. */
  sessionKey(id: string): Awaitable<{ keyId: unknown; key: unknown } | undefined>;
  /** Deletes the id's key (its erasure): the table and how many (0 or 1). */
  deleteSessionKey(id: string): Awaitable<ErasedPlace>;
  /**
   * Stores (scope, digest) -> the row key of session `entry.sessionId` and `entry.seq`, replacing
   * what the pair named before, in one statement; false (nothing written) when there is no session
   * of that id, also when an erasure deleted it while the statement waited.
   */
  upsertTranscriptEntry(scope: string, digest: string, entry: TranscriptEntry): Awaitable<boolean>;
  /** The entry under (scope, digest) with its session's id, as stored (checked by the core); none when its session is gone. */
  transcriptEntry(scope: string, digest: string): Awaitable<{ sessionId: unknown; seq: unknown } | undefined>;
  /**
   * The pacing bucket's stored state (JSON text; undefined when the key was never used), held
   * against every other writer of the key until the transaction ends (pacing.ts).
   */
  lockPaceRow(key: string): Awaitable<string | undefined>;
  putPaceRow(key: string, state: string, now: number): Awaitable<void>;
  /** Adds what a batch spent to the session's spend row (spend.ts), in the batch's transaction. */
  addSpend(tenant: string, id: string, spent: SpendTotals, now: number): Awaitable<void>;
  /** Folds the id's spend rows into their tenants' `.erased` rows and deletes them (its erasure). */
  retireSpend(id: string, now: number): Awaitable<void>;
  /** The sums of the tenant's spend rows. */
  tenantSpend(tenant: string): Awaitable<TenantSpend>;
}

/** A spend row's counted columns in their order (tokens, cost_usd, model_calls, tool_calls, wall_ms). */
export function spendColumns(spent: SpendTotals): [number, number, number, number, number] {
  return [spent.tokens, spent.costUsd, spent.modelCalls, spent.toolCalls, spent.wallMs];
}

/**
 * How a body runs: `write` in one transaction that serializes the session's writers (SQLite
 * `BEGIN IMMEDIATE`; PostgreSQL READ COMMITTED, with the row lock the body takes), `read` in one
 * snapshot, `single` with each statement on its own.
 */
export type TxMode = 'write' | 'read' | 'single';

/** One database under the relational core. */
export interface RelationalDriver {
  /** Identifies the stored data (no credentials): in messages and for in-process watch wake-ups. */
  readonly location: string;
  /** How often a watcher polls for appends made elsewhere. */
  readonly pollIntervalMs: number;
  /** How the database tells of other processes' appends without polling, where it can. */
  readonly remoteAppends?: RemoteAppends;
  /** Where the database keeps batch records, as an anchor's digest text has them (anchor.ts). */
  readonly batchLayout: BatchLayout;
  run<T>(mode: TxMode, body: (tx: RelationalTx) => Steps<T>): Awaitable<T>;
  /** Refuses, before anything is written, an op this database cannot store. */
  assertStorableOp(op: string): void;
  /**
   * The search candidates of a synced copy: its events below `scope.head` whose indexed words hold
   * every query word, ranked. None when the session's row is no longer the one the copy came from.
   */
  searchMatches(scope: SearchScope, request: SearchRequest): Awaitable<RankedSeq[]>;
  /** Runs after an erasure committed; notes for its receipt on where the erased bytes went. */
  afterErase(): string[];
  /** A driver error in the store's words: UNAVAILABLE for a lock wait or a server that cannot be reached, else the error itself. */
  storeError(error: unknown): unknown;
  close(): Awaitable<void>;
}

/** Runs a store operation while the store is open (the core's `use`: the closed check and its bookkeeping). */
export type Use = <T>(body: () => Awaitable<T>) => Promise<T>;

/** SESSION_ERASED while the id's tombstone lasts; expired tombstones are dropped. */
export function* refuseTombstoned(tx: RelationalTx, id: string): Steps<void> {
  const tombstone = yield* step(tx.tombstone(id));
  if (!tombstone) return;
  const now = Date.now();
  if (tombstone.until > now) throw sessionErased(id, tombstone.erasedAt, tombstone.until);
  yield* step(tx.dropExpiredTombstones(now));
}
