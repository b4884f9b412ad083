/**
 * The error vocabulary of the stores: the refusals every backend throws in the same words (an
 * unknown or erased session, a closed store, a header that differs or cannot be read), and the
 * argument checks at every backend's public boundary.
 */
import { SessionlogError, assertSessionId } from '../session/index.js';
import type { AppendOptions } from './store.js';
import { assertInboxKeys } from './inbox.js';

/** Throws INVALID_ARGUMENT unless `value` is a non-negative safe integer. */
export function assertSeqArgument(name: string, value: unknown): asserts value is number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
    throw new SessionlogError('INVALID_ARGUMENT', `${name} must be a non-negative safe integer, got ${String(value)}`);
  }
}

/** Validates `append` arguments that do not depend on stored state. */
export function assertAppendArguments(
  id: unknown,
  events: unknown,
  options: unknown,
): asserts options is AppendOptions {
  assertSessionId(id);
  if (!Array.isArray(events) || events.length === 0) {
    throw new SessionlogError('INVALID_ARGUMENT', `append to session ${id} needs a non-empty array of events`);
  }
  const o = options as Partial<AppendOptions> | undefined;
  if (typeof o !== 'object' || o === null)
    throw new SessionlogError('INVALID_ARGUMENT', 'append needs options {expectedSeq, op}');
  assertSeqArgument('expectedSeq', o.expectedSeq);
  if (typeof o.op !== 'string' || o.op.length === 0) {
    throw new SessionlogError(
      'INVALID_ARGUMENT',
      `append op must be a non-empty string (the batch's idempotency key), got ${String(o.op)}`,
    );
  }
  if (o.delivered !== undefined) assertInboxKeys(id, o.delivered);
}

/** Validates `readFrom` arguments. */
export function assertReadArguments(id: unknown, fromSeq: unknown, limit: unknown): void {
  assertSessionId(id);
  assertSeqArgument('fromSeq', fromSeq);
  if (limit !== undefined) assertSeqArgument('limit', limit);
}

export function notFound(id: string): SessionlogError {
  return new SessionlogError(
    'SESSION_NOT_FOUND',
    `session ${id} does not exist in this store; create it first or check the id`,
  );
}

export function storeClosed(): SessionlogError {
  return new SessionlogError('STORE_CLOSED', 'the session store is closed; open a new one with openStore()');
}

/** The error for `create` with a header that differs from the stored one. */
export function alreadyExists(id: string): SessionlogError {
  return new SessionlogError(
    'SESSION_ALREADY_EXISTS',
    `session ${id} already exists with a different header; pick another id or load the existing session`,
  );
}

/** The error for `create` of an id whose tombstone still lasts. */
export function sessionErased(id: string, erasedAt: number, until: number): SessionlogError {
  return new SessionlogError(
    'SESSION_ERASED',
    `session ${id} was erased at ${new Date(erasedAt).toISOString()} and its id cannot be reused until ${new Date(until).toISOString()}; pick another id`,
  );
}

/** The error for a stored header that cannot be read. */
export function corruptHeaderError(where: string, reason: string, cause?: unknown): SessionlogError {
  return new SessionlogError(
    'CORRUPT_LOG',
    `${where}: the stored header (the record before the events) is damaged: ${reason}. Nothing was changed; restore it from a backup`,
    cause === undefined ? undefined : { cause },
  );
}
