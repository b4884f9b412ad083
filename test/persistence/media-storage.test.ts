/**
 * Where each backend keeps media (issue 50; their behaviour is in the conformance suite), and the
 * upgrade that adds them: SQLite schema version 11 and PostgreSQL schema version 8 add the
 * `media` table (bytes as a BLOB / bytea). A database of the version before opens, upgrades in
 * place, keeps its sessions, and stores and reads media byte for byte.
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
import { png } from '../support/media.js';
import { testHeader, userMessage } from '../support/persistence-events.js';
import { mediaToVersion10 } from '../support/sqlite-versions.js';
import {
  POSTGRES_TEST_URL,
  postgresTestSchema,
  postgresUrlWithSchema,
  probePostgres,
  tempDir,
} from '../support/store-fixtures.js';

const postgres = await probePostgres();
if (!postgres.available) console.warn(`media storage tests: PostgreSQL skipped: ${postgres.reason}`);

const stores: SessionStore[] = [];
const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const store of stores.splice(0)) await store.close();
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

/** The old session is whole, and the upgraded store stores a PNG once, reads it back exactly and erases it. */
async function expectUpgradedStoreKeepsMedia(store: SessionStore): Promise<void> {
  expect((await store.readFrom('old', 0)).map((event) => event.type)).toEqual(['user/message']);
  const image = png(5, 5);
  const stored = await store.artifacts.putMedia({
    sessionId: 'old',
    bytes: image,
    mediaType: 'image/png',
    width: 5,
    height: 5,
  });
  expect(
    await store.artifacts.putMedia({ sessionId: 'old', bytes: image, mediaType: 'image/png', width: 5, height: 5 }),
  ).toEqual(stored);
  expect(Buffer.from(await store.artifacts.readMedia('old', stored.locator)).equals(Buffer.from(image))).toBe(true);
  expect((await store.erase('old', ALL_TENANTS)).removed).toMatchObject({ header: 1, events: 1, media: 1 });
}

describe('SQLite: the media table (schema version 11)', () => {
  it('a version-10 file opens as version 11 with a media table of BLOBs, keeps its sessions, and stores media', async () => {
    const { dir, cleanup } = tempDir('sessionlog-media-sqlite-');
    cleanups.push(cleanup);
    const path = join(dir, 'old.db');
    const writer = openSqliteStore(path);
    await writer.create(testHeader('old'));
    await writer.append('old', [userMessage('u1', 'before media')], { expectedSeq: 0, op: 'b0' });
    await writer.close();
    const raw = new Database(path);
    mediaToVersion10(raw);
    raw.pragma('user_version = 10');
    raw.close();

    const store = openSqliteStore(path);
    stores.push(store);
    expect(store.settings().userVersion).toBe(SQLITE_SCHEMA_VERSION);
    const db = new Database(path, { readonly: true });
    const columns = db.prepare(`SELECT name, type FROM pragma_table_info('media') ORDER BY cid`).all();
    db.close();
    expect(columns).toEqual([
      { name: 'id', type: 'INTEGER' },
      { name: 'session_key', type: 'INTEGER' },
      { name: 'name', type: 'TEXT' },
      { name: 'content', type: 'BLOB' },
    ]);
    await expectUpgradedStoreKeepsMedia(store);
  });
});

describe.skipIf(!postgres.available)('PostgreSQL: the media table (schema version 8)', () => {
  it('a version-7 schema opens, upgrades with a media table of bytea, keeps its sessions, and stores media', async () => {
    const admin = new pg.Client({ connectionString: POSTGRES_TEST_URL });
    await admin.connect();
    const schema = postgresTestSchema();
    cleanups.push(async () => {
      await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await admin.end();
    });
    const writer = await openStore(postgresUrlWithSchema(schema));
    await writer.create(testHeader('old'));
    await writer.append('old', [userMessage('u1', 'before media')], { expectedSeq: 0, op: 'b0' });
    await writer.close();
    await admin.query(`DROP TABLE "${schema}".media; UPDATE "${schema}".schema_version SET version = 7`);

    const store = await openStore(postgresUrlWithSchema(schema));
    stores.push(store);
    expect((await admin.query(`SELECT version FROM "${schema}".schema_version`)).rows).toEqual([
      { version: POSTGRES_SCHEMA_VERSION },
    ]);
    const columns = await admin.query(
      `SELECT column_name, data_type FROM information_schema.columns WHERE table_schema = $1 AND table_name = 'media' ORDER BY ordinal_position`,
      [schema],
    );
    expect(columns.rows).toEqual([
      { column_name: 'session_key', data_type: 'bigint' },
      { column_name: 'name', data_type: 'text' },
      { column_name: 'content', data_type: 'bytea' },
    ]);
    await expectUpgradedStoreKeepsMedia(store);
  });
});
