/**
 * What every part of a run shares: its input and tunables, its state, its activity proxies, what
 * every activity input starts with, and the scope of the running model step or tool round.
 */
import { CancellationScope, proxyActivities, proxyLocalActivities } from '@temporalio/workflow';
import type { SessionActivities } from '../activities/activities.js';
import type { SessionTunables, SessionWorkflowInput } from './api.js';
import type { SessionState } from './session-state.js';

export type Activities = ReturnType<typeof activityProxies>;

export type RunContext = {
  readonly input: SessionWorkflowInput;
  readonly tunables: SessionTunables;
  readonly state: SessionState;
  readonly act: Activities;
  /** What every activity input starts with. */
  readonly base: { sessionId: string; runId: string };
  readonly work: RunningWork;
};

export function activityProxies(tunables: SessionTunables) {
  const local = proxyLocalActivities<SessionActivities>({
    startToCloseTimeout: tunables.appendStartToCloseMs,
    // No attempt limit: these appends open, close and continue turns, and a store that refuses
    // writes for a while (UNAVAILABLE) must not fail the workflow and every waiting `send` with it.
    // A refusal that retrying cannot fix is non-retryable and fails at once.
    retry: { initialInterval: 200, maximumInterval: 5_000 },
  });
  // Which failures are retried is decided once, by the activities from the error table
  // (activities/failures.ts): every session error code but a retryable one fails its activity as
  // non-retryable. These policies therefore name no error types. Versioning note: they used to
  // list a few (`nonRetryableErrorTypes`); a retry policy is an option of the schedule command,
  // not compared on replay, so histories recorded with those lists replay unchanged
  // (test/workflows/replay.test.ts).
  const model = proxyActivities<SessionActivities>({
    startToCloseTimeout: tunables.modelStartToCloseMs,
    heartbeatTimeout: tunables.modelHeartbeatMs,
    cancellationType: 'WAIT_CANCELLATION_COMPLETED',
    retry: {
      maximumAttempts: tunables.modelMaxAttempts,
      initialInterval: tunables.modelRetryInitialMs,
      maximumInterval: 30_000,
    },
  });
  const compactor = proxyActivities<SessionActivities>({
    startToCloseTimeout: tunables.modelStartToCloseMs,
    heartbeatTimeout: tunables.modelHeartbeatMs,
    retry: {
      maximumAttempts: tunables.compactionMaxAttempts,
      initialInterval: 1_000,
      maximumInterval: 30_000,
    },
  });
  const tools = proxyActivities<SessionActivities>({
    startToCloseTimeout: tunables.toolStartToCloseMs,
    heartbeatTimeout: Math.max(tunables.modelHeartbeatMs, 5_000),
    cancellationType: 'WAIT_CANCELLATION_COMPLETED',
    retry: { maximumAttempts: tunables.toolMaxAttempts, initialInterval: 1_000, maximumInterval: 30_000 },
  });
  return { local, model, compactor, tools };
}

/**
 * The scope of the running model step or tool round, which `cancel` cancels until it is left.
 * Its callers run it inline, not through an async wrapper (a wrapper's promises are paid every
 * step under the SDK's stack-trace hook, BENCHMARKS.md).
 */
export class RunningWork {
  private current: CancellationScope | undefined;

  enter(): CancellationScope {
    this.current = new CancellationScope();
    return this.current;
  }

  leave(scope: CancellationScope): void {
    if (this.current === scope) this.current = undefined;
  }

  cancel(): void {
    this.current?.cancel();
  }
}
