/**
 * Two writer processes race for the same seq (DESIGN §1 principle 5, §4): in every round
 * exactly one append wins, the other gets SEQ_CONFLICT, and the log never forks.
 */
import { describe, expect, it } from 'vitest';
import { openStore } from '../../src/persistence/index.js';
import { SESSION_FORMAT_VERSION } from '../../src/session/index.js';
import { bundleScript, spawnLineChild, type LineChild } from '../support/spawn-ts.js';
import { BACKENDS, tempDir } from '../support/store-fixtures.js';

const ROUNDS = 60;
const CHILD = 'test/support/racing-writer-child.ts';
const WRITERS = ['w1', 'w2'] as const;

type Outcome = { ok: true; firstSeq: number; lastSeq: number; replayed: boolean } | { ok: false; code: string };

function parseResult(line: string): Outcome {
  const ok = /^RESULT \d+ OK (\d+) (\d+) ([01])$/.exec(line);
  if (ok) return { ok: true, firstSeq: Number(ok[1]), lastSeq: Number(ok[2]), replayed: ok[3] === '1' };
  const err = /^RESULT \d+ ERR (\S+)$/.exec(line);
  if (!err) throw new Error(`unparsable child line ${line}`);
  return { ok: false, code: err[1]! };
}

describe.each(BACKENDS)('two writer processes at the same expectedSeq: $name', (fixture) => {
  it(`in each of ${ROUNDS} synchronised rounds exactly one writer wins, the other gets SEQ_CONFLICT, and the log stays contiguous with each winner's batch once`, async () => {
    const { dir, cleanup } = tempDir(`sessionlog-race-${fixture.name}-`);
    const url = fixture.url(dir);
    const setup = await openStore(url);
    await setup.create({ version: SESSION_FORMAT_VERSION, id: 'race', createdAt: 1 });
    await setup.close();
    const bundle = await bundleScript(CHILD);
    const children: LineChild[] = WRITERS.map((writer) => spawnLineChild(bundle, [url, 'race', writer]));
    const winners: string[] = [];
    const winsBy = new Map<string, number>(WRITERS.map((w) => [w, 0]));
    try {
      await Promise.all(children.map((child) => child.waitFor(/^READY$/)));
      for (let round = 0; round < ROUNDS; round++) {
        const expectedSeq = 2 * round;
        const startAt = Date.now() + 25;
        for (const child of children) child.send(`ROUND ${round} ${expectedSeq} ${startAt}`);
        const pattern = new RegExp(`^RESULT ${round} `);
        const outcomes = (await Promise.all(children.map((child) => child.waitFor(pattern)))).map(parseResult);
        const won = outcomes.flatMap((o, i) => (o.ok ? [{ writer: WRITERS[i]!, outcome: o }] : []));
        const lost = outcomes.filter((o): o is Extract<Outcome, { ok: false }> => !o.ok);
        expect(won, `round ${round}: ${JSON.stringify(outcomes)}`).toHaveLength(1);
        expect(lost.map((o) => o.code)).toEqual(['SEQ_CONFLICT']);
        expect(won[0]!.outcome).toEqual({ ok: true, firstSeq: expectedSeq, lastSeq: expectedSeq + 1, replayed: false });
        winners.push(won[0]!.writer);
        winsBy.set(won[0]!.writer, winsBy.get(won[0]!.writer)! + 1);
      }
    } finally {
      for (const child of children) {
        child.process.stdin.end();
        child.process.kill('SIGKILL');
        await child.exited;
      }
    }
    const check = await openStore(url);
    try {
      const { events } = await check.load('race');
      expect(events.map((e) => e.seq)).toEqual([...Array(2 * ROUNDS).keys()]);
      const expectedOps = winners.flatMap((writer, round) => [`${writer}-r${round}`, `${writer}-r${round}`]);
      expect(events.map((e) => e.op)).toEqual(expectedOps);
      expect(events.map((e) => (e.data as { workflowId: string }).workflowId)).toEqual(expectedOps);
    } finally {
      await check.close();
      cleanup();
    }
    console.info(`[${fixture.name}] ${ROUNDS} rounds, wins: ${[...winsBy].map(([w, n]) => `${w}=${n}`).join(', ')}`);
  }, 180_000);
});
