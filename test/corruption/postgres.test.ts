/**
 * Corruption suite, PostgreSQL backend (DESIGN §4.1, §10): sessions written through the real
 * append path are copied row for row and damaged at the row level (test/support/corruption-rows.ts);
 * each outcome is judged by the oracle in test/support/corruption.ts. A transaction commits whole,
 * so nothing may ever be recovered by truncation here: damage is refused, or it left a valid log.
 * Runs in a fresh schema, dropped afterwards; skips only when no server answers. Seeded
 * (SESSIONLOG_CORRUPTION_SEED reproduces a run).
 *
 * Every other case (`COLD_EVERY`) also gets a projection checkpoint whose anchor seals an
 * undamaged prefix of its original log, 1..all of its batches, written by the real code as the
 * same session in a scratch schema (its rows are checked to be the case's own); the cold
 * derived-history read through it of a store instance that never read the session is judged
 * (test/support/corruption.ts, `ColdCheck`). Only every other case: writing every case's prefix
 * through the real append path (a few ms per append) took the suite to over three times its
 * time, and every other case still over twice.
 */
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { openStore } from '../../src/persistence/index.js';
import {
  ColdTally,
  OutcomeCounts,
  checkpointPlans,
  anchoredCheckpoints,
  corruptionSeed,
  judge,
  originalOf,
  realisticBatches,
  seededRng,
  standingReaders,
  writeBatches,
  type GeneratedBatch,
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
/** The checkpoints' prefixes are drawn from a stream of their own, so a seed's damages stay what they were. */
const ANCHOR_STREAM = 0x0a_c4_0e_27;
/** Every how many cases one gets a checkpoint and its cold read judged. */
const COLD_EVERY = 2;

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
    const scratchSchema = postgresTestSchema();
    const rng = seededRng(SEED);
    const anchorRng = seededRng(SEED ^ ANCHOR_STREAM);
    const outcomes = new OutcomeCounts();
    const cold = new ColdTally();
    const admin = new pg.Client({ connectionString: POSTGRES_TEST_URL });
    await admin.connect();
    const store = await openStore(url);
    // The scratch schema only feeds the checkpoints: its commits need not wait for the disk.
    const scratchUrl = new URL(postgresUrlWithSchema(scratchSchema));
    scratchUrl.searchParams.set('options', '-c synchronous_commit=off');
    const scratch = await openStore(scratchUrl.toString());
    // Opening a store costs a pool and a listening connection: the cold reads use two kept open.
    const derivedReader = await openStore(url);
    const anchoredReader = await openStore(url);
    try {
      const originals: Original[] = [];
      const generated: GeneratedBatch[][] = [];
      for (let p = 0; p < PRISTINE; p++) {
        generated.push(realisticBatches(rng, `pristine-${p}`));
        originals.push(originalOf(await writeBatches(store, `pristine-${p}`, generated[p]!)));
      }
      const models = await Promise.all(originals.map((_, p) => readModel(admin, schema, `pristine-${p}`)));
      // Each checked case's checkpoint: the same session's first k original batches, written by the real code.
      const records = await anchoredCheckpoints(scratch, checkpointPlans(CASES, COLD_EVERY, generated, anchorRng), 8);
      for (let i = 0; i < CASES; i++) {
        const p = i % PRISTINE;
        const id = `case-${i}`;
        const header = models[p]!.header.replace(`"id":"pristine-${p}"`, `"id":"${id}"`);
        const record = records[i];
        if (record) {
          const last = record.anchor.seq;
          expect(
            snapshotOf(await readModel(admin, scratchSchema, id)),
            `${id}: the scratch rows are not the case's prefix`,
          ).toBe(
            snapshotOf({
              header,
              events: models[p]!.events.filter((e) => e.seq <= last),
              batches: models[p]!.batches.filter((b) => b.first_seq <= last),
            }),
          );
          if (last === originals[p]!.events.length - 1) cold.wholeLog++;
        }
        const model = cloneModel(models[p]!);
        model.header = header;
        const damage = damageRows(rng, model, originals[p]!);
        await writeModel(admin, schema, id, model);
        if (record) await store.projectionCache.put(id, record);
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
          record && { readers: standingReaders(derivedReader, anchoredReader), record, tally: cold },
        );
        outcomes.add(damage.kind.split(':')[0]!, outcome);
      }
    } finally {
      await store.close();
      await scratch.close();
      await derivedReader.close();
      await anchoredReader.close();
      await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await admin.query(`DROP SCHEMA IF EXISTS "${scratchSchema}" CASCADE`);
      await admin.end();
    }
    outcomes.print('postgres', SEED);
    cold.print('postgres', SEED);
    expect(outcomes.total()).toBe(CASES);
    expect(cold.judged).toBe(Math.ceil(CASES / COLD_EVERY));
    expect(cold.anchored, 'no cold read took the anchored path').toBeGreaterThan(0);
    expect(outcomes.total('recovered')).toBe(0);
    expect(outcomes.total('refused')).toBeGreaterThan(CASES / 3);
  }, 300_000);
});
