/**
 * SQLite backend of `SessionStore` (DESIGN §4, dsh-spec §8.8), the embedded default.
 *
 * Storage format (schema version {@link SQLITE_SCHEMA_VERSION}, `application_id`
 * {@link SQLITE_APPLICATION_ID}; a file with a newer `user_version` or a foreign application id
 * is refused, there are no migrations yet):
 *
 * - `sessions(key, id, header)`: integer key, text id, header JSON.
 * - `events(session_key, seq, type, time, data, surface_op, source_event_seqs, ignorable)`,
 *   `WITHOUT ROWID`, primary key `(session_key, seq)`: one row per event, clustered by seq.
 *   `data` is the payload JSON; `surface_op` is `append` or the replace object's JSON;
 *   `source_event_seqs` a JSON array; `ignorable` 1 or NULL. Neither the op nor the text id is
 *   repeated per row.
 * - `batches(session_key, op, first_seq, last_seq)`: one row per append batch; its primary key
 *   is the unique op index, and reads re-attach `op` to events from it.
 * - `artifacts(session_key, name, content)` and `projection_cache(session_key, record)`.
 *
 * Every append is one `BEGIN IMMEDIATE` transaction, so writers in several processes on one file
 * are serialized by SQLite's own lock; WAL with `synchronous=FULL` makes a commit durable.
 */
import { closeSync, mkdirSync, openSync, realpathSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { randomUUID } from 'node:crypto';
import Database from 'better-sqlite3';
import {
  SessionlogError,
  assertSessionId,
  assertStoredEvent,
  deepFreeze,
  jsonEqual,
  parseHeader,
  type StoredEvent,
  type NewEvent,
  type SessionHeader,
  type SessionView,
} from '../session/index.js';
import type { ArtifactPut, ArtifactRef, ArtifactStore } from './artifacts.js';
import {
  LogScanner,
  LruMap,
  alreadyExists,
  appendResultOf,
  artifactLocator,
  artifactNameCandidates,
  artifactNotFound,
  artifactWindow,
  assertAppendArguments,
  assertReadArguments,
  loadedSession,
  notFound,
  notifyAppended,
  subscribeLocal,
  parseArtifactLocator,
  planAppend,
  planRepair,
  resolveStoreOptions,
  sanitizeArtifactName,
  storeClosed,
  watchEvents,
  type ResolvedStoreOptions,
  type StoreOptions,
  type StoredRecord,
} from './base.js';
import { parseProjectionCacheRecord, serializeProjectionCacheRecord, type ProjectionCacheRecord, type ProjectionCacheStore } from './projection-cache.js';
import type { AppendOptions, AppendResult, LoadedSession, SessionStore, WatchOptions } from './store.js';

/** `PRAGMA application_id` of a sessionlog database ("SLOG"). */
export const SQLITE_APPLICATION_ID = 0x534c4f47;
/** `PRAGMA user_version` this build writes and reads. */
export const SQLITE_SCHEMA_VERSION = 1;

const SCHEMA = `
CREATE TABLE sessions (
  key INTEGER PRIMARY KEY,
  id TEXT NOT NULL UNIQUE,
  header TEXT NOT NULL
) STRICT;
CREATE TABLE events (
  session_key INTEGER NOT NULL REFERENCES sessions(key),
  seq INTEGER NOT NULL,
  type TEXT NOT NULL,
  time INTEGER NOT NULL,
  data TEXT NOT NULL,
  surface_op TEXT,
  source_event_seqs TEXT,
  ignorable INTEGER,
  PRIMARY KEY (session_key, seq)
) STRICT, WITHOUT ROWID;
CREATE TABLE batches (
  session_key INTEGER NOT NULL REFERENCES sessions(key),
  op TEXT NOT NULL,
  first_seq INTEGER NOT NULL,
  last_seq INTEGER NOT NULL,
  PRIMARY KEY (session_key, op)
) STRICT, WITHOUT ROWID;
CREATE INDEX batches_by_last_seq ON batches (session_key, last_seq);
CREATE TABLE artifacts (
  session_key INTEGER NOT NULL REFERENCES sessions(key),
  name TEXT NOT NULL,
  content TEXT NOT NULL,
  PRIMARY KEY (session_key, name)
) STRICT, WITHOUT ROWID;
CREATE TABLE projection_cache (
  session_key INTEGER PRIMARY KEY REFERENCES sessions(key),
  record TEXT NOT NULL
) STRICT;
`;

type EventRow = {
  seq: number;
  type: string;
  time: number;
  data: string;
  surface_op: string | null;
  source_event_seqs: string | null;
  ignorable: number | null;
};
type BatchRow = { op: string; first_seq: number; last_seq: number };

/** Opens (creating if needed) a SQLite store at `path`, or an in-memory one for `:memory:`. */
export function openSqliteStore(path: string, options: StoreOptions = {}): SqliteSessionStore {
  return new SqliteSessionStore(path, resolveStoreOptions(options));
}

function prepareFile(path: string): string {
  const absolute = resolve(path);
  // Directories and the file we create are owner-only; existing ones are left as they are.
  mkdirSync(dirname(absolute), { recursive: true, mode: 0o700 });
  try {
    closeSync(openSync(absolute, 'wx', 0o600));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  }
  return realpathSync(absolute);
}

export class SqliteSessionStore implements SessionStore {
  readonly kind = 'sqlite' as const;
  readonly artifacts: ArtifactStore;
  readonly projectionCache: ProjectionCacheStore;
  /** Identifies the database for in-process watch wake-ups. */
  readonly location: string;
  private readonly db: Database.Database;
  private readonly keys = new Map<string, number>();
  private readonly headers = new Map<number, SessionHeader>();
  private readonly scanners: LruMap<number, LogScanner>;
  private readonly closeListeners = new Set<() => void>();
  private closed = false;
  private readonly stmt: ReturnType<SqliteSessionStore['prepareStatements']>;

  constructor(
    path: string,
    private readonly options: ResolvedStoreOptions,
  ) {
    const memory = path === ':memory:';
    const file = memory ? ':memory:' : prepareFile(path);
    this.location = memory ? `sqlite:memory:${randomUUID()}` : `sqlite:${file}`;
    this.scanners = new LruMap(options.sessionCacheSize);
    this.db = new Database(file);
    try {
      this.configure(memory);
      this.initializeSchema(file);
    } catch (error) {
      this.db.close();
      throw error;
    }
    this.stmt = this.prepareStatements();
    this.artifacts = new SqliteArtifacts(this, this.stmt);
    this.projectionCache = new SqliteProjectionCache(this, this.stmt);
  }

  private configure(memory: boolean): void {
    this.db.pragma(`busy_timeout = ${this.options.busyTimeoutMs}`);
    const journal = this.db.pragma('journal_mode = WAL', { simple: true });
    if (journal !== (memory ? 'memory' : 'wal')) {
      throw new SessionlogError('INVALID_ARGUMENT', `SQLite refused WAL journal mode (got ${String(journal)}); put the database on a local filesystem`);
    }
    this.db.pragma('synchronous = FULL');
    const synchronous = this.db.pragma('synchronous', { simple: true });
    if (synchronous !== 2) throw new SessionlogError('INVALID_ARGUMENT', `SQLite synchronous reads back ${String(synchronous)}, expected 2 (FULL)`);
    this.db.pragma('foreign_keys = ON');
    if (this.db.pragma('foreign_keys', { simple: true }) !== 1) {
      throw new SessionlogError('INVALID_ARGUMENT', 'SQLite foreign_keys could not be enabled');
    }
  }

  private initializeSchema(file: string): void {
    const init = this.db.transaction(() => {
      const appId = this.db.pragma('application_id', { simple: true }) as number;
      const version = this.db.pragma('user_version', { simple: true }) as number;
      if (appId === 0 && version === 0) {
        const objects = this.db.prepare(`SELECT count(*) AS n FROM sqlite_master`).get() as { n: number };
        if (objects.n > 0) {
          throw new SessionlogError('INVALID_ARGUMENT', `${file} is an SQLite database of another application (it has tables but no sessionlog application id); point the store at a new file`);
        }
        this.db.exec(SCHEMA);
        this.db.pragma(`application_id = ${SQLITE_APPLICATION_ID}`);
        this.db.pragma(`user_version = ${SQLITE_SCHEMA_VERSION}`);
        return;
      }
      if (appId !== SQLITE_APPLICATION_ID) {
        throw new SessionlogError(
          'INVALID_ARGUMENT',
          `${file} is not a sessionlog database (application_id 0x${appId.toString(16)}); point the store at a sessionlog database or a new file`,
        );
      }
      if (version > SQLITE_SCHEMA_VERSION) {
        throw new SessionlogError(
          'UNSUPPORTED_FORMAT',
          `${file} has schema version ${version}, written by a newer version of sessionlog (this build reads version ${SQLITE_SCHEMA_VERSION}); upgrade sessionlog to open it`,
        );
      }
      if (version < SQLITE_SCHEMA_VERSION) {
        throw new SessionlogError('UNSUPPORTED_FORMAT', `${file} has schema version ${version}, older than this build reads, and there is no upgrade path`);
      }
    });
    init.immediate();
  }

  private prepareStatements() {
    const db = this.db;
    return {
      sessionByIdStmt: db.prepare<[string], { key: number; header: string }>(`SELECT key, header FROM sessions WHERE id = ?`),
      headerByKey: db.prepare<[number], { header: string }>(`SELECT header FROM sessions WHERE key = ?`),
      insertSession: db.prepare<[string, string]>(`INSERT INTO sessions (id, header) VALUES (?, ?)`),
      listSessions: db.prepare<[], { header: string; id: string }>(`SELECT id, header FROM sessions ORDER BY id`),
      lastSeq: db.prepare<[number], { seq: number }>(`SELECT seq FROM events WHERE session_key = ? ORDER BY seq DESC LIMIT 1`),
      eventsFrom: db.prepare<[number, number, number], EventRow>(
        `SELECT seq, type, time, data, surface_op, source_event_seqs, ignorable FROM events WHERE session_key = ? AND seq >= ? ORDER BY seq LIMIT ?`,
      ),
      insertEvent: db.prepare<[number, number, string, number, string, string | null, string | null, number | null]>(
        `INSERT INTO events (session_key, seq, type, time, data, surface_op, source_event_seqs, ignorable) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
      ),
      deleteEventsFrom: db.prepare<[number, number]>(`DELETE FROM events WHERE session_key = ? AND seq >= ?`),
      batchByOp: db.prepare<[number, string], { first_seq: number; last_seq: number }>(
        `SELECT first_seq, last_seq FROM batches WHERE session_key = ? AND op = ?`,
      ),
      batchesFrom: db.prepare<[number, number, number], BatchRow>(
        `SELECT op, first_seq, last_seq FROM batches WHERE session_key = ? AND last_seq >= ? AND first_seq <= ? ORDER BY first_seq`,
      ),
      insertBatch: db.prepare<[number, string, number, number]>(`INSERT INTO batches (session_key, op, first_seq, last_seq) VALUES (?, ?, ?, ?)`),
      deleteBatchesFrom: db.prepare<[number, number]>(`DELETE FROM batches WHERE session_key = ? AND first_seq >= ?`),
      clipBatches: db.prepare<[number, number, number]>(`UPDATE batches SET last_seq = ? WHERE session_key = ? AND last_seq >= ?`),
      insertArtifact: db.prepare<[number, string, string]>(`INSERT INTO artifacts (session_key, name, content) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`),
      artifact: db.prepare<[number, string], { content: string }>(`SELECT content FROM artifacts WHERE session_key = ? AND name = ?`),
      cacheGet: db.prepare<[number], { record: string }>(`SELECT record FROM projection_cache WHERE session_key = ?`),
      cachePut: db.prepare<[number, string]>(
        `INSERT INTO projection_cache (session_key, record) VALUES (?, ?) ON CONFLICT (session_key) DO UPDATE SET record = excluded.record`,
      ),
    };
  }

  /** Runs a synchronous body against the open database. */
  private use<T>(body: () => T): Promise<T> {
    if (this.closed) return Promise.reject(storeClosed());
    try {
      return Promise.resolve(body());
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /** The integer key of a session, or undefined. */
  sessionKey(id: string): number | undefined {
    const cached = this.keys.get(id);
    if (cached !== undefined) return cached;
    const row = this.stmt.sessionByIdStmt.get(id);
    if (row) this.keys.set(id, row.key);
    return row?.key;
  }

  requireKey(id: string): number {
    const key = this.sessionKey(id);
    if (key === undefined) throw notFound(id);
    return key;
  }

  /** The validated stored header (headers are immutable, so it is cached once parsed). */
  private readHeader(key: number, id: string): SessionHeader {
    const cached = this.headers.get(key);
    if (cached) return cached;
    const header = parseStoredHeader(this.stmt.headerByKey.get(key)!.header, id);
    this.headers.set(key, header);
    return header;
  }

  create(header: SessionHeader): Promise<void> {
    return this.use(() => {
      const parsed = parseHeader(header, `create session ${String((header as { id?: unknown } | null)?.id)}`);
      this.db
        .transaction(() => {
          const existing = this.stmt.sessionByIdStmt.get(parsed.id);
          if (existing) {
            if (!jsonEqual(parseStoredHeader(existing.header, parsed.id), parsed)) throw alreadyExists(parsed.id);
            return;
          }
          this.stmt.insertSession.run(parsed.id, JSON.stringify(parsed));
        })
        .immediate();
    });
  }

  header(id: string): Promise<SessionHeader> {
    return this.use(() => {
      assertSessionId(id);
      return this.readHeader(this.requireKey(id), id);
    });
  }

  exists(id: string): Promise<boolean> {
    return this.use(() => {
      assertSessionId(id);
      return this.sessionKey(id) !== undefined;
    });
  }

  list(): Promise<SessionHeader[]> {
    return this.use(() => this.stmt.listSessions.all().map((row) => parseStoredHeader(row.header, row.id)));
  }

  append(id: string, events: readonly NewEvent[], options: AppendOptions): Promise<AppendResult> {
    return this.use(() => {
      assertAppendArguments(id, events, options);
      const key = this.requireKey(id);
      let written: StoredEvent[] = [];
      let writing = false;
      let result: AppendResult;
      try {
        result = this.db
          .transaction((): AppendResult => {
            const stored = this.stmt.batchByOp.get(key, options.op);
            const scanner = this.syncScanner(key, id);
            const plan = planAppend(scanner, stored && { firstSeq: stored.first_seq, lastSeq: stored.last_seq }, events, options);
            if (plan.kind === 'replayed') return plan.result;
            writing = true;
            this.truncateTorn(key, scanner);
            this.insertBatch(key, plan.events, options.op);
            written = plan.events;
            return appendResultOf(plan.events);
          })
          .immediate();
      } catch (error) {
        // A write rolled back: forget in-memory state that may have assumed it happened.
        if (writing) this.scanners.delete(key);
        throw error;
      }
      if (written.length > 0) {
        this.scanners.get(key)?.commitWritten(written);
        notifyAppended(this.location, id);
      }
      return result;
    });
  }

  readFrom(id: string, fromSeq: number, limit?: number): Promise<StoredEvent[]> {
    return this.use(() => {
      assertReadArguments(id, fromSeq, limit);
      const key = this.requireKey(id);
      // A header this build cannot read (newer format) refuses reads of its events too.
      this.readHeader(key, id);
      return this.db.transaction(() => this.readPage(key, id, fromSeq, limit ?? Number.MAX_SAFE_INTEGER)).deferred();
    });
  }

  nextSeq(id: string): Promise<number> {
    return this.use(() => {
      assertSessionId(id);
      const key = this.requireKey(id);
      return this.db.transaction(() => this.syncScanner(key, id).nextSeq).deferred();
    });
  }

  session(id: string): Promise<SessionView> {
    return this.use(() => {
      assertSessionId(id);
      const key = this.requireKey(id);
      return this.db.transaction(() => this.syncScanner(key, id).session).deferred();
    });
  }

  load(id: string): Promise<LoadedSession> {
    return this.use(() => {
      assertSessionId(id);
      const key = this.requireKey(id);
      let closers: StoredEvent[] = [];
      let loaded: LoadedSession;
      try {
        loaded = this.db
          .transaction((): LoadedSession => {
            const scanner = this.syncScanner(key, id);
            const truncated = this.truncateTorn(key, scanner);
            closers = planRepair(scanner);
            if (closers.length > 0) this.insertBatch(key, closers, closers[0]!.op!);
            return loadedSession(scanner, closers, truncated);
          })
          .immediate();
      } catch (error) {
        // Rolled back: the cached scanner may reflect a truncation that did not happen.
        this.scanners.delete(key);
        throw error;
      }
      if (closers.length > 0) {
        this.scanners.get(key)?.commitWritten(closers);
        notifyAppended(this.location, id);
      }
      return loaded;
    });
  }

  inspect(id: string): Promise<LoadedSession> {
    return this.use(() => {
      assertSessionId(id);
      const key = this.requireKey(id);
      return this.db
        .transaction((): LoadedSession => {
          const scanner = this.syncScanner(key, id);
          return loadedSession(scanner, planRepair(scanner), scanner.torn?.records ?? 0);
        })
        .deferred();
    });
  }

  watch(id: string, fromSeq: number, options: WatchOptions = {}): AsyncIterable<StoredEvent> {
    assertReadArguments(id, fromSeq, undefined);
    return watchEvents(
      {
        read: (seq) => this.readFrom(id, seq, 1000),
        subscribe: (wake) => subscribeLocal(this.closeListeners, this.location, id, wake),
        isClosed: () => this.closed,
        pollIntervalMs: this.options.pollIntervalMs,
      },
      fromSeq,
      options.signal,
    );
  }

  /** The connection's settings as SQLite reports them (diagnostics and `sessionlog verify`). */
  settings(): { journalMode: string; synchronous: number; foreignKeys: number; busyTimeoutMs: number; applicationId: number; userVersion: number } {
    if (this.closed) throw storeClosed();
    const get = (name: string): unknown => this.db.pragma(name, { simple: true });
    return {
      journalMode: get('journal_mode') as string,
      synchronous: get('synchronous') as number,
      foreignKeys: get('foreign_keys') as number,
      busyTimeoutMs: get('busy_timeout') as number,
      applicationId: get('application_id') as number,
      userVersion: get('user_version') as number,
    };
  }

  close(): Promise<void> {
    if (!this.closed) {
      this.closed = true;
      this.db.close();
      this.scanners.clear();
      for (const wake of [...this.closeListeners]) wake();
    }
    return Promise.resolve();
  }

  /** Runs `body` in an IMMEDIATE transaction (artifact and cache writes). */
  write<T>(body: () => T): Promise<T> {
    return this.use(() => this.db.transaction(body).immediate());
  }

  read<T>(body: () => T): Promise<T> {
    return this.use(body);
  }

  // -------------------------------------------------------------------------------------------

  /**
   * Brings the cached scanner of a session up to the stored rows (call inside a transaction).
   * A scanner that is ahead of the stored log, or saw a torn tail, is rebuilt from seq 0.
   */
  private syncScanner(key: number, id: string): LogScanner {
    const physicalNext = (this.stmt.lastSeq.get(key)?.seq ?? -1) + 1;
    let scanner = this.scanners.get(key);
    if (scanner && !scanner.torn && scanner.nextSeq === physicalNext) return scanner;
    if (!scanner || scanner.torn || scanner.nextSeq > physicalNext) {
      scanner = new LogScanner(this.readHeader(key, id), `session ${id} in ${this.location}`);
    }
    for (const record of this.records(key, scanner.nextSeq, physicalNext)) {
      scanner.push(record);
      // Later rows only matter for telling torn from corrupt, which push() does as it goes.
    }
    this.scanners.set(key, scanner);
    return scanner;
  }

  /** Decoded rows `fromSeq..toSeq-1` with their ops re-attached. */
  private *records(key: number, fromSeq: number, toSeq: number): Generator<StoredRecord> {
    if (fromSeq >= toSeq) return;
    const batches = this.stmt.batchesFrom.all(key, fromSeq, toSeq - 1);
    let b = 0;
    for (const row of this.stmt.eventsFrom.all(key, fromSeq, toSeq - fromSeq)) {
      while (b < batches.length && batches[b]!.last_seq < row.seq) b++;
      const batch = batches[b];
      const op = batch && batch.first_seq <= row.seq ? batch.op : undefined;
      yield decodeRow(row, op);
    }
  }

  private readPage(key: number, id: string, fromSeq: number, limit: number): StoredEvent[] {
    if (limit === 0) return [];
    const out: StoredEvent[] = [];
    const end = fromSeq + Math.min(limit, Number.MAX_SAFE_INTEGER - fromSeq);
    for (const record of this.records(key, fromSeq, end)) {
      const expected = fromSeq + out.length;
      const event = record.ok ? checkRow(record.value, expected, id) : undefined;
      if (!event) {
        // Damaged row or gap: classify the whole log (throws CORRUPT_LOG inside committed
        // turns) and serve the valid prefix.
        const scanner = this.syncScanner(key, id);
        return scanner.session.events.slice(fromSeq, end);
      }
      out.push(event);
    }
    return out;
  }

  private insertBatch(key: number, events: readonly StoredEvent[], op: string): void {
    for (const event of events) {
      this.stmt.insertEvent.run(
        key,
        event.seq,
        event.type,
        event.time,
        JSON.stringify(event.data),
        encodeSurfaceOp(event.surfaceOp),
        event.sourceEventSeqs === undefined ? null : JSON.stringify(event.sourceEventSeqs),
        event.ignorable ? 1 : null,
      );
    }
    this.stmt.insertBatch.run(key, op, events[0]!.seq, events[events.length - 1]!.seq);
  }

  /** Deletes a torn tail found by the scanner (inside a write transaction). Returns the rows dropped. */
  private truncateTorn(key: number, scanner: LogScanner): number {
    const torn = scanner.torn;
    if (!torn) return 0;
    this.stmt.deleteEventsFrom.run(key, torn.seq);
    this.stmt.deleteBatchesFrom.run(key, torn.seq);
    this.stmt.clipBatches.run(torn.seq - 1, key, torn.seq);
    scanner.clearTorn();
    return torn.records;
  }
}

function parseStoredHeader(text: string, id: string): SessionHeader {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (error) {
    throw new SessionlogError('CORRUPT_LOG', `stored header of session ${id} is not valid JSON; restore the database from a backup`, { cause: error });
  }
  return parseHeader(raw, `stored header of session ${id}`);
}

function encodeSurfaceOp(op: StoredEvent['surfaceOp']): string | null {
  if (op === undefined) return null;
  return op === 'append' ? 'append' : JSON.stringify(op);
}

function decodeRow(row: EventRow, op: string | undefined): StoredRecord {
  try {
    const event: Record<string, unknown> = { seq: row.seq, type: row.type, time: row.time, data: JSON.parse(row.data) };
    if (row.surface_op !== null) event.surfaceOp = row.surface_op.startsWith('{') ? JSON.parse(row.surface_op) : row.surface_op;
    if (row.source_event_seqs !== null) event.sourceEventSeqs = JSON.parse(row.source_event_seqs);
    if (op !== undefined) event.op = op;
    if (row.ignorable !== null) event.ignorable = row.ignorable === 1 ? true : row.ignorable;
    return { ok: true, value: event, position: row.seq };
  } catch (error) {
    return { ok: false, reason: `row seq ${row.seq} does not decode: ${(error as Error).message}`, position: row.seq };
  }
}

/** The fast-path check of `readFrom`: envelope and payload, no surface fold. */
function checkRow(value: unknown, expectedSeq: number, id: string): StoredEvent | undefined {
  try {
    assertStoredEvent(value, expectedSeq, id);
    return deepFreeze(value);
  } catch (error) {
    if (error instanceof SessionlogError && error.code === 'UNSUPPORTED_FORMAT') throw error;
    // Any other validation failure is classified by a full scan.
    return undefined;
  }
}

// ---------------------------------------------------------------------------------------------

type Statements = ReturnType<SqliteSessionStore['prepareStatements']>;

class SqliteArtifacts implements ArtifactStore {
  constructor(
    private readonly store: SqliteSessionStore,
    private readonly statements: Statements,
  ) {}

  put(input: ArtifactPut): Promise<ArtifactRef> {
    return this.store.write(() => {
      assertSessionId(input?.sessionId);
      if (typeof input.content !== 'string') throw new SessionlogError('INVALID_ARGUMENT', 'artifact content must be a string');
      const key = this.store.requireKey(input.sessionId);
      for (const name of artifactNameCandidates(sanitizeArtifactName(String(input.name ?? '')))) {
        if (this.statements.insertArtifact.run(key, name, input.content).changes === 1) {
          return { locator: artifactLocator(input.sessionId, name), bytes: Buffer.byteLength(input.content, 'utf8') };
        }
      }
      throw new Error('unreachable: artifact name candidates are infinite');
    });
  }

  get(locator: string): Promise<string> {
    return this.store.read(() => this.content(locator));
  }

  read(locator: string, offset: number, limit: number): Promise<{ text: string; total: number }> {
    return this.store.read(() => artifactWindow(this.content(locator), offset, limit));
  }

  private content(locator: string): string {
    const { sessionId, name } = parseArtifactLocator(locator);
    const key = this.store.sessionKey(sessionId);
    const row = key === undefined ? undefined : this.statements.artifact.get(key, name);
    if (!row) throw artifactNotFound(locator);
    return row.content;
  }
}

class SqliteProjectionCache implements ProjectionCacheStore {
  constructor(
    private readonly store: SqliteSessionStore,
    private readonly statements: Statements,
  ) {}

  get(sessionId: string): Promise<ProjectionCacheRecord | undefined> {
    return this.store.read(() => {
      assertSessionId(sessionId);
      const key = this.store.sessionKey(sessionId);
      const row = key === undefined ? undefined : this.statements.cacheGet.get(key);
      return row ? parseProjectionCacheRecord(row.record) : undefined;
    });
  }

  put(sessionId: string, record: ProjectionCacheRecord): Promise<void> {
    return this.store.write(() => {
      assertSessionId(sessionId);
      const key = this.store.requireKey(sessionId);
      this.statements.cachePut.run(key, serializeProjectionCacheRecord(record));
    });
  }
}
