/**
 * Work asked for between turns answers at once when asked to (issue 52): a note or a manual
 * compaction sent with `atOnce` while a turn waits for an approval is answered while the call
 * still waits (`applies: turn-end`), and is done when that turn is over, before the next turn
 * starts, exactly as it would have been had its caller waited. Sent between turns it is done
 * first and answered `applies: now`. Against a real Temporal server and worker.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isEventOfType, type StoredEvent } from '../../src/session/index.js';
import { BUILTIN_TOOLS } from '../../src/tools/builtin.js';
import { ToolRegistry, type Tool } from '../../src/tools/registry.js';
import { waitForEvent, waitForPhase } from '../support/log-wait.js';
import { startStack, type Stack } from '../support/stack.js';

const deployTool: Tool = {
  name: 'deploy',
  description: 'Deploys the service to a target.',
  parameters: { type: 'object', properties: { target: { type: 'string' } }, required: ['target'] },
  approval: 'always',
  run: (args) => Promise.resolve({ text: `deployed to ${(args as { target: string }).target}` }),
};

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({
    worker: {
      tools: new ToolRegistry([...BUILTIN_TOOLS, deployTool]),
      agent: { model: 'fake', system: 'You are a test assistant.', tools: ['deploy'] },
    },
  });
});
afterAll(async () => {
  await stack?.close();
});

/** Whether `promise` has settled (checked after pending callbacks ran). */
async function settled(promise: Promise<unknown>): Promise<boolean> {
  let done = false;
  promise.then(
    () => (done = true),
    () => (done = true),
  );
  await new Promise((resolve) => setImmediate(resolve));
  return done;
}

/** Starts a turn whose deploy call waits for its approval (`callId`); resolves once it waits, with the turn's reply. */
async function turnWaitingForApproval(id: string, callId: string): Promise<{ reply: Promise<{ outcome: string }> }> {
  stack.fake.enqueueReplies(
    { text: '', toolCalls: [{ id: callId, name: 'deploy', arguments: { target: 'eu' } }] },
    { text: 'deployed' },
  );
  const turn = stack.client.send(id, 'deploy eu');
  await waitForEvent(stack.client, id, (e) => isEventOfType(e, 'tool/approval-request') && e.data.callId === callId);
  await waitForPhase(stack.client, id, 'waiting');
  return { reply: turn };
}

const seqOf = (events: StoredEvent[], type: string, nth: 'first' | 'last' = 'last'): number => {
  const found = events.filter((e) => e.type === type);
  return (nth === 'first' ? found[0] : found.at(-1))!.seq;
};

describe('a note or a compaction sent atOnce', () => {
  it('while a turn waits for an approval: a note answers turn-end at once and is logged after that turn, before the next', async () => {
    stack.fake.reset();
    const id = `at-once-note-${Date.now()}`;
    await stack.client.create({ sessionId: id });
    const { reply: turn } = await turnWaitingForApproval(id, 'call-n1');
    const noted = await stack.client.note(id, { metadata: { values: { topic: 'deploys' } } }, { atOnce: true });
    expect(noted.applies).toBe('turn-end');
    expect((await stack.client.status(id)).phase, 'the call still waits for its approval').toBe('waiting');
    expect(await settled(turn)).toBe(false);
    await stack.client.approve(id, 'call-n1', { decision: 'approve' });
    expect((await turn).outcome).toBe('completed');
    expect((await stack.client.send(id, 'and then?')).outcome).toBe('completed');
    const events = await stack.client.events(id);
    const metadata = events.filter((e) => isEventOfType(e, 'session/metadata'));
    expect(metadata.map((e) => e.data)).toMatchObject([{ metadata: { topic: 'deploys' } }]);
    const firstEnd = seqOf(events, 'turn/end', 'first');
    const secondStart = seqOf(events, 'turn/start');
    expect(metadata[0]!.seq).toBeGreaterThan(firstEnd);
    expect(metadata[0]!.seq).toBeLessThan(secondStart);
  });

  it('while a turn waits for an approval: a compaction answers turn-end at once and runs after that turn', async () => {
    stack.fake.reset();
    const id = `at-once-compact-${Date.now()}`;
    await stack.client.create({ sessionId: id });
    for (let i = 1; i <= 3; i++) await stack.client.send(id, `turn ${i}: ${'a fairly long message '.repeat(30)}`);
    const { reply: turn } = await turnWaitingForApproval(id, 'call-c1');
    const answer = await stack.client.compact(id, { atOnce: true });
    expect(answer).toEqual({ applies: 'turn-end' });
    expect((await stack.client.status(id)).phase).toBe('waiting');
    expect(await settled(turn)).toBe(false);
    await stack.client.approve(id, 'call-c1', { decision: 'approve' });
    await turn;
    const start = await waitForEvent(
      stack.client,
      id,
      (e) => isEventOfType(e, 'compaction/start') && e.data.trigger === 'manual',
    );
    await waitForEvent(stack.client, id, (e) => e.type === 'compaction/end');
    expect(start.seq).toBeGreaterThan(seqOf(await stack.client.events(id), 'turn/end'));
  });

  it('between turns: a note is logged first and answers applies now', async () => {
    const id = `at-once-idle-${Date.now()}`;
    await stack.client.create({ sessionId: id });
    const noted = await stack.client.note(id, { metadata: { values: { topic: 'idle' } } }, { atOnce: true });
    expect(noted.applies).toBe('now');
    const events = await stack.client.events(id);
    expect(events.filter((e) => e.type === 'session/metadata').at(-1)!.seq).toBeLessThan(noted.headSeq);
  });
});
