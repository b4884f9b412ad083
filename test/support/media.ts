/**
 * Small real media for tests (issue 50): a PNG built with zlib and the PNG CRC, a JPEG's marker
 * structure, and the well-known smallest GIF and WebP files (lossless, lossy and extended).
 */
import { randomFillSync } from 'node:crypto';
import { deflateSync } from 'node:zlib';

const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});

function crc32(bytes: Uint8Array): number {
  let c = 0xffffffff;
  for (const byte of bytes) c = CRC_TABLE[(c ^ byte) & 0xff]! ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

/** A PNG chunk: length, type, data and its CRC. */
export function pngChunk(type: string, data: Uint8Array): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(data.length, 0);
  head.write(type, 4, 'ascii');
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(Buffer.concat([head.subarray(4), data])), 0);
  return Buffer.concat([head, data, crc]);
}

/**
 * A valid RGB PNG of `width` x `height`, every pixel `rgb`, decodable by any PNG reader; `seed`
 * varies the pixels so two calls can make different images of one size.
 */
export function png(
  width: number,
  height: number,
  rgb: [number, number, number] = [200, 30, 30],
  seed = 0,
  noise = false,
): Uint8Array {
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr[8] = 8; // bit depth
  ihdr[9] = 2; // colour type: RGB
  const rows: Buffer[] = [];
  for (let y = 0; y < height; y++) {
    const row = Buffer.alloc(1 + width * 3);
    for (let x = 0; x < width; x++) row.set([rgb[0], rgb[1], (rgb[2] + seed + x + y) & 0xff], 1 + x * 3);
    if (noise) randomFillSync(row, 1);
    rows.push(row);
  }
  return new Uint8Array(
    Buffer.concat([
      Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
      pngChunk('IHDR', ihdr),
      pngChunk('IDAT', deflateSync(Buffer.concat(rows))),
      pngChunk('IEND', new Uint8Array()),
    ]),
  );
}

/** A JPEG's structure (SOI, APP0, a baseline SOF0 of the given size, a scan, EOI): what a header reader sees. */
export function jpeg(width: number, height: number): Uint8Array {
  const sof = Buffer.from([0xff, 0xc0, 0x00, 0x11, 0x08, 0, 0, 0, 0, 0x03, 1, 0x22, 0, 2, 0x11, 1, 3, 0x11, 1]);
  sof.writeUInt16BE(height, 5);
  sof.writeUInt16BE(width, 7);
  return new Uint8Array(
    Buffer.concat([
      Buffer.from([0xff, 0xd8]),
      Buffer.from([0xff, 0xe0, 0x00, 0x10, 0x4a, 0x46, 0x49, 0x46, 0x00, 0x01, 0x01, 0, 0, 1, 0, 1, 0, 0]),
      sof,
      Buffer.from([0xff, 0xda, 0x00, 0x0c, 0x03, 1, 0, 2, 0x11, 3, 0x11, 0x00, 0x3f, 0x00]),
      Buffer.from([0x12, 0x34, 0xff, 0x00, 0x56]),
      Buffer.from([0xff, 0xd9]),
    ]),
  );
}

/** The smallest GIF: 1x1, transparent. */
export const GIF_1X1 = new Uint8Array(
  Buffer.from('R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7', 'base64'),
);
/** A 1x1 lossless WebP (VP8L). */
export const WEBP_LOSSLESS_1X1 = new Uint8Array(
  Buffer.from('UklGRhoAAABXRUJQVlA4TA0AAAAvAAAAEAcQERGIiP4HAA==', 'base64'),
);
/** A 1x1 lossy WebP (VP8). */
export const WEBP_LOSSY_1X1 = new Uint8Array(
  Buffer.from('UklGRiQAAABXRUJQVlA4IBgAAAAwAQCdASoBAAEAAwA0JaQAA3AA/vuUAAA=', 'base64'),
);

/** An extended WebP (VP8X) declaring a `width` x `height` canvas, with the lossless image after it. */
export function webpExtended(width: number, height: number): Uint8Array {
  const vp8x = Buffer.alloc(18);
  vp8x.write('VP8X', 0, 'ascii');
  vp8x.writeUInt32LE(10, 4);
  vp8x.writeUIntLE(width - 1, 12, 3);
  vp8x.writeUIntLE(height - 1, 15, 3);
  const image = Buffer.from(WEBP_LOSSLESS_1X1).subarray(12);
  const body = Buffer.concat([Buffer.from('WEBP', 'ascii'), vp8x, image]);
  const riff = Buffer.alloc(8);
  riff.write('RIFF', 0, 'ascii');
  riff.writeUInt32LE(body.length, 4);
  return new Uint8Array(Buffer.concat([riff, body]));
}

/** A one-page PDF. */
export const PDF_MINIMAL = new Uint8Array(
  Buffer.from(
    '%PDF-1.4\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj 2 0 obj<</Type/Pages/Kids[3 0 R]/Count 1>>endobj 3 0 obj<</Type/Page/Parent 2 0 R/MediaBox[0 0 10 10]>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n',
    'latin1',
  ),
);

/** Plain UTF-8 text as bytes. */
export function utf8(text: string): Uint8Array {
  return new Uint8Array(Buffer.from(text, 'utf8'));
}

/** Base64 text of bytes. */
export function base64(bytes: Uint8Array): string {
  return Buffer.from(bytes).toString('base64');
}

/** A PNG of random pixels: it does not compress, so its size is about `width * height * 3` bytes. */
export function noisyPng(width: number, height: number): Uint8Array {
  return png(width, height, [0, 0, 0], 0, true);
}
