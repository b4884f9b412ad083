/**
 * Per-tenant concurrency on a shared worker (DESIGN §5.3, issue 26): at most `limit` model
 * steps and compactions of one tenant run at once on this worker; more wait their turn, in
 * order, heartbeating. So one tenant's burst of sessions cannot take every model call of a
 * worker others share: another tenant's step starts while the first tenant's wait.
 *
 * A waiting step holds an activity slot (Temporal's `maxConcurrentActivityTaskExecutions`), so
 * a model step waits at most {@link TENANT_WAIT_MS}: then it hands its slot back, the workflow
 * waits on a timer (`paused: tenant`, nothing running; {@link tenantRetryMs}, longer each time)
 * and calls the step again. A tenant with more sessions than the worker has slots therefore
 * cannot keep another tenant's steps queued behind its own, and a long overload costs a few
 * workflow tasks per session a minute. Compactions (one at a time per session) wait in the gate.
 */
import { tenantOf } from '../../session/index.js';
import type { EngineDeps } from '../deps.js';
import type { StepContext } from '../types.js';

const MAX_REMEMBERED_TENANTS = 10_000;
/** How long a model step waits for its tenant's share before it hands its activity slot back. */
export const TENANT_WAIT_MS = 250;

/** How long the workflow waits before it calls a step that found its tenant's share taken `pauses` times: 0.5 s doubling to 4 s, ±50%. */
export function tenantRetryMs(pauses: number, random: () => number = Math.random): number {
  return Math.round(500 * 2 ** Math.min(pauses, 3) * (0.5 + random()));
}

export class TenantGate {
  /** Each session's tenant, once read: a header's tenant never changes (bounded; cleared when full). */
  private readonly tenants = new Map<string, string>();
  private readonly running = new Map<string, number>();
  private readonly waiting = new Map<string, Array<() => void>>();

  constructor(readonly limit: number) {
    if (!Number.isInteger(limit) || limit < 1)
      throw new RangeError(`a tenant concurrency limit must be ≥ 1, got ${limit}`);
  }

  /** Runs `body` once fewer than `limit` of the tenant's operations run; waits (heartbeating) otherwise. */
  async run<T>(tenant: string, ctx: StepContext, heartbeatMs: number, body: () => Promise<T>): Promise<T> {
    await this.admit(tenant, ctx, heartbeatMs, Number.POSITIVE_INFINITY);
    try {
      return await body();
    } finally {
      this.release(tenant);
    }
  }

  /**
   * Takes one of the tenant's places, waiting (in order, heartbeating) at most `maxWaitMs`;
   * false when none came free by then (nothing is held). Every true is followed by one {@link release}.
   */
  async admit(tenant: string, ctx: StepContext, heartbeatMs: number, maxWaitMs: number): Promise<boolean> {
    if ((this.running.get(tenant) ?? 0) < this.limit) {
      this.running.set(tenant, (this.running.get(tenant) ?? 0) + 1);
      return true;
    }
    return new Promise<boolean>((resolve, reject) => {
      const queue = this.waiting.get(tenant) ?? [];
      this.waiting.set(tenant, queue);
      const alive = setInterval(() => ctx.heartbeat({ waitingForTenant: tenant }), heartbeatMs);
      const expiry = Number.isFinite(maxWaitMs) ? setTimeout(() => leave(() => resolve(false)), maxWaitMs) : undefined;
      // The place a releaser hands over (the running count stays as it is).
      const admitted = () => {
        settle();
        resolve(true);
      };
      const settle = () => {
        clearInterval(alive);
        clearTimeout(expiry);
        ctx.signal.removeEventListener('abort', abort);
      };
      const leave = (then: () => void) => {
        settle();
        const at = queue.indexOf(admitted);
        if (at >= 0) queue.splice(at, 1);
        then();
      };
      const abort = () =>
        leave(() =>
          reject(
            ctx.signal.reason instanceof Error
              ? ctx.signal.reason
              : new Error('cancelled while waiting for the tenant'),
          ),
        );
      queue.push(admitted);
      ctx.signal.addEventListener('abort', abort, { once: true });
    });
  }

  /** Gives a place back: to the tenant's next waiter, or frees it. */
  release(tenant: string): void {
    const next = this.waiting.get(tenant)?.shift();
    if (next) next();
    else {
      const left = (this.running.get(tenant) ?? 1) - 1;
      if (left > 0) this.running.set(tenant, left);
      else this.running.delete(tenant);
    }
  }

  /** The session's tenant: read from its header once per worker, not on every step. */
  async tenantOf(sessionId: string, read: () => Promise<{ tenant?: string }>): Promise<string> {
    let tenant = this.tenants.get(sessionId);
    if (tenant === undefined) {
      tenant = tenantOf(await read());
      if (this.tenants.size >= MAX_REMEMBERED_TENANTS) this.tenants.clear();
      this.tenants.set(sessionId, tenant);
    }
    return tenant;
  }

  /** How many of the tenant's operations run and wait now. */
  load(tenant: string): { running: number; waiting: number } {
    return { running: this.running.get(tenant) ?? 0, waiting: this.waiting.get(tenant)?.length ?? 0 };
  }
}

/**
 * Runs a session's operation under its tenant's share of the worker (none without a gate).
 * With `busy`, waits at most {@link TENANT_WAIT_MS} and returns `busy()` instead when no place came free.
 */
export async function asTenant<T>(
  deps: EngineDeps,
  sessionId: string,
  ctx: StepContext,
  body: () => Promise<T>,
  busy?: () => T,
): Promise<T> {
  const gate = deps.tenantGate;
  if (!gate) return body();
  const tenant = await gate.tenantOf(sessionId, () => deps.store.header(sessionId));
  if (!(await gate.admit(tenant, ctx, deps.heartbeatMs, busy ? TENANT_WAIT_MS : Number.POSITIVE_INFINITY)))
    return busy!();
  try {
    return await body();
  } finally {
    gate.release(tenant);
  }
}
