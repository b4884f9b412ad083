/**
 * Checkpoint anchors (issue 27; DESIGN §4.1): how a cold read through a projection checkpoint
 * parses only the log's tail and still refuses damage anywhere in it.
 *
 * When a store writes a checkpoint at seq N from its validated copy of the session, the record
 * also gets an anchor: a digest of the stored bytes of seqs 0..N (the JSONL file's bytes up to the
 * end of seq N's line; in SQLite and PostgreSQL each row's columns, chunk by chunk, see
 * {@link RelationalDigest}) followed by the validator state a scan holds at N: the surface fold
 * and the ops used. A cold reader hashes the same stored bytes (no parsing), and only when the
 * digest is the anchor's does it resume the scan at N + 1 from that state: so the tail is
 * validated exactly as a full scan would validate it. Any other outcome (a prefix changed in any
 * byte, a checkpoint whose surface or ops were edited, an anchor of another format) is a miss, and
 * the reader validates the whole log, which refuses damage as always. The digest is computed by the writer from what it validated (the
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

function isSeq(value: unknown): boolean {
  return Number.isSafeInteger(value) && (value as number) >= 0;
}

/**
 * Whether `value` is an anchor's op list: `[op, firstSeq, lastSeq]` entries of a string and two
 * seqs (what `z.array(z.tuple([z.string(), seqSchema, seqSchema]))` accepts). Checked in one loop:
 * an anchor lists one entry per batch of the prefix, and the schema took ~1 µs an entry, most of a
 * cold read's cost for a log of 10,000 batches (BENCHMARKS.md, "Cold reads through the checkpoint").
 */
function isOpList(value: unknown): value is PrefixAnchor['ops'] {
  if (!Array.isArray(value)) return false;
  for (const entry of value as unknown[]) {
    if (!Array.isArray(entry) || entry.length !== 3) return false;
    if (typeof entry[0] !== 'string' || !isSeq(entry[1]) || !isSeq(entry[2])) return false;
  }
  return true;
}

export const prefixAnchorSchema = z
  .object({
    seq: seqSchema,
    digest: z.string().regex(/^[A-Za-z0-9_-]{86}$/),
    ops: z.custom<PrefixAnchor['ops']>(isOpList, 'ops must list [op, firstSeq, lastSeq] entries'),
    position: seqSchema.optional(),
  })
  .strict();

/** A hash of a prefix's stored bytes, fed by the backend as it reads or writes them. */
export function newPrefixHash(): Hash {
  return createHash('blake2b512');
}

/** The ops of a scan, as an anchor lists them (a scan adds them in seq order, so the sort is rarely needed). */
function anchorOps(ops: ReadonlyMap<string, OpRange>): PrefixAnchor['ops'] {
  const list: PrefixAnchor['ops'] = [];
  let ascending = true;
  for (const [op, range] of ops) {
    if (list.length > 0 && range.firstSeq < list[list.length - 1]![1]) ascending = false;
    list.push([op, range.firstSeq, range.lastSeq]);
  }
  return ascending ? list : list.sort((a, b) => a[1] - b[1]);
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

/** Whether `text` holds a character below U+0020: never in JSON text, and what the digest text separates fields with. */
function hasControl(text: string): boolean {
  for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) < 0x20) return true;
  return false;
}

/**
 * Rows per chunk of a relational digest: chunk k holds seqs k × this to (k + 1) × this − 1, and
 * one statement of an anchored read hashes one chunk.
 */
export const DIGEST_CHUNK_ROWS = 16_384;

/** A batch record: its op and last seq (it starts on the row it is given with). */
type BatchRecord = { op: string; lastSeq: number };

/**
 * Where a relational store keeps its batch records: on the batch's first event row (SQLite,
 * columns `batch_last_seq` and `batch_op`) or in a table of their own (PostgreSQL `batches`).
 */
export type BatchLayout = 'on-rows' | 'table';

/**
 * The digest text of one stored event row of a relational store (its seq is its place), the same
 * text its SQL builds from the stored columns (sqlite/statements.ts, postgres/statements.ts `prefixDigest`): time, a
 * number whose bits say which nullable columns are null (1 ignorable, 2 surface_op, 4
 * source_event_seqs, 8 batch_last_seq, 16 batch_op: both always, where batch records have a table
 * of their own), then the other columns that are not null, separated by U+001F and ended by
 * U+001E. Undefined for a row whose type or op holds a control character (its text could be read
 * two ways: such a log is not anchored). The JSON columns never hold one, so no two different
 * rows give the same text.
 */
function rowText(event: EncodedEvent, batch: BatchRecord | undefined): string | undefined {
  if (hasControl(event.type) || (batch !== undefined && hasControl(batch.op))) return undefined;
  const nulls =
    (event.ignorable ? 0 : 1) +
    (event.surfaceOp === null ? 2 : 0) +
    (event.sourceEventSeqs === null ? 4 : 0) +
    (batch === undefined ? 24 : 0);
  let text = `${event.time}\u001f${nulls}`;
  if (event.ignorable) text += '\u001f1';
  text += `\u001f${event.type}\u001f${event.data}`;
  if (event.surfaceOp !== null) text += `\u001f${event.surfaceOp}`;
  if (event.sourceEventSeqs !== null) text += `\u001f${event.sourceEventSeqs}`;
  if (batch !== undefined) text += `\u001f${batch.lastSeq}\u001f${batch.op}`;
  return `${text}\u001e`;
}

/** The digest text of a batch record of its own starting at `firstSeq`: first seq, last seq and op, as {@link rowText}. */
function batchText(firstSeq: number, batch: BatchRecord): string | undefined {
  return hasControl(batch.op) ? undefined : `${firstSeq}\u001f${batch.lastSeq}\u001f${batch.op}\u001e`;
}

/**
 * The running digest of a relational store's prefix: BLAKE2b-512 over the header row's text
 * (then U+001E) and, for each whole chunk of {@link DIGEST_CHUNK_ROWS} rows, the SHA-256 of its
 * rows' text and the SHA-256 of the text of the batch records of their own starting in it
 * (ascending; none where they sit on the rows); a chunk not yet whole is hashed in as it stands
 * when the digest is taken ({@link current}). Chunks let PostgreSQL hash each whole chunk
 * itself, so only 64 bytes of it cross the wire. The writer feeds it its validated events ({@link addEvent}); a cold reader, the text or the
 * hashes the database builds of the stored columns ({@link addText}, {@link addChunkHashes}).
 */
export class RelationalDigest {
  private readonly prefix: Hash;
  private rows = createHash('sha256');
  private batches = createHash('sha256');
  /** The seq the next row fed must have. */
  next = 0;

  constructor(
    headerText: string,
    private readonly layout: BatchLayout,
  ) {
    this.prefix = newPrefixHash().update(`${headerText}\u001e`);
  }

  /**
   * Feeds the event row at seq `next` as it is stored, with the batch record starting on it.
   * False (nothing fed) when the row cannot be put in a digest: the log is then not anchored.
   */
  addEvent(event: EncodedEvent, batch: BatchRecord | undefined): boolean {
    const onRow = this.layout === 'on-rows' ? batch : undefined;
    const row = rowText(event, onRow);
    const record = batch !== undefined && onRow === undefined ? batchText(this.next, batch) : '';
    if (row === undefined || record === undefined) return false;
    this.rows.update(row);
    if (record !== '') this.batches.update(record);
    this.advance(1);
    return true;
  }

  /**
   * Feeds the text the database built of the `count` rows from `next` on and of the batch records
   * of their own starting on them (within one chunk), each record's text without the U+001E that
   * ends it: the database joins them with U+001E (SQLite's `group_concat` pays for a copy of the
   * whole text to add one more).
   */
  addText(rows: string | Uint8Array, batches: string | Uint8Array, count: number): void {
    if (rows.length > 0) this.rows.update(rows).update('\u001e');
    if (batches.length > 0) this.batches.update(batches).update('\u001e');
    this.advance(count);
  }

  /** Feeds the whole chunk starting at `next` by the SHA-256 of its rows' text and of its batch records' text, as the database hashed them. */
  addChunkHashes(rows: Uint8Array, batches: Uint8Array): void {
    this.prefix.update(rows).update(batches);
    this.next += DIGEST_CHUNK_ROWS;
  }

  /** A copy of the digest of everything fed (the running state is kept, so feeding can go on). */
  current(): Hash {
    const digest = this.prefix.copy();
    if (this.next % DIGEST_CHUNK_ROWS !== 0)
      digest.update(this.rows.copy().digest()).update(this.batches.copy().digest());
    return digest;
  }

  private advance(count: number): void {
    this.next += count;
    if (this.next % DIGEST_CHUNK_ROWS !== 0) return;
    this.prefix.update(this.rows.digest()).update(this.batches.digest());
    this.rows = createHash('sha256');
    this.batches = createHash('sha256');
  }
}
