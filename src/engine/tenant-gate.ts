/**
 * Per-tenant concurrency on a shared worker (DESIGN §5.3, issue 26): at most `limit` model
 * steps and compactions of one tenant run at once on this worker; more wait their turn, in
 * order, heartbeating. So one tenant's burst of sessions cannot take every model call of a
 * worker others share: another tenant's step starts while the first tenant's wait.
 *
 * The waiting steps still hold their activity slots (Temporal's `maxConcurrentActivityTaskExecutions`,
 * 100 by default): keep that well above the limit times the tenants busy at once.
 */
import { tenantOf } from '../session/index.js';
import type { EngineDeps } from './deps.js';
import type { StepContext } from './types.js';

const MAX_REMEMBERED_TENANTS = 10_000;

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
    if ((this.running.get(tenant) ?? 0) >= this.limit) {
      await new Promise<void>((resolve, reject) => {
        const queue = this.waiting.get(tenant) ?? [];
        this.waiting.set(tenant, queue);
        const alive = setInterval(() => ctx.heartbeat({ waitingForTenant: tenant }), heartbeatMs);
        const admit = () => {
          clearInterval(alive);
          ctx.signal.removeEventListener('abort', abort);
          resolve();
        };
        const abort = () => {
          clearInterval(alive);
          const at = queue.indexOf(admit);
          if (at >= 0) queue.splice(at, 1);
          reject(
            ctx.signal.reason instanceof Error
              ? ctx.signal.reason
              : new Error('cancelled while waiting for the tenant'),
          );
        };
        queue.push(admit);
        ctx.signal.addEventListener('abort', abort, { once: true });
      });
    } else {
      this.running.set(tenant, (this.running.get(tenant) ?? 0) + 1);
    }
    try {
      return await body();
    } finally {
      // The slot passes to the tenant's next waiter, or is freed.
      const next = this.waiting.get(tenant)?.shift();
      if (next) next();
      else {
        const left = (this.running.get(tenant) ?? 1) - 1;
        if (left > 0) this.running.set(tenant, left);
        else this.running.delete(tenant);
      }
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

/** Runs a session's operation under its tenant's share of the worker (none without a gate). */
export async function asTenant<T>(
  deps: EngineDeps,
  sessionId: string,
  ctx: StepContext,
  body: () => Promise<T>,
): Promise<T> {
  const gate = deps.tenantGate;
  if (!gate) return body();
  const tenant = await gate.tenantOf(sessionId, () => deps.store.header(sessionId));
  return gate.run(tenant, ctx, deps.heartbeatMs, body);
}
