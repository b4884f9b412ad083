/**
 * The relational core's write sequence on both relational backends (src/persistence/relational):
 * a write that fails once it began (here a trigger refuses the batch row, after the event rows
 * went in) changes nothing stored and evicts the store's validated copy, so the next read builds a
 * new copy from the stored log; a refusal before anything is written (SEQ_CONFLICT) keeps the copy.
 * The PostgreSQL half skips only when no server answers.
 */
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { openStore, type SessionStore } from '../../src/persistence/index.js';
import type { NewEvent } from '../../src/session/index.js';
import { testHeader } from '../support/persistence-events.js';
import {
  POSTGRES_TEST_URL,
  postgresTestSchema,
  postgresUrlWithSchema,
  probePostgres,
  tempDir,
} from '../support/store-fixtures.js';

const probe = await probePostgres();
if (!probe.available) console.warn(`PostgreSQL half of the relational write tests skipped: ${probe.reason}`);

const run = (n: number): NewEvent => ({ type: 'session/run', time: n, data: { workflowId: 'wf', runId: `run-${n}` } });

type Backend = {
  name: string;
  available: boolean;
  /** A fresh store URL and how to remove what it leaves. */
  setUp(): Promise<{ url: string; tearDown: () => Promise<void> }>;
  /** Makes the database refuse (or accept again) every new multi-event batch partway, as a failing disk or server would. */
  refuseBatches(url: string, refuse: boolean): Promise<void>;
};

const sqlite: Backend = {
  name: 'sqlite',
  available: true,
  async setUp() {
    const { dir, cleanup } = tempDir('sessionlog-relational-writes-');
    return { url: `sqlite:${dir}/store.db`, tearDown: async () => cleanup() };
  },
  async refuseBatches(url, refuse) {
    const db = new Database(url.slice('sqlite:'.length));
    try {
      db.exec(
        refuse
          ? // A batch's op is on its first row: refusing the rows after it fails a batch midway.
            `CREATE TRIGGER refuse_batches BEFORE INSERT ON events WHEN NEW.batch_op IS NULL BEGIN SELECT RAISE(ABORT, 'batch refused by the test'); END`
          : `DROP TRIGGER refuse_batches`,
      );
    } finally {
      db.close();
    }
  },
};

const postgres: Backend = {
  name: 'postgres',
  available: probe.available,
  async setUp() {
    const schema = postgresTestSchema();
    return {
      url: postgresUrlWithSchema(schema),
      tearDown: () => adminQuery(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`),
    };
  },
  async refuseBatches(url, refuse) {
    const schema = `"${new URL(url).searchParams.get('schema')}"`;
    await adminQuery(
      refuse
        ? `CREATE FUNCTION ${schema}.refuse_batch() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'batch refused by the test'; END $$;
           CREATE TRIGGER refuse_batches BEFORE INSERT ON ${schema}.batches FOR EACH ROW EXECUTE FUNCTION ${schema}.refuse_batch();`
        : `DROP TRIGGER refuse_batches ON ${schema}.batches; DROP FUNCTION ${schema}.refuse_batch();`,
    );
  },
};

async function adminQuery(sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: POSTGRES_TEST_URL });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

for (const backend of [sqlite, postgres]) {
  describe.skipIf(!backend.available)(`relational write sequence: ${backend.name}`, () => {
    const cleanups: Array<() => Promise<void>> = [];

    afterEach(async () => {
      for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
    });

    async function open(): Promise<{ store: SessionStore; url: string }> {
      const { url, tearDown } = await backend.setUp();
      cleanups.push(tearDown);
      const store = await openStore(url, { pollIntervalMs: 10 });
      cleanups.push(() => store.close());
      return { store, url };
    }

    it('a write that fails after it began stores nothing and evicts the validated copy; a refusal before writing keeps the copy', async () => {
      const { store, url } = await open();
      await store.create(testHeader('s'));
      await store.append('s', [run(1)], { expectedSeq: 0, op: 'b0' });
      const copy = await store.session('s');

      await expect(store.append('s', [run(2)], { expectedSeq: 5, op: 'b1' })).rejects.toMatchObject({
        code: 'SEQ_CONFLICT',
      });
      expect(await store.session('s')).toBe(copy);

      await backend.refuseBatches(url, true);
      await expect(store.append('s', [run(2), run(3)], { expectedSeq: 1, op: 'b1' })).rejects.toThrow(
        /batch refused by the test/,
      );
      const reread = await store.session('s');
      expect(reread).not.toBe(copy);
      expect(reread.nextSeq).toBe(1);
      expect((await store.readFrom('s', 0)).map((event) => event.op)).toEqual(['b0']);

      await backend.refuseBatches(url, false);
      expect(await store.append('s', [run(2), run(3)], { expectedSeq: 1, op: 'b1' })).toEqual({
        firstSeq: 1,
        lastSeq: 2,
        replayed: false,
      });
      expect(await store.session('s')).toBe(reread);
      expect((await store.readFrom('s', 0)).map((event) => event.op)).toEqual(['b0', 'b1', 'b1']);
    });
  });
}
