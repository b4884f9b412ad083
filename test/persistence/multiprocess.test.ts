/**
 * Behaviour across processes on one store: live tail of another process's appends, the
 * write lock deciding a race for the same expectedSeq, and one session key for processes that
 * make it at once.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openStore, type SessionStore } from '../../src/persistence/index.js';
import type { StoredEvent } from '../../src/session/index.js';
import { lastJsonLine, runTsScript } from '../support/child-process.js';
import { testHeader } from '../support/persistence-events.js';

const CHILD = 'test/support/append-child.ts';
const KEY_CHILD = 'test/support/session-key-child.ts';
type ChildResult =
  { ok: true; firstSeq: number; lastSeq: number; replayed: boolean } | { ok: false; code: string; message: string };

let dir: string;
const opened: SessionStore[] = [];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'sessionlog-mp-'));
});

afterEach(async () => {
  for (const store of opened.splice(0)) await store.close();
  rmSync(dir, { recursive: true, force: true });
});

const backends = [
  { name: 'sqlite', url: () => `sqlite:${join(dir, 'store.db')}` },
  { name: 'jsonl', url: () => `jsonl:${join(dir, 'logs')}` },
];

describe.each(backends)('$name store across processes', ({ url }) => {
  async function open(): Promise<SessionStore> {
    const store = await openStore(url(), { pollIntervalMs: 20 });
    opened.push(store);
    return store;
  }

  it('watch yields events appended by a child process', async () => {
    const store = await open();
    await store.create(testHeader('w1'));
    await store.append('w1', [{ type: 'session/run', time: 1, data: { workflowId: 'wf', runId: 'r0' } }], {
      expectedSeq: 0,
      op: 'parent',
    });
    const controller = new AbortController();
    const seen: StoredEvent[] = [];
    const watching = (async () => {
      for await (const event of store.watch('w1', 0, { signal: controller.signal })) {
        seen.push(event);
        if (seen.length === 4) controller.abort();
      }
    })();
    const child = await runTsScript(CHILD, [url(), 'w1', '1', 'child', '3']);
    expect(lastJsonLine<ChildResult>(child)).toEqual({ ok: true, firstSeq: 1, lastSeq: 3, replayed: false });
    await watching;
    expect(seen.map((e) => [e.seq, e.op])).toEqual([
      [0, 'parent'],
      [1, 'child'],
      [2, 'child'],
      [3, 'child'],
    ]);
  });

  it('lets exactly one of two processes appending at the same expectedSeq win', async () => {
    const store = await open();
    await store.create(testHeader('r1'));
    for (let round = 0; round < 2; round++) {
      const expectedSeq = await store.nextSeq('r1');
      const startAt = String(Date.now() + 1500);
      const outcomes = await Promise.all(
        ['a', 'b'].map((who) =>
          runTsScript(CHILD, [url(), 'r1', String(expectedSeq), `round-${round}-${who}`, '2', startAt]),
        ),
      );
      const results = outcomes.map((o) => lastJsonLine<ChildResult>(o));
      expect(results.filter((r) => r.ok)).toHaveLength(1);
      expect(results.filter((r) => !r.ok)).toEqual([expect.objectContaining({ ok: false, code: 'SEQ_CONFLICT' })]);
      expect(await store.nextSeq('r1')).toBe(expectedSeq + 2);
    }
    const events = await store.readFrom('r1', 0);
    expect(events.map((e) => e.seq)).toEqual([0, 1, 2, 3]);
  });

  it('processes obtaining a new session key at once all get the one key stored first', async () => {
    const store = await open();
    const startAt = String(Date.now() + 1500);
    const outcomes = await Promise.all(['a', 'b', 'c'].map(() => runTsScript(KEY_CHILD, [url(), 'k1', startAt])));
    const results = outcomes.map((o) => lastJsonLine<{ ok: boolean; id?: string; key?: string }>(o));
    const stored = await store.sessionKeys.find('k1');
    expect(stored).toBeDefined();
    const expected = { ok: true, id: stored!.id, key: stored!.key.toString('hex') };
    expect(results).toEqual([expected, expected, expected]);
  });
});
