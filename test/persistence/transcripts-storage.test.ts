/**
 * Where each relational backend keeps the transcript index, and the upgrade that adds it (its
 * behaviour is in the conformance suite): SQLite schema version 6 and PostgreSQL schema version 5
 * add the `transcripts` table, keyed by (scope, digest) and indexed by the session's row key. A
 * database of the previous version (this build's schema without the table, the version set back)
 * opens, upgrades in place, keeps its sessions and gains a table and index of the same shape a
 * new database has.
 */
import { createHash } from 'node:crypto';
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
if (!postgres.available) console.warn(`transcript index storage tests: PostgreSQL skipped: ${postgres.reason}`);

const stores: SessionStore[] = [];
const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const store of stores.splice(0)) await store.close();
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

const DIGEST = createHash('sha256').update('the transcript so far', 'utf8').digest('hex');

/** Stores a session with one event before the upgrade, then uses the index of the upgraded store. */
async function expectUpgradedStoreWorks(store: SessionStore): Promise<void> {
  expect((await store.readFrom('old', 0)).map((event) => event.type)).toEqual(['user/message']);
  expect(await store.transcripts.get('caller', DIGEST)).toBeUndefined();
  await store.transcripts.put('caller', DIGEST, { sessionId: 'old', seq: 1 });
  expect(await store.transcripts.get('caller', DIGEST)).toEqual({ sessionId: 'old', seq: 1 });
  expect(await store.erase('old', ALL_TENANTS)).toMatchObject({
    removed: { header: 1, events: 1, transcriptEntries: 1 },
  });
  expect(await store.transcripts.get('caller', DIGEST)).toBeUndefined();
}

describe('SQLite: the transcripts table (schema version 6)', () => {
  function schemaSql(path: string): Record<string, string> {
    const db = new Database(path, { readonly: true });
    try {
      const rows = db
        .prepare(`SELECT name, sql FROM sqlite_master WHERE tbl_name = 'transcripts' ORDER BY name`)
        .all() as Array<{ name: string; sql: string }>;
      return Object.fromEntries(rows.map((row) => [row.name, row.sql]));
    } finally {
      db.close();
    }
  }

  it('a version-5 database opens, upgrades to the current version with the table and index a new database has, and keeps its sessions', async () => {
    const { dir, cleanup } = tempDir('sessionlog-transcripts-sqlite-');
    cleanups.push(cleanup);
    const fresh = join(dir, 'fresh.db');
    await openSqliteStore(fresh).close();
    const newSchema = schemaSql(fresh);
    expect(Object.keys(newSchema)).toEqual(['transcripts', 'transcripts_by_session']);
    expect(newSchema.transcripts).toMatch(/PRIMARY KEY \(scope, digest\)/);
    expect(newSchema.transcripts).toMatch(/session_key INTEGER NOT NULL REFERENCES sessions\(key\)/);

    const path = join(dir, 'old.db');
    const writer = openSqliteStore(path);
    await writer.create(testHeader('old'));
    await writer.append('old', [userMessage('u1', 'before the upgrade')], { expectedSeq: 0, op: 'b0' });
    await writer.close();
    const raw = new Database(path);
    // Version 8 added the pacing buckets, version 9 the spend rows.
    raw.exec(`DROP TABLE transcripts; DROP TABLE pacing; DROP TABLE spend;`);
    eventsToVersion9(raw);
    raw.pragma('user_version = 5');
    raw.close();
    expect(schemaSql(path)).toEqual({});

    const store = openSqliteStore(path);
    stores.push(store);
    expect(store.settings().userVersion).toBe(SQLITE_SCHEMA_VERSION);
    // Version 6 added the transcript index (7 rebuilt the inbox).
    expect(SQLITE_SCHEMA_VERSION).toBeGreaterThanOrEqual(6);
    expect(schemaSql(path)).toEqual(newSchema);
    await expectUpgradedStoreWorks(store);
  });
});

describe.skipIf(!postgres.available)('PostgreSQL: the transcripts table (schema version 5)', () => {
  it('a version-4 schema opens, upgrades to the current version with the table and index a new schema has, and keeps its sessions', async () => {
    const admin = new pg.Client({ connectionString: POSTGRES_TEST_URL });
    await admin.connect();
    const fresh = postgresTestSchema();
    const schema = postgresTestSchema();
    cleanups.push(async () => {
      await admin.query(`DROP SCHEMA IF EXISTS "${fresh}" CASCADE; DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await admin.end();
    });
    const shape = async (name: string): Promise<string[]> => {
      const columns = await admin.query<{ column_name: string; data_type: string }>(
        `SELECT column_name, data_type FROM information_schema.columns
         WHERE table_schema = $1 AND table_name = 'transcripts' ORDER BY ordinal_position`,
        [name],
      );
      const indexes = await admin.query<{ indexdef: string }>(
        `SELECT indexdef FROM pg_indexes WHERE schemaname = $1 AND tablename = 'transcripts' ORDER BY indexname`,
        [name],
      );
      return [
        ...columns.rows.map((row) => `${row.column_name} ${row.data_type}`),
        ...indexes.rows.map((row) => row.indexdef.split(`"${name}".`).join('').split(`${name}.`).join('')),
      ];
    };

    await (await openStore(postgresUrlWithSchema(fresh))).close();
    const newShape = await shape(fresh);
    expect(newShape.slice(0, 4)).toEqual(['scope text', 'digest text', 'session_key bigint', 'seq bigint']);
    expect(newShape.slice(4)).toEqual([
      'CREATE INDEX transcripts_by_session ON transcripts USING btree (session_key)',
      'CREATE UNIQUE INDEX transcripts_pkey ON transcripts USING btree (scope, digest)',
    ]);

    const writer = await openStore(postgresUrlWithSchema(schema));
    await writer.create(testHeader('old'));
    await writer.append('old', [userMessage('u1', 'before the upgrade')], { expectedSeq: 0, op: 'b0' });
    await writer.close();
    // Version 6 added the pacing buckets, version 7 the spend rows.
    await admin.query(
      `DROP TABLE "${schema}".transcripts; DROP TABLE "${schema}".pacing; DROP TABLE "${schema}".spend; DROP TABLE "${schema}".media; UPDATE "${schema}".schema_version SET version = 4`,
    );
    expect(await shape(schema)).toEqual([]);

    const store = await openStore(postgresUrlWithSchema(schema));
    stores.push(store);
    expect((await admin.query(`SELECT version FROM "${schema}".schema_version`)).rows).toEqual([
      { version: POSTGRES_SCHEMA_VERSION },
    ]);
    // Version 5 added the transcript index (6 the pacing buckets).
    expect(POSTGRES_SCHEMA_VERSION).toBeGreaterThanOrEqual(5);
    expect(await shape(schema)).toEqual(newShape);
    await expectUpgradedStoreWorks(store);
  });
});
