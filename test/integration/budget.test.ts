/**
 * Spend caps that pause and ask (issue 26, DESIGN §5.3), against a real Temporal server and
 * the fake provider: a session capped at 2,000 tokens pauses before the model call that would
 * go over (`paused: budget`, nothing running, no request sent) and goes on when the cap is
 * raised, and its ledger sums equal the provider's reported usage; a pause that is not raised
 * in time ends the turn with `budget_exceeded` and the next turn runs; a runaway loop of the
 * same tool call pauses and is reported as such; a cancel ends a paused turn.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { StepBreach } from '../../src/engine/types.js';
import { billedTokens, type StoredEvent } from '../../src/session/index.js';
import { workflowIdFor, type SessionStatus } from '../../src/workflows/api.js';
import { Client, Connection } from '@temporalio/client';
import { SessionClient } from '../../src/client/session-client.js';
import { waitForPhase } from '../support/log-wait.js';
import { startStack, temporalAddress, type Stack } from '../support/stack.js';

let stack: Stack;
beforeAll(async () => {
  stack = await startStack();
});
afterAll(async () => {
  await stack?.close();
});

const LONG = 'Please explain this part of the plan in some detail, with examples. '.repeat(12);

async function pendingActivities(id: string): Promise<number> {
  const { raw } = await stack.temporal.workflow.getHandle(workflowIdFor(id)).describe();
  return (raw.pendingActivities ?? []).length;
}

function breachOf(status: SessionStatus): StepBreach {
  if (status.paused?.reason !== 'budget') throw new Error(`not paused on its budget: ${JSON.stringify(status)}`);
  return status.paused.breach;
}

const eventsOf = async (id: string, type: string): Promise<StoredEvent[]> =>
  (await stack.client.events(id)).filter((e) => e.type === type);

describe('spend caps', () => {
  it('pauses before the call that would go over 2,000 tokens, resumes when raised, and the ledger equals the provider usage', async () => {
    stack.fake.reset();
    const id = `budget-tokens-${Date.now()}`;
    await stack.client.create({ sessionId: id, budget: { total: { tokens: 2_000 }, waitMs: 120_000 } });
    let pending: Promise<{ outcome: string }> | undefined;
    for (let i = 1; i <= 20 && !pending; i++) {
      const reply = stack.client.send(id, `question ${i}: ${LONG}`);
      const settled = await Promise.race([
        reply.then(() => 'answered' as const),
        waitForPhase(stack.client, id, 'paused').then(() => 'paused' as const),
      ]);
      if (settled === 'paused') pending = reply;
    }
    expect(pending, 'the cap was never reached').toBeDefined();
    const status = await stack.client.status(id);
    expect(status.paused).toMatchObject({ reason: 'budget', breach: { cap: 'tokens', scope: 'total', limit: 2_000 } });
    const reported = stack.fake.reportedUsage();
    const providerTokens = reported.reduce((n, u) => n + u.prompt_tokens + u.completion_tokens, 0);
    // Paused before a call: what was used is exactly what the provider billed, at or over the cap.
    expect(breachOf(status).used).toBe(providerTokens);
    expect(providerTokens).toBeGreaterThanOrEqual(2_000);
    const breaches = await eventsOf(id, 'budget/breach');
    expect(breaches).toHaveLength(1);
    expect(breaches[0]!.data).toMatchObject({ before: 'model', cap: 'tokens', used: providerTokens });
    // Nothing runs while paused, and the provider is not called.
    expect(await pendingActivities(id)).toBe(0);
    const requests = stack.fake.chatRequests().length;
    await new Promise((r) => setTimeout(r, 700));
    expect(stack.fake.chatRequests().length).toBe(requests);
    expect((await stack.client.budget(id)).used.total.tokens).toBe(providerTokens);

    // Raising the cap lets the turn go on at once.
    await stack.client.setBudget(id, { total: { tokens: 1_000_000 } }, { by: 'ops@example.com' });
    expect((await pending!).outcome).toBe('completed');
    expect((await stack.client.status(id)).paused).toBeUndefined();
    const ledger = await stack.client.usage(id);
    const all = stack.fake.reportedUsage();
    const cached = all.reduce((n, u) => n + u.prompt_tokens_details.cached_tokens, 0);
    expect(ledger.total.calls).toBe(all.length);
    expect(ledger.total.inputTokens + ledger.total.cachedInputTokens).toBe(
      all.reduce((n, u) => n + u.prompt_tokens, 0),
    );
    expect(ledger.total.cachedInputTokens).toBe(cached);
    expect(ledger.total.outputTokens).toBe(all.reduce((n, u) => n + u.completion_tokens, 0));
    const budgets = await eventsOf(id, 'session/budget');
    expect(budgets.map((e) => (e.data as { by?: string }).by)).toEqual([undefined, 'ops@example.com']);
  });

  it('ends a turn with budget_exceeded when the cap is not raised in time; the next turn runs', async () => {
    stack.fake.reset();
    const id = `budget-wait-${Date.now()}`;
    await stack.client.create({ sessionId: id, budget: { turn: { modelCalls: 1 }, waitMs: 1_500 } });
    stack.fake.enqueueReplies({ toolCalls: [{ name: 'calculator', arguments: { expression: '6*7' } }] });
    const reply = await stack.client.send(id, 'what is six times seven?');
    expect(reply.outcome).toBe('error');
    const end = (await eventsOf(id, 'turn/end')).at(-1)!;
    expect(end.data).toMatchObject({ reason: { kind: 'error', error: { code: 'budget_exceeded' } } });
    // The tool ran (calls are not capped); the second model call was never made.
    expect(await eventsOf(id, 'tool/result')).toHaveLength(1);
    expect(stack.fake.chatRequests()).toHaveLength(1);
    expect((await eventsOf(id, 'budget/breach'))[0]!.data).toMatchObject({
      before: 'model',
      cap: 'modelCalls',
      scope: 'turn',
      used: 1,
      limit: 1,
    });
    // The cap is per turn: the next turn has its one call.
    expect((await stack.client.send(id, 'thanks')).outcome).toBe('completed');
  });

  it('reports a runaway loop of the same tool call, and a cancel ends the paused turn', async () => {
    stack.fake.reset();
    const id = `budget-loop-${Date.now()}`;
    await stack.client.create({ sessionId: id, budget: { repeatedCalls: 3 } });
    const same = { toolCalls: [{ name: 'calculator', arguments: { expression: '1+1' } }] };
    stack.fake.enqueueReplies(same, same, same, same);
    const reply = stack.client.send(id, 'loop please');
    const status = await waitForPhase(stack.client, id, 'paused');
    expect(breachOf(status)).toMatchObject({
      before: 'tools',
      cap: 'repeatedCalls',
      tool: 'calculator',
      used: 3,
      limit: 3,
    });
    // The third call was asked for but not run.
    expect(await eventsOf(id, 'tool/call')).toHaveLength(3);
    expect((await stack.client.events(id)).filter((e) => e.type === 'tool/result' && e.data)).toHaveLength(2);
    expect(await stack.client.cancel(id)).toBe(true);
    expect((await reply).outcome).toBe('aborted');
    stack.fake.reset();
    expect((await stack.client.send(id, 'done?')).outcome).toBe('completed');
  });

  it("gives a tenant's new sessions the tenant's budget (SESSIONLOG_TENANT_BUDGETS) unless the create names one", async () => {
    const temporal = new Client({ connection: await Connection.connect({ address: temporalAddress() }) });
    try {
      const client = new SessionClient({
        temporal,
        store: stack.store,
        taskQueue: stack.taskQueue,
        tenantBudgets: { acme: { total: { costUsd: 5 } } },
      });
      const acme = client.forTenant('acme');
      const stamp = Date.now();
      await acme.create({ sessionId: `tb-default-${stamp}` });
      expect((await acme.budget(`tb-default-${stamp}`)).budget).toEqual({ total: { costUsd: 5 } });
      await acme.create({ sessionId: `tb-own-${stamp}`, budget: { turn: { modelCalls: 3 } } });
      expect((await acme.budget(`tb-own-${stamp}`)).budget).toEqual({ turn: { modelCalls: 3 } });
      await client.forTenant('bravo').create({ sessionId: `tb-other-${stamp}` });
      expect((await client.budget(`tb-other-${stamp}`)).budget).toBeNull();
      expect((await client.header(`tb-other-${stamp}`)).tenant).toBe('bravo');
    } finally {
      await temporal.connection.close();
    }
  });

  it('refuses a malformed budget with a message naming the field', async () => {
    const id = `budget-bad-${Date.now()}`;
    await expect(stack.client.create({ sessionId: id, budget: { total: { tokens: -1 } } })).rejects.toThrow(
      /budget.total.tokens/,
    );
    await stack.client.create({ sessionId: id });
    await expect(stack.client.setBudget(id, { turn: { dollars: 3 } } as never)).rejects.toThrow(
      /unknown limit budget.turn.dollars/,
    );
    expect(billedTokens({ inputTokens: 1, outputTokens: 2, cacheReadTokens: 3 })).toBe(6);
  });
});
