/**
 * SIGKILL crash test per backend (DESIGN §4, §10; dsh-spec §14 property 46). A child process
 * appends batches `b<n>` in a loop and prints each acknowledged batch; the parent kills it at a
 * random moment, starts the next child at the first unacknowledged batch (a retry that must be
 * idempotent), and after every kill loads the store and checks the log invariants:
 * contiguous seqs, every op stored once and whole, and every acknowledged batch present at its
 * acknowledged seqs.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { openStore } from '../../src/persistence/index.js';
import { SESSION_FORMAT_VERSION, type StoredEvent } from '../../src/session/index.js';
import { crashBatch } from '../support/crash-batches.js';
import { bundleScript, spawnLineChild, type LineChild } from '../support/spawn-ts.js';
import {
  BACKENDS,
  dropPostgresTestSchemas,
  postgresFixture,
  probePostgres,
  tempDir,
} from '../support/store-fixtures.js';

const KILLS = 60;
const CHILD = 'test/support/crash-append-child.ts';

type Ack = { n: number; firstSeq: number; lastSeq: number; replayed: boolean };

function parseAcks(lines: readonly string[]): Ack[] {
  const acks: Ack[] = [];
  for (const line of lines) {
    const match = /^ACK b(\d+) (\d+) (\d+) ([01])$/.exec(line);
    if (match)
      acks.push({
        n: Number(match[1]),
        firstSeq: Number(match[2]),
        lastSeq: Number(match[3]),
        replayed: match[4] === '1',
      });
  }
  return acks;
}

/** Checks the stored log against the batch contents and returns each stored batch's seqs. */
function checkLog(events: readonly StoredEvent[]): Map<number, { firstSeq: number; lastSeq: number }> {
  expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i));
  const batches = new Map<number, { firstSeq: number; lastSeq: number }>();
  let seq = 0;
  let n = 0;
  while (seq < events.length) {
    const op = `b${n}`;
    // Batches are stored in op order with no op skipped or repeated, each whole.
    expect(events[seq]!.op, `op at seq ${seq}`).toBe(op);
    const expected = crashBatch(n);
    const stored = events.slice(seq, seq + expected.length);
    expect(stored.length, `batch ${op} is stored whole`).toBe(expected.length);
    stored.forEach((event, i) => {
      expect(event.op).toBe(op);
      expect({ type: event.type, data: event.data }).toEqual({ type: expected[i]!.type, data: expected[i]!.data });
    });
    batches.set(n, { firstSeq: seq, lastSeq: seq + expected.length - 1 });
    seq += expected.length;
    n += 1;
  }
  return batches;
}

// PostgreSQL runs when a server answers (it does on the project's machines and in CI).
const postgres = await probePostgres();
if (!postgres.available) console.warn(`store-crash: PostgreSQL skipped: ${postgres.reason}`);
afterAll(() => dropPostgresTestSchemas());

describe.each([...BACKENDS, ...(postgres.available ? [postgresFixture] : [])])(
  'SIGKILL during appends: $name',
  (fixture) => {
    it(`after each of ${KILLS} kills at random moments the log is contiguous, every op is stored once and whole, and every acknowledged batch is at its acknowledged seqs`, async () => {
      const { dir, cleanup } = tempDir(`sessionlog-crash-${fixture.name}-`);
      const url = fixture.url(dir);
      const setup = await openStore(url);
      await setup.create({ version: SESSION_FORMAT_VERSION, id: 'crash', createdAt: 1 });
      await setup.close();

      const bundle = await bundleScript(CHILD);
      // The next child starts while the parent checks the log, not while a child is appending,
      // so the appending child has the CPU to itself.
      const pool: LineChild[] = [];
      const refill = (): void => {
        if (pool.length === 0) pool.push(spawnLineChild(bundle, [url, 'crash']));
      };
      const acknowledged = new Map<number, Ack>();
      let nextBatch = 0;
      let replays = 0;
      let previousLength = 0;
      let tornRecords = 0;
      try {
        refill();
        for (let kill = 0; kill < KILLS; kill++) {
          const child = pool.shift()!;
          await child.waitFor(/^READY$/);
          child.send(`GO ${nextBatch}`);
          // Half the kills land 5–80 ms after the start signal (often inside the first append);
          // the other half 0–40 ms after the first acknowledgement, so the run makes progress
          // however slow the machine is.
          if (kill % 2 === 1) await child.waitFor(/^ACK /);
          const delay = kill % 2 === 1 ? Math.floor(Math.random() * 41) : 5 + Math.floor(Math.random() * 76);
          await new Promise((resolve) => setTimeout(resolve, delay));
          child.process.kill('SIGKILL');
          const exit = await child.exited;
          if (kill + 1 < KILLS) refill();
          // A child that died on its own (an exception) is a failure, not a crash we caused.
          expect(exit.signal, `child exited by itself: ${child.stderr()}`).toBe('SIGKILL');

          for (const ack of parseAcks(child.lines)) {
            const earlier = acknowledged.get(ack.n);
            if (earlier) expect([ack.firstSeq, ack.lastSeq]).toEqual([earlier.firstSeq, earlier.lastSeq]);
            if (ack.replayed) replays += 1;
            acknowledged.set(ack.n, ack);
            nextBatch = Math.max(nextBatch, ack.n + 1);
          }

          const check = await openStore(url);
          try {
            const loaded = await check.load('crash');
            expect(loaded.repaired).toBe(0);
            tornRecords += loaded.truncated;
            const stored = checkLog(loaded.events);
            for (const [n, ack] of acknowledged) {
              expect(stored.get(n), `acknowledged batch b${n}`).toEqual({
                firstSeq: ack.firstSeq,
                lastSeq: ack.lastSeq,
              });
            }
            // Durable: nothing acknowledged or stored before is ever lost.
            expect(loaded.events.length).toBeGreaterThanOrEqual(previousLength);
            previousLength = loaded.events.length;
          } finally {
            await check.close();
          }
        }
      } finally {
        for (const child of pool.splice(0)) {
          child.process.kill('SIGKILL');
          await child.exited;
        }
        cleanup();
      }
      // The run exercised the property: batches were acknowledged across restarts.
      expect(acknowledged.size).toBeGreaterThanOrEqual(KILLS / 2);
      expect(nextBatch).toBe(acknowledged.size);
      console.info(
        `[${fixture.name}] ${KILLS} kills, ${acknowledged.size} batches acknowledged, ${replays} acknowledged as replayed, ${tornRecords} torn records dropped, ${previousLength} events stored`,
      );
    }, 300_000);
  },
);
