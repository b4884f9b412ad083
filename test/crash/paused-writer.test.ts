/**
 * Two writers can never both succeed (DESIGN §1 principle 5, issue 8): a writer process stopped
 * with SIGSTOP in the middle of its durable write, while it holds the backend's lock, stays
 * stopped past every lock and heartbeat timeout while a second writer proceeds; then it is
 * resumed with SIGCONT. At each seq exactly one of them succeeded, and every batch that reported
 * success is in the log, which stays valid.
 *
 * - JSONL: the paused writer's lock goes stale and is broken; the second writer moves the log to
 *   a new inode before writing, so the first one's late write is fenced off (SEQ_CONFLICT) — or,
 *   when it had already written its whole batch, the second finds that batch and gets
 *   SEQ_CONFLICT itself.
 * - SQLite: the paused writer keeps SQLite's write lock; the second writer gives up after
 *   busyTimeoutMs with UNAVAILABLE, and the first commits when resumed.
 * - PostgreSQL: the server ends the paused writer's connection idle in its transaction after
 *   lockStaleMs, which rolls it back and frees the session row; the second writer commits, the
 *   resumed first one fails with UNAVAILABLE.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { openStore, type StoreOptions } from '../../src/persistence/index.js';
import { SESSION_FORMAT_VERSION, type StoredEvent } from '../../src/session/index.js';
import { bundleScript, spawnLineChild, type LineChild } from '../support/spawn-ts.js';
import {
  BACKENDS,
  dropPostgresTestSchemas,
  postgresFixture,
  probePostgres,
  tempDir,
  type BackendFixture,
} from '../support/store-fixtures.js';

const CHILD = 'test/support/paused-writer-child.ts';

const postgres = await probePostgres();
if (!postgres.available) console.warn(`paused-writer: PostgreSQL skipped: ${postgres.reason}`);
afterAll(() => dropPostgresTestSchemas());

/** Short lock and heartbeat limits so the test waits little; the lock waits themselves are long. */
const OPTIONS: StoreOptions = { lockStaleMs: 300, lockTimeoutMs: 60_000, busyTimeoutMs: 300, pollIntervalMs: 20 };

type Outcome = { ok: true; firstSeq: number; lastSeq: number } | { ok: false; code: string };

/** Sends an append; resolves once it is under way (for a pausing one: once it stopped), with its eventual outcome. */
async function appendVia(
  child: LineChild,
  expectedSeq: number,
  op: string,
  pause: 'none' | 'write' | 'sync',
): Promise<{ result: Promise<Outcome> }> {
  const seen = child.lines.length;
  child.send(`APPEND ${expectedSeq} ${op} ${pause}`);
  const result = (async (): Promise<Outcome> => {
    const line = await child.waitFor(new RegExp(`^RESULT ${op} `));
    const ok = /^RESULT \S+ OK (\d+) (\d+) [01]$/.exec(line);
    if (ok) return { ok: true, firstSeq: Number(ok[1]), lastSeq: Number(ok[2]) };
    return { ok: false, code: /^RESULT \S+ ERR (\S+)$/.exec(line)![1]! };
  })();
  if (pause !== 'none') {
    // Wait for this append's own PAUSED line.
    for (let i = 0; i < 10_000 && !child.lines.slice(seen).includes('PAUSED'); i++) {
      const done = await Promise.race([
        result.then(() => true),
        new Promise<boolean>((resolve) => setTimeout(() => resolve(false), 5)),
      ]);
      if (done) throw new Error(`${op} finished without pausing: ${await result.then((r) => JSON.stringify(r))}`);
    }
    expect(child.lines.slice(seen)).toContain('PAUSED');
  }
  // Wrapped: an async function returning a bare promise would wait for it.
  return { result };
}

/** The stored log must be valid and hold exactly the batches that reported success, each at its seqs. */
async function expectLogOf(url: string, successes: ReadonlyArray<{ op: string; outcome: Outcome }>): Promise<void> {
  const store = await openStore(url);
  try {
    const report = await store.scan('s');
    expect(report.problem).toBeUndefined();
    const events: readonly StoredEvent[] = report.events;
    const stored = new Map<string, number[]>();
    for (const event of events) stored.set(event.op!, [...(stored.get(event.op!) ?? []), event.seq]);
    const won = successes.filter((s) => s.outcome.ok);
    expect([...stored.keys()].sort()).toEqual(won.map((s) => s.op).sort());
    for (const { op, outcome } of won) {
      const { firstSeq, lastSeq } = outcome as Extract<Outcome, { ok: true }>;
      expect(stored.get(op), op).toEqual(Array.from({ length: lastSeq - firstSeq + 1 }, (_, i) => firstSeq + i));
    }
  } finally {
    await store.close();
  }
}

type Scenario = { pause: 'write' | 'sync'; first: Outcome['ok']; secondCode?: string; firstCode?: string };

/** What each backend does when the first writer is paused at each point. */
const SCENARIOS: Record<BackendFixture['name'], Scenario[]> = {
  // Paused before its bytes reached the file: fenced off. Paused after writing them (before the
  // fsync): the second writer reads the batch as committed and conflicts; the first confirms it.
  jsonl: [
    { pause: 'write', first: false, firstCode: 'SEQ_CONFLICT' },
    { pause: 'sync', first: true, secondCode: 'SEQ_CONFLICT' },
  ],
  sqlite: [{ pause: 'write', first: true, secondCode: 'UNAVAILABLE' }],
  postgres: [{ pause: 'write', first: false, firstCode: 'UNAVAILABLE' }],
};

describe.each([...BACKENDS, ...(postgres.available ? [postgresFixture] : [])])(
  'a writer paused with SIGSTOP inside its write: $name',
  (fixture) => {
    it.each(SCENARIOS[fixture.name])(
      'paused at its $pause past every lock timeout while a second writer proceeds, then resumed: one of them succeeded at those seqs and every success is in the log',
      async (scenario) => {
        const { dir, cleanup } = tempDir(`sessionlog-paused-${fixture.name}-`);
        const url = fixture.url(dir);
        const setup = await openStore(url);
        await setup.create({ version: SESSION_FORMAT_VERSION, id: 's', createdAt: 1 });
        await setup.append('s', [{ type: 'session/run', time: 1, data: { workflowId: 'w', runId: 'r' } }], {
          expectedSeq: 0,
          op: 'before',
        });
        await setup.close();
        const bundle = await bundleScript(CHILD);
        const [first, second] = [
          spawnLineChild(bundle, [url, 's', JSON.stringify(OPTIONS)]),
          spawnLineChild(bundle, [url, 's', JSON.stringify(OPTIONS)]),
        ];
        const outcomes: Array<{ op: string; outcome: Outcome }> = [
          { op: 'before', outcome: { ok: true, firstSeq: 0, lastSeq: 0 } },
        ];
        try {
          await Promise.all([first.waitFor(/^READY$/), second.waitFor(/^READY$/)]);
          const { result: firstResult } = await appendVia(first, 1, 'first', scenario.pause);
          // The first writer is stopped inside its write; the second one goes past its lock.
          const secondOutcome = await (await appendVia(second, 1, 'second', 'none')).result;
          first.process.kill('SIGCONT');
          const firstOutcome = await firstResult;
          outcomes.push({ op: 'first', outcome: firstOutcome }, { op: 'second', outcome: secondOutcome });
          expect([firstOutcome.ok, secondOutcome.ok], JSON.stringify(outcomes)).toEqual([
            scenario.first,
            !scenario.first,
          ]);
          if (scenario.firstCode) expect(firstOutcome).toEqual({ ok: false, code: scenario.firstCode });
          if (scenario.secondCode) expect(secondOutcome).toEqual({ ok: false, code: scenario.secondCode });
          const winner = (firstOutcome.ok ? firstOutcome : secondOutcome) as Extract<Outcome, { ok: true }>;
          expect(winner).toEqual({ ok: true, firstSeq: 1, lastSeq: 2 });
          // Both writers carry on normally afterwards: each append lands once, at the head.
          const after = await (await appendVia(first, 3, 'first-after', 'none')).result;
          const afterSecond = await (await appendVia(second, 5, 'second-after', 'none')).result;
          outcomes.push({ op: 'first-after', outcome: after }, { op: 'second-after', outcome: afterSecond });
          expect([after, afterSecond]).toEqual([
            { ok: true, firstSeq: 3, lastSeq: 4 },
            { ok: true, firstSeq: 5, lastSeq: 6 },
          ]);
        } finally {
          for (const child of [first, second]) {
            child.process.kill('SIGCONT');
            child.process.stdin.end();
            child.process.kill('SIGKILL');
            await child.exited;
          }
        }
        await expectLogOf(url, outcomes);
        cleanup();
      },
      120_000,
    );
  },
);
