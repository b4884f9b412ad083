/**
 * A tenant's caps (SESSIONLOG_TENANT_CAPS, issue 26, DESIGN §5.3): limits on what all of a
 * tenant's sessions spend together, summed by the store as it appends, against a real Temporal
 * server and the fake provider. A session of a tenant whose sessions reached the cap pauses
 * before its model call (`paused: budget`, scope `tenant`, nothing running, no request sent)
 * while another tenant's session answers; the store's sums equal what the provider reported
 * for the tenant's calls; raising the cap in the workers' config lets the paused turn go on
 * (the pause checks again on a timer: nothing signals it); a cap not raised in time ends the
 * turn with `budget_exceeded`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { TenantCaps } from '../../src/session/index.js';
import { workflowIdFor } from '../../src/workflows/api.js';
import { waitForPhase } from '../support/log-wait.js';
import { startStack, type Stack } from '../support/stack.js';

/** The caps the worker asks for before each check: the test changes them as an operator would. */
const caps: Record<string, TenantCaps> = {};
let stack: Stack;
beforeAll(async () => {
  stack = await startStack({
    worker: { tenantCaps: (tenant) => caps[tenant] },
    tunables: { tenantRecheckMs: 250 },
  });
});
afterAll(async () => {
  await stack?.close();
});

async function pendingActivities(id: string): Promise<number> {
  const { raw } = await stack.temporal.workflow.getHandle(workflowIdFor(id)).describe();
  return (raw.pendingActivities ?? []).length;
}

describe("a tenant's caps", () => {
  it("pause the tenant's next model call once its sessions together reached the cap, leave other tenants alone, and go on when raised", async () => {
    stack.fake.reset();
    const stamp = Date.now();
    const acme = stack.client.forTenant('acme');
    const bravo = stack.client.forTenant('bravo');
    const [a1, a2, b1] = [`tc-a1-${stamp}`, `tc-a2-${stamp}`, `tc-b1-${stamp}`];
    caps.acme = { modelCalls: 3, waitMs: 120_000 };
    caps.bravo = { modelCalls: 100 };
    await acme.create({ sessionId: a1 });
    await acme.create({ sessionId: a2 });
    await bravo.create({ sessionId: b1 });
    expect((await acme.send(a1, 'first')).outcome).toBe('completed');
    expect((await acme.send(a1, 'second')).outcome).toBe('completed');
    expect((await acme.send(a2, 'third')).outcome).toBe('completed');

    // What the store summed is what the provider reported for acme's three calls.
    const reported = stack.fake.reportedUsage();
    expect(reported).toHaveLength(3);
    const spent = await stack.store.spend.tenant('acme');
    expect(spent).toMatchObject({ modelCalls: 3, toolCalls: 0, sessions: 2 });
    expect(spent.tokens).toBe(reported.reduce((n, u) => n + u.prompt_tokens + u.completion_tokens, 0));

    // The fourth call of the tenant, in either session, waits; nothing runs, nothing is sent.
    const pending = acme.send(a2, 'fourth');
    const status = await waitForPhase(acme, a2, 'paused');
    expect(status.paused).toMatchObject({
      reason: 'budget',
      breach: { cap: 'modelCalls', scope: 'tenant', used: 3, limit: 3, before: 'model' },
    });
    expect(await pendingActivities(a2)).toBe(0);
    expect(stack.fake.chatRequests()).toHaveLength(3);
    const breach = (await acme.events(a2)).filter((e) => e.type === 'budget/breach');
    expect(breach[0]?.data).toMatchObject({ scope: 'tenant', cap: 'modelCalls' });

    // Another tenant's session is not held by acme's cap.
    expect((await bravo.send(b1, 'hello from bravo')).outcome).toBe('completed');
    expect((await stack.store.spend.tenant('bravo')).modelCalls).toBe(1);
    expect((await acme.status(a2)).phase).toBe('paused');

    // The operator raises the cap: the paused turn sees it at its next check and answers.
    caps.acme = { modelCalls: 10, waitMs: 120_000 };
    expect((await pending).outcome).toBe('completed');
    expect((await acme.status(a2)).paused).toBeUndefined();
    expect((await stack.store.spend.tenant('acme')).modelCalls).toBe(4);
  });

  it('ends the turn with budget_exceeded when the cap is not raised within its wait', async () => {
    stack.fake.reset();
    const id = `tc-wait-${Date.now()}`;
    const client = stack.client.forTenant('capped');
    caps.capped = { modelCalls: 1, waitMs: 1_500 };
    await client.create({ sessionId: id });
    expect((await client.send(id, 'one')).outcome).toBe('completed');
    const started = Date.now();
    const reply = await client.send(id, 'two');
    expect(reply.outcome).toBe('error');
    expect(Date.now() - started).toBeGreaterThanOrEqual(1_400);
    const end = (await client.events(id)).filter((e) => e.type === 'turn/end').at(-1)!;
    expect(end.data).toMatchObject({ reason: { kind: 'error', error: { code: 'budget_exceeded' } } });
    expect(JSON.stringify(end.data)).toMatch(/tenant modelCalls cap of 1/);
    // Each check while it waited logged the breach it found.
    expect((await client.events(id)).filter((e) => e.type === 'budget/breach').length).toBeGreaterThanOrEqual(2);
    expect(stack.fake.chatRequests()).toHaveLength(1);
  });

  it("fails the turn with INVALID_ARGUMENT when the worker's caps lookup answers a broken cap", async () => {
    stack.fake.reset();
    const id = `tc-broken-${Date.now()}`;
    const client = stack.client.forTenant('broken');
    caps.broken = { tokens: -1 };
    await client.create({ sessionId: id });
    const reply = await client.send(id, 'hello');
    expect(reply.outcome).toBe('error');
    const end = (await client.events(id)).filter((e) => e.type === 'turn/end').at(-1)!;
    expect(JSON.stringify(end.data)).toMatch(/the caps of tenant broken: tokens must be a finite number/);
    expect(stack.fake.chatRequests()).toHaveLength(0);
  });
});
