/**
 * Input checks of the client, the boundary every surface (HTTP, CLI, the TypeScript API)
 * passes through before anything reaches Temporal: well-formed text (gRPC refuses a lone
 * surrogate as invalid UTF-8) and message ids in the documented alphabet.
 */
import { SessionlogError, assertSessionId } from '../session/index.js';
import { NOTE_LIMITS } from '../workflows/api.js';

/** Matches a UTF-16 surrogate that is not part of a pair (the `u` flag pairs the valid ones). */
export const LONE_SURROGATE = /[\uD800-\uDFFF]/u;

/** True when `text` has no lone surrogate (it encodes to UTF-8 and back unchanged). */
export function isWellFormed(text: string): boolean {
  return !LONE_SURROGATE.test(text);
}

/** Throws INVALID_MESSAGE unless `id` is 1-128 well-formed characters. */
export function assertMessageId(id: unknown): asserts id is string {
  if (typeof id !== 'string' || id.length === 0 || id.length > 128 || !isWellFormed(id)) {
    throw new SessionlogError(
      'INVALID_MESSAGE',
      'a message id must be 1-128 characters of well-formed text (no lone UTF-16 surrogates)',
    );
  }
}

/** Throws EMPTY_MESSAGE, MESSAGE_TOO_LARGE or INVALID_MESSAGE for text a session would refuse. */
export function assertMessageText(text: unknown, maxBytes: number): asserts text is string {
  if (typeof text !== 'string') throw new SessionlogError('INVALID_MESSAGE', 'message text must be a string');
  if (text.trim().length === 0) throw new SessionlogError('EMPTY_MESSAGE', 'message text must not be empty or blank');
  if (!isWellFormed(text))
    throw new SessionlogError(
      'INVALID_MESSAGE',
      'message text contains a lone UTF-16 surrogate; send well-formed text',
    );
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes > maxBytes)
    throw new SessionlogError(
      'MESSAGE_TOO_LARGE',
      `message is ${bytes} bytes; the limit is ${maxBytes}; split it or attach it as a file`,
    );
}

/** Throws INVALID_ARGUMENT unless `metadata` is within a note's bounds (workflows/api.ts `NOTE_LIMITS`). */
export function assertNoteMetadata(metadata: { values: Record<string, string>; messageId?: string }): void {
  const { values } = metadata;
  if (typeof values !== 'object' || values === null || Object.keys(values).length > NOTE_LIMITS.metadataKeys)
    throw new SessionlogError('INVALID_ARGUMENT', `metadata holds at most ${NOTE_LIMITS.metadataKeys} string pairs`);
  for (const [key, value] of Object.entries(values)) {
    if (
      typeof value !== 'string' ||
      key.length > NOTE_LIMITS.keyChars ||
      value.length > NOTE_LIMITS.valueChars ||
      !isWellFormed(key) ||
      !isWellFormed(value)
    ) {
      throw new SessionlogError(
        'INVALID_ARGUMENT',
        `metadata keys are at most ${NOTE_LIMITS.keyChars} and values at most ${NOTE_LIMITS.valueChars} characters of well-formed text`,
      );
    }
  }
  if (metadata.messageId !== undefined) assertMessageId(metadata.messageId);
}

export { assertSessionId };
