/**
 * The JSONL log file's format (DESIGN §4; the store around it is store.ts): encoding a batch, the
 * header line, and feeding a file's lines to the shared `LogScanner`.
 *
 * File format, version {@link JSONL_FORMAT_VERSION}. Line 1 is the header record
 * `{"type":"session","format":2, ...SessionHeader}`; its `format` (absent = 1) and `version`
 * are checked first and a newer one refused as UNSUPPORTED_FORMAT. Every later line is one
 * event envelope `{seq, type, time, data, surfaceOp?, sourceEventSeqs?, op, ignorable?}` plus
 * `batchSize`: the number of events of the append batch the line belongs to. A batch is written
 * with one positioned write and one fsync, so a crash leaves a prefix of its bytes; the count
 * lets a reader tell the complete lines of that unfinished final batch from a finished batch.
 *
 * Integrity (DESIGN §4.1, applied by the shared `LogScanner`): the one damage this store repairs
 * by itself is a torn final write, the final batch that never finished: its last line is
 * incomplete (no newline), or it has fewer lines than its `batchSize`. Reads ignore it; `load`
 * and `append` cut it off before writing, except that an append whose `expectedSeq` lies past
 * the torn batch's first seq is refused with CORRUPT_LOG: that writer was acknowledged the batch,
 * so it was damaged after it was committed. Anything else (a complete line that does not parse or
 * fails validation, also the final one; a seq gap or duplicate, framing that does not add up, a
 * damaged header) is CORRUPT_LOG and nothing is changed.
 *
 * Version-1 files (written before `batchSize`) are still read and appended to in version 1:
 * their lines do not say where a batch began, so only an incomplete final line is a torn write
 * there; a complete line is never dropped.
 */
import { type FileHandle } from 'node:fs/promises';
import {
  SessionlogError,
  assertStoredEvent,
  deepFreeze,
  type StoredEvent,
  type SessionHeader,
} from '../../session/index.js';
import { LogScanner, decodeStoredHeader, type ScanTarget } from '../scanner.js';
import { corruptHeaderError } from '../errors.js';
import { readFully } from './files.js';

/** The JSONL file format this build writes (it also reads and appends to version 1). */
export const JSONL_FORMAT_VERSION = 2;

/** The format of one file: 1 (before `batchSize`) or {@link JSONL_FORMAT_VERSION}. */
export type Format = 1 | 2;

export function headerLine(header: SessionHeader): string {
  return `${JSON.stringify({ type: 'session', format: JSONL_FORMAT_VERSION, ...header })}\n`;
}

/** The bytes of one batch: one line per event, in version 2 each with the batch's event count. */
export function encodeBatch(events: readonly StoredEvent[], format: Format): Buffer {
  const lines = events.map((event) => JSON.stringify(format === 2 ? { ...event, batchSize: events.length } : event));
  return Buffer.from(`${lines.join('\n')}\n`, 'utf8');
}

/** Reads and validates the header line; returns the header, the file format, the byte offset after it and the line (without its newline). */
export async function readHeaderLine(
  handle: FileHandle,
  id: string,
  path: string,
): Promise<{ header: SessionHeader; format: Format; end: number; line: Buffer }> {
  const where = `session ${id} in ${path}`;
  let collected = Buffer.alloc(0);
  for (let position = 0; ;) {
    const chunk = await readFully(handle, position, 64 * 1024);
    const newline = chunk.indexOf(10);
    if (newline >= 0) {
      collected = Buffer.concat([collected, chunk.subarray(0, newline)]);
      break;
    }
    if (chunk.length === 0) throw corruptHeaderError(where, 'the header line is incomplete');
    collected = Buffer.concat([collected, chunk]);
    position += chunk.length;
  }
  let raw: unknown;
  try {
    raw = JSON.parse(collected.toString('utf8'));
  } catch (error) {
    throw corruptHeaderError(where, 'the header line is not JSON', error);
  }
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw) || (raw as { type?: unknown }).type !== 'session') {
    throw corruptHeaderError(where, 'the first line is not a {"type":"session"} header record');
  }
  const { type: _type, format: rawFormat, ...fields } = raw as Record<string, unknown>;
  if (typeof rawFormat === 'number' && Number.isSafeInteger(rawFormat) && rawFormat > JSONL_FORMAT_VERSION) {
    throw new SessionlogError(
      'UNSUPPORTED_FORMAT',
      `${where}: JSONL format ${rawFormat} was written by a newer version of sessionlog (this build reads formats 1 and ${JSONL_FORMAT_VERSION}); upgrade sessionlog to read it`,
    );
  }
  if (rawFormat !== undefined && rawFormat !== 2)
    throw corruptHeaderError(where, `the header's format is ${JSON.stringify(rawFormat)}`);
  const header = decodeStoredHeader(
    fields,
    id,
    where,
    ` but the directory is ${id}; the file was moved or copied by hand`,
  );
  return { header, format: rawFormat === 2 ? 2 : 1, end: collected.length + 1, line: collected };
}

/**
 * The events of `seqs` among the lines of a verified prefix (`bytes`, from the file's start; the
 * event lines begin at `start`, one per seq), parsed and checked as stored events; undefined if
 * one is missing or does not parse (the digest matched, so only a bug gets there).
 */
export function prefixLines(
  bytes: Buffer,
  start: number,
  seqs: readonly number[],
  format: Format,
  id: string,
): Map<number, StoredEvent> | undefined {
  const wanted = new Set(seqs);
  const last = Math.max(...seqs);
  const events = new Map<number, StoredEvent>();
  for (let seq = 0, position = start; seq <= last; seq++) {
    const newline = bytes.indexOf(10, position);
    if (newline < 0) return undefined;
    if (wanted.has(seq)) {
      let value: unknown;
      try {
        value = JSON.parse(bytes.toString('utf8', position, newline));
      } catch {
        // A verified prefix parses; a line that does not is a miss, and the whole log is read.
        return undefined;
      }
      if (format === 2 && typeof value === 'object' && value !== null)
        delete (value as { batchSize?: unknown }).batchSize;
      assertStoredEvent(value, seq, id);
      events.set(seq, deepFreeze(value));
    }
    position = newline + 1;
  }
  return events;
}

/** Feeds the lines of `bytes` (which start at file offset `base`) into the scanner. */
export function scanLines(scanner: LogScanner<ScanTarget>, format: Format, bytes: Buffer, base: number): void {
  let position = 0;
  while (position < bytes.length) {
    const at = base + position;
    const newline = bytes.indexOf(10, position);
    if (newline < 0) {
      scanner.push({
        kind: 'damaged',
        reason: `the final line at byte ${at} has no newline (a write that never finished)`,
        end: base + bytes.length,
        incomplete: true,
      });
      return;
    }
    const end = base + newline + 1;
    let value: unknown;
    try {
      value = JSON.parse(bytes.toString('utf8', position, newline));
    } catch {
      // A complete line that is not JSON was damaged after it was written: corruption, also as the final line.
      scanner.push({ kind: 'damaged', reason: `the line at byte ${at} is not valid JSON`, end });
      position = newline + 1;
      continue;
    }
    if (format === 2 && typeof value === 'object' && value !== null && !Array.isArray(value)) {
      const { batchSize, ...event } = value as Record<string, unknown>;
      scanner.push({ kind: 'event', value: event, end, batchSize });
    } else {
      scanner.push({ kind: 'event', value, end });
    }
    position = newline + 1;
  }
}
