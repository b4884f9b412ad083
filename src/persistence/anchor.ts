/**
 * Checkpoint anchors (issue 27; DESIGN §4.1): how a cold read through a projection checkpoint
 * parses only the log's tail and still refuses damage anywhere in it.
 *
 * When a store writes a checkpoint at seq N from its validated copy of the session, the record
 * also gets an anchor: a digest of the stored bytes of seqs 0..N (the JSONL file's bytes up to the
 * end of seq N's line; in SQLite and PostgreSQL each row's columns, see {@link digestLine}) followed by the
 * validator state a scan holds at N: the surface fold and the ops used. A cold reader hashes the
 * same stored bytes (no parsing), and only when the digest is the anchor's does it resume the
 * scan at N + 1 from that state: so the tail is validated exactly as a full scan would validate
 * it. Any other outcome (a prefix changed in any byte, a checkpoint whose surface or ops were
 * edited, an anchor of another format) is a miss, and the reader validates the whole log, which
 * refuses damage as always. The digest is computed by the writer from what it validated (the
 * bytes it read or wrote, or its validated events encoded as they are stored), never by reading
 * the stored bytes back, so damage done after validation cannot be sealed into an anchor.
 *
 * Format (a field of the projection cache record, projection-cache.ts): `{ seq, digest, ops,
 * position? }`; `digest` is BLAKE2b-512, base64url; `ops` lists `[op, firstSeq, lastSeq]`
 * ascending; `position` (JSONL) is the byte offset where the prefix ends.
 */
import { createHash, type Hash } from 'node:crypto';
import { z } from 'zod';
import type { SurfaceSnapshot } from '../session/index.js';
import type { EncodedEvent } from './relational/rows.js';
import type { OpRange } from './scanner.js';

export type PrefixAnchor = {
  /** The last seq of the prefix: the checkpoint's seq. */
  seq: number;
  /** The prefix's stored bytes, then the validator state at its end (BLAKE2b-512, base64url). */
  digest: string;
  /** Every op the prefix used, with its first and last seq, ascending. */
  ops: Array<[op: string, firstSeq: number, lastSeq: number]>;
  /** JSONL: the byte offset where the prefix ends. */
  position?: number;
};

const seqSchema = z.number().int().nonnegative();

export const prefixAnchorSchema = z
  .object({
    seq: seqSchema,
    digest: z.string().regex(/^[A-Za-z0-9_-]{86}$/),
    ops: z.array(z.tuple([z.string(), seqSchema, seqSchema])),
    position: seqSchema.optional(),
  })
  .strict();

/** A hash of a prefix's stored bytes, fed by the backend as it reads or writes them. */
export function newPrefixHash(): Hash {
  return createHash('blake2b512');
}

/** The ops of a scan, as an anchor lists them. */
function anchorOps(ops: ReadonlyMap<string, OpRange>): PrefixAnchor['ops'] {
  return [...ops]
    .map(([op, range]): [string, number, number] => [op, range.firstSeq, range.lastSeq])
    .sort((a, b) => a[1] - b[1]);
}

function digestOf(prefix: Hash, seq: number, surface: SurfaceSnapshot, ops: PrefixAnchor['ops'], position?: number) {
  const state = JSON.stringify([seq, surface.nodes, surface.replaceGeneration, ops, position ?? null]);
  return prefix.copy().update(`\n${state}`).digest('base64url');
}

/**
 * The anchor of a validated prefix ending at `seq`: `prefix` holds its stored bytes (it is
 * copied, not consumed), `surface` and `ops` the scan's state there.
 */
export function sealAnchor(
  prefix: Hash,
  seq: number,
  surface: SurfaceSnapshot,
  ops: ReadonlyMap<string, OpRange>,
  position?: number,
): PrefixAnchor {
  const list = anchorOps(ops);
  return {
    seq,
    digest: digestOf(prefix, seq, surface, list, position),
    ops: list,
    ...(position === undefined ? {} : { position }),
  };
}

/** Whether the stored bytes hashed into `prefix`, with `surface` (the checkpoint's), are what `anchor` sealed. */
export function anchorMatches(prefix: Hash, anchor: PrefixAnchor, surface: SurfaceSnapshot): boolean {
  return digestOf(prefix, anchor.seq, surface, anchor.ops, anchor.position) === anchor.digest;
}

/** The anchor's ops as a scan indexes them. */
export function anchorOpRanges(anchor: PrefixAnchor): Map<string, OpRange> {
  return new Map(anchor.ops.map(([op, firstSeq, lastSeq]) => [op, { firstSeq, lastSeq }]));
}

/** The op of the anchored batch that holds `seq` (ops ascending and not overlapping, as a valid scan leaves them). */
export function anchorOpAt(anchor: PrefixAnchor, seq: number): string | undefined {
  let low = 0;
  let high = anchor.ops.length - 1;
  while (low <= high) {
    const mid = (low + high) >> 1;
    const [op, first, last] = anchor.ops[mid]!;
    if (seq < first) high = mid - 1;
    else if (seq > last) low = mid + 1;
    else return op;
  }
  return undefined;
}

/** Whether `text` holds a character below U+0020: never in JSON text, and what {@link digestLine} separates fields with. */
function hasControl(text: string): boolean {
  for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) < 0x20) return true;
  return false;
}

/** A nullable field of {@link digestLine}: U+001F and the text, or U+001D alone for null. */
function nullable(text: string | number | null): string {
  return text === null ? '\u001d' : `\u001f${text}`;
}

/** The digest text of a relational store's header row (see {@link digestLine}). */
export function digestHeader(headerText: string): string {
  return `${headerText}\u001e`;
}

/**
 * The digest text of one stored event row of a relational store (its seq is its place), the same
 * text its SQL builds from the stored columns (sqlite.ts, postgres.ts `prefixDigest`): the
 * columns separated by control characters, each nullable one led by U+001F, or U+001D for null,
 * the row ended by U+001E. `batch` is the batch that starts at the row. Undefined for a row whose
 * type or op holds a control character (its text could be read two ways: such a log is not
 * anchored). The JSON columns never hold one, so no two different rows give the same text.
 */
export function digestLine(
  event: EncodedEvent,
  batch: { op: string; lastSeq: number } | undefined,
): string | undefined {
  if (hasControl(event.type) || (batch !== undefined && hasControl(batch.op))) return undefined;
  return (
    `${event.time}${nullable(event.ignorable ? 1 : null)}${nullable(batch ? batch.lastSeq : null)}` +
    `\u001f${event.type}\u001f${event.data}${nullable(event.surfaceOp)}${nullable(event.sourceEventSeqs)}` +
    `${nullable(batch ? batch.op : null)}\u001e`
  );
}
