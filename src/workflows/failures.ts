/**
 * How the run reads a failure: whether it stops the session (the log cannot be written safely by
 * this run), its code, and the message to report; and how a failure that stops it does. Codes come from the one error table
 * (session/errors.ts): pure data, the only value workflow code takes from outside its folder.
 */
import { ActivityFailure, ApplicationFailure, log } from '@temporalio/workflow';
import { FATAL_CODES, isSessionErrorCode } from '../session/errors.js';
import type { SessionState } from './session-state.js';

/** A failure that stops the session: its log cannot be written safely by this run. */
export type Fatal = { code: string; message: string };

/** The failure that stops the session, if `error` is one (an activity refused by the log; with `anyRefusal`, any non-retryable refusal). */
export function fatalOf(error: unknown, anyRefusal = false): Fatal | undefined {
  const cause = error instanceof ActivityFailure ? error.cause : error;
  if (!(cause instanceof ApplicationFailure) || !cause.type) return undefined;
  if ((isSessionErrorCode(cause.type) && FATAL_CODES.has(cause.type)) || (anyRefusal && cause.nonRetryable))
    return { code: cause.type, message: cause.message };
  return undefined;
}

/** The code of an activity's application failure, if it has one. */
export function failureCode(error: unknown): string | undefined {
  const cause = error instanceof ActivityFailure ? error.cause : error;
  return cause instanceof ApplicationFailure && cause.type ? cause.type : undefined;
}

export function describeFailure(error: unknown): string {
  if (error instanceof ActivityFailure && error.cause) return error.cause.message;
  return error instanceof Error ? error.message : String(error);
}

/** Stops the session when `error` is a failure that stops it; rethrows any other. */
export function stopOn(state: SessionState, error: unknown, anyRefusal = false): void {
  const fatal = fatalOf(error, anyRefusal);
  if (!fatal) throw error;
  state.stop(fatal);
  log.error('session stopped', { sessionId: state.sessionId, code: fatal.code, message: fatal.message });
}

/** Runs an operation whose failure may stop the session; returns undefined once it has. */
export async function guarded<T>(
  state: SessionState,
  operation: () => Promise<T>,
  anyRefusal = false,
): Promise<T | undefined> {
  try {
    return await operation();
  } catch (error) {
    stopOn(state, error, anyRefusal);
    return undefined;
  }
}
