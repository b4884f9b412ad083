/**
 * The cancellation scope a run's turn loop and its update handlers run in (patch `RUN_SCOPE`),
 * so that a long run keeps nothing per turn.
 *
 * In the Temporal SDK every activity, timer, `condition` and child scope made in a cancellable
 * scope attaches a handler to that scope's `cancelRequested` promise, and a promise keeps its
 * handlers until it settles. The root scope's settles only if the workflow is cancelled, so a run
 * made in it keeps every turn's handlers, their closures and the async context they were made in
 * (an update's scope among them) until the run ends: ~3.9 KB a turn (BENCHMARKS.md, "Soak").
 *
 * This scope is not cancellable, so what runs directly in it attaches nothing, and its
 * `cancelRequested` is a promise that has already settled (fulfilled: it never rejects), so the
 * child scopes made in it (a model step's, a `condition` with a timeout) attach their handler and
 * are let go. A child scope is still cancelled by its own `cancel()` (the `cancel` signal).
 *
 * A cancel of the workflow itself (Temporal's `cancel`, which used to fail whatever was pending)
 * is handed to the run instead, once: it cancels the running turn as the `cancel` signal does
 * (the log says `aborted`) and closes the session; the workflow then ends as cancelled
 * (`endIfCancelled`).
 */
import { CancellationScope, CancelledFailure } from '@temporalio/workflow';

export class RunScope extends CancellationScope {
  /** Made in the workflow's root scope; `onWorkflowCancel` runs once if the workflow is cancelled. */
  constructor(onWorkflowCancel: () => void) {
    super({ cancellable: false });
    // The SDK reads `cancelRequested` each time it attaches a handler (`.catch`); one that has
    // settled keeps none. It is fulfilled, never rejected, so no handler of it ever runs.
    Object.defineProperty(this, 'cancelRequested', { value: Promise.resolve() as Promise<never> });
    // The only handler this run leaves on the root scope.
    this.parent?.cancelRequested.catch(onWorkflowCancel);
  }

  /** After the run: a cancelled workflow ends as cancelled (the SDK reports it so to Temporal). */
  endIfCancelled(): void {
    if (this.parent?.consideredCancelled) throw new CancelledFailure('the session workflow was cancelled');
  }
}
