/**
 * Media a caller sends (issue 50, DESIGN §3): the caller's parts, and the checks every part passes
 * before anything is stored. Pure: no I/O; the client stores what these checks accept.
 *
 * - `inspectMedia(bytes, declaredType, maxBytes)` reads the bytes themselves: the magic bytes must
 *   be of the declared type, the size within the limit, an image's pixel size readable from its
 *   own header (PNG IHDR, JPEG SOF, GIF screen descriptor, WebP VP8/VP8L/VP8X) and the image
 *   complete (a PNG's chunks up to IEND, a JPEG's EOI after its scan, a GIF's trailer, a WebP's
 *   RIFF length); a PDF starts with `%PDF-`; plain text is well-formed UTF-8.
 * - `checkUserParts(parts, limits)` checks the shape of a whole `content` array and decodes and
 *   inspects each part's bytes, returning the parts ready to store.
 *
 * Errors are SessionlogErrors `INVALID_MEDIA` (bad bytes, bad base64, a URL that is not
 * http(s), a malformed artifact reference), `MEDIA_TOO_LARGE` and `UNSUPPORTED_MEDIA_TYPE`
 * (`INVALID_MESSAGE` for a part of no known shape). Naming the part: every error raised while
 * checking part `i` of a message's content carries `part: i` (the index into the `content` array
 * the caller sent) and its message starts with `content[i]: `, so a surface can name its own
 * parameter (`param=messages[0].content[1]`) from `error.part` without parsing the message.
 */
import { SessionlogError, type SessionErrorCode } from './errors.js';
import type { ImageBlock, MediaType, StoredMedia } from './messages.js';

/** The OpenAI detail level a caller may give an image. */
export type ImageDetail = NonNullable<ImageBlock['detail']>;

/**
 * A media part as a caller sends it: bytes (a `Uint8Array` or base64 text) with their declared
 * media type, an `http(s)` image URL (a `data:` URL is read as inline bytes), or the locator of a
 * medium this session stored before (`artifact:<sessionId>/media-<sha256>.<ext>`).
 */
export type MediaInput =
  | { type: 'image'; data: Uint8Array | string; mediaType: string; detail?: ImageDetail }
  | { type: 'image'; url: string; detail?: ImageDetail }
  | { type: 'file'; data: Uint8Array | string; mediaType: string; filename?: string }
  | { type: 'image' | 'file'; artifact: string; detail?: ImageDetail; filename?: string };

/** A part of a user message as a caller sends it: text or media. */
export type UserPart = { type: 'text'; text: string } | MediaInput;

/** What `inspectMedia` read from the bytes. */
export type InspectedMedia = { mediaType: MediaType; width?: number; height?: number };

/** A part `checkUserParts` accepted, ready to be stored (bytes) or resolved (artifact). */
export type CheckedPart =
  | { type: 'text'; text: string }
  | {
      type: 'image' | 'file';
      kind: 'bytes';
      bytes: Uint8Array;
      mediaType: MediaType;
      width?: number;
      height?: number;
      detail?: ImageDetail;
      filename?: string;
    }
  | { type: 'image'; kind: 'url'; url: string; detail?: ImageDetail }
  | { type: 'image' | 'file'; kind: 'artifact'; locator: string; detail?: ImageDetail; filename?: string };

/** The limits `checkUserParts` applies. */
export type MediaLimits = { maxBytes: number };

/** The largest medium a message or an upload may hold by default (SESSIONLOG_MAX_MEDIA_BYTES): 20 MiB. */
export const DEFAULT_MAX_MEDIA_BYTES = 20 * 1024 * 1024;
/** The largest medium a deployment may be configured to accept (SESSIONLOG_MAX_MEDIA_BYTES): 512 MiB. */
export const MAX_MEDIA_BYTES_LIMIT = 512 * 1024 * 1024;

const IMAGE_TYPES: ReadonlySet<string> = new Set(['image/png', 'image/jpeg', 'image/gif', 'image/webp']);
const EXTENSIONS: Record<MediaType, string> = {
  'image/png': 'png',
  'image/jpeg': 'jpg',
  'image/gif': 'gif',
  'image/webp': 'webp',
  'application/pdf': 'pdf',
  'text/plain': 'txt',
};
const TYPE_BY_EXTENSION: Record<string, MediaType> = Object.fromEntries(
  Object.entries(EXTENSIONS).map(([type, ext]) => [ext, type as MediaType]),
);
/** Names callers use for a type we store under another name. */
const TYPE_ALIASES: Record<string, MediaType> = { 'image/jpg': 'image/jpeg', 'image/pjpeg': 'image/jpeg' };
const DETAILS: ReadonlySet<string> = new Set(['auto', 'low', 'high']);
/** The fields a caller's part may have (which go together is checked per type). */
const PART_KEYS: ReadonlySet<string> = new Set([
  'type',
  'text',
  'data',
  'mediaType',
  'url',
  'artifact',
  'detail',
  'filename',
]);
/** The longest side a stored image may declare in its header (WebP's and JPEG's own limits are lower). */
const MAX_IMAGE_SIDE = 65_535;
const MAX_URL_LENGTH = 8_192;
const MAX_FILENAME_LENGTH = 255;
const SHA256_PATTERN = /^[0-9a-f]{64}$/;
const MEDIA_LOCATOR_PATTERN = /^artifact:([A-Za-z0-9_-][A-Za-z0-9._-]{0,127})\/media-([0-9a-f]{64})\.([a-z]+)$/;

/** Every media type sessionlog stores. */
export const MEDIA_TYPES: readonly MediaType[] = Object.keys(EXTENSIONS) as MediaType[];

/** Whether `mediaType` is one of the image types (PNG, JPEG, GIF, WebP). */
export function isImageType(mediaType: string): mediaType is 'image/png' | 'image/jpeg' | 'image/gif' | 'image/webp' {
  return IMAGE_TYPES.has(mediaType);
}

/** Whether `mediaType` is a type sessionlog stores. */
export function isMediaType(mediaType: unknown): mediaType is MediaType {
  return typeof mediaType === 'string' && Object.prototype.hasOwnProperty.call(EXTENSIONS, mediaType);
}

/** The file extension a stored medium of this type is named with (`png`, `jpg`, `gif`, `webp`, `pdf`, `txt`). */
export function mediaExtension(mediaType: MediaType): string {
  return EXTENSIONS[mediaType];
}

/** Whether `value` is a lowercase hex sha-256 digest. */
export function isSha256(value: unknown): value is string {
  return typeof value === 'string' && SHA256_PATTERN.test(value);
}

/** The locator a stored medium of session `sessionId` has: `artifact:<sessionId>/media-<sha256>.<ext>`. */
export function mediaLocator(sessionId: string, sha256: string, mediaType: MediaType): string {
  return `artifact:${sessionId}/media-${sha256}.${mediaExtension(mediaType)}`;
}

/** The parts of a stored medium's locator, or undefined when it is not one. */
export function parseMediaLocator(
  locator: unknown,
): { sessionId: string; sha256: string; mediaType: MediaType; name: string } | undefined {
  const match = typeof locator === 'string' ? MEDIA_LOCATOR_PATTERN.exec(locator) : null;
  if (!match) return undefined;
  const [, sessionId, sha256, ext] = match as unknown as [string, string, string, string];
  const mediaType = TYPE_BY_EXTENSION[ext];
  if (!mediaType) return undefined;
  return { sessionId, sha256, mediaType, name: `media-${sha256}.${ext}` };
}

/**
 * The media type a caller declared, as sessionlog names it: lowercase, parameters dropped
 * (`text/plain; charset=utf-8`; another charset is refused), `image/jpg` read as `image/jpeg`.
 * UNSUPPORTED_MEDIA_TYPE for anything else.
 */
export function normalizeMediaType(declared: unknown): MediaType {
  if (typeof declared !== 'string' || declared.trim() === '')
    throw new SessionlogError('UNSUPPORTED_MEDIA_TYPE', `a media type is required; one of ${MEDIA_TYPES.join(', ')}`);
  const [essence = '', ...parameters] = declared.split(';').map((piece) => piece.trim().toLowerCase());
  const charset = parameters.find((parameter) => parameter.startsWith('charset='));
  if (charset !== undefined && !/^charset="?utf-?8"?$/.test(charset))
    throw new SessionlogError(
      'UNSUPPORTED_MEDIA_TYPE',
      `media type ${JSON.stringify(declared.slice(0, 100))} has a charset other than UTF-8; send text as UTF-8`,
    );
  const mediaType = TYPE_ALIASES[essence] ?? essence;
  if (!isMediaType(mediaType))
    throw new SessionlogError(
      'UNSUPPORTED_MEDIA_TYPE',
      `media type ${JSON.stringify(declared.slice(0, 100))} is not supported; use one of ${MEDIA_TYPES.join(', ')}`,
    );
  return mediaType;
}

/**
 * A `data:<type>;base64,<data>` URL split into its media type and base64 text. INVALID_MEDIA for a
 * data URL that is not base64 (or not a data URL at all).
 */
export function dataUrlParts(url: string): { mediaType: string; base64: string } {
  const match = /^data:([^,;]*)((?:;[^,;]*)*),(.*)$/s.exec(url);
  if (!match)
    throw new SessionlogError('INVALID_MEDIA', 'a data URL must have the form data:<media type>;base64,<data>');
  const [, mediaType = '', parameters = '', data = ''] = match;
  const parameterList = parameters.split(';').filter((parameter) => parameter !== '');
  if (parameterList[parameterList.length - 1]?.toLowerCase() !== 'base64')
    throw new SessionlogError(
      'INVALID_MEDIA',
      'the data URL is not base64 (data:<media type>;base64,<data>); send the bytes base64-encoded',
    );
  const rest = parameterList.slice(0, -1).join('; ');
  return { mediaType: rest === '' ? mediaType : `${mediaType}; ${rest}`, base64: data };
}

/** Decodes strict base64 (standard alphabet; padding optional; no whitespace). INVALID_MEDIA otherwise. */
export function decodeBase64(text: string): Uint8Array {
  const unpadded = text.replace(/={1,2}$/, '');
  if (!/^[A-Za-z0-9+/]*$/.test(unpadded) || unpadded.length % 4 === 1 || (text !== unpadded && text.length % 4 !== 0))
    throw new SessionlogError('INVALID_MEDIA', 'data is not valid base64 (standard alphabet A-Z a-z 0-9 + /)');
  const bytes = Buffer.from(unpadded, 'base64');
  return new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** The media type the bytes' own signature says, or undefined for bytes of no signature we know (text). */
export function sniffMediaType(bytes: Uint8Array): MediaType | undefined {
  if (startsWith(bytes, [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])) return 'image/png';
  if (startsWith(bytes, [0xff, 0xd8, 0xff])) return 'image/jpeg';
  if (startsWithText(bytes, 'GIF87a') || startsWithText(bytes, 'GIF89a')) return 'image/gif';
  if (startsWithText(bytes, 'RIFF') && startsWithText(bytes.subarray(8), 'WEBP')) return 'image/webp';
  if (startsWithText(bytes, '%PDF-')) return 'application/pdf';
  return undefined;
}

/**
 * Checks `bytes` against the declared media type and the size limit and reads an image's pixel
 * size (see the file header). INVALID_MEDIA, MEDIA_TOO_LARGE or UNSUPPORTED_MEDIA_TYPE.
 */
export function inspectMedia(bytes: Uint8Array, declaredType: string, maxBytes: number): InspectedMedia {
  const mediaType = normalizeMediaType(declaredType);
  if (bytes.byteLength === 0) throw new SessionlogError('INVALID_MEDIA', `the ${mediaType} data is empty`);
  if (bytes.byteLength > maxBytes)
    throw new SessionlogError(
      'MEDIA_TOO_LARGE',
      `the ${mediaType} data is ${bytes.byteLength} bytes, over the limit of ${maxBytes} (SESSIONLOG_MAX_MEDIA_BYTES)`,
    );
  const sniffed = sniffMediaType(bytes);
  if (sniffed !== mediaType && (sniffed !== undefined || mediaType !== 'text/plain'))
    throw new SessionlogError(
      'INVALID_MEDIA',
      sniffed === undefined
        ? `the data is declared ${mediaType} but its bytes are not ${mediaType} (no ${describe(mediaType)} signature)`
        : `the data is declared ${mediaType} but its bytes are ${sniffed}; declare the type the bytes have`,
    );
  switch (mediaType) {
    case 'image/png':
      return { mediaType, ...checkedSize(mediaType, pngSize(bytes)) };
    case 'image/jpeg':
      return { mediaType, ...checkedSize(mediaType, jpegSize(bytes)) };
    case 'image/gif':
      return { mediaType, ...checkedSize(mediaType, gifSize(bytes)) };
    case 'image/webp':
      return { mediaType, ...checkedSize(mediaType, webpSize(bytes)) };
    case 'application/pdf':
      return { mediaType };
    case 'text/plain':
      assertUtf8(bytes);
      return { mediaType };
    default:
      return assertNever(mediaType);
  }
}

/**
 * Checks a user message's `content` (see the file header): each part's shape, and each inline
 * medium's bytes with {@link inspectMedia}. Errors carry the part's index (`error.part`).
 */
export function checkUserParts(parts: unknown, limits: MediaLimits): CheckedPart[] {
  if (!Array.isArray(parts)) throw new SessionlogError('INVALID_MESSAGE', 'content must be an array of parts');
  return parts.map((part: unknown, index) => {
    try {
      return checkUserPart(part, limits);
    } catch (error) {
      throw atPart(error, index);
    }
  });
}

/** `error` (a SessionlogError) restated for part `index` of the content: `part` set, message prefixed. */
export function atPart(error: unknown, index: number): unknown {
  if (!(error instanceof SessionlogError) || error.part !== undefined) return error;
  return new SessionlogError(error.code, `content[${index}]: ${error.message}`, { cause: error, part: index });
}

function checkUserPart(part: unknown, limits: MediaLimits): CheckedPart {
  if (typeof part !== 'object' || part === null || Array.isArray(part))
    throw new SessionlogError('INVALID_MESSAGE', 'a content part must be an object with a type');
  const record = part as Record<string, unknown>;
  const { type } = record;
  // A field given as undefined is a field not given (what a spread of optional fields leaves).
  const keys = Object.keys(record).filter((key) => record[key] !== undefined);
  const unknown = keys.find((key) => !PART_KEYS.has(key));
  if (unknown !== undefined)
    throw new SessionlogError(
      'INVALID_MESSAGE',
      `a content part has no field ${JSON.stringify(unknown.slice(0, 50))}; a part has type and text, or data with mediaType, url or artifact (and detail or filename)`,
    );
  if (type === 'text') {
    if (typeof record.text !== 'string')
      throw new SessionlogError('INVALID_MESSAGE', 'a text part needs a string text');
    if (keys.length !== 2) throw new SessionlogError('INVALID_MESSAGE', 'a text part has only type and text');
    return { type: 'text', text: record.text };
  }
  if (record.text !== undefined)
    throw new SessionlogError('INVALID_MESSAGE', `an ${String(type)} part has no text; send the text as its own part`);
  if (record.mediaType !== undefined && record.data === undefined)
    throw new SessionlogError(
      'INVALID_MESSAGE',
      'mediaType goes with data (a data: URL or an artifact names its own type)',
    );
  if (type !== 'image' && type !== 'file')
    throw new SessionlogError(
      'INVALID_MESSAGE',
      `a content part's type must be text, image or file, not ${JSON.stringify(String(type).slice(0, 50))}`,
    );
  const sources = ['data', 'url', 'artifact'].filter((key) => record[key] !== undefined);
  if (sources.length !== 1)
    throw new SessionlogError(
      'INVALID_MESSAGE',
      `an ${type} part needs exactly one of data (with mediaType), url or artifact${sources.length > 1 ? `, not ${sources.join(' and ')}` : ''}`,
    );
  const extras =
    type === 'image' ? { detail: checkDetail(record.detail) } : { filename: checkFilename(record.filename) };
  if (type === 'image' && record.filename !== undefined)
    throw new SessionlogError('INVALID_MESSAGE', 'filename is for file parts, not image parts');
  if (type === 'file' && record.detail !== undefined)
    throw new SessionlogError('INVALID_MESSAGE', 'detail is for image parts, not file parts');
  const defined = withoutUndefined(extras);
  if (record.artifact !== undefined) {
    const parsed = parseMediaLocator(record.artifact);
    if (!parsed)
      throw new SessionlogError(
        'INVALID_MEDIA',
        `artifact ${JSON.stringify(String(record.artifact).slice(0, 200))} is not a stored medium's locator (artifact:<sessionId>/media-<sha256>.<ext>); use the locator an upload returned`,
      );
    if (isImageType(parsed.mediaType) !== (type === 'image'))
      throw new SessionlogError(
        'INVALID_MEDIA',
        `artifact ${record.artifact as string} is ${parsed.mediaType}, not an ${type}`,
      );
    return { type, kind: 'artifact', locator: record.artifact as string, ...defined };
  }
  if (record.url !== undefined) {
    if (typeof record.url !== 'string') throw new SessionlogError('INVALID_MEDIA', 'url must be a string');
    if (record.url.startsWith('data:')) {
      const { mediaType, base64 } = dataUrlParts(record.url);
      return inlineMedia(type, decodeBase64(base64), mediaType, limits, defined);
    }
    if (type !== 'image')
      throw new SessionlogError('INVALID_MEDIA', 'a file part takes data (with mediaType) or an artifact, not a url');
    return { type, kind: 'url', url: checkRemoteUrl(record.url), ...defined };
  }
  const { data } = record;
  const bytes = data instanceof Uint8Array ? data : typeof data === 'string' ? decodeBase64(data) : badData();
  return inlineMedia(type, bytes, record.mediaType, limits, defined);
}

function badData(): never {
  throw new SessionlogError('INVALID_MEDIA', 'data must be bytes or base64 text');
}

function inlineMedia(
  type: 'image' | 'file',
  bytes: Uint8Array,
  declaredType: unknown,
  limits: MediaLimits,
  extras: { detail?: ImageDetail; filename?: string },
): CheckedPart {
  const inspected = inspectMedia(bytes, normalizeMediaType(declaredType), limits.maxBytes);
  if (isImageType(inspected.mediaType) !== (type === 'image'))
    throw new SessionlogError(
      'INVALID_MEDIA',
      type === 'image'
        ? `an image part must hold an image (PNG, JPEG, GIF, WebP), not ${inspected.mediaType}; send it as a file part`
        : `a file part holds a PDF or plain text, not ${inspected.mediaType}; send it as an image part`,
    );
  return { type, kind: 'bytes', bytes, ...inspected, ...extras };
}

/** An image URL the caller sends: http(s) only, at most 8 KiB. INVALID_MEDIA otherwise. */
export function checkRemoteUrl(url: string): string {
  if (url.length > MAX_URL_LENGTH)
    throw new SessionlogError('INVALID_MEDIA', `the image URL is longer than ${MAX_URL_LENGTH} characters`);
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    // An unparseable URL is the caller's mistake, said below without the parser's wording.
    throw new SessionlogError('INVALID_MEDIA', `the image URL ${JSON.stringify(url.slice(0, 200))} is not a valid URL`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')
    throw new SessionlogError(
      'INVALID_MEDIA',
      `the image URL's scheme ${JSON.stringify(parsed.protocol.slice(0, -1))} is not allowed; use http(s), a data: URL with base64 data, or an uploaded artifact`,
    );
  return url;
}

function checkDetail(detail: unknown): ImageDetail | undefined {
  if (detail === undefined) return undefined;
  if (typeof detail !== 'string' || !DETAILS.has(detail))
    throw new SessionlogError('INVALID_MESSAGE', 'detail must be auto, low or high');
  return detail as ImageDetail;
}

function checkFilename(filename: unknown): string | undefined {
  if (filename === undefined) return undefined;
  if (typeof filename !== 'string' || filename.length === 0 || filename.length > MAX_FILENAME_LENGTH)
    throw new SessionlogError('INVALID_MESSAGE', `filename must be a string of 1-${MAX_FILENAME_LENGTH} characters`);
  return filename;
}

function withoutUndefined<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as T;
}

/** Whether `value` is a well-formed StoredMedia of session `sessionId` (the shape validate.ts checks). */
export function storedMediaProblem(value: unknown, sessionId: string | undefined): string | undefined {
  if (typeof value !== 'object' || value === null) return 'source must be an object';
  const media = value as Partial<StoredMedia> & Record<string, unknown>;
  const parsed = parseMediaLocator(media.locator);
  if (!parsed) return 'source.locator must be artifact:<sessionId>/media-<sha256>.<ext>';
  if (sessionId !== undefined && parsed.sessionId !== sessionId)
    return `source.locator names session ${parsed.sessionId}, not this session`;
  if (!isMediaType(media.mediaType)) return `source.mediaType must be one of ${MEDIA_TYPES.join(', ')}`;
  if (parsed.mediaType !== media.mediaType) return 'source.locator and source.mediaType disagree';
  if (!isSha256(media.sha256) || media.sha256 !== parsed.sha256)
    return 'source.sha256 must be the 64-hex digest the locator names';
  if (!Number.isSafeInteger(media.bytes) || (media.bytes as number) <= 0)
    return 'source.bytes must be a positive integer';
  const image = isImageType(media.mediaType);
  for (const side of ['width', 'height'] as const) {
    const size = media[side];
    if (image ? !isPositiveSide(size) : size !== undefined)
      return image ? `source.${side} must be a positive integer` : `source.${side} is for images only`;
  }
  const allowed = new Set(['kind', 'locator', 'mediaType', 'bytes', 'sha256', 'width', 'height']);
  const extra = Object.keys(media).find((key) => !allowed.has(key));
  return extra === undefined ? undefined : `source has an unknown field ${extra}`;
}

function isPositiveSide(size: unknown): boolean {
  return Number.isSafeInteger(size) && (size as number) > 0 && (size as number) <= MAX_IMAGE_SIDE;
}

// ---------------------------------------------------------------------------------------------
// Image headers. Each returns the pixel size, or throws INVALID_MEDIA for a damaged or cut image.

type PixelSize = { width: number; height: number };

function checkedSize(mediaType: MediaType, size: PixelSize): PixelSize {
  if (!isPositiveSide(size.width) || !isPositiveSide(size.height))
    throw new SessionlogError(
      'INVALID_MEDIA',
      `the ${mediaType} header gives a pixel size of ${size.width}x${size.height}; each side must be 1-${MAX_IMAGE_SIDE}`,
    );
  return size;
}

function truncated(mediaType: MediaType, what: string): SessionlogError {
  return new SessionlogError('INVALID_MEDIA', `the ${mediaType} image is truncated or damaged: ${what}`);
}

/** PNG: the IHDR chunk first, then chunks whose lengths stay inside the data, up to IEND. */
function pngSize(bytes: Uint8Array): PixelSize {
  const view = dataView(bytes);
  if (bytes.byteLength < 33 || ascii(bytes, 12, 16) !== 'IHDR' || view.getUint32(8) !== 13)
    throw truncated('image/png', 'no IHDR header');
  const size = { width: view.getUint32(16), height: view.getUint32(20) };
  let offset = 8;
  while (offset + 12 <= bytes.byteLength) {
    const length = view.getUint32(offset);
    const type = ascii(bytes, offset + 4, offset + 8);
    const end = offset + 12 + length;
    if (end > bytes.byteLength) throw truncated('image/png', `chunk ${type} runs past the end of the data`);
    if (type === 'IEND') return size;
    offset = end;
  }
  throw truncated('image/png', 'no IEND chunk');
}

/** JPEG: segments up to a SOF marker (the pixel size), then an EOI marker after the scan. */
function jpegSize(bytes: Uint8Array): PixelSize {
  const view = dataView(bytes);
  let offset = 2;
  let size: PixelSize | undefined;
  while (offset + 4 <= bytes.byteLength) {
    if (bytes[offset] !== 0xff) throw truncated('image/jpeg', `no marker at byte ${offset}`);
    const marker = bytes[offset + 1] as number;
    if (marker === 0xff) {
      offset += 1; // fill byte
      continue;
    }
    if (marker === 0xd8 || marker === 0x01 || (marker >= 0xd0 && marker <= 0xd7)) {
      offset += 2; // markers without a length
      continue;
    }
    if (marker === 0xd9) throw truncated('image/jpeg', 'the image ends before its scan');
    const length = view.getUint16(offset + 2);
    if (length < 2 || offset + 2 + length > bytes.byteLength)
      throw truncated('image/jpeg', `segment 0x${marker.toString(16)} runs past the end of the data`);
    if (isStartOfFrame(marker)) {
      if (length < 7) throw truncated('image/jpeg', 'a short SOF segment');
      size = { height: view.getUint16(offset + 5), width: view.getUint16(offset + 7) };
    }
    if (marker === 0xda) {
      if (!size) throw truncated('image/jpeg', 'a scan before any SOF segment');
      for (let i = offset + 2 + length; i + 1 < bytes.byteLength; i++)
        if (bytes[i] === 0xff && bytes[i + 1] === 0xd9) return size;
      throw truncated('image/jpeg', 'no EOI marker after the scan');
    }
    offset += 2 + length;
  }
  throw truncated('image/jpeg', size ? 'no scan' : 'no SOF segment');
}

function isStartOfFrame(marker: number): boolean {
  return marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc;
}

/** GIF: the logical screen descriptor's size; the data ends with the trailer byte 0x3B. */
function gifSize(bytes: Uint8Array): PixelSize {
  if (bytes.byteLength < 14) throw truncated('image/gif', 'no screen descriptor');
  if (bytes[bytes.byteLength - 1] !== 0x3b) throw truncated('image/gif', 'no trailer (0x3B) at the end');
  const view = dataView(bytes);
  return { width: view.getUint16(6, true), height: view.getUint16(8, true) };
}

/** WebP: the RIFF length covers the data; the size from the VP8X, VP8L or VP8 chunk. */
function webpSize(bytes: Uint8Array): PixelSize {
  const view = dataView(bytes);
  if (bytes.byteLength < 30) throw truncated('image/webp', 'no image chunk');
  const riffEnd = 8 + view.getUint32(4, true);
  if (riffEnd > bytes.byteLength)
    throw truncated('image/webp', `the RIFF length ${riffEnd} is past the end of the data`);
  const chunk = ascii(bytes, 12, 16);
  const chunkEnd = 20 + view.getUint32(16, true);
  if (chunkEnd > riffEnd) throw truncated('image/webp', `chunk ${chunk} runs past the end of the data`);
  switch (chunk) {
    case 'VP8X':
      return { width: 1 + uint24(bytes, 24), height: 1 + uint24(bytes, 27) };
    case 'VP8L': {
      if (bytes[20] !== 0x2f) throw truncated('image/webp', 'no VP8L signature');
      const bits = view.getUint32(21, true);
      return { width: 1 + (bits & 0x3fff), height: 1 + ((bits >>> 14) & 0x3fff) };
    }
    case 'VP8 ':
      if (bytes[23] !== 0x9d || bytes[24] !== 0x01 || bytes[25] !== 0x2a)
        throw truncated('image/webp', 'no VP8 start code');
      return { width: view.getUint16(26, true) & 0x3fff, height: view.getUint16(28, true) & 0x3fff };
    default:
      throw truncated('image/webp', `unknown first chunk ${JSON.stringify(chunk)}`);
  }
}

function assertUtf8(bytes: Uint8Array): void {
  try {
    new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    // The decoder's own message names no position worth passing on.
    throw new SessionlogError('INVALID_MEDIA', 'the text/plain data is not well-formed UTF-8');
  }
}

function describe(mediaType: MediaType): string {
  return mediaType === 'application/pdf' ? '%PDF-' : mediaType.slice('image/'.length).toUpperCase();
}

function dataView(bytes: Uint8Array): DataView {
  return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

function uint24(bytes: Uint8Array, offset: number): number {
  return (bytes[offset] as number) | ((bytes[offset + 1] as number) << 8) | ((bytes[offset + 2] as number) << 16);
}

function ascii(bytes: Uint8Array, from: number, to: number): string {
  return String.fromCharCode(...bytes.subarray(from, to));
}

function startsWith(bytes: Uint8Array, signature: readonly number[]): boolean {
  return signature.every((byte, index) => bytes[index] === byte);
}

function startsWithText(bytes: Uint8Array, signature: string): boolean {
  return startsWith(
    bytes,
    [...signature].map((char) => char.charCodeAt(0)),
  );
}

function assertNever(value: never): never {
  throw new Error(`unexpected ${String(value)}`);
}

/** The codes the media checks raise (for tables that list them). */
export const MEDIA_ERROR_CODES: readonly SessionErrorCode[] = [
  'INVALID_MEDIA',
  'MEDIA_TOO_LARGE',
  'UNSUPPORTED_MEDIA_TYPE',
];
