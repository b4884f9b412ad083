/**
 * A budget change answers at once, whatever the session is doing (issue 52): `PATCH
 * /v1/sessions/:id` during a running model step, during a turn waiting for an approval and
 * during a turn paused on its budget answers while the turn is still where it was, saying
 * whether the change applies now or at the end of the running turn, and the change is logged
 * (`session/budget`) exactly when it was before: at once for a paused turn (which goes on),
 * after the running turn otherwise. Against a real Temporal server, worker and gateway.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type RunningGateway } from '../../src/gateway/index.js';
import type { Budget } from '../../src/session/budget.js';
import { isEventOfType, type StoredEvent } from '../../src/session/index.js';
import { BUILTIN_TOOLS } from '../../src/tools/builtin.js';
import { ToolRegistry, type Tool } from '../../src/tools/registry.js';
import { waitForEvent, waitForPhase } from '../support/log-wait.js';
import { startStack, type Stack } from '../support/stack.js';
import { request, type JsonResponse } from './http.js';

const deployTool: Tool = {
  name: 'deploy',
  description: 'Deploys the service to a target.',
  parameters: { type: 'object', properties: { target: { type: 'string' } }, required: ['target'] },
  approval: 'always',
  run: (args) => Promise.resolve({ text: `deployed to ${(args as { target: string }).target}` }),
};

/** Longer than any client would wait for a PATCH: a change that is not answered by then hangs its client. */
const CLIENT_PATIENCE_MS = 10_000;

let stack: Stack;
let gateway: RunningGateway;
beforeAll(async () => {
  stack = await startStack({
    worker: {
      tools: new ToolRegistry([...BUILTIN_TOOLS, deployTool]),
      agent: { model: 'fake', system: 'You are a test assistant.', tools: ['deploy', 'calculator'] },
    },
  });
  gateway = await startGateway({ client: stack.client, host: '127.0.0.1', port: 0, bodyLimitBytes: 64 * 1024 });
});
afterAll(async () => {
  await gateway?.close();
  await stack?.close();
});

/** PATCHes the session's budget; refuses to wait longer than a client would. */
function patchBudget(id: string, budget: Budget | null): Promise<JsonResponse> {
  return Promise.race([
    request(gateway.url, 'PATCH', `/v1/sessions/${id}`, { json: { budget, by: 'ops' } }),
    new Promise<never>((_, reject) =>
      setTimeout(
        () => reject(new Error(`PATCH /v1/sessions/${id} did not answer within ${CLIENT_PATIENCE_MS} ms`)),
        CLIENT_PATIENCE_MS,
      ),
    ),
  ]);
}

const budgetLogged = (budget: Budget | null) => (e: StoredEvent) =>
  isEventOfType(e, 'session/budget') && JSON.stringify(e.data.budget) === JSON.stringify(budget);

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

describe('PATCH /v1/sessions/:id answers a budget change at once', () => {
  it('during a running model step: answers applies turn-end before the turn ends, and logs the budget after it', async () => {
    stack.fake.reset();
    const id = `budget-change-running-${Date.now()}`;
    await stack.client.create({ sessionId: id });
    stack.fake.configure({ firstTokenDelayMs: 6_000 });
    const turn = stack.client.send(id, 'take your time');
    await waitForPhase(stack.client, id, 'model');
    const budget: Budget = { total: { tokens: 1_000_000 } };
    const answer = await patchBudget(id, budget);
    expect(await settled(turn), 'the turn was still running when the change was answered').toBe(false);
    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({ applies: 'turn-end', used: { total: {} } });
    stack.fake.configure({ firstTokenDelayMs: 0 });
    expect((await turn).outcome).toBe('completed');
    const logged = await waitForEvent(stack.client, id, budgetLogged(budget));
    const end = (await stack.client.events(id)).filter((e) => e.type === 'turn/end').at(-1)!;
    expect(logged.seq).toBeGreaterThan(end.seq);
    expect(logged.data).toMatchObject({ by: 'ops' });
    expect((await stack.client.budget(id)).budget).toEqual(budget);
  });

  it('during a turn waiting for an approval: answers applies turn-end while the call waits, and logs the budget after the turn', async () => {
    stack.fake.reset();
    const id = `budget-change-approval-${Date.now()}`;
    await stack.client.create({ sessionId: id });
    stack.fake.enqueueReplies(
      { text: '', toolCalls: [{ id: 'call-bc1', name: 'deploy', arguments: { target: 'eu' } }] },
      { text: 'deployed' },
    );
    const turn = stack.client.send(id, 'deploy eu');
    await waitForEvent(stack.client, id, (e) => isEventOfType(e, 'tool/approval-request'));
    await waitForPhase(stack.client, id, 'waiting');
    const budget: Budget = { turn: { modelCalls: 10 } };
    const answer = await patchBudget(id, budget);
    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({ applies: 'turn-end' });
    expect((await stack.client.status(id)).phase, 'the call still waits for its approval').toBe('waiting');
    expect(await settled(turn)).toBe(false);
    await stack.client.approve(id, 'call-bc1', { decision: 'approve' });
    expect((await turn).outcome).toBe('completed');
    const logged = await waitForEvent(stack.client, id, budgetLogged(budget));
    const end = (await stack.client.events(id)).filter((e) => e.type === 'turn/end').at(-1)!;
    expect(logged.seq).toBeGreaterThan(end.seq);
    expect((await stack.client.budget(id)).budget).toEqual(budget);
  });

  it('during a turn paused on its budget: answers applies now, logs the budget, and the turn goes on', async () => {
    stack.fake.reset();
    const id = `budget-change-paused-${Date.now()}`;
    await stack.client.create({ sessionId: id, budget: { turn: { modelCalls: 1 }, waitMs: 120_000 } });
    stack.fake.enqueueReplies(
      { text: '', toolCalls: [{ name: 'calculator', arguments: { expression: '6*7' } }] },
      { text: '42' },
    );
    const turn = stack.client.send(id, 'what is six times seven?');
    await waitForPhase(stack.client, id, 'paused');
    const budget: Budget = { turn: { modelCalls: 5 } };
    const answer = await patchBudget(id, budget);
    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({ applies: 'now', budget });
    const logged = await waitForEvent(stack.client, id, budgetLogged(budget));
    expect((await turn).outcome).toBe('completed');
    const end = (await stack.client.events(id)).filter((e) => e.type === 'turn/end').at(-1)!;
    expect(logged.seq).toBeLessThan(end.seq);
  });

  it('between turns: answers applies now with the budget in force', async () => {
    const id = `budget-change-idle-${Date.now()}`;
    await stack.client.create({ sessionId: id });
    const budget: Budget = { total: { modelCalls: 3 } };
    const answer = await patchBudget(id, budget);
    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({ applies: 'now', budget });
    await waitForEvent(stack.client, id, budgetLogged(budget));
  });
});
