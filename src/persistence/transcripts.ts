/**
 * What every backend's transcript index (store.ts `TranscriptIndex`) decides the same way: the
 * checks of a caller scope, a transcript digest and an entry, and the check of a stored entry.
 */
import { SessionlogError, assertSessionId, isValidSessionId } from '../session/index.js';
import { assertSeqArgument } from './errors.js';
import type { TranscriptEntry } from './store.js';

/** The most characters a transcript scope may have. */
export const TRANSCRIPT_MAX_SCOPE_CHARS = 200;

/** 1-200 characters of printable ASCII (space to tilde). */
const SCOPE_PATTERN = new RegExp(`^[\\x20-\\x7e]{1,${TRANSCRIPT_MAX_SCOPE_CHARS}}$`);

/** A hex SHA-256, lowercase. */
const DIGEST_PATTERN = /^[0-9a-f]{64}$/;

/** Throws INVALID_ARGUMENT unless `scope` is 1-200 characters of printable ASCII. */
export function assertTranscriptScope(scope: unknown): asserts scope is string {
  if (typeof scope !== 'string' || !SCOPE_PATTERN.test(scope)) {
    throw new SessionlogError(
      'INVALID_ARGUMENT',
      `a transcript scope must be 1-${TRANSCRIPT_MAX_SCOPE_CHARS} characters of printable ASCII (such as a hash of the caller's token), got ${typeof scope === 'string' ? `${scope.length} characters` : typeof scope}`,
    );
  }
}

/** Throws INVALID_ARGUMENT unless `digest` is a hex SHA-256 (64 lowercase hex digits). */
export function assertTranscriptDigest(digest: unknown): asserts digest is string {
  if (typeof digest !== 'string' || !DIGEST_PATTERN.test(digest)) {
    throw new SessionlogError(
      'INVALID_ARGUMENT',
      `a transcript digest must be a hex SHA-256 (64 lowercase hex digits), got ${typeof digest === 'string' ? JSON.stringify(digest.slice(0, 80)) : typeof digest}`,
    );
  }
}

/** Validates `get` arguments. */
export function assertTranscriptKey(scope: unknown, digest: unknown): void {
  assertTranscriptScope(scope);
  assertTranscriptDigest(digest);
}

/**
 * Validates `put` arguments and returns the entry with only its two fields: INVALID_ARGUMENT for a
 * bad scope, digest or seq, INVALID_SESSION_ID for a bad session id. Whether the session exists
 * is the backend's to check.
 */
export function transcriptPutEntry(scope: unknown, digest: unknown, entry: unknown): TranscriptEntry {
  assertTranscriptKey(scope, digest);
  if (typeof entry !== 'object' || entry === null)
    throw new SessionlogError('INVALID_ARGUMENT', 'a transcript entry must be an object {sessionId, seq}');
  const { sessionId, seq } = entry as Partial<Record<keyof TranscriptEntry, unknown>>;
  assertSessionId(sessionId);
  assertSeqArgument('a transcript entry seq', seq);
  return { sessionId, seq };
}

/** The refusal of a stored transcript index record that is damaged (`what` it should have been). */
export function damagedTranscriptRecord(where: string, what: string): SessionlogError {
  return new SessionlogError(
    'CORRUPT_LOG',
    `${where}: the stored transcript index entry is damaged (not ${what}); remove it or restore it from a backup`,
  );
}

/** A stored entry, checked; CORRUPT_LOG (naming where) when it is not a session id and a seq. */
export function storedTranscriptEntry(sessionId: unknown, seq: unknown, where: string): TranscriptEntry {
  if (!isValidSessionId(sessionId) || typeof seq !== 'number' || !Number.isSafeInteger(seq) || seq < 0)
    throw damagedTranscriptRecord(where, 'a session id and a seq');
  return { sessionId, seq };
}
