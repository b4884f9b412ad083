/**
 * Corruption suite, SQLite backend (DESIGN §4.1, §10): sessions written through the real append
 * path are copied row for row and damaged at the row level (test/support/corruption-rows.ts);
 * each outcome is judged by the oracle in test/support/corruption.ts. A transaction commits
 * whole, so nothing may ever be recovered by truncation here: damage is refused, or it left a
 * valid log. Seeded (SESSIONLOG_CORRUPTION_SEED reproduces a run).
 */
import { join } from 'node:path';
import Database from 'better-sqlite3';
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
import { tempDir } from '../support/store-fixtures.js';

const CASES = 330;
const PRISTINE = 4;
const SEED = corruptionSeed(0x5a_11_7e_01);

function readModel(db: Database.Database, id: string): RowModel {
  const session = db.prepare('SELECT key, header FROM sessions WHERE id = ?').get(id) as
    { key: number; header: string } | undefined;
  if (!session) throw new Error(`no session ${id}`);
  const events = (
    db
      .prepare(
        'SELECT seq, type, time, data, surface_op, source_event_seqs, ignorable FROM events WHERE session_key = ? ORDER BY seq',
      )
      .all(session.key) as Array<RowModel['events'][number] & { ignorable: number | null }>
  ).map((row) => ({ ...row, ignorable: row.ignorable === null ? null : row.ignorable === 1 }));
  const batches = db
    .prepare('SELECT op, first_seq, last_seq FROM batches WHERE session_key = ? ORDER BY first_seq')
    .all(session.key) as RowModel['batches'];
  return { header: session.header, events, batches };
}

function writeModel(db: Database.Database, id: string, model: RowModel): void {
  db.transaction(() => {
    const key = db.prepare('INSERT INTO sessions (id, header) VALUES (?, ?)').run(id, model.header).lastInsertRowid;
    const event = db.prepare(
      'INSERT INTO events (session_key, seq, type, time, data, surface_op, source_event_seqs, ignorable) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
    );
    for (const row of model.events)
      event.run(
        key,
        row.seq,
        row.type,
        row.time,
        row.data,
        row.surface_op,
        row.source_event_seqs,
        row.ignorable === null ? null : row.ignorable ? 1 : 0,
      );
    const batch = db.prepare('INSERT INTO batches (session_key, op, first_seq, last_seq) VALUES (?, ?, ?, ?)');
    for (const row of model.batches) batch.run(key, row.op, row.first_seq, row.last_seq);
  })();
}

describe('corruption suite: sqlite', () => {
  it(`each of ${CASES} random row damages to sessions written by the real code is refused naming a damaged seq, or left a valid log with every undamaged batch; nothing is deleted`, async () => {
    const { dir, cleanup } = tempDir('sessionlog-corruption-sqlite-');
    const url = `sqlite:${join(dir, 'store.db')}`;
    const rng = seededRng(SEED);
    const outcomes = new OutcomeCounts();
    const raw = (): Database.Database => new Database(join(dir, 'store.db'));
    try {
      const setup = await openStore(url);
      const originals: Original[] = [];
      for (let p = 0; p < PRISTINE; p++)
        originals.push(originalOf(await writeBatches(setup, `pristine-${p}`, realisticBatches(rng, `pristine-${p}`))));
      await setup.close();
      const db = raw();
      const models = originals.map((_, p) => readModel(db, `pristine-${p}`));
      const store = await openStore(url);
      try {
        for (let i = 0; i < CASES; i++) {
          const p = i % PRISTINE;
          const id = `case-${i}`;
          const model = cloneModel(models[p]!);
          model.header = model.header.replace(`"id":"pristine-${p}"`, `"id":"${id}"`);
          const damage = damageRows(rng, model, originals[p]!);
          writeModel(db, id, model);
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
          );
          outcomes.add(damage.kind.split(':')[0]!, outcome);
        }
      } finally {
        await store.close();
        db.close();
      }
    } finally {
      cleanup();
    }
    outcomes.print('sqlite', SEED);
    expect(outcomes.total()).toBe(CASES);
    expect(outcomes.total('recovered')).toBe(0);
    expect(outcomes.total('refused')).toBeGreaterThan(CASES / 3);
  }, 300_000);
});
