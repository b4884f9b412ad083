/**
 * The op-key grammar (session/op-keys.ts): every kind of key the engine writes parses back to
 * what it was made from, the engine's makers write exactly the grammar's keys, and the model
 * call a chunk batch names is read from its key alone.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import * as engineOps from '../../src/engine/ops.js';
import {
  compactionId,
  formatOpKey,
  modelCallOfChunks,
  parseOpKey,
  stepOps,
  type AttemptKey,
  type OpKey,
} from '../../src/session/index.js';

const runId = fc.stringMatching(/^[0-9a-f-]{1,36}$/);
const nat = fc.nat({ max: 10_000 });
const text = fc.string({ minLength: 1, maxLength: 40 });
const attempt: fc.Arbitrary<AttemptKey> = fc.oneof(
  fc.integer({ min: 1, max: 20 }),
  fc.tuple(fc.integer({ min: 1, max: 9 }), fc.integer({ min: 1, max: 20 })).map(([p, a]) => `${p}.${a}` as const),
);
const stepRef = fc.record({ runId, turn: nat, step: nat });
const stepKey = fc.record({ runId, turn: nat, step: nat, pass: nat });

/** One arbitrary per kind: a kind added to OpKey without one here fails to compile. */
const KEYS: { [K in OpKey['kind']]: fc.Arbitrary<OpKey & { kind: K }> } = {
  run: fc.record({ kind: fc.constant('run'), runId }),
  seed: fc.record({ kind: fc.constant('seed'), sessionId: fc.stringMatching(/^[A-Za-z0-9_-][A-Za-z0-9._-]{0,40}$/) }),
  repair: fc.record({ kind: fc.constant('repair'), lastSeq: nat }),
  start: stepRef.map((ref) => ({ kind: 'start' as const, ...ref })),
  'close-stale': stepRef.map((ref) => ({ kind: 'close-stale' as const, ...ref })),
  reply: stepRef.map((ref) => ({ kind: 'reply' as const, ...ref })),
  cancel: stepRef.map((ref) => ({ kind: 'cancel' as const, ...ref })),
  error: stepRef.map((ref) => ({ kind: 'error' as const, ...ref })),
  results: stepRef.map((ref) => ({ kind: 'results' as const, ...ref })),
  'approval-requests': stepRef.map((ref) => ({ kind: 'approval-requests' as const, ...ref })),
  header: stepKey.map((key) => ({ kind: 'header' as const, ...key })),
  context: fc
    .tuple(stepKey, fc.constantFrom('prune', 'escalation-prune', 'stalled'))
    .map(([key, suffix]) => ({ kind: 'context' as const, ...key, suffix })),
  limit: fc.tuple(stepKey, attempt).map(([key, a]) => ({ kind: 'limit' as const, ...key, attempt: a })),
  retry: fc.tuple(stepKey, attempt).map(([key, a]) => ({ kind: 'retry' as const, ...key, attempt: a })),
  chunks: fc.tuple(stepKey, attempt, nat).map(([key, a, n]) => ({ kind: 'chunks' as const, ...key, attempt: a, n })),
  budget: fc
    .tuple(stepRef, fc.constantFrom('model' as const, 'tools' as const), nat)
    .map(([ref, before, n]) => ({ kind: 'budget' as const, ...ref, before, n })),
  answer: fc.tuple(stepRef, text).map(([ref, callId]) => ({ kind: 'answer' as const, ...ref, callId })),
  'turn-end': fc.record({ kind: fc.constant('turn-end'), runId, turn: nat }),
  compaction: fc
    .tuple(
      stepKey,
      fc.option(fc.integer({ min: 1, max: 5 }), { nil: undefined }),
      fc.option(nat, { nil: undefined }),
      fc.constantFrom('prune', 'start', 'commit', 'end'),
    )
    .map(([key, round, manual, suffix]) => {
      const base = manual === undefined ? compactionId(key) : compactionId({ runId: key.runId, manual });
      const id = round === undefined ? base : `${base}.r${round}`;
      return { kind: 'compaction' as const, runId: key.runId, compactionId: id, suffix };
    }),
  note: fc.record({ kind: fc.constant('note'), runId, noteId: text }),
  setting: fc.record({ kind: fc.constant('setting'), runId, name: fc.constantFrom('allow', 'tools/allow'), n: nat }),
};

describe('the op-key grammar', () => {
  for (const [kind, arbitrary] of Object.entries(KEYS) as Array<[string, fc.Arbitrary<OpKey>]>) {
    it(`parses a ${kind} key back to what it was made from`, () => {
      fc.assert(
        fc.property(arbitrary, (key) => {
          expect(parseOpKey(formatOpKey(key))).toEqual(key);
        }),
      );
    });
  }

  it("the engine's makers write the grammar's keys", () => {
    const key = { runId: 'run-1', turn: 3, step: 2, pass: 1 };
    const ref = { runId: 'run-1', turn: 3, step: 2 };
    expect(parseOpKey(engineOps.runOp('run-1'))).toEqual({ kind: 'run', runId: 'run-1' });
    expect(parseOpKey(engineOps.seedOp('child'))).toEqual({ kind: 'seed', sessionId: 'child' });
    expect(parseOpKey(engineOps.repairOp(41))).toEqual({ kind: 'repair', lastSeq: 41 });
    expect(parseOpKey(stepOps.start(key))).toEqual({ kind: 'start', ...ref });
    expect(parseOpKey(stepOps.closeStale(key))).toEqual({ kind: 'close-stale', ...ref });
    expect(parseOpKey(stepOps.header(key))).toEqual({ kind: 'header', ...key });
    expect(parseOpKey(stepOps.prune(key))).toEqual({ kind: 'context', ...key, suffix: 'prune' });
    expect(parseOpKey(stepOps.context(key, 'stalled'))).toEqual({ kind: 'context', ...key, suffix: 'stalled' });
    expect(parseOpKey(stepOps.limit(key, '2.1'))).toEqual({ kind: 'limit', ...key, attempt: '2.1' });
    expect(parseOpKey(stepOps.chunks(key, 3, 7))).toEqual({ kind: 'chunks', ...key, attempt: 3, n: 7 });
    expect(parseOpKey(stepOps.retry(key, 1))).toEqual({ kind: 'retry', ...key, attempt: 1 });
    expect(parseOpKey(stepOps.reply(key))).toEqual({ kind: 'reply', ...ref });
    expect(parseOpKey(stepOps.cancel(key))).toEqual({ kind: 'cancel', ...ref });
    expect(parseOpKey(stepOps.error(key))).toEqual({ kind: 'error', ...ref });
    expect(parseOpKey(stepOps.results(ref))).toEqual({ kind: 'results', ...ref });
    expect(parseOpKey(stepOps.approvalRequests(ref))).toEqual({ kind: 'approval-requests', ...ref });
    expect(parseOpKey(stepOps.budget(ref, 'tools', 2))).toEqual({ kind: 'budget', ...ref, before: 'tools', n: 2 });
    expect(parseOpKey(stepOps.answer(ref, 'call/1'))).toEqual({ kind: 'answer', ...ref, callId: 'call/1' });
    expect(parseOpKey(engineOps.endTurnOp('run-1', 3))).toEqual({ kind: 'turn-end', runId: 'run-1', turn: 3 });
    const id = engineOps.compactionId(key);
    expect(parseOpKey(engineOps.compactionOp('run-1', id, 'commit'))).toEqual({
      kind: 'compaction',
      runId: 'run-1',
      compactionId: id,
      suffix: 'commit',
    });
    expect(parseOpKey(engineOps.noteOp('run-1', 'n-1'))).toEqual({ kind: 'note', runId: 'run-1', noteId: 'n-1' });
    expect(parseOpKey(engineOps.settingOp('run-1', 'allow', 0))).toEqual({
      kind: 'setting',
      runId: 'run-1',
      name: 'allow',
      n: 0,
    });
    // The keys as they are stored in logs written so far.
    expect(stepOps.chunks(key, '2.1', 4)).toBe('run-1/t3/s2/p1/a2.1/c4');
    expect(stepOps.budget(ref, 'model', 0)).toBe('run-1/t3/s2/budget/model/b0');
    expect(id).toBe('run-1.t3.s2.p1');
  });

  it('reads the model call from a chunk batch key only: one call for all its batches, none for the reply batch', () => {
    const key = { runId: 'run-1', turn: 1, step: 1, pass: 0 };
    expect(modelCallOfChunks(stepOps.chunks(key, 1, 0))).toBe('run-1/t1/s1/p0/a1');
    expect(modelCallOfChunks(stepOps.chunks(key, 1, 5))).toBe(modelCallOfChunks(stepOps.chunks(key, 1, 0)));
    expect(modelCallOfChunks(stepOps.chunks(key, 2, 0))).not.toBe(modelCallOfChunks(stepOps.chunks(key, 1, 0)));
    expect(modelCallOfChunks(stepOps.reply(key))).toBeUndefined();
    expect(modelCallOfChunks(stepOps.retry(key, 1))).toBeUndefined();
    expect(modelCallOfChunks(undefined)).toBeUndefined();
  });

  it('refuses ops it does not make: another writer’s keys parse to nothing', () => {
    for (const op of [
      '',
      'x',
      'seed:',
      'repair:x',
      'run-1',
      'run-1/t1',
      'run-1/t1/s1',
      'run-1/t1/s1/p0/a1/c',
      'run-1/tx/end',
    ])
      expect(parseOpKey(op), op).toBeUndefined();
  });
});
