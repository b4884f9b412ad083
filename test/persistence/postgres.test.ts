/**
 * PostgreSQL backend specifics (the shared behaviour is in test/conformance/postgres.test.ts):
 * schema creation and refusal, op replay and write races between store instances, watch driven
 * by LISTEN/NOTIFY across instances and processes, and password redaction. Each test uses a
 * fresh schema, dropped afterwards; the file skips only when no server answers.
 */
import pg from 'pg';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  openStore,
  POSTGRES_SCHEMA_VERSION,
  type PostgresSessionStore,
  type SessionStore,
} from '../../src/persistence/index.js';
import { isSessionlogError, type StoredEvent, type NewEvent } from '../../src/session/index.js';
import { lastJsonLine, runTsScript } from '../support/child-process.js';
import { closedTurn, testHeader } from '../support/persistence-events.js';
import {
  POSTGRES_TEST_URL,
  postgresFixture,
  postgresTestSchema,
  postgresUrlWithSchema,
  probePostgres,
} from '../support/store-fixtures.js';

const probe = await probePostgres();
if (!probe.available) console.warn(`PostgreSQL backend tests skipped: ${probe.reason}`);

const CHILD = 'test/support/append-child.ts';
type ChildResult =
  { ok: true; firstSeq: number; lastSeq: number; replayed: boolean } | { ok: false; code: string; message: string };

const run = (n: number): NewEvent => ({ type: 'session/run', time: n, data: { workflowId: 'wf', runId: `run-${n}` } });

let schema: string;
let url: string;
let admin: pg.Client;
const opened: SessionStore[] = [];

/** Opens a store on this test's schema; `pollIntervalMs` far beyond the test so only notifications can wake a watcher. */
async function open(target = url): Promise<PostgresSessionStore> {
  const store = (await openStore(target, { pollIntervalMs: 600_000 })) as PostgresSessionStore;
  opened.push(store);
  return store;
}

async function failure(attempt: () => Promise<unknown>): Promise<unknown> {
  try {
    await attempt();
  } catch (error) {
    return error;
  }
  return undefined;
}

/**
 * Session `s` with one closed turn, in a schema as a build before the batch-starts index left it
 * (the same version, without that index); `beforeDrop` runs while the index is still there.
 */
async function schemaWithoutBatchStartsIndex(beforeDrop?: () => Promise<unknown>): Promise<void> {
  const first = await open();
  await first.create(testHeader('s'));
  await first.append('s', closedTurn(1), { expectedSeq: 0, op: 'turn-1' });
  await beforeDrop?.();
  await first.close();
  opened.splice(opened.indexOf(first), 1);
  await admin.query(`DROP INDEX "${schema}".batches_by_first_seq`);
}

describe.skipIf(!probe.available)('PostgreSQL store', () => {
  beforeEach(async () => {
    schema = postgresTestSchema();
    url = postgresUrlWithSchema(schema);
    admin = new pg.Client({ connectionString: POSTGRES_TEST_URL });
    await admin.connect();
  });

  afterEach(async () => {
    for (const store of opened.splice(0)) await store.close();
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await admin.end();
  });

  describe('schema', () => {
    it('creates the tables in the named schema, events keyed (session_key, seq) with the payload stored as text', async () => {
      const store = await open();
      expect(store.kind).toBe('postgres');
      const tables = await admin.query<{ tablename: string }>(
        `SELECT tablename FROM pg_tables WHERE schemaname = $1 ORDER BY tablename`,
        [schema],
      );
      expect(tables.rows.map((r) => r.tablename)).toEqual([
        'artifacts',
        'batches',
        'events',
        'inbox',
        'media',
        'pacing',
        'projection_cache',
        'schema_version',
        'session_keys',
        'sessions',
        'spend',
        'tombstones',
        'transcripts',
      ]);
      const key = await admin.query<{ attname: string }>(
        `SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
         WHERE i.indrelid = $1::regclass AND i.indisprimary ORDER BY array_position(i.indkey, a.attnum)`,
        [`"${schema}".events`],
      );
      expect(key.rows.map((r) => r.attname)).toEqual(['session_key', 'seq']);
      const data = await admin.query<{ data_type: string }>(
        `SELECT data_type FROM information_schema.columns WHERE table_schema = $1 AND table_name = 'events' AND column_name = 'data'`,
        [schema],
      );
      expect(data.rows[0]?.data_type).toBe('text');
      const version = await admin.query<{ version: number }>(`SELECT version FROM "${schema}".schema_version`);
      expect(version.rows).toEqual([{ version: POSTGRES_SCHEMA_VERSION }]);
    });

    it('indexes the batch records by where they start, also in a schema made without that index (a build before it), and reads it as before', async () => {
      const indexes = async () =>
        (
          await admin.query<{ indexname: string }>(
            `SELECT indexname FROM pg_indexes WHERE schemaname = $1 AND tablename = 'batches' ORDER BY indexname`,
            [schema],
          )
        ).rows.map((r) => r.indexname);
      await schemaWithoutBatchStartsIndex(async () =>
        expect(await indexes()).toEqual(['batches_by_first_seq', 'batches_by_last_seq', 'batches_pkey']),
      );
      const second = await open();
      expect(await indexes()).toEqual(['batches_by_first_seq', 'batches_by_last_seq', 'batches_pkey']);
      expect((await second.readFrom('s', 0)).map((e) => e.type)).toEqual(closedTurn(1).map((e) => e.type));
      const version = await admin.query<{ version: number }>(`SELECT version FROM "${schema}".schema_version`);
      expect(version.rows).toEqual([{ version: POSTGRES_SCHEMA_VERSION }]);
    });

    it("opens a schema without that index for a role that may not create it (not the tables' owner), and reads as before", async () => {
      await schemaWithoutBatchStartsIndex();
      const role = `${schema}_rows_only`;
      await admin.query(`CREATE ROLE ${role} LOGIN`);
      try {
        await admin.query(`GRANT USAGE ON SCHEMA "${schema}" TO ${role}`);
        await admin.query(`GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "${schema}" TO ${role}`);
        await admin.query(`GRANT USAGE ON ALL SEQUENCES IN SCHEMA "${schema}" TO ${role}`);
        const limited = new URL(url);
        limited.username = role;
        const store = await open(limited.toString());
        expect((await store.readFrom('s', 0)).map((e) => e.type)).toEqual(closedTurn(1).map((e) => e.type));
        await store.append('s', closedTurn(2), { expectedSeq: 6, op: 'turn-2' });
        const index = await admin.query(`SELECT to_regclass($1) AS found`, [`"${schema}".batches_by_first_seq`]);
        expect(index.rows).toEqual([{ found: null }]);
        await store.close();
        opened.splice(opened.indexOf(store), 1);
      } finally {
        await admin.query(`DROP OWNED BY ${role}`);
        await admin.query(`DROP ROLE ${role}`);
      }
    });

    it('several stores opening a new schema at once all succeed and create it once', async () => {
      const stores = await Promise.all(Array.from({ length: 5 }, () => open()));
      await stores[0]!.create(testHeader('s'));
      expect(await stores[4]!.exists('s')).toBe(true);
      const version = await admin.query(`SELECT version FROM "${schema}".schema_version`);
      expect(version.rowCount).toBe(1);
    });

    it('refuses a schema whose version is newer, saying a newer version of sessionlog wrote it', async () => {
      await (await open()).close();
      await admin.query(`UPDATE "${schema}".schema_version SET version = $1`, [POSTGRES_SCHEMA_VERSION + 1]);
      const error = await failure(() => open());
      expect(isSessionlogError(error, 'UNSUPPORTED_FORMAT')).toBe(true);
      expect((error as Error).message).toMatch(/written by a newer version of sessionlog/);
    });

    it('refuses a schema that holds tables of another application', async () => {
      await admin.query(`CREATE SCHEMA "${schema}"`);
      await admin.query(`CREATE TABLE "${schema}".sessions (x int)`);
      const error = await failure(() => open());
      expect(error).toMatchObject({ code: 'INVALID_ARGUMENT', message: expect.stringMatching(/another application/) });
    });

    it('refuses a schema name that is not a plain identifier', async () => {
      for (const bad of ['Upper', 'a-b', '1abc', 'x'.repeat(49), 'a"; DROP TABLE x; --']) {
        const error = await failure(() => open(postgresUrlWithSchema(bad)));
        expect(error, bad).toMatchObject({ code: 'INVALID_ARGUMENT', message: expect.stringMatching(/schema/) });
      }
    });
  });

  describe('append', () => {
    it('an op replay writes nothing and returns the stored seqs, even from another instance with a stale expectedSeq', async () => {
      const store = await open();
      await store.create(testHeader('s'));
      const first = await store.append('s', [run(0), run(1)], { expectedSeq: 0, op: 'once' });
      await store.append('s', [run(2)], { expectedSeq: 2, op: 'later' });
      const before = postgresFixture.dump(url);
      const other = await open();
      expect(await other.append('s', [run(0), run(1)], { expectedSeq: 0, op: 'once' })).toEqual({
        ...first,
        replayed: true,
      });
      expect(await store.append('s', [run(9), run(8)], { expectedSeq: 3, op: 'once' })).toEqual({
        ...first,
        replayed: true,
      });
      expect(await failure(() => store.append('s', [run(9)], { expectedSeq: 3, op: 'once' }))).toMatchObject({
        code: 'OP_CONFLICT',
      });
      expect(postgresFixture.dump(url)).toBe(before);
    });

    it('a writer that waits longer than lockTimeoutMs for the session row is UNAVAILABLE, saying what to check, and writes nothing', async () => {
      const store = await open();
      await store.create(testHeader('s'));
      const impatient = (await openStore(url, { lockTimeoutMs: 200, pollIntervalMs: 600_000 })) as PostgresSessionStore;
      opened.push(impatient);
      await admin.query('BEGIN');
      try {
        await admin.query(`SELECT 1 FROM "${schema}".sessions WHERE id = 's' FOR UPDATE`);
        expect(await failure(() => impatient.append('s', [run(0)], { expectedSeq: 0, op: 'waits' }))).toMatchObject({
          code: 'UNAVAILABLE',
          message: expect.stringMatching(/lockTimeoutMs \(200 ms\).*another writer holds it/),
        });
      } finally {
        await admin.query('ROLLBACK');
      }
      expect(await store.nextSeq('s')).toBe(0);
      expect(await impatient.append('s', [run(0)], { expectedSeq: 0, op: 'waits' })).toEqual({
        firstSeq: 0,
        lastSeq: 0,
        replayed: false,
      });
    });

    it('an op PostgreSQL text cannot hold (a NUL character) is INVALID_ARGUMENT and writes nothing', async () => {
      const store = await open();
      await store.create(testHeader('s'));
      const before = postgresFixture.dump(url);
      expect(await failure(() => store.append('s', [run(0)], { expectedSeq: 0, op: 'a\u0000b' }))).toMatchObject({
        code: 'INVALID_ARGUMENT',
      });
      expect(postgresFixture.dump(url)).toBe(before);
    });

    it('store instances racing at the same expectedSeq: exactly one wins each round and the log stays contiguous', async () => {
      const stores = [await open(), await open(), await open()];
      await stores[0]!.create(testHeader('s'));
      for (let round = 0; round < 15; round++) {
        const expectedSeq = await stores[0]!.nextSeq('s');
        const outcomes = await Promise.allSettled(
          stores.map((store, i) => store.append('s', [run(round), run(round)], { expectedSeq, op: `r${round}-${i}` })),
        );
        expect(outcomes.filter((o) => o.status === 'fulfilled')).toHaveLength(1);
        const codes = outcomes.flatMap((o) =>
          o.status === 'rejected' ? [isSessionlogError(o.reason) ? o.reason.code : String(o.reason)] : [],
        );
        expect(codes).toEqual(['SEQ_CONFLICT', 'SEQ_CONFLICT']);
      }
      const events = await (await open()).readFrom('s', 0);
      expect(events.map((e) => e.seq)).toEqual([...Array(30).keys()]);
    });

    it('instances retrying the same op at once store it once: one writes, the others replay it', async () => {
      const stores = [await open(), await open(), await open()];
      await stores[0]!.create(testHeader('s'));
      const results = await Promise.all(
        stores.map((store) => store.append('s', [run(0), run(1)], { expectedSeq: 0, op: 'retry' })),
      );
      expect(results.filter((r) => !r.replayed)).toHaveLength(1);
      for (const result of results) expect([result.firstSeq, result.lastSeq]).toEqual([0, 1]);
      const batches = await admin.query(`SELECT op FROM "${schema}".batches`);
      expect(batches.rows).toEqual([{ op: 'retry' }]);
      expect(await stores[1]!.nextSeq('s')).toBe(2);
    });
  });

  describe('watch', () => {
    async function collect(store: SessionStore, id: string, count: number): Promise<StoredEvent[]> {
      const seen: StoredEvent[] = [];
      for await (const event of store.watch(id, 0)) {
        seen.push(event);
        if (seen.length === count) break;
      }
      return seen;
    }

    it('yields appends made by another store instance through NOTIFY (no in-process signal, no poll within the test)', async () => {
      const watcher = await open();
      // The same database and schema spelled through another host name: a separate instance
      // whose in-process wake-ups do not reach the watcher, as if it ran elsewhere.
      const elsewhere = new URL(url);
      elsewhere.hostname = elsewhere.hostname === 'localhost' ? '127.0.0.1' : 'localhost';
      const writer = await open(elsewhere.toString());
      expect(writer.location).not.toBe(watcher.location);
      await writer.create(testHeader('s'));
      await writer.append('s', [run(0)], { expectedSeq: 0, op: 'b0' });
      const watching = collect(watcher, 's', 7);
      // Let the watcher read the stored event and wait.
      await new Promise((resolve) => setTimeout(resolve, 200));
      await writer.append('s', closedTurn(1), { expectedSeq: 1, op: 't1' });
      expect((await watching).map((e) => [e.seq, e.op])).toEqual([
        [0, 'b0'],
        ...Array.from({ length: 6 }, (_, i) => [i + 1, 't1']),
      ]);
    });

    it('yields appends made by a child process', async () => {
      const watcher = await open();
      await watcher.create(testHeader('s'));
      const watching = collect(watcher, 's', 3);
      const child = await runTsScript(CHILD, [url, 's', '0', 'child', '3']);
      expect(lastJsonLine<ChildResult>(child)).toEqual({ ok: true, firstSeq: 0, lastSeq: 2, replayed: false });
      expect((await watching).map((e) => [e.seq, e.op])).toEqual([
        [0, 'child'],
        [1, 'child'],
        [2, 'child'],
      ]);
    });

    it('after the listener connection is killed, watch listens again and still sees another instance', async () => {
      const watcher = await open();
      const elsewhere = new URL(url);
      elsewhere.hostname = elsewhere.hostname === 'localhost' ? '127.0.0.1' : 'localhost';
      const writer = await open(elsewhere.toString());
      await writer.create(testHeader('s'));
      const seen: number[] = [];
      const iterator = watcher.watch('s', 0)[Symbol.asyncIterator]();
      const next = async (): Promise<void> => {
        const r = await iterator.next();
        seen.push((r.value as StoredEvent).seq);
      };
      const first = next();
      await writer.append('s', [run(0)], { expectedSeq: 0, op: 'b0' });
      await first;
      const listening = `LISTEN "${watcher.channel}"`;
      const killed = await admin.query(
        `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = $1 AND pid <> pg_backend_pid()`,
        [listening],
      );
      expect(killed.rowCount).toBeGreaterThanOrEqual(1);
      // Wait until the watcher has listened again, then append from the other instance.
      for (let i = 0; i < 200; i++) {
        const again = await admin.query(`SELECT 1 FROM pg_stat_activity WHERE query = $1`, [listening]);
        if (again.rowCount === 1) break;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      const second = next();
      await writer.append('s', [run(1)], { expectedSeq: 1, op: 'b1' });
      await second;
      expect(seen).toEqual([0, 1]);
      await iterator.return?.();
    });

    it('close ends watches and releases the listener and pooled connections', async () => {
      const watcher = await open();
      await watcher.create(testHeader('s'));
      const watching = collect(watcher, 's', 1);
      await new Promise((resolve) => setTimeout(resolve, 200));
      const listening = `LISTEN "${watcher.channel}"`;
      expect((await admin.query(`SELECT 1 FROM pg_stat_activity WHERE query = $1`, [listening])).rowCount).toBe(1);
      await watcher.close();
      expect(await watching).toEqual([]);
      // The server notices closed connections asynchronously.
      for (let i = 0; i < 100; i++) {
        if ((await admin.query(`SELECT 1 FROM pg_stat_activity WHERE query = $1`, [listening])).rowCount === 0) break;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      expect((await admin.query(`SELECT 1 FROM pg_stat_activity WHERE query = $1`, [listening])).rowCount).toBe(0);
    });
  });

  it('accepts postgresql:// as well as postgres://', async () => {
    const store = await open(url.replace(/^postgres:/, 'postgresql:'));
    await store.create(testHeader('s'));
    expect(await (await open()).exists('s')).toBe(true);
  });

  describe('transcript index', () => {
    it('a put that waits for an erasure holding the session row finds the session gone once it commits: SESSION_ERASED, nothing stored', async () => {
      const store = await open();
      await store.create(testHeader('s'));
      const digest = 'ab'.repeat(32);
      await admin.query('BEGIN');
      let put: Promise<unknown>;
      try {
        // What an erasure holds until it commits.
        await admin.query(`SELECT 1 FROM "${schema}".sessions WHERE id = 's' FOR UPDATE`);
        put = failure(() => store.transcripts.put('caller', digest, { sessionId: 's', seq: 1 }));
        // The upsert's foreign key check waits for the row lock.
        let waiting = 0;
        for (let i = 0; i < 500 && waiting === 0; i++) {
          await new Promise((resolve) => setTimeout(resolve, 10));
          const rows = await admin.query(
            `SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%transcripts%'`,
          );
          waiting = rows.rowCount ?? 0;
        }
        expect(waiting).toBe(1);
        await admin.query(`DELETE FROM "${schema}".sessions WHERE id = 's'`);
        await admin.query(`INSERT INTO "${schema}".tombstones (id, erased_at, until) VALUES ('s', $1, $2)`, [
          Date.now(),
          Date.now() + 60_000,
        ]);
        await admin.query('COMMIT');
      } catch (error) {
        await admin.query('ROLLBACK');
        throw error;
      }
      expect(await put).toMatchObject({ code: 'SESSION_ERASED' });
      expect((await admin.query(`SELECT 1 FROM "${schema}".transcripts`)).rowCount).toBe(0);
      expect(await store.transcripts.get('caller', digest)).toBeUndefined();
    });
  });

  describe('artifacts', () => {
    it('round-trips content PostgreSQL text could not hold (NUL) byte for byte', async () => {
      const store = await open();
      await store.create(testHeader('s'));
      const content = `a\u0000b 𝄞 ${'z'.repeat(1000)}`;
      const ref = await store.artifacts.put({ sessionId: 's', name: 'nul.bin', content });
      expect(ref).toEqual({ locator: 'artifact:s/nul.bin', bytes: Buffer.byteLength(content, 'utf8') });
      expect(await (await open()).artifacts.get('s', ref.locator)).toBe(content);
    });
  });
});

describe('PostgreSQL store URLs and errors', () => {
  it('never shows a password in an error, whether in the user info or a password parameter', async () => {
    const secret = 'hunter2-very-secret';
    for (const target of [
      `postgres://postgres:${secret}@127.0.0.1:1/test`,
      `postgresql://postgres:${secret}@127.0.0.1:1/test?schema=sl_test_redaction`,
      `postgres://postgres@127.0.0.1:1/test?password=${secret}`,
      `postgres://postgres:${secret}@127.0.0.1:5432/test?schema=Bad-Name`,
      `postgres://postgres:${secret}@[bad/test`,
    ]) {
      const error = await failure(() => openStore(target));
      // Port 1 answers nobody (UNAVAILABLE); the last two are malformed (INVALID_ARGUMENT).
      expect(error, target).toMatchObject({ code: target.includes(':1/') ? 'UNAVAILABLE' : 'INVALID_ARGUMENT' });
      expect((error as Error).message, target).not.toContain(secret);
      expect((error as Error).message, target).toContain('***');
    }
  });
});
