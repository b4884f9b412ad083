/**
 * Erasure (DESIGN §4.2), as `SessionClient.erase` does it (session-client.ts documents it): every
 * run of a session's workflow is terminated if it runs, then its history is deleted, so no user
 * message text stays in Temporal either; then the store removes the session and its key.
 */
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import { notFound } from '../persistence/errors.js';
import { sessionOwner } from '../persistence/tenants.js';
import { workflowIdFor } from '../workflows/api.js';
import type { ClientCore } from './core.js';
import { assertSessionId } from './inputs.js';
import { SessionPayloadCodec } from './session-codec.js';
import type { EraseReceipt } from './session-client.js';

/** What was removed from Temporal. */
export type TemporalEraseReceipt = { terminated: boolean; deletedRuns: number };

/** Erases the session from Temporal, then from the store, and forgets its key. */
export async function eraseSession(core: ClientCore, sessionId: string): Promise<EraseReceipt> {
  assertSessionId(sessionId);
  // Another tenant's session is refused before its workflow is touched (as for no session).
  if (core.tenant !== undefined && (await sessionOwner(core.options.store, core.tenant, sessionId)) === 'foreign') {
    core.options.onCrossTenant?.({ tenant: core.tenant, sessionId, operation: 'erase' });
    throw notFound(sessionId);
  }
  const temporal = await eraseWorkflows(core.temporal, workflowIdFor(sessionId));
  const store = await core.store.erase(sessionId, core.scope);
  // The key is destroyed: this process must not seal anything with its cached copy.
  for (const codec of core.temporal.options.loadedDataConverter.payloadCodecs)
    if (codec instanceof SessionPayloadCodec) codec.forget(sessionId);
  return { sessionId, store, temporal };
}

/** Terminates the open run of `workflowId` (if any) and deletes the history of each of its runs. */
export async function eraseWorkflows(temporal: Client, workflowId: string): Promise<TemporalEraseReceipt> {
  const handle = temporal.workflow.getHandle(workflowId);
  let terminated = false;
  try {
    await handle.terminate('session erased');
    terminated = true;
  } catch (error) {
    // Nothing runs (finished, or never started): only histories are left to delete.
    if (!isGoneFromTemporal(error)) throw error;
  }
  // Visibility lags: it may not list runs that just started (continue-as-new right before the
  // erase). The newest run (closed by now) and the runs it continues are taken from Temporal itself.
  const runs = new Set<string>();
  try {
    for (
      let runId: string | undefined = (await handle.describe()).runId;
      runId && !runs.has(runId);
      runId = await continuedFrom(temporal, workflowId, runId)
    )
      runs.add(runId);
  } catch (error) {
    // No run left at all (erased before, or never started).
    if (!isGoneFromTemporal(error)) throw error;
  }
  for await (const execution of temporal.workflow.list({ query: `WorkflowId = '${workflowId.replace(/'/g, "\\'")}'` }))
    runs.add(execution.runId);
  let deletedRuns = 0;
  for (const runId of runs) {
    const workflowExecution = { workflowId, runId };
    try {
      // Visibility lists a run for a while after its history was deleted (by an earlier erase):
      // only a run that still exists counts as removed now.
      await temporal.workflowService.describeWorkflowExecution({
        namespace: temporal.options.namespace,
        execution: workflowExecution,
      });
      await temporal.workflowService.deleteWorkflowExecution({
        namespace: temporal.options.namespace,
        workflowExecution,
      });
      deletedRuns += 1;
    } catch (error) {
      // Already deleted (a concurrent or earlier erase): the goal is met.
      if (!isGoneFromTemporal(error)) throw error;
    }
  }
  return { terminated, deletedRuns };
}

/** The run that `runId` continued as new from, if any (and if its history is still there). */
async function continuedFrom(temporal: Client, workflowId: string, runId: string): Promise<string | undefined> {
  try {
    const { history } = await temporal.workflowService.getWorkflowExecutionHistory({
      namespace: temporal.options.namespace,
      execution: { workflowId, runId },
      maximumPageSize: 1,
    });
    return history?.events?.[0]?.workflowExecutionStartedEventAttributes?.continuedExecutionRunId || undefined;
  } catch (error) {
    // Deleted already: the chain ends here (visibility lists whatever is older).
    if (isGoneFromTemporal(error)) return undefined;
    throw error;
  }
}

/**
 * Whether a Temporal call failed because the run is gone (deleted, or being deleted). The server
 * says so in two ways: NOT_FOUND (code 5) once the run's record is gone, and, while a deletion is
 * under way (the record is still there, its history already removed), INVALID_ARGUMENT (code 3)
 * "Requested workflow history not found, may have passed retention period."
 */
export function isGoneFromTemporal(error: unknown): boolean {
  if (error instanceof WorkflowNotFoundError) return true;
  if (typeof error !== 'object' || error === null) return false;
  const { code, details } = error as { code?: unknown; details?: unknown };
  if (code === 5) return true;
  return code === 3 && typeof details === 'string' && /history not found/i.test(details);
}
