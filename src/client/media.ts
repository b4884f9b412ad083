/**
 * Media a caller sends (issue 50, DESIGN §3 and §5.2): a message's parts checked, resolved and
 * stored before its inbox entry is written, an upload, and a read back.
 *
 * A message's media go through three steps, so that bad input stores nothing:
 * 1. `checkUserParts` (session/media.ts): each part's shape and bytes (pure).
 * 2. {@link prepareMedia}: reads only. A reference to an uploaded medium (`artifact`) is read
 *    from this session's store (another session's locator is ARTIFACT_FOREIGN) and checked again;
 *    with `fetchImageUrls` on, an http(s) image URL is fetched once ({@link fetchRemoteImage})
 *    and checked like inline bytes; otherwise it stays a URL the provider is given.
 * 3. {@link storeMedia}: `putMedia` of each medium (content-addressed: stored once per session),
 *    giving the message's blocks.
 * Every error of step 1 or 2 names the part (`error.part`, message `content[i]: …`).
 */
import { createHash } from 'node:crypto';
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import { BlockList, isIP } from 'node:net';
import {
  SessionlogError,
  atPart,
  decodeBase64,
  inspectMedia,
  isImageType,
  normalizeMediaType,
  parseMediaLocator,
  sniffMediaType,
  type CheckedPart,
  type ContentBlock,
  type ImageDetail,
  type MediaType,
  type StoredMedia,
} from '../session/index.js';
import type { ClientCore } from './core.js';

/** A part ready to store: text, a URL kept as it is, a medium stored before, or checked bytes. */
export type PreparedPart =
  | { type: 'text'; text: string }
  | { type: 'image'; kind: 'url'; url: string; detail?: ImageDetail }
  | { type: 'image' | 'file'; kind: 'stored'; source: StoredMedia; detail?: ImageDetail; filename?: string }
  | Extract<CheckedPart, { kind: 'bytes' }>;

/** What an upload takes: the bytes (or base64 text), their declared type, and a file name if any. */
export type MediaUpload = { data: Uint8Array | string; mediaType: string; filename?: string };

/** How long a fetch of an image URL may take, whole (ms). */
const FETCH_TIMEOUT_MS = 15_000;

/**
 * IPv4 and IPv6 addresses sessionlog never fetches from: unspecified, private, shared (CGNAT), loopback,
 * link-local, benchmarking, multicast and reserved ranges, and IPv4-mapped IPv6 (a way around
 * the IPv4 rules). A security invariant, not a setting.
 */
const REFUSED_IPV4 = (() => {
  const list = new BlockList();
  for (const [network, prefix] of [
    ['0.0.0.0', 8],
    ['10.0.0.0', 8],
    ['100.64.0.0', 10],
    ['127.0.0.0', 8],
    ['169.254.0.0', 16],
    ['172.16.0.0', 12],
    ['192.0.0.0', 24],
    ['192.168.0.0', 16],
    ['198.18.0.0', 15],
    ['224.0.0.0', 4],
    ['240.0.0.0', 4],
  ] as const)
    list.addSubnet(network, prefix, 'ipv4');
  return list;
})();
// Its own list: a BlockList matches an IPv4 address against IPv4-mapped IPv6 rules too.
const REFUSED_IPV6 = (() => {
  const list = new BlockList();
  for (const [network, prefix] of [
    ['::', 128],
    ['::1', 128],
    ['::ffff:0:0', 96],
    ['64:ff9b::', 96],
    ['fc00::', 7],
    ['fe80::', 10],
    ['ff00::', 8],
  ] as const)
    list.addSubnet(network, prefix, 'ipv6');
  return list;
})();

/** Whether sessionlog refuses to fetch from `address` (see {@link REFUSED_IPV4}). */
export function isRefusedAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 0) return true;
  return family === 4 ? REFUSED_IPV4.check(address, 'ipv4') : REFUSED_IPV6.check(address, 'ipv6');
}

function refusedAddress(url: string, address: string): SessionlogError {
  return new SessionlogError(
    'INVALID_MEDIA',
    `the image URL ${JSON.stringify(url.slice(0, 200))} resolves to ${address}, a private, loopback or link-local address; sessionlog fetches images only from public addresses`,
  );
}

/**
 * Reads the parts that name a stored medium (and, with `fetchImageUrls`, fetches image URLs);
 * writes nothing. Errors name the part.
 */
export async function prepareMedia(
  core: ClientCore,
  sessionId: string,
  parts: readonly CheckedPart[],
): Promise<PreparedPart[]> {
  const prepared: PreparedPart[] = [];
  for (const [index, part] of parts.entries()) {
    try {
      prepared.push(await preparePart(core, sessionId, part));
    } catch (error) {
      throw atPart(error, index);
    }
  }
  return prepared;
}

async function preparePart(core: ClientCore, sessionId: string, part: CheckedPart): Promise<PreparedPart> {
  if (part.type === 'text' || part.kind === 'bytes') return part;
  if (part.kind === 'artifact') {
    const source = await storedMediaAt(core, sessionId, part.locator);
    return {
      type: part.type,
      kind: 'stored',
      source,
      ...(part.detail !== undefined ? { detail: part.detail } : {}),
      ...(part.filename !== undefined ? { filename: part.filename } : {}),
    };
  }
  if (!core.fetchImageUrls) return part;
  const fetched = await fetchRemoteImage(part.url, core.maxMediaBytes);
  if (!isImageType(fetched.mediaType))
    throw new SessionlogError('INVALID_MEDIA', `the image URL gave ${fetched.mediaType}, not an image`);
  return { type: 'image', kind: 'bytes', ...fetched, ...(part.detail !== undefined ? { detail: part.detail } : {}) };
}

/** The reference of a medium this session stored, read back and checked (its digest and header). */
async function storedMediaAt(core: ClientCore, sessionId: string, locator: string): Promise<StoredMedia> {
  const bytes = await core.store.artifacts.readMedia(sessionId, locator);
  const parsed = parseMediaLocator(locator)!;
  const sha256 = createHash('sha256').update(bytes).digest('hex');
  if (sha256 !== parsed.sha256)
    throw new SessionlogError(
      'INVALID_MEDIA',
      `the stored medium ${locator} does not match its digest; upload it again`,
    );
  const inspected = inspectMedia(bytes, parsed.mediaType, Number.MAX_SAFE_INTEGER);
  return {
    kind: 'artifact',
    locator,
    mediaType: inspected.mediaType,
    bytes: bytes.byteLength,
    sha256,
    ...(inspected.width !== undefined ? { width: inspected.width, height: inspected.height! } : {}),
  };
}

/** Stores each medium of `parts` in the session (stored once per content) and returns the message's blocks. */
export async function storeMedia(
  core: ClientCore,
  sessionId: string,
  parts: readonly PreparedPart[],
): Promise<ContentBlock[]> {
  const blocks: ContentBlock[] = [];
  for (const part of parts) {
    if (part.type === 'text') {
      blocks.push({ type: 'text', text: part.text });
      continue;
    }
    if (part.kind === 'url') {
      blocks.push({ type: 'image', source: { kind: 'url', url: part.url }, ...detailOf(part.detail) });
      continue;
    }
    const source =
      part.kind === 'stored'
        ? part.source
        : await core.store.artifacts.putMedia({
            sessionId,
            bytes: part.bytes,
            mediaType: part.mediaType,
            ...(part.width !== undefined ? { width: part.width, height: part.height! } : {}),
          });
    blocks.push(
      part.type === 'image'
        ? { type: 'image', source, ...detailOf(part.detail) }
        : { type: 'file', source, ...(part.filename !== undefined ? { filename: part.filename } : {}) },
    );
  }
  return blocks;
}

function detailOf(detail: ImageDetail | undefined): { detail?: ImageDetail } {
  return detail === undefined ? {} : { detail };
}

/** Checks an upload's bytes and stores them in the session: its reference, to send again as `artifact`. */
export async function uploadMedia(core: ClientCore, sessionId: string, upload: MediaUpload): Promise<StoredMedia> {
  const bytes =
    upload.data instanceof Uint8Array
      ? upload.data
      : typeof upload.data === 'string'
        ? decodeBase64(upload.data)
        : undefined;
  if (bytes === undefined) throw new SessionlogError('INVALID_MEDIA', 'data must be bytes or base64 text');
  const inspected = inspectMedia(bytes, upload.mediaType, core.maxMediaBytes);
  return core.store.artifacts.putMedia({
    sessionId,
    bytes,
    mediaType: inspected.mediaType,
    ...(inspected.width !== undefined ? { width: inspected.width, height: inspected.height! } : {}),
  });
}

/** A medium of the session: its bytes and the type its locator names. */
export async function readMedia(
  core: ClientCore,
  sessionId: string,
  locator: string,
): Promise<{ bytes: Uint8Array; mediaType: MediaType }> {
  await core.requireSession(sessionId);
  const bytes = await core.store.artifacts.readMedia(sessionId, locator);
  return { bytes, mediaType: parseMediaLocator(locator)!.mediaType };
}

/**
 * Fetches an http(s) image once for storing (`fetchImageUrls`): the host's every address must be
 * public ({@link isRefusedAddress}), the connection goes to the address that was checked (the
 * lookup is the checked one, so a second DNS answer cannot swap it), no redirect is followed, and
 * at most `maxBytes` are read. INVALID_MEDIA or MEDIA_TOO_LARGE otherwise; the bytes are checked
 * like inline ones.
 */
export async function fetchRemoteImage(
  url: string,
  maxBytes: number,
): Promise<{ bytes: Uint8Array; mediaType: MediaType; width?: number; height?: number }> {
  const target = new URL(url);
  const host = target.hostname.replace(/^\[(.*)\]$/, '$1');
  if (isIP(host) !== 0 && isRefusedAddress(host)) throw refusedAddress(url, host);
  const get = target.protocol === 'https:' ? https.get : http.get;
  const { bytes, contentType } = await new Promise<{ bytes: Uint8Array; contentType: string | undefined }>(
    (resolve, reject) => {
      const request = get(
        target,
        { lookup: guardedLookup(url), timeout: FETCH_TIMEOUT_MS, headers: { accept: 'image/*' } },
        (response) => {
          const status = response.statusCode ?? 0;
          if (status < 200 || status >= 300) {
            response.resume();
            reject(
              new SessionlogError(
                'INVALID_MEDIA',
                status >= 300 && status < 400
                  ? `the image URL answered a redirect (${status}); sessionlog does not follow redirects: send the final URL`
                  : `the image URL answered HTTP ${status}`,
              ),
            );
            return;
          }
          const declared = Number(response.headers['content-length']);
          if (Number.isFinite(declared) && declared > maxBytes) {
            response.destroy();
            reject(tooLarge(declared, maxBytes));
            return;
          }
          const chunks: Buffer[] = [];
          let size = 0;
          response.on('data', (chunk: Buffer) => {
            size += chunk.length;
            if (size > maxBytes) {
              response.destroy();
              reject(tooLarge(size, maxBytes));
              return;
            }
            chunks.push(chunk);
          });
          response.on('end', () =>
            resolve({ bytes: new Uint8Array(Buffer.concat(chunks)), contentType: response.headers['content-type'] }),
          );
          response.on('error', reject);
        },
      );
      request.on('timeout', () =>
        request.destroy(
          new SessionlogError('INVALID_MEDIA', `the image URL did not answer within ${FETCH_TIMEOUT_MS} ms`),
        ),
      );
      request.on('error', (error) =>
        reject(
          error instanceof SessionlogError
            ? error
            : new SessionlogError('INVALID_MEDIA', `the image URL could not be fetched: ${error.message}`),
        ),
      );
    },
  );
  const declaredType = declaredImageType(contentType) ?? sniffMediaType(bytes);
  if (declaredType === undefined)
    throw new SessionlogError('INVALID_MEDIA', 'the image URL gave bytes of no image type sessionlog stores');
  return { bytes, ...inspectMedia(bytes, declaredType, maxBytes) };
}

function declaredImageType(contentType: string | undefined): MediaType | undefined {
  if (contentType === undefined) return undefined;
  try {
    return normalizeMediaType(contentType);
  } catch {
    // A type we do not store (application/octet-stream): the bytes' own signature decides.
    return undefined;
  }
}

function tooLarge(size: number, maxBytes: number): SessionlogError {
  return new SessionlogError(
    'MEDIA_TOO_LARGE',
    `the image URL gives ${size} bytes or more, over the limit of ${maxBytes} (SESSIONLOG_MAX_MEDIA_BYTES)`,
  );
}

type LookupCallback = (error: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/** A `lookup` for http(s).get that answers only public addresses, and refuses the host when any is not. */
function guardedLookup(url: string) {
  return (hostname: string, options: { all?: boolean; family?: number | string }, callback: LookupCallback): void => {
    dnsLookup(hostname, { all: true }, (error, addresses) => {
      if (error) {
        callback(error, []);
        return;
      }
      const refused = addresses.find((entry) => isRefusedAddress(entry.address));
      if (refused || addresses.length === 0) {
        // The request fails with this error, which names the address (see fetchRemoteImage).
        callback(refusedAddress(url, refused?.address ?? 'no address') as unknown as NodeJS.ErrnoException, []);
        return;
      }
      if (options.all) callback(null, addresses);
      else callback(null, addresses[0]!.address, addresses[0]!.family);
    });
  };
}
