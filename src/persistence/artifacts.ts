/**
 * Artifact store (DESIGN §4): full tool output and spilled text, addressed by an opaque
 * locator, namespaced per session. Reads name the session asking, and a session reads only its
 * own artifacts (issue 9): a locator of another session is ARTIFACT_FOREIGN on every backend.
 * Also the naming every backend shares: safe unique names, locators, and the checks of a read.
 */
import { createHash } from 'node:crypto';
import {
  SessionlogError,
  assertSessionId,
  isMediaType,
  mediaExtension,
  mediaLocator,
  parseMediaLocator,
  type MediaType,
  type StoredMedia,
} from '../session/index.js';
import { assertSeqArgument } from './errors.js';

export type ArtifactRef = {
  /** Opaque locator: `artifact:<sessionId>/<name>`; only the store that issued it can read it. */
  locator: string;
  /** UTF-8 byte length of the content. */
  bytes: number;
};

export type ArtifactPut = {
  sessionId: string;
  /** A suggested name, e.g. `<tool>-<callId>.txt`; the store makes it unique and safe. */
  name: string;
  content: string;
};

/** What `putMedia` stores: bytes its caller has checked (session/media.ts `inspectMedia`) and what the check read. */
export type MediaPut = {
  sessionId: string;
  bytes: Uint8Array;
  mediaType: MediaType;
  /** Pixel size, for images. */
  width?: number;
  height?: number;
};

const ARTIFACT_NAME_PATTERN = /^(?!\.)[A-Za-z0-9._-]{1,160}$/;
const LOCATOR_PATTERN = /^artifact:([^/]+)\/([^/]+)$/;

/** A safe file/row name from a suggested one: `[A-Za-z0-9._-]`, no leading dot, at most 120 characters. */
export function sanitizeArtifactName(suggested: string): string {
  const cleaned = suggested
    .replace(/[^A-Za-z0-9._-]+/g, '_')
    .replace(/^[.]+/, '')
    .slice(0, 120);
  return cleaned.length > 0 ? cleaned : 'artifact';
}

/** Candidate unique names: the name itself, then `stem-2.ext`, `stem-3.ext`, … */
export function* artifactNameCandidates(name: string): Generator<string> {
  yield name;
  const dot = name.lastIndexOf('.');
  const stem = dot > 0 ? name.slice(0, dot) : name;
  const ext = dot > 0 ? name.slice(dot) : '';
  for (let n = 2; ; n++) yield `${stem}-${n}${ext}`;
}

/** The unique names to try for a suggested name, in order: the sanitized name, then numbered variants. */
export function uniqueArtifactNames(suggested: unknown): Generator<string> {
  return artifactNameCandidates(sanitizeArtifactName(String(suggested ?? '')));
}

export function artifactLocator(sessionId: string, name: string): string {
  return `artifact:${sessionId}/${name}`;
}

/**
 * The artifact name a locator this store issued points at, for a read by session `sessionId`.
 * A locator of another session is ARTIFACT_FOREIGN; anything malformed is ARTIFACT_NOT_FOUND.
 */
export function ownArtifactName(sessionId: unknown, locator: unknown): string {
  assertSessionId(sessionId);
  const match = typeof locator === 'string' ? LOCATOR_PATTERN.exec(locator) : null;
  if (!match) {
    throw new SessionlogError(
      'ARTIFACT_NOT_FOUND',
      `artifact locator ${JSON.stringify(String(locator).slice(0, 200))} is not of the form artifact:<sessionId>/<name>; use a locator returned by put()`,
    );
  }
  const [, owner, name] = match as unknown as [string, string, string];
  if (owner !== sessionId) {
    throw new SessionlogError(
      'ARTIFACT_FOREIGN',
      `artifact locator ${JSON.stringify((locator as string).slice(0, 200))} does not belong to session ${sessionId}; a session reads only the artifacts stored under its own id`,
    );
  }
  if (!ARTIFACT_NAME_PATTERN.test(name)) throw artifactNotFound(locator as string);
  return name;
}

export function artifactNotFound(locator: string): SessionlogError {
  return new SessionlogError(
    'ARTIFACT_NOT_FOUND',
    `no artifact ${JSON.stringify(locator.slice(0, 200))} in this store`,
  );
}

/** The `read(sessionId, locator, offset, limit)` window over a whole artifact text. */
export function artifactWindow(content: string, offset: unknown, limit: unknown): { text: string; total: number } {
  assertSeqArgument('offset', offset);
  assertSeqArgument('limit', limit);
  return { text: content.slice(offset, offset + limit), total: content.length };
}

/** Validates a `put` before anything is stored: an id and string content. */
export function assertArtifactPut(input: ArtifactPut): void {
  assertSessionId(input?.sessionId);
  if (typeof input.content !== 'string')
    throw new SessionlogError('INVALID_ARGUMENT', 'artifact content must be a string');
}

/** Validates a `putMedia` before anything is stored: an id, bytes and a media type sessionlog stores. */
export function assertMediaPut(input: MediaPut): void {
  assertSessionId(input?.sessionId);
  if (!(input.bytes instanceof Uint8Array) || input.bytes.byteLength === 0)
    throw new SessionlogError('INVALID_ARGUMENT', 'media bytes must be a non-empty Uint8Array');
  if (!isMediaType(input.mediaType))
    throw new SessionlogError('UNSUPPORTED_MEDIA_TYPE', `media type ${String(input.mediaType)} is not stored`);
}

/** The content-addressed name and the StoredMedia of a `putMedia`: `media-<sha256>.<ext>` in the session's namespace. */
export function storedMediaOf(input: MediaPut): { name: string; media: StoredMedia } {
  const sha256 = createHash('sha256').update(input.bytes).digest('hex');
  const locator = mediaLocator(input.sessionId, sha256, input.mediaType);
  const media: StoredMedia = {
    kind: 'artifact',
    locator,
    mediaType: input.mediaType,
    bytes: input.bytes.byteLength,
    sha256,
    ...(input.width !== undefined ? { width: input.width } : {}),
    ...(input.height !== undefined ? { height: input.height } : {}),
  };
  return { name: `media-${sha256}.${mediaExtension(input.mediaType)}`, media };
}

/**
 * The stored name a media locator points at, for a read by session `sessionId`: ARTIFACT_FOREIGN
 * for another session's, ARTIFACT_NOT_FOUND for one not of the form `artifact:<sessionId>/media-<sha256>.<ext>`.
 */
export function ownMediaName(sessionId: unknown, locator: unknown): string {
  const name = ownArtifactName(sessionId, locator);
  if (!parseMediaLocator(locator)) throw artifactNotFound(String(locator));
  return name;
}
