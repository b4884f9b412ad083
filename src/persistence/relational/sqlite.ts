/**
 * SQLite backend of `SessionStore` (DESIGN §4, dsh-spec §8.8), the embedded default: the dialect
 * driver under the relational core (core.ts, which runs every operation), with the storage format,
 * the schema and its upgrades, and the statements.
 *
 * Storage format (schema version {@link SQLITE_SCHEMA_VERSION}, `application_id`
 * {@link SQLITE_APPLICATION_ID}; a file with a newer `user_version` or a foreign application id
 * is refused; versions 1 to 9 are upgraded in place when the store opens, in one transaction:
 * version 2 adds the `tombstones` table, version 3 the `search` index, version 4 makes that index
 * contentless (version 3's is dropped and the index filled again from every stored event), version
 * 5 adds the `inbox` and `session_keys` tables, version 6 the `transcripts` table, version 7 keys
 * the inbox without a rowid, version 8 adds `pacing`, version 9 `spend`, version 10 moves the
 * events to one rowid tree with each batch's op on its first row (the file's events are copied
 * once; a damaged batch that cannot move stops the upgrade, naming it). Stop processes
 * of an older build before a newer one opens the file; a newer file is refused by an older
 * build):
 *
 * - `sessions(key, id, header)`: integer key, text id, header JSON.
 * - `events(id, session_key, seq, type, time, data, surface_op, source_event_seqs, ignorable,
 *   batch_op, batch_last_seq)` (this layout since version 10): one row per event in the shared
 *   relational row codec (rows.ts), in a rowid table keyed `id = session_key << 32 | seq`, so a
 *   session is one rowid range in seq order and an append to it writes the leaf it ends on. An
 *   append batch's op and last seq are on its first row (`batch_op`, `batch_last_seq`, null on
 *   the others), and reads re-attach `op` to the rows the batch covers; neither the op nor the
 *   text id is repeated per row. (Versions 1 to 9 kept `events` `WITHOUT ROWID` keyed
 *   `(session_key, seq)` and the batches in a `batches(session_key, op, first_seq, last_seq)`
 *   table with an index on `last_seq`: two more trees written per commit.) An op is unique in
 *   its session because an append is planned against the session's validated copy, which knows
 *   every stored op, under the write lock; a duplicate in a damaged file is refused by the scan.
 * - `artifacts(session_key, name, content)` and `projection_cache(session_key, record)`.
 * - `tombstones(id, erased_at, until)` (version 2): erased ids `create` refuses until `until`.
 * - `search(body)` (version 4): a contentless FTS5 index (`content = ''`, tokenizer `ascii`,
 *   option `secure-delete`) with one row per event that carries text, written by the session's
 *   next search (in seq order, from just past its highest indexed rowid up to the searched head;
 *   an append writes no index pages: issue 27). `body` is the event's folded words (search.ts),
 *   kept only in the index (version 3 also kept a copy of them, 37% of a conversation's file); the rowid is
 *   `session_key << 32 | seq`, so a query is a rowid range of one session (limits: 2^31 session
 *   keys, 2^32 events per session). Ranked with `bm25`; the hit's snippet comes from the
 *   validated copy.
 * - `search_rows(search_rowid, words_sha256)` (version 4): for each indexed row, a digest of the
 *   words it was indexed with. A contentless index forgets a row's words only when given them
 *   again exactly, so `erase` re-derives them from the event and checks the digest; when a row
 *   no longer matches (damaged or edited in the file), it rebuilds the whole index instead.
 *   The word folding of search.ts is therefore part of this format: changing it needs a new
 *   version that re-indexes.
 * - `inbox(session_id, key, body, bytes, digest, stored_at)` (version 5; `WITHOUT ROWID` since
 *   version 7), primary key `(session_id, key)`: what callers sent, waiting for the engine to log it (store.ts
 *   `InboxStore`); `bytes` is the body's UTF-8 size, `digest` its hex SHA-256. Keyed by the
 *   session's text id, not its row key: an entry may be written before the session exists.
 * - `session_keys(session_id, key_id, key, created_at)` (version 5): each session id's 32-byte
 *   data key (a BLOB) and its 16-hex-digit id; the first one inserted stays.
 * - `transcripts(scope, digest, session_key, seq)` (version 6), `WITHOUT ROWID`, primary key
 *   `(scope, digest)`, indexed by `session_key` for erasure: the transcript index (store.ts
 *   `TranscriptIndex`), a caller scope and the hex SHA-256 of a transcript prefix naming the
 *   session row whose surface equalled it at `seq`. `session_key` references the session, so
 *   an entry cannot outlive it; putting a pair again replaces its row (one upsert).
 * - `pacing(key, state, updated_at)` (version 8), `WITHOUT ROWID`: one provider pacing bucket
 *   per key (pacing.ts), its state as JSON text, read and written in one write transaction.
 * - `spend(tenant, session_id, tokens, cost_usd, model_calls, tool_calls, wall_ms, updated_at)` (version
 *   9), `WITHOUT ROWID`, primary key `(tenant, session_id)`, indexed by `session_id` for erasure:
 *   what each session spent (spend.ts), added to in each append's transaction; a tenant's
 *   `.erased` row holds what its erased sessions spent.
 *
 * A new file is made with 4 KiB pages ({@link SQLITE_PAGE_SIZE}): fewer bytes per commit in the WAL,
 * and an event row of up to ~4 KB still fits its rowid leaf page; files made with other page
 * sizes (8 KiB before version 10) are read and written as they are.
 *
 * Every append runs in a `BEGIN IMMEDIATE` transaction (its own, or a savepoint in a group commit
 * shared with the other writes asked for in the same turn of the event loop), so writers in several
 * processes on one file are serialized by SQLite's own lock; WAL with `synchronous=FULL` makes a
 * commit durable, and no write is reported done before its commit. A
 * transaction commits whole, so nothing is ever truncated: any damaged row is CORRUPT_LOG.
 * `secure_delete` is on, FTS5 `secure-delete` removes an erased session's words from the index
 * itself (not just marks them deleted), and `erase` ends with a `wal_checkpoint(TRUNCATE)`, so an
 * erased session's bytes are overwritten in the database file and gone from the WAL.
 */
import { closeSync, mkdirSync, openSync, realpathSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { createHash, randomUUID } from 'node:crypto';
import Database from 'better-sqlite3';
import { SessionlogError, type SpendTotals, type StoredEvent } from '../../session/index.js';
import { ERASED_SPEND_ROW, type TenantSpend } from '../spend.js';
import { storeClosed } from '../errors.js';
import {
  SEARCHABLE_EVENT_TYPES,
  fts5MatchExpression,
  indexText,
  type RankedSeq,
  type SearchRequest,
} from '../search.js';
import {
  resolveStoreOptions,
  type ErasedPlace,
  type InboxEntry,
  type ResolvedStoreOptions,
  type SessionKey,
  type StoreOptions,
  type TranscriptEntry,
} from '../store.js';
import { RelationalSessionStore } from './core.js';
import { runSteps, spendColumns } from './driver.js';
import type * as driver from './driver.js';
import { encodeEvent, storedHead, type BatchRow, type EventRow } from './rows.js';

/** `PRAGMA application_id` of a sessionlog database ("SLOG"). */
export const SQLITE_APPLICATION_ID = 0x534c4f47;
/** `PRAGMA user_version` this build writes and reads. */
export const SQLITE_SCHEMA_VERSION = 10;

/** The page size of a new database file (an existing file keeps its own). */
export const SQLITE_PAGE_SIZE = 4096;

/**
 * A session's events and its search rows are the rowid range `key << 32` to `(key + 1) << 32`,
 * with the seq in the low 32 bits (limits: 2^31 session keys, 2^32 events per session).
 */
const MAX_SEQ = 2 ** 32 - 1;
const MAX_SESSION_KEY = 2 ** 31 - 1;

/** The digest text of no rows (SQLite's group_concat of none is NULL). */
const EMPTY = new Uint8Array();

/** The event types whose text is indexed, as an SQL list (constants of ours). */
const SEARCHABLE_TYPES_SQL = SEARCHABLE_EVENT_TYPES.map((type) => `'${type}'`).join(', ');

/** Rows a search indexes per page of its backlog (and per transaction while the backlog is long). */
const SEARCH_INDEX_PAGE = 1000;

const SEARCH_DDL = `
CREATE VIRTUAL TABLE search USING fts5(body, tokenize = 'ascii', content = '');
INSERT INTO search (search, rank) VALUES ('secure-delete', 1);
CREATE TABLE search_rows (
  search_rowid INTEGER PRIMARY KEY,
  words_sha256 BLOB NOT NULL
) STRICT;
`;

const INSERT_SEARCH = `INSERT INTO search (rowid, body) VALUES ((? << 32) + ?, ?)`;
const INSERT_SEARCH_ROW = `INSERT INTO search_rows (search_rowid, words_sha256) VALUES ((? << 32) + ?, ?)`;

/** The digest `search_rows` keeps of the words a row was indexed with (16 bytes of SHA-256). */
function wordsDigest(words: string): Buffer {
  return createHash('sha256').update(words, 'utf8').digest().subarray(0, 16);
}

type SearchWriters = {
  insertSearch: Database.Statement<[number, number, string]>;
  insertSearchRow: Database.Statement<[number, number, Buffer]>;
};

/** Indexes one event's words, with the digest erase checks them against. */
function indexWords(writers: SearchWriters, key: number, seq: number, words: string): void {
  writers.insertSearch.run(key, seq, words);
  writers.insertSearchRow.run(key, seq, wordsDigest(words));
}

/** The indexed words of a stored row, or undefined when its data does not decode or it carries no text. */
function storedRowWords(type: string, data: string): string | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(data);
  } catch {
    // A damaged row has no words to re-derive.
    return undefined;
  }
  return indexText({ type, data: parsed });
}

/** The inbox keyed by (session, key) alone: one B-tree, so a put or a removal writes one page, not two (version 7). */
const INBOX_TABLE_DDL = `
CREATE TABLE inbox (
  session_id TEXT NOT NULL,
  key TEXT NOT NULL,
  body TEXT NOT NULL,
  bytes INTEGER NOT NULL,
  digest TEXT NOT NULL,
  stored_at INTEGER NOT NULL,
  PRIMARY KEY (session_id, key)
) STRICT, WITHOUT ROWID;`;

/** Version 7: the inbox of versions 5 and 6 (a rowid table with a key index) rebuilt without rowid, entries kept. */
const INBOX_WITHOUT_ROWID_MIGRATION = `
ALTER TABLE inbox RENAME TO inbox_v6;
${INBOX_TABLE_DDL}
INSERT INTO inbox (session_id, key, body, bytes, digest, stored_at)
  SELECT session_id, key, body, bytes, digest, stored_at FROM inbox_v6;
DROP TABLE inbox_v6;
`;

const INBOX_DDL = `${INBOX_TABLE_DDL}
CREATE TABLE session_keys (
  session_id TEXT PRIMARY KEY,
  key_id TEXT NOT NULL,
  key BLOB NOT NULL,
  created_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
`;

const TRANSCRIPTS_DDL = `
CREATE TABLE transcripts (
  scope TEXT NOT NULL,
  digest TEXT NOT NULL,
  session_key INTEGER NOT NULL REFERENCES sessions(key),
  seq INTEGER NOT NULL,
  PRIMARY KEY (scope, digest)
) STRICT, WITHOUT ROWID;
CREATE INDEX transcripts_by_session ON transcripts (session_key);
`;

/** Version 8: the provider pacing buckets (pacing.ts), one row per provider key. */
const PACING_DDL = `
CREATE TABLE pacing (
  key TEXT PRIMARY KEY,
  state TEXT NOT NULL,
  updated_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
`;

/** Version 9: what each session spent (spend.ts), summed per tenant. */
const SPEND_DDL = `
CREATE TABLE spend (
  tenant TEXT NOT NULL,
  session_id TEXT NOT NULL,
  tokens INTEGER NOT NULL,
  cost_usd REAL NOT NULL,
  model_calls INTEGER NOT NULL,
  tool_calls INTEGER NOT NULL,
  wall_ms INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  PRIMARY KEY (tenant, session_id)
) STRICT, WITHOUT ROWID;
CREATE INDEX spend_by_session ON spend (session_id);
`;

/**
 * Version 10: one rowid tree for the events, keyed `session_key << 32 | seq` (a session's rows are
 * one rowid range, and an append at a session's end writes the leaf it ends on), with each append
 * batch's op and last seq on the batch's first row instead of a `batches` table and its index
 * (issue 27: two fewer trees written per commit). `batch_op` and `batch_last_seq` are both set or
 * both null; a seq outside 0..2^32-1 or an id that does not match its key and seq cannot be stored.
 */
const EVENTS_DDL = `
CREATE TABLE events (
  id INTEGER PRIMARY KEY,
  session_key INTEGER NOT NULL REFERENCES sessions(key),
  seq INTEGER NOT NULL,
  type TEXT NOT NULL,
  time INTEGER NOT NULL,
  data TEXT NOT NULL,
  surface_op TEXT,
  source_event_seqs TEXT,
  ignorable INTEGER,
  batch_op TEXT,
  batch_last_seq INTEGER,
  CHECK (seq BETWEEN 0 AND ${MAX_SEQ} AND id = (session_key << 32) + seq),
  CHECK ((batch_op IS NULL) = (batch_last_seq IS NULL))
) STRICT;`;

/**
 * Version 10 from 9: the events rebuilt as above, each batch's op and last seq moved onto the row
 * of its first seq, the `batches` table and its index dropped. A batch that cannot move (no row
 * at its first seq, or two batches starting at one row), a seq it cannot place or a row of no
 * session (a damaged log) stops the upgrade, naming it, before anything changes.
 */
function upgradeEventsToRowid(db: Database.Database, file: string): void {
  // Sorts and index lookups only: a large file upgrades in time linear in its rows (times a log).
  const unplaceable = db
    .prepare<[], { id: string; op: string; first_seq: number; last_seq: number }>(
      `SELECT s.id, b.op, b.first_seq, b.last_seq FROM batches b JOIN sessions s ON s.key = b.session_key
       WHERE NOT EXISTS (SELECT 1 FROM events e WHERE e.session_key = b.session_key AND e.seq = b.first_seq)
       UNION ALL
       SELECT s.id, min(b.op), b.first_seq, max(b.last_seq) FROM batches b JOIN sessions s ON s.key = b.session_key
       GROUP BY b.session_key, b.first_seq HAVING count(*) > 1
       LIMIT 5`,
    )
    .all();
  const outside = db
    .prepare<[], { id: string; seq: number }>(
      `SELECT s.id, e.seq FROM events e JOIN sessions s ON s.key = e.session_key
       WHERE e.seq NOT BETWEEN 0 AND ${MAX_SEQ} OR e.session_key NOT BETWEEN 0 AND ${MAX_SESSION_KEY} LIMIT 5`,
    )
    .all();
  // Rows of no session (only an edit with the foreign keys off makes them): the new table refuses them.
  const orphans = db
    .prepare<[], { session_key: number; seq: number }>(
      `SELECT e.session_key, e.seq FROM events e WHERE NOT EXISTS (SELECT 1 FROM sessions s WHERE s.key = e.session_key) LIMIT 5`,
    )
    .all();
  if (unplaceable.length > 0 || outside.length > 0 || orphans.length > 0) {
    const named = [
      ...unplaceable.map(
        (b) =>
          `session ${JSON.stringify(b.id)} batch ${JSON.stringify(b.op)} (seqs ${b.first_seq}..${b.last_seq}) has no row of its own to start on (or shares it with another batch)`,
      ),
      ...outside.map(
        (r) => `session ${JSON.stringify(r.id)} has an event at seq ${r.seq}, outside what version 10 stores`,
      ),
      ...orphans.map((r) => `an event row (seq ${r.seq}) names session key ${r.session_key}, which no session has`),
    ];
    throw new SessionlogError(
      'CORRUPT_LOG',
      `${file} cannot be upgraded to schema version ${SQLITE_SCHEMA_VERSION}: its stored log is damaged (${named.join('; ')}); nothing was changed. Open it with the previous build and erase or repair those sessions first`,
    );
  }
  db.exec(`
ALTER TABLE events RENAME TO events_v9;
${EVENTS_DDL}
INSERT INTO events (id, session_key, seq, type, time, data, surface_op, source_event_seqs, ignorable, batch_op, batch_last_seq)
  SELECT (e.session_key << 32) + e.seq, e.session_key, e.seq, e.type, e.time, e.data, e.surface_op,
         e.source_event_seqs, e.ignorable, b.op, b.last_seq
  FROM events_v9 e LEFT JOIN batches b ON b.session_key = e.session_key AND b.first_seq = e.seq
  ORDER BY e.session_key, e.seq;
DROP TABLE events_v9;
DROP TABLE batches;
`);
}

const TOMBSTONES_DDL = `
CREATE TABLE tombstones (
  id TEXT PRIMARY KEY,
  erased_at INTEGER NOT NULL,
  until INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
`;

const SCHEMA = `
CREATE TABLE sessions (
  key INTEGER PRIMARY KEY,
  id TEXT NOT NULL UNIQUE,
  header TEXT NOT NULL
) STRICT;
${EVENTS_DDL}
CREATE TABLE artifacts (
  session_key INTEGER NOT NULL REFERENCES sessions(key),
  name TEXT NOT NULL,
  content TEXT NOT NULL,
  PRIMARY KEY (session_key, name)
) STRICT, WITHOUT ROWID;
CREATE TABLE projection_cache (
  session_key INTEGER PRIMARY KEY REFERENCES sessions(key),
  record TEXT NOT NULL
) STRICT;
${TOMBSTONES_DDL}
${SEARCH_DDL}
${INBOX_DDL}
${TRANSCRIPTS_DDL}
${PACING_DDL}
${SPEND_DDL}`;

function prepareFile(path: string): string {
  const absolute = resolve(path);
  // Directories and the file we create are owner-only; existing ones are left as they are.
  mkdirSync(dirname(absolute), { recursive: true, mode: 0o700 });
  try {
    closeSync(openSync(absolute, 'wx', 0o600));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  }
  return realpathSync(absolute);
}

/**
 * Indexes every stored event that carries text (the upgrade to version 4, and the rebuild after
 * an erase that could not re-derive a row's words), a page of rows at a time. A row whose data
 * does not decode is left out: its session is refused as CORRUPT_LOG by every read, search
 * included.
 */
function backfillSearchIndex(db: Database.Database): void {
  const page = db.prepare<[number], { id: number; session_key: number; seq: number; type: string; data: string }>(
    `SELECT id, session_key, seq, type, data FROM events WHERE id > ? AND type IN (${SEARCHABLE_TYPES_SQL}) ORDER BY id LIMIT 1000`,
  );
  // Its own statements: it also runs while the store opens, before the store's are prepared.
  const writers: SearchWriters = {
    insertSearch: db.prepare(INSERT_SEARCH),
    insertSearchRow: db.prepare(INSERT_SEARCH_ROW),
  };
  for (let rows = page.all(-1); rows.length > 0; rows = page.all(rows[rows.length - 1]!.id)) {
    for (const row of rows) {
      // A damaged row has no words: nothing to index (see above).
      const body = storedRowWords(row.type, row.data);
      if (body) indexWords(writers, row.session_key, row.seq, body);
    }
  }
}

/** Opens (creating if needed) a SQLite store at `path`, or an in-memory one for `:memory:`. */
export function openSqliteStore(path: string, options: StoreOptions = {}): SqliteSessionStore {
  return new SqliteSessionStore(path, resolveStoreOptions(options));
}

/** The SQLite store: the relational core over a {@link SqliteDriver} on one better-sqlite3 connection. */
export class SqliteSessionStore extends RelationalSessionStore {
  readonly kind = 'sqlite' as const;
  private readonly sqlite: SqliteDriver;

  constructor(path: string, options: ResolvedStoreOptions) {
    const sqlite = new SqliteDriver(path, options);
    super(sqlite, options);
    this.sqlite = sqlite;
  }

  /** The connection's settings as SQLite reports them (diagnostics and `sessionlog verify`). */
  settings(): SqliteSettings {
    return this.sqlite.settings();
  }
}

export type SqliteSettings = {
  journalMode: string;
  synchronous: number;
  foreignKeys: number;
  busyTimeoutMs: number;
  applicationId: number;
  userVersion: number;
  pageSize: number;
};

/**
 * One better-sqlite3 connection. Every body runs to its end synchronously inside its transaction
 * (write bodies of one event-loop turn inside one, see {@link SqliteDriver.commitQueuedWrites}),
 * so nothing else runs on the connection meanwhile; writers in other processes wait for SQLite's
 * own lock (`busyTimeoutMs`).
 */
class SqliteDriver implements driver.RelationalDriver {
  readonly location: string;
  readonly pollIntervalMs: number;
  readonly batchLayout = 'on-rows';
  private readonly memory: boolean;
  private readonly db: Database.Database;
  private readonly statements: SqliteStatements;
  /** Runs a function in a transaction (`.immediate` or `.deferred`); prepared once. */
  private readonly transaction: Database.Transaction<(body: () => unknown) => unknown>;
  /** Write transactions waiting for the next group commit ({@link commitQueuedWrites}). */
  private queuedWrites: Array<{
    body: () => unknown;
    resolve: (value: unknown) => void;
    reject: (error: unknown) => void;
  }> = [];

  constructor(
    path: string,
    private readonly options: ResolvedStoreOptions,
  ) {
    this.memory = path === ':memory:';
    const file = this.memory ? ':memory:' : prepareFile(path);
    this.location = this.memory ? `sqlite:memory:${randomUUID()}` : `sqlite:${file}`;
    this.pollIntervalMs = options.pollIntervalMs;
    this.db = new Database(file);
    try {
      this.configure();
      this.initializeSchema(file);
    } catch (error) {
      this.db.close();
      throw error;
    }
    this.statements = new SqliteStatements(this.db, this.location);
    this.transaction = this.db.transaction((body: () => unknown) => body());
  }

  private configure(): void {
    this.db.pragma(`busy_timeout = ${this.options.busyTimeoutMs}`);
    // A new file gets 4 KiB pages (SQLITE_PAGE_SIZE): the WAL writes half the bytes per touched
    // page of 8 KiB ones, and a rowid table's leaf keeps an event row of up to ~4 KB (a long
    // assistant reply) inline (BENCHMARKS.md, "schema 10"). Only possible before the first table
    // exists; a file made with other pages keeps them (SQLite reads both).
    if (this.db.pragma('page_count', { simple: true }) === 0) this.db.pragma(`page_size = ${SQLITE_PAGE_SIZE}`);
    const journal = this.db.pragma('journal_mode = WAL', { simple: true });
    if (journal !== (this.memory ? 'memory' : 'wal')) {
      throw new SessionlogError(
        'INVALID_ARGUMENT',
        `SQLite refused WAL journal mode (got ${String(journal)}); put the database on a local filesystem`,
      );
    }
    this.db.pragma('synchronous = FULL');
    const synchronous = this.db.pragma('synchronous', { simple: true });
    if (synchronous !== 2)
      throw new SessionlogError(
        'INVALID_ARGUMENT',
        `SQLite synchronous reads back ${String(synchronous)}, expected 2 (FULL)`,
      );
    this.db.pragma('foreign_keys = ON');
    if (this.db.pragma('foreign_keys', { simple: true }) !== 1) {
      throw new SessionlogError('INVALID_ARGUMENT', 'SQLite foreign_keys could not be enabled');
    }
    // Erased content is overwritten with zeros, not left in free space (DESIGN §4.2).
    this.db.pragma('secure_delete = ON');
    if (this.db.pragma('secure_delete', { simple: true }) !== 1) {
      throw new SessionlogError('INVALID_ARGUMENT', 'SQLite secure_delete could not be enabled');
    }
  }

  private initializeSchema(file: string): void {
    const init = this.db.transaction(() => {
      const appId = this.db.pragma('application_id', { simple: true }) as number;
      const version = this.db.pragma('user_version', { simple: true }) as number;
      if (appId === 0 && version === 0) {
        const objects = this.db.prepare(`SELECT count(*) AS n FROM sqlite_master`).get() as { n: number };
        if (objects.n > 0) {
          throw new SessionlogError(
            'INVALID_ARGUMENT',
            `${file} is an SQLite database of another application (it has tables but no sessionlog application id); point the store at a new file`,
          );
        }
        this.db.exec(SCHEMA);
        this.db.pragma(`application_id = ${SQLITE_APPLICATION_ID}`);
        this.db.pragma(`user_version = ${SQLITE_SCHEMA_VERSION}`);
        return;
      }
      if (appId !== SQLITE_APPLICATION_ID) {
        throw new SessionlogError(
          'INVALID_ARGUMENT',
          `${file} is not a sessionlog database (application_id 0x${appId.toString(16)}); point the store at a sessionlog database or a new file`,
        );
      }
      if (version > SQLITE_SCHEMA_VERSION) {
        throw new SessionlogError(
          'UNSUPPORTED_FORMAT',
          `${file} has schema version ${version}, written by a newer version of sessionlog (this build reads version ${SQLITE_SCHEMA_VERSION}); upgrade sessionlog to open it`,
        );
      }
      if (version < 1) {
        throw new SessionlogError(
          'UNSUPPORTED_FORMAT',
          `${file} has schema version ${version}, older than this build reads, and there is no upgrade path`,
        );
      }
      // Version 2 adds the tombstones of erased sessions, version 3 the search index, version 4
      // makes it contentless (the words once, in the index) with the digests erase needs,
      // version 5 adds the inbox and the session keys, version 6 the transcript index, version 7
      // keys the inbox without a rowid (one tree written per put or removal instead of two),
      // version 8 adds the provider pacing buckets, version 9 the spend rows (what a session
      // spent before it is not in them), version 10 the events layout above.
      // Version 10 (first: the steps below read the events in its layout) keeps the events in one
      // rowid tree with each batch's op on its first row.
      if (version < 10) upgradeEventsToRowid(this.db, file);
      if (version < 2) this.db.exec(TOMBSTONES_DDL);
      if (version < 4) {
        if (version === 3) this.db.exec(`DROP TABLE search`);
        this.db.exec(SEARCH_DDL);
        backfillSearchIndex(this.db);
      }
      if (version < 5) this.db.exec(INBOX_DDL);
      else if (version < 7) this.db.exec(INBOX_WITHOUT_ROWID_MIGRATION);
      if (version < 6) this.db.exec(TRANSCRIPTS_DDL);
      if (version < 8) this.db.exec(PACING_DDL);
      if (version < 9) this.db.exec(SPEND_DDL);
      if (version < SQLITE_SCHEMA_VERSION) this.db.pragma(`user_version = ${SQLITE_SCHEMA_VERSION}`);
    });
    init.immediate();
  }

  run<T>(mode: driver.TxMode, body: (tx: driver.RelationalTx) => driver.Steps<T>): T | Promise<T> {
    const steps = (): T => runSteps(body(this.statements));
    if (mode === 'single') return steps();
    if (mode === 'read') return this.transaction.deferred(steps) as T;
    return new Promise<T>((resolve, reject) => {
      this.queuedWrites.push({ body: steps, resolve: resolve as (value: unknown) => void, reject });
      if (this.queuedWrites.length === 1) setImmediate(() => this.commitQueuedWrites());
    });
  }

  /**
   * Group commit: the write transactions asked for in one turn of the event loop (several
   * sessions' appends under load) run in one `BEGIN IMMEDIATE` transaction, each in a savepoint
   * of its own, and share its one commit and fsync. A write that fails is rolled back to its
   * savepoint and fails alone; each caller hears only after the commit, so nothing is reported
   * written before it is durable. A lone write is its own transaction, as before.
   */
  private commitQueuedWrites(): void {
    const group = this.queuedWrites;
    this.queuedWrites = [];
    if (group.length === 0) return;
    if (group.length === 1) {
      const write = group[0]!;
      try {
        write.resolve(this.transaction.immediate(write.body));
      } catch (error) {
        write.reject(error);
      }
      return;
    }
    const outcomes: Array<{ value: unknown } | { error: unknown }> = [];
    try {
      this.transaction.immediate(() => {
        for (const write of group) {
          try {
            // Nested in the open transaction, better-sqlite3 runs it in a savepoint.
            outcomes.push({ value: this.transaction(write.body) });
          } catch (error) {
            outcomes.push({ error });
            // Disk full or an I/O error ends SQLite's transaction: none of the group was written.
            if (!this.db.inTransaction) throw error;
          }
        }
      });
    } catch (error) {
      group.forEach((write, i) => {
        const outcome = outcomes[i];
        write.reject(outcome && 'error' in outcome ? outcome.error : error);
      });
      return;
    }
    group.forEach((write, i) => {
      const outcome = outcomes[i]!;
      if ('error' in outcome) write.reject(outcome.error);
      else write.resolve(outcome.value);
    });
  }

  assertStorableOp(): void {
    // SQLite text holds any string.
  }

  /**
   * In one snapshot with a check that the session row is still the copy's: a key of an erased
   * session can be given to a new one (INTEGER PRIMARY KEY reuses the largest), and its rows must
   * not be matched against the erased session's copy.
   */
  searchMatches(scope: driver.SearchScope, request: SearchRequest): RankedSeq[] {
    // A write transaction: the events appended since the session's last search are indexed
    // first (appends do not index), so the results are exact up to the copy's head.
    const current = (): boolean => {
      const row = this.statements.sessionRow(scope.id);
      return row !== undefined && row.key === scope.key && row.header === scope.header;
    };
    // A page of the backlog per transaction, so another writer waits one page at most; the
    // transaction that indexes the last page (the only one, usually) answers the query.
    for (let after = -1; ;) {
      const from = after;
      const step = this.transaction.immediate(() => {
        if (!current()) return { matches: [] };
        const more = this.statements.indexTail(scope.key, scope.head, { pages: 1, after: from });
        if (more !== undefined) return { more };
        const match = fts5MatchExpression(request.words);
        return { matches: this.statements.searchMatches(scope.key, match, scope.head, request.limit) };
      }) as { matches: RankedSeq[] } | { more: number };
      if ('matches' in step) return step.matches;
      after = step.more;
    }
  }

  afterErase(): string[] {
    return this.memory ? [] : [this.checkpointAfterErase()];
  }

  storeError(error: unknown): unknown {
    const code = (error as { code?: unknown } | null)?.code;
    if (typeof code === 'string' && code.startsWith('SQLITE_BUSY')) {
      return new SessionlogError(
        'UNAVAILABLE',
        `${this.location} stayed locked by another connection for longer than busyTimeoutMs (${this.options.busyTimeoutMs} ms); check for a stuck or paused process holding a write transaction on this database`,
        { cause: error },
      );
    }
    return error;
  }

  close(): void {
    // Writes already asked for are committed, not dropped: their callers hear as usual.
    if (this.db.open) this.commitQueuedWrites();
    if (this.db.open) this.db.close();
  }

  settings(): SqliteSettings {
    if (!this.db.open) throw storeClosed();
    const get = (name: string): unknown => this.db.pragma(name, { simple: true });
    return {
      journalMode: get('journal_mode') as string,
      synchronous: get('synchronous') as number,
      foreignKeys: get('foreign_keys') as number,
      busyTimeoutMs: get('busy_timeout') as number,
      applicationId: get('application_id') as number,
      userVersion: get('user_version') as number,
      pageSize: get('page_size') as number,
    };
  }

  /** Moves every WAL frame into the database and empties the WAL, so erased bytes leave the WAL file. */
  private checkpointAfterErase(): string {
    const [result] = this.db.pragma('wal_checkpoint(TRUNCATE)') as Array<{
      busy: number;
      log: number;
      checkpointed: number;
    }>;
    if (result && result.busy === 0)
      return 'the deleted rows were overwritten (secure_delete) and the WAL checkpointed and truncated';
    return `the deleted rows were overwritten (secure_delete) but another connection kept the WAL from being truncated (${result?.checkpointed ?? 0} of ${result?.log ?? 0} frames checkpointed); older copies of the erased bytes stay in the WAL until the next full checkpoint`;
  }
}

/** The statements of the relational core in SQLite's dialect, prepared once per connection. */
class SqliteStatements implements driver.RelationalTx {
  private readonly sql: ReturnType<typeof prepareStatements>;

  constructor(
    private readonly db: Database.Database,
    private readonly location: string,
  ) {
    this.sql = prepareStatements(db);
  }

  sessionHead(id: string): driver.SessionHeadRow | undefined {
    const row = this.sql.sessionHead.get(id);
    return row && { key: row.key, header: row.header, head: storedHead(row.last_event, row.last_batch) };
  }

  sessionRow(id: string): driver.SessionRow | undefined {
    return this.sql.sessionById.get(id);
  }

  listSessions(): Array<{ id: string; header: string }> {
    return this.sql.listSessions.all();
  }

  insertSession(id: string, header: string): boolean {
    return this.sql.insertSession.run(id, header).changes === 1;
  }

  lockSession(): boolean {
    // BEGIN IMMEDIATE holds the database's write lock already.
    return true;
  }

  lockSessionForErase(id: string): number | undefined {
    return this.sql.sessionById.get(id)?.key;
  }

  /**
   * The rows of seqs `from` to `to` (exclusive) and the batches covering them: the batch that
   * starts before `from` (the nearest batch start below it) and those starting on the rows.
   */
  rowsFrom(key: number, from: number, to: number): driver.StoredRows {
    const events = this.sql.eventsFrom.all(key, from, key, to);
    const batches: BatchRow[] = [];
    const before = from > 0 ? this.sql.batchBefore.get(key, from, key) : undefined;
    if (before) batches.push(before);
    for (const row of events)
      if (row.batch_op !== null) batches.push({ op: row.batch_op, first_seq: row.seq, last_seq: row.batch_last_seq! });
    return { events, batches };
  }

  rowsAt(key: number, seqs: readonly number[]): EventRow[] {
    const rows: EventRow[] = [];
    for (const seq of seqs) {
      const row = this.sql.eventAt.get(key, seq);
      if (row) rows.push(row);
    }
    return rows;
  }

  /** Always the text: hashing it here or in the caller costs the same. */
  prefixDigest(key: number, from: number, to: number): driver.PrefixDigestChunk {
    const chunk = this.sql.digest.get(key, from, key, to)!;
    return {
      hashed: false,
      rowsText: chunk.text ?? EMPTY,
      batchesText: EMPTY,
      rows: chunk.rows,
      misplaced: chunk.misplaced,
    };
  }

  /** The batch's rows, its op and last seq on the first (indexed for search by the session's next search, not here). */
  insertBatch(key: number, _id: string, events: readonly StoredEvent[], op: string): void {
    const lastSeq = events[events.length - 1]!.seq;
    if (lastSeq > MAX_SEQ)
      throw new SessionlogError(
        'INVALID_ARGUMENT',
        `seq ${lastSeq} is past the SQLite store's limit of 2^32 events per session; continue in a fork`,
      );
    events.forEach((event, i) => {
      const row = encodeEvent(event);
      this.sql.insertEvent.run(
        key,
        row.seq,
        key,
        row.seq,
        row.type,
        row.time,
        row.data,
        row.surfaceOp,
        row.sourceEventSeqs,
        row.ignorable ? 1 : null,
        i === 0 ? op : null,
        i === 0 ? lastSeq : null,
      );
    });
  }

  /**
   * Counts and deletes the session's rows, and removes its words from the search index (see
   * {@link unindexSession}); when a row's words could not be given back, the whole index is
   * rebuilt from the other sessions, so none of the erased session's words stay.
   */
  deleteSession(key: number): driver.SessionRemoval {
    const counts = {
      events: this.sql.countEvents.get(key, key)!.n,
      artifacts: this.sql.countArtifacts.get(key)!.n,
      projection_cache: this.sql.countCache.get(key)!.n,
      transcripts: this.sql.countTranscripts.get(key)!.n,
    };
    const unindexed = this.unindexSession(key);
    this.sql.deleteTranscripts.run(key);
    this.sql.deleteEvents.run(key, key);
    this.sql.deleteArtifacts.run(key);
    this.sql.deleteCache.run(key);
    this.sql.deleteSession.run(key);
    if (!unindexed.exact) {
      this.db.exec(`INSERT INTO search (search) VALUES ('delete-all'); DELETE FROM search_rows;`);
      backfillSearchIndex(this.db);
    }
    return {
      removed: {
        header: 1,
        events: counts.events,
        artifacts: counts.artifacts,
        projectionCheckpoints: counts.projection_cache,
        transcriptEntries: counts.transcripts,
      },
      places: [
        { place: `${this.location} table sessions`, removed: 1 },
        ...Object.entries({ ...counts, search: unindexed.rows }).map(([table, n]) => ({
          place: `${this.location} table ${table}`,
          removed: n,
        })),
      ],
      notes: unindexed.exact
        ? []
        : [
            'a text row of the session no longer had the words it was indexed with (damaged or edited in the file), so the whole search index was rebuilt from the remaining sessions: none of its words stay',
          ],
    };
  }

  /**
   * Removes session `key`'s words from the contentless index: each row's words are re-derived
   * from its event and given back to the index, if they still hash to the digest taken when the
   * row was indexed. `exact` is false when some row's could not be (a damaged or edited row):
   * the caller then rebuilds the whole index, since a contentless index cannot forget words it
   * is not given. `rows`: how many indexed rows the session had.
   */
  private unindexSession(key: number): { rows: number; exact: boolean } {
    const indexed = this.sql.indexedRows.all(key, key);
    let exact = true;
    for (const row of indexed) {
      const words = row.type === null || row.data === null ? undefined : storedRowWords(row.type, row.data);
      if (words !== undefined && wordsDigest(words).equals(row.digest)) this.sql.unindexSearch.run(row.rowid, words);
      else exact = false;
    }
    this.sql.deleteSearchRows.run(key, key);
    return { rows: indexed.length, exact };
  }

  tombstone(id: string): driver.Tombstone | undefined {
    const row = this.sql.tombstone.get(id);
    return row && { erasedAt: row.erased_at, until: row.until };
  }

  putTombstone(id: string, tombstone: driver.Tombstone): void {
    this.sql.putTombstone.run(id, tombstone.erasedAt, tombstone.until);
  }

  dropExpiredTombstones(now: number): void {
    this.sql.dropExpiredTombstones.run(now);
  }

  insertArtifact(key: number, name: string, content: string): boolean {
    return this.sql.insertArtifact.run(key, name, content).changes === 1;
  }

  artifactContent(id: string, name: string): string | undefined {
    return this.sql.artifact.get(id, name)?.content;
  }

  projectionRecord(id: string): string | undefined {
    return this.sql.cacheGet.get(id)?.record;
  }

  putProjectionRecord(key: number, record: string): void {
    this.sql.cachePut.run(key, record);
  }

  lockSessionId(): void {
    // BEGIN IMMEDIATE holds the database's write lock already.
  }

  insertInboxEntry(id: string, row: driver.InboxRow): boolean {
    return this.sql.insertInbox.run(id, row.key, row.body, row.bytes, row.digest, row.storedAt).changes === 1;
  }

  inboxEntry(id: string, key: string): InboxEntry | undefined {
    const row = this.sql.inboxEntry.get(id, key);
    return row && { key: row.key, bytes: row.bytes, digest: row.digest, storedAt: row.stored_at };
  }

  inboxBody(id: string, key: string): string | undefined {
    return this.sql.inboxBody.get(id, key)?.body;
  }

  listInbox(id: string): InboxEntry[] {
    return this.sql.listInbox
      .all(id)
      .map((row) => ({ key: row.key, bytes: row.bytes, digest: row.digest, storedAt: row.stored_at }));
  }

  deleteInboxEntries(id: string, keys: readonly string[]): number {
    let removed = 0;
    for (const key of keys) removed += this.sql.deleteInboxEntry.run(id, key).changes;
    return removed;
  }

  deleteInbox(id: string): ErasedPlace {
    return { place: `${this.location} table inbox`, removed: this.sql.deleteInbox.run(id).changes };
  }

  insertSessionKey(id: string, key: SessionKey, createdAt: number): void {
    this.sql.insertSessionKey.run(id, key.id, key.key, createdAt);
  }

  sessionKey(id: string): { keyId: unknown; key: unknown } | undefined {
    const row = this.sql.sessionKey.get(id);
    return row && { keyId: row.key_id, key: row.key };
  }

  deleteSessionKey(id: string): ErasedPlace {
    return { place: `${this.location} table session_keys`, removed: this.sql.deleteSessionKey.run(id).changes };
  }

  upsertTranscriptEntry(scope: string, digest: string, entry: TranscriptEntry): boolean {
    return this.sql.upsertTranscript.run(scope, digest, entry.seq, entry.sessionId).changes === 1;
  }

  lockPaceRow(key: string): string | undefined {
    // BEGIN IMMEDIATE already holds the database's write lock.
    return this.sql.paceRow.get(key)?.state;
  }

  putPaceRow(key: string, state: string, now: number): void {
    this.sql.putPaceRow.run(key, state, now);
  }

  addSpend(tenant: string, id: string, spent: SpendTotals, now: number): void {
    this.sql.addSpend.run(tenant, id, ...spendColumns(spent), now);
  }

  retireSpend(id: string, now: number): void {
    this.sql.foldErasedSpend.run(ERASED_SPEND_ROW, now, id);
    this.sql.deleteSpend.run(id);
  }

  tenantSpend(tenant: string): TenantSpend {
    const row = this.sql.tenantSpend.get(ERASED_SPEND_ROW, tenant)!;
    return {
      tokens: row.tokens ?? 0,
      costUsd: row.cost_usd ?? 0,
      modelCalls: row.model_calls ?? 0,
      toolCalls: row.tool_calls ?? 0,
      wallMs: row.wall_ms ?? 0,
      sessions: row.sessions,
    };
  }

  transcriptEntry(scope: string, digest: string): { sessionId: unknown; seq: unknown } | undefined {
    const row = this.sql.transcript.get(scope, digest);
    return row && { sessionId: row.session_id, seq: row.seq };
  }

  /**
   * Indexes session `key`'s events that carry text, from just past the last one indexed (or past
   * `options.after`, when further) up to `head` (exclusive), in seq order, at most
   * `options.pages` pages of rows. Returns the seq it stopped after when rows remain, else
   * undefined. The last indexed seq is the session's highest search rowid (rows are added in
   * seq order); a cursor carries a caller past rows without words, which leave no rowid.
   */
  indexTail(key: number, head: number, options: { pages?: number; after?: number } = {}): number | undefined {
    let after = Math.max(this.sql.lastIndexed.get(key, key)?.seq ?? -1, options.after ?? -1);
    // A page of rows at a time (a statement being iterated would hold the connection).
    for (let page = 0; page < (options.pages ?? Number.POSITIVE_INFINITY); page++) {
      const rows = this.sql.searchableFrom.all(key, after, key, head);
      for (const row of rows) {
        // A damaged row has no words: nothing to index (a read refuses its session as CORRUPT_LOG).
        const body = storedRowWords(row.type, row.data);
        if (body) indexWords(this.sql, key, row.seq, body);
      }
      if (rows.length < SEARCH_INDEX_PAGE) return undefined;
      after = rows[rows.length - 1]!.seq;
    }
    return after;
  }

  /** The search candidates of session `key` below `head`, best first (bm25 is lower for a better match). */
  searchMatches(key: number, match: string, head: number, limit: number): RankedSeq[] {
    return this.sql.searchMatch.all(match, key, key, head, limit).map((row) => ({ seq: row.seq, score: -row.rank }));
  }
}

/** A tenant's sums (null when it has no rows). */
type SpendSums = {
  tokens: number | null;
  cost_usd: number | null;
  model_calls: number | null;
  tool_calls: number | null;
  wall_ms: number | null;
  sessions: number;
};
/** An events row with its batch columns (set on a batch's first row only). */
type BatchedEventRow = EventRow & { batch_op: string | null; batch_last_seq: number | null };
type InboxQueryRow = { key: string; bytes: number; digest: string; stored_at: number };

function prepareStatements(db: Database.Database) {
  return {
    sessionById: db.prepare<[string], driver.SessionRow>(`SELECT key, header FROM sessions WHERE id = ?`),
    // The session row and the stored head in one statement (one snapshot).
    // The last batch's last seq: the last row that starts a batch (a backward walk of one batch).
    sessionHead: db.prepare<[string], driver.SessionRow & { last_event: number | null; last_batch: number | null }>(
      `SELECT s.key, s.header,
         (SELECT max(e.id) & ${MAX_SEQ} FROM events e WHERE e.id >= (s.key << 32) AND e.id < ((s.key + 1) << 32)) AS last_event,
         (SELECT e.batch_last_seq FROM events e WHERE e.id >= (s.key << 32) AND e.id < ((s.key + 1) << 32)
            AND e.batch_op IS NOT NULL ORDER BY e.id DESC LIMIT 1) AS last_batch
       FROM sessions s WHERE s.id = ?`,
    ),
    insertSession: db.prepare<[string, string]>(
      `INSERT INTO sessions (id, header) VALUES (?, ?) ON CONFLICT (id) DO NOTHING`,
    ),
    listSessions: db.prepare<[], { header: string; id: string }>(`SELECT id, header FROM sessions ORDER BY id`),
    eventsFrom: db.prepare<[number, number, number, number], BatchedEventRow>(
      `SELECT seq, type, time, data, surface_op, source_event_seqs, ignorable, batch_op, batch_last_seq FROM events
       WHERE id >= (? << 32) + ? AND id < (? << 32) + ? ORDER BY id`,
    ),
    eventAt: db.prepare<[number, number], EventRow>(
      `SELECT seq, type, time, data, surface_op, source_event_seqs, ignorable FROM events WHERE id = (? << 32) + ?`,
    ),
    // anchor.ts RelationalDigest: the rows' text, each with the batch record on it, joined with
    // char(30) and built from the stored columns in rowid (= seq) order, as bytes (NULL for no
    // rows); with the rows whose seq column disagrees with their key.
    digest: db.prepare<[number, number, number, number], { text: Buffer | null; rows: number; misplaced: number }>(
      `SELECT CAST(group_concat(concat_ws(char(31), time,
             (ignorable IS NULL) + 2 * (surface_op IS NULL) + 4 * (source_event_seqs IS NULL)
               + 8 * (batch_last_seq IS NULL) + 16 * (batch_op IS NULL),
             ignorable, type, data, surface_op, source_event_seqs, batch_last_seq, batch_op), char(30)) AS BLOB) AS text,
         count(*) AS rows, ifnull(sum(seq <> (id & ${MAX_SEQ})), 0) AS misplaced
       FROM events WHERE id >= (? << 32) + ? AND id < (? << 32) + ?`,
    ),
    // The batch a read from seq `from` starts inside: the nearest batch start below it.
    batchBefore: db.prepare<[number, number, number], BatchRow>(
      `SELECT batch_op AS op, seq AS first_seq, batch_last_seq AS last_seq FROM events
       WHERE id < (? << 32) + ? AND id >= (? << 32) AND batch_op IS NOT NULL ORDER BY id DESC LIMIT 1`,
    ),
    insertEvent: db.prepare<
      [
        number,
        number,
        number,
        number,
        string,
        number,
        string,
        string | null,
        string | null,
        number | null,
        string | null,
        number | null,
      ]
    >(
      `INSERT INTO events (id, session_key, seq, type, time, data, surface_op, source_event_seqs, ignorable, batch_op, batch_last_seq)
       VALUES ((? << 32) + ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ),
    insertArtifact: db.prepare<[number, string, string]>(
      `INSERT INTO artifacts (session_key, name, content) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`,
    ),
    artifact: db.prepare<[string, string], { content: string }>(
      `SELECT a.content FROM artifacts a JOIN sessions s ON s.key = a.session_key WHERE s.id = ? AND a.name = ?`,
    ),
    cacheGet: db.prepare<[string], { record: string }>(
      `SELECT c.record FROM projection_cache c JOIN sessions s ON s.key = c.session_key WHERE s.id = ?`,
    ),
    cachePut: db.prepare<[number, string]>(
      `INSERT INTO projection_cache (session_key, record) VALUES (?, ?) ON CONFLICT (session_key) DO UPDATE SET record = excluded.record`,
    ),
    tombstone: db.prepare<[string], { erased_at: number; until: number }>(
      `SELECT erased_at, until FROM tombstones WHERE id = ?`,
    ),
    putTombstone: db.prepare<[string, number, number]>(
      `INSERT INTO tombstones (id, erased_at, until) VALUES (?, ?, ?) ON CONFLICT (id) DO UPDATE SET erased_at = excluded.erased_at, until = excluded.until`,
    ),
    dropExpiredTombstones: db.prepare<[number]>(`DELETE FROM tombstones WHERE until <= ?`),
    countEvents: db.prepare<[number, number], { n: number }>(
      `SELECT count(*) AS n FROM events WHERE id >= (? << 32) AND id < ((? + 1) << 32)`,
    ),
    countArtifacts: db.prepare<[number], { n: number }>(`SELECT count(*) AS n FROM artifacts WHERE session_key = ?`),
    countCache: db.prepare<[number], { n: number }>(`SELECT count(*) AS n FROM projection_cache WHERE session_key = ?`),
    countTranscripts: db.prepare<[number], { n: number }>(
      `SELECT count(*) AS n FROM transcripts WHERE session_key = ?`,
    ),
    deleteEvents: db.prepare<[number, number]>(`DELETE FROM events WHERE id >= (? << 32) AND id < ((? + 1) << 32)`),
    deleteArtifacts: db.prepare<[number]>(`DELETE FROM artifacts WHERE session_key = ?`),
    deleteCache: db.prepare<[number]>(`DELETE FROM projection_cache WHERE session_key = ?`),
    deleteSession: db.prepare<[number]>(`DELETE FROM sessions WHERE key = ?`),
    insertSearch: db.prepare<[number, number, string]>(INSERT_SEARCH),
    insertSearchRow: db.prepare<[number, number, Buffer]>(INSERT_SEARCH_ROW),
    // A contentless index forgets a row's words only when given them again, exactly.
    unindexSearch: db.prepare<[number, string]>(`INSERT INTO search (search, rowid, body) VALUES ('delete', ?, ?)`),
    // A search row's rowid is its event's id.
    indexedRows: db.prepare<
      [number, number],
      { rowid: number; digest: Buffer; type: string | null; data: string | null }
    >(
      `SELECT r.search_rowid AS rowid, r.words_sha256 AS digest, e.type, e.data FROM search_rows r
       LEFT JOIN events e ON e.id = r.search_rowid
       WHERE r.search_rowid >= (? << 32) AND r.search_rowid < ((? + 1) << 32)`,
    ),
    // The last indexed seq of a session: its highest rowid in search_rows (rowid = key << 32 | seq).
    lastIndexed: db.prepare<[number, number], { seq: number | null }>(
      `SELECT max(search_rowid) & ${MAX_SEQ} AS seq FROM search_rows WHERE search_rowid >= (? << 32) AND search_rowid < ((? + 1) << 32)`,
    ),
    searchableFrom: db.prepare<[number, number, number, number], { seq: number; type: string; data: string }>(
      `SELECT seq, type, data FROM events WHERE id > (? << 32) + ? AND id < (? << 32) + ? AND type IN (${SEARCHABLE_TYPES_SQL}) ORDER BY id LIMIT ${SEARCH_INDEX_PAGE}`,
    ),
    // bm25 is lower for a better match; ties go to the later event.
    searchMatch: db.prepare<[string, number, number, number, number], { seq: number; rank: number }>(
      `SELECT rowid & ${MAX_SEQ} AS seq, rank FROM search WHERE search MATCH ? AND rowid >= (? << 32) AND rowid < (? << 32) + ? ORDER BY rank, rowid DESC LIMIT ?`,
    ),
    insertInbox: db.prepare<[string, string, string, number, string, number]>(
      `INSERT INTO inbox (session_id, key, body, bytes, digest, stored_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
    ),
    inboxEntry: db.prepare<[string, string], InboxQueryRow>(
      `SELECT key, bytes, digest, stored_at FROM inbox WHERE session_id = ? AND key = ?`,
    ),
    inboxBody: db.prepare<[string, string], { body: string }>(
      `SELECT body FROM inbox WHERE session_id = ? AND key = ?`,
    ),
    listInbox: db.prepare<[string], InboxQueryRow>(
      `SELECT key, bytes, digest, stored_at FROM inbox WHERE session_id = ? ORDER BY stored_at, key`,
    ),
    deleteInboxEntry: db.prepare<[string, string]>(`DELETE FROM inbox WHERE session_id = ? AND key = ?`),
    deleteInbox: db.prepare<[string]>(`DELETE FROM inbox WHERE session_id = ?`),
    insertSessionKey: db.prepare<[string, string, Buffer, number]>(
      `INSERT INTO session_keys (session_id, key_id, key, created_at) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING`,
    ),
    sessionKey: db.prepare<[string], { key_id: unknown; key: unknown }>(
      `SELECT key_id, key FROM session_keys WHERE session_id = ?`,
    ),
    deleteSessionKey: db.prepare<[string]>(`DELETE FROM session_keys WHERE session_id = ?`),
    // The WHERE clause also keeps SQLite from reading ON CONFLICT as a join's ON.
    upsertTranscript: db.prepare<[string, string, number, string]>(
      `INSERT INTO transcripts (scope, digest, session_key, seq) SELECT ?, ?, key, ? FROM sessions WHERE id = ?
       ON CONFLICT (scope, digest) DO UPDATE SET session_key = excluded.session_key, seq = excluded.seq`,
    ),
    transcript: db.prepare<[string, string], { session_id: unknown; seq: unknown }>(
      `SELECT s.id AS session_id, t.seq FROM transcripts t JOIN sessions s ON s.key = t.session_key WHERE t.scope = ? AND t.digest = ?`,
    ),
    deleteTranscripts: db.prepare<[number]>(`DELETE FROM transcripts WHERE session_key = ?`),
    paceRow: db.prepare<[string], { state: string }>(`SELECT state FROM pacing WHERE key = ?`),
    putPaceRow: db.prepare<[string, string, number]>(
      `INSERT INTO pacing (key, state, updated_at) VALUES (?, ?, ?)
       ON CONFLICT (key) DO UPDATE SET state = excluded.state, updated_at = excluded.updated_at`,
    ),
    addSpend: db.prepare<[string, string, number, number, number, number, number, number]>(
      `INSERT INTO spend (tenant, session_id, tokens, cost_usd, model_calls, tool_calls, wall_ms, updated_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (tenant, session_id) DO UPDATE SET tokens = tokens + excluded.tokens,
         cost_usd = cost_usd + excluded.cost_usd, model_calls = model_calls + excluded.model_calls,
         tool_calls = tool_calls + excluded.tool_calls, wall_ms = wall_ms + excluded.wall_ms,
         updated_at = excluded.updated_at`,
    ),
    // The WHERE clause also keeps SQLite from reading ON CONFLICT as a join's ON.
    foldErasedSpend: db.prepare<[string, number, string]>(
      `INSERT INTO spend (tenant, session_id, tokens, cost_usd, model_calls, tool_calls, wall_ms, updated_at)
       SELECT tenant, ?, tokens, cost_usd, model_calls, tool_calls, wall_ms, ? FROM spend WHERE session_id = ?
       ON CONFLICT (tenant, session_id) DO UPDATE SET tokens = tokens + excluded.tokens,
         cost_usd = cost_usd + excluded.cost_usd, model_calls = model_calls + excluded.model_calls,
         tool_calls = tool_calls + excluded.tool_calls, wall_ms = wall_ms + excluded.wall_ms,
         updated_at = excluded.updated_at`,
    ),
    deleteSpend: db.prepare<[string]>(`DELETE FROM spend WHERE session_id = ?`),
    tenantSpend: db.prepare<[string, string], SpendSums>(
      `SELECT sum(tokens) AS tokens, sum(cost_usd) AS cost_usd, sum(model_calls) AS model_calls,
         sum(tool_calls) AS tool_calls, sum(wall_ms) AS wall_ms,
         count(CASE WHEN session_id <> ? THEN 1 END) AS sessions
       FROM spend WHERE tenant = ?`,
    ),
    deleteSearchRows: db.prepare<[number, number]>(
      `DELETE FROM search_rows WHERE search_rowid >= (? << 32) AND search_rowid < ((? + 1) << 32)`,
    ),
  };
}
