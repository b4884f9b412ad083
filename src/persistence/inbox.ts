/**
 * What every backend's inbox and session-key store (store.ts `InboxStore`, `SessionKeyStore`)
 * decides the same way: the checks of a `put`, the reference of a body, the refusal of a
 * different body under a key already held, a new session key, and the check of a stored one.
 */
import { createHash, randomBytes } from 'node:crypto';
import { SessionlogError, assertSessionId } from '../session/index.js';
import type { InboxRef, SessionKey } from './store.js';

/** The most UTF-8 bytes an inbox body may have (32 MiB). */
export const INBOX_MAX_BODY_BYTES = 32 * 1024 * 1024;

/** The most characters (UTF-16 code units) an inbox key may have. */
export const INBOX_MAX_KEY_CHARS = 300;

/** The bytes of a session data key (AES-256). */
export const SESSION_KEY_BYTES = 32;

const SESSION_KEY_ID_PATTERN = /^[0-9a-f]{16}$/;

/** Matches a UTF-16 surrogate that is not part of a pair (the `u` flag pairs the valid ones). */
const LONE_SURROGATE = /[\uD800-\uDFFF]/u;

/** Throws INVALID_ARGUMENT unless `key` is 1-300 characters of well-formed text. */
export function assertInboxKey(sessionId: string, key: unknown): asserts key is string {
  if (typeof key !== 'string' || key.length === 0 || key.length > INBOX_MAX_KEY_CHARS || LONE_SURROGATE.test(key)) {
    throw new SessionlogError(
      'INVALID_ARGUMENT',
      `an inbox key of session ${sessionId} must be 1-${INBOX_MAX_KEY_CHARS} characters of well-formed text (no lone surrogate), got ${typeof key === 'string' ? `${key.length} characters` : typeof key}`,
    );
  }
}

/** Hex SHA-256 of `body`'s UTF-8 bytes: the digest an {@link InboxRef} carries. */
export function digestOf(body: string): string {
  return createHash('sha256').update(body, 'utf8').digest('hex');
}

/** Validates `put` arguments and returns the body's reference: its UTF-8 size and hex SHA-256. */
export function inboxPutRef(sessionId: unknown, key: unknown, body: unknown): InboxRef {
  assertSessionId(sessionId);
  assertInboxKey(sessionId, key);
  // A lone surrogate would be stored as U+FFFD: the body read back would not be the one put.
  if (typeof body !== 'string' || LONE_SURROGATE.test(body)) {
    throw new SessionlogError(
      'INVALID_ARGUMENT',
      `the inbox body under key ${JSON.stringify(key)} of session ${sessionId} must be well-formed text (a string without lone surrogates)`,
    );
  }
  const bytes = Buffer.byteLength(body, 'utf8');
  if (bytes > INBOX_MAX_BODY_BYTES) {
    throw new SessionlogError(
      'MESSAGE_TOO_LARGE',
      `the inbox body under key ${JSON.stringify(key)} of session ${sessionId} has ${bytes} bytes of UTF-8, more than the ${INBOX_MAX_BODY_BYTES} an entry may hold; send it in smaller parts`,
    );
  }
  return { key, bytes, digest: digestOf(body) };
}

/** Validates `remove` arguments. */
export function assertInboxKeys(sessionId: unknown, keys: unknown): asserts keys is readonly string[] {
  assertSessionId(sessionId);
  if (!Array.isArray(keys))
    throw new SessionlogError('INVALID_ARGUMENT', `inbox remove of session ${sessionId} needs an array of keys`);
  for (const key of keys) assertInboxKey(sessionId, key);
}

/** The refusal of a body that differs from the one already stored under its key. */
export function inboxConflict(sessionId: string, key: string): SessionlogError {
  return new SessionlogError(
    'INVALID_MESSAGE',
    `the inbox of session ${sessionId} already holds a different body under key ${JSON.stringify(key)}; nothing was changed. A key names one input: derive a new key for a new input`,
  );
}

/** A new session key: 32 random bytes and a random 16-hex-digit id. */
export function newSessionKey(): SessionKey {
  return { id: randomBytes(8).toString('hex'), key: randomBytes(SESSION_KEY_BYTES) };
}

/** A stored session key, checked; CORRUPT_LOG (naming where) when it is not a 32-byte key with a 16-hex-digit id. */
export function storedSessionKey(id: unknown, key: unknown, where: string): SessionKey {
  if (
    typeof id !== 'string' ||
    !SESSION_KEY_ID_PATTERN.test(id) ||
    !Buffer.isBuffer(key) ||
    key.length !== SESSION_KEY_BYTES
  ) {
    throw new SessionlogError(
      'CORRUPT_LOG',
      `${where}: the stored session key is damaged (not a ${SESSION_KEY_BYTES}-byte key with a 16-hex-digit id); what was encrypted with it cannot be read. Restore it from a backup`,
    );
  }
  return { id, key };
}
