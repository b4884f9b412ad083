/**
 * Machinery shared by the durable `SessionStore` backends: argument checks, the stored-log
 * scanner that tells a torn tail from corruption (dsh-spec §8.6/§8.8), the append and repair
 * planners that run under a backend's write lock, the live-tail `watch` loop, and artifact
 * naming. Backends own only their I/O and locking.
 */
import { EventEmitter } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  KNOWN_EVENT_TYPES,
  Session,
  SessionlogError,
  assertSessionId,
  assertStoredEvent,
  deepFreeze,
  interruptedTurnClosers,
  isSessionlogError,
  NonJsonValueError,
  repairOp,
  type StoredEvent,
  type NewEvent,
  type SessionHeader,
} from '../session/index.js';
import type { AppendOptions, AppendResult, LoadedSession } from './store.js';

// ---------------------------------------------------------------------------------------------
// Options

/** Tunables shared by every backend. See {@link resolveStoreOptions} for the defaults. */
export type StoreOptions = {
  /** How often `watch` polls for appends made by another process (ms). Default 40. */
  pollIntervalMs?: number;
  /** SQLite: how long a writer waits for another connection's lock (ms). Default 5000. */
  busyTimeoutMs?: number;
  /** JSONL: how long an append waits for the session's lock file (ms). Default 30000. */
  lockTimeoutMs?: number;
  /** JSONL: a lock file older than this is considered abandoned even if its pid looks alive (ms). Default 15000. */
  lockStaleMs?: number;
  /** How many sessions keep their validated in-memory log between calls. Default 32. */
  sessionCacheSize?: number;
};

export type ResolvedStoreOptions = Required<StoreOptions>;

function positiveInteger(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!Number.isSafeInteger(value) || value <= 0) {
    throw new SessionlogError('INVALID_ARGUMENT', `store option ${name} must be a positive integer, got ${String(value)}`);
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
  };
}

// ---------------------------------------------------------------------------------------------
// Argument checks (public boundary of every backend)

/** Throws INVALID_ARGUMENT unless `value` is a non-negative safe integer. */
export function assertSeqArgument(name: string, value: unknown): asserts value is number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
    throw new SessionlogError('INVALID_ARGUMENT', `${name} must be a non-negative safe integer, got ${String(value)}`);
  }
}

/** Validates `append` arguments that do not depend on stored state. */
export function assertAppendArguments(id: unknown, events: unknown, options: unknown): asserts options is AppendOptions {
  assertSessionId(id);
  if (!Array.isArray(events) || events.length === 0) {
    throw new SessionlogError('INVALID_ARGUMENT', `append to session ${id} needs a non-empty array of events`);
  }
  const o = options as Partial<AppendOptions> | undefined;
  if (typeof o !== 'object' || o === null) throw new SessionlogError('INVALID_ARGUMENT', 'append needs options {expectedSeq, op}');
  assertSeqArgument('expectedSeq', o.expectedSeq);
  if (typeof o.op !== 'string' || o.op.length === 0) {
    throw new SessionlogError('INVALID_ARGUMENT', `append op must be a non-empty string (the batch's idempotency key), got ${String(o.op)}`);
  }
}

/** Validates `readFrom` arguments. */
export function assertReadArguments(id: unknown, fromSeq: unknown, limit: unknown): void {
  assertSessionId(id);
  assertSeqArgument('fromSeq', fromSeq);
  if (limit !== undefined) assertSeqArgument('limit', limit);
}

export function notFound(id: string): SessionlogError {
  return new SessionlogError('SESSION_NOT_FOUND', `session ${id} does not exist in this store; create it first or check the id`);
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

// ---------------------------------------------------------------------------------------------
// Scanning a stored log: valid prefix, torn tail, corruption

/** One stored record as a backend decoded it. `position` locates it (byte offset or seq). */
export type StoredRecord =
  | { ok: true; value: unknown; position: number }
  | { ok: false; reason: string; position: number };

/** Where the torn tail starts and how many records it holds. */
export type TornTail = { position: number; seq: number; reason: string; records: number };

/**
 * Folds stored records into a validated `Session` (envelope, payload and surface transition,
 * exactly as a live append). The first bad record or seq gap starts a candidate torn tail;
 * every later record is dropped with it, unless a later record is a `turn/end`: then the damage
 * lies inside committed turns and the log is CORRUPT_LOG. A type unknown to this build and not
 * `ignorable` is UNSUPPORTED_FORMAT wherever it appears in the valid prefix.
 */
export class LogScanner {
  readonly session: Session;
  private tail: TornTail | undefined;

  constructor(
    header: SessionHeader,
    private readonly where: string,
  ) {
    this.session = Session.create(header);
  }

  get nextSeq(): number {
    return this.session.nextSeq;
  }

  get torn(): TornTail | undefined {
    return this.tail;
  }

  /** Feeds the next stored record. Returns true when it joined the valid prefix. */
  push(record: StoredRecord): boolean {
    if (this.tail) {
      this.tail.records += 1;
      if (record.ok && isTurnEnd(record.value)) {
        throw new SessionlogError(
          'CORRUPT_LOG',
          `${this.where}: stored record at ${this.tail.position} is damaged (${this.tail.reason}) but a later committed turn/end exists, so this is not a torn write; restore the log from a backup or export its valid prefix`,
        );
      }
      return false;
    }
    if (!record.ok) {
      this.tail = { position: record.position, seq: this.nextSeq, reason: record.reason, records: 1 };
      return false;
    }
    try {
      assertStoredEvent(record.value, this.nextSeq, this.session.id);
      this.session.commitPlanned([deepFreeze(record.value)]);
      return true;
    } catch (error) {
      if (isSessionlogError(error, 'UNSUPPORTED_FORMAT')) throw error;
      if (!isSessionlogError(error) && !(error instanceof NonJsonValueError)) throw error;
      this.tail = { position: record.position, seq: this.nextSeq, reason: error.message, records: 1 };
      return false;
    }
  }

  /** Commits events the caller planned with {@link planAppend} and durably wrote. */
  commitWritten(events: readonly StoredEvent[]): void {
    this.session.commitPlanned(events);
  }

  /** Forgets the torn tail after the backend truncated it durably (or to rescan it). */
  clearTorn(): void {
    this.tail = undefined;
  }
}

function isTurnEnd(value: unknown): boolean {
  return typeof value === 'object' && value !== null && (value as { type?: unknown }).type === 'turn/end';
}

// ---------------------------------------------------------------------------------------------
// Planning writes (run by a backend while it holds the session's write lock)

export type OpRange = { firstSeq: number; lastSeq: number };

export type AppendPlan = { kind: 'replayed'; result: AppendResult } | { kind: 'write'; events: StoredEvent[] };

/**
 * Decides an append against the synced stored state: a stored op is replayed (nothing
 * written), a wrong `expectedSeq` is SEQ_CONFLICT, otherwise the batch is validated as a
 * surface transition and returned ready to write. Throws without side effects.
 */
export function planAppend(
  scanner: LogScanner,
  storedOp: OpRange | undefined,
  events: readonly NewEvent[],
  options: AppendOptions,
): AppendPlan {
  if (storedOp) return { kind: 'replayed', result: { ...storedOp, replayed: true } };
  if (scanner.nextSeq !== options.expectedSeq) {
    throw new SessionlogError(
      'SEQ_CONFLICT',
      `session ${scanner.session.id}: append expected to start at seq ${options.expectedSeq} but the stored next seq is ${scanner.nextSeq}; another writer appended — reload the session and retry`,
    );
  }
  for (const event of events) {
    // The stored-log rule refuses unknown types on read, so this build must not write one.
    if (!KNOWN_EVENT_TYPES.has((event as { type?: unknown })?.type as string)) {
      throw new SessionlogError(
        'INVALID_EVENT',
        `session ${scanner.session.id}: event type ${JSON.stringify((event as { type?: unknown })?.type)} is unknown to this build and could not be read back; add it to EventDataMap first`,
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

/** Builds the `load`/`inspect` result. */
export function loadedSession(scanner: LogScanner, closers: readonly StoredEvent[], truncated: number): LoadedSession {
  return {
    header: scanner.session.header,
    events: [...scanner.session.events, ...closers],
    repaired: closers.length,
    truncated,
  };
}

/** Records op ranges of accepted events into an op index. */
export function indexOps(index: Map<string, OpRange>, events: readonly StoredEvent[]): void {
  for (const event of events) {
    if (event.op === undefined) continue;
    const range = index.get(event.op);
    if (range) range.lastSeq = event.seq;
    else index.set(event.op, { firstSeq: event.seq, lastSeq: event.seq });
  }
}

// ---------------------------------------------------------------------------------------------
// Small bounded LRU for per-session state

export class LruMap<K, V> {
  private readonly map = new Map<K, V>();
  constructor(private readonly capacity: number) {}

  get(key: K): V | undefined {
    const value = this.map.get(key);
    if (value !== undefined) {
      this.map.delete(key);
      this.map.set(key, value);
    }
    return value;
  }

  set(key: K, value: V): void {
    this.map.delete(key);
    this.map.set(key, value);
    while (this.map.size > this.capacity) this.map.delete(this.map.keys().next().value as K);
  }

  delete(key: K): void {
    this.map.delete(key);
  }

  clear(): void {
    this.map.clear();
  }
}

/** Runs async operations one at a time per key (errors do not poison the chain). */
export class KeyedSerializer {
  private readonly tails = new Map<string, Promise<unknown>>();

  run<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const previous = this.tails.get(key) ?? Promise.resolve();
    const next = previous.then(fn, fn);
    const settled = next.then(
      () => undefined,
      () => undefined,
    );
    this.tails.set(key, settled);
    void settled.then(() => {
      if (this.tails.get(key) === settled) this.tails.delete(key);
    });
    return next;
  }
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

export function onAppended(location: string, id: string, listener: () => void): () => void {
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
export function subscribeLocal(closeListeners: Set<() => void>, location: string, id: string, wake: () => void): () => void {
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
export async function* watchEvents(source: WatchSource, fromSeq: number, signal?: AbortSignal): AsyncGenerator<StoredEvent> {
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
  const cleaned = suggested.replace(/[^A-Za-z0-9._-]+/g, '_').replace(/^[.]+/, '').slice(0, 120);
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

/** Parses a locator this store issued; anything else is ARTIFACT_NOT_FOUND. */
export function parseArtifactLocator(locator: unknown): { sessionId: string; name: string } {
  const match = typeof locator === 'string' ? LOCATOR_PATTERN.exec(locator) : null;
  if (!match) {
    throw new SessionlogError(
      'ARTIFACT_NOT_FOUND',
      `artifact locator ${JSON.stringify(String(locator).slice(0, 200))} is not of the form artifact:<sessionId>/<name>; use a locator returned by put()`,
    );
  }
  const [, sessionId, name] = match as unknown as [string, string, string];
  if (!ARTIFACT_NAME_PATTERN.test(name)) throw artifactNotFound(locator as string);
  try {
    assertSessionId(sessionId);
  } catch (error) {
    throw artifactNotFound(locator as string, error);
  }
  return { sessionId, name };
}

export function artifactNotFound(locator: string, cause?: unknown): SessionlogError {
  return new SessionlogError('ARTIFACT_NOT_FOUND', `no artifact ${JSON.stringify(locator.slice(0, 200))} in this store`, cause ? { cause } : undefined);
}

/** The `read(locator, offset, limit)` window over a whole artifact text. */
export function artifactWindow(content: string, offset: unknown, limit: unknown): { text: string; total: number } {
  assertSeqArgument('offset', offset);
  assertSeqArgument('limit', limit);
  return { text: content.slice(offset, offset + limit), total: content.length };
}

// ---------------------------------------------------------------------------------------------
// Misc

/** Retries `attempt` until it returns a value or `deadline` passes, sleeping a few ms between tries. */
export async function retryUntil<T>(deadline: number, attempt: () => Promise<T | undefined>): Promise<T | undefined> {
  let delay = 2;
  for (;;) {
    const value = await attempt();
    if (value !== undefined) return value;
    if (Date.now() >= deadline) return undefined;
    await sleep(delay + Math.floor(Math.random() * delay));
    delay = Math.min(delay * 2, 50);
  }
}
