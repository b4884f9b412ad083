/** The gateway's probes: liveness needs nothing, readiness asks the store and Temporal. */
import { checkReadiness, probeStore, probeTemporal } from '../readiness.js';
import type { RouteContext, RouteResult } from '../route-table.js';

/** 200 when the store and the Temporal frontend answer, else 503 naming the one that does not. */
export async function readiness(ctx: RouteContext): Promise<RouteResult> {
  const report = await checkReadiness({
    store: () => probeStore(ctx.client.store),
    temporal: () => probeTemporal(ctx.client.temporal.connection),
  });
  return { status: report.ready ? 200 : 503, body: report };
}
