import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openStore, type SessionStore } from '../../src/persistence/index.js';
import type { StoredEvent } from '../../src/session/index.js';
import { closedTurn, testHeader } from '../support/persistence-events.js';

let dir: string;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'sessionlog-open-'));
});

afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

describe('openStore', () => {
  it('opens sqlite:PATH, sqlite::memory: and jsonl:DIR', async () => {
    for (const [url, kind] of [
      [`sqlite:${join(dir, 'a.db')}`, 'sqlite'],
      ['sqlite::memory:', 'sqlite'],
      [`jsonl:${join(dir, 'logs')}`, 'jsonl'],
    ] as const) {
      const store = await openStore(url);
      expect(store.kind).toBe(kind);
      await store.close();
    }
  });

  it('refuses unknown URL forms and unreachable databases, naming the accepted forms without leaking a password', async () => {
    for (const url of ['postgres://user:secret@db/x', 'mysql://x', 'sqlite:', 'jsonl:', './file.db', '']) {
      const error = await openStore(url).then(
        () => undefined,
        (e: unknown) => e,
      );
      // A PostgreSQL server that cannot be reached is UNAVAILABLE; a URL that is not one of ours is INVALID_ARGUMENT.
      expect(error).toMatchObject({
        code: url.startsWith('postgres') ? 'UNAVAILABLE' : 'INVALID_ARGUMENT',
        message: expect.stringContaining('sqlite:PATH'),
      });
      expect((error as Error).message).not.toContain('secret');
    }
  });

  it('refuses a non-positive option value', async () => {
    await expect(openStore('sqlite::memory:', { pollIntervalMs: 0 })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: expect.stringMatching(/pollIntervalMs/),
    });
  });
});

const backends = [
  { name: 'sqlite', url: () => `sqlite:${join(dir, 'store.db')}` },
  { name: 'jsonl', url: () => `jsonl:${join(dir, 'logs')}` },
];

describe.each(backends)('$name watch in one process', ({ url }) => {
  let store: SessionStore;

  beforeEach(async () => {
    // A poll interval far longer than the test: only the in-process signal can wake the watcher.
    store = await openStore(url(), { pollIntervalMs: 600_000 });
    await store.create(testHeader('w1'));
  });

  afterEach(async () => {
    await store.close();
  });

  it('yields stored events from fromSeq, then an in-process append without waiting for a poll', async () => {
    await store.append('w1', closedTurn(1), { expectedSeq: 0, op: 't1' });
    const controller = new AbortController();
    const seen: number[] = [];
    const watching = (async () => {
      for await (const event of store.watch('w1', 4, { signal: controller.signal })) {
        seen.push(event.seq);
        if (event.seq === 4 || event.seq === 5) continue;
        if (event.seq === 11) controller.abort();
      }
    })();
    await new Promise((resolve) => setImmediate(resolve));
    await store.append('w1', closedTurn(2), { expectedSeq: 6, op: 't2' });
    await watching;
    expect(seen).toEqual([4, 5, 6, 7, 8, 9, 10, 11]);
  });

  it('ends when the store closes', async () => {
    const events: StoredEvent[] = [];
    const watching = (async () => {
      for await (const event of store.watch('w1', 0)) events.push(event);
    })();
    await new Promise((resolve) => setImmediate(resolve));
    await store.close();
    await watching;
    expect(events).toEqual([]);
  });

  it('rejects watching a session that does not exist', async () => {
    const iterator = store.watch('missing', 0)[Symbol.asyncIterator]();
    await expect(iterator.next()).rejects.toMatchObject({ code: 'SESSION_NOT_FOUND' });
  });
});
