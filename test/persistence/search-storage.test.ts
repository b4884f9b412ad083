/**
 * Where each relational backend keeps its search index, and the upgrade that builds it (the
 * shared search behaviour is in the conformance suite). SQLite keeps a contentless FTS5 table (with
 * a digest of each row's words) and PostgreSQL a `tsvector` column with a GIN index, both written
 * in the append's transaction. A database
 * written by the previous build — the previous schema's DDL copied here, filled with rows in the
 * shared row codec — opens, upgrades in place, backfills the index from its stored events
 * (leaving a damaged row out without failing), and searches. PostgreSQL also indexes, on search,
 * a text event an older writer appended without its vector during a rolling upgrade.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  ALL_TENANTS,
  openSqliteStore,
  openStore,
  POSTGRES_SCHEMA_VERSION,
  SQLITE_APPLICATION_ID,
  SQLITE_SCHEMA_VERSION,
  type SearchHit,
  type SessionStore,
} from '../../src/persistence/index.js';
import { encodeEvent } from '../../src/persistence/relational/rows.js';
import { indexText } from '../../src/persistence/search.js';
import { Session, type NewEvent } from '../../src/session/index.js';
import { testHeader, userMessage } from '../support/persistence-events.js';
import {
  POSTGRES_TEST_URL,
  postgresTestSchema,
  postgresUrlWithSchema,
  probePostgres,
} from '../support/store-fixtures.js';

const postgres = await probePostgres();
if (!postgres.available) console.warn(`search storage tests: PostgreSQL skipped: ${postgres.reason}`);

const T = 1_700_000_000_000;
const GREP = JSON.stringify({ pattern: 'quokka' });

/** One closed turn with a tool call: text at seqs 1 (user), 3 (assistant + call), 4 (tool/call), 7 (result), 8 (answer). */
function notesTurn(): NewEvent[] {
  return [
    { type: 'turn/start', time: T, data: { turn: 1 } },
    userMessage('u1', 'Where did we park the Walrus migration?', T),
    { type: 'step/start', time: T, data: { turn: 1, step: 1 } },
    {
      type: 'assistant/message',
      time: T,
      data: {
        turn: 1,
        step: 1,
        message: {
          id: 'a1',
          role: 'assistant',
          content: [{ type: 'tool-call', id: 'c1', name: 'grep', arguments: GREP }],
          source: { kind: 'model', provider: 'fake', model: 'm' },
        },
      },
      surfaceOp: 'append',
    },
    { type: 'tool/call', time: T, data: { turn: 1, step: 1, callId: 'c1', name: 'grep', arguments: GREP } },
    { type: 'step/end', time: T, data: { turn: 1, step: 1 } },
    { type: 'step/start', time: T, data: { turn: 1, step: 2 } },
    {
      type: 'tool/result',
      time: T,
      data: {
        turn: 1,
        step: 2,
        message: {
          id: 'r1',
          role: 'user',
          content: [
            { type: 'tool-result', toolCallId: 'c1', content: [{ type: 'text', text: 'found the ocelot file' }] },
          ],
          source: { kind: 'tool', callId: 'c1' },
        },
      },
      surfaceOp: 'append',
    },
    {
      type: 'assistant/message',
      time: T,
      data: {
        turn: 1,
        step: 2,
        message: {
          id: 'a2',
          role: 'assistant',
          content: [{ type: 'text', text: 'The walrus plan is in docs.' }],
          source: { kind: 'model', provider: 'fake', model: 'm' },
        },
      },
      surfaceOp: 'append',
    },
    { type: 'step/end', time: T, data: { turn: 1, step: 2 } },
    { type: 'turn/end', time: T, data: { turn: 1, reason: { kind: 'completed' } } },
  ];
}

type StoredSession = { id: string; batches: Array<{ op: string; events: NewEvent[] }> };

/** What the previous build stored: `notes`, `other`, and `broken` (a damaged second row). */
const OLD_SESSIONS: StoredSession[] = [
  { id: 'notes', batches: [{ op: 'turn-1', events: notesTurn() }] },
  { id: 'other', batches: [{ op: 'b0', events: [userMessage('o1', 'a walrus elsewhere', T)] }] },
  { id: 'broken', batches: [{ op: 'b0', events: [userMessage('h1', 'a heron', T)] }] },
];
/** Text events across OLD_SESSIONS that decode: 5 in notes, 1 in other, 1 in broken. */
const OLD_TEXT_EVENTS = 7;

/** Rows of the shared codec for each stored batch, seqs assigned as the store would. */
function rowsOf(session: StoredSession): Array<{ op: string; rows: ReturnType<typeof encodeEvent>[] }> {
  const reference = Session.create(testHeader(session.id));
  return session.batches.map(({ op, events }) => ({ op, rows: reference.appendBatch(events, op).map(encodeEvent) }));
}

const sortedSeqs = (hits: readonly SearchHit[]): number[] => hits.map((hit) => hit.seq).sort((a, b) => a - b);

/** The searches every upgraded store answers the same way. */
async function expectOldSessionsSearchable(store: SessionStore): Promise<void> {
  const walrus = await store.search('notes', 'walrus');
  expect(sortedSeqs(walrus)).toEqual([1, 8]);
  expect(walrus.find((hit) => hit.seq === 1)?.snippet).toBe('Where did we park the Walrus migration?');
  expect(sortedSeqs(await store.search('notes', 'quokka'))).toEqual([3, 4]);
  expect(sortedSeqs(await store.search('notes', 'ocelot'))).toEqual([7]);
  expect(sortedSeqs(await store.search('other', 'walrus'))).toEqual([0]);
  await expect(store.search('broken', 'heron')).rejects.toMatchObject({ code: 'CORRUPT_LOG' });
  // New appends are indexed by the upgraded store.
  await store.append('notes', [userMessage('u2', 'walrus again', T)], { expectedSeq: 11, op: 'after-upgrade' });
  expect(sortedSeqs(await store.search('notes', 'walrus'))).toEqual([1, 8, 11]);
}

// ---------------------------------------------------------------------------------------------

/** The SQLite schema of versions 1 and 2, as the previous build wrote it. */
const SQLITE_V1_SCHEMA = `
CREATE TABLE sessions (key INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, header TEXT NOT NULL) STRICT;
CREATE TABLE events (
  session_key INTEGER NOT NULL REFERENCES sessions(key), seq INTEGER NOT NULL, type TEXT NOT NULL, time INTEGER NOT NULL,
  data TEXT NOT NULL, surface_op TEXT, source_event_seqs TEXT, ignorable INTEGER, PRIMARY KEY (session_key, seq)
) STRICT, WITHOUT ROWID;
CREATE TABLE batches (
  session_key INTEGER NOT NULL REFERENCES sessions(key), op TEXT NOT NULL, first_seq INTEGER NOT NULL, last_seq INTEGER NOT NULL,
  PRIMARY KEY (session_key, op)
) STRICT, WITHOUT ROWID;
CREATE INDEX batches_by_last_seq ON batches (session_key, last_seq);
CREATE TABLE artifacts (session_key INTEGER NOT NULL REFERENCES sessions(key), name TEXT NOT NULL, content TEXT NOT NULL, PRIMARY KEY (session_key, name)) STRICT, WITHOUT ROWID;
CREATE TABLE projection_cache (session_key INTEGER PRIMARY KEY REFERENCES sessions(key), record TEXT NOT NULL) STRICT;
`;
const SQLITE_V2_SCHEMA = `${SQLITE_V1_SCHEMA}
CREATE TABLE tombstones (id TEXT PRIMARY KEY, erased_at INTEGER NOT NULL, until INTEGER NOT NULL) STRICT, WITHOUT ROWID;
`;
/** Version 3 added the search index, an FTS5 table that kept its own copy of the words. */
const SQLITE_V3_SCHEMA = `${SQLITE_V2_SCHEMA}
CREATE VIRTUAL TABLE search USING fts5(body, tokenize = 'ascii');
INSERT INTO search (search, rank) VALUES ('secure-delete', 1);
`;

function writeOldSqlite(path: string, version: 1 | 2 | 3): void {
  const db = new Database(path);
  db.pragma('journal_mode = WAL');
  db.exec([SQLITE_V1_SCHEMA, SQLITE_V2_SCHEMA, SQLITE_V3_SCHEMA][version - 1]!);
  db.pragma(`application_id = ${SQLITE_APPLICATION_ID}`);
  db.pragma(`user_version = ${version}`);
  const insertEvent = db.prepare(`INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?, ?)`);
  for (const session of OLD_SESSIONS) {
    const key = Number(
      db
        .prepare(`INSERT INTO sessions (id, header) VALUES (?, ?)`)
        .run(session.id, JSON.stringify(testHeader(session.id))).lastInsertRowid,
    );
    for (const { op, rows } of rowsOf(session)) {
      for (const r of rows) {
        insertEvent.run(key, r.seq, r.type, r.time, r.data, r.surfaceOp, r.sourceEventSeqs, r.ignorable ? 1 : null);
        const words = version === 3 ? indexText({ type: r.type, data: JSON.parse(r.data) }) : undefined;
        if (words) db.prepare(`INSERT INTO search (rowid, body) VALUES (?, ?)`).run(key * 2 ** 32 + r.seq, words);
      }
      db.prepare(`INSERT INTO batches VALUES (?, ?, ?, ?)`).run(key, op, rows[0]!.seq, rows[rows.length - 1]!.seq);
    }
    if (session.id === 'broken') {
      insertEvent.run(key, 1, 'user/message', T, '{"id":', 'append', null, null);
      db.prepare(`INSERT INTO batches VALUES (?, 'damaged', 1, 1)`).run(key);
    }
  }
  db.close();
}

describe('SQLite: the FTS5 search index', () => {
  let dir: string;
  let path: string;
  const stores: SessionStore[] = [];

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'sessionlog-search-sqlite-'));
    path = join(dir, 'store.db');
  });

  afterEach(async () => {
    for (const store of stores.splice(0)) await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  function open(): SessionStore & { settings(): { userVersion: number } } {
    const store = openSqliteStore(path);
    stores.push(store);
    return store;
  }

  /**
   * The index's rows as it holds them: each row's words read back in order from the index itself
   * (`fts5vocab`, a contentless table has no copy of them), with the digest kept for erase.
   */
  function searchRows(): Array<{ rowid: number; body: string; digest: string }> {
    const db = new Database(path);
    try {
      db.exec(`CREATE VIRTUAL TABLE temp.search_terms USING fts5vocab(main, search, instance)`);
      const words = new Map<number, string[]>();
      for (const { doc, term } of db
        .prepare(`SELECT doc, term FROM temp.search_terms ORDER BY doc, offset`)
        .all() as Array<{ doc: number; term: string }>) {
        words.set(doc, [...(words.get(doc) ?? []), term]);
      }
      const digests = db
        .prepare(`SELECT search_rowid AS rowid, hex(words_sha256) AS digest FROM search_rows ORDER BY search_rowid`)
        .all() as Array<{ rowid: number; digest: string }>;
      expect(digests.map((d) => d.rowid)).toEqual([...words.keys()]);
      return digests.map(({ rowid, digest }) => ({ rowid, body: words.get(rowid)!.join(' '), digest }));
    } finally {
      db.close();
    }
  }

  const digestOf = (words: string): string =>
    createHash('sha256').update(words).digest().subarray(0, 16).toString('hex').toUpperCase();

  it('is a contentless FTS5 table with secure-delete on, holding one row of folded words per text event, keyed session_key << 32 | seq, with a digest of its words, written by the next search (not the append)', async () => {
    const store = open();
    await store.create(testHeader('notes'));
    await store.append('notes', notesTurn(), { expectedSeq: 0, op: 'turn-1' });
    // An append writes no index pages (issue 27): the session's next search indexes what it added.
    expect(searchRows()).toEqual([]);
    expect((await store.search('notes', 'walrus')).map((hit) => hit.seq).sort()).toEqual([1, 8]);
    const db = new Database(path, { readonly: true });
    const sql = (db.prepare(`SELECT sql FROM sqlite_master WHERE name = 'search'`).get() as { sql: string }).sql;
    const config = db.prepare(`SELECT k, v FROM search_config WHERE k = 'secure-delete'`).get();
    const key = (db.prepare(`SELECT key FROM sessions WHERE id = 'notes'`).get() as { key: number }).key;
    db.close();
    expect(sql).toMatch(/USING fts5\(body, tokenize = 'ascii', content = ''\)/);
    expect(config).toEqual({ k: 'secure-delete', v: 1 });
    const row = (seq: number, body: string) => ({ rowid: key * 2 ** 32 + seq, body, digest: digestOf(body) });
    expect(searchRows()).toEqual([
      row(1, 'where did we park the walrus migration'),
      row(3, 'grep pattern quokka'),
      row(4, 'grep pattern quokka'),
      row(7, 'found the ocelot file'),
      row(8, 'the walrus plan is in docs'),
    ]);
  });

  it('indexes a backlog longer than a page a page per transaction, past a run of text events without words, exactly once', async () => {
    const store = open();
    await store.create(testHeader('backlog'));
    // 2,500 messages whose text folds to no words, then one with a word, then 1,500 with words.
    const events: NewEvent[] = [
      ...Array.from({ length: 2500 }, (_, i) => userMessage(`w${i}`, '… !? —', T)),
      userMessage('n', 'a needle here', T),
      ...Array.from({ length: 1500 }, (_, i) => userMessage(`h${i}`, `haystack ${i}`, T)),
    ];
    for (let i = 0; i < events.length; i += 500)
      await store.append('backlog', events.slice(i, i + 500), { expectedSeq: i, op: `b${i}` });
    expect(searchRows()).toEqual([]);
    expect((await store.search('backlog', 'needle')).map((hit) => hit.seq)).toEqual([2500]);
    expect(searchRows()).toHaveLength(1501);
    // Searched again, nothing is indexed twice; new events join at the next search.
    await store.append('backlog', [userMessage('n2', 'another needle', T)], { expectedSeq: 4001, op: 'late' });
    expect((await store.search('backlog', 'needle')).map((hit) => hit.seq).sort()).toEqual([2500, 4001]);
    expect(searchRows()).toHaveLength(1502);
  });

  it('a version-3 database (an FTS5 index with its own copy of the words) upgrades to a contentless index: the copy is dropped and overwritten, the words indexed again with digests', async () => {
    writeOldSqlite(path, 3);
    const raw = new Database(path, { readonly: true });
    expect(raw.prepare(`SELECT count(*) AS n FROM search_content`).get()).toEqual({ n: OLD_TEXT_EVENTS });
    raw.close();
    const copy = Buffer.from('where did we park the walrus migration');
    expect([path, `${path}-wal`].filter((file) => existsSync(file) && readFileSync(file).includes(copy))).not.toEqual(
      [],
    );
    const store = open();
    expect(store.settings().userVersion).toBe(SQLITE_SCHEMA_VERSION);
    const rows = searchRows();
    expect(rows).toHaveLength(OLD_TEXT_EVENTS);
    expect(rows.every((r) => r.digest === digestOf(r.body))).toBe(true);
    const tables = new Database(path, { readonly: true });
    expect(
      tables
        .prepare(`SELECT name FROM sqlite_master WHERE name LIKE 'search%' ORDER BY name`)
        .all()
        .map((r) => (r as { name: string }).name),
    ).toEqual(['search', 'search_config', 'search_data', 'search_docsize', 'search_idx', 'search_rows']);
    tables.close();
    await expectOldSessionsSearchable(store);
    await store.close();
    // secure_delete zeroed the old copy's pages: its text (a whole row of words) is in no page.
    expect([path, `${path}-wal`].filter((file) => existsSync(file) && readFileSync(file).includes(copy))).toEqual([]);
  });

  for (const version of [2, 1] as const) {
    it(`a version-${version} database written by the previous build opens, upgrades to version ${SQLITE_SCHEMA_VERSION}, backfills the index from its events and searches`, async () => {
      writeOldSqlite(path, version);
      const store = open();
      expect(store.settings().userVersion).toBe(SQLITE_SCHEMA_VERSION);
      expect(searchRows()).toHaveLength(OLD_TEXT_EVENTS);
      await expectOldSessionsSearchable(store);
      await store.close();
      // Opening the upgraded file again indexes nothing twice.
      const again = open();
      expect(searchRows()).toHaveLength(OLD_TEXT_EVENTS + 1);
      expect(sortedSeqs(await again.search('notes', 'walrus'))).toEqual([1, 8, 11]);
      // The upgrade from version 1 also added the tombstones of erased sessions.
      await again.erase('other', ALL_TENANTS);
      await expect(again.create(testHeader('other'))).rejects.toMatchObject({ code: 'SESSION_ERASED' });
      expect(searchRows()).toHaveLength(OLD_TEXT_EVENTS);
    });
  }
});

// ---------------------------------------------------------------------------------------------

/** The PostgreSQL schema of version 2, as the previous build wrote it. */
function postgresV2Ddl(s: string): string {
  return `
CREATE SCHEMA ${s};
CREATE TABLE ${s}.schema_version (singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton), version integer NOT NULL);
CREATE TABLE ${s}.sessions (key bigserial PRIMARY KEY, id text NOT NULL UNIQUE, header text NOT NULL);
CREATE TABLE ${s}.events (
  session_key bigint NOT NULL REFERENCES ${s}.sessions(key), seq bigint NOT NULL, type text NOT NULL, time bigint NOT NULL,
  data text NOT NULL, surface_op text, source_event_seqs text, ignorable boolean, PRIMARY KEY (session_key, seq)
);
CREATE TABLE ${s}.batches (
  session_key bigint NOT NULL REFERENCES ${s}.sessions(key), op text NOT NULL, first_seq bigint NOT NULL, last_seq bigint NOT NULL,
  PRIMARY KEY (session_key, op)
);
CREATE INDEX batches_by_last_seq ON ${s}.batches (session_key, last_seq);
CREATE TABLE ${s}.artifacts (session_key bigint NOT NULL REFERENCES ${s}.sessions(key), name text NOT NULL, content bytea NOT NULL, PRIMARY KEY (session_key, name));
CREATE TABLE ${s}.projection_cache (session_key bigint PRIMARY KEY REFERENCES ${s}.sessions(key), record text NOT NULL);
CREATE TABLE ${s}.tombstones (id text PRIMARY KEY, erased_at bigint NOT NULL, until bigint NOT NULL);
INSERT INTO ${s}.schema_version (version) VALUES (2);
`;
}

describe.skipIf(!postgres.available)('PostgreSQL: the tsvector search column', () => {
  let schema: string;
  let url: string;
  let admin: pg.Client;
  const stores: SessionStore[] = [];

  beforeEach(async () => {
    schema = postgresTestSchema();
    url = postgresUrlWithSchema(schema);
    admin = new pg.Client({ connectionString: POSTGRES_TEST_URL });
    await admin.connect();
  });

  afterEach(async () => {
    for (const store of stores.splice(0)) await store.close();
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await admin.end();
  });

  async function open(): Promise<SessionStore> {
    const store = await openStore(url);
    stores.push(store);
    return store;
  }

  /** An event row and its batch as a writer that knows nothing of `search` inserts them. */
  async function insertWithoutVector(key: number, seq: number, type: string, data: string): Promise<void> {
    await admin.query(
      `INSERT INTO "${schema}".events (session_key, seq, type, time, data, surface_op) VALUES ($1, $2, $3, $4, $5, 'append')`,
      [key, seq, type, T, data],
    );
    await admin.query(`INSERT INTO "${schema}".batches VALUES ($1, $2, $3, $3)`, [key, `old-writer-${seq}`, seq]);
  }

  async function writeOldPostgres(): Promise<void> {
    await admin.query(postgresV2Ddl(`"${schema}"`));
    for (const session of OLD_SESSIONS) {
      const key = Number(
        (
          await admin.query<{ key: string }>(
            `INSERT INTO "${schema}".sessions (id, header) VALUES ($1, $2) RETURNING key`,
            [session.id, JSON.stringify(testHeader(session.id))],
          )
        ).rows[0]!.key,
      );
      for (const { op, rows } of rowsOf(session)) {
        for (const r of rows) {
          await admin.query(`INSERT INTO "${schema}".events VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, [
            key,
            r.seq,
            r.type,
            r.time,
            r.data,
            r.surfaceOp,
            r.sourceEventSeqs,
            r.ignorable,
          ]);
        }
        await admin.query(`INSERT INTO "${schema}".batches VALUES ($1, $2, $3, $4)`, [
          key,
          op,
          rows[0]!.seq,
          rows[rows.length - 1]!.seq,
        ]);
      }
      if (session.id === 'broken') await insertWithoutVector(key, 1, 'user/message', '{"id":');
    }
  }

  async function vectors(id: string): Promise<Array<{ seq: number; search: string | null }>> {
    const rows = await admin.query<{ seq: string; search: string | null }>(
      `SELECT e.seq, e.search::text AS search FROM "${schema}".events e JOIN "${schema}".sessions s ON s.key = e.session_key WHERE s.id = $1 ORDER BY e.seq`,
      [id],
    );
    return rows.rows.map((row) => ({ seq: Number(row.seq), search: row.search }));
  }

  it("writes to_tsvector('simple', folded words) for each text event in the append's INSERT, NULL for other events, under a GIN index", async () => {
    const store = await open();
    await store.create(testHeader('notes'));
    await store.append('notes', notesTurn(), { expectedSeq: 0, op: 'turn-1' });
    const texts = (await vectors('notes')).filter((row) => row.search !== null);
    expect(texts).toEqual([
      { seq: 1, search: "'did':2 'migration':7 'park':4 'the':5 'walrus':6 'we':3 'where':1" },
      { seq: 3, search: "'grep':1 'pattern':2 'quokka':3" },
      { seq: 4, search: "'grep':1 'pattern':2 'quokka':3" },
      { seq: 7, search: "'file':4 'found':1 'ocelot':3 'the':2" },
      { seq: 8, search: "'docs':6 'in':5 'is':4 'plan':3 'the':1 'walrus':2" },
    ]);
    const indexes = await admin.query<{ indexname: string; indexdef: string }>(
      `SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = $1 AND tablename = 'events' ORDER BY indexname`,
      [schema],
    );
    expect(indexes.rows.find((row) => row.indexname === 'events_search')?.indexdef).toMatch(/USING gin \(search\)/);
    expect(indexes.rows.find((row) => row.indexname === 'events_unindexed')?.indexdef).toMatch(
      /WHERE \(\(search IS NULL\) AND/,
    );
  });

  it(`a version-2 schema written by the previous build opens, upgrades to version ${POSTGRES_SCHEMA_VERSION}, backfills the column from its events and searches`, async () => {
    await writeOldPostgres();
    const store = await open();
    expect((await admin.query(`SELECT version FROM "${schema}".schema_version`)).rows).toEqual([
      { version: POSTGRES_SCHEMA_VERSION },
    ]);
    expect((await vectors('notes')).filter((row) => row.search !== null).map((row) => row.seq)).toEqual([
      1, 3, 4, 7, 8,
    ]);
    // The damaged row gets an empty vector: it is not read again, and its session stays refused.
    expect(await vectors('broken')).toEqual([
      { seq: 0, search: "'a':1 'heron':2" },
      { seq: 1, search: '' },
    ]);
    const gin = await admin.query(
      `SELECT 1 FROM pg_indexes WHERE schemaname = $1 AND indexname = 'events_search' AND indexdef LIKE '%USING gin (search)%'`,
      [schema],
    );
    expect(gin.rowCount).toBe(1);
    await expectOldSessionsSearchable(store);
  });

  it('a text event appended without its vector (an older writer during a rolling upgrade) is indexed on search and found', async () => {
    const store = await open();
    await store.create(testHeader('notes'));
    await store.append('notes', notesTurn(), { expectedSeq: 0, op: 'turn-1' });
    expect(sortedSeqs(await store.search('notes', 'walrus'))).toEqual([1, 8]);
    const key = Number(
      (await admin.query<{ key: string }>(`SELECT key FROM "${schema}".sessions WHERE id = 'notes'`)).rows[0]!.key,
    );
    const [row] = rowsOf({
      id: 'notes',
      batches: [{ op: 'turn-1', events: [...notesTurn(), userMessage('u2', 'an old walrus writer', T)] }],
    })[0]!.rows.slice(-1);
    await insertWithoutVector(key, 11, row!.type, row!.data);
    expect((await vectors('notes')).at(-1)).toEqual({ seq: 11, search: null });
    expect(sortedSeqs(await store.search('notes', 'walrus'))).toEqual([1, 8, 11]);
    expect((await vectors('notes')).at(-1)).toEqual({ seq: 11, search: "'an':1 'old':2 'walrus':3 'writer':4" });
  });
});
