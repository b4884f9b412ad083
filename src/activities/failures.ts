/**
 * How engine errors become Temporal failures: what is retried and what is not. The one place
 * that decides it (DESIGN §5).
 */
import { ApplicationFailure, CancelledFailure } from '@temporalio/activity';
import { StepInterrupted, ToolAttemptFailed } from '../engine/errors.js';
import { ModelCallError } from '../model/errors.js';
import { RETRYABLE_CODES, SessionlogError, scrubSecrets } from '../session/index.js';

/** The Temporal failure for an error thrown by the engine. */
export function toTemporalFailure(error: unknown): unknown {
  if (error instanceof ApplicationFailure || error instanceof CancelledFailure) return error;
  if (error instanceof StepInterrupted) return new CancelledFailure(error.message);
  if (error instanceof ModelCallError) {
    const { failure } = error;
    if (!failure.retryable) return ApplicationFailure.nonRetryable(failure.message, failure.code);
    return ApplicationFailure.create({
      message: failure.message,
      type: failure.code,
      // `Retry-After: 0` (retry at once) leaves the delay to the retry policy: Temporal takes a
      // zero nextRetryDelay as no retry at all, which failed the turn.
      ...(failure.retryAfterMs !== undefined && failure.retryAfterMs > 0
        ? { nextRetryDelay: failure.retryAfterMs }
        : {}),
    });
  }
  if (error instanceof SessionlogError) {
    // The error table (session/errors.ts) says which codes a retry can fix: the store or a lock
    // was unreachable for a moment. Every other code fails the activity at once.
    if (RETRYABLE_CODES.has(error.code)) return ApplicationFailure.retryable(scrubSecrets(error.message), error.code);
    return ApplicationFailure.nonRetryable(scrubSecrets(error.message), error.code);
  }
  if (error instanceof ToolAttemptFailed)
    return ApplicationFailure.retryable(scrubSecrets(error.message), 'TOOL_ATTEMPT_FAILED');
  // Anything else (a bug, a dropped connection) is retried by the activity's policy; its text
  // goes into Temporal's history, so it is scrubbed like everything else.
  const message = error instanceof Error ? error.message : String(error);
  return ApplicationFailure.retryable(scrubSecrets(message), error instanceof Error ? error.name : 'Error');
}
