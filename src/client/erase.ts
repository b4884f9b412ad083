/**
 * The Temporal side of erasure (DESIGN §4.2): every run of a session's workflow is terminated
 * if it runs, then its history is deleted, so no user message text stays in Temporal either.
 */
import { WorkflowNotFoundError, type Client } from '@temporalio/client';

/** What was removed from Temporal. */
export type TemporalEraseReceipt = { terminated: boolean; deletedRuns: number };

/** Terminates the open run of `workflowId` (if any) and deletes the history of each of its runs. */
export async function eraseWorkflows(temporal: Client, workflowId: string): Promise<TemporalEraseReceipt> {
  let terminated = false;
  try {
    await temporal.workflow.getHandle(workflowId).terminate('session erased');
    terminated = true;
  } catch (error) {
    // Nothing runs (finished, or never started): only histories are left to delete.
    if (!(error instanceof WorkflowNotFoundError)) throw error;
  }
  const runs: string[] = [];
  for await (const execution of temporal.workflow.list({ query: `WorkflowId = '${workflowId.replace(/'/g, "\\'")}'` })) runs.push(execution.runId);
  let deletedRuns = 0;
  for (const runId of runs) {
    const workflowExecution = { workflowId, runId };
    try {
      // Visibility lists a run for a while after its history was deleted (by an earlier erase):
      // only a run that still exists counts as removed now.
      await temporal.workflowService.describeWorkflowExecution({ namespace: temporal.options.namespace, execution: workflowExecution });
      await temporal.workflowService.deleteWorkflowExecution({ namespace: temporal.options.namespace, workflowExecution });
      deletedRuns += 1;
    } catch (error) {
      // Already deleted (a concurrent or earlier erase): the goal is met.
      if (!isNotFound(error)) throw error;
    }
  }
  return { terminated, deletedRuns };
}

function isNotFound(error: unknown): boolean {
  return typeof error === 'object' && error !== null && (error as { code?: unknown }).code === 5;
}
