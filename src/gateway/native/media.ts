/**
 * Native media (issue 50): an upload (`POST /v1/sessions/:id/media`) as `multipart/form-data`
 * (a `file` field, with `mediaType` and `filename` fields when the part's own type or name should
 * not count), as the raw bytes with their `Content-Type`, or as JSON `{data (base64), mediaType,
 * filename?}`, answered with the stored reference; a medium read back
 * (`GET /v1/sessions/:id/media/:name`, `name` being its locator's `media-<sha256>.<ext>` or just
 * the digest) as its bytes with its media type; and the links history and transcripts put
 * beside each stored medium so a caller can fetch it.
 *
 * The gateway parses only JSON bodies (server.ts); {@link registerMediaBodyParsers} adds the
 * upload's body types for the upload route alone, every other route answering them 415 as before.
 */
import { errorCodes, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import {
  MEDIA_TYPES,
  SessionlogError,
  mediaExtension,
  parseMediaLocator,
  type ContentBlock,
  type Message,
  type StoredEvent,
} from '../../session/index.js';
import { STREAMED, type RouteContext, type RouteResult } from '../route-table.js';
import { requireSession } from './sessions.js';

/** The upload route's path (its body parsers apply to it alone). */
export const MEDIA_UPLOAD_PATH = '/v1/sessions/:id/media';

/** The body types an upload may have besides JSON: a form, or the medium's own bytes. */
const UPLOAD_BODY_TYPES = ['multipart/form-data', ...MEDIA_TYPES, 'image/jpg', 'application/octet-stream'];

/** An upload body as the parsers leave it: the raw bytes and the request's Content-Type. */
type RawUpload = { raw: Buffer; contentType: string };

/**
 * Adds the upload's body parsers (form and raw bytes) to `app`; on any route but the upload they
 * answer as for a type the gateway does not take (415).
 */
export function registerMediaBodyParsers(app: FastifyInstance): void {
  // Refused before the body is read, as a type without a parser is: a client that announced a
  // body it never sends gets its 415 at once, not a 408 once the body deadline passes.
  app.addHook('preParsing', async (request, _reply, payload) => {
    const contentType = String(request.headers['content-type'] ?? '');
    if (
      request.method !== 'GET' &&
      request.method !== 'HEAD' &&
      isUploadBodyType(contentType) &&
      !isUploadRoute(request)
    )
      // The error fastify raises for a type it has no parser for: each API answers it as before.
      throw new errorCodes.FST_ERR_CTP_INVALID_MEDIA_TYPE(contentType);
    return payload;
  });
  app.addContentTypeParser(UPLOAD_BODY_TYPES, { parseAs: 'buffer' }, (request, body, done) => {
    const contentType = String(request.headers['content-type'] ?? '');
    if (!isUploadRoute(request)) {
      done(new errorCodes.FST_ERR_CTP_INVALID_MEDIA_TYPE(contentType), undefined);
      return;
    }
    done(null, { raw: body as Buffer, contentType } satisfies RawUpload);
  });
}

function isUploadRoute(request: FastifyRequest): boolean {
  return request.routeOptions.url === MEDIA_UPLOAD_PATH && request.method === 'POST';
}

/** Whether `contentType` is one of {@link UPLOAD_BODY_TYPES} (parameters and case aside). */
function isUploadBodyType(contentType: string): boolean {
  const essence = contentType.split(';')[0]!.trim().toLowerCase();
  return UPLOAD_BODY_TYPES.includes(essence);
}

function isRawUpload(body: unknown): body is RawUpload {
  return typeof body === 'object' && body !== null && Buffer.isBuffer((body as RawUpload).raw);
}

/** What an upload's body holds, read by its type (see the file header). */
async function uploadOf(body: unknown): Promise<{ data: Uint8Array | string; mediaType: string; filename?: string }> {
  if (!isRawUpload(body)) {
    const json = body as { data?: unknown; mediaType?: unknown; filename?: unknown } | undefined;
    if (typeof json?.data !== 'string' || typeof json.mediaType !== 'string')
      throw new SessionlogError(
        'INVALID_MEDIA',
        'an upload is multipart/form-data with a file field, the raw bytes with their Content-Type, or JSON {data (base64), mediaType, filename?}',
      );
    if (json.filename !== undefined && typeof json.filename !== 'string')
      throw new SessionlogError('INVALID_MEDIA', 'filename must be text');
    return { data: json.data, mediaType: json.mediaType, ...(json.filename ? { filename: json.filename } : {}) };
  }
  const { raw, contentType } = body;
  if (!/^multipart\/form-data/i.test(contentType)) return { data: new Uint8Array(raw), mediaType: contentType };
  let form: FormData;
  try {
    form = await new Response(raw, { headers: { 'content-type': contentType } }).formData();
  } catch {
    // The parser's own message names nothing a caller can act on.
    throw new SessionlogError('INVALID_MEDIA', 'the multipart/form-data body could not be read');
  }
  const file = form.get('file');
  if (!(file instanceof Blob))
    throw new SessionlogError('INVALID_MEDIA', 'a multipart upload needs a file field holding the medium');
  const declared = form.get('mediaType');
  const named = form.get('filename');
  const mediaType = typeof declared === 'string' && declared !== '' ? declared : file.type;
  const filename = typeof named === 'string' && named !== '' ? named : file instanceof File ? file.name : undefined;
  return {
    data: new Uint8Array(await file.arrayBuffer()),
    mediaType,
    ...(filename ? { filename } : {}),
  };
}

/** Checks and stores an upload in an existing session: its reference (201). */
export async function uploadMedia(ctx: RouteContext, id: string, body: unknown): Promise<RouteResult> {
  await requireSession(ctx, id);
  const upload = await uploadOf(body);
  // A type the file part did not say (an empty or generic one) is read from the bytes' own name.
  if (upload.mediaType === '' || /^application\/octet-stream/i.test(upload.mediaType))
    throw new SessionlogError(
      'UNSUPPORTED_MEDIA_TYPE',
      `say the medium's type (Content-Type of the body or of the file part, or a mediaType field): one of ${MEDIA_TYPES.join(', ')}`,
    );
  const stored = await ctx.client.uploadMedia(id, upload);
  return { status: 201, body: { media: stored, url: mediaUrl(stored.locator) } };
}

/** A stored medium's bytes, with its type (read right). */
export async function readMedia(
  ctx: RouteContext,
  id: string,
  name: string,
  reply: FastifyReply,
  request: FastifyRequest,
): Promise<RouteResult> {
  await requireSession(ctx, id);
  const candidates = /^[0-9a-f]{64}$/.test(name)
    ? MEDIA_TYPES.map((type) => `artifact:${id}/media-${name}.${mediaExtension(type)}`)
    : [`artifact:${id}/${name}`];
  for (const locator of candidates) {
    let read: { bytes: Uint8Array; mediaType: string };
    try {
      read = await ctx.client.readMedia(id, locator);
    } catch (error) {
      // A digest is tried under each type's name; a name that is not there is the next one's turn.
      if (candidates.length > 1 && error instanceof SessionlogError && error.code === 'ARTIFACT_NOT_FOUND') continue;
      throw error;
    }
    const sha256 = parseMediaLocator(locator)!.sha256;
    const etag = `"${sha256}"`;
    void reply.headers({
      'content-type': read.mediaType === 'text/plain' ? 'text/plain; charset=utf-8' : read.mediaType,
      'x-content-type-options': 'nosniff',
      'content-security-policy': "sandbox; default-src 'none'",
      // Content-addressed: the bytes under this name never change.
      'cache-control': 'private, max-age=31536000, immutable',
      etag,
    });
    if (request.headers['if-none-match'] === etag) void reply.code(304).send();
    else void reply.code(200).send(Buffer.from(read.bytes.buffer, read.bytes.byteOffset, read.bytes.byteLength));
    return STREAMED;
  }
  throw new SessionlogError('ARTIFACT_NOT_FOUND', `session ${id} has no medium with digest ${name}`);
}

/** Where the native API serves a stored medium's bytes: `/v1/sessions/<id>/media/<name>`. */
export function mediaUrl(locator: string): string | undefined {
  const parsed = parseMediaLocator(locator);
  return parsed && `/v1/sessions/${parsed.sessionId}/media/${parsed.name}`;
}

/** `blocks` with each stored medium's link beside it (`url`), tool results' blocks included. */
export function withMediaLinks(blocks: readonly ContentBlock[]): ContentBlock[] {
  if (!blocks.some((block) => block.type === 'image' || block.type === 'file' || block.type === 'tool-result'))
    return blocks as ContentBlock[];
  return blocks.map((block) => {
    if (block.type === 'tool-result') return { ...block, content: withMediaLinks(block.content) };
    if ((block.type !== 'image' && block.type !== 'file') || block.source.kind !== 'artifact') return block;
    const url = mediaUrl(block.source.locator);
    return url === undefined ? block : ({ ...block, url } as unknown as ContentBlock);
  });
}

/** A message with its media's links. */
export function messageWithMediaLinks<M extends Pick<Message, 'content'>>(message: M): M {
  const content = withMediaLinks(message.content);
  return content === message.content ? message : { ...message, content };
}

/** A logged event with its message's media links (user and tool messages; others as they are). */
export function eventWithMediaLinks(event: StoredEvent): StoredEvent {
  const data = event.data as { message?: Pick<Message, 'content'>; content?: ContentBlock[] } | undefined;
  if (event.type === 'user/message' && data?.content) {
    const content = withMediaLinks(data.content);
    return content === data.content ? event : ({ ...event, data: { ...data, content } } as StoredEvent);
  }
  if (event.type === 'tool/result' && data?.message) {
    const message = messageWithMediaLinks(data.message);
    return message === data.message ? event : ({ ...event, data: { ...data, message } } as StoredEvent);
  }
  return event;
}
