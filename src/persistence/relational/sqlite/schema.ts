/**
 * The SQLite backend's storage format (DESIGN §4, dsh-spec §8.8): the schema, its upgrades as named
 * migrations ({@link SQLITE_MIGRATIONS}), and the search index's rows (the store is store.ts).
 *
 * Storage format (schema version {@link SQLITE_SCHEMA_VERSION}, `application_id`
 * {@link SQLITE_APPLICATION_ID}; a file with a newer `user_version` or a foreign application id
 * is refused; versions 1 to 9 are upgraded in place when the store opens, in one transaction:
 * version 2 adds the `tombstones` table, version 3 the `search` index, version 4 makes that index
 * contentless (version 3's is dropped and the index filled again from every stored event), version
 * 5 adds the `inbox` and `session_keys` tables, version 6 the `transcripts` table, version 7 keys
 * the inbox without a rowid, version 8 adds `pacing`, version 9 `spend`, version 10 moves the
 * events to one rowid tree with each batch's op on its first row (the file's events are copied
 * once; a damaged batch that cannot move stops the upgrade, naming it), version 11 adds `media`. Stop processes
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
 * - `media(session_key, name, content)` (version 11): the media a session stored (issue 50), one
 *   row per distinct content, `name` `media-<sha256>.<ext>`, `content` the bytes as a BLOB; a
 *   rowid table (a medium is large: its row's overflow pages stay out of the key's tree), unique
 *   by `(session_key, name)`.
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
import { createHash } from 'node:crypto';
import Database from 'better-sqlite3';
import { SessionlogError } from '../../../session/index.js';
import { SEARCHABLE_EVENT_TYPES, indexText } from '../../search.js';

/** `PRAGMA application_id` of a sessionlog database ("SLOG"). */
export const SQLITE_APPLICATION_ID = 0x534c4f47;
/** `PRAGMA user_version` this build writes and reads. */
export const SQLITE_SCHEMA_VERSION = 11;

/** The page size of a new database file (an existing file keeps its own). */
export const SQLITE_PAGE_SIZE = 4096;

/**
 * A session's events and its search rows are the rowid range `key << 32` to `(key + 1) << 32`,
 * with the seq in the low 32 bits (limits: 2^31 session keys, 2^32 events per session).
 */
export const MAX_SEQ = 2 ** 32 - 1;
const MAX_SESSION_KEY = 2 ** 31 - 1;

/** The digest text of no rows (SQLite's group_concat of none is NULL). */
export const EMPTY = new Uint8Array();

/** The event types whose text is indexed, as an SQL list (constants of ours). */
export const SEARCHABLE_TYPES_SQL = SEARCHABLE_EVENT_TYPES.map((type) => `'${type}'`).join(', ');

/** Rows a search indexes per page of its backlog (and per transaction while the backlog is long). */
export const SEARCH_INDEX_PAGE = 1000;

const SEARCH_DDL = `
CREATE VIRTUAL TABLE search USING fts5(body, tokenize = 'ascii', content = '');
INSERT INTO search (search, rank) VALUES ('secure-delete', 1);
CREATE TABLE search_rows (
  search_rowid INTEGER PRIMARY KEY,
  words_sha256 BLOB NOT NULL
) STRICT;
`;

export const INSERT_SEARCH = `INSERT INTO search (rowid, body) VALUES ((? << 32) + ?, ?)`;
export const INSERT_SEARCH_ROW = `INSERT INTO search_rows (search_rowid, words_sha256) VALUES ((? << 32) + ?, ?)`;

/** The digest `search_rows` keeps of the words a row was indexed with (16 bytes of SHA-256). */
export function wordsDigest(words: string): Buffer {
  return createHash('sha256').update(words, 'utf8').digest().subarray(0, 16);
}

type SearchWriters = {
  insertSearch: Database.Statement<[number, number, string]>;
  insertSearchRow: Database.Statement<[number, number, Buffer]>;
};

/** Indexes one event's words, with the digest erase checks them against. */
export function indexWords(writers: SearchWriters, key: number, seq: number, words: string): void {
  writers.insertSearch.run(key, seq, words);
  writers.insertSearchRow.run(key, seq, wordsDigest(words));
}

/** The indexed words of a stored row, or undefined when its data does not decode or it carries no text. */
export function storedRowWords(type: string, data: string): string | undefined {
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

/** Version 11: the media (issue 50), one row per distinct content of a session. */
const MEDIA_DDL = `
CREATE TABLE media (
  id INTEGER PRIMARY KEY,
  session_key INTEGER NOT NULL REFERENCES sessions(key),
  name TEXT NOT NULL,
  content BLOB NOT NULL,
  UNIQUE (session_key, name)
) STRICT;
`;

const TOMBSTONES_DDL = `
CREATE TABLE tombstones (
  id TEXT PRIMARY KEY,
  erased_at INTEGER NOT NULL,
  until INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
`;

export const SCHEMA = `
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
${MEDIA_DDL}
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

/**
 * Indexes every stored event that carries text (the upgrade to version 4, and the rebuild after
 * an erase that could not re-derive a row's words), a page of rows at a time. A row whose data
 * does not decode is left out: its session is refused as CORRUPT_LOG by every read, search
 * included.
 */
export function backfillSearchIndex(db: Database.Database): void {
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

/** One schema upgrade: what version `version` adds, applied to a file at an older version (`from`). */
export type Migration = {
  version: number;
  name: string;
  up(db: Database.Database, context: { file: string; from: number }): void;
};

/**
 * The upgrades, in the order they run on an older file (each whose version is above the file's),
 * all in one transaction. Version 10 runs first: the steps after it read the events in its
 * layout (version 4 indexes them). Version 3's search index is superseded by version 4's, which
 * drops it; version 5 creates the inbox in version 7's layout, so version 7 rebuilds only an
 * inbox that version 5 or 6 made.
 */
const SQLITE_MIGRATIONS: readonly Migration[] = [
  {
    version: 10,
    name: "the events in one rowid tree, each batch's op on its first row",
    up: (db, { file }) => upgradeEventsToRowid(db, file),
  },
  { version: 2, name: 'the tombstones of erased sessions', up: (db) => db.exec(TOMBSTONES_DDL) },
  {
    version: 4,
    name: 'a contentless search index (the words once, in the index) with the digests erase needs',
    up: (db, { from }) => {
      if (from === 3) db.exec(`DROP TABLE search`);
      db.exec(SEARCH_DDL);
      backfillSearchIndex(db);
    },
  },
  { version: 5, name: 'the inbox and the session keys', up: (db) => db.exec(INBOX_DDL) },
  { version: 6, name: 'the transcript index', up: (db) => db.exec(TRANSCRIPTS_DDL) },
  {
    version: 7,
    name: 'the inbox keyed without a rowid (one tree written per put or removal instead of two)',
    up: (db, { from }) => {
      if (from >= 5) db.exec(INBOX_WITHOUT_ROWID_MIGRATION);
    },
  },
  { version: 8, name: 'the provider pacing buckets', up: (db) => db.exec(PACING_DDL) },
  {
    version: 9,
    name: 'the spend rows (what a session spent before it is not in them)',
    up: (db) => db.exec(SPEND_DDL),
  },
  { version: 11, name: 'the media of sessions', up: (db) => db.exec(MEDIA_DDL) },
];

/**
 * Checks the file's application id and schema version and brings an older file up to
 * {@link SQLITE_SCHEMA_VERSION} (a new file gets the whole schema), in one transaction: a foreign
 * database, a newer version or a version with no upgrade path is refused.
 */
export function initializeSchema(db: Database.Database, file: string): void {
  const init = db.transaction(() => {
    const appId = db.pragma('application_id', { simple: true }) as number;
    const version = db.pragma('user_version', { simple: true }) as number;
    if (appId === 0 && version === 0) {
      const objects = db.prepare(`SELECT count(*) AS n FROM sqlite_master`).get() as { n: number };
      if (objects.n > 0) {
        throw new SessionlogError(
          'INVALID_ARGUMENT',
          `${file} is an SQLite database of another application (it has tables but no sessionlog application id); point the store at a new file`,
        );
      }
      db.exec(SCHEMA);
      db.pragma(`application_id = ${SQLITE_APPLICATION_ID}`);
      db.pragma(`user_version = ${SQLITE_SCHEMA_VERSION}`);
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
    for (const migration of SQLITE_MIGRATIONS)
      if (version < migration.version) migration.up(db, { file, from: version });
    if (version < SQLITE_SCHEMA_VERSION) db.pragma(`user_version = ${SQLITE_SCHEMA_VERSION}`);
  });
  init.immediate();
}
