/**
 * Errors the engine raises about the attempt itself (the activity layer maps them to Temporal
 * failures). Model failures are `ModelCallError` (src/model/errors.ts); log and input errors
 * are `SessionlogError`.
 */

/**
 * The step stopped because its signal aborted. `cancelled`: the workflow asked, and the
 * partial reply was logged as interrupted. Otherwise the run is gone, timed out or the worker
 * is stopping: nothing was written, and the owning (or next) run closes the turn from the log.
 */
export class StepInterrupted extends Error {
  constructor(
    readonly cancelled: boolean,
    message: string,
  ) {
    super(message);
    this.name = 'StepInterrupted';
  }
}

/** A tool threw and attempts remain: the activity retries it. */
export class ToolAttemptFailed extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'ToolAttemptFailed';
  }
}
