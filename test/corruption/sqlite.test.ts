/**
 * Corruption suite, SQLite backend (DESIGN §4.1, §10): sessions written through the real append
 * path are copied row for row and damaged at the row level (test/support/corruption-rows.ts);
 * each outcome is judged by the oracle in test/support/corruption.ts. A transaction commits
 * whole, so nothing may ever be recovered by truncation here: damage is refused, or it left a
 * valid log. Seeded (SESSIONLOG_CORRUPTION_SEED reproduces a run).
 *
 * The SQLite format (version 10) keeps each batch's op and last seq on the batch's first row and
 * a row's place in the tree is its key and seq, so the shared row model maps onto it like this: a
 * batch is written on the row of its first seq; a row given a seq outside 0..2^32-1 (a damaged seq
 * column, which the schema's CHECK refuses to write, so it is written with the checks off) stays in
 * the place it had; a batch whose first row is gone (deleted, cut, or given another seq) is gone
 * with it, as in the file. So a batch whose rows are all gone from the end of the log leaves no
 * trace: that is a cut at a batch boundary, which the suite draws as such. A damage the format
 * cannot hold (two batches starting on one row, or one that must be refused only because of such
 * a vanished batch, with no batch left claiming seqs past the last row) is drawn again, and how
 * many were is printed.
 *
 * Every other case (`COLD_EVERY`) also gets a projection checkpoint whose anchor seals an
 * undamaged prefix of its original log, 1..all of its batches, written by the real code as the
 * same session in a scratch database (its rows are checked to be the case's own); a fresh store
 * instance's cold derived-history read through it is judged (test/support/corruption.ts,
 * `ColdCheck`). Only every other case: doing it for every case (the scratch appends, two store
 * instances opened per case and the reads) took this short suite to over twice its time.
 */
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { openStore } from '../../src/persistence/index.js';
import {
  ColdTally,
  OutcomeCounts,
  checkpointPlans,
  anchoredCheckpoints,
  corruptionSeed,
  freshReaders,
  judge,
  originalOf,
  realisticBatches,
  scratchDir,
  seededRng,
  writeBatches,
  type Damage,
  type GeneratedBatch,
  type Original,
} from '../support/corruption.js';
import { cloneModel, damageRows, keepsRowPrefix, snapshotOf, type RowModel } from '../support/corruption-rows.js';
import { tempDir } from '../support/store-fixtures.js';

const CASES = 330;
const PRISTINE = 4;
const SEED = corruptionSeed(0x5a_11_7e_01);
/** The checkpoints' prefixes are drawn from a stream of their own, so a seed's damages stay what they were. */
const ANCHOR_STREAM = 0x0a_c4_0e_27;
/** Every how many cases one gets a checkpoint and its cold read judged. */
const COLD_EVERY = 2;

const MAX_SEQ = 2 ** 32 - 1;

type StoredRow = RowModel['events'][number] & {
  ignorable: number | null;
  batch_op: string | null;
  batch_last_seq: number | null;
};

function readModel(db: Database.Database, id: string): RowModel {
  const session = db.prepare('SELECT key, header FROM sessions WHERE id = ?').get(id) as
    { key: number; header: string } | undefined;
  if (!session) throw new Error(`no session ${id}`);
  const rows = db
    .prepare(
      'SELECT seq, type, time, data, surface_op, source_event_seqs, ignorable, batch_op, batch_last_seq FROM events WHERE session_key = ? ORDER BY seq',
    )
    .all(session.key) as StoredRow[];
  const events = rows.map(({ batch_op: _op, batch_last_seq: _last, ...row }) => ({
    ...row,
    ignorable: row.ignorable === null ? null : row.ignorable === 1,
  }));
  const batches = rows
    .filter((row) => row.batch_op !== null)
    .map((row) => ({ op: row.batch_op!, first_seq: row.seq, last_seq: row.batch_last_seq! }));
  return { header: session.header, events, batches };
}

/** Writes the model as the session `id`'s rows; false (nothing written) when the format cannot hold it. */
function writeModel(db: Database.Database, id: string, model: RowModel, damage: Damage): boolean {
  const starts = new Map<number, RowModel['batches'][number]>();
  for (const batch of model.batches) {
    if (starts.has(batch.first_seq)) return false;
    starts.set(batch.first_seq, batch);
  }
  const seqs = new Set(model.events.map((e) => e.seq));
  // A batch whose rows are all gone from the end of the log leaves no trace here (its record is
  // on its first row): that is a cut at a batch boundary, drawn as such. A damage that must be
  // refused only because of such a batch cannot be written; one that still leaves a batch
  // claiming seqs past the last row can.
  const lastRow = Math.max(-1, ...model.events.map((e) => e.seq));
  const vanished = model.batches.some((batch) => !seqs.has(batch.first_seq) && batch.first_seq > lastRow);
  const claimed = model.batches.some((batch) => seqs.has(batch.first_seq) && batch.last_seq > lastRow);
  if (damage.mustRefuse && vanished && !claimed) return false;
  // A seq the tree cannot place keeps the place its row had: the one in 0..n it left free.
  const inRange = (seq: number) => Number.isInteger(seq) && seq >= 0 && seq <= MAX_SEQ;
  let free = 0;
  const place = (seq: number): number => {
    if (inRange(seq)) return seq;
    while (seqs.has(free)) free++;
    seqs.add(free);
    return free;
  };
  db.pragma('ignore_check_constraints = ON');
  try {
    db.transaction(() => {
      const key = Number(
        db.prepare('INSERT INTO sessions (id, header) VALUES (?, ?)').run(id, model.header).lastInsertRowid,
      );
      const event = db.prepare(
        'INSERT INTO events (id, session_key, seq, type, time, data, surface_op, source_event_seqs, ignorable, batch_op, batch_last_seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
      );
      for (const row of model.events) {
        const batch = starts.get(row.seq);
        event.run(
          key * 2 ** 32 + place(row.seq),
          key,
          row.seq,
          row.type,
          row.time,
          row.data,
          row.surface_op,
          row.source_event_seqs,
          row.ignorable === null ? null : row.ignorable ? 1 : 0,
          batch?.op ?? null,
          batch?.last_seq ?? null,
        );
      }
    })();
  } finally {
    db.pragma('ignore_check_constraints = OFF');
  }
  return true;
}

describe('corruption suite: sqlite', () => {
  it(`each of ${CASES} random row damages to sessions written by the real code is refused naming a damaged seq, or left a valid log with every undamaged batch; nothing is deleted`, async () => {
    const { dir, cleanup } = tempDir('sessionlog-corruption-sqlite-');
    const url = `sqlite:${join(dir, 'store.db')}`;
    const rng = seededRng(SEED);
    const anchorRng = seededRng(SEED ^ ANCHOR_STREAM);
    const outcomes = new OutcomeCounts();
    const cold = new ColdTally();
    const redrawn = new Map<string, number>();
    const raw = (): Database.Database => new Database(join(dir, 'store.db'));
    try {
      const setup = await openStore(url);
      const originals: Original[] = [];
      const generated: GeneratedBatch[][] = [];
      for (let p = 0; p < PRISTINE; p++) {
        generated.push(realisticBatches(rng, `pristine-${p}`));
        originals.push(originalOf(await writeBatches(setup, `pristine-${p}`, generated[p]!)));
      }
      await setup.close();
      const db = raw();
      const models = originals.map((_, p) => readModel(db, `pristine-${p}`));
      const store = await openStore(url);
      const scratchPlace = scratchDir('sessionlog-corruption-sqlite-scratch-');
      const scratchFile = join(scratchPlace.dir, 'scratch.db');
      const scratch = await openStore(`sqlite:${scratchFile}`);
      const scratchDb = new Database(scratchFile, { readonly: true });
      try {
        // Each checked case's checkpoint: the same session's first k original batches, written by the real code.
        const records = await anchoredCheckpoints(scratch, checkpointPlans(CASES, COLD_EVERY, generated, anchorRng), 1);
        for (let i = 0; i < CASES; i++) {
          const p = i % PRISTINE;
          const id = `case-${i}`;
          const header = models[p]!.header.replace(`"id":"pristine-${p}"`, `"id":"${id}"`);
          const record = records[i];
          if (record) {
            const last = record.anchor.seq;
            expect(snapshotOf(readModel(scratchDb, id)), `${id}: the scratch rows are not the case's prefix`).toBe(
              snapshotOf({
                header,
                events: models[p]!.events.filter((e) => e.seq <= last),
                batches: models[p]!.batches.filter((b) => b.first_seq <= last),
              }),
            );
            if (last === originals[p]!.events.length - 1) cold.wholeLog++;
          }
          let model: RowModel;
          let damage: ReturnType<typeof damageRows>;
          for (;;) {
            model = cloneModel(models[p]!);
            model.header = header;
            damage = damageRows(rng, model, originals[p]!);
            if (writeModel(db, id, model, damage)) break;
            redrawn.set(damage.kind, (redrawn.get(damage.kind) ?? 0) + 1);
          }
          if (record) await store.projectionCache.put(id, record);
          const outcome = await judge(
            store,
            id,
            originals[p]!,
            damage,
            {
              snapshot: () => snapshotOf(readModel(db, id)),
              keepsPrefix: (before, kept) => keepsRowPrefix(before, readModel(db, id), kept),
            },
            { id: 'pristine-0', events: originals[0]!.events.length },
            'sqlite',
            record && { readers: freshReaders(() => openStore(url)), record, tally: cold },
          );
          outcomes.add(damage.kind.split(':')[0]!, outcome);
        }
      } finally {
        await store.close();
        await scratch.close();
        scratchDb.close();
        scratchPlace.cleanup();
        db.close();
      }
    } finally {
      cleanup();
    }
    outcomes.print('sqlite', SEED);
    console.info(
      `[corruption sqlite] damages the format cannot hold, drawn again: ${JSON.stringify(Object.fromEntries(redrawn))}`,
    );
    cold.print('sqlite', SEED);
    expect(outcomes.total()).toBe(CASES);
    expect(cold.judged).toBe(Math.ceil(CASES / COLD_EVERY));
    expect(cold.anchored, 'no cold read took the anchored path').toBeGreaterThan(0);
    expect(outcomes.total('recovered')).toBe(0);
    expect(outcomes.total('refused')).toBeGreaterThan(CASES / 3);
  }, 300_000);
});
