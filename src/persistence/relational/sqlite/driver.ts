/** The SQLite dialect driver under the relational core (../core.ts): one better-sqlite3 connection, its settings, group commit. */
import { closeSync, mkdirSync, openSync, realpathSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { randomUUID } from 'node:crypto';
import Database from 'better-sqlite3';
import { SessionlogError } from '../../../session/index.js';
import { storeClosed } from '../../errors.js';
import { fts5MatchExpression, type RankedSeq, type SearchRequest } from '../../search.js';
import { type ResolvedStoreOptions } from '../../store.js';
import { runSteps } from '../driver.js';
import type * as driver from '../driver.js';
import { SQLITE_PAGE_SIZE, initializeSchema } from './schema.js';
import { SqliteStatements } from './statements.js';

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

export type SqliteSettings = {
  journalMode: string;
  synchronous: number;
  foreignKeys: number;
  busyTimeoutMs: number;
  applicationId: number;
  userVersion: number;
  pageSize: number;
};

/**
 * One better-sqlite3 connection. Every body runs to its end synchronously inside its transaction
 * (write bodies of one event-loop turn inside one, see {@link SqliteDriver.commitQueuedWrites}),
 * so nothing else runs on the connection meanwhile; writers in other processes wait for SQLite's
 * own lock (`busyTimeoutMs`).
 */
export class SqliteDriver implements driver.RelationalDriver {
  readonly location: string;
  readonly pollIntervalMs: number;
  readonly batchLayout = 'on-rows';
  private readonly memory: boolean;
  private readonly db: Database.Database;
  private readonly statements: SqliteStatements;
  /** Runs a function in a transaction (`.immediate` or `.deferred`); prepared once. */
  private readonly transaction: Database.Transaction<(body: () => unknown) => unknown>;
  /** Write transactions waiting for the next group commit ({@link commitQueuedWrites}). */
  private queuedWrites: Array<{
    body: () => unknown;
    resolve: (value: unknown) => void;
    reject: (error: unknown) => void;
  }> = [];

  constructor(
    path: string,
    private readonly options: ResolvedStoreOptions,
  ) {
    this.memory = path === ':memory:';
    const file = this.memory ? ':memory:' : prepareFile(path);
    this.location = this.memory ? `sqlite:memory:${randomUUID()}` : `sqlite:${file}`;
    this.pollIntervalMs = options.pollIntervalMs;
    this.db = new Database(file);
    try {
      this.configure();
      initializeSchema(this.db, file);
    } catch (error) {
      this.db.close();
      throw error;
    }
    this.statements = new SqliteStatements(this.db, this.location);
    this.transaction = this.db.transaction((body: () => unknown) => body());
  }

  private configure(): void {
    this.db.pragma(`busy_timeout = ${this.options.busyTimeoutMs}`);
    // A new file gets 4 KiB pages (SQLITE_PAGE_SIZE): the WAL writes half the bytes per touched
    // page of 8 KiB ones, and a rowid table's leaf keeps an event row of up to ~4 KB (a long
    // assistant reply) inline (BENCHMARKS.md, "schema 10"). Only possible before the first table
    // exists; a file made with other pages keeps them (SQLite reads both).
    if (this.db.pragma('page_count', { simple: true }) === 0) this.db.pragma(`page_size = ${SQLITE_PAGE_SIZE}`);
    const journal = this.db.pragma('journal_mode = WAL', { simple: true });
    if (journal !== (this.memory ? 'memory' : 'wal')) {
      throw new SessionlogError(
        'INVALID_ARGUMENT',
        `SQLite refused WAL journal mode (got ${String(journal)}); put the database on a local filesystem`,
      );
    }
    this.db.pragma('synchronous = FULL');
    const synchronous = this.db.pragma('synchronous', { simple: true });
    if (synchronous !== 2)
      throw new SessionlogError(
        'INVALID_ARGUMENT',
        `SQLite synchronous reads back ${String(synchronous)}, expected 2 (FULL)`,
      );
    this.db.pragma('foreign_keys = ON');
    if (this.db.pragma('foreign_keys', { simple: true }) !== 1) {
      throw new SessionlogError('INVALID_ARGUMENT', 'SQLite foreign_keys could not be enabled');
    }
    // Erased content is overwritten with zeros, not left in free space (DESIGN §4.2).
    this.db.pragma('secure_delete = ON');
    if (this.db.pragma('secure_delete', { simple: true }) !== 1) {
      throw new SessionlogError('INVALID_ARGUMENT', 'SQLite secure_delete could not be enabled');
    }
  }

  run<T>(mode: driver.TxMode, body: (tx: driver.RelationalTx) => driver.Steps<T>): T | Promise<T> {
    const steps = (): T => runSteps(body(this.statements));
    if (mode === 'single') return steps();
    if (mode === 'read') return this.transaction.deferred(steps) as T;
    return new Promise<T>((resolve, reject) => {
      this.queuedWrites.push({ body: steps, resolve: resolve as (value: unknown) => void, reject });
      if (this.queuedWrites.length === 1) setImmediate(() => this.commitQueuedWrites());
    });
  }

  /**
   * Group commit: the write transactions asked for in one turn of the event loop (several
   * sessions' appends under load) run in one `BEGIN IMMEDIATE` transaction, each in a savepoint
   * of its own, and share its one commit and fsync. A write that fails is rolled back to its
   * savepoint and fails alone; each caller hears only after the commit, so nothing is reported
   * written before it is durable. A lone write is its own transaction, as before.
   */
  private commitQueuedWrites(): void {
    const group = this.queuedWrites;
    this.queuedWrites = [];
    if (group.length === 0) return;
    if (group.length === 1) {
      const write = group[0]!;
      try {
        write.resolve(this.transaction.immediate(write.body));
      } catch (error) {
        write.reject(error);
      }
      return;
    }
    const outcomes: Array<{ value: unknown } | { error: unknown }> = [];
    try {
      this.transaction.immediate(() => {
        for (const write of group) {
          try {
            // Nested in the open transaction, better-sqlite3 runs it in a savepoint.
            outcomes.push({ value: this.transaction(write.body) });
          } catch (error) {
            outcomes.push({ error });
            // Disk full or an I/O error ends SQLite's transaction: none of the group was written.
            if (!this.db.inTransaction) throw error;
          }
        }
      });
    } catch (error) {
      group.forEach((write, i) => {
        const outcome = outcomes[i];
        write.reject(outcome && 'error' in outcome ? outcome.error : error);
      });
      return;
    }
    group.forEach((write, i) => {
      const outcome = outcomes[i]!;
      if ('error' in outcome) write.reject(outcome.error);
      else write.resolve(outcome.value);
    });
  }

  assertStorableOp(): void {
    // SQLite text holds any string.
  }

  /**
   * In one snapshot with a check that the session row is still the copy's: a key of an erased
   * session can be given to a new one (INTEGER PRIMARY KEY reuses the largest), and its rows must
   * not be matched against the erased session's copy.
   */
  searchMatches(scope: driver.SearchScope, request: SearchRequest): RankedSeq[] {
    // A write transaction: the events appended since the session's last search are indexed
    // first (appends do not index), so the results are exact up to the copy's head.
    const current = (): boolean => {
      const row = this.statements.sessionRow(scope.id);
      return row !== undefined && row.key === scope.key && row.header === scope.header;
    };
    // A page of the backlog per transaction, so another writer waits one page at most; the
    // transaction that indexes the last page (the only one, usually) answers the query.
    for (let after = -1; ;) {
      const from = after;
      const step = this.transaction.immediate(() => {
        if (!current()) return { matches: [] };
        const more = this.statements.indexTail(scope.key, scope.head, { pages: 1, after: from });
        if (more !== undefined) return { more };
        const match = fts5MatchExpression(request.words);
        return { matches: this.statements.searchMatches(scope.key, match, scope.head, request.limit) };
      }) as { matches: RankedSeq[] } | { more: number };
      if ('matches' in step) return step.matches;
      after = step.more;
    }
  }

  afterErase(): string[] {
    return this.memory ? [] : [this.checkpointAfterErase()];
  }

  storeError(error: unknown): unknown {
    const code = (error as { code?: unknown } | null)?.code;
    if (typeof code === 'string' && code.startsWith('SQLITE_BUSY')) {
      return new SessionlogError(
        'UNAVAILABLE',
        `${this.location} stayed locked by another connection for longer than busyTimeoutMs (${this.options.busyTimeoutMs} ms); check for a stuck or paused process holding a write transaction on this database`,
        { cause: error },
      );
    }
    return error;
  }

  close(): void {
    // Writes already asked for are committed, not dropped: their callers hear as usual.
    if (this.db.open) this.commitQueuedWrites();
    if (this.db.open) this.db.close();
  }

  settings(): SqliteSettings {
    if (!this.db.open) throw storeClosed();
    const get = (name: string): unknown => this.db.pragma(name, { simple: true });
    return {
      journalMode: get('journal_mode') as string,
      synchronous: get('synchronous') as number,
      foreignKeys: get('foreign_keys') as number,
      busyTimeoutMs: get('busy_timeout') as number,
      applicationId: get('application_id') as number,
      userVersion: get('user_version') as number,
      pageSize: get('page_size') as number,
    };
  }

  /** Moves every WAL frame into the database and empties the WAL, so erased bytes leave the WAL file. */
  private checkpointAfterErase(): string {
    const [result] = this.db.pragma('wal_checkpoint(TRUNCATE)') as Array<{
      busy: number;
      log: number;
      checkpointed: number;
    }>;
    if (result && result.busy === 0)
      return 'the deleted rows were overwritten (secure_delete) and the WAL checkpointed and truncated';
    return `the deleted rows were overwritten (secure_delete) but another connection kept the WAL from being truncated (${result?.checkpointed ?? 0} of ${result?.log ?? 0} frames checkpointed); older copies of the erased bytes stay in the WAL until the next full checkpoint`;
  }
}
