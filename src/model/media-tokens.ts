/**
 * What an image or a file costs in prompt tokens (DESIGN §6), shared by the token meter and the
 * offline model's usage so both count media alike.
 *
 * - Images: OpenAI's documented tile rule. Detail `low` costs a flat 85. `high` and `auto` (sent
 *   as is; priced as `high`, the upper bound) scale the image to fit 2048×2048, then its shortest
 *   side down to 768, and cost 170 per 512-pixel tile plus 85. An image is never scaled up.
 * - A remote image whose pixel size is unknown (the worker never fetches it): a stated estimate,
 *   the price of a 1024×1024 image (765); `low` is 85 whatever the size.
 * - PDF: a stated estimate from the byte size, one token per {@link PDF_BYTES_PER_TOKEN} bytes
 *   (OpenAI sends each page as extracted text plus a page image: roughly 1,000–1,500 tokens for
 *   a typical 50–100 KB page). Usage calibration corrects it per model.
 * - Plain text: the file's text goes on the wire as a text part, tokenized by whoever counts it;
 *   the meter never holds the bytes, so it states one token per {@link TEXT_BYTES_PER_TOKEN}
 *   bytes (the usual English average), corrected by calibration like the rest.
 */
import type { FileBlock, ImageBlock } from '../session/messages.js';

/** The flat price of a `low` detail image and the base of every `high` one. */
export const IMAGE_BASE_TOKENS = 85;
/** The price of one 512×512 tile at `high` detail. */
export const IMAGE_TILE_TOKENS = 170;
/** The stated price of an image whose pixel size is unknown (a remote URL): a 1024×1024 image at `high`. */
export const UNKNOWN_IMAGE_TOKENS = 765;
/** Bytes of a PDF per prompt token (a stated estimate, see the module comment). */
export const PDF_BYTES_PER_TOKEN = 64;
/** Bytes of plain text per prompt token (a stated estimate, see the module comment). */
export const TEXT_BYTES_PER_TOKEN = 4;

/** OpenAI's tile rule for an image of `width`×`height` pixels at `detail`. */
export function imageTokens(width: number, height: number, detail: 'auto' | 'low' | 'high' = 'auto'): number {
  if (detail === 'low') return IMAGE_BASE_TOKENS;
  let w = width;
  let h = height;
  if (w > 2048 || h > 2048) {
    const fit = 2048 / Math.max(w, h);
    w = Math.floor(w * fit);
    h = Math.floor(h * fit);
  }
  const shortest = Math.min(w, h);
  if (shortest > 768) {
    const down = 768 / shortest;
    w = Math.floor(w * down);
    h = Math.floor(h * down);
  }
  return Math.ceil(w / 512) * Math.ceil(h / 512) * IMAGE_TILE_TOKENS + IMAGE_BASE_TOKENS;
}

/** The prompt tokens of an image block: the tile rule when its size is known, else the stated estimate. */
export function imageBlockTokens(block: ImageBlock): number {
  if (block.detail === 'low') return IMAGE_BASE_TOKENS;
  const { source } = block;
  if (source.kind === 'artifact' && source.width !== undefined && source.height !== undefined)
    return imageTokens(source.width, source.height, block.detail);
  return UNKNOWN_IMAGE_TOKENS;
}

/** The stated prompt-token estimate of a file of `bytes` bytes of `mediaType`. */
export function fileTokens(mediaType: string, bytes: number): number {
  return Math.ceil(bytes / (mediaType === 'application/pdf' ? PDF_BYTES_PER_TOKEN : TEXT_BYTES_PER_TOKEN));
}

/** The prompt tokens of a file block (a stated estimate from its size). */
export function fileBlockTokens(block: FileBlock): number {
  return fileTokens(block.source.mediaType, block.source.bytes);
}
