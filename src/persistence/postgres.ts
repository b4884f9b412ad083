/**
 * PostgreSQL backend of `SessionStore` (DESIGN §4): for fleets of workers on many hosts, with
 * `LISTEN/NOTIFY` driving `watch`.
 *
 * Storage format (schema version {@link POSTGRES_SCHEMA_VERSION}, in one PostgreSQL schema named
 * by the URL's `?schema=` parameter, default `sessionlog`; a schema whose `schema_version` is
 * newer is refused, there are no migrations yet):
 *
 * - `schema_version(version)`: one row.
 * - `sessions(key bigserial, id text unique, header text)`: the header JSON text.
 * - `events(session_key, seq, type, time, data, surface_op, source_event_seqs, ignorable)`,
 *   primary key `(session_key, seq)`. `data` is the payload's JSON *text* exactly as serialised
 *   at append (not `jsonb`, which would reorder keys), so reads are byte-identical;
 *   `surface_op` is `append` or the replace object's JSON; `source_event_seqs` a JSON array;
 *   `ignorable` true or NULL. Neither the op nor the text id is repeated per row.
 * - `batches(session_key, op, first_seq, last_seq)`, primary key `(session_key, op)`: the op
 *   index; reads re-attach `op` to events from it.
 * - `artifacts(session_key, name, content bytea)` (UTF-8; `text` cannot hold NUL) and
 *   `projection_cache(session_key, record text)`.
 *
 * The schema is created on open in one transaction under an advisory lock, so concurrent first
 * opens do not race. Every append is one transaction that takes the session row
 * `FOR NO KEY UPDATE` (serialising writers of one session across hosts without blocking
 * artifact writes), checks the op index, then `expectedSeq`, writes the rows and the batch, and
 * `NOTIFY`s the store's channel (`sessionlog_<schema>`) with the session id, delivered on commit.
 *
 * `watch` listens on one dedicated connection per store, shared by all its watchers, and also
 * wakes on in-process appends; it polls only as a fallback for a missed notification, every
 * `pollIntervalMs` but never more often than once a second.
 */
import pg from 'pg';
import type { Notification, PoolClient, PoolConfig } from 'pg';
import {
  SessionlogError,
  assertSessionId,
  assertStoredEvent,
  deepFreeze,
  jsonEqual,
  parseHeader,
  type AnyEvent,
  type NewEvent,
  type SessionHeader,
} from '../session/index.js';
import type { ArtifactPut, ArtifactRef, ArtifactStore } from './artifacts.js';
import {
  KeyedSerializer,
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

/** The `schema_version` this build writes and reads. */
export const POSTGRES_SCHEMA_VERSION = 1;

/** The schema used when the URL has no `?schema=` parameter. */
export const POSTGRES_DEFAULT_SCHEMA = 'sessionlog';

/** A plain, unquoted-safe identifier; short enough that the notification channel name fits in 63 bytes. */
const SCHEMA_NAME_PATTERN = /^[a-z_][a-z0-9_]{0,47}$/;

/** `watch` polls at least this far apart: notifications drive it, polling only covers a missed one. */
const MIN_WATCH_POLL_MS = 1000;

/** How long opening a connection may take before the operation fails. */
const CONNECT_TIMEOUT_MS = 10_000;

function schemaDdl(s: string): string {
  return `
CREATE TABLE ${s}.schema_version (
  singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  version integer NOT NULL
);
CREATE TABLE ${s}.sessions (
  key bigserial PRIMARY KEY,
  id text NOT NULL UNIQUE,
  header text NOT NULL
);
CREATE TABLE ${s}.events (
  session_key bigint NOT NULL REFERENCES ${s}.sessions(key),
  seq bigint NOT NULL,
  type text NOT NULL,
  time bigint NOT NULL,
  data text NOT NULL,
  surface_op text,
  source_event_seqs text,
  ignorable boolean,
  PRIMARY KEY (session_key, seq)
);
CREATE TABLE ${s}.batches (
  session_key bigint NOT NULL REFERENCES ${s}.sessions(key),
  op text NOT NULL,
  first_seq bigint NOT NULL,
  last_seq bigint NOT NULL,
  PRIMARY KEY (session_key, op)
);
CREATE INDEX batches_by_last_seq ON ${s}.batches (session_key, last_seq);
CREATE TABLE ${s}.artifacts (
  session_key bigint NOT NULL REFERENCES ${s}.sessions(key),
  name text NOT NULL,
  content bytea NOT NULL,
  PRIMARY KEY (session_key, name)
);
CREATE TABLE ${s}.projection_cache (
  session_key bigint PRIMARY KEY REFERENCES ${s}.sessions(key),
  record text NOT NULL
);
`;
}

function statements(s: string) {
  return {
    sessionById: `SELECT key, header FROM ${s}.sessions WHERE id = $1`,
    headerByKey: `SELECT header FROM ${s}.sessions WHERE key = $1`,
    insertSession: `INSERT INTO ${s}.sessions (id, header) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING RETURNING key`,
    listSessions: `SELECT id, header FROM ${s}.sessions ORDER BY id COLLATE "C"`,
    lockSession: `SELECT key FROM ${s}.sessions WHERE key = $1 FOR NO KEY UPDATE`,
    lastSeq: `SELECT max(seq) AS seq FROM ${s}.events WHERE session_key = $1`,
    // Batches never overlap, so the one with the smallest last_seq >= seq is the only candidate.
    eventsFrom: `
      SELECT e.seq, e.type, e.time, e.data, e.surface_op, e.source_event_seqs, e.ignorable, b.first_seq AS batch_first_seq, b.op
      FROM ${s}.events e
      LEFT JOIN LATERAL (
        SELECT first_seq, op FROM ${s}.batches b
        WHERE b.session_key = e.session_key AND b.last_seq >= e.seq
        ORDER BY b.last_seq LIMIT 1
      ) b ON true
      WHERE e.session_key = $1 AND e.seq >= $2 AND e.seq < $3
      ORDER BY e.seq`,
    insertEvents: `
      INSERT INTO ${s}.events (session_key, seq, type, time, data, surface_op, source_event_seqs, ignorable)
      SELECT $1, * FROM unnest($2::bigint[], $3::text[], $4::bigint[], $5::text[], $6::text[], $7::text[], $8::boolean[])`,
    deleteEventsFrom: `DELETE FROM ${s}.events WHERE session_key = $1 AND seq >= $2`,
    batchByOp: `SELECT first_seq, last_seq FROM ${s}.batches WHERE session_key = $1 AND op = $2`,
    insertBatch: `INSERT INTO ${s}.batches (session_key, op, first_seq, last_seq) VALUES ($1, $2, $3, $4)`,
    deleteBatchesFrom: `DELETE FROM ${s}.batches WHERE session_key = $1 AND first_seq >= $2`,
    clipBatches: `UPDATE ${s}.batches SET last_seq = $1 WHERE session_key = $2 AND last_seq >= $3`,
    notify: `SELECT pg_notify($1, $2)`,
    insertArtifact: `INSERT INTO ${s}.artifacts (session_key, name, content) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`,
    artifact: `SELECT a.content FROM ${s}.artifacts a JOIN ${s}.sessions s ON s.key = a.session_key WHERE s.id = $1 AND a.name = $2`,
    cacheGet: `SELECT c.record FROM ${s}.projection_cache c JOIN ${s}.sessions s ON s.key = c.session_key WHERE s.id = $1`,
    cachePut: `INSERT INTO ${s}.projection_cache (session_key, record) VALUES ($1, $2) ON CONFLICT (session_key) DO UPDATE SET record = excluded.record`,
  };
}

type Statements = ReturnType<typeof statements>;

type EventRow = {
  seq: number;
  type: string;
  time: number;
  data: string;
  surface_op: string | null;
  source_event_seqs: string | null;
  ignorable: boolean | null;
  batch_first_seq: number | null;
  op: string | null;
};

/** Something that runs queries: the pool, or a client inside a transaction. */
type Queryable = Pick<PoolClient, 'query'>;

// ---------------------------------------------------------------------------------------------
// URL handling

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
    new SessionlogError('INVALID_ARGUMENT', `PostgreSQL store URL ${JSON.stringify(redactUrl(url).slice(0, 300))} ${why}`);
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw invalid('is not a valid URL; use postgres://USER:PASSWORD@HOST:PORT/DATABASE?schema=NAME');
  }
  if (parsed.protocol !== 'postgres:' && parsed.protocol !== 'postgresql:') throw invalid('must start with postgres:// or postgresql://');
  const schemas = parsed.searchParams.getAll('schema');
  if (schemas.length > 1) throw invalid('names more than one schema');
  const schema = schemas[0] ?? POSTGRES_DEFAULT_SCHEMA;
  if (!SCHEMA_NAME_PATTERN.test(schema)) {
    throw invalid(`has schema ${JSON.stringify(schema.slice(0, 100))}; a schema name is 1–48 characters of [a-z0-9_], not starting with a digit`);
  }
  parsed.searchParams.delete('schema');
  const password = parsed.password ? decodeURIComponent(parsed.password) : (parsed.searchParams.get('password') ?? undefined);
  return {
    connectionString: parsed.toString(),
    schema,
    location: `postgres://${parsed.host}${parsed.pathname}?schema=${schema}`,
    password,
  };
}

/** Removes a password from a driver message (drivers do not print it, but a message is shown to people). */
function scrub(message: string, password: string | undefined): string {
  return password && password.length >= 3 ? message.split(password).join('***') : message;
}

// ---------------------------------------------------------------------------------------------

/** Opens (creating the schema if needed) a PostgreSQL store at `url`. */
export function openPostgresStore(url: string, options: StoreOptions = {}): Promise<PostgresSessionStore> {
  return PostgresSessionStore.open(url, resolveStoreOptions(options));
}

export class PostgresSessionStore implements SessionStore {
  readonly kind = 'postgres' as const;
  readonly artifacts: ArtifactStore;
  readonly projectionCache: ProjectionCacheStore;
  /** Identifies the database and schema for in-process watch wake-ups. */
  readonly location: string;
  readonly schema: string;
  /** The `LISTEN/NOTIFY` channel of this store's schema. */
  readonly channel: string;
  readonly sql: Statements;
  private readonly pool: pg.Pool;
  private readonly listener: NotificationListener;
  private readonly keys = new Map<string, number>();
  private readonly headers = new Map<number, SessionHeader>();
  private readonly scanners: LruMap<number, LogScanner>;
  private readonly serial = new KeyedSerializer();
  private readonly closeListeners = new Set<() => void>();
  private closed = false;
  private closing: Promise<void> | undefined;

  private constructor(
    private readonly target: PostgresTarget,
    private readonly options: ResolvedStoreOptions,
  ) {
    this.schema = target.schema;
    this.location = target.location;
    this.channel = `sessionlog_${target.schema}`;
    this.sql = statements(quoteIdent(target.schema));
    this.scanners = new LruMap(options.sessionCacheSize);
    const config: PoolConfig = {
      connectionString: target.connectionString,
      connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
      // Seqs, times and keys are bigint columns holding safe integers; read them as numbers.
      types: { getTypeParser: (oid, format) => (oid === pg.types.builtins.INT8 ? Number : pg.types.getTypeParser(oid, format)) },
    };
    this.pool = new pg.Pool(config);
    // An idle pooled connection that dies (server restart) is replaced on next use; without a
    // listener the pool's 'error' event would crash the process.
    this.pool.on('error', () => undefined);
    this.listener = new NotificationListener(config, this.channel);
    this.artifacts = new PostgresArtifacts(this);
    this.projectionCache = new PostgresProjectionCache(this);
  }

  /** Connects and creates or checks the schema; any failure ends the pool again. */
  static async open(url: string, options: ResolvedStoreOptions): Promise<PostgresSessionStore> {
    const target = parsePostgresUrl(url);
    const store = new PostgresSessionStore(target, options);
    try {
      await store.initializeSchema();
    } catch (error) {
      await store.close();
      if (error instanceof SessionlogError) throw error;
      throw new SessionlogError(
        'INVALID_ARGUMENT',
        `could not open the PostgreSQL store ${JSON.stringify(redactUrl(url).slice(0, 300))}: ${scrub((error as Error).message, target.password)}; check that the server is running and the URL, user and database are right (accepted store URLs: postgres://USER@HOST:PORT/DATABASE?schema=NAME, sqlite:PATH, jsonl:DIR)`,
      );
    }
    return store;
  }

  private async initializeSchema(): Promise<void> {
    const s = quoteIdent(this.schema);
    await this.transaction('write', async (client) => {
      await client.query(`SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, [`sessionlog:schema:${this.schema}`]);
      const exists = await client.query(`SELECT 1 FROM pg_namespace WHERE nspname = $1`, [this.schema]);
      // Only create when missing: CREATE SCHEMA IF NOT EXISTS needs CREATE on the database even when it exists.
      if (exists.rowCount === 0) await client.query(`CREATE SCHEMA ${s}`);
      const tables = await client.query<{ name: string }>(`SELECT tablename AS name FROM pg_tables WHERE schemaname = $1`, [this.schema]);
      const names = new Set(tables.rows.map((row) => row.name));
      if (!names.has('schema_version')) {
        if (names.size > 0) {
          throw new SessionlogError(
            'INVALID_ARGUMENT',
            `PostgreSQL schema ${this.schema} holds tables of another application (no sessionlog schema_version table); pick another schema with ?schema=NAME`,
          );
        }
        await client.query(schemaDdl(s));
        await client.query(`INSERT INTO ${s}.schema_version (version) VALUES ($1)`, [POSTGRES_SCHEMA_VERSION]);
        return;
      }
      const row = await client.query<{ version: number }>(`SELECT version FROM ${s}.schema_version`);
      const version = row.rows[0]?.version;
      if (version === undefined) {
        throw new SessionlogError('CORRUPT_LOG', `PostgreSQL schema ${this.schema} has an empty schema_version table; restore it from a backup`);
      }
      if (version > POSTGRES_SCHEMA_VERSION) {
        throw new SessionlogError(
          'UNSUPPORTED_FORMAT',
          `PostgreSQL schema ${this.schema} has schema version ${version}, written by a newer version of sessionlog (this build reads version ${POSTGRES_SCHEMA_VERSION}); upgrade sessionlog to open it`,
        );
      }
      if (version < POSTGRES_SCHEMA_VERSION) {
        throw new SessionlogError('UNSUPPORTED_FORMAT', `PostgreSQL schema ${this.schema} has schema version ${version}, older than this build reads, and there is no upgrade path`);
      }
    });
  }

  // -------------------------------------------------------------------------------------------
  // Connection plumbing

  /** Runs `body` on the open store; driver errors raised because the store closed meanwhile read as STORE_CLOSED. */
  async use<T>(body: () => Promise<T>): Promise<T> {
    if (this.closed) throw storeClosed();
    try {
      return await body();
    } catch (error) {
      if (this.closed && !(error instanceof SessionlogError)) throw storeClosed();
      throw error;
    }
  }

  /** A single autocommit statement. */
  query<R extends object>(text: string, values: unknown[]): Promise<pg.QueryResult<R>> {
    return this.pool.query<R>(text, values);
  }

  /**
   * Runs `body` in one transaction on one pooled connection: `write` is READ COMMITTED (writers
   * lock the session row), `read` a REPEATABLE READ READ ONLY snapshot so several statements
   * agree with each other.
   */
  private async transaction<T>(mode: 'write' | 'read', body: (client: PoolClient) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    // A checked-out connection that breaks between statements (the server restarted or was
    // killed) emits 'error' on the client, which the pool no longer listens to: unheard, it
    // would crash the process. The next statement on it fails and says why; that is enough.
    const onBroken = (): void => undefined;
    client.on('error', onBroken);
    const release = (error?: Error): void => {
      client.off('error', onBroken);
      client.release(error);
    };
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

  /** The key of a session, or undefined (session rows are never deleted, so a key is cached once found). */
  async sessionKey(id: string): Promise<number | undefined> {
    const cached = this.keys.get(id);
    if (cached !== undefined) return cached;
    const row = (await this.query<{ key: number }>(this.sql.sessionById, [id])).rows[0];
    if (row) this.keys.set(id, row.key);
    return row?.key;
  }

  async requireKey(id: string): Promise<number> {
    const key = await this.sessionKey(id);
    if (key === undefined) throw notFound(id);
    return key;
  }

  /** The validated stored header (headers are immutable, so it is cached once parsed). */
  private async readHeader(db: Queryable, key: number, id: string): Promise<SessionHeader> {
    const cached = this.headers.get(key);
    if (cached) return cached;
    const row = (await db.query<{ header: string }>(this.sql.headerByKey, [key])).rows[0];
    if (!row) throw notFound(id);
    const header = parseStoredHeader(row.header, id);
    this.headers.set(key, header);
    return header;
  }

  // -------------------------------------------------------------------------------------------
  // SessionStore

  create(header: SessionHeader): Promise<void> {
    return this.use(async () => {
      const parsed = parseHeader(header, `create session ${String((header as { id?: unknown } | null)?.id)}`);
      const inserted = await this.query<{ key: number }>(this.sql.insertSession, [parsed.id, JSON.stringify(parsed)]);
      if (inserted.rowCount === 1) return;
      const existing = (await this.query<{ header: string }>(this.sql.sessionById, [parsed.id])).rows[0];
      if (!existing || !jsonEqual(parseStoredHeader(existing.header, parsed.id), parsed)) throw alreadyExists(parsed.id);
    });
  }

  header(id: string): Promise<SessionHeader> {
    return this.use(async () => {
      assertSessionId(id);
      return this.readHeader(this.pool, await this.requireKey(id), id);
    });
  }

  exists(id: string): Promise<boolean> {
    return this.use(async () => {
      assertSessionId(id);
      return (await this.sessionKey(id)) !== undefined;
    });
  }

  list(): Promise<SessionHeader[]> {
    return this.use(async () => {
      const rows = (await this.query<{ id: string; header: string }>(this.sql.listSessions, [])).rows;
      return rows.map((row) => parseStoredHeader(row.header, row.id));
    });
  }

  append(id: string, events: readonly NewEvent[], options: AppendOptions): Promise<AppendResult> {
    return this.use(async () => {
      assertAppendArguments(id, events, options);
      if (options.op.includes('\u0000')) {
        throw new SessionlogError('INVALID_ARGUMENT', `append op must not contain a NUL character (PostgreSQL text cannot store it), got ${JSON.stringify(options.op.slice(0, 200))}`);
      }
      const key = await this.requireKey(id);
      return this.serial.run(id, async () => {
        let written: AnyEvent[] = [];
        let writing = false;
        let result: AppendResult;
        try {
          result = await this.transaction('write', async (client) => {
            await client.query(this.sql.lockSession, [key]);
            const stored = (await client.query<{ first_seq: number; last_seq: number }>(this.sql.batchByOp, [key, options.op])).rows[0];
            const scanner = await this.syncScanner(client, key, id);
            const plan = planAppend(scanner, stored && { firstSeq: stored.first_seq, lastSeq: stored.last_seq }, events, options);
            if (plan.kind === 'replayed') return plan.result;
            writing = true;
            await this.truncateTorn(client, key, scanner);
            await this.insertBatch(client, key, id, plan.events, options.op);
            written = plan.events;
            return appendResultOf(plan.events);
          });
        } catch (error) {
          // A write rolled back (or its commit is unknown): forget in-memory state that may assume it happened.
          if (writing) this.scanners.delete(key);
          throw error;
        }
        if (written.length > 0) {
          this.scanners.get(key)?.commitWritten(written);
          notifyAppended(this.location, id);
        }
        return result;
      });
    });
  }

  readFrom(id: string, fromSeq: number, limit?: number): Promise<AnyEvent[]> {
    return this.use(async () => {
      assertReadArguments(id, fromSeq, limit);
      const key = await this.requireKey(id);
      // A header this build cannot read (newer format) refuses reads of its events too.
      await this.readHeader(this.pool, key, id);
      const max = limit ?? Number.MAX_SAFE_INTEGER;
      if (max === 0) return [];
      const end = fromSeq + Math.min(max, Number.MAX_SAFE_INTEGER - fromSeq);
      const out: AnyEvent[] = [];
      for (const record of await this.records(this.pool, key, fromSeq, end)) {
        const event = record.ok ? checkRow(record.value, fromSeq + out.length, id) : undefined;
        if (!event) {
          // Damaged row or gap: classify the whole log (throws CORRUPT_LOG inside committed
          // turns) and serve the valid prefix.
          const scanner = await this.serial.run(id, () => this.transaction('read', (client) => this.syncScanner(client, key, id)));
          return scanner.session.events.slice(fromSeq, end);
        }
        out.push(event);
      }
      return out;
    });
  }

  nextSeq(id: string): Promise<number> {
    return this.use(async () => {
      assertSessionId(id);
      const key = await this.requireKey(id);
      return this.serial.run(id, () => this.transaction('read', async (client) => (await this.syncScanner(client, key, id)).nextSeq));
    });
  }

  load(id: string): Promise<LoadedSession> {
    return this.use(async () => {
      assertSessionId(id);
      const key = await this.requireKey(id);
      return this.serial.run(id, async () => {
        let closers: AnyEvent[] = [];
        let loaded: LoadedSession;
        try {
          loaded = await this.transaction('write', async (client) => {
            await client.query(this.sql.lockSession, [key]);
            const scanner = await this.syncScanner(client, key, id);
            const truncated = await this.truncateTorn(client, key, scanner);
            closers = planRepair(scanner);
            if (closers.length > 0) await this.insertBatch(client, key, id, closers, closers[0]!.op!);
            return loadedSession(scanner, closers, truncated);
          });
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
    });
  }

  inspect(id: string): Promise<LoadedSession> {
    return this.use(async () => {
      assertSessionId(id);
      const key = await this.requireKey(id);
      return this.serial.run(id, () =>
        this.transaction('read', async (client) => {
          const scanner = await this.syncScanner(client, key, id);
          return loadedSession(scanner, planRepair(scanner), scanner.torn?.records ?? 0);
        }),
      );
    });
  }

  watch(id: string, fromSeq: number, options: WatchOptions = {}): AsyncIterable<AnyEvent> {
    assertReadArguments(id, fromSeq, undefined);
    return this.watchSession(id, fromSeq, options.signal);
  }

  private async *watchSession(id: string, fromSeq: number, signal: AbortSignal | undefined): AsyncGenerator<AnyEvent> {
    // Listening before the first read means no notification between that read and LISTEN is lost.
    if (!this.closed) await this.listener.ensure();
    yield* watchEvents(
      {
        read: (seq) => {
          // Re-establishes the listener after a lost connection; the poll covers the gap.
          void this.listener.ensure();
          return this.readFrom(id, seq, 1000);
        },
        subscribe: (wake) => {
          const offLocal = subscribeLocal(this.closeListeners, this.location, id, wake);
          const offRemote = this.listener.subscribe(id, wake);
          return () => {
            offLocal();
            offRemote();
          };
        },
        isClosed: () => this.closed,
        pollIntervalMs: Math.max(this.options.pollIntervalMs, MIN_WATCH_POLL_MS),
      },
      fromSeq,
      signal,
    );
  }

  /** Ends the listener and the pool; idempotent. */
  close(): Promise<void> {
    if (!this.closing) {
      this.closed = true;
      this.scanners.clear();
      for (const wake of [...this.closeListeners]) wake();
      this.closing = Promise.all([this.listener.close(), this.pool.end()]).then(() => undefined);
    }
    return this.closing;
  }

  // -------------------------------------------------------------------------------------------

  /**
   * Brings the cached scanner of a session up to the stored rows (inside a transaction; the
   * caller holds the session's serializer slot). A scanner that is ahead of the stored log, or
   * saw a torn tail, is rebuilt from seq 0.
   */
  private async syncScanner(client: PoolClient, key: number, id: string): Promise<LogScanner> {
    const last = (await client.query<{ seq: number | null }>(this.sql.lastSeq, [key])).rows[0]?.seq ?? null;
    const physicalNext = (last ?? -1) + 1;
    let scanner = this.scanners.get(key);
    if (scanner && !scanner.torn && scanner.nextSeq === physicalNext) return scanner;
    if (!scanner || scanner.torn || scanner.nextSeq > physicalNext) {
      scanner = new LogScanner(await this.readHeader(client, key, id), `session ${id} in ${this.location}`);
    }
    this.scanners.delete(key);
    for (const record of await this.records(client, key, scanner.nextSeq, physicalNext)) scanner.push(record);
    this.scanners.set(key, scanner);
    return scanner;
  }

  /** Decoded rows `fromSeq..toSeq-1` with their ops re-attached, in one statement (one snapshot). */
  private async records(db: Queryable, key: number, fromSeq: number, toSeq: number): Promise<StoredRecord[]> {
    if (fromSeq >= toSeq) return [];
    const rows = (await db.query<EventRow>(this.sql.eventsFrom, [key, fromSeq, toSeq])).rows;
    return rows.map((row) => decodeRow(row, row.batch_first_seq !== null && row.batch_first_seq <= row.seq ? (row.op ?? undefined) : undefined));
  }

  private async insertBatch(client: PoolClient, key: number, id: string, events: readonly AnyEvent[], op: string): Promise<void> {
    await client.query(this.sql.insertEvents, [
      key,
      events.map((e) => e.seq),
      events.map((e) => e.type),
      events.map((e) => e.time),
      events.map((e) => JSON.stringify(e.data)),
      events.map((e) => encodeSurfaceOp(e.surfaceOp)),
      events.map((e) => (e.sourceEventSeqs === undefined ? null : JSON.stringify(e.sourceEventSeqs))),
      events.map((e) => (e.ignorable ? true : null)),
    ]);
    await client.query(this.sql.insertBatch, [key, op, events[0]!.seq, events[events.length - 1]!.seq]);
    // Delivered to listeners when (and only if) the transaction commits.
    await client.query(this.sql.notify, [this.channel, id]);
  }

  /** Deletes a torn tail found by the scanner (inside the write transaction). Returns the rows dropped. */
  private async truncateTorn(client: PoolClient, key: number, scanner: LogScanner): Promise<number> {
    const torn = scanner.torn;
    if (!torn) return 0;
    await client.query(this.sql.deleteEventsFrom, [key, torn.seq]);
    await client.query(this.sql.deleteBatchesFrom, [key, torn.seq]);
    await client.query(this.sql.clipBatches, [torn.seq - 1, key, torn.seq]);
    scanner.clearTorn();
    return torn.records;
  }
}

// ---------------------------------------------------------------------------------------------
// LISTEN/NOTIFY

/**
 * One dedicated connection per store that `LISTEN`s on the store's channel and fans each
 * notification (payload: a session id) out to that session's watchers. A lost connection
 * wakes every watcher (they re-read) and is re-established on the next watcher poll.
 */
class NotificationListener {
  private client: pg.Client | undefined;
  private connecting: Promise<void> | undefined;
  private readonly subscribers = new Map<string, Set<() => void>>();
  private closed = false;

  constructor(
    private readonly config: PoolConfig,
    private readonly channel: string,
  ) {}

  subscribe(id: string, wake: () => void): () => void {
    let set = this.subscribers.get(id);
    if (!set) this.subscribers.set(id, (set = new Set()));
    set.add(wake);
    return () => {
      set.delete(wake);
      if (set.size === 0 && this.subscribers.get(id) === set) this.subscribers.delete(id);
    };
  }

  /** Resolves once the connection listens (or could not be made: watchers then rely on polling). */
  ensure(): Promise<void> {
    if (this.closed || this.client) return Promise.resolve();
    this.connecting ??= this.connect().finally(() => (this.connecting = undefined));
    return this.connecting;
  }

  private async connect(): Promise<void> {
    const client = new pg.Client(this.config);
    const lost = (): void => {
      if (this.client === client) this.client = undefined;
      this.wakeAll();
    };
    client.on('error', lost);
    client.on('end', lost);
    client.on('notification', (message: Notification) => {
      if (message.channel !== this.channel || message.payload === undefined) return;
      for (const wake of [...(this.subscribers.get(message.payload) ?? [])]) wake();
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${quoteIdent(this.channel)}`);
    } catch {
      // Server unreachable or out of connections: watchers poll, and the next poll retries.
      await client.end().catch(() => undefined);
      return;
    }
    if (this.closed) {
      await client.end().catch(() => undefined);
      return;
    }
    this.client = client;
    // Appends committed while no listener was connected are found by this re-read.
    this.wakeAll();
  }

  private wakeAll(): void {
    for (const set of this.subscribers.values()) for (const wake of [...set]) wake();
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.connecting;
    const client = this.client;
    this.client = undefined;
    if (client) {
      try {
        await client.end();
      } catch {
        // Ending a connection that already broke: nothing left to release.
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Rows

function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
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

function encodeSurfaceOp(op: AnyEvent['surfaceOp']): string | null {
  if (op === undefined) return null;
  return op === 'append' ? 'append' : JSON.stringify(op);
}

function decodeRow(row: EventRow, op: string | undefined): StoredRecord {
  try {
    const event: Record<string, unknown> = { seq: row.seq, type: row.type, time: row.time, data: JSON.parse(row.data) };
    if (row.surface_op !== null) event.surfaceOp = row.surface_op.startsWith('{') ? JSON.parse(row.surface_op) : row.surface_op;
    if (row.source_event_seqs !== null) event.sourceEventSeqs = JSON.parse(row.source_event_seqs);
    if (op !== undefined) event.op = op;
    if (row.ignorable !== null) event.ignorable = row.ignorable;
    return { ok: true, value: event, position: row.seq };
  } catch (error) {
    return { ok: false, reason: `row seq ${row.seq} does not decode: ${(error as Error).message}`, position: row.seq };
  }
}

/** The fast-path check of `readFrom`: envelope and payload, no surface fold. */
function checkRow(value: unknown, expectedSeq: number, id: string): AnyEvent | undefined {
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

class PostgresArtifacts implements ArtifactStore {
  constructor(private readonly store: PostgresSessionStore) {}

  put(input: ArtifactPut): Promise<ArtifactRef> {
    return this.store.use(async () => {
      assertSessionId(input?.sessionId);
      if (typeof input.content !== 'string') throw new SessionlogError('INVALID_ARGUMENT', 'artifact content must be a string');
      const key = await this.store.requireKey(input.sessionId);
      const content = Buffer.from(input.content, 'utf8');
      for (const name of artifactNameCandidates(sanitizeArtifactName(String(input.name ?? '')))) {
        const inserted = await this.store.query(this.store.sql.insertArtifact, [key, name, content]);
        if (inserted.rowCount === 1) return { locator: artifactLocator(input.sessionId, name), bytes: content.length };
      }
      throw new Error('unreachable: artifact name candidates are infinite');
    });
  }

  get(locator: string): Promise<string> {
    return this.store.use(() => this.content(locator));
  }

  read(locator: string, offset: number, limit: number): Promise<{ text: string; total: number }> {
    return this.store.use(async () => artifactWindow(await this.content(locator), offset, limit));
  }

  private async content(locator: string): Promise<string> {
    const { sessionId, name } = parseArtifactLocator(locator);
    const row = (await this.store.query<{ content: Buffer }>(this.store.sql.artifact, [sessionId, name])).rows[0];
    if (!row) throw artifactNotFound(locator);
    return row.content.toString('utf8');
  }
}

class PostgresProjectionCache implements ProjectionCacheStore {
  constructor(private readonly store: PostgresSessionStore) {}

  get(sessionId: string): Promise<ProjectionCacheRecord | undefined> {
    return this.store.use(async () => {
      assertSessionId(sessionId);
      const row = (await this.store.query<{ record: string }>(this.store.sql.cacheGet, [sessionId])).rows[0];
      return row ? parseProjectionCacheRecord(row.record) : undefined;
    });
  }

  put(sessionId: string, record: ProjectionCacheRecord): Promise<void> {
    return this.store.use(async () => {
      assertSessionId(sessionId);
      const key = await this.store.requireKey(sessionId);
      await this.store.query(this.store.sql.cachePut, [key, serializeProjectionCacheRecord(record)]);
    });
  }
}
