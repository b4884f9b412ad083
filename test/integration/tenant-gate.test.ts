/**
 * One tenant's load cannot starve another's on a shared worker (issue 26): with a limit of one
 * model step per tenant, tenant A's three sessions asking at once run one after another, while
 * tenant B's message, sent after them, is answered without waiting for A's queue, also when A
 * has more sessions asking than the worker has activity slots (A's waiting steps hand their
 * slots back). The gate's own rules (order, the limit, the bounded wait, a cancelled waiter
 * leaving the queue) are checked directly.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TenantGate } from '../../src/engine/admission/tenant-gate.js';
import type { StepContext } from '../../src/engine/types.js';
import { startStack, type Stack } from '../support/stack.js';

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({
    worker: {
      tenantConcurrency: 1,
      // Fewer activity slots than tenant A has sessions asking at once.
      workerOptions: {
        maxHeartbeatThrottleInterval: '500ms',
        defaultHeartbeatThrottleInterval: '500ms',
        maxConcurrentActivityTaskExecutions: 3,
      },
    },
  });
});
afterAll(async () => {
  await stack?.close();
});

function ctx(signal = new AbortController().signal): StepContext {
  return { attempt: 1, signal, heartbeat: () => undefined, cancelRequested: () => false };
}

/**
 * Tenant A's `count` sessions each ask a slow question (1.5 s to the first token) at once; 300 ms
 * later tenant B's one session asks. When each finished (ms from the start, A's sorted), and
 * which of A's sessions were seen `paused: tenant` meanwhile.
 */
async function aCrowdThenB(count: number, label: string): Promise<{ b: number; aTimes: number[]; paused: string[] }> {
  stack.fake.reset();
  stack.fake.configure({ firstTokenDelayMs: 1_500 });
  try {
    const a = stack.client.forTenant('tenant-a');
    const b = stack.client.forTenant('tenant-b');
    const stamp = Date.now();
    const ids = Array.from({ length: count }, (_, i) => `a${i + 1}-${label}-${stamp}`);
    for (const id of ids) await a.create({ sessionId: id });
    await b.create({ sessionId: `b1-${label}-${stamp}` });
    const started = Date.now();
    const finished: Record<string, number> = {};
    const aReplies = ids.map((id) => a.send(id, 'slow question').then(() => (finished[id] = Date.now() - started)));
    await new Promise((r) => setTimeout(r, 300));
    const paused: string[] = [];
    const watching = (async () => {
      while (Object.keys(finished).length < ids.length)
        for (const id of ids) {
          const status = await a.status(id).catch(() => undefined);
          if (status?.paused?.reason === 'tenant') paused.push(id);
          await new Promise((r) => setTimeout(r, 100));
        }
    })();
    await b.send(`b1-${label}-${stamp}`, 'quick question');
    const bTime = Date.now() - started;
    await Promise.all(aReplies);
    await watching;
    return { b: bTime, aTimes: ids.map((id) => finished[id]!).sort((x, y) => x - y), paused };
  } finally {
    stack.fake.configure({ firstTokenDelayMs: 0 });
  }
}

describe('per-tenant concurrency', () => {
  it("answers tenant B while tenant A's sessions wait for their one slot", async () => {
    const { b, aTimes } = await aCrowdThenB(3, 'gate');
    // A's three ran one at a time (each ≥ 1.5 s after the one before); B did not wait behind them.
    expect(aTimes[2]! - aTimes[0]!).toBeGreaterThanOrEqual(2 * 1_400);
    expect(b).toBeLessThan(aTimes[2]!);
  }, 60_000);

  it("with more of tenant A's sessions asking than the worker has activity slots, tenant B is answered long before A's queue drains", async () => {
    const { b, aTimes, paused } = await aCrowdThenB(6, 'slots');
    // A's six ran one at a time (≥ 7.5 s in all). Had A's waiting steps kept the three slots,
    // B's step would have queued behind A's until the fourth of them finished; it is answered
    // well before that. A's waiting steps handed their slots back: seen as `paused: tenant`.
    expect(aTimes[5]! - aTimes[0]!).toBeGreaterThanOrEqual(5 * 1_400);
    expect(b, `B ${b} ms, A ${aTimes.join(', ')} ms`).toBeLessThan(aTimes[3]!);
    expect(paused.length).toBeGreaterThan(0);
  }, 120_000);

  it('admit waits at most its bound and then holds nothing', async () => {
    const gate = new TenantGate(1);
    expect(await gate.admit('t', ctx(), 10, 0)).toBe(true);
    const started = Date.now();
    expect(await gate.admit('t', ctx(), 10, 100)).toBe(false);
    expect(Date.now() - started).toBeGreaterThanOrEqual(90);
    expect(gate.load('t')).toEqual({ running: 1, waiting: 0 });
    const waiter = gate.admit('t', ctx(), 10, 5_000);
    gate.release('t');
    expect(await waiter).toBe(true);
    gate.release('t');
    expect(gate.load('t')).toEqual({ running: 0, waiting: 0 });
  });

  it('admits in order up to the limit, and a cancelled waiter leaves the queue', async () => {
    const gate = new TenantGate(2);
    const order: string[] = [];
    const release: Array<() => void> = [];
    const hold = (name: string, signal?: AbortSignal) =>
      gate.run('t', ctx(signal), 10, async () => {
        order.push(name);
        await new Promise<void>((r) => release.push(r));
      });
    const one = hold('one');
    const two = hold('two');
    const cancel = new AbortController();
    const three = hold('three', cancel.signal);
    const four = hold('four');
    await new Promise((r) => setTimeout(r, 20));
    expect(order).toEqual(['one', 'two']);
    expect(gate.load('t')).toEqual({ running: 2, waiting: 2 });
    cancel.abort(new Error('gone'));
    await expect(three).rejects.toThrow('gone');
    release.shift()!();
    await one;
    await new Promise((r) => setTimeout(r, 20));
    expect(order).toEqual(['one', 'two', 'four']);
    // Another tenant is not held by this one's queue.
    await gate.run('other', ctx(), 10, async () => order.push('other'));
    for (const r of release.splice(0)) r();
    await Promise.all([two, four]);
    expect(gate.load('t')).toEqual({ running: 0, waiting: 0 });
    expect(() => new TenantGate(0)).toThrow(RangeError);
  });
});
