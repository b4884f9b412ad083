import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  CheckpointSchedule,
  checkpointDue,
  defaultProjectionRegistry,
  openStore,
  readDerivedHistory,
  writeProjectionCheckpoint,
  type SessionStore,
} from '../../src/persistence/index.js';
import { Session, type NewEvent, type ProjectionRows } from '../../src/session/index.js';
import { closedTurn, testHeader, userMessage } from '../support/persistence-events.js';

let dir: string;
let store: SessionStore;

const backends = [
  { name: 'sqlite', url: () => `sqlite:${join(dir, 'store.db')}` },
  { name: 'jsonl', url: () => `jsonl:${join(dir, 'logs')}` },
];

/** Two closed turns, then a compaction-style replace of the first two surface nodes. */
const history: NewEvent[][] = [
  closedTurn(1),
  closedTurn(2),
  [
    {
      ...userMessage('c1', 'summary of turn 1'),
      surfaceOp: { op: 'replace', start: 1, end: 3 },
      sourceEventSeqs: [1, 3],
    },
  ],
  closedTurn(3),
];

async function appendAll(id: string, batches: NewEvent[][]): Promise<void> {
  for (const [i, batch] of batches.entries()) {
    const expectedSeq = await store.nextSeq(id);
    await store.append(id, batch, { expectedSeq, op: `${id}-at-${expectedSeq}-${i}` });
  }
}

/** The oracle: derive messages from a full in-memory replay of the stored log. */
async function fullFold(id: string) {
  return Session.fromEvents(await store.header(id), await store.readFrom(id, 0)).deriveMessages();
}

describe.each(backends)('derived history through the $name projection cache', ({ url }) => {
  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sessionlog-dh-'));
    store = await openStore(url());
    await store.create(testHeader('s1'));
  });

  afterEach(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('folds from seq 0 without a checkpoint, then restores from the written checkpoint plus the tail', async () => {
    await appendAll('s1', history.slice(0, 2));
    const cold = await readDerivedHistory(store, 's1');
    expect(cold).toMatchObject({ fromCache: false, asOfSeq: 11 });
    expect(cold.messages).toEqual(await fullFold('s1'));
    expect((await store.projectionCache.get('s1'))?.rows.surface?.seq).toBe(11);

    await appendAll('s1', history.slice(2));
    const warm = await readDerivedHistory(store, 's1');
    expect(warm).toMatchObject({ fromCache: true, asOfSeq: 18 });
    expect(warm.messages).toEqual(await fullFold('s1'));
    expect(warm.messages.map((m) => m.id)).toEqual(['c1', 'u2', 'a2', 'u3', 'a3']);
  });

  it('ignores a checkpoint bound to another session identity (foreign) and returns the full-fold answer', async () => {
    await appendAll('s1', history);
    await store.projectionCache.put('s1', {
      identity: { createdAt: 12345 },
      rows: { surface: { ver: 1, seq: 18, val: { nodes: [], replaceGeneration: 0 } } },
    });
    const result = await readDerivedHistory(store, 's1');
    expect(result.fromCache).toBe(false);
    expect(result.messages).toEqual(await fullFold('s1'));
    expect((await store.projectionCache.get('s1'))?.identity.createdAt).toBe(testHeader('s1').createdAt);
  });

  it('falls back to a full fold when the checkpoint is ahead of the log (stale after truncation)', async () => {
    await appendAll('s1', history.slice(0, 1));
    await store.projectionCache.put('s1', {
      identity: { createdAt: testHeader('s1').createdAt },
      rows: { surface: { ver: 1, seq: 40, val: { nodes: [], replaceGeneration: 0 } } },
    });
    const result = await readDerivedHistory(store, 's1');
    expect(result).toMatchObject({ fromCache: false, asOfSeq: 5 });
    expect(result.messages).toEqual(await fullFold('s1'));
  });

  it('falls back to a full fold when the checkpoint state is broken or of another projection version', async () => {
    await appendAll('s1', history);
    const identity = { createdAt: testHeader('s1').createdAt };
    const cases: ProjectionRows[] = [
      { surface: { ver: 1, seq: 12, val: { nodes: 'not a list' } } },
      { surface: { ver: 999, seq: 12, val: { nodes: [], replaceGeneration: 0 } } },
      // Schema-valid but inconsistent with the log: the replace at seq 12 names nodes it lacks.
      { surface: { ver: 1, seq: 11, val: { nodes: [{ seq: 77, message: null }], replaceGeneration: 0 } } },
    ];
    for (const rows of cases) {
      await store.projectionCache.put('s1', { identity, rows });
      const result = await readDerivedHistory(store, 's1');
      expect(result.messages).toEqual(await fullFold('s1'));
    }
  });

  it('still answers when the cache write fails (fail-soft)', async () => {
    await appendAll('s1', history);
    const problems: unknown[] = [];
    const failingCache = {
      get: () => store.projectionCache.get('s1'),
      put: () => Promise.reject(new Error('disk full')),
    };
    const wrapped = Object.create(store, { projectionCache: { value: failingCache } }) as SessionStore;
    const result = await readDerivedHistory(wrapped, 's1', defaultProjectionRegistry(), {
      onCacheProblem: (p) => problems.push(p),
    });
    expect(result.messages).toEqual(await fullFold('s1'));
    expect(problems).toEqual([expect.objectContaining({ message: 'disk full' })]);
  });

  it('writeProjectionCheckpoint stores rows at the log head', async () => {
    await appendAll('s1', history);
    expect(await writeProjectionCheckpoint(store, 's1')).toEqual({ asOfSeq: 18 });
    expect((await store.projectionCache.get('s1'))?.rows.surface?.seq).toBe(18);
  });
});

describe('when a worker refreshes the checkpoint', () => {
  it('waits for minEvents and for the ratio of the log, so each write is paid for by the events since the last one', () => {
    const policy = { minEvents: 100, ratio: 0.25 };
    expect(checkpointDue(-1, 98, policy)).toBe(false);
    expect(checkpointDue(-1, 99, policy)).toBe(true);
    // At seq 1000 a quarter of the log (250 events) must have come since the last checkpoint.
    expect(checkpointDue(800, 1000, policy)).toBe(false);
    expect(checkpointDue(749, 1000, policy)).toBe(true);
    // Over a 300-turn conversation of 16 events a turn: writes grow geometrically apart.
    const schedule = new CheckpointSchedule(policy);
    const writes: number[] = [];
    for (let head = 15; head < 300 * 16; head += 16) {
      if (schedule.due('s', head)) {
        schedule.wrote('s', head);
        writes.push(head);
      }
    }
    expect(writes.length).toBeGreaterThan(3);
    expect(writes.length).toBeLessThan(20);
    for (let i = 1; i < writes.length; i++)
      expect(writes[i]! - writes[i - 1]!).toBeGreaterThanOrEqual(Math.max(100, 0.25 * (writes[i]! + 1)));
    // The tail a cold read folds stays within the policy.
    expect(300 * 16 - 1 - writes.at(-1)!).toBeLessThan(Math.max(100, 0.25 * 300 * 16) + 16);
  });

  it('refuses a policy that cannot work, naming the field', () => {
    expect(() => new CheckpointSchedule({ minEvents: 0, ratio: 0.25 })).toThrow(/minEvents/);
    expect(() => new CheckpointSchedule({ minEvents: 10, ratio: 2 })).toThrow(/ratio/);
  });
});
