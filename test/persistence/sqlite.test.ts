import { mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  openSqliteStore,
  SQLITE_APPLICATION_ID,
  SQLITE_PAGE_SIZE,
  SQLITE_SCHEMA_VERSION,
  type SqliteSessionStore,
} from '../../src/persistence/index.js';
import { closedTurn, openTurn, testHeader, userMessage } from '../support/persistence-events.js';

let dir: string;
let path: string;
const stores: SqliteSessionStore[] = [];

function open(): SqliteSessionStore {
  const store = openSqliteStore(path);
  stores.push(store);
  return store;
}

function raw(): Database.Database {
  return new Database(path);
}

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'sessionlog-sqlite-'));
  path = join(dir, 'nested', 'store.db');
});

afterEach(async () => {
  for (const store of stores.splice(0)) await store.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('SQLite store: connection and schema', () => {
  it('reads back WAL, synchronous=FULL, foreign_keys, busy_timeout and the schema identity', () => {
    const store = open();
    expect(store.settings()).toEqual({
      journalMode: 'wal',
      synchronous: 2,
      foreignKeys: 1,
      busyTimeoutMs: 5000,
      applicationId: SQLITE_APPLICATION_ID,
      userVersion: SQLITE_SCHEMA_VERSION,
      pageSize: SQLITE_PAGE_SIZE,
    });
  });

  it('creates the database file 0600 and its directory 0700', () => {
    open();
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(statSync(join(dir, 'nested')).mode & 0o777).toBe(0o700);
  });

  it('stores events in a WITHOUT ROWID table keyed (session_key, seq) without a per-row op or text id', () => {
    open();
    const db = raw();
    const sql = (db.prepare(`SELECT sql FROM sqlite_master WHERE name = 'events'`).get() as { sql: string }).sql;
    const columns = (db.prepare(`PRAGMA table_info(events)`).all() as Array<{ name: string; pk: number }>).map((c) => [
      c.name,
      c.pk,
    ]);
    db.close();
    expect(sql).toMatch(/WITHOUT ROWID/);
    expect(columns).toContainEqual(['session_key', 1]);
    expect(columns).toContainEqual(['seq', 2]);
    expect(columns.map(([name]) => name)).not.toContain('op');
    expect(columns.map(([name]) => name)).not.toContain('id');
  });

  it('makes a new file with 8 KiB pages, so a 2 KB event row stays on its page, and keeps the pages of an existing file', async () => {
    const store = open();
    expect(store.settings().pageSize).toBe(SQLITE_PAGE_SIZE);
    await store.create(testHeader('big'));
    const replies = Array.from({ length: 40 }, (_, i) => userMessage(`u${i}`, `reply ${i} `.repeat(190), 1));
    await store.append('big', replies, { expectedSeq: 0, op: 'replies' });
    await store.close();
    const db = raw();
    const pages = db
      .prepare(`SELECT pagetype, count(*) AS n FROM dbstat WHERE name = 'events' GROUP BY pagetype`)
      .all() as Array<{ pagetype: string; n: number }>;
    db.close();
    // 40 rows of ~2 KB each: on b-tree pages only (with 4 KiB pages each spills to an overflow page).
    expect(pages.find((p) => p.pagetype === 'overflow')).toBeUndefined();
    expect(pages.find((p) => p.pagetype === 'leaf')?.n).toBeGreaterThan(5);
    // A file made with 4 KiB pages by an earlier build opens and keeps them.
    const older = join(dir, 'older.db');
    const made = new Database(older);
    made.pragma('page_size = 4096');
    made.pragma('journal_mode = WAL');
    made.pragma('user_version = 0'); // writes the file's first page: its page size is fixed
    made.close();
    const kept = openSqliteStore(older);
    expect(kept.settings().pageSize).toBe(4096);
    await kept.create(testHeader('old'));
    expect(await kept.readFrom('old', 0)).toEqual([]);
    await kept.close();
  });

  it('refuses a database whose user_version is newer, saying a newer version wrote it', async () => {
    await open().close();
    const db = raw();
    db.pragma(`user_version = ${SQLITE_SCHEMA_VERSION + 1}`);
    db.close();
    expect(() => open()).toThrow(
      expect.objectContaining({ code: 'UNSUPPORTED_FORMAT', message: expect.stringMatching(/newer version/) }),
    );
  });

  it('refuses a database of another application', () => {
    mkdirSync(join(dir, 'nested'));
    const db = raw();
    db.exec('CREATE TABLE t (x)');
    db.close();
    expect(() => open()).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT', message: expect.stringMatching(/another application/) }),
    );
    const other = raw();
    other.exec('DROP TABLE t');
    other.pragma('application_id = 42');
    other.close();
    expect(() => open()).toThrow(
      expect.objectContaining({
        code: 'INVALID_ARGUMENT',
        message: expect.stringMatching(/not a sessionlog database/),
      }),
    );
  });
});

describe('SQLite store: append', () => {
  it('replays a stored op with its stored seqs and writes nothing', async () => {
    const store = open();
    await store.create(testHeader('s1'));
    const first = await store.append('s1', closedTurn(1), { expectedSeq: 0, op: 'turn-1' });
    const db = raw();
    const before = db.prepare('SELECT count(*) AS n FROM events').get();
    const version = db.pragma('data_version', { simple: true });
    const again = await store.append('s1', closedTurn(2), { expectedSeq: 99, op: 'turn-1' });
    expect(again).toEqual({ firstSeq: first.firstSeq, lastSeq: first.lastSeq, replayed: true });
    expect(db.prepare('SELECT count(*) AS n FROM events').get()).toEqual(before);
    expect(db.pragma('data_version', { simple: true })).toBe(version);
    db.close();
  });

  it('finds a stored op after reopening (the op index is durable)', async () => {
    const store = open();
    await store.create(testHeader('s1'));
    await store.append('s1', closedTurn(1), { expectedSeq: 0, op: 'turn-1' });
    await store.close();
    expect(await open().append('s1', closedTurn(1), { expectedSeq: 6, op: 'turn-1' })).toEqual({
      firstSeq: 0,
      lastSeq: 5,
      replayed: true,
    });
  });

  it('rejects a stale expectedSeq with SEQ_CONFLICT and writes nothing', async () => {
    const store = open();
    await store.create(testHeader('s1'));
    await store.append('s1', closedTurn(1), { expectedSeq: 0, op: 'turn-1' });
    const db = raw();
    const version = db.pragma('data_version', { simple: true });
    await expect(store.append('s1', closedTurn(2), { expectedSeq: 3, op: 'turn-2' })).rejects.toMatchObject({
      code: 'SEQ_CONFLICT',
    });
    expect(db.pragma('data_version', { simple: true })).toBe(version);
    expect(db.prepare(`SELECT count(*) AS n FROM batches WHERE op = 'turn-2'`).get()).toEqual({ n: 0 });
    db.close();
  });

  it('sees an append made through another connection before validating the next batch', async () => {
    const a = open();
    const b = open();
    await a.create(testHeader('s1'));
    await a.append('s1', closedTurn(1), { expectedSeq: 0, op: 'turn-1' });
    await b.append('s1', closedTurn(2), { expectedSeq: 6, op: 'turn-2' });
    await expect(a.append('s1', closedTurn(3), { expectedSeq: 6, op: 'turn-3' })).rejects.toMatchObject({
      code: 'SEQ_CONFLICT',
    });
    expect(await a.append('s1', closedTurn(3), { expectedSeq: 12, op: 'turn-3' })).toMatchObject({
      firstSeq: 12,
      replayed: false,
    });
    expect((await a.readFrom('s1', 0)).map((e) => e.op)).toEqual([
      ...Array(6).fill('turn-1'),
      ...Array(6).fill('turn-2'),
      ...Array(6).fill('turn-3'),
    ]);
  });
});

describe('SQLite store: damaged and foreign rows', () => {
  async function seeded(): Promise<SqliteSessionStore> {
    const store = open();
    await store.create(testHeader('s1'));
    await store.append('s1', closedTurn(1), { expectedSeq: 0, op: 'turn-1' });
    await store.append('s1', openTurn(2), { expectedSeq: 6, op: 'turn-2' });
    await store.close();
    return open();
  }

  it('refuses a damaged row at or before the last turn/end as CORRUPT_LOG', async () => {
    const store = await seeded();
    const db = raw();
    db.prepare(`UPDATE events SET data = '{' WHERE seq = 2`).run();
    db.close();
    await expect(store.load('s1')).rejects.toMatchObject({ code: 'CORRUPT_LOG' });
    await expect(store.inspect('s1')).rejects.toMatchObject({ code: 'CORRUPT_LOG' });
    await expect(store.readFrom('s1', 0)).rejects.toMatchObject({ code: 'CORRUPT_LOG' });
  });

  it('refuses a damaged row after the last turn/end too, and deletes nothing: a transaction commits whole, so there is no torn tail', async () => {
    const store = await seeded();
    const db = raw();
    db.prepare(`UPDATE events SET data = 'not json' WHERE seq = 7`).run();
    const version = db.pragma('data_version', { simple: true });
    for (const attempt of [
      () => store.inspect('s1'),
      () => store.readFrom('s1', 6),
      () => store.load('s1'),
      () => store.append('s1', closedTurn(3), { expectedSeq: 9, op: 'x' }),
    ]) {
      await expect(attempt()).rejects.toMatchObject({ code: 'CORRUPT_LOG', message: expect.stringMatching(/seq 7\b/) });
    }
    expect(db.pragma('data_version', { simple: true })).toBe(version);
    expect((db.prepare('SELECT count(*) AS n FROM events').get() as { n: number }).n).toBe(9);
    db.close();
  });

  it('refuses an unknown non-ignorable event type with a "newer version" message, and loads an ignorable one', async () => {
    const store = await seeded();
    const db = raw();
    db.prepare(`INSERT INTO events (session_key, seq, type, time, data) VALUES (1, 9, 'future/thing', 1, '{}')`).run();
    db.prepare(`INSERT INTO batches (session_key, op, first_seq, last_seq) VALUES (1, 'future', 9, 9)`).run();
    db.close();
    await expect(store.load('s1')).rejects.toMatchObject({
      code: 'UNSUPPORTED_FORMAT',
      message: expect.stringMatching(/newer version/),
    });
    await expect(store.readFrom('s1', 9)).rejects.toMatchObject({ code: 'UNSUPPORTED_FORMAT' });
    const fix = raw();
    fix.prepare(`UPDATE events SET ignorable = 1 WHERE seq = 9`).run();
    fix.close();
    const loaded = await store.load('s1');
    expect(loaded.events[9]).toMatchObject({ type: 'future/thing', ignorable: true });
  });

  it('refuses a stored header with a newer format version as UNSUPPORTED_FORMAT', async () => {
    const store = await seeded();
    const db = raw();
    db.prepare(`UPDATE sessions SET header = json_set(header, '$.version', 99)`).run();
    db.close();
    await expect(store.header('s1')).rejects.toMatchObject({
      code: 'UNSUPPORTED_FORMAT',
      message: expect.stringMatching(/newer version/),
    });
  });
});

describe('SQLite store: in-memory database', () => {
  it('works with sqlite::memory: and reports memory journaling', async () => {
    const store = openSqliteStore(':memory:');
    stores.push(store);
    expect(store.settings().journalMode).toBe('memory');
    await store.create(testHeader('m1'));
    expect(await store.append('m1', closedTurn(1), { expectedSeq: 0, op: 'a' })).toEqual({
      firstSeq: 0,
      lastSeq: 5,
      replayed: false,
    });
  });
});
