/**
 * Durable tool approval (DESIGN §5.1) against real components: the in-process stack (Temporal
 * dev server, SQLite, the fake model over HTTP, a worker) and the HTTP gateway. A tool that
 * needs approval is logged with its request, the turn waits with no activity running, and
 * the answer (approve, deny, edited arguments, nothing before the timeout) reaches the model
 * as the log says. The wait survives a terminated workflow (resume, or an answer sent to a
 * session whose workflow is not running), one answer counts when two race, and "allow for
 * the rest of the session" is logged and outlives the run.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { SessionClient } from '../../src/client/session-client.js';
import { startGateway, type RunningGateway } from '../../src/gateway/index.js';
import type { FakeChatBody } from '../../src/model/fake-server.js';
import { isEventOfType, type SessionEvent, type StoredEvent } from '../../src/session/index.js';
import { BUILTIN_TOOLS } from '../../src/tools/builtin.js';
import { ToolRegistry, type Tool } from '../../src/tools/registry.js';
import { workflowIdFor, type SessionStatus } from '../../src/workflows/api.js';
import { request } from '../gateway/http.js';
import { eventually, waitForEvent } from '../support/log-wait.js';
import { TEST_TUNABLES, startStack, type Stack } from '../support/stack.js';

/** Every run of the `deploy` tool, with the arguments it ran with. */
const runs: Array<{ callId: string; args: unknown }> = [];

const deployTool: Tool = {
  name: 'deploy',
  description: 'Deploys the service to a target.',
  parameters: {
    type: 'object',
    properties: { target: { type: 'string' } },
    required: ['target'],
    additionalProperties: false,
  },
  approval: 'always',
  run(args, context) {
    runs.push({ callId: context.callId, args });
    return Promise.resolve({ text: `deployed to ${(args as { target: string }).target}` });
  },
};

let stack: Stack;
let gateway: RunningGateway;
beforeAll(async () => {
  stack = await startStack({
    worker: {
      tools: new ToolRegistry([...BUILTIN_TOOLS, deployTool]),
      agent: { model: 'fake', system: 'You are a test assistant.', tools: ['calculator', 'deploy'] },
    },
  });
  gateway = await startGateway({ client: stack.client, host: '127.0.0.1', port: 0, bodyLimitBytes: 64 * 1024 });
});
afterAll(async () => {
  await gateway?.close();
  await stack?.close();
});
beforeEach(() => {
  stack.fake.reset();
  runs.length = 0;
});

let counter = 0;
/** A new session with its workflow started, so its log can be followed at once. */
async function newSession(name: string, client = stack.client): Promise<string> {
  const { sessionId } = await client.start({ sessionId: `appr-${name}-${Date.now()}-${counter++}` });
  return sessionId;
}
const ofType = <K extends StoredEvent['type']>(events: readonly StoredEvent[], type: K) =>
  events.filter((e): e is Extract<StoredEvent, { type: K }> => e.type === type);

/** The tool message the model received for `callId` in its recorded requests. */
function toolMessageSent(requests: FakeChatBody[], callId: string): { role: string; content?: unknown } | undefined {
  for (const body of requests) {
    const found = body.messages.find((m) => m.role === 'tool' && m.tool_call_id === callId);
    if (found) return found;
  }
  return undefined;
}

/** Waits until the session's workflow waits for answers: phase `waiting` and no activity running. */
async function waitingWithoutActivity(client: SessionClient, sessionId: string): Promise<SessionStatus> {
  return eventually(
    async () => {
      const status = await client.status(sessionId);
      if (status.phase !== 'waiting') return undefined;
      const { raw } = await client.temporal.workflow.getHandle(workflowIdFor(sessionId)).describe();
      return (raw.pendingActivities ?? []).length === 0 ? status : undefined;
    },
    30_000,
    50,
  );
}

/** Queues one reply asking for `deploy` with `callId`, then a final text reply. */
function scriptDeploy(callId: string, target = 'prod', final = 'all done'): void {
  stack.fake.enqueueReplies(
    { text: 'Deploying.', toolCalls: [{ id: callId, name: 'deploy', arguments: { target } }] },
    { text: final },
  );
}

describe('a tool that needs approval', () => {
  it('is logged as tool/approval-request, waits without an activity, and after an approval over HTTP runs once and the model gets its result', async () => {
    const id = await newSession('approve');
    scriptDeploy('call-approve');
    const reply = stack.client.send(id, 'deploy to prod please');
    const requested = (await waitForEvent(
      stack.client,
      id,
      (e) => e.type === 'tool/approval-request',
    )) as SessionEvent<'tool/approval-request'>;
    expect(requested.data).toMatchObject({
      callId: 'call-approve',
      tool: 'deploy',
      arguments: '{"target":"prod"}',
      kind: 'approval',
      turn: 1,
      step: 1,
    });
    expect(requested.data.expiresAt).toBeGreaterThan(requested.time);

    const status = await waitingWithoutActivity(stack.client, id);
    expect(status.turn).toBe(1);
    expect(runs).toEqual([]);
    expect(stack.fake.chatRequests()).toHaveLength(1);

    const answered = await request(gateway.url, 'POST', `/v1/sessions/${id}/approvals/call-approve`, {
      json: { decision: 'approve', by: 'alice' },
    });
    expect(answered.status).toBe(200);
    expect(answered.body).toEqual({ callId: 'call-approve', decision: 'approve' });

    const done = await reply;
    expect(done.outcome).toBe('completed');
    expect(done.text).toBe('all done');
    expect(runs).toEqual([{ callId: 'call-approve', args: { target: 'prod' } }]);

    const events = await stack.client.events(id);
    const approvals = ofType(events, 'tool/approval');
    expect(approvals.map((e) => e.data)).toEqual([
      { turn: 1, step: 1, callId: 'call-approve', decision: 'approve', by: 'alice' },
    ]);
    const [result] = ofType(events, 'tool/result');
    expect(result!.seq).toBeGreaterThan(approvals[0]!.seq);
    expect(result!.data.message.content[0]).toMatchObject({
      type: 'tool-result',
      toolCallId: 'call-approve',
      content: [{ type: 'text', text: 'deployed to prod' }],
    });
    expect(toolMessageSent(stack.fake.chatRequests(), 'call-approve')?.content).toBe('deployed to prod');
    expect(await stack.client.pendingApprovals({ sessionId: id })).toEqual([]);
  });

  it('denied over HTTP: the tool does not run and the model gets the denial with the reason', async () => {
    const id = await newSession('deny');
    scriptDeploy('call-deny', 'prod', 'understood, not deploying');
    const reply = stack.client.send(id, 'deploy to prod please');
    await waitForEvent(stack.client, id, (e) => e.type === 'tool/approval-request');
    await waitingWithoutActivity(stack.client, id);

    const answered = await request(gateway.url, 'POST', `/v1/sessions/${id}/approvals/call-deny`, {
      json: { decision: 'deny', reason: 'not on a Friday' },
    });
    expect(answered.status).toBe(200);
    expect(answered.body).toEqual({ callId: 'call-deny', decision: 'deny', reason: 'not on a Friday' });
    expect((await reply).text).toBe('understood, not deploying');
    expect(runs).toEqual([]);

    const events = await stack.client.events(id);
    expect(ofType(events, 'tool/approval').map((e) => e.data.decision)).toEqual(['deny']);
    const [result] = ofType(events, 'tool/result');
    expect(result!.data.error?.code).toBe('TOOL_DENIED');
    const sent = toolMessageSent(stack.fake.chatRequests(), 'call-deny');
    expect(sent?.content).toEqual(expect.stringContaining('denied'));
    expect(sent?.content).toEqual(expect.stringContaining('not on a Friday'));
  });

  it('unanswered until approvalTimeoutMs: denied with the reason expired, and the model is told', async () => {
    // Tunables are the workflow's input: this session's run is started with the short wait.
    const shortWait = new SessionClient({
      temporal: stack.temporal,
      store: stack.store,
      taskQueue: stack.taskQueue,
      tunables: { ...TEST_TUNABLES, approvalTimeoutMs: 1_500 },
    });
    const id = await newSession('expire', shortWait);
    scriptDeploy('call-expire', 'prod', 'nobody answered');
    const reply = await shortWait.send(id, 'deploy to prod please');
    expect(reply.text).toBe('nobody answered');
    expect(runs).toEqual([]);

    const events = await stack.client.events(id);
    const [requested] = ofType(events, 'tool/approval-request');
    expect(requested!.data.expiresAt - requested!.time).toBeLessThanOrEqual(1_500);
    const approvals = ofType(events, 'tool/approval');
    expect(approvals.map((e) => ({ decision: e.data.decision, reason: e.data.reason }))).toEqual([
      { decision: 'expire', reason: 'expired' },
    ]);
    const [result] = ofType(events, 'tool/result');
    expect(result!.data.error?.code).toBe('TOOL_APPROVAL_EXPIRED');
    expect(toolMessageSent(stack.fake.chatRequests(), 'call-expire')?.content).toEqual(
      expect.stringContaining('expired'),
    );
    // A late answer is told the decision that counted.
    expect(await stack.client.approve(id, 'call-expire', { decision: 'approve' })).toEqual({
      callId: 'call-expire',
      decision: 'expire',
      reason: 'expired',
    });
  });

  it('approved with edited arguments: the call runs with the edited ones and both are logged', async () => {
    const id = await newSession('edit');
    scriptDeploy('call-edit', 'prod');
    const reply = stack.client.send(id, 'deploy please');
    await waitForEvent(stack.client, id, (e) => e.type === 'tool/approval-request');
    const answered = await request(gateway.url, 'POST', `/v1/sessions/${id}/approvals/call-edit`, {
      json: { decision: 'approve', arguments: '{"target":"staging"}' },
    });
    expect(answered.status).toBe(200);
    await reply;
    expect(runs).toEqual([{ callId: 'call-edit', args: { target: 'staging' } }]);

    const events = await stack.client.events(id);
    expect(ofType(events, 'tool/call')[0]!.data.arguments).toBe('{"target":"prod"}');
    expect(ofType(events, 'tool/approval-request')[0]!.data.arguments).toBe('{"target":"prod"}');
    expect(ofType(events, 'tool/approval')[0]!.data.arguments).toBe('{"target":"staging"}');
    expect(toolMessageSent(stack.fake.chatRequests(), 'call-edit')?.content).toBe('deployed to staging');
  });

  it('refuses edited arguments that are not a JSON object, and an answer to a call that is not waiting', async () => {
    const id = await newSession('refuse');
    scriptDeploy('call-refuse');
    const reply = stack.client.send(id, 'deploy please');
    await waitForEvent(stack.client, id, (e) => e.type === 'tool/approval-request');
    await waitingWithoutActivity(stack.client, id);
    const bad = await request(gateway.url, 'POST', `/v1/sessions/${id}/approvals/call-refuse`, {
      json: { decision: 'approve', arguments: '[1,2]' },
    });
    expect(bad.status).toBe(400);
    const unknown = await request(gateway.url, 'POST', `/v1/sessions/${id}/approvals/no-such-call`, {
      json: { decision: 'approve' },
    });
    expect(unknown.status).toBe(404);
    expect((unknown.body as { error: { code: string } }).error.code).toBe('UNKNOWN_CALL');
    expect(runs).toEqual([]);
    expect(
      (
        await request(gateway.url, 'POST', `/v1/sessions/${id}/approvals/call-refuse`, {
          json: { decision: 'approve' },
        })
      ).status,
    ).toBe(200);
    await reply;
    expect(runs).toHaveLength(1);
  });
});

describe('several calls of one step', () => {
  it('wait at once; the step goes on only when all are answered, and its results are logged in call order', async () => {
    const id = await newSession('several');
    stack.fake.enqueueReplies(
      {
        text: 'Three things.',
        toolCalls: [
          { id: 'call-s1', name: 'deploy', arguments: { target: 'eu' } },
          { id: 'call-s2', name: 'calculator', arguments: { expression: '6*7' } },
          { id: 'call-s3', name: 'deploy', arguments: { target: 'us' } },
        ],
      },
      { text: 'three results' },
    );
    const reply = stack.client.send(id, 'do three things');
    await waitForEvent(stack.client, id, (e) => e.type === 'tool/approval-request');
    const requests = ofType(await stack.client.events(id), 'tool/approval-request');
    // One batch: both gated calls are requested together, the calculator is not gated.
    expect(requests.map((e) => e.data.callId)).toEqual(['call-s1', 'call-s3']);
    expect(new Set(requests.map((e) => e.op)).size).toBe(1);
    await waitingWithoutActivity(stack.client, id);

    expect(await stack.client.approve(id, 'call-s3', { decision: 'approve' })).toEqual({
      callId: 'call-s3',
      decision: 'approve',
    });
    // One answered, one still waiting: nothing ran and the step has not gone on.
    await waitingWithoutActivity(stack.client, id);
    expect(runs).toEqual([]);
    expect((await stack.client.pendingApprovals({ sessionId: id })).map((p) => p.callId)).toEqual(['call-s1']);
    expect(ofType(await stack.client.events(id), 'tool/result')).toEqual([]);

    expect(await stack.client.approve(id, 'call-s1', { decision: 'deny' })).toEqual({
      callId: 'call-s1',
      decision: 'deny',
    });
    expect((await reply).text).toBe('three results');
    expect(runs.map((r) => r.callId)).toEqual(['call-s3']);
    const results = ofType(await stack.client.events(id), 'tool/result');
    expect(results.map((e) => e.data.message.source.callId)).toEqual(['call-s1', 'call-s2', 'call-s3']);
    expect(results.map((e) => e.data.error?.code)).toEqual(['TOOL_DENIED', undefined, undefined]);
  });

  it('a cancel while waiting ends the turn as aborted; the call is no longer pending and does not run', async () => {
    const id = await newSession('cancel');
    scriptDeploy('call-cancel');
    const reply = stack.client.send(id, 'deploy please');
    await waitForEvent(stack.client, id, (e) => e.type === 'tool/approval-request');
    await waitingWithoutActivity(stack.client, id);
    await stack.client.cancel(id);
    expect((await reply).outcome).toBe('aborted');
    expect(await stack.client.pendingApprovals({ sessionId: id })).toEqual([]);
    const late = await request(gateway.url, 'POST', `/v1/sessions/${id}/approvals/call-cancel`, {
      json: { decision: 'approve' },
    });
    expect(late.status).toBe(404);
    expect(runs).toEqual([]);
    const events = await stack.client.events(id);
    expect((ofType(events, 'turn/end')[0] as SessionEvent<'turn/end'>).data.reason).toEqual({
      kind: 'aborted',
      reason: { kind: 'user' },
    });
    expect(ofType(events, 'tool/result').map((e) => e.data.message.source.callId)).toEqual(['call-cancel']);
  });
});

describe('the wait outlives its workflow run', () => {
  it('terminated while waiting: resume re-enters the wait from the log, and an approval completes the turn', async () => {
    const id = await newSession('terminate');
    scriptDeploy('call-term');
    await stack.client.post(id, 'deploy please', { id: 'm-term' });
    await waitForEvent(stack.client, id, (e) => e.type === 'tool/approval-request');
    const first = await waitingWithoutActivity(stack.client, id);
    await stack.temporal.workflow.getHandle(workflowIdFor(id)).terminate('test: the run is lost while it waits');
    expect(await stack.client.isRunning(id)).toBe(false);
    // Still pending: the log holds the request and no answer.
    expect((await stack.client.pendingApprovals({ sessionId: id })).map((p) => p.callId)).toEqual(['call-term']);

    const resumed = await stack.client.resume(id);
    expect(resumed.started).toBe(true);
    const second = await waitingWithoutActivity(stack.client, id);
    expect(second.runId).not.toBe(first.runId);
    expect(second.turn).toBe(1);

    expect(await stack.client.approve(id, 'call-term', { decision: 'approve' })).toEqual({
      callId: 'call-term',
      decision: 'approve',
    });
    const end = (await waitForEvent(stack.client, id, (e) => e.type === 'turn/end')) as SessionEvent<'turn/end'>;
    expect(end.data.reason).toEqual({ kind: 'completed' });
    expect(runs.map((r) => r.callId)).toEqual(['call-term']);
    const events = await stack.client.events(id);
    // Not repaired as interrupted: one turn, one request, one answer, one result.
    expect(ofType(events, 'turn/end')).toHaveLength(1);
    expect(ofType(events, 'tool/approval-request')).toHaveLength(1);
    expect(ofType(events, 'tool/approval')).toHaveLength(1);
    expect(ofType(events, 'tool/result')).toHaveLength(1);
    expect(ofType(events, 'session/run')).toHaveLength(2);
    // The message of the resumed turn is answered once: re-sending its id returns that turn.
    const again = await stack.client.send(id, 'deploy please', { id: 'm-term' });
    expect(again.turn).toBe(1);
    expect(again.text).toBe('all done');
  });

  it('an approval sent to a session whose workflow is not running starts a run (update-with-start) that takes it', async () => {
    const id = await newSession('with-start');
    scriptDeploy('call-ws');
    await stack.client.post(id, 'deploy please');
    await waitForEvent(stack.client, id, (e) => e.type === 'tool/approval-request');
    await waitingWithoutActivity(stack.client, id);
    await stack.temporal.workflow.getHandle(workflowIdFor(id)).terminate('test: nobody resumes it');
    expect(await stack.client.isRunning(id)).toBe(false);

    const answered = await request(gateway.url, 'POST', `/v1/sessions/${id}/approvals/call-ws`, {
      json: { decision: 'deny', reason: 'changed my mind' },
    });
    expect(answered.status).toBe(200);
    expect(answered.body).toEqual({ callId: 'call-ws', decision: 'deny', reason: 'changed my mind' });
    const end = (await waitForEvent(stack.client, id, (e) => e.type === 'turn/end')) as SessionEvent<'turn/end'>;
    expect(end.data.reason).toEqual({ kind: 'completed' });
    expect(runs).toEqual([]);
    expect(toolMessageSent(stack.fake.chatRequests(), 'call-ws')?.content).toEqual(
      expect.stringContaining('changed my mind'),
    );
  });

  it('a denial logged before the run was lost keeps its reason for the model', async () => {
    const id = await newSession('deny-lost');
    // Two calls: the first is denied, then the run is lost while the second still waits.
    stack.fake.enqueueReplies(
      {
        text: 'Two deploys.',
        toolCalls: [
          { id: 'call-d1', name: 'deploy', arguments: { target: 'eu' } },
          { id: 'call-d2', name: 'deploy', arguments: { target: 'us' } },
        ],
      },
      { text: 'one of two' },
    );
    await stack.client.post(id, 'deploy twice');
    await waitForEvent(stack.client, id, (e) => e.type === 'tool/approval-request');
    await waitingWithoutActivity(stack.client, id);
    expect(await stack.client.approve(id, 'call-d1', { decision: 'deny', reason: 'eu is frozen' })).toEqual({
      callId: 'call-d1',
      decision: 'deny',
      reason: 'eu is frozen',
    });
    await stack.temporal.workflow.getHandle(workflowIdFor(id)).terminate('test: lost between two answers');
    expect(await stack.client.approve(id, 'call-d2', { decision: 'approve' })).toEqual({
      callId: 'call-d2',
      decision: 'approve',
    });
    await waitForEvent(stack.client, id, (e) => e.type === 'turn/end');
    // The new run knows the answer the old one logged: a second answer is told the first decision.
    expect(await stack.client.approve(id, 'call-d1', { decision: 'approve' })).toEqual({
      callId: 'call-d1',
      decision: 'deny',
      reason: 'eu is frozen',
    });
    expect(runs.map((r) => r.callId)).toEqual(['call-d2']);
    expect(toolMessageSent(stack.fake.chatRequests(), 'call-d1')?.content).toEqual(
      expect.stringContaining('eu is frozen'),
    );
    expect(toolMessageSent(stack.fake.chatRequests(), 'call-d2')?.content).toBe('deployed to us');
  });
});

describe('one answer counts', () => {
  it(
    'approve and deny sent at once, 50 rounds: exactly one tool/approval per call and both callers are told the same decision',
    { timeout: 600_000 },
    async () => {
      const id = await newSession('race');
      const client2 = new SessionClient({
        temporal: stack.temporal,
        store: stack.store,
        taskQueue: stack.taskQueue,
        tunables: TEST_TUNABLES,
      });
      const decisions: string[] = [];
      for (let round = 0; round < 50; round++) {
        const callId = `race-${round}`;
        stack.fake.enqueueReplies(
          { text: '', toolCalls: [{ id: callId, name: 'deploy', arguments: { target: `t${round}` } }] },
          { text: `round ${round}` },
        );
        const reply = stack.client.send(id, `round ${round}`);
        await waitForEvent(
          stack.client,
          id,
          (e) => isEventOfType(e, 'tool/approval-request') && e.data.callId === callId,
        );
        const [a, b] = await Promise.all([
          stack.client.approve(id, callId, { decision: 'approve', by: 'a' }),
          client2.approve(id, callId, { decision: 'deny', reason: 'b says no', by: 'b' }),
        ]);
        expect(a, `round ${round}`).toEqual(b);
        decisions.push(a.decision);
        expect((await reply).text).toBe(`round ${round}`);
      }
      const events = await stack.client.events(id);
      const approvals = ofType(events, 'tool/approval');
      expect(approvals.map((e) => e.data.callId)).toEqual(Array.from({ length: 50 }, (_, i) => `race-${i}`));
      expect(approvals.map((e) => e.data.decision)).toEqual(decisions);
      // A call ran exactly when its logged decision was approve.
      expect(runs.map((r) => r.callId)).toEqual(
        approvals.filter((e) => e.data.decision === 'approve').map((e) => e.data.callId),
      );
      console.log(
        `concurrent answers: ${decisions.filter((d) => d === 'approve').length} approve, ${decisions.filter((d) => d === 'deny').length} deny won`,
      );
    },
  );
});

describe('allow for the rest of the session', () => {
  it('is logged as tool/allow; later calls of the tool do not wait, also in a new run', async () => {
    const id = await newSession('allow');
    scriptDeploy('call-allow-1', 'one', 'first done');
    const first = stack.client.send(id, 'deploy one');
    await waitForEvent(stack.client, id, (e) => e.type === 'tool/approval-request');
    expect(
      await stack.client.approve(id, 'call-allow-1', { decision: 'approve', allowForSession: true, by: 'alice' }),
    ).toEqual({ callId: 'call-allow-1', decision: 'approve' });
    await first;
    const allows = ofType(await stack.client.events(id), 'tool/allow');
    expect(allows.map((e) => e.data)).toEqual([{ tool: 'deploy', by: 'alice' }]);

    scriptDeploy('call-allow-2', 'two', 'second done');
    expect((await stack.client.send(id, 'deploy two')).text).toBe('second done');

    await stack.temporal.workflow.getHandle(workflowIdFor(id)).terminate('test: a new run must remember the allowance');
    scriptDeploy('call-allow-3', 'three', 'third done');
    expect((await stack.client.send(id, 'deploy three')).text).toBe('third done');

    expect(runs.map((r) => r.callId)).toEqual(['call-allow-1', 'call-allow-2', 'call-allow-3']);
    const events = await stack.client.events(id);
    expect(ofType(events, 'tool/approval-request').map((e) => e.data.callId)).toEqual(['call-allow-1']);
    expect(ofType(events, 'session/run').length).toBe(2);
  });

  it('a denial with allowForSession allows nothing', async () => {
    const id = await newSession('allow-deny');
    scriptDeploy('call-ad-1', 'one', 'not done');
    const first = stack.client.send(id, 'deploy one');
    await waitForEvent(stack.client, id, (e) => e.type === 'tool/approval-request');
    await stack.client.approve(id, 'call-ad-1', { decision: 'deny', allowForSession: true });
    await first;
    scriptDeploy('call-ad-2', 'two');
    const second = stack.client.send(id, 'deploy two');
    await waitForEvent(
      stack.client,
      id,
      (e) => isEventOfType(e, 'tool/approval-request') && e.data.callId === 'call-ad-2',
    );
    await stack.client.approve(id, 'call-ad-2', { decision: 'approve' });
    await second;
    expect(ofType(await stack.client.events(id), 'tool/allow')).toEqual([]);
    expect(runs.map((r) => r.callId)).toEqual(['call-ad-2']);
  });
});
