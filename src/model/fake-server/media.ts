/**
 * The media the offline model receives (issue 50): `image_url` parts (a `data:` URL of the bytes,
 * or an `http(s)` URL it never fetches) and `file` parts (`file_data` as a `data:` URL), in user
 * messages. Each is read like a provider reads it: the bytes must be the type the URL declares
 * and an image's pixel size readable, else the request is refused with a 400 naming the part.
 * Their prompt tokens follow the same rule as the meter's (model/media-tokens.ts), and the model
 * can say what it received: a request whose last user message says "describe the media" is
 * answered with one line per part (`image image/png 64x48 sha256=<first 12 hex>`), so tests see
 * what reached the model.
 */
import { createHash } from 'node:crypto';
import { decodeBase64, dataUrlParts, inspectMedia } from '../../session/media.js';
import { fileTokens, imageTokens, UNKNOWN_IMAGE_TOKENS, IMAGE_BASE_TOKENS } from '../media-tokens.js';
import { invalidRequest } from './http.js';
import type { FakeChatBody } from './wire.js';

/** A medium the fake received, as it describes and prices it. */
export type ReceivedMedium =
  | {
      type: 'image';
      mediaType: string;
      width: number;
      height: number;
      bytes: number;
      sha256: string;
      detail: 'auto' | 'low' | 'high';
    }
  | { type: 'image'; url: string; detail: 'auto' | 'low' | 'high' }
  | { type: 'file'; mediaType: string; filename?: string; bytes: number; sha256: string };

/** The phrase in the last user message that makes the fake describe the media it received. */
export const DESCRIBE_MEDIA_TRIGGER = 'describe the media';

type Part = Record<string, unknown> & { type: string };

function decodeDataUrl(url: string, where: string): { mediaType: string; bytes: Uint8Array } {
  try {
    const { mediaType, base64 } = dataUrlParts(url);
    return { mediaType, bytes: decodeBase64(base64) };
  } catch (error) {
    throw invalidRequest(`${where}: ${(error as Error).message}`);
  }
}

function digest(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}

function detailOf(value: unknown, where: string): 'auto' | 'low' | 'high' {
  if (value === undefined) return 'auto';
  if (value === 'auto' || value === 'low' || value === 'high') return value;
  throw invalidRequest(`${where}.detail must be one of auto, low, high`);
}

function readImage(part: Part, where: string): ReceivedMedium {
  const image = part.image_url as { url?: unknown; detail?: unknown } | undefined;
  if (typeof image?.url !== 'string') throw invalidRequest(`${where}.image_url.url must be a string`);
  const detail = detailOf(image.detail, `${where}.image_url`);
  if (/^https?:\/\//i.test(image.url)) return { type: 'image', url: image.url, detail };
  if (!image.url.startsWith('data:'))
    throw invalidRequest(`${where}.image_url.url must be an http(s) URL or a base64 data URL`);
  const { mediaType, bytes } = decodeDataUrl(image.url, `${where}.image_url.url`);
  let size: { width?: number; height?: number };
  try {
    size = inspectMedia(bytes, mediaType, Number.POSITIVE_INFINITY);
  } catch (error) {
    throw invalidRequest(`${where}.image_url.url: ${(error as Error).message}`);
  }
  if (size.width === undefined || size.height === undefined)
    throw invalidRequest(`${where}.image_url.url: ${mediaType} is not an image type`);
  return {
    type: 'image',
    mediaType,
    width: size.width,
    height: size.height,
    bytes: bytes.byteLength,
    sha256: digest(bytes),
    detail,
  };
}

function readFile(part: Part, where: string): ReceivedMedium {
  const file = part.file as { file_data?: unknown; filename?: unknown } | undefined;
  if (typeof file?.file_data !== 'string') throw invalidRequest(`${where}.file.file_data must be a base64 data URL`);
  const { mediaType, bytes } = decodeDataUrl(file.file_data, `${where}.file.file_data`);
  return {
    type: 'file',
    mediaType,
    ...(typeof file.filename === 'string' ? { filename: file.filename } : {}),
    bytes: bytes.byteLength,
    sha256: digest(bytes),
  };
}

/** Every medium of the request's user messages, in order; a 400 naming the part for one it cannot read. */
export function receivedMedia(body: FakeChatBody): ReceivedMedium[] {
  const media: ReceivedMedium[] = [];
  body.messages.forEach((message, m) => {
    if (!Array.isArray(message.content)) return;
    message.content.forEach((raw, p) => {
      const part = raw as Part;
      const where = `messages[${m}].content[${p}]`;
      if (part.type !== 'image_url' && part.type !== 'file') return;
      if (message.role !== 'user') throw invalidRequest(`${where}: ${part.type} parts are only taken in user messages`);
      media.push(part.type === 'image_url' ? readImage(part, where) : readFile(part, where));
    });
  });
  return media;
}

/** The prompt tokens of the media received, by the meter's rule: images' and files'. */
export function receivedMediaTokens(media: readonly ReceivedMedium[]): { images: number; files: number } {
  let images = 0;
  let files = 0;
  for (const medium of media) {
    if (medium.type === 'file') files += fileTokens(medium.mediaType, medium.bytes);
    else if (medium.detail === 'low') images += IMAGE_BASE_TOKENS;
    else if ('url' in medium) images += UNKNOWN_IMAGE_TOKENS;
    else images += imageTokens(medium.width, medium.height, medium.detail);
  }
  return { images, files };
}

/** One line per medium: what the fake received (the reply to {@link DESCRIBE_MEDIA_TRIGGER}). */
export function describeMedia(media: readonly ReceivedMedium[]): string {
  if (media.length === 0) return 'no media';
  return media
    .map((medium) => {
      if (medium.type === 'file') {
        const name = medium.filename !== undefined ? ` ${JSON.stringify(medium.filename)}` : '';
        return `file ${medium.mediaType}${name} ${medium.bytes} bytes sha256=${medium.sha256.slice(0, 12)}`;
      }
      if ('url' in medium) return `image url ${medium.url}`;
      return `image ${medium.mediaType} ${medium.width}x${medium.height} sha256=${medium.sha256.slice(0, 12)}`;
    })
    .join('\n');
}
