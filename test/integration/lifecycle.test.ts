import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { StoredEvent, SessionEvent } from '../../src/session/index.js';
import { workflowIdFor, type SessionWorkflowInput } from '../../src/workflows/api.js';
import { eventually, waitForEvent } from '../support/log-wait.js';
import { openPayload } from '../support/sealed.js';
import { startStack, type Stack } from '../support/stack.js';

let stack: Stack;
beforeAll(async () => {
  stack = await startStack();
});
afterAll(async () => {
  await stack?.close();
});
beforeEach(() => {
  stack.fake.reset();
  stack.fake.configure({ tokenDelayMs: 0, firstTokenDelayMs: 0 });
});

let counter = 0;
const newSession = (name: string) => `life-${name}-${Date.now()}-${counter++}`;
const ofType = <K extends StoredEvent['type']>(events: readonly StoredEvent[], type: K) =>
  events.filter((e) => e.type === type) as Array<Extract<StoredEvent, { type: K }>>;
const LONG = Array.from({ length: 200 }, (_, i) => `word${i}`).join(' ');

describe('session lifecycle', () => {
  it('cancel mid-stream logs the partial reply as interrupted and the session answers the next message', async () => {
    const id = newSession('cancel');
    stack.fake.enqueueReplies({ text: LONG });
    stack.fake.configure({ tokenDelayMs: 30 });
    await stack.client.post(id, 'tell me a long story');
    await waitForEvent(stack.client, id, (e) => e.type === 'assistant/chunk');
    await stack.client.cancel(id);
    const end = (await waitForEvent(stack.client, id, (e) => e.type === 'turn/end')) as SessionEvent<'turn/end'>;
    expect(end.data.reason).toEqual({ kind: 'aborted', reason: { kind: 'user' } });
    const events = await stack.client.events(id);
    const partial = ofType(events, 'assistant/message')[0] as SessionEvent<'assistant/message'>;
    expect(partial.data.interrupted).toBe(true);
    const text = partial.data.message.content.find((b) => b.type === 'text');
    expect(text && text.type === 'text' && LONG.startsWith(text.text) && text.text.length < LONG.length).toBe(true);
    stack.fake.configure({ tokenDelayMs: 0 });
    const next = await stack.client.send(id, 'shorter please');
    expect(next.text).toBe('echo: shorter please');
  });

  it('a message sent mid-turn joins the running turn at the next step boundary', async () => {
    const id = newSession('steer');
    stack.fake.enqueueReplies(
      { text: LONG, toolCalls: [{ name: 'calculator', arguments: { expression: '2+2' } }] },
      { text: 'done with both' },
    );
    stack.fake.configure({ tokenDelayMs: 10 });
    await stack.client.start({ sessionId: id });
    const first = stack.client.send(id, 'compute 2+2', { id: 'm1' });
    await waitForEvent(stack.client, id, (e) => e.type === 'assistant/chunk');
    const second = stack.client.send(id, 'and also say hi', { id: 'm2' });
    const [r1, r2] = await Promise.all([first, second]);
    expect(r1).toEqual(r2);
    expect(r1.text).toBe('done with both');
    const events = await stack.client.events(id);
    expect(ofType(events, 'turn/start')).toHaveLength(1);
    const steer = ofType(events, 'user/message').find((e) => (e as SessionEvent<'user/message'>).data.id === 'm2')!;
    const results = ofType(events, 'tool/result');
    const step2 = ofType(events, 'step/start').find((e) => (e as SessionEvent<'step/start'>).data.step === 2)!;
    expect(steer.seq).toBeGreaterThan(results[0]!.seq);
    expect(steer.seq).toBe(step2.seq + 1);
    // The second request carried the steering message after the tool result.
    const sent = stack.fake.chatRequests();
    expect(sent[1]!.messages.at(-1)).toMatchObject({ role: 'user', content: 'and also say hi' });
  });

  it('re-sending a message id answers it once', async () => {
    const id = newSession('dedupe');
    const a = await stack.client.send(id, 'only once', { id: 'same-id' });
    const b = await stack.client.send(id, 'only once', { id: 'same-id' });
    expect(b.turn).toBe(a.turn);
    expect(b.text).toBe(a.text);
    await stack.client.post(id, 'only once', { id: 'same-id' });
    const c = await stack.client.send(id, 'next');
    expect(c.turn).toBe(a.turn + 1);
    expect(ofType(await stack.client.events(id), 'user/message')).toHaveLength(2);
  });

  it('terminating a workflow mid-turn and resuming repairs the turn and answers the next message', async () => {
    const id = newSession('terminate');
    stack.fake.enqueueReplies({ text: LONG });
    stack.fake.configure({ tokenDelayMs: 30 });
    await stack.client.post(id, 'start something long');
    await waitForEvent(stack.client, id, (e) => e.type === 'assistant/chunk');
    await stack.temporal.workflow.getHandle(workflowIdFor(id)).terminate('test: simulate a lost workflow');
    await stack.client.resume(id);
    // The old run's activity may still be streaming; once the new run has taken over it is fenced out.
    await waitForEvent(stack.client, id, (e) => e.type === 'turn/end');
    stack.fake.configure({ tokenDelayMs: 0 });
    const reply = await stack.client.send(id, 'are you back?');
    expect(reply.text).toBe('echo: are you back?');
    const events = await stack.client.events(id);
    const ends = ofType(events, 'turn/end') as SessionEvent<'turn/end'>[];
    expect(ends.map((e) => e.data.reason.kind)).toEqual(['interrupted', 'completed']);
    expect(ofType(events, 'session/run')).toHaveLength(2);
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i));
  });

  it('cancelling the workflow itself mid-turn logs the turn as aborted, ends the run as cancelled, and the session answers the next message', async () => {
    const id = newSession('wf-cancel');
    stack.fake.enqueueReplies({ text: LONG });
    stack.fake.configure({ tokenDelayMs: 30 });
    await stack.client.post(id, 'start something long');
    await waitForEvent(stack.client, id, (e) => e.type === 'assistant/chunk');
    const handle = stack.temporal.workflow.getHandle(workflowIdFor(id));
    await handle.cancel();
    await expect(handle.result()).rejects.toThrow(/cancel/i);
    expect((await handle.describe()).status.name).toBe('CANCELLED');
    let events = await stack.client.events(id);
    const end = ofType(events, 'turn/end')[0] as SessionEvent<'turn/end'>;
    expect(end.data.reason.kind).toBe('aborted');
    expect(ofType(events, 'turn/end')).toHaveLength(ofType(events, 'turn/start').length);
    stack.fake.configure({ tokenDelayMs: 0 });
    const reply = await stack.client.send(id, 'still there?');
    expect(reply.text).toBe('echo: still there?');
    events = await stack.client.events(id);
    expect(ofType(events, 'turn/end').map((e) => (e as SessionEvent<'turn/end'>).data.reason.kind)).toEqual([
      'aborted',
      'completed',
    ]);
  });

  it('cancelling the workflow itself while idle ends the run as cancelled with nothing open', async () => {
    const id = newSession('wf-cancel-idle');
    await stack.client.send(id, 'first');
    const handle = stack.temporal.workflow.getHandle(workflowIdFor(id));
    await handle.cancel();
    await expect(handle.result()).rejects.toThrow(/cancel/i);
    expect((await handle.describe()).status.name).toBe('CANCELLED');
    const reply = await stack.client.send(id, 'second');
    expect(reply).toMatchObject({ text: 'echo: second', turn: 2 });
  });

  it('a session whose workflow is gone resumes from its log alone', async () => {
    const id = newSession('gone');
    await stack.client.send(id, 'first');
    await stack.temporal.workflow.getHandle(workflowIdFor(id)).terminate('test: history lost');
    expect(await stack.client.isRunning(id)).toBe(false);
    const reply = await stack.client.send(id, 'second');
    expect(reply.text).toBe('echo: second');
    expect(reply.turn).toBe(2);
  });

  it('continues as new between turns without losing queued messages', async () => {
    const id = newSession('can');
    const local = await startStackTunables();
    try {
      const ids = Array.from({ length: 6 }, (_, i) => `q${i}`);
      // Slow replies; each message after the first is posted once the previous one's turn has
      // started, so it arrives while that turn runs and waits in the queue (however slow the
      // host: no fixed spacing). With two turns a run, every second turn ends in a continue-as-new
      // with a message queued.
      local.fake.configure({ firstTokenDelayMs: 2_000 });
      for (const m of ids) {
        await local.client.post(id, `queued ${m}`, { id: m });
        await eventually(
          async () =>
            ofType(await local.client.events(id), 'user/message').some(
              (e) => (e as SessionEvent<'user/message'>).data.id === m,
            ) || undefined,
          60_000,
          50,
        );
      }
      const answered = await eventually(
        async () => {
          const events = await local.client.events(id);
          const users = ofType(events, 'user/message').length;
          const closed = ofType(events, 'turn/end').length === ofType(events, 'turn/start').length;
          return users === ids.length && closed ? events : undefined;
        },
        60_000,
        200,
      );
      const runs = ofType(answered, 'session/run');
      expect(runs.length).toBeGreaterThan(1);
      const userIds = ofType(answered, 'user/message').map((e) => (e as SessionEvent<'user/message'>).data.id);
      expect([...userIds].sort()).toEqual([...ids].sort());
      // Every turn was answered.
      for (const end of ofType(answered, 'turn/end') as SessionEvent<'turn/end'>[])
        expect(end.data.reason.kind).toBe('completed');
      // At least one continue-as-new carried queued messages into the next run.
      let carried = 0;
      for (const run of runs.slice(0, -1) as SessionEvent<'session/run'>[]) {
        const history = await local.temporal.workflow.getHandle(workflowIdFor(id), run.data.runId).fetchHistory();
        for (const event of history.events ?? []) {
          const payload = event.workflowExecutionContinuedAsNewEventAttributes?.input?.payloads?.[0];
          if (payload?.data)
            carried +=
              (await openPayload<SessionWorkflowInput>(local.temporal, workflowIdFor(id), payload)).carry?.queue
                .length ?? 0;
        }
      }
      expect(carried).toBeGreaterThan(0);
      // The run that answered the last turn may continue as new right after it (its second turn),
      // so `answered` can predate the newest run's `session/run`. Compare status with the log as
      // read between two status queries that agree on a run that has opened the session.
      const { status, lastRun } = await eventually(
        async () => {
          const before = await local.client.status(id);
          const logged = ofType(await local.client.events(id), 'session/run').at(-1) as SessionEvent<'session/run'>;
          const after = await local.client.status(id);
          return before.runId === after.runId && before.phase !== 'starting'
            ? { status: after, lastRun: logged.data.runId }
            : undefined;
        },
        30_000,
        100,
      );
      expect(status.runId).toBe(lastRun);
    } finally {
      await local.close();
    }
  });
});

/** A stack whose sessions continue as new every two turns, on top of the server's low suggestion. */
function startStackTunables(): Promise<Stack> {
  return startStack({ tunables: { continueAsNewAfterTurns: 2 } });
}
