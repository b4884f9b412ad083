/**
 * Where each relational backend keeps the inbox and the session keys, and the upgrade that adds
 * them (their behaviour is in the conformance suite): SQLite schema version 5 and PostgreSQL
 * schema version 4 add the `inbox` and `session_keys` tables. A database of the version before
 * (this build's schema without the tables added since, the version set back) opens, upgrades in
 * place, keeps its sessions and gains tables of the same shape a new database has.
 */
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import {
  ALL_TENANTS,
  openSqliteStore,
  openStore,
  POSTGRES_SCHEMA_VERSION,
  SQLITE_SCHEMA_VERSION,
  type SessionStore,
} from '../../src/persistence/index.js';
import { testHeader, userMessage } from '../support/persistence-events.js';
import {
  POSTGRES_TEST_URL,
  postgresTestSchema,
  postgresUrlWithSchema,
  probePostgres,
  tempDir,
} from '../support/store-fixtures.js';
import { eventsToVersion9 } from '../support/sqlite-versions.js';

const postgres = await probePostgres();
if (!postgres.available) console.warn(`inbox storage tests: PostgreSQL skipped: ${postgres.reason}`);

const stores: SessionStore[] = [];
const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const store of stores.splice(0)) await store.close();
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

/** Stores a session with one event, then uses the inbox and the key of the upgraded store. */
async function expectUpgradedStoreWorks(store: SessionStore): Promise<void> {
  expect((await store.readFrom('old', 0)).map((event) => event.type)).toEqual(['user/message']);
  expect(await store.inbox.list('old')).toEqual([]);
  expect(await store.sessionKeys.find('old')).toBeUndefined();
  expect(await store.inbox.put('old', 'm1', 'after the upgrade')).toMatchObject({ bytes: 17 });
  expect(await store.inbox.get('old', 'm1')).toBe('after the upgrade');
  const key = await store.sessionKeys.obtain('old');
  expect((await store.sessionKeys.find('old'))?.id).toBe(key.id);
  expect(await store.erase('old', ALL_TENANTS)).toMatchObject({
    removed: { header: 1, events: 1, inboxEntries: 1, sessionKey: 1 },
  });
}

describe('SQLite: the inbox and session_keys tables (schema version 5)', () => {
  function tableSql(path: string): Record<string, string> {
    const db = new Database(path, { readonly: true });
    try {
      const rows = db
        .prepare(`SELECT name, sql FROM sqlite_master WHERE name IN ('inbox', 'session_keys') ORDER BY name`)
        .all() as Array<{ name: string; sql: string }>;
      return Object.fromEntries(rows.map((row) => [row.name, row.sql]));
    } finally {
      db.close();
    }
  }

  it('a version-4 database opens, upgrades to the current version with the tables a new database has, and keeps its sessions', async () => {
    const { dir, cleanup } = tempDir('sessionlog-inbox-sqlite-');
    cleanups.push(cleanup);
    const fresh = join(dir, 'fresh.db');
    await openSqliteStore(fresh).close();
    const newTables = tableSql(fresh);
    expect(Object.keys(newTables)).toEqual(['inbox', 'session_keys']);

    const path = join(dir, 'old.db');
    const writer = openSqliteStore(path);
    await writer.create(testHeader('old'));
    await writer.append('old', [userMessage('u1', 'before the upgrade')], { expectedSeq: 0, op: 'b0' });
    await writer.close();
    const raw = new Database(path);
    // Version 6 added the transcripts table, version 8 the pacing buckets, version 9 the spend rows.
    raw.exec(`DROP TABLE inbox; DROP TABLE session_keys; DROP TABLE transcripts; DROP TABLE pacing; DROP TABLE spend;`);
    eventsToVersion9(raw);
    raw.pragma('user_version = 4');
    raw.close();
    expect(tableSql(path)).toEqual({});

    const store = openSqliteStore(path);
    stores.push(store);
    expect(store.settings().userVersion).toBe(SQLITE_SCHEMA_VERSION);
    expect(tableSql(path)).toEqual(newTables);
    await expectUpgradedStoreWorks(store);
  });
});

describe('SQLite: the inbox keyed without a rowid (schema version 7)', () => {
  it('a version-6 database (the inbox a rowid table with a key index) upgrades: the table a new database has, every entry kept', async () => {
    const { dir, cleanup } = tempDir('sessionlog-inbox7-sqlite-');
    cleanups.push(cleanup);
    const inboxSql = (path: string) => {
      const db = new Database(path, { readonly: true });
      try {
        return db
          .prepare(`SELECT type, name, sql FROM sqlite_master WHERE tbl_name = 'inbox' ORDER BY name`)
          .all() as Array<{ type: string; name: string; sql: string | null }>;
      } finally {
        db.close();
      }
    };
    const fresh = join(dir, 'fresh.db');
    await openSqliteStore(fresh).close();
    expect(inboxSql(fresh).map((row) => row.name)).toEqual(['inbox']);
    expect(inboxSql(fresh)[0]!.sql).toMatch(/WITHOUT ROWID/);

    const path = join(dir, 'old.db');
    const writer = openSqliteStore(path);
    await writer.create(testHeader('old'));
    await writer.append('old', [userMessage('u1', 'before the upgrade')], { expectedSeq: 0, op: 'b0' });
    await writer.inbox.put('old', 'message/a', 'kept through the upgrade');
    await writer.inbox.put('someone', 'note/b', 'mine too');
    await writer.close();
    // The version-6 inbox: a rowid table, its primary key an index of its own.
    const raw = new Database(path);
    raw.exec(`ALTER TABLE inbox RENAME TO inbox_new;
      CREATE TABLE inbox (session_id TEXT NOT NULL, key TEXT NOT NULL, body TEXT NOT NULL, bytes INTEGER NOT NULL,
        digest TEXT NOT NULL, stored_at INTEGER NOT NULL, PRIMARY KEY (session_id, key)) STRICT;
      INSERT INTO inbox SELECT * FROM inbox_new;
      DROP TABLE inbox_new;
      DROP TABLE pacing;
      DROP TABLE spend;`);
    eventsToVersion9(raw);
    raw.pragma('user_version = 6');
    raw.close();
    expect(inboxSql(path).map((row) => row.name)).toEqual(['inbox', 'sqlite_autoindex_inbox_1']);

    const store = openSqliteStore(path);
    stores.push(store);
    expect(store.settings().userVersion).toBe(SQLITE_SCHEMA_VERSION);
    expect(inboxSql(path)).toEqual(inboxSql(fresh));
    expect(await store.inbox.get('old', 'message/a')).toBe('kept through the upgrade');
    expect(await store.inbox.get('someone', 'note/b')).toBe('mine too');
    expect(await store.inbox.put('old', 'message/c', 'after the upgrade')).toMatchObject({ bytes: 17 });
    expect(await store.inbox.remove('old', ['message/a', 'message/c'])).toBe(2);
    expect((await store.inbox.list('someone')).map((entry) => entry.key)).toEqual(['note/b']);
    expect((await store.readFrom('old', 0)).map((event) => event.type)).toEqual(['user/message']);
  });
});

describe.skipIf(!postgres.available)('PostgreSQL: the inbox and session_keys tables (schema version 4)', () => {
  it('a version-3 schema opens, upgrades to the current version with the tables a new schema has, and keeps its sessions', async () => {
    const admin = new pg.Client({ connectionString: POSTGRES_TEST_URL });
    await admin.connect();
    const fresh = postgresTestSchema();
    const schema = postgresTestSchema();
    cleanups.push(async () => {
      await admin.query(`DROP SCHEMA IF EXISTS "${fresh}" CASCADE; DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await admin.end();
    });
    const columns = async (name: string): Promise<string[]> =>
      (
        await admin.query<{ table_name: string; column_name: string; data_type: string }>(
          `SELECT table_name, column_name, data_type FROM information_schema.columns
           WHERE table_schema = $1 AND table_name IN ('inbox', 'session_keys') ORDER BY table_name, ordinal_position`,
          [name],
        )
      ).rows.map((row) => `${row.table_name}.${row.column_name} ${row.data_type}`);

    await (await openStore(postgresUrlWithSchema(fresh))).close();
    const newColumns = await columns(fresh);
    expect(newColumns).toContain('inbox.body bytea');
    expect(newColumns).toContain('session_keys.key bytea');

    const writer = await openStore(postgresUrlWithSchema(schema));
    await writer.create(testHeader('old'));
    await writer.append('old', [userMessage('u1', 'before the upgrade')], { expectedSeq: 0, op: 'b0' });
    await writer.close();
    await admin.query(
      // Version 5 added the transcripts table, version 6 the pacing buckets, version 7 the spend rows.
      `DROP TABLE "${schema}".inbox; DROP TABLE "${schema}".session_keys; DROP TABLE "${schema}".transcripts; DROP TABLE "${schema}".pacing; DROP TABLE "${schema}".spend; DROP TABLE "${schema}".media; UPDATE "${schema}".schema_version SET version = 3`,
    );
    expect(await columns(schema)).toEqual([]);

    const store = await openStore(postgresUrlWithSchema(schema));
    stores.push(store);
    expect((await admin.query(`SELECT version FROM "${schema}".schema_version`)).rows).toEqual([
      { version: POSTGRES_SCHEMA_VERSION },
    ]);
    expect(await columns(schema)).toEqual(newColumns);
    await expectUpgradedStoreWorks(store);
  });
});
