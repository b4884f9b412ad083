/**
 * PostgreSQL backend of `SessionStore` (DESIGN §4): for fleets of workers on many hosts, with
 * `LISTEN/NOTIFY` driving `watch`. The relational core (../core.ts, which runs every operation) over
 * the PostgreSQL driver (driver.ts); the storage format and its named migrations are in schema.ts.
 */
import { SessionlogError } from '../../../session/index.js';
import { resolveStoreOptions, type ResolvedStoreOptions, type StoreOptions } from '../../store.js';
import { RelationalSessionStore } from '../core.js';
import { PostgresDriver, parsePostgresUrl, redactUrl, scrub, unavailableKind } from './driver.js';

/** Opens (creating the schema if needed) a PostgreSQL store at `url`. */
export function openPostgresStore(url: string, options: StoreOptions = {}): Promise<PostgresSessionStore> {
  return PostgresSessionStore.open(url, resolveStoreOptions(options));
}

/** The PostgreSQL store: the relational core over a {@link PostgresDriver} (a pool and a listening connection). */
export class PostgresSessionStore extends RelationalSessionStore {
  readonly kind = 'postgres' as const;
  /** The PostgreSQL schema of this store's tables. */
  readonly schema: string;
  /** The `LISTEN/NOTIFY` channel of this store's schema. */
  readonly channel: string;

  private constructor(postgres: PostgresDriver, options: ResolvedStoreOptions) {
    super(postgres, options);
    this.schema = postgres.schema;
    this.channel = postgres.channel;
  }

  /** Connects and creates or checks the schema; any failure ends the connections again. */
  static async open(url: string, options: ResolvedStoreOptions): Promise<PostgresSessionStore> {
    const target = parsePostgresUrl(url);
    const postgres = new PostgresDriver(target, options);
    try {
      await postgres.initializeSchema();
    } catch (error) {
      await postgres.close();
      if (error instanceof SessionlogError) throw error;
      const shown = JSON.stringify(redactUrl(url).slice(0, 300));
      const detail = scrub((error as Error).message, target.password);
      if (unavailableKind(error)) {
        throw new SessionlogError(
          'UNAVAILABLE',
          `could not reach the PostgreSQL store ${shown}: ${detail}; check that the server is running and reachable at that host and port (accepted store URLs: postgres://USER@HOST:PORT/DATABASE?schema=NAME, sqlite:PATH, jsonl:DIR)`,
        );
      }
      throw new SessionlogError(
        'INVALID_ARGUMENT',
        `could not open the PostgreSQL store ${shown}: ${detail}; check that the URL, user, password and database are right (accepted store URLs: postgres://USER@HOST:PORT/DATABASE?schema=NAME, sqlite:PATH, jsonl:DIR)`,
      );
    }
    return new PostgresSessionStore(postgres, options);
  }
}

export { POSTGRES_SCHEMA_VERSION, POSTGRES_DEFAULT_SCHEMA } from './schema.js';
export { parsePostgresUrl, redactUrl, type PostgresTarget } from './driver.js';
