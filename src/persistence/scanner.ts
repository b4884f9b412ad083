/**
 * The one classifier of stored records, shared by every backend (DESIGN §4.1): `LogScanner` folds
 * the records a backend decoded into a validated `Session`, indexes their ops, and names the first
 * bad seq; a JSONL torn final write is told from corruption here and nowhere else. Also the
 * reports built from a scan (`scan`, and the error a damaged log is refused with).
 */
import {
  Session,
  SessionlogError,
  SurfaceFold,
  parseHeader,
  assertStoredEvent,
  deepFreeze,
  isKnownEvent,
  isSessionlogError,
  isSurfaceType,
  NonJsonValueError,
  type StoredEvent,
  type SessionHeader,
  type SurfaceSnapshot,
} from '../session/index.js';
import { corruptHeaderError } from './errors.js';
import type { ScanProblem, ScanReport } from './store.js';

/**
 * How a backend frames its records, which decides the one damage it may repair by itself:
 *
 * - `transactional` (SQLite, PostgreSQL): batches commit whole, so there are no torn writes;
 *   every problem is corruption. Every event must carry its batch's `op`.
 * - `jsonl-v2`: every line carries its batch's event count, so a reader tells the complete lines
 *   of an unfinished final batch from a finished batch. The final batch that never finished (its
 *   last line incomplete, without its newline, or fewer lines than its count) is a torn write.
 * - `jsonl-v1` (files written before the batch count): only an incomplete final line is a torn
 *   write; complete lines are never dropped.
 *
 * A complete record (a JSONL line that ends in its newline) that does not decode is corruption in
 * every framing, also as the final record: a write that stopped part-way leaves a prefix of its
 * bytes, and a prefix that ends in a newline ends with a whole line, so a complete line that does
 * not parse was damaged after it was written (issue 52).
 */
export type ScanFraming = 'transactional' | 'jsonl-v1' | 'jsonl-v2';

/**
 * One stored record as a backend decoded it. `end` is where the record ends (a byte offset in
 * JSONL). A damaged record is `incomplete` when its bytes stop before its terminator (a JSONL line
 * without its newline): only such a record can be the torn end of a write that never finished.
 */
export type StoredRecord =
  | { kind: 'event'; value: unknown; end: number; batchSize?: unknown }
  | { kind: 'damaged'; reason: string; end: number; incomplete?: true };

/**
 * A JSONL torn final write: the seq its batch starts at, where it starts in the file, how many
 * records it holds, and `badSeq`, the first seq of it that is not intact (its incomplete line, or
 * the first line its batch never wrote).
 */
export type TornTail = { seq: number; position: number; records: number; badSeq: number; reason: string };

export type OpRange = { firstSeq: number; lastSeq: number };

type PendingBatch = { op: string; size: number; firstSeq: number; events: StoredEvent[]; end: number };

/**
 * What a scan folds records into: a whole `Session`, or a {@link ResumedLog} that starts where a
 * verified prefix ends (anchor.ts).
 */
export type ScanTarget = Pick<Session, 'id' | 'nextSeq' | 'surfaceNodes' | 'replaceGeneration' | 'storedAt'> & {
  commitPlanned(events: readonly StoredEvent[]): void;
};

/**
 * The log past a prefix a checkpoint anchor verified (anchor.ts): the surface fold at the
 * prefix's end, the prefix events the surface still holds, and the events after it, each
 * validated as `Session.commitPlanned` validates a stored event. Only the surface fold refuses
 * events there (the turn and budget folds take any event that passed the envelope and payload
 * checks), so a scan into it refuses exactly what a scan into a `Session` would.
 */
export class ResumedLog implements ScanTarget {
  private readonly fold: SurfaceFold;
  private readonly tail: StoredEvent[] = [];

  /**
   * `base` is the first seq after the prefix; `prefix` holds the prefix events a fold or a read
   * may look up: every node of `surface` (a tool-result rewrite looks up the node it shadows).
   */
  constructor(
    readonly header: SessionHeader,
    readonly base: number,
    surface: SurfaceSnapshot,
    private readonly prefix: ReadonlyMap<number, StoredEvent>,
  ) {
    this.fold = new SurfaceFold(surface.nodes, surface.replaceGeneration);
  }

  get id(): string {
    return this.header.id;
  }

  get nextSeq(): number {
    return this.base + this.tail.length;
  }

  get surfaceNodes(): readonly number[] {
    return this.fold.nodeList;
  }

  get replaceGeneration(): number {
    return this.fold.replaceGeneration;
  }

  /** The event at `seq`: past the prefix, or one of the prefix events it holds; else undefined. */
  storedAt(seq: number): StoredEvent | undefined {
    return seq < this.base ? this.prefix.get(seq) : this.tail[seq - this.base];
  }

  commitPlanned(events: readonly StoredEvent[]): void {
    for (const event of events) {
      if (event.seq !== this.nextSeq)
        throw new SessionlogError('SEQ_CONFLICT', `event seq ${event.seq} does not follow ${this.nextSeq - 1}`);
      if (isKnownEvent(event)) this.fold.apply(event, (seq) => this.storedAt(seq));
      this.tail.push(event);
    }
  }
}

/**
 * The one classifier of stored records, shared by every backend. It folds records into a
 * validated `Session` (envelope, payload and surface transition, exactly as a live append) and
 * indexes their ops. The first problem stops it: `problem` then names the first bad seq. A
 * record it could not judge yet (a damaged JSONL line, an unfinished JSONL batch) is held until
 * the next record or {@link finish} decides between corruption and a torn final write.
 */
export class LogScanner<S extends ScanTarget = Session> {
  readonly session: S;
  readonly ops: Map<string, OpRange>;
  /** Where the valid prefix ends (after its last record). */
  validEnd: number;
  private failure: ScanProblem | undefined;
  private pending: PendingBatch | undefined;
  private damaged: { seq: number; reason: string } | undefined;

  constructor(
    header: SessionHeader,
    private readonly framing: ScanFraming,
    /** Names the session and its location in messages: `session <id> in <location>`. */
    readonly where: string,
    start = 0,
    resume?: { target: S; ops: Map<string, OpRange> },
  ) {
    // Without `resume`, S is the default Session (see {@link LogScanner.resume} for the other case).
    this.session = resume?.target ?? (Session.create(header) as ScanTarget as S);
    this.ops = resume?.ops ?? new Map();
    this.validEnd = start;
  }

  /**
   * A scanner that goes on from a prefix an anchor verified: the records after it are validated
   * into `target` in the context the prefix left (its surface fold in `target`, its `ops`). The
   * scanner takes `ops` over (a map made for it, such as `anchorOpRanges`): it indexes the tail's
   * ops into it, in place.
   */
  static resume(
    target: ResumedLog,
    ops: Map<string, OpRange>,
    framing: ScanFraming,
    where: string,
    start: number,
  ): LogScanner<ResumedLog> {
    return new LogScanner<ResumedLog>(target.header, framing, where, start, { target, ops });
  }

  get nextSeq(): number {
    return this.session.nextSeq;
  }

  /** The first definite problem (corruption or a newer format), if any. */
  get problem(): ScanProblem | undefined {
    return this.failure;
  }

  private get expectedSeq(): number {
    return this.session.nextSeq + (this.pending?.events.length ?? 0);
  }

  private fail(seq: number, reason: string, code: ScanProblem['code'] = 'CORRUPT_LOG'): void {
    this.failure = { seq, reason, code, torn: false };
    this.pending = undefined;
    this.damaged = undefined;
  }

  private failWith(seq: number, error: unknown): void {
    if (isSessionlogError(error, 'UNSUPPORTED_FORMAT')) return this.fail(seq, error.message, 'UNSUPPORTED_FORMAT');
    if (isSessionlogError(error) || error instanceof NonJsonValueError) return this.fail(seq, error.message);
    throw error;
  }

  /** Feeds the next stored record, in storage order. */
  push(record: StoredRecord): void {
    if (this.failure) return;
    if (this.damaged) {
      // Something follows the damaged record, so it was not a final write that never finished.
      return this.fail(this.damaged.seq, this.damaged.reason);
    }
    const seq = this.expectedSeq;
    if (record.kind === 'damaged') {
      if (this.framing === 'transactional' || !record.incomplete) return this.fail(seq, record.reason);
      this.damaged = { seq, reason: record.reason };
      return;
    }
    try {
      assertStoredEvent(record.value, seq, this.session.id);
    } catch (error) {
      return this.failWith(seq, error);
    }
    const event = deepFreeze(record.value);
    if (this.framing === 'jsonl-v2') return this.pushFramed(event, record.batchSize, record.end);
    if (event.op === undefined) {
      if (this.framing === 'transactional')
        return this.fail(seq, `seq ${seq} is not covered by any stored batch (its batch record is missing)`);
    } else {
      const range = this.ops.get(event.op);
      if (range && range.lastSeq !== seq - 1)
        return this.fail(
          seq,
          `op ${JSON.stringify(event.op)} at seq ${seq} is already used by seqs ${range.firstSeq}..${range.lastSeq}`,
        );
    }
    try {
      this.session.commitPlanned([event]);
    } catch (error) {
      return this.failWith(seq, error);
    }
    if (event.op !== undefined) this.indexOp(event.op, seq, seq);
    this.validEnd = record.end;
  }

  private pushFramed(event: StoredEvent, batchSize: unknown, end: number): void {
    const seq = event.seq;
    const op = event.op;
    if (op === undefined) return this.fail(this.pending?.firstSeq ?? seq, `the line of seq ${seq} has no op`);
    if (typeof batchSize !== 'number' || !Number.isSafeInteger(batchSize) || batchSize <= 0) {
      return this.fail(
        this.pending?.firstSeq ?? seq,
        `the line of seq ${seq} has no valid batchSize marker (got ${JSON.stringify(batchSize)})`,
      );
    }
    const pending = this.pending;
    if (pending) {
      if (op !== pending.op || batchSize !== pending.size) {
        return this.fail(
          pending.firstSeq,
          `batch ${JSON.stringify(pending.op)} starting at seq ${pending.firstSeq} declares ${pending.size} events but only ${pending.events.length} precede seq ${seq} (op ${JSON.stringify(op)}, batchSize ${batchSize})`,
        );
      }
    } else {
      const used = this.ops.get(op);
      if (used) {
        // Next to its own batch, one of the two lines' framing is damaged: name the batch.
        const at = used.lastSeq === seq - 1 ? used.firstSeq : seq;
        return this.fail(
          at,
          `op ${JSON.stringify(op)} at seq ${seq} is already used by seqs ${used.firstSeq}..${used.lastSeq}`,
        );
      }
      this.pending = { op, size: batchSize, firstSeq: seq, events: [], end };
    }
    const batch = this.pending!;
    batch.events.push(event);
    batch.end = end;
    if (batch.events.length === batch.size) this.commitBatch(batch);
  }

  /** Validates a complete batch as one surface transition and commits it, or records the first bad seq. */
  private commitBatch(batch: PendingBatch): void {
    this.pending = undefined;
    const events = batch.events;
    if (
      events.length > 1 &&
      events.some(
        (e) =>
          isKnownEvent(e) && (isSurfaceType(e.type) || e.surfaceOp !== undefined || e.sourceEventSeqs !== undefined),
      )
    ) {
      // commitPlanned checks event by event; check the whole batch first so a bad event commits none.
      const scratch = new SurfaceFold(this.session.surfaceNodes, this.session.replaceGeneration);
      const base = this.session.nextSeq;
      const lookup = (s: number): StoredEvent | undefined => this.session.storedAt(s) ?? events[s - base];
      for (const event of events) {
        try {
          if (isKnownEvent(event)) scratch.apply(event, lookup);
        } catch (error) {
          return this.failWith(event.seq, error);
        }
      }
    }
    try {
      this.session.commitPlanned(events);
    } catch (error) {
      return this.failWith(events[0]!.seq, error);
    }
    this.indexOp(batch.op, batch.firstSeq, batch.firstSeq + events.length - 1);
    this.validEnd = batch.end;
  }

  private indexOp(op: string, firstSeq: number, lastSeq: number): void {
    const range = this.ops.get(op);
    if (range) range.lastSeq = lastSeq;
    else this.ops.set(op, { firstSeq, lastSeq });
  }

  /**
   * Ends a pass over the stored records. `head` (transactional backends) is the next seq the
   * stored batches account for: seqs below it that no record filled are missing. Returns the torn
   * final write, if that is what the held records were; it is not part of the session, and the
   * next pass re-reads from {@link validEnd}. A definite problem is in {@link problem}.
   */
  finish(head?: number): TornTail | undefined {
    if (this.failure) return undefined;
    let torn: TornTail | undefined;
    const pending = this.pending;
    if (this.damaged) {
      torn = {
        seq: pending?.firstSeq ?? this.damaged.seq,
        position: this.validEnd,
        records: (pending?.events.length ?? 0) + 1,
        badSeq: this.damaged.seq,
        reason: this.damaged.reason,
      };
    } else if (pending) {
      torn = {
        seq: pending.firstSeq,
        position: this.validEnd,
        records: pending.events.length,
        badSeq: pending.firstSeq + pending.events.length,
        reason: `batch ${JSON.stringify(pending.op)} declares ${pending.size} events but only ${pending.events.length} were written (a write that never finished)`,
      };
    } else if (head !== undefined && head > this.session.nextSeq) {
      const from = this.session.nextSeq;
      this.fail(
        from,
        `seq${head - 1 > from ? `s ${from}..${head - 1} are` : ` ${from} is`} missing (the stored batches end at seq ${head - 1})`,
      );
    }
    this.pending = undefined;
    this.damaged = undefined;
    return torn;
  }

  /** Commits events the caller planned with {@link planAppend} and durably wrote, ending at `end`. */
  commitWritten(events: readonly StoredEvent[], end?: number): void {
    this.session.commitPlanned(events);
    this.indexOp(events[0]!.op!, events[0]!.seq, events[events.length - 1]!.seq);
    if (end !== undefined) this.validEnd = end;
  }
}

/** The error every reader and writer throws for a log whose scan found a definite problem. */
function corruptLogError(scanner: LogScanner<ScanTarget>, problem: ScanProblem): SessionlogError {
  if (problem.code === 'UNSUPPORTED_FORMAT')
    return new SessionlogError('UNSUPPORTED_FORMAT', `${scanner.where}: ${problem.reason}`);
  return new SessionlogError(
    'CORRUPT_LOG',
    `${scanner.where}: the stored log is damaged at seq ${problem.seq}: ${problem.reason}. Nothing was changed; \`sessionlog sessions verify ${scanner.session.id}\` reports the problem and \`sessionlog sessions salvage ${scanner.session.id} --into NEW_ID\` keeps the valid prefix`,
  );
}

/**
 * Refuses a torn final write that a writer was acknowledged (DESIGN §4.1, issue 52): a writer that
 * expects to append at `expectedSeq` saw every seq below it written, so a "torn" batch starting
 * below it was committed and then damaged. It is CORRUPT_LOG naming its first bad seq, never cut.
 * `where` names the session (and its location, for a store's own message).
 */
export function assertTornTailUnacknowledged(
  where: string,
  id: string,
  torn: { seq: number; badSeq?: number; reason: string } | undefined,
  expectedSeq: number,
): void {
  if (torn === undefined || torn.seq >= expectedSeq) return;
  throw new SessionlogError(
    'CORRUPT_LOG',
    `${where}: the stored log is damaged at seq ${torn.badSeq ?? torn.seq}: ${torn.reason}; the batch from seq ${torn.seq} was acknowledged to this writer (it has seen seqs up to ${expectedSeq - 1}), so it is damage to committed records, not a write that never finished. Nothing was changed; \`sessionlog sessions export ${id}\` shows what is intact and \`sessionlog sessions salvage ${id} --into NEW_ID\` keeps it`,
  );
}

/** Throws for a definite problem found by `finish`. */
export function assertScanned(scanner: LogScanner<ScanTarget>): void {
  if (scanner.problem) throw corruptLogError(scanner, scanner.problem);
}

/** The `scan` report of a scanner after `finish`. */
export function scanReport(scanner: LogScanner, torn: TornTail | undefined): ScanReport {
  const problem =
    scanner.problem ??
    (torn && { seq: torn.seq, reason: torn.reason, code: 'CORRUPT_LOG' as const, torn: true, badSeq: torn.badSeq });
  const events = scanner.session.events;
  return {
    sessionId: scanner.session.id,
    header: scanner.session.header,
    // A problem may name a batch the scan had already taken in (JSONL: the line after a batch
    // repeats its op, so one of the two lines' framing is damaged and the batch is named): the
    // valid prefix ends before the seq named, so a salvage keeps no part of that batch.
    events: problem !== undefined && problem.seq < events.length ? events.slice(0, problem.seq) : events,
    ...(problem ? { problem } : {}),
  };
}

/** The `scan` report of a session whose header could not be read. */
export function headerProblemReport(id: string, error: unknown): ScanReport {
  if (
    isSessionlogError(error, 'UNSUPPORTED_FORMAT') ||
    isSessionlogError(error, 'CORRUPT_LOG') ||
    isSessionlogError(error, 'INVALID_EVENT') ||
    isSessionlogError(error, 'INVALID_SESSION_ID')
  ) {
    return {
      sessionId: id,
      header: undefined,
      headerProblem: {
        code: error.code === 'UNSUPPORTED_FORMAT' ? 'UNSUPPORTED_FORMAT' : 'CORRUPT_LOG',
        reason: error.message,
      },
      events: [],
    };
  }
  throw error;
}

/**
 * The fields of a stored header, checked as `create` checks a header, for session `id`: damage is
 * CORRUPT_LOG naming `where`, a newer header version UNSUPPORTED_FORMAT, and a header of another
 * session CORRUPT_LOG (`mismatch` says how that could have happened, after "it names session X").
 */
export function decodeStoredHeader(fields: unknown, id: string, where: string, mismatch = ''): SessionHeader {
  let header: SessionHeader;
  try {
    header = parseHeader(fields, `stored header of session ${id}`);
  } catch (error) {
    if (error instanceof SessionlogError && error.code !== 'UNSUPPORTED_FORMAT')
      throw corruptHeaderError(where, error.message, error);
    throw error;
  }
  if (header.id !== id) throw corruptHeaderError(where, `it names session ${header.id}${mismatch}`);
  return header;
}
