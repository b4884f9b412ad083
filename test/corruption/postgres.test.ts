/**
 * Corruption suite, PostgreSQL backend (DESIGN §4.1, §10): sessions written through the real
 * append path are copied row for row and damaged at the row level (test/support/corruption-rows.ts);
 * each outcome is judged by the oracle in test/support/corruption.ts. A transaction commits whole,
 * so nothing may ever be recovered by truncation here: damage is refused, or it left a valid log.
 * Runs in a fresh schema, dropped afterwards; skips only when no server answers. Seeded
 * (SESSIONLOG_CORRUPTION_SEED reproduces a run).
 */
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { openStore } from '../../src/persistence/index.js';
import {
  OutcomeCounts,
  corruptionSeed,
  judge,
  originalOf,
  realisticBatches,
  seededRng,
  writeBatches,
  type Original,
} from '../support/corruption.js';
import { cloneModel, damageRows, keepsRowPrefix, snapshotOf, type RowModel } from '../support/corruption-rows.js';
import {
  POSTGRES_TEST_URL,
  postgresTestSchema,
  postgresUrlWithSchema,
  probePostgres,
} from '../support/store-fixtures.js';

const CASES = 320;
const PRISTINE = 4;
const SEED = corruptionSeed(0x9e_57_9e_01);

const probe = await probePostgres();
if (!probe.available) console.warn(`PostgreSQL corruption suite skipped: ${probe.reason}`);

async function readModel(client: pg.Client, schema: string, id: string): Promise<RowModel> {
  const s = `"${schema}"`;
  const session = (
    await client.query<{ key: string; header: string }>(`SELECT key, header FROM ${s}.sessions WHERE id = $1`, [id])
  ).rows[0];
  if (!session) throw new Error(`no session ${id}`);
  const events = (
    await client.query<RowModel['events'][number] & { seq: string; time: string }>(
      `SELECT seq, type, time, data, surface_op, source_event_seqs, ignorable FROM ${s}.events WHERE session_key = $1 ORDER BY seq`,
      [session.key],
    )
  ).rows.map((row) => ({ ...row, seq: Number(row.seq), time: Number(row.time) }));
  const batches = (
    await client.query<{ op: string; first_seq: string; last_seq: string }>(
      `SELECT op, first_seq, last_seq FROM ${s}.batches WHERE session_key = $1 ORDER BY first_seq`,
      [session.key],
    )
  ).rows.map((row) => ({ op: row.op, first_seq: Number(row.first_seq), last_seq: Number(row.last_seq) }));
  return { header: session.header, events, batches };
}

async function writeModel(client: pg.Client, schema: string, id: string, model: RowModel): Promise<void> {
  const s = `"${schema}"`;
  await client.query('BEGIN');
  try {
    const key = (
      await client.query<{ key: string }>(`INSERT INTO ${s}.sessions (id, header) VALUES ($1, $2) RETURNING key`, [
        id,
        model.header,
      ])
    ).rows[0]!.key;
    await client.query(
      `INSERT INTO ${s}.events (session_key, seq, type, time, data, surface_op, source_event_seqs, ignorable)
       SELECT $1, * FROM unnest($2::bigint[], $3::text[], $4::bigint[], $5::text[], $6::text[], $7::text[], $8::boolean[])`,
      [
        key,
        model.events.map((e) => e.seq),
        model.events.map((e) => e.type),
        model.events.map((e) => e.time),
        model.events.map((e) => e.data),
        model.events.map((e) => e.surface_op),
        model.events.map((e) => e.source_event_seqs),
        model.events.map((e) => e.ignorable),
      ],
    );
    await client.query(
      `INSERT INTO ${s}.batches (session_key, op, first_seq, last_seq) SELECT $1, * FROM unnest($2::text[], $3::bigint[], $4::bigint[])`,
      [
        key,
        model.batches.map((b) => b.op),
        model.batches.map((b) => b.first_seq),
        model.batches.map((b) => b.last_seq),
      ],
    );
    await client.query('COMMIT');
  } catch (error) {
    await client.query('ROLLBACK');
    throw error;
  }
}

describe.skipIf(!probe.available)('corruption suite: postgres', () => {
  it(`each of ${CASES} random row damages to sessions written by the real code is refused naming a damaged seq, or left a valid log with every undamaged batch; nothing is deleted`, async () => {
    const schema = postgresTestSchema();
    const url = postgresUrlWithSchema(schema);
    const rng = seededRng(SEED);
    const outcomes = new OutcomeCounts();
    const admin = new pg.Client({ connectionString: POSTGRES_TEST_URL });
    await admin.connect();
    const store = await openStore(url);
    try {
      const originals: Original[] = [];
      for (let p = 0; p < PRISTINE; p++)
        originals.push(originalOf(await writeBatches(store, `pristine-${p}`, realisticBatches(rng, `pristine-${p}`))));
      const models = await Promise.all(originals.map((_, p) => readModel(admin, schema, `pristine-${p}`)));
      for (let i = 0; i < CASES; i++) {
        const p = i % PRISTINE;
        const id = `case-${i}`;
        const model = cloneModel(models[p]!);
        model.header = model.header.replace(`"id":"pristine-${p}"`, `"id":"${id}"`);
        const damage = damageRows(rng, model, originals[p]!);
        await writeModel(admin, schema, id, model);
        const outcome = await judge(
          store,
          id,
          originals[p]!,
          damage,
          {
            snapshot: async () => snapshotOf(await readModel(admin, schema, id)),
            keepsPrefix: async (before, kept) => keepsRowPrefix(before, await readModel(admin, schema, id), kept),
          },
          { id: 'pristine-0', events: originals[0]!.events.length },
          'postgres',
        );
        outcomes.add(damage.kind.split(':')[0]!, outcome);
      }
    } finally {
      await store.close();
      await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await admin.end();
    }
    outcomes.print('postgres', SEED);
    expect(outcomes.total()).toBe(CASES);
    expect(outcomes.total('recovered')).toBe(0);
    expect(outcomes.total('refused')).toBeGreaterThan(CASES / 3);
  }, 300_000);
});
