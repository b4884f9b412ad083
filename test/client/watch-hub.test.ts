/**
 * Live tails share one store watch per session (WatchHub, behind SessionClient.follow and the
 * SSE route), over a real SQLite store: every follower still gets every event from its own
 * fromSeq exactly once and in order, whether it starts behind the shared cursor, consumes
 * slowly or joins mid-stream; the shared watch stops with its last follower; its errors reach
 * every follower.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client, Connection } from '@temporalio/client';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SessionClient } from '../../src/client/session-client.js';
import { WatchHub } from '../../src/client/watch-hub.js';
import { startGateway } from '../../src/gateway/index.js';
import { openSqliteStore } from '../../src/persistence/relational/sqlite/store.js';
import type { SessionStore, WatchOptions } from '../../src/persistence/store.js';
import type { StoredEvent } from '../../src/session/index.js';
import { closedTurn, testHeader } from '../support/persistence-events.js';
import { openSse, readEventsUntil } from '../gateway/http.js';

/** Counts the store's watches and reads, and can make a watch fail after some events. */
type Probe = { watchCalls: number; openWatches: number; reads: number; failAfter: number | undefined };

function instrument(store: SessionStore): { store: SessionStore; probe: Probe } {
  const probe: Probe = { watchCalls: 0, openWatches: 0, reads: 0, failAfter: undefined };
  const watch = (id: string, fromSeq: number, options?: WatchOptions): AsyncIterable<StoredEvent> => {
    probe.watchCalls += 1;
    const failAfter = probe.failAfter;
    return (async function* () {
      probe.openWatches += 1;
      let yielded = 0;
      try {
        for await (const event of store.watch(id, fromSeq, options)) {
          if (failAfter !== undefined && yielded >= failAfter) throw new Error('injected watch failure');
          yielded += 1;
          yield event;
        }
      } finally {
        probe.openWatches -= 1;
      }
    })();
  };
  const readFrom = (id: string, fromSeq: number, limit?: number): Promise<StoredEvent[]> => {
    probe.reads += 1;
    return store.readFrom(id, fromSeq, limit);
  };
  const wrapped = new Proxy(store, {
    get(target, property) {
      if (property === 'watch') return watch;
      if (property === 'readFrom') return readFrom;
      const value: unknown = Reflect.get(target, property, target);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
  return { store: wrapped, probe };
}

let dir: string;
let raw: SessionStore;
let connection: Connection;
let sessionCounter = 0;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'sessionlog-hub-'));
  raw = openSqliteStore(join(dir, 'sessions.db'));
  // Follows never reach Temporal; a lazy connection is never opened.
  connection = Connection.lazy({ address: '127.0.0.1:1' });
});
afterAll(async () => {
  await raw?.close();
  await connection?.close();
  rmSync(dir, { recursive: true, force: true });
});

const turnsAppended = new Map<string, number>();

async function newSession(turns: number): Promise<string> {
  const id = `hub-${sessionCounter++}`;
  await raw.create(testHeader(id));
  turnsAppended.set(id, 0);
  await appendTurns(id, turns);
  return id;
}

/** Appends `count` closed turns (6 events each), one batch per turn. */
async function appendTurns(id: string, count: number): Promise<void> {
  for (let i = 0; i < count; i++) {
    const turn = turnsAppended.get(id)! + 1;
    turnsAppended.set(id, turn);
    await raw.append(id, closedTurn(turn), { expectedSeq: (turn - 1) * 6, op: `${id}:turn-${turn}` });
  }
}

/** Follows until the event with seq `lastSeq` arrives, then leaves; the seqs received. */
async function collect(
  events: AsyncIterable<StoredEvent>,
  lastSeq: number,
  perEvent?: () => Promise<void>,
): Promise<number[]> {
  const seqs: number[] = [];
  for await (const event of events) {
    seqs.push(event.seq);
    if (perEvent) await perEvent();
    if (event.seq >= lastSeq) break;
  }
  return seqs;
}

const range = (from: number, to: number): number[] =>
  Array.from({ length: Math.max(0, to - from + 1) }, (_, i) => from + i);

describe('WatchHub', () => {
  it('serves 200 followers of one session through SessionClient.follow with one store watch, each from its own fromSeq, once and in order', async () => {
    const id = await newSession(2);
    const { store, probe } = instrument(raw);
    const client = new SessionClient({ temporal: new Client({ connection }), store });
    const followers = Array.from({ length: 200 }, (_, i) => {
      const fromSeq = i % 13;
      return { fromSeq, seqs: collect(client.follow(id, fromSeq), 29) };
    });
    await expect.poll(() => client.watchHub.followers).toBe(200);
    await appendTurns(id, 3);
    for (const follower of followers) expect(await follower.seqs).toEqual(range(follower.fromSeq, 29));
    expect(probe.watchCalls).toBe(1);
    await expect.poll(() => probe.openWatches).toBe(0);
    expect(client.watchHub.watchedSessions).toBe(0);
  });

  it('catches a follower that starts behind the shared cursor up from the store while appends go on, then joins: nothing missed or repeated', async () => {
    const id = await newSession(1);
    const { store, probe } = instrument(raw);
    const hub = new WatchHub(store, { pageSize: 4 });
    const last = 6 * 11 - 1;
    const live = collect(hub.follow(id, 6), last);
    await expect.poll(() => hub.followers).toBe(1);
    const late: Array<{ fromSeq: number; seqs: Promise<number[]> }> = [];
    for (let turn = 0; turn < 10; turn++) {
      await appendTurns(id, 1);
      if (turn === 3) late.push({ fromSeq: 0, seqs: collect(hub.follow(id, 0), last) });
      if (turn === 6) late.push({ fromSeq: 17, seqs: collect(hub.follow(id, 17), last) });
      await sleep(5);
    }
    expect(await live).toEqual(range(6, last));
    for (const follower of late) expect(await follower.seqs).toEqual(range(follower.fromSeq, last));
    expect(probe.watchCalls).toBe(1);
  });

  it('still gives a slow follower whose buffer overflows every event exactly once, in order', async () => {
    const id = await newSession(0);
    const { store, probe } = instrument(raw);
    const hub = new WatchHub(store, { maxBuffered: 3, pageSize: 5 });
    const last = 6 * 10 - 1;
    const slow = collect(hub.follow(id, 0), last, () => sleep(3));
    const fast = collect(hub.follow(id, 0), last);
    await expect.poll(() => hub.followers).toBe(2);
    const readsBefore = probe.reads;
    await appendTurns(id, 10);
    expect(await fast).toEqual(range(0, last));
    expect(await slow).toEqual(range(0, last));
    // The slow one fell behind its 3-event buffer and was served from the store.
    expect(probe.reads).toBeGreaterThan(readsBefore);
    expect(probe.watchCalls).toBe(1);
  });

  it('stops the shared watch when its last follower leaves (by break or by abort) and opens a new one for the next follower', async () => {
    const id = await newSession(1);
    const { store, probe } = instrument(raw);
    const hub = new WatchHub(store);
    const abort = new AbortController();
    const broken = collect(hub.follow(id, 0), 0);
    const aborted = (async () => {
      const seqs: number[] = [];
      for await (const event of hub.follow(id, 0, abort.signal)) seqs.push(event.seq);
      return seqs;
    })();
    expect(await broken).toEqual([0]);
    await expect.poll(() => probe.openWatches).toBe(1);
    await expect.poll(() => hub.followers).toBe(1);
    abort.abort();
    expect(await aborted).toEqual(range(0, 5));
    await expect.poll(() => probe.openWatches).toBe(0);
    expect(hub.watchedSessions).toBe(0);

    const again = collect(hub.follow(id, 5), 6);
    await expect.poll(() => hub.followers).toBe(1);
    await appendTurns(id, 1);
    expect(await again).toEqual([5, 6]);
    expect(probe.watchCalls).toBe(2);
  });

  it('passes an error of the shared watch to every follower of the session', async () => {
    const id = await newSession(1);
    const { store, probe } = instrument(raw);
    const hub = new WatchHub(store);
    probe.failAfter = 2;
    const outcomes = [0, 3, 6].map((fromSeq) =>
      collect(hub.follow(id, fromSeq), 100).then(
        () => 'ended',
        (error: Error) => error.message,
      ),
    );
    await expect.poll(() => hub.followers).toBe(3);
    await appendTurns(id, 1);
    expect(await Promise.all(outcomes)).toEqual([
      'injected watch failure',
      'injected watch failure',
      'injected watch failure',
    ]);
    expect(hub.watchedSessions).toBe(0);
    // The next follower gets a fresh watch.
    probe.failAfter = undefined;
    expect(await collect(hub.follow(id, 10), 11)).toEqual([10, 11]);
  });

  it('ends every follower quietly when the store closes', async () => {
    const own = openSqliteStore(join(dir, 'closing.db'));
    await own.create(testHeader('closing'));
    await own.append('closing', closedTurn(1), { expectedSeq: 0, op: 'closing:1' });
    const hub = new WatchHub(own);
    const followers = [0, 6].map((fromSeq) => collect(hub.follow('closing', fromSeq), 100));
    await expect.poll(() => hub.followers).toBe(2);
    await own.close();
    const [fromStart, atHead] = await Promise.all(followers);
    // The first may have been mid catch-up when the store closed: what it got is a prefix, and it ended without an error.
    expect(fromStart).toEqual(range(0, 5).slice(0, fromStart!.length));
    expect(atHead).toEqual([]);
  });

  it('gives every follower exactly its events, whatever the start points, join times, buffer size and consumer speed (property)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          initialTurns: fc.integer({ min: 0, max: 3 }),
          laterTurns: fc.integer({ min: 1, max: 5 }),
          maxBuffered: fc.integer({ min: 1, max: 8 }),
          pageSize: fc.integer({ min: 1, max: 10 }),
          followers: fc.array(
            fc.record({ start: fc.nat(), joinAfterTurn: fc.integer({ min: 0, max: 5 }), slow: fc.boolean() }),
            { minLength: 1, maxLength: 6 },
          ),
        }),
        async ({ initialTurns, laterTurns, maxBuffered, pageSize, followers }) => {
          const id = await newSession(initialTurns);
          const { store, probe } = instrument(raw);
          const hub = new WatchHub(store, { maxBuffered, pageSize });
          const last = 6 * (initialTurns + laterTurns) - 1;
          const running: Array<{ fromSeq: number; seqs: Promise<number[]> }> = [];
          const join = async (turnsSoFar: number): Promise<void> => {
            for (const f of followers.filter((f) => Math.min(f.joinAfterTurn, laterTurns - 1) === turnsSoFar)) {
              const fromSeq = f.start % (6 * (initialTurns + turnsSoFar) + 1);
              running.push({
                fromSeq,
                seqs: collect(hub.follow(id, fromSeq), last, f.slow ? () => sleep(1) : undefined),
              });
            }
          };
          for (let turn = 0; turn < laterTurns; turn++) {
            await join(turn);
            await appendTurns(id, 1);
          }
          for (const follower of running) expect(await follower.seqs).toEqual(range(follower.fromSeq, last));
          await expect.poll(() => probe.openWatches).toBe(0);
          expect(hub.watchedSessions).toBe(0);
        },
      ),
      { numRuns: 25 },
    );
  });
});

describe('SSE followers through the gateway', () => {
  it('share one store watch per session: 50 event streams of one session cost one watch and all carry the same events', async () => {
    const id = await newSession(1);
    const { store, probe } = instrument(raw);
    const client = new SessionClient({ temporal: new Client({ connection }), store });
    const gateway = await startGateway({ client, host: '127.0.0.1', port: 0, bodyLimitBytes: 1024 });
    try {
      const streams = await Promise.all(
        Array.from({ length: 50 }, (_, i) => openSse(`${gateway.url}/v1/sessions/${id}/events?from=${i % 7}`)),
      );
      await expect.poll(() => client.watchHub.followers).toBe(50);
      await appendTurns(id, 1);
      const received = await Promise.all(streams.map((sse) => readEventsUntil(sse, (event) => event.seq === 11)));
      for (const [i, events] of received.entries()) expect(events.map((e) => e.seq)).toEqual(range(i % 7, 11));
      for (const sse of streams) sse.close();
      expect(probe.watchCalls).toBe(1);
      await expect.poll(() => probe.openWatches).toBe(0);
    } finally {
      await gateway.close();
    }
  });
});
