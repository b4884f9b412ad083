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
import { eventsToVersion9 } from '../support/sqlite-versions.js';

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

  it("stores events in one rowid tree keyed session_key << 32 | seq, each batch's op and last seq on its first row only", async () => {
    const store = open();
    await store.create(testHeader('s1'));
    await store.create(testHeader('s2'));
    await store.append('s1', closedTurn(1), { expectedSeq: 0, op: 'turn-1' });
    await store.append('s2', closedTurn(1), { expectedSeq: 0, op: 'other' });
    await store.append('s1', closedTurn(2), { expectedSeq: 6, op: 'turn-2' });
    await store.close();
    const db = raw();
    const tables = (
      db.prepare(`SELECT name FROM sqlite_master WHERE type = 'table'`).all() as Array<{ name: string }>
    ).map((t) => t.name);
    const rows = db
      .prepare(`SELECT id, session_key, seq, batch_op, batch_last_seq FROM events ORDER BY id`)
      .all() as Array<{
      id: number;
      session_key: number;
      seq: number;
      batch_op: string | null;
      batch_last_seq: number | null;
    }>;
    const keyOf = (id: string) => (db.prepare(`SELECT key FROM sessions WHERE id = ?`).get(id) as { key: number }).key;
    const [k1, k2] = [keyOf('s1'), keyOf('s2')];
    expect(tables).not.toContain('batches');
    expect(rows.map((r) => r.id)).toEqual(rows.map((r) => r.session_key * 2 ** 32 + r.seq));
    expect(
      rows.filter((r) => r.batch_op !== null).map((r) => [r.session_key, r.seq, r.batch_op, r.batch_last_seq]),
    ).toEqual([
      [k1, 0, 'turn-1', 5],
      [k1, 6, 'turn-2', 11],
      [k2, 0, 'other', 5],
    ]);
    // The format cannot hold an id that is not its key and seq, a seq past 2^32 - 1, or half a batch.
    const insert = db.prepare(
      `INSERT INTO events (id, session_key, seq, type, time, data, batch_op, batch_last_seq) VALUES (?, ?, ?, 'x', 1, '{}', ?, ?)`,
    );
    expect(() => insert.run(k1 * 2 ** 32 + 99, k1, 98, 'b', 98)).toThrow(/CHECK constraint/);
    expect(() => insert.run(k1 * 2 ** 32 + 2 ** 32, k1, 2 ** 32, 'b', 2 ** 32)).toThrow(/CHECK constraint/);
    expect(() => insert.run(k1 * 2 ** 32 + 12, k1, 12, 'b', null)).toThrow(/CHECK constraint/);
    expect(() => insert.run(k1 * 2 ** 32 + 12, k1, 12, null, 12)).toThrow(/CHECK constraint/);
    db.close();
    expect((await open().readFrom('s1', 0)).map((e) => e.op)).toEqual([
      ...Array(6).fill('turn-1'),
      ...Array(6).fill('turn-2'),
    ]);
  });

  it('makes a new file with 4 KiB pages, a 2 KB event row stays on its rowid leaf page, and keeps the pages of an existing file', async () => {
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
    // 40 rows of ~2 KB each: on b-tree pages only (in the WITHOUT ROWID table of versions 1 to 9,
    // 4 KiB pages spilled each to an overflow page).
    expect(pages.find((p) => p.pagetype === 'overflow')).toBeUndefined();
    expect(pages.find((p) => p.pagetype === 'leaf')?.n).toBeGreaterThan(5);
    // A file made with 4 KiB pages by an earlier build opens and keeps them.
    const older = join(dir, 'older.db');
    const made = new Database(older);
    made.pragma('page_size = 8192');
    made.pragma('journal_mode = WAL');
    made.pragma('user_version = 0'); // writes the file's first page: its page size is fixed
    made.close();
    const kept = openSqliteStore(older);
    expect(kept.settings().pageSize).toBe(8192);
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

describe('SQLite store: the upgrade to version 10 (events in one rowid tree, ops on batch rows)', () => {
  /** Two sessions in several batches, written by this build and then turned into the version-9 layout. */
  async function version9File(): Promise<{ s1: unknown[]; s2: unknown[] }> {
    const writer = openSqliteStore(path);
    await writer.create(testHeader('s1'));
    await writer.create(testHeader('s2'));
    await writer.append('s1', closedTurn(1), { expectedSeq: 0, op: 'turn-1' });
    await writer.append('s2', [userMessage('w1', 'a walrus before the upgrade', 1)], { expectedSeq: 0, op: 'w' });
    await writer.append('s1', openTurn(2), { expectedSeq: 6, op: 'turn-2' });
    const before = { s1: await writer.readFrom('s1', 0), s2: await writer.readFrom('s2', 0) };
    await writer.close();
    const db = raw();
    eventsToVersion9(db);
    db.pragma('user_version = 9');
    db.close();
    return before;
  }

  it('a version-9 file opens as version 10 with every event and op kept, the batches table gone, and appends and search working', async () => {
    const before = await version9File();
    const store = open();
    expect(store.settings().userVersion).toBe(SQLITE_SCHEMA_VERSION);
    expect(await store.readFrom('s1', 0)).toEqual(before.s1);
    expect(await store.readFrom('s2', 0)).toEqual(before.s2);
    const db = raw();
    const tables = (db.prepare(`SELECT name FROM sqlite_master`).all() as Array<{ name: string }>).map((t) => t.name);
    const starts = db
      .prepare(`SELECT seq, batch_op, batch_last_seq FROM events WHERE batch_op IS NOT NULL ORDER BY id`)
      .all();
    db.close();
    expect(tables).not.toContain('batches');
    expect(tables).not.toContain('batches_by_last_seq');
    expect(tables).not.toContain('events_v9');
    expect(starts).toEqual([
      { seq: 0, batch_op: 'turn-1', batch_last_seq: 5 },
      { seq: 6, batch_op: 'turn-2', batch_last_seq: 8 },
      { seq: 0, batch_op: 'w', batch_last_seq: 0 },
    ]);
    expect(await store.append('s1', closedTurn(1), { expectedSeq: 9, op: 'turn-1' })).toMatchObject({ replayed: true });
    expect(await store.append('s2', [userMessage('w2', 'and one after it', 1)], { expectedSeq: 1, op: 'w2' })).toEqual({
      firstSeq: 1,
      lastSeq: 1,
      replayed: false,
    });
    expect((await store.search('s2', 'walrus')).map((hit) => hit.seq)).toEqual([0]);
  });

  it('a damaged version-9 file (a batch with no row to start on) is refused naming the session and batch, and left as it was', async () => {
    await version9File();
    const db = raw();
    db.prepare(`DELETE FROM events WHERE session_key = (SELECT key FROM sessions WHERE id = 's1') AND seq = 6`).run();
    db.close();
    const snapshot = (): string => {
      const reader = raw();
      try {
        return JSON.stringify([
          reader.pragma('user_version', { simple: true }),
          reader.prepare(`SELECT * FROM events ORDER BY 1, 2`).all(),
          reader.prepare(`SELECT * FROM batches ORDER BY 1, 2`).all(),
        ]);
      } finally {
        reader.close();
      }
    };
    const unchanged = snapshot();
    expect(() => openSqliteStore(path)).toThrow(
      expect.objectContaining({
        code: 'CORRUPT_LOG',
        message: expect.stringMatching(
          /cannot be upgraded to schema version 11.*session "s1" batch "turn-2" \(seqs 6\.\.8\)/,
        ),
      }),
    );
    expect(snapshot()).toBe(unchanged);
  });

  it('a version-9 file with an event row of no session (written with the foreign keys off) is refused, naming it, and left as it was', async () => {
    await version9File();
    const db = raw();
    db.pragma('foreign_keys = OFF');
    db.prepare(`INSERT INTO events (session_key, seq, type, time, data) VALUES (77, 0, 'session/run', 1, '{}')`).run();
    db.close();
    expect(() => openSqliteStore(path)).toThrow(
      expect.objectContaining({ code: 'CORRUPT_LOG', message: expect.stringMatching(/seq 0\) names session key 77/) }),
    );
    const reader = raw();
    expect(reader.pragma('user_version', { simple: true })).toBe(9);
    reader.close();
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
    expect(db.prepare(`SELECT count(*) AS n FROM events WHERE batch_op = 'turn-2'`).get()).toEqual({ n: 0 });
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
    db.prepare(
      `INSERT INTO events (id, session_key, seq, type, time, data, batch_op, batch_last_seq) VALUES ((1 << 32) + 9, 1, 9, 'future/thing', 1, '{}', 'future', 9)`,
    ).run();
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
