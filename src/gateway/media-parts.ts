/**
 * Media in the compatible APIs (issue 50), in and out: what Chat Completions, Responses, the AI
 * SDK UI stream and LangGraph send as image and file parts, read into the caller parts the client
 * takes (`UserPart`, session/media.ts), and a logged medium spelled back in each API's shape.
 *
 * In: each API reads its own wire parts into `UserPart`s, one per wire part (so an error of part
 * `i` names the wire part `i`), with the helpers here for what they share (a data URL or an
 * http(s) URL, bytes with their type, an uploaded artifact's locator). `checkMessageParts` then
 * runs the client's own checks (session/media.ts `checkUserParts`: magic bytes, size, pixel size,
 * URL scheme) before anything is created or logged, so a bad part is a 400 naming it
 * (`param=messages[0].content[1]`) and the session is unchanged. Each medium gets its identity
 * in a transcript (`mediaKeys`): the sha-256 of its bytes (also read from a stored medium's
 * locator) or its URL, so a client resending the same picture matches the logged message.
 *
 * Out: a stored medium goes back as its locator, which every API can send again as a reference
 * (Responses `file_id`, Chat Completions `file.file_id`, LangChain's `source_type: 'id'`); its
 * bytes are at the native route `GET /v1/sessions/{id}/artifacts/{name}` ({@link mediaPath}). A
 * remote image goes back as its URL. Messages without media keep the shapes they always had.
 */
import { createHash } from 'node:crypto';
import { SessionlogError, type ContentBlock, type MediaBlock } from '../session/index.js';
import {
  checkUserParts,
  dataUrlParts,
  parseMediaLocator,
  type CheckedPart,
  type ImageDetail,
  type MediaInput,
  type UserPart,
} from '../session/media.js';
import { invalidRequest } from './openai-errors.js';

/** A user message's parts as a surface read them, checked: what to send, its text and its media's identities. */
export type ReadMessage = {
  /** The parts to send (undefined: the message is text only and is sent as its text, as before media). */
  content: UserPart[] | undefined;
  /** The text parts joined. */
  text: string;
  /** Each medium's identity, in order (see {@link mediaKeyOfBlock}). */
  mediaKeys: string[];
  /** The wire name of each part of `content` (`messages[0].content[1]`), for refusals raised later. */
  params?: string[];
};

/** Whether `part` is media (not text). */
export const isMediaPart = (part: UserPart): part is MediaInput => part.type !== 'text';

const DETAILS = new Set(['auto', 'low', 'high']);

/** The OpenAI `detail` of an image part, checked (undefined when not given). */
export function imageDetail(value: unknown, param: string): ImageDetail | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string' || !DETAILS.has(value))
    throw invalidRequest(param, `Invalid '${param}': detail must be auto, low or high`, 'invalid_value');
  return value as ImageDetail;
}

/**
 * An image given by URL: a `data:` URL (inline base64 bytes) or an http(s) URL (kept as a URL);
 * any other scheme is refused by the checks ({@link checkMessageParts}).
 */
export function imageFromUrl(url: unknown, param: string, detail?: ImageDetail): MediaInput {
  if (typeof url !== 'string' || url === '')
    throw invalidRequest(param, `Invalid '${param}': an image URL (data: or http(s)) is required`, 'invalid_value');
  return { type: 'image', url, ...(detail !== undefined ? { detail } : {}) };
}

/**
 * A file given as a data URL (`file_data`; also bare base64 with a declared type), or an image
 * when its type is an image's (clients send pictures in file parts too: the AI SDK's `file`).
 */
export function mediaFromData(
  data: unknown,
  param: string,
  options: { mediaType?: string | undefined; filename?: string | undefined; detail?: ImageDetail | undefined },
): MediaInput {
  if (typeof data !== 'string' || data === '')
    throw invalidRequest(param, `Invalid '${param}': the data (a base64 data: URL) is required`, 'invalid_value');
  let mediaType = options.mediaType;
  let base64 = data;
  if (data.startsWith('data:')) {
    let parts: { mediaType: string; base64: string };
    try {
      parts = dataUrlParts(data);
    } catch (error) {
      throw refusedPart(error, param);
    }
    mediaType ??= parts.mediaType;
    base64 = parts.base64;
  }
  if (mediaType === undefined || mediaType === '')
    throw invalidRequest(
      param,
      `Invalid '${param}': the media type is missing; send a data:<media type>;base64,<data> URL`,
      'invalid_media',
    );
  if (mediaType.toLowerCase().startsWith('image/'))
    return {
      type: 'image',
      data: base64,
      mediaType,
      ...(options.detail !== undefined ? { detail: options.detail } : {}),
    };
  return {
    type: 'file',
    data: base64,
    mediaType,
    ...(options.filename !== undefined ? { filename: options.filename } : {}),
  };
}

/**
 * A medium given by reference: the locator of one this session stored (an upload's, or one a
 * history read gave back). Its kind follows the locator's type when the wire part does not say.
 */
export function mediaFromReference(
  locator: unknown,
  param: string,
  options: { kind?: 'image' | 'file'; filename?: string | undefined; detail?: ImageDetail | undefined },
): MediaInput {
  const parsed = parseMediaLocator(locator);
  if (!parsed)
    throw invalidRequest(
      param,
      `Invalid '${param}': ${JSON.stringify(String(locator).slice(0, 200))} is not a medium this gateway stored (artifact:<sessionId>/media-<sha256>.<ext>, as an upload or a history read returns it)`,
      'invalid_media',
    );
  const kind = options.kind ?? (parsed.mediaType.startsWith('image/') ? 'image' : 'file');
  return {
    type: kind,
    artifact: locator as string,
    ...(kind === 'image' && options.detail !== undefined ? { detail: options.detail } : {}),
    ...(kind === 'file' && options.filename !== undefined ? { filename: options.filename } : {}),
  };
}

/**
 * Checks a message's parts as the client will (session/media.ts), before anything is created or
 * logged. `paramOf(i)` names wire part `i` (the parts are one per wire part). Text-only parts
 * give `content: undefined`: such a message is sent as its text, exactly as before media.
 */
export function checkMessageParts(
  parts: readonly UserPart[],
  maxBytes: number,
  paramOf: (index: number) => string,
): ReadMessage {
  const text = parts.map((part) => (part.type === 'text' ? part.text : '')).join('');
  if (!parts.some(isMediaPart)) return { content: undefined, text, mediaKeys: [] };
  let checked: CheckedPart[];
  try {
    checked = checkUserParts(parts, { maxBytes });
  } catch (error) {
    if (error instanceof SessionlogError && error.part !== undefined) throw refusedPart(error, paramOf(error.part));
    throw error;
  }
  return {
    content: [...parts],
    text,
    mediaKeys: checked.flatMap((part) => checkedKey(part) ?? []),
    params: parts.map((_, index) => paramOf(index)),
  };
}

/**
 * Refuses, before anything is created or logged, a reference to a medium another session stored
 * (each session reads only its own, DESIGN §3): a 400 naming the part. `sessionId` is the session
 * the message goes to.
 */
export function refuseForeignMedia(
  message: { content?: readonly UserPart[] | undefined; params?: readonly string[] | undefined },
  sessionId: string,
): void {
  for (const [index, part] of (message.content ?? []).entries()) {
    if (part.type === 'text' || !('artifact' in part)) continue;
    const owner = parseMediaLocator(part.artifact)?.sessionId;
    if (owner === sessionId) continue;
    const param = message.params?.[index] ?? 'content';
    throw invalidRequest(
      param,
      `Invalid '${param}': ${part.artifact} is a medium of another session; a session reads only the media stored in it (send the bytes again)`,
      'artifact_foreign',
    );
  }
}

/** A refusal of the client naming a part of `message` (`error.part`) restated as a 400 naming its wire part; anything else as it is. */
export function namingPart(error: unknown, message: { params?: readonly string[] | undefined }): unknown {
  if (!(error instanceof SessionlogError) || error.part === undefined) return error;
  const param = message.params?.[error.part];
  return param === undefined ? error : refusedPart(error, param);
}

/** A media check's refusal (a SessionlogError) as a 400 naming the wire part. */
function refusedPart(error: unknown, param: string): unknown {
  if (!(error instanceof SessionlogError)) return error;
  const message = error.message.replace(/^content\[\d+\]: /, '');
  return invalidRequest(param, `Invalid '${param}': ${message}`, error.code.toLowerCase());
}

function checkedKey(part: CheckedPart): string | undefined {
  if (part.type === 'text') return undefined;
  switch (part.kind) {
    case 'bytes':
      return `sha256:${createHash('sha256').update(part.bytes).digest('hex')}`;
    case 'url':
      return `url:${part.url}`;
    case 'artifact':
      return `sha256:${parseMediaLocator(part.locator)!.sha256}`;
  }
}

/** The identity of a logged media block in a transcript (undefined: not media): its bytes' sha-256, or its URL. */
export function mediaKeyOfBlock(block: ContentBlock): string | undefined {
  if (block.type !== 'image' && block.type !== 'file') return undefined;
  return block.source.kind === 'url' ? `url:${block.source.url}` : `sha256:${block.source.sha256}`;
}

/** The media blocks of a message's content, in order. */
export function mediaBlocksOf(content: readonly ContentBlock[]): MediaBlock[] {
  return content.filter((block): block is MediaBlock => block.type === 'image' || block.type === 'file');
}

/**
 * Where the bytes of a stored medium are read over HTTP: the native artifact route, relative to
 * the gateway (`/v1/sessions/{id}/artifacts/media-<sha256>.<ext>`).
 */
export function mediaPath(locator: string): string | undefined {
  const parsed = parseMediaLocator(locator);
  return parsed ? `/v1/sessions/${parsed.sessionId}/artifacts/${parsed.name}` : undefined;
}
