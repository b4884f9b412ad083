/**
 * SQLite backend of `SessionStore` (DESIGN §4, dsh-spec §8.8), the embedded default: the relational
 * core (../core.ts, which runs every operation) over the SQLite driver (driver.ts); the storage
 * format, the schema and its named migrations are in schema.ts, the statements in statements.ts.
 */
import { resolveStoreOptions, type ResolvedStoreOptions, type StoreOptions } from '../../store.js';
import { RelationalSessionStore } from '../core.js';
import { SqliteDriver, type SqliteSettings } from './driver.js';

/** Opens (creating if needed) a SQLite store at `path`, or an in-memory one for `:memory:`. */
export function openSqliteStore(path: string, options: StoreOptions = {}): SqliteSessionStore {
  return new SqliteSessionStore(path, resolveStoreOptions(options));
}

/** The SQLite store: the relational core over a {@link SqliteDriver} on one better-sqlite3 connection. */
export class SqliteSessionStore extends RelationalSessionStore {
  readonly kind = 'sqlite' as const;
  private readonly sqlite: SqliteDriver;

  constructor(path: string, options: ResolvedStoreOptions) {
    const sqlite = new SqliteDriver(path, options);
    super(sqlite, options);
    this.sqlite = sqlite;
  }

  /** The connection's settings as SQLite reports them (diagnostics and `sessionlog verify`). */
  settings(): SqliteSettings {
    return this.sqlite.settings();
  }
}

export { SQLITE_APPLICATION_ID, SQLITE_SCHEMA_VERSION, SQLITE_PAGE_SIZE } from './schema.js';
export type { SqliteSettings } from './driver.js';
