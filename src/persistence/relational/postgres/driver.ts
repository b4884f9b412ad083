/** The PostgreSQL dialect driver under the relational core (../core.ts): the store URL, a connection pool, transactions, error mapping. */
import pg from 'pg';
import type { PoolClient, PoolConfig } from 'pg';
import { SessionlogError } from '../../../session/index.js';
import { type RankedSeq, type SearchRequest } from '../../search.js';
import { type ResolvedStoreOptions } from '../../store.js';
import { runStepsAsync } from '../driver.js';
import type * as driver from '../driver.js';
import { POSTGRES_DEFAULT_SCHEMA, SCHEMA_NAME_PATTERN, initializeSchema, quoteIdent } from './schema.js';
import {
  PostgresStatements,
  statements,
  checkedOut,
  type Statements,
  type Queryable,
  type SpareConnection,
} from './statements.js';
import { NotificationListener } from './listener.js';

/** `watch` polls at least this far apart: notifications drive it, polling only covers a missed one. */
const MIN_WATCH_POLL_MS = 1000;

/** How long opening a connection may take before the operation fails. */
const CONNECT_TIMEOUT_MS = 10_000;

/** Connections in a store's pool (node-postgres's default, set explicitly: the spare's check reads it back). */
const POOL_SIZE = 10;

/** Errors that mean the server cannot be reached or let go of the work, not that the request is wrong. */
const UNAVAILABLE_ERRNO = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ENOTFOUND',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ETIMEDOUT',
  'EAI_AGAIN',
  'EPIPE',
]);

export function unavailableKind(error: unknown): 'lock' | 'server' | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  if (code === '55P03') return 'lock';
  if (
    typeof code === 'string' &&
    (UNAVAILABLE_ERRNO.has(code) ||
      code.startsWith('08') ||
      code.startsWith('57P') ||
      code === '25P03' ||
      code === '53300')
  )
    return 'server';
  const message = (error as Error | null)?.message ?? '';
  if (
    /Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|Client was closed/i.test(
      message,
    )
  )
    return 'server';
  return undefined;
}

/** The parts of a `postgres://` store URL this backend uses. */
export type PostgresTarget = {
  /** The URL handed to `pg`, without the `schema` parameter. */
  connectionString: string;
  schema: string;
  /** Identifies the database and schema (no credentials), for in-process watch wake-ups. */
  location: string;
  /** The password, when the URL carries one, so it can be scrubbed from driver messages. */
  password: string | undefined;
};

/** Hides the password of a connection URL (userinfo or `?password=`) before it is shown anywhere. */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    if (parsed.searchParams.has('password')) parsed.searchParams.set('password', '***');
    return parsed.toString();
  } catch {
    // Not a URL at all: fall back to hiding whatever sits between "user:" and the last "@".
    return url.replace(/\/\/([^:/@]*):.*@/, '//$1:***@').replace(/([?&]password=)[^&]*/i, '$1***');
  }
}

/** Parses a `postgres://` or `postgresql://` store URL; INVALID_ARGUMENT (password redacted) when malformed. */
export function parsePostgresUrl(url: string): PostgresTarget {
  const invalid = (why: string): SessionlogError =>
    new SessionlogError(
      'INVALID_ARGUMENT',
      `PostgreSQL store URL ${JSON.stringify(redactUrl(url).slice(0, 300))} ${why}`,
    );
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw invalid('is not a valid URL; use postgres://USER:PASSWORD@HOST:PORT/DATABASE?schema=NAME');
  }
  if (parsed.protocol !== 'postgres:' && parsed.protocol !== 'postgresql:')
    throw invalid('must start with postgres:// or postgresql://');
  const schemas = parsed.searchParams.getAll('schema');
  if (schemas.length > 1) throw invalid('names more than one schema');
  const schema = schemas[0] ?? POSTGRES_DEFAULT_SCHEMA;
  if (!SCHEMA_NAME_PATTERN.test(schema)) {
    throw invalid(
      `has schema ${JSON.stringify(schema.slice(0, 100))}; a schema name is 1–48 characters of [a-z0-9_], not starting with a digit`,
    );
  }
  parsed.searchParams.delete('schema');
  const password = parsed.password
    ? decodeURIComponent(parsed.password)
    : (parsed.searchParams.get('password') ?? undefined);
  return {
    connectionString: parsed.toString(),
    schema,
    location: `postgres://${parsed.host}${parsed.pathname}?schema=${schema}`,
    password,
  };
}

/** Removes a password from a driver message (drivers do not print it, but a message is shown to people). */
export function scrub(message: string, password: string | undefined): string {
  return password && password.length >= 3 ? message.split(password).join('***') : message;
}

/**
 * A connection pool for the statements and one connection that listens for other processes'
 * appends. A body runs on one pooled connection inside its transaction, or on the pool
 * statement by statement (`single`).
 */
export class PostgresDriver implements driver.RelationalDriver {
  readonly location: string;
  readonly schema: string;
  readonly channel: string;
  readonly pollIntervalMs: number;
  readonly batchLayout = 'table';
  readonly remoteAppends: NotificationListener;
  private readonly sql: Statements;
  private readonly pool: pg.Pool;

  constructor(
    private readonly target: PostgresTarget,
    private readonly options: ResolvedStoreOptions,
  ) {
    this.schema = target.schema;
    this.location = target.location;
    this.channel = `sessionlog_${target.schema}`;
    // Notifications drive watch; polling only covers a missed one.
    this.pollIntervalMs = Math.max(options.pollIntervalMs, MIN_WATCH_POLL_MS);
    this.sql = statements(quoteIdent(target.schema));
    const config: PoolConfig = {
      connectionString: target.connectionString,
      connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
      // Seqs, times and keys are bigint columns holding safe integers; read them as numbers.
      types: {
        getTypeParser: (oid, format) => (oid === pg.types.builtins.INT8 ? Number : pg.types.getTypeParser(oid, format)),
      },
    };
    this.pool = new pg.Pool({
      ...config,
      max: POOL_SIZE,
      lock_timeout: options.lockTimeoutMs,
      idle_in_transaction_session_timeout: options.lockStaleMs,
    });
    // An idle pooled connection that dies (server restart) is replaced on next use; without a
    // listener the pool's 'error' event would crash the process.
    this.pool.on('error', () => undefined);
    this.remoteAppends = new NotificationListener(config, this.channel);
  }

  /** Creates the schema, or checks its version and upgrades it, in one transaction under an advisory lock (schema.ts). */
  async initializeSchema(): Promise<void> {
    await this.transaction('write', (client) => initializeSchema(client, this.schema, this.statementsOn(client)));
  }

  run<T>(mode: driver.TxMode, body: (tx: driver.RelationalTx) => driver.Steps<T>): Promise<T> {
    if (mode === 'single') return runStepsAsync(body(this.statementsOn(this.pool)));
    return this.transaction(mode, (client) =>
      runStepsAsync(body(this.statementsOn(client, mode === 'read' ? this.lendSpare : undefined))),
    );
  }

  assertStorableOp(op: string): void {
    if (op.includes('\u0000')) {
      throw new SessionlogError(
        'INVALID_ARGUMENT',
        `append op must not contain a NUL character (PostgreSQL text cannot store it), got ${JSON.stringify(op.slice(0, 200))}`,
      );
    }
  }

  /** Indexes the session's events an older build stored without their `search` value first. */
  async searchMatches(scope: driver.SearchScope, request: SearchRequest): Promise<RankedSeq[]> {
    const statements = this.statementsOn(this.pool);
    await statements.indexUnindexed(scope.key);
    return statements.search(scope.key, request.words.join(' '), scope.head, request.limit);
  }

  /** Also for an erasure of inbox entries or a key alone: their rows are deleted the same way. */
  afterErase(): string[] {
    return [
      'the rows are deleted; PostgreSQL reclaims their space at the next VACUUM, and backups or replicas keep their own copies',
    ];
  }

  storeError(error: unknown): unknown {
    const kind = unavailableKind(error);
    if (kind === 'lock') {
      return new SessionlogError(
        'UNAVAILABLE',
        `waited longer than lockTimeoutMs (${this.options.lockTimeoutMs} ms) for a session's row lock in ${this.location}; another writer holds it — check for a stuck or paused process, then retry`,
        { cause: error },
      );
    }
    if (kind === 'server') {
      return new SessionlogError(
        'UNAVAILABLE',
        `the PostgreSQL store ${this.location} is unavailable (${scrub((error as Error).message, this.target.password)}); check that the server is running and reachable, then retry (an append is idempotent by its op)`,
        { cause: error },
      );
    }
    return error;
  }

  /** Ends the listener and the pool. */
  async close(): Promise<void> {
    await Promise.all([this.remoteAppends.close(), this.pool.end()]);
  }

  private statementsOn(db: Queryable, spare?: SpareConnection): PostgresStatements {
    return new PostgresStatements(db, this.sql, this.channel, this.location, spare);
  }

  /**
   * A second pooled connection for a read that already holds one, only when the pool can hand it
   * out at once: an idle connection, or room for a new one, and no one waiting. A holder never
   * waits on the pool, since readers that all held one could then wait on each other for ever.
   */
  private readonly lendSpare: SpareConnection = () => {
    const pool = this.pool;
    if (pool.ending || pool.waitingCount > 0) return undefined;
    if (pool.idleCount === 0 && pool.totalCount >= pool.options.max!) return undefined;
    return pool.connect();
  };

  /**
   * Runs `body` in one transaction on one pooled connection: `write` is READ COMMITTED (writers
   * lock the session row), `read` a REPEATABLE READ READ ONLY snapshot so several statements
   * agree with each other.
   */
  private async transaction<T>(mode: 'write' | 'read', body: (client: PoolClient) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    const release = checkedOut(client);
    // A connection whose state is unknown (a failed ROLLBACK, BEGIN or COMMIT) is discarded, not reused.
    let broken: Error | undefined;
    try {
      await client.query(mode === 'read' ? 'BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY' : 'BEGIN');
    } catch (error) {
      release(error as Error);
      throw error;
    }
    try {
      let result: T;
      try {
        result = await body(client);
      } catch (error) {
        try {
          await client.query('ROLLBACK');
        } catch (rollbackError) {
          broken = rollbackError as Error;
        }
        throw error;
      }
      try {
        await client.query('COMMIT');
      } catch (error) {
        broken = error as Error;
        throw error;
      }
      return result;
    } finally {
      release(broken);
    }
  }
}
