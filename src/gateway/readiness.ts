/**
 * Readiness (DESIGN §8 "Operations"): a process that serves sessions is ready when its store
 * and the Temporal frontend answer. The gateway's `GET /readyz` checks both on each request;
 * `sessionlog worker` runs the same probes in the background and serves the result on its
 * operations listener.
 */
import { z } from 'zod';

/** How long one probe may take before it counts as failed. */
export const PROBE_TIMEOUT_MS = 2_000;

/** A session id no one creates: asking whether it exists is a cheap round trip to the store. */
const PROBE_SESSION_ID = 'readiness-probe';

/** What a probe needs of a Temporal connection (the client's `Connection` and the worker's `NativeConnection` both fit). */
export type TemporalConnectionLike = {
  workflowService: { getSystemInfo(request: object): Promise<unknown> };
  withDeadline<R>(deadline: number | Date, fn: () => Promise<R>): Promise<R>;
};

/** What a probe needs of a session store (every `SessionStore` fits). */
export type StoreLike = { exists(sessionId: string): Promise<boolean> };

/** Resolves when the store answers a read. */
export async function probeStore(store: StoreLike): Promise<void> {
  await store.exists(PROBE_SESSION_ID);
}

/** Resolves when the Temporal frontend answers `GetSystemInfo` within `timeoutMs`. */
export async function probeTemporal(connection: TemporalConnectionLike, timeoutMs = PROBE_TIMEOUT_MS): Promise<void> {
  await connection.withDeadline(Date.now() + timeoutMs, () => connection.workflowService.getSystemInfo({}));
}

export const dependencyState = z.object({
  ok: z.boolean(),
  error: z.string().optional().describe('why the last probe failed'),
  since: z
    .number()
    .int()
    .optional()
    .describe('since when (epoch ms) it has been in this state, where the process keeps track'),
});

/** The body of `/readyz` (200 when ready, 503 otherwise) on the gateway and the worker. */
export const readinessResponse = z.object({
  ready: z.boolean(),
  reason: z.string().optional().describe('why the process is not ready'),
  checks: z.record(z.string(), dependencyState),
});

export type ReadinessReport = z.infer<typeof readinessResponse>;

function oneLine(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).split('\n')[0]!.slice(0, 300);
}

function withTimeout(promise: Promise<void>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    promise,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

/** Runs the probes at once (each bounded by `timeoutMs`) and reports the first failure as the reason. */
export async function checkReadiness(
  probes: Record<string, () => Promise<void>>,
  timeoutMs = PROBE_TIMEOUT_MS,
): Promise<ReadinessReport> {
  const entries = await Promise.all(
    Object.entries(probes).map(async ([name, probe]): Promise<[string, { ok: boolean; error?: string }]> => {
      try {
        await withTimeout(probe(), timeoutMs);
        return [name, { ok: true }];
      } catch (error) {
        return [name, { ok: false, error: oneLine(error) }];
      }
    }),
  );
  const checks: ReadinessReport['checks'] = Object.fromEntries(entries);
  const down = entries.find(([, state]) => !state.ok);
  return down
    ? { ready: false, reason: `${down[0]} unreachable: ${down[1].error ?? 'unknown'}`, checks }
    : { ready: true, checks };
}
