/**
 * Fork and seed (dsh-spec §8.7, §14 properties 12 and 16, adapted to DESIGN §3: the seed is
 * followed by one `session/end-seed`, planned by `planFork`).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  SESSION_FORMAT_VERSION,
  Session,
  interruptedTurnClosers,
  isSessionlogError,
  planFork,
  type StoredEvent,
} from '../../src/session/index.js';
import { ANY_REPLACES, buildLog, programArb, testHeader } from '../support/log-gen.js';

/** Independent oracle: is the most recent turn marker at or before `boundary` a turn/start? */
function insideTurn(events: readonly StoredEvent[], boundary: number): boolean {
  for (let i = boundary; i >= 0; i--) {
    if (events[i]!.type === 'turn/end') return false;
    if (events[i]!.type === 'turn/start') return true;
  }
  return false;
}

/** Builds the child the way a store would: the seed, then the end-seed if planned. */
function materialize(plan: ReturnType<typeof planFork>): Session {
  const child = Session.fromEvents(plan.header, plan.seed);
  if (plan.endSeed) child.append(plan.endSeed);
  return child;
}

describe('planFork', () => {
  it('fails with OPEN_TURN inside a turn; otherwise the child is the source prefix plus one end-seed, with lineage in its header', () => {
    fc.assert(
      fc.property(programArb(), fc.nat(1000), (program, pick) => {
        const source = buildLog(program, ANY_REPLACES);
        const events = source.session.events;
        if (events.length === 0) return;
        const boundary = pick % events.length;
        if (insideTurn(events, boundary)) {
          expect(() => planFork(source.session, 'child', 5, boundary)).toThrow(
            expect.objectContaining({ code: 'OPEN_TURN' }),
          );
          return;
        }
        const plan = planFork(source.session, 'child', 5, boundary);
        expect(plan.header).toEqual({
          version: SESSION_FORMAT_VERSION,
          id: 'child',
          createdAt: 5,
          parentSession: source.header.id,
          seedLength: boundary + 1,
        });
        const child = materialize(plan);
        const prefix = events.slice(0, boundary + 1);
        const endsWithSeed = prefix.at(-1)!.type === 'session/end-seed';
        expect(child.events.slice(0, boundary + 1)).toEqual(prefix);
        expect(child.nextSeq).toBe(boundary + 1 + (endsWithSeed ? 0 : 1));
        if (!endsWithSeed)
          expect(child.events.at(-1)).toMatchObject({ seq: boundary + 1, type: 'session/end-seed', data: {} });
        // The child derives exactly what the source derived at the boundary.
        expect(child.deriveMessages()).toEqual(Session.fromEvents(source.header, prefix).deriveMessages());
        // Fork then replay: the child's stored form replays to the same history.
        const replay = Session.fromEvents(child.header, JSON.parse(JSON.stringify(child.events)) as unknown[]);
        expect(replay.deriveMessages()).toEqual(child.deriveMessages());
        expect(replay.surface).toEqual(child.surface);
      }),
      { numRuns: 200 },
    );
  });

  it('seed events are copies the child owns: the source log is not changed by forking or by appending to the child', () => {
    const { session } = buildLog(
      Array.from({ length: 20 }, (_, i) => ({ kind: [0, 1, 2, 4, 7, 8][i % 6]!, a: i, b: i, c: i })),
      ANY_REPLACES,
    );
    session.appendBatch(interruptedTurnClosers(session.events));
    const before = JSON.stringify(session.events);
    const child = materialize(planFork(session, 'child', 5));
    child.append({ type: 'session/run', time: 1, data: { workflowId: 'w', runId: 'r' } });
    expect(JSON.stringify(session.events)).toBe(before);
    expect(child.nextSeq).toBe(session.nextSeq + 2);
  });

  it('forking an empty session gives an empty seed and an end-seed at seq 0', () => {
    const source = Session.create(testHeader('empty'));
    const plan = planFork(source, 'child', 7);
    expect(plan.seed).toEqual([]);
    expect(plan.header.seedLength).toBe(0);
    expect(materialize(plan).events).toEqual([{ seq: 0, type: 'session/end-seed', time: 7, data: {} }]);
  });

  it('does not add a second end-seed when the seed already ends with one (reforking an untouched fork)', () => {
    const source = Session.create(testHeader('src'));
    source.append({ type: 'turn/start', time: 1, data: { turn: 1 } });
    source.append({ type: 'turn/end', time: 1, data: { turn: 1, reason: { kind: 'completed' } } });
    const child = materialize(planFork(source, 'child', 7));
    expect(child.events.filter((e) => e.type === 'session/end-seed')).toHaveLength(1);
    const grandchildPlan = planFork(child, 'grandchild', 8);
    expect(grandchildPlan.endSeed).toBeUndefined();
    const grandchild = materialize(grandchildPlan);
    expect(grandchild.events).toEqual(child.events);
    expect(grandchild.header.parentSession).toBe('child');
  });

  it('a fresh unseeded session has no end-seed', () => {
    expect(Session.create(testHeader()).events).toEqual([]);
  });

  it('inherits the agent spec and refuses an invalid child id', () => {
    const source = Session.create({
      ...testHeader('src'),
      agent: { model: 'deepseek-flash', system: 'be brief', tools: ['read_artifact'] },
    });
    expect(planFork(source, 'c', 1).header.agent).toEqual({
      model: 'deepseek-flash',
      system: 'be brief',
      tools: ['read_artifact'],
    });
    for (const bad of ['', '../x', '.hidden', 'a/b', 'x'.repeat(129), 'é']) {
      expect(() => planFork(source, bad, 1)).toThrow(expect.objectContaining({ code: 'INVALID_SESSION_ID' }));
    }
  });

  it('refuses a boundary that is not a seq of the log with INVALID_BOUNDARY', () => {
    const source = Session.create(testHeader('src'));
    source.append({ type: 'session/run', time: 1, data: { workflowId: 'w', runId: 'r' } });
    for (const boundary of [-1, 1, 1.5, Number.NaN, 2 ** 60]) {
      let error: unknown;
      try {
        planFork(source, 'child', 1, boundary);
      } catch (e) {
        error = e;
      }
      expect(isSessionlogError(error, 'INVALID_BOUNDARY'), `boundary ${boundary}`).toBe(true);
    }
    expect(() => planFork(Session.create(testHeader('e')), 'child', 1, 0)).toThrow(
      expect.objectContaining({ code: 'INVALID_BOUNDARY' }),
    );
  });
});
