import { appendFileSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  ALL_TENANTS,
  JSONL_FORMAT_VERSION,
  openJsonlStore,
  type JsonlSessionStore,
} from '../../src/persistence/index.js';
import { planSalvage } from '../../src/session/index.js';
import { closedTurn, openTurn, testHeader } from '../support/persistence-events.js';

let root: string;
const stores: JsonlSessionStore[] = [];

function open(): JsonlSessionStore {
  const store = openJsonlStore(root);
  stores.push(store);
  return store;
}

const logPath = (id: string): string => join(root, id, 'session.jsonl');
const lines = (id: string): string[] =>
  readFileSync(logPath(id), 'utf8')
    .split('\n')
    .filter((l) => l.length > 0);

beforeEach(() => {
  root = join(mkdtempSync(join(tmpdir(), 'sessionlog-jsonl-')), 'root');
});

afterEach(async () => {
  for (const store of stores.splice(0)) await store.close();
  rmSync(join(root, '..'), { recursive: true, force: true });
});

/** A session with one closed turn (seq 0-5) and an open second turn (seq 6-8). */
async function seeded(): Promise<void> {
  const store = open();
  await store.create(testHeader('s1'));
  await store.append('s1', closedTurn(1), { expectedSeq: 0, op: 'turn-1' });
  await store.append('s1', openTurn(2), { expectedSeq: 6, op: 'turn-2' });
}

describe('JSONL store: layout', () => {
  it('writes a header line then one event per line, with owner-only directory and file', async () => {
    await seeded();
    const [header, ...events] = lines('s1');
    expect(JSON.parse(header!)).toEqual({ type: 'session', format: JSONL_FORMAT_VERSION, ...testHeader('s1') });
    expect(
      events
        .map((l) => JSON.parse(l) as { seq: number; op: string; batchSize: number })
        .map((e) => [e.seq, e.op, e.batchSize]),
    ).toEqual([...[0, 1, 2, 3, 4, 5].map((seq) => [seq, 'turn-1', 6]), ...[6, 7, 8].map((seq) => [seq, 'turn-2', 3])]);
    expect(statSync(root).mode & 0o777).toBe(0o700);
    expect(statSync(join(root, 's1')).mode & 0o777).toBe(0o700);
    expect(statSync(logPath('s1')).mode & 0o777).toBe(0o600);
    expect(readdirSync(join(root, 's1'))).toEqual(['session.jsonl']);
  });

  it('lists sessions by reading header lines only', async () => {
    const store = open();
    await store.create(testHeader('b'));
    await store.create(testHeader('a', 5));
    expect((await store.list(ALL_TENANTS)).map((h) => [h.id, h.createdAt])).toEqual([
      ['a', 5],
      ['b', testHeader('b').createdAt],
    ]);
  });
});

describe('JSONL store: append', () => {
  it('replays a stored op after reopening (op index rebuilt on read) and leaves the file byte-identical', async () => {
    await seeded();
    const before = readFileSync(logPath('s1'));
    const fresh = open();
    expect(await fresh.append('s1', closedTurn(9), { expectedSeq: 42, op: 'turn-1' })).toEqual({
      firstSeq: 0,
      lastSeq: 5,
      replayed: true,
    });
    expect(readFileSync(logPath('s1')).equals(before)).toBe(true);
  });

  it('rejects a stale expectedSeq with SEQ_CONFLICT and leaves the file byte-identical', async () => {
    await seeded();
    const before = readFileSync(logPath('s1'));
    await expect(open().append('s1', closedTurn(3), { expectedSeq: 6, op: 'turn-3' })).rejects.toMatchObject({
      code: 'SEQ_CONFLICT',
    });
    expect(readFileSync(logPath('s1')).equals(before)).toBe(true);
  });

  it('sees appends made through another store instance before checking expectedSeq', async () => {
    await seeded();
    const a = open();
    const b = open();
    expect(await a.nextSeq('s1')).toBe(9);
    await b.append('s1', [{ type: 'step/end', time: 1, data: { turn: 2, step: 1 } }], { expectedSeq: 9, op: 'b' });
    await expect(
      a.append('s1', [{ type: 'turn/end', time: 1, data: { turn: 2, reason: { kind: 'completed' } } }], {
        expectedSeq: 9,
        op: 'a',
      }),
    ).rejects.toMatchObject({
      code: 'SEQ_CONFLICT',
    });
    expect(
      await a.append('s1', [{ type: 'turn/end', time: 1, data: { turn: 2, reason: { kind: 'completed' } } }], {
        expectedSeq: 10,
        op: 'a',
      }),
    ).toMatchObject({
      firstSeq: 10,
    });
  });

  it('breaks a lock file left by a dead process', async () => {
    await seeded();
    writeFileSync(
      join(root, 's1', 'session.lock'),
      JSON.stringify({ pid: 2 ** 22 + 12345, host: (await import('node:os')).hostname(), at: Date.now(), token: 'x' }),
    );
    expect(
      await open().append('s1', [{ type: 'step/end', time: 1, data: { turn: 2, step: 1 } }], {
        expectedSeq: 9,
        op: 'x',
      }),
    ).toMatchObject({ firstSeq: 9 });
    expect(readdirSync(join(root, 's1'))).not.toContain('session.lock');
  });
});

describe('JSONL store: lock', () => {
  it('a lock held by a live writer that keeps its heartbeat times out as UNAVAILABLE, saying what to check, and writes nothing', async () => {
    await seeded();
    const lock = join(root, 's1', 'session.lock');
    writeFileSync(
      lock,
      JSON.stringify({ pid: process.pid, host: (await import('node:os')).hostname(), token: 'held-by-this-test' }),
    );
    const before = readFileSync(logPath('s1'));
    const store = openJsonlStore(root, { lockTimeoutMs: 150, lockStaleMs: 60_000 });
    stores.push(store);
    await expect(
      store.append('s1', [{ type: 'step/end', time: 1, data: { turn: 2, step: 1 } }], { expectedSeq: 9, op: 'x' }),
    ).rejects.toMatchObject({
      code: 'UNAVAILABLE',
      message: expect.stringMatching(
        /timed out after 150 ms waiting for lock .*held-by-this-test.*check whether that process is still writing/,
      ),
    });
    expect(readFileSync(logPath('s1')).equals(before)).toBe(true);
    expect(readFileSync(lock, 'utf8')).toContain('held-by-this-test');
  });
});

describe('JSONL store: torn tail and corruption', () => {
  it('recovers a torn final line: inspect ignores it without writing, load truncates it and repairs the open turn', async () => {
    await seeded();
    appendFileSync(logPath('s1'), '{"seq":9,"type":"step/e');
    const torn = readFileSync(logPath('s1'));
    const store = open();
    const inspected = await store.inspect('s1');
    expect(inspected).toMatchObject({ truncated: 1, repaired: 2 });
    expect(inspected.events.map((e) => e.type).slice(9)).toEqual(['step/end', 'turn/end']);
    expect(await store.readFrom('s1', 0)).toHaveLength(9);
    expect(readFileSync(logPath('s1')).equals(torn)).toBe(true);

    const loaded = await store.load('s1');
    expect(loaded).toMatchObject({ truncated: 1, repaired: 2 });
    expect(loaded.events.slice(9).map((e) => [e.seq, e.type, e.op])).toEqual([
      [9, 'step/end', 'repair:8'],
      [10, 'turn/end', 'repair:8'],
    ]);
    expect(lines('s1')).toHaveLength(12);
    expect(readFileSync(logPath('s1'), 'utf8').endsWith('\n')).toBe(true);
    expect(await open().load('s1')).toMatchObject({ truncated: 0, repaired: 0, events: loaded.events });
  });

  it('refuses an unparsable line followed by a complete line as CORRUPT_LOG naming its seq, even with no later turn/end, and deletes nothing', async () => {
    await seeded();
    appendFileSync(
      logPath('s1'),
      'garbage\n{"seq":10,"type":"step/end","time":1,"data":{"turn":2,"step":1},"op":"z","batchSize":1}\n',
    );
    const before = readFileSync(logPath('s1'));
    await expect(open().load('s1')).rejects.toMatchObject({
      code: 'CORRUPT_LOG',
      message: expect.stringMatching(/seq 9\b/),
    });
    expect(readFileSync(logPath('s1')).equals(before)).toBe(true);
  });

  it('an unparsable final line that ends with a newline is damage, not a torn write: refused with CORRUPT_LOG naming its seq, and nothing is cut (issue 52)', async () => {
    await seeded();
    appendFileSync(logPath('s1'), '{"seq":9,"type":"step/e\u0000\n');
    const before = readFileSync(logPath('s1'));
    const store = open();
    for (const attempt of [() => store.readFrom('s1', 0), () => store.load('s1'), () => store.inspect('s1')])
      await expect(attempt()).rejects.toMatchObject({ code: 'CORRUPT_LOG', message: expect.stringMatching(/seq 9\b/) });
    expect(readFileSync(logPath('s1')).equals(before)).toBe(true);
  });

  it('the complete lines of an unfinished final batch are a torn write with it; a finished batch before it is kept', async () => {
    await seeded();
    const full = readFileSync(logPath('s1'));
    const store = open();
    // A three-event batch whose write stopped in its third line, then one stopped right after its second line.
    await store.append(
      's1',
      [
        { type: 'step/end', time: 1, data: { turn: 2, step: 1 } },
        { type: 'step/start', time: 1, data: { turn: 2, step: 2 } },
        { type: 'step/end', time: 1, data: { turn: 2, step: 2 } },
      ],
      {
        expectedSeq: 9,
        op: 'three',
      },
    );
    const three = readFileSync(logPath('s1')).subarray(full.length);
    const secondNewline = three.indexOf(10, three.indexOf(10) + 1);
    for (const cut of [three.length - 5, secondNewline + 1, 3]) {
      writeFileSync(logPath('s1'), Buffer.concat([full, three.subarray(0, cut)]));
      const fresh = open();
      expect(
        (await fresh.readFrom('s1', 0)).map((e) => e.seq),
        `cut ${cut}`,
      ).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8]);
      expect((await fresh.inspect('s1')).truncated, `cut ${cut}`).toBe(
        cut === 3 ? 1 : cut === secondNewline + 1 ? 2 : 3,
      );
    }
  });

  it('truncates a torn tail before appending, so the new batch lands at the valid next seq', async () => {
    await seeded();
    appendFileSync(logPath('s1'), '{"seq":9,');
    const store = open();
    expect(
      await store.append('s1', [{ type: 'step/end', time: 1, data: { turn: 2, step: 1 } }], {
        expectedSeq: 9,
        op: 'after-torn',
      }),
    ).toMatchObject({
      firstSeq: 9,
    });
    expect(lines('s1').map((l) => (JSON.parse(l) as { seq?: number }).seq)).toEqual([
      undefined,
      0,
      1,
      2,
      3,
      4,
      5,
      6,
      7,
      8,
      9,
    ]);
  });

  it('refuses damage before the last committed turn/end as CORRUPT_LOG (load, inspect and readFrom)', async () => {
    await seeded();
    const all = lines('s1');
    all[3] = '{"seq":2,"type":"step/start"'; // truncated record inside turn 1, which has a turn/end after it
    writeFileSync(logPath('s1'), `${all.join('\n')}\n`);
    const store = open();
    await expect(store.load('s1')).rejects.toMatchObject({ code: 'CORRUPT_LOG' });
    await expect(store.inspect('s1')).rejects.toMatchObject({ code: 'CORRUPT_LOG' });
    await expect(store.readFrom('s1', 0)).rejects.toMatchObject({ code: 'CORRUPT_LOG' });
  });

  it('a batch whose first line claims to be whole while the next line repeats its op is named, and the valid prefix and a salvage end before it', async () => {
    await seeded();
    // turn-2 is seqs 6-8 (batchSize 3); seq 6 now says its batch is 1 line long, so seq 7 repeats
    // the op of a batch that already ended: one of the two lines' framing is damaged.
    const all = lines('s1');
    all[7] = all[7]!.replace('"batchSize":3', '"batchSize":1');
    writeFileSync(logPath('s1'), all.join('\n') + '\n');
    const before = readFileSync(logPath('s1'));
    const store = open();
    const report = await store.scan('s1');
    expect(report.problem).toMatchObject({ seq: 6, torn: false, code: 'CORRUPT_LOG' });
    expect(report.problem!.reason).toContain('"turn-2" at seq 7 is already used by seqs 6..6');
    expect(report.events.map((e) => e.seq)).toEqual([0, 1, 2, 3, 4, 5]);
    await expect(store.load('s1')).rejects.toMatchObject({ code: 'CORRUPT_LOG' });
    // What a salvage copies (engine/seed.ts plans it from this report): seqs 0-5, none of turn-2.
    const salvage = planSalvage(report.header!, report.events, report.problem!, 'rescued', 2);
    expect(salvage.header).toMatchObject({ seedLength: 6, salvagedAt: { firstBadSeq: 6 } });
    expect(salvage.seed.filter((e) => e.type !== 'session/end-seed')).toHaveLength(6);
    expect(readFileSync(logPath('s1'))).toEqual(before);
  });

  it('refuses a seq gap before the last turn/end as CORRUPT_LOG', async () => {
    await seeded();
    const all = lines('s1');
    all.splice(2, 1); // remove seq 1
    writeFileSync(logPath('s1'), `${all.join('\n')}\n`);
    await expect(open().load('s1')).rejects.toMatchObject({ code: 'CORRUPT_LOG' });
  });

  it('refuses an unknown non-ignorable event type with a "newer version" message and loads an ignorable one', async () => {
    await seeded();
    appendFileSync(logPath('s1'), '{"seq":9,"type":"future/thing","time":1,"data":{},"op":"f","batchSize":1}\n');
    await expect(open().load('s1')).rejects.toMatchObject({
      code: 'UNSUPPORTED_FORMAT',
      message: expect.stringMatching(/newer version/),
    });
    const all = lines('s1');
    all[10] = '{"seq":9,"type":"future/thing","time":1,"data":{},"op":"f","ignorable":true,"batchSize":1}';
    writeFileSync(logPath('s1'), `${all.join('\n')}\n`);
    const loaded = await open().load('s1');
    expect(loaded.events[9]).toMatchObject({ type: 'future/thing', ignorable: true });
    expect(loaded.events.at(-1)).toMatchObject({ type: 'turn/end' });
  });

  it('refuses a header written by a newer format version as UNSUPPORTED_FORMAT', async () => {
    await seeded();
    const all = lines('s1');
    all[0] = JSON.stringify({ type: 'session', ...testHeader('s1'), version: 99 });
    writeFileSync(logPath('s1'), `${all.join('\n')}\n`);
    await expect(open().load('s1')).rejects.toMatchObject({
      code: 'UNSUPPORTED_FORMAT',
      message: expect.stringMatching(/newer version/),
    });
  });
});

describe('JSONL store: artifacts and projection cache files', () => {
  it('creates artifacts exclusively as 0600 files in a 0700 directory with unique names', async () => {
    const store = open();
    await store.create(testHeader('s1'));
    const a = await store.artifacts.put({ sessionId: 's1', name: '../../etc/passwd', content: 'one' });
    const b = await store.artifacts.put({ sessionId: 's1', name: '../../etc/passwd', content: 'two' });
    expect(a.locator).not.toBe(b.locator);
    expect(a.locator).toMatch(/^artifact:s1\/[A-Za-z0-9_-][A-Za-z0-9._-]*$/);
    const dir = join(root, 's1', 'artifacts');
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    for (const name of readdirSync(dir)) expect(statSync(join(dir, name)).mode & 0o777).toBe(0o600);
    expect(await store.artifacts.get('s1', b.locator)).toBe('two');
    await expect(store.artifacts.get('s1', 'artifact:s1/../session.jsonl')).rejects.toMatchObject({
      code: 'ARTIFACT_NOT_FOUND',
    });
    await expect(store.artifacts.get('s1', '/etc/passwd')).rejects.toMatchObject({ code: 'ARTIFACT_NOT_FOUND' });
  });

  it('replaces the projection cache file atomically with an owner-only file', async () => {
    const store = open();
    await store.create(testHeader('s1'));
    await store.projectionCache.put('s1', {
      identity: { createdAt: 1 },
      rows: { surface: { ver: 1, seq: -1, val: { nodes: [], replaceGeneration: 0 } } },
    });
    await store.projectionCache.put('s1', { identity: { createdAt: 2 }, rows: {} });
    expect(await store.projectionCache.get('s1')).toEqual({ identity: { createdAt: 2 }, rows: {} });
    expect(readdirSync(join(root, 's1')).sort()).toEqual(['projection-cache.json', 'session.jsonl']);
    expect(statSync(join(root, 's1', 'projection-cache.json')).mode & 0o777).toBe(0o600);
  });
});
