/**
 * Inbox entries (DESIGN §5.2) leave the inbox with the append that logs them, and a run's opening
 * cleanup removes what the log is done with; the engine removes them nowhere else. Driven
 * directly, without Temporal, against a real SQLite store and the offline model.
 */
import { describe, expect, it } from 'vitest';
import { inboxKeys, type SessionStore } from '../../src/persistence/index.js';
import type { Tool } from '../../src/tools/registry.js';
import { useFakeModel } from '../support/fake-model.js';
import { useEngineHarness, type EngineHarness } from './engine-harness.js';

const fake = useFakeModel();
const harness = useEngineHarness(fake);

/** A tool whose every call waits for a person's approval. */
const guarded: Tool = {
  name: 'guarded',
  description: 'Needs an approval.',
  parameters: { type: 'object', properties: {} },
  approval: 'always',
  run: async () => ({ text: 'ran' }),
};

/** The store with every `inbox.remove` the engine makes recorded (the entries still go). */
function watchingRemovals(removals: string[][]): (store: SessionStore) => SessionStore {
  return (store) => {
    const inbox = {
      ...store.inbox,
      put: store.inbox.put.bind(store.inbox),
      get: store.inbox.get.bind(store.inbox),
      list: store.inbox.list.bind(store.inbox),
      remove: (id: string, keys: readonly string[]) => {
        removals.push([...keys]);
        return store.inbox.remove(id, keys);
      },
    };
    return new Proxy(store, {
      get: (target, name, receiver) =>
        name === 'inbox' ? inbox : (Reflect.get(target, name, receiver) as unknown as object),
    });
  };
}

/** Puts an approval answer in the inbox, as the client does. */
async function approvalEntry(h: EngineHarness, callId: string, reason: string) {
  const body = JSON.stringify({ reason });
  return h.store.inbox.put(h.sessionId, inboxKeys.approval(callId, body), body);
}

/** Turn `turn` asks for `guarded` under `callId`; returns the step's result (its call waits for approval). */
async function turnAsking(h: EngineHarness, turn: number, callId: string) {
  fake().enqueueReplies({ toolCalls: [{ id: callId, name: 'guarded', arguments: {} }] });
  const result = await h.modelStep({ turn, step: 1, entering: [await h.message(`m${turn}`, `turn ${turn}`)] });
  expect(result.toolCalls).toMatchObject([{ callId, gate: 'approval' }]);
  return result;
}

describe('inbox entries', () => {
  it('leave with the append that logs them (a message, a note, an approval): the engine never removes one on its own', async () => {
    const removals: string[][] = [];
    const h = await harness({ tools: [guarded], wrapStore: watchingRemovals(removals) });
    removals.length = 0;

    const noteBody = JSON.stringify({ metadata: { values: { topic: 'inbox' } } });
    const noteRef = await h.store.inbox.put(h.sessionId, inboxKeys.note('n1'), noteBody);
    const noted = await h.engine.logNote({
      sessionId: h.sessionId,
      runId: h.runId,
      knownHead: h.head,
      note: { id: 'n1', ref: noteRef },
    });
    h.head = noted.headSeq;
    const step = await turnAsking(h, 1, 'call-1');
    const ref = await approvalEntry(h, 'call-1', 'fine by me');
    const recorded = await h.engine.recordAnswers({
      sessionId: h.sessionId,
      runId: h.runId,
      turn: 1,
      step: 1,
      knownHead: step.headSeq,
      answers: [{ callId: 'call-1', kind: 'approval', decision: 'approve', ref }],
    });

    expect(recorded.headSeq).toBeGreaterThan(step.headSeq);
    const events = await h.events();
    expect(events.some((e) => e.type === 'session/metadata')).toBe(true);
    expect(events.some((e) => e.type === 'tool/approval')).toBe(true);
    expect(await h.store.inbox.list(h.sessionId)).toEqual([]);
    expect(removals).toEqual([]);
  });

  it("a new run's opening removes the entries the log is done with (a logged message or note, an answer that came second) and leaves those still awaited", async () => {
    const h = await harness({ tools: [guarded] });
    // Turn 1: call-1 is denied; the turn then ends.
    const first = await turnAsking(h, 1, 'call-1');
    const denial = await approvalEntry(h, 'call-1', 'no');
    const recorded = await h.engine.recordAnswers({
      sessionId: h.sessionId,
      runId: h.runId,
      turn: 1,
      step: 1,
      knownHead: first.headSeq,
      answers: [{ callId: 'call-1', kind: 'approval', decision: 'deny', ref: denial }],
    });
    const closed = await h.engine.appendToolResults({
      sessionId: h.sessionId,
      runId: h.runId,
      turn: 1,
      step: 1,
      knownHead: recorded.headSeq,
      results: [],
      denied: [{ callId: 'call-1', callSeq: first.toolCalls[0]!.callSeq, decision: 'deny' }],
    });
    h.head = closed.headSeq;
    fake().enqueueReplies({ text: 'understood' });
    await h.modelStep({ turn: 1, step: 2 });
    const noteBody = JSON.stringify({ metadata: { values: { topic: 'x' } } });
    const noted = await h.engine.logNote({
      sessionId: h.sessionId,
      runId: h.runId,
      knownHead: h.head,
      note: { id: 'n1', ref: await h.store.inbox.put(h.sessionId, inboxKeys.note('n1'), noteBody) },
    });
    h.head = noted.headSeq;
    // Turn 2 asks under the same call id again, and waits for its answer.
    await turnAsking(h, 2, 'call-1');

    // Left behind: retried callers writing again what the log holds, and an answer that came second.
    const done = [
      (await h.store.inbox.put(h.sessionId, inboxKeys.message('m1'), JSON.stringify({ text: 'turn 1' }))).key,
      (await h.store.inbox.put(h.sessionId, inboxKeys.note('n1'), noteBody)).key,
    ];
    // Still awaited: the answer to turn 2's call, and a message whose update has not come yet.
    const awaited = [
      (await approvalEntry(h, 'call-1', 'yes, this time')).key,
      (await h.store.inbox.put(h.sessionId, inboxKeys.message('m9'), JSON.stringify({ text: 'later' }))).key,
    ];
    expect((await h.store.inbox.list(h.sessionId)).map((e) => e.key).sort()).toEqual([...done, ...awaited].sort());

    const opened = await h.engine.openRun({
      sessionId: h.sessionId,
      workflowId: `session/${h.sessionId}`,
      runId: 'run-2',
    });

    expect(opened.waiting?.calls).toMatchObject([{ callId: 'call-1' }]);
    expect(opened.inboxWaiting).toBe(awaited.length);
    expect((await h.store.inbox.list(h.sessionId)).map((e) => e.key).sort()).toEqual([...awaited].sort());
  });

  it("a new run's opening removes an answer to a call the log already shows answered", async () => {
    const h = await harness({ tools: [guarded] });
    const step = await turnAsking(h, 1, 'call-1');
    await h.engine.recordAnswers({
      sessionId: h.sessionId,
      runId: h.runId,
      turn: 1,
      step: 1,
      knownHead: step.headSeq,
      answers: [
        { callId: 'call-1', kind: 'approval', decision: 'approve', ref: await approvalEntry(h, 'call-1', 'a') },
      ],
    });
    // A second answer to the same call: the first counted, this one is never logged.
    const second = await approvalEntry(h, 'call-1', 'b');
    expect((await h.store.inbox.list(h.sessionId)).map((e) => e.key)).toEqual([second.key]);

    const opened = await h.engine.openRun({
      sessionId: h.sessionId,
      workflowId: `session/${h.sessionId}`,
      runId: 'run-2',
    });

    expect(opened.inboxWaiting).toBeUndefined();
    expect(await h.store.inbox.list(h.sessionId)).toEqual([]);
  });
});
