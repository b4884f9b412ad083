/**
 * The relational row codec shared by the SQLite and PostgreSQL backends. An event is one row of
 * `events(seq, type, time, data, surface_op, source_event_seqs, ignorable)`; each append batch is
 * one record `(op, first_seq, last_seq)` (a row of PostgreSQL's `batches` table; in SQLite, two
 * columns of the batch's first event row), and reads re-attach `op` to the events the batch
 * covers. The batches must tile the stored seqs (no overlap); an event no batch covers, or
 * batches that end beyond the last event, are reported as damage by the scanner, never skipped.
 */
import type { SessionHeader, StoredEvent } from '../../session/index.js';
import { corruptHeaderError } from '../errors.js';
import { decodeStoredHeader, type StoredRecord } from '../scanner.js';

/** An events row as both backends read it (`ignorable` is 1 in SQLite, true in PostgreSQL). */
export type EventRow = {
  seq: number;
  type: string;
  time: number;
  data: string;
  surface_op: string | null;
  source_event_seqs: string | null;
  ignorable: number | boolean | null;
};

export type BatchRow = { op: string; first_seq: number; last_seq: number };

/** The columns of an event, ready to bind (`ignorable` as a boolean; SQLite binds it as 1). */
export type EncodedEvent = {
  seq: number;
  type: string;
  time: number;
  data: string;
  surfaceOp: string | null;
  sourceEventSeqs: string | null;
  ignorable: boolean | null;
};

export function encodeEvent(event: StoredEvent): EncodedEvent {
  const op = event.surfaceOp;
  return {
    seq: event.seq,
    type: event.type,
    time: event.time,
    data: JSON.stringify(event.data),
    surfaceOp: op === undefined ? null : op === 'append' ? 'append' : JSON.stringify(op),
    sourceEventSeqs: event.sourceEventSeqs === undefined ? null : JSON.stringify(event.sourceEventSeqs),
    ignorable: event.ignorable ? true : null,
  };
}

function decodeRow(row: EventRow, op: string | undefined): StoredRecord {
  const end = row.seq + 1;
  let event: Record<string, unknown>;
  try {
    event = { seq: row.seq, type: row.type, time: row.time, data: JSON.parse(row.data) as unknown };
    if (row.surface_op !== null)
      event.surfaceOp = row.surface_op.startsWith('{') ? (JSON.parse(row.surface_op) as unknown) : row.surface_op;
    if (row.source_event_seqs !== null) event.sourceEventSeqs = JSON.parse(row.source_event_seqs) as unknown;
  } catch (error) {
    return { kind: 'damaged', reason: `the row of seq ${row.seq} does not decode: ${(error as Error).message}`, end };
  }
  if (op !== undefined) event.op = op;
  // 1 / true is the stored flag; anything else is kept so validation names it.
  if (row.ignorable !== null) event.ignorable = row.ignorable === 1 || row.ignorable === true ? true : row.ignorable;
  return { kind: 'event', value: event, end };
}

/**
 * Decodes `rows` (ascending seq) with their ops re-attached from `batches` (ascending first_seq,
 * every batch that overlaps the rows' range). Overlapping batches make the first overlapped row a
 * damaged record; a row no batch covers decodes without an op (the scanner refuses it).
 */
export function decodeRows(rows: readonly EventRow[], batches: readonly BatchRow[]): StoredRecord[] {
  // The batches must tile: each starts after the previous one ends and does not end before it starts.
  let broken: { at: number; reason: string } | undefined;
  for (let i = 0; i < batches.length && !broken; i++) {
    const batch = batches[i]!;
    const previous = batches[i - 1];
    if (batch.last_seq < batch.first_seq) {
      broken = {
        at: batch.last_seq,
        reason: `stored batch ${JSON.stringify(batch.op)} ends (seq ${batch.last_seq}) before it starts (seq ${batch.first_seq})`,
      };
    } else if (previous && batch.first_seq <= previous.last_seq) {
      broken = {
        at: batch.first_seq,
        reason: `stored batches ${JSON.stringify(previous.op)} (seqs ${previous.first_seq}..${previous.last_seq}) and ${JSON.stringify(batch.op)} (seqs ${batch.first_seq}..${batch.last_seq}) overlap`,
      };
    }
  }
  const records: StoredRecord[] = [];
  let b = 0;
  for (const row of rows) {
    if (broken && row.seq >= broken.at) {
      records.push({ kind: 'damaged', reason: broken.reason, end: row.seq + 1 });
      break;
    }
    while (b < batches.length && batches[b]!.last_seq < row.seq) b++;
    const batch = batches[b];
    records.push(decodeRow(row, batch && batch.first_seq <= row.seq ? batch.op : undefined));
  }
  return records;
}

/** The stored head: the seq after the last event or the last batch, whichever is later. */
export function storedHead(lastEventSeq: number | null | undefined, lastBatchSeq: number | null | undefined): number {
  return Math.max(lastEventSeq ?? -1, lastBatchSeq ?? -1) + 1;
}

/** Parses a stored header; damage is CORRUPT_LOG, a newer format UNSUPPORTED_FORMAT. */
export function parseStoredHeader(text: string, id: string, where: string): SessionHeader {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (error) {
    throw corruptHeaderError(where, 'it is not valid JSON', error);
  }
  return decodeStoredHeader(raw, id, where);
}
