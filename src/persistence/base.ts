/**
 * Machinery shared by the durable `SessionStore` backends: options, argument checks, the one
 * stored-log scanner that applies the integrity rules of DESIGN §4.1 (`LogScanner`), the append
 * and repair planners that run under a backend's write lock, the live-tail `watch` loop, and
 * artifact naming. Backends own only their I/O, locking and caching.
 */
import { EventEmitter } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  KNOWN_EVENT_TYPES,
  Session,
  SessionlogError,
  SurfaceFold,
  assertSessionId,
  assertStoredEvent,
  deepFreeze,
  interruptedTurnClosers,
  isKnownEvent,
  isSessionlogError,
  isSurfaceType,
  NonJsonValueError,
  repairOp,
  type StoredEvent,
  type NewEvent,
  type SessionHeader,
  type SessionView,
} from '../session/index.js';
import type { AppendOptions, AppendResult, LoadedSession, ScanProblem, ScanReport } from './store.js';

// ---------------------------------------------------------------------------------------------
// Options

/** Tunables shared by every backend. See {@link resolveStoreOptions} for the defaults. */
export type StoreOptions = {
  /** How often `watch` polls for appends made by another process (ms). Default 40. */
  pollIntervalMs?: number;
  /** SQLite: how long a writer waits for another connection's lock before UNAVAILABLE (ms). Default 5000. */
  busyTimeoutMs?: number;
  /**
   * How long a writer waits for a session's lock before UNAVAILABLE (ms): the JSONL lock file,
   * PostgreSQL's row lock (`lock_timeout`). Default 30000.
   */
  lockTimeoutMs?: number;
  /**
   * How long a lock holder may make no progress before it loses the lock (ms): a JSONL lock file
   * whose holder stopped refreshing it for this long is broken (the holder's write is then
   * fenced off and fails with SEQ_CONFLICT); a PostgreSQL connection idle inside a transaction
   * this long is ended by the server (`idle_in_transaction_session_timeout`). Default 15000.
   */
  lockStaleMs?: number;
  /** How many sessions keep their validated in-memory copy between calls. Default 32. */
  sessionCacheSize?: number;
  /** How long an erased session's id stays refused by `create` (SESSION_ERASED), in ms. Default 30 days. */
  tombstoneMs?: number;
};

export type ResolvedStoreOptions = Required<StoreOptions>;

const DAY_MS = 24 * 60 * 60 * 1000;

function positiveInteger(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!Number.isSafeInteger(value) || value <= 0) {
    throw new SessionlogError(
      'INVALID_ARGUMENT',
      `store option ${name} must be a positive integer, got ${String(value)}`,
    );
  }
  return value;
}

/** Fills defaults and validates; everything downstream takes the resolved value. */
export function resolveStoreOptions(options: StoreOptions = {}): ResolvedStoreOptions {
  return {
    pollIntervalMs: positiveInteger('pollIntervalMs', options.pollIntervalMs, 40),
    busyTimeoutMs: positiveInteger('busyTimeoutMs', options.busyTimeoutMs, 5000),
    lockTimeoutMs: positiveInteger('lockTimeoutMs', options.lockTimeoutMs, 30_000),
    lockStaleMs: positiveInteger('lockStaleMs', options.lockStaleMs, 15_000),
    sessionCacheSize: positiveInteger('sessionCacheSize', options.sessionCacheSize, 32),
    tombstoneMs: positiveInteger('tombstoneMs', options.tombstoneMs, 30 * DAY_MS),
  };
}

// ---------------------------------------------------------------------------------------------
// Argument checks (public boundary of every backend)

/** Throws INVALID_ARGUMENT unless `value` is a non-negative safe integer. */
/** Throws INVALID_ARGUMENT unless `value` is a non-negative safe integer. */
export function assertSeqArgument(name: string, value: unknown): asserts value is number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
    throw new SessionlogError('INVALID_ARGUMENT', `${name} must be a non-negative safe integer, got ${String(value)}`);
  }
}

/** Validates `append` arguments that do not depend on stored state. */
export function assertAppendArguments(
  id: unknown,
  events: unknown,
  options: unknown,
): asserts options is AppendOptions {
  assertSessionId(id);
  if (!Array.isArray(events) || events.length === 0) {
    throw new SessionlogError('INVALID_ARGUMENT', `append to session ${id} needs a non-empty array of events`);
  }
  const o = options as Partial<AppendOptions> | undefined;
  if (typeof o !== 'object' || o === null)
    throw new SessionlogError('INVALID_ARGUMENT', 'append needs options {expectedSeq, op}');
  assertSeqArgument('expectedSeq', o.expectedSeq);
  if (typeof o.op !== 'string' || o.op.length === 0) {
    throw new SessionlogError(
      'INVALID_ARGUMENT',
      `append op must be a non-empty string (the batch's idempotency key), got ${String(o.op)}`,
    );
  }
}

/** Validates `readFrom` arguments. */
export function assertReadArguments(id: unknown, fromSeq: unknown, limit: unknown): void {
  assertSessionId(id);
  assertSeqArgument('fromSeq', fromSeq);
  if (limit !== undefined) assertSeqArgument('limit', limit);
}

export function notFound(id: string): SessionlogError {
  return new SessionlogError(
    'SESSION_NOT_FOUND',
    `session ${id} does not exist in this store; create it first or check the id`,
  );
}

export function storeClosed(): SessionlogError {
  return new SessionlogError('STORE_CLOSED', 'the session store is closed; open a new one with openStore()');
}

/** The error for `create` with a header that differs from the stored one. */
export function alreadyExists(id: string): SessionlogError {
  return new SessionlogError(
    'SESSION_ALREADY_EXISTS',
    `session ${id} already exists with a different header; pick another id or load the existing session`,
  );
}

/** The error for `create` of an id whose tombstone still lasts. */
export function sessionErased(id: string, erasedAt: number, until: number): SessionlogError {
  return new SessionlogError(
    'SESSION_ERASED',
    `session ${id} was erased at ${new Date(erasedAt).toISOString()} and its id cannot be reused until ${new Date(until).toISOString()}; pick another id`,
  );
}

// ---------------------------------------------------------------------------------------------
// Scanning a stored log (DESIGN §4.1)

/**
 * How a backend frames its records, which decides the one damage it may repair by itself:
 *
 * - `transactional` (SQLite, PostgreSQL): batches commit whole, so there are no torn writes;
 *   every problem is corruption. Every event must carry its batch's `op`.
 * - `jsonl-v2`: every line carries its batch's event count, so a reader tells the complete lines
 *   of an unfinished final batch from a finished batch. The final batch that never finished (its
 *   last line incomplete or unparsable, or fewer lines than its count) is a torn write.
 * - `jsonl-v1` (files written before the batch count): only a final line that is incomplete or
 *   does not parse is a torn write; complete lines are never dropped.
 */
export type ScanFraming = 'transactional' | 'jsonl-v1' | 'jsonl-v2';

/** One stored record as a backend decoded it. `end` is where the record ends (a byte offset in JSONL). */
export type StoredRecord =
  | { kind: 'event'; value: unknown; end: number; batchSize?: unknown }
  | { kind: 'damaged'; reason: string; end: number };

/** A JSONL torn final write: where it starts and how many records it holds. */
export type TornTail = { seq: number; position: number; records: number; reason: string };

export type OpRange = { firstSeq: number; lastSeq: number };

type PendingBatch = { op: string; size: number; firstSeq: number; events: StoredEvent[]; end: number };

/**
 * The one classifier of stored records, shared by every backend. It folds records into a
 * validated `Session` (envelope, payload and surface transition, exactly as a live append) and
 * indexes their ops. The first problem stops it: `problem` then names the first bad seq. A
 * record it could not judge yet (a damaged JSONL line, an unfinished JSONL batch) is held until
 * the next record or {@link finish} decides between corruption and a torn final write.
 */
export class LogScanner {
  readonly session: Session;
  readonly ops = new Map<string, OpRange>();
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
  ) {
    this.session = Session.create(header);
    this.validEnd = start;
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
      if (this.framing === 'transactional') return this.fail(seq, record.reason);
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
        reason: this.damaged.reason,
      };
    } else if (pending) {
      torn = {
        seq: pending.firstSeq,
        position: this.validEnd,
        records: pending.events.length,
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
function corruptLogError(scanner: LogScanner, problem: ScanProblem): SessionlogError {
  if (problem.code === 'UNSUPPORTED_FORMAT')
    return new SessionlogError('UNSUPPORTED_FORMAT', `${scanner.where}: ${problem.reason}`);
  return new SessionlogError(
    'CORRUPT_LOG',
    `${scanner.where}: the stored log is damaged at seq ${problem.seq}: ${problem.reason}. Nothing was changed; \`sessionlog sessions verify ${scanner.session.id}\` reports the problem and \`sessionlog sessions salvage ${scanner.session.id} --into NEW_ID\` keeps the valid prefix`,
  );
}

/** The error for a stored header that cannot be read. */
export function corruptHeaderError(where: string, reason: string, cause?: unknown): SessionlogError {
  return new SessionlogError(
    'CORRUPT_LOG',
    `${where}: the stored header (the record before the events) is damaged: ${reason}. Nothing was changed; restore it from a backup`,
    cause === undefined ? undefined : { cause },
  );
}

/** Throws for a definite problem found by `finish`. */
export function assertScanned(scanner: LogScanner): void {
  if (scanner.problem) throw corruptLogError(scanner, scanner.problem);
}

/** The `scan` report of a scanner after `finish`. */
export function scanReport(scanner: LogScanner, torn: TornTail | undefined): ScanReport {
  const problem =
    scanner.problem ?? (torn && { seq: torn.seq, reason: torn.reason, code: 'CORRUPT_LOG' as const, torn: true });
  return {
    sessionId: scanner.session.id,
    header: scanner.session.header,
    events: scanner.session.events,
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

// ---------------------------------------------------------------------------------------------
// Planning writes (run by a backend while it holds the session's write lock)

export type AppendPlan = { kind: 'replayed'; result: AppendResult } | { kind: 'write'; events: StoredEvent[] };

function describeTypes(types: readonly unknown[]): string {
  return types.map((t) => String(t)).join(', ');
}

/**
 * Decides an append against the synced stored state: a stored op with the same event count and
 * types is replayed (nothing written) and with anything else is OP_CONFLICT; a wrong
 * `expectedSeq` is SEQ_CONFLICT; otherwise the batch is validated as a surface transition (the
 * one validation of the batch) and returned ready to write. Throws without side effects.
 */
export function planAppend(scanner: LogScanner, events: readonly NewEvent[], options: AppendOptions): AppendPlan {
  const id = scanner.session.id;
  const stored = scanner.ops.get(options.op);
  if (stored) {
    const storedTypes: string[] = [];
    for (let seq = stored.firstSeq; seq <= stored.lastSeq; seq++) storedTypes.push(scanner.session.storedAt(seq)!.type);
    const types = events.map((event) => (event as { type?: unknown } | null)?.type);
    if (types.length !== storedTypes.length || types.some((type, i) => type !== storedTypes[i])) {
      throw new SessionlogError(
        'OP_CONFLICT',
        `session ${id}: op ${JSON.stringify(options.op)} is already stored as seqs ${stored.firstSeq}..${stored.lastSeq} (${describeTypes(storedTypes)}), but this append has ${types.length} event(s) (${describeTypes(types)}); two different writes under one key is a bug in the writer — give each batch its own op`,
      );
    }
    return { kind: 'replayed', result: { ...stored, replayed: true } };
  }
  if (scanner.nextSeq !== options.expectedSeq) {
    throw new SessionlogError(
      'SEQ_CONFLICT',
      `session ${id}: append expected to start at seq ${options.expectedSeq} but the stored next seq is ${scanner.nextSeq}; another writer appended — reload the session and retry`,
    );
  }
  for (const event of events) {
    // The stored-log rule refuses unknown types on read, so this build must not write one.
    const type = (event as { type?: unknown } | null)?.type;
    if (typeof type !== 'string' || !KNOWN_EVENT_TYPES.has(type)) {
      throw new SessionlogError(
        'INVALID_EVENT',
        `session ${id}: event type ${JSON.stringify(type)} is unknown to this build and could not be read back; add it to EventDataMap first`,
      );
    }
  }
  return { kind: 'write', events: scanner.session.planBatch(events, options.op) };
}

export function appendResultOf(events: readonly StoredEvent[]): AppendResult {
  return { firstSeq: events[0]!.seq, lastSeq: events[events.length - 1]!.seq, replayed: false };
}

/** The closers for a cold interrupted turn (dsh-spec §8.5), planned as one batch with op `repairOp(lastSeq)`. */
export function planRepair(scanner: LogScanner): StoredEvent[] {
  const events = scanner.session.events;
  const closers = interruptedTurnClosers(events);
  if (closers.length === 0) return [];
  return scanner.session.planBatch(closers, repairOp(events[events.length - 1]!.seq));
}

/** `events[fromSeq .. fromSeq+limit)` of a session without copying the whole log. */
export function sliceEvents(session: SessionView, fromSeq: number, limit: number | undefined): StoredEvent[] {
  const end = limit === undefined ? session.nextSeq : Math.min(session.nextSeq, fromSeq + limit);
  const out: StoredEvent[] = [];
  for (let seq = fromSeq; seq < end; seq++) out.push(session.storedAt(seq)!);
  return out;
}

/** Builds the `load`/`inspect` result. */
export function loadedSession(scanner: LogScanner, closers: readonly StoredEvent[], truncated: number): LoadedSession {
  return {
    header: scanner.session.header,
    events: [...scanner.session.events, ...closers],
    repaired: closers.length,
    truncated,
  };
}

// ---------------------------------------------------------------------------------------------
// Live tail

/**
 * In-process append notifications, shared by every store instance in this process that points
 * at the same location, so a watcher wakes immediately on an append made through another
 * instance. Appends by other processes are found by polling.
 */
const appendSignals = new EventEmitter();
appendSignals.setMaxListeners(0);

export function notifyAppended(location: string, id: string): void {
  appendSignals.emit(`${location}\0${id}`);
}

function onAppended(location: string, id: string, listener: () => void): () => void {
  const name = `${location}\0${id}`;
  appendSignals.on(name, listener);
  return () => appendSignals.off(name, listener);
}

export type WatchSource = {
  /** Stored events with seq >= fromSeq (a bounded page). */
  read(fromSeq: number): Promise<StoredEvent[]>;
  /** Registers a wake-up for appends to this session and for store close; returns an unsubscribe. */
  subscribe(wake: () => void): () => void;
  isClosed(): boolean;
  pollIntervalMs: number;
};

/**
 * Wakes `wake` on an in-process append to session `id` of the store at `location`, and on the
 * store's close (through `closeListeners`); returns the unsubscribe.
 */
export function subscribeLocal(
  closeListeners: Set<() => void>,
  location: string,
  id: string,
  wake: () => void,
): () => void {
  closeListeners.add(wake);
  const off = onAppended(location, id, wake);
  return () => {
    off();
    closeListeners.delete(wake);
  };
}

/**
 * The `watch` loop: yields stored events from `fromSeq`, then waits for an in-process append
 * signal or the next poll tick and yields what is new. Ends when `signal` aborts or the store
 * closes; a consumer `break` unsubscribes.
 */
export async function* watchEvents(
  source: WatchSource,
  fromSeq: number,
  signal?: AbortSignal,
): AsyncGenerator<StoredEvent> {
  let cursor = fromSeq;
  let woken = false;
  let wakeWaiter: (() => void) | undefined;
  const wake = (): void => {
    woken = true;
    wakeWaiter?.();
  };
  const unsubscribe = source.subscribe(wake);
  signal?.addEventListener('abort', wake);
  try {
    while (!signal?.aborted && !source.isClosed()) {
      woken = false;
      let events: StoredEvent[];
      try {
        events = await source.read(cursor);
      } catch (error) {
        if (source.isClosed()) return;
        throw error;
      }
      for (const event of events) {
        if (signal?.aborted) return;
        yield event;
        cursor = event.seq + 1;
      }
      if (events.length > 0 || woken) continue;
      const ac = new AbortController();
      await Promise.race([
        new Promise<void>((resolve) => (wakeWaiter = resolve)),
        sleep(source.pollIntervalMs, undefined, { signal: ac.signal }).catch(() => {
          // AbortError from cancelling the poll timer once the wake-up won the race.
        }),
      ]);
      ac.abort();
      wakeWaiter = undefined;
    }
  } finally {
    unsubscribe();
    signal?.removeEventListener('abort', wake);
  }
}

// ---------------------------------------------------------------------------------------------
// Artifacts

const ARTIFACT_NAME_PATTERN = /^(?!\.)[A-Za-z0-9._-]{1,160}$/;
const LOCATOR_PATTERN = /^artifact:([^/]+)\/([^/]+)$/;

/** A safe file/row name from a suggested one: `[A-Za-z0-9._-]`, no leading dot, at most 120 characters. */
export function sanitizeArtifactName(suggested: string): string {
  const cleaned = suggested
    .replace(/[^A-Za-z0-9._-]+/g, '_')
    .replace(/^[.]+/, '')
    .slice(0, 120);
  return cleaned.length > 0 ? cleaned : 'artifact';
}

/** Candidate unique names: the name itself, then `stem-2.ext`, `stem-3.ext`, … */
export function* artifactNameCandidates(name: string): Generator<string> {
  yield name;
  const dot = name.lastIndexOf('.');
  const stem = dot > 0 ? name.slice(0, dot) : name;
  const ext = dot > 0 ? name.slice(dot) : '';
  for (let n = 2; ; n++) yield `${stem}-${n}${ext}`;
}

export function artifactLocator(sessionId: string, name: string): string {
  return `artifact:${sessionId}/${name}`;
}

/**
 * The artifact name a locator this store issued points at, for a read by session `sessionId`.
 * A locator of another session is ARTIFACT_FOREIGN; anything malformed is ARTIFACT_NOT_FOUND.
 */
export function ownArtifactName(sessionId: unknown, locator: unknown): string {
  assertSessionId(sessionId);
  const match = typeof locator === 'string' ? LOCATOR_PATTERN.exec(locator) : null;
  if (!match) {
    throw new SessionlogError(
      'ARTIFACT_NOT_FOUND',
      `artifact locator ${JSON.stringify(String(locator).slice(0, 200))} is not of the form artifact:<sessionId>/<name>; use a locator returned by put()`,
    );
  }
  const [, owner, name] = match as unknown as [string, string, string];
  if (owner !== sessionId) {
    throw new SessionlogError(
      'ARTIFACT_FOREIGN',
      `artifact locator ${JSON.stringify((locator as string).slice(0, 200))} does not belong to session ${sessionId}; a session reads only the artifacts stored under its own id`,
    );
  }
  if (!ARTIFACT_NAME_PATTERN.test(name)) throw artifactNotFound(locator as string);
  return name;
}

export function artifactNotFound(locator: string): SessionlogError {
  return new SessionlogError(
    'ARTIFACT_NOT_FOUND',
    `no artifact ${JSON.stringify(locator.slice(0, 200))} in this store`,
  );
}

/** The `read(sessionId, locator, offset, limit)` window over a whole artifact text. */
export function artifactWindow(content: string, offset: unknown, limit: unknown): { text: string; total: number } {
  assertSeqArgument('offset', offset);
  assertSeqArgument('limit', limit);
  return { text: content.slice(offset, offset + limit), total: content.length };
}
