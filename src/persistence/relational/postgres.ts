/**
 * PostgreSQL backend of `SessionStore` (DESIGN §4): for fleets of workers on many hosts, with
 * `LISTEN/NOTIFY` driving `watch`. The dialect driver under the relational core (core.ts, which
 * runs every operation), with the storage format, the schema and its upgrades, and the statements.
 *
 * Storage format (schema version {@link POSTGRES_SCHEMA_VERSION}, in one PostgreSQL schema named
 * by the URL's `?schema=` parameter, default `sessionlog`; a schema whose `schema_version` is
 * newer is refused; versions 1 to 4 are upgraded in place when a store opens, in the schema
 * transaction: version 2 adds the `tombstones` table, version 3 the `search` column, filled from
 * every stored event, and its indexes, version 4 the `inbox` and `session_keys` tables, version 5
 * the `transcripts` table, version 6 the `pacing` table, version 7 the `spend` table):
 *
 * - `schema_version(version)`: one row.
 * - `sessions(key bigserial, id text unique, header text)`: the header JSON text.
 * - `events(session_key, seq, type, time, data, surface_op, source_event_seqs, ignorable)`,
 *   primary key `(session_key, seq)`, in the shared relational row codec (rows.ts). `data` is
 *   the payload's JSON *text* exactly as serialised at append (not `jsonb`, which would reorder
 *   keys), so reads are byte-identical. Neither the op nor the text id is repeated per row.
 * - `batches(session_key, op, first_seq, last_seq)`, primary key `(session_key, op)`: the op
 *   index; reads re-attach `op` to events from it. Indexed by `(session_key, last_seq)` and, made
 *   on open where missing (no version: a build without it works unchanged), `(session_key,
 *   first_seq)` for the anchored read.
 * - `artifacts(session_key, name, content bytea)` (UTF-8; `text` cannot hold NUL) and
 *   `projection_cache(session_key, record text)`.
 * - `tombstones(id, erased_at, until)` (version 2): erased ids `create` refuses until `until`.
 * - `events.search tsvector` (version 3): for an event that carries text, `to_tsvector('simple',
 *   …)` of its folded words (search.ts; `simple` has no stemming or stop words, so any language
 *   works), written by the append's own INSERT; NULL for other events. `events_search` is a GIN
 *   index on it; queries rank with `ts_rank` (normalised by document length), and the snippet comes
 *   from the validated copy. `events_unindexed`, a partial index that is empty in normal
 *   operation, finds text events a writer of an older build appended without the column during a
 *   rolling upgrade; `search` indexes those first.
 * - `inbox(session_id, key, body bytea, bytes, digest, stored_at)` (version 4), primary key
 *   `(session_id, key)`: what callers sent, waiting for the engine to log it (store.ts
 *   `InboxStore`); the body as UTF-8 (`text` cannot hold NUL), `bytes` its size, `digest` its
 *   hex SHA-256. Keyed by the session's text id, not its row key: an entry may be written before
 *   the session exists.
 * - `session_keys(session_id, key_id, key bytea, created_at)` (version 4): each session id's
 *   32-byte data key and its 16-hex-digit id; the first one inserted stays.
 * - `transcripts(scope, digest, session_key, seq)` (version 5), primary key `(scope, digest)`,
 *   indexed by `session_key` for erasure: the transcript index (store.ts `TranscriptIndex`), a
 *   caller scope and the hex SHA-256 of a transcript prefix naming the session row whose surface
 *   equalled it at `seq`. `session_key` references the session, so an entry cannot outlive it;
 *   putting a pair again replaces its row (one upsert, which waits for an erasure of the session
 *   under way and then finds it gone).
 * - `pacing(key, state, updated_at)` (version 6): one provider pacing bucket per key (pacing.ts),
 *   its state as JSON text (NULL for a row made only to be locked); a reservation inserts the row
 *   if missing, then takes it `FOR UPDATE`, so every worker of a fleet reserves in turn.
 * - `spend(tenant, session_id, tokens, cost_usd, model_calls, tool_calls, wall_ms, updated_at)` (version
 *   7), primary key `(tenant, session_id)`, indexed by `session_id` for erasure: what each
 *   session spent (spend.ts), added to in each append's transaction; a tenant's `.erased` row
 *   holds what its erased sessions spent.
 *
 * Inbox and key writes and an erasure of the same id are serialized by a transaction-level
 * advisory lock on the schema and the id, whether or not the session exists.
 * The schema is created on open in one transaction under an advisory lock, so concurrent first
 * opens do not race. Every append is one transaction that takes the session row
 * `FOR NO KEY UPDATE` (serialising writers of one session across hosts without blocking
 * artifact writes), brings the store's validated copy up to the stored head, checks the op and
 * `expectedSeq`, writes the rows and the batch, and `NOTIFY`s the store's channel
 * (`sessionlog_<schema>`) with the session id, delivered on commit. A transaction commits whole,
 * so nothing is ever truncated: any damaged row is CORRUPT_LOG. A writer waits at most
 * `lockTimeoutMs` for the row lock (`lock_timeout`), and a connection idle inside a transaction
 * for `lockStaleMs` is ended by the server (`idle_in_transaction_session_timeout`), so a paused
 * writer cannot hold a session; both, and a server that cannot be reached, are UNAVAILABLE.
 *
 * `watch` listens on one dedicated connection per store, shared by all its watchers, and also
 * wakes on in-process appends; it polls only as a fallback for a missed notification, every
 * `pollIntervalMs` but never more often than once a second.
 */
import pg from 'pg';
import type { Notification, PoolClient, PoolConfig } from 'pg';
import { SessionlogError, type SpendTotals, type StoredEvent } from '../../session/index.js';
import { ERASED_SPEND_ROW, type TenantSpend } from '../spend.js';
import { SEARCHABLE_EVENT_TYPES, indexText, type RankedSeq, type SearchRequest } from '../search.js';
import {
  resolveStoreOptions,
  type ErasedPlace,
  type InboxEntry,
  type ResolvedStoreOptions,
  type SessionKey,
  type StoreOptions,
  type TranscriptEntry,
} from '../store.js';
import type { RemoteAppends } from '../watch.js';
import { RelationalSessionStore } from './core.js';
import { runStepsAsync, spendColumns } from './driver.js';
import type * as driver from './driver.js';
import { encodeEvent, storedHead, type BatchRow, type EventRow } from './rows.js';

/** The `schema_version` this build writes and reads. */
export const POSTGRES_SCHEMA_VERSION = 7;

/** The schema used when the URL has no `?schema=` parameter. */
export const POSTGRES_DEFAULT_SCHEMA = 'sessionlog';

/** A plain, unquoted-safe identifier; short enough that the notification channel name fits in 63 bytes. */
const SCHEMA_NAME_PATTERN = /^[a-z_][a-z0-9_]{0,47}$/;

/** `watch` polls at least this far apart: notifications drive it, polling only covers a missed one. */
const MIN_WATCH_POLL_MS = 1000;

/** How long opening a connection may take before the operation fails. */
const CONNECT_TIMEOUT_MS = 10_000;

function tombstonesDdl(s: string): string {
  return `
CREATE TABLE ${s}.tombstones (
  id text PRIMARY KEY,
  erased_at bigint NOT NULL,
  until bigint NOT NULL
);
`;
}

function inboxDdl(s: string): string {
  return `
CREATE TABLE ${s}.inbox (
  session_id text NOT NULL,
  key text NOT NULL,
  body bytea NOT NULL,
  bytes bigint NOT NULL,
  digest text NOT NULL,
  stored_at bigint NOT NULL,
  PRIMARY KEY (session_id, key)
);
CREATE TABLE ${s}.session_keys (
  session_id text PRIMARY KEY,
  key_id text NOT NULL,
  key bytea NOT NULL,
  created_at bigint NOT NULL
);
`;
}

function pacingDdl(s: string): string {
  return `
CREATE TABLE ${s}.pacing (
  key text PRIMARY KEY,
  state text,
  updated_at bigint NOT NULL
);`;
}

function spendDdl(s: string): string {
  return `
CREATE TABLE ${s}.spend (
  tenant text NOT NULL,
  session_id text NOT NULL,
  tokens bigint NOT NULL,
  cost_usd double precision NOT NULL,
  model_calls bigint NOT NULL,
  tool_calls bigint NOT NULL,
  wall_ms bigint NOT NULL,
  updated_at bigint NOT NULL,
  PRIMARY KEY (tenant, session_id)
);
CREATE INDEX spend_by_session ON ${s}.spend (session_id);`;
}

function transcriptsDdl(s: string): string {
  return `
CREATE TABLE ${s}.transcripts (
  scope text NOT NULL,
  digest text NOT NULL,
  session_key bigint NOT NULL REFERENCES ${s}.sessions(key),
  seq bigint NOT NULL,
  PRIMARY KEY (scope, digest)
);
CREATE INDEX transcripts_by_session ON ${s}.transcripts (session_key);
`;
}

/** The searchable event types as an SQL list (constants of ours, so a partial index predicate can name them). */
const SEARCHABLE_TYPES_SQL = SEARCHABLE_EVENT_TYPES.map((type) => `'${type}'`).join(', ');

/** Rows per page when indexing events stored without their `search` value. */
const INDEX_PAGE_ROWS = 1000;

function searchIndexDdl(s: string): string {
  return `CREATE INDEX events_search ON ${s}.events USING gin (search);`;
}

function unindexedIndexDdl(s: string): string {
  return `CREATE INDEX events_unindexed ON ${s}.events (session_key, seq) WHERE search IS NULL AND type IN (${SEARCHABLE_TYPES_SQL});`;
}

/**
 * The batch records by where they start: an anchored read finds a chunk's records with it
 * (`digestStatement`). Not part of the format (no version): a store of this build creates it on
 * open where a schema lacks it, and a build without it reads and writes the same tables.
 */
const BATCH_STARTS_INDEX = 'batches_by_first_seq';
function batchStartsDdl(s: string): string {
  return `CREATE INDEX ${BATCH_STARTS_INDEX} ON ${s}.batches (session_key, first_seq);`;
}

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
  search tsvector,
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
${batchStartsDdl(s)}
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
${tombstonesDdl(s)}
${searchIndexDdl(s)}
${unindexedIndexDdl(s)}
${inboxDdl(s)}
${transcriptsDdl(s)}
${pacingDdl(s)}
${spendDdl(s)}
`;
}

/**
 * The anchored read's statement for seqs $2 <= seq < $3 of session $1 (anchor.ts
 * `RelationalDigest`, batch records in a table of their own, so every row's batch columns are
 * null: 24): the rows' text and the text of the batch records starting on them, each joined with
 * chr(30) and passed through `out` (NULL: none); misplaced counts a range whose rows are not
 * exactly its seqs (the primary key rules out duplicates) and, from seq 0 on, a batch record that
 * starts before seq 0. A record starting inside a range whose rows are exactly its seqs starts on
 * a row; in any other range the row count already tells (core.ts). Both lookups of batch records
 * are ranges of `batches_by_first_seq`: a session's records are not scanned per chunk.
 */
function digestStatement(s: string, out: (text: string) => string): string {
  const rows = `string_agg(concat_ws(chr(31), e.time,
      (e.ignorable IS NULL)::int + 2 * (e.surface_op IS NULL)::int + 4 * (e.source_event_seqs IS NULL)::int + 24,
      CASE WHEN e.ignorable THEN '1' WHEN NOT e.ignorable THEN '0' END, e.type, e.data, e.surface_op, e.source_event_seqs),
    chr(30) ORDER BY e.seq)`;
  const batches = `(SELECT ${out(`string_agg(concat_ws(chr(31), b.first_seq, b.last_seq, b.op), chr(30) ORDER BY b.first_seq, b.op)`)}
    FROM ${s}.batches b WHERE b.session_key = $1 AND b.first_seq >= $2 AND b.first_seq < $3)`;
  return `
    SELECT ${out(rows)} AS rows_text, ${batches} AS batches_text, count(*)::int AS rows,
      (CASE WHEN count(*) = 0 OR (min(e.seq) = $2 AND max(e.seq) = $3 - 1) THEN 0 ELSE 1 END
       + CASE WHEN $2 = 0 THEN (SELECT count(*) FROM ${s}.batches o WHERE o.session_key = $1 AND o.first_seq < 0) ELSE 0 END)::int
        AS misplaced
    FROM ${s}.events e WHERE e.session_key = $1 AND e.seq >= $2 AND e.seq < $3`;
}

function statements(s: string) {
  return {
    // The session row and the stored head in one statement (one snapshot).
    sessionHead: `
      SELECT s.key, s.header,
        (SELECT max(e.seq) FROM ${s}.events e WHERE e.session_key = s.key) AS last_event,
        (SELECT max(b.last_seq) FROM ${s}.batches b WHERE b.session_key = s.key) AS last_batch
      FROM ${s}.sessions s WHERE s.id = $1`,
    sessionById: `SELECT key, header FROM ${s}.sessions WHERE id = $1`,
    insertPaceRow: `INSERT INTO ${s}.pacing (key, state, updated_at) VALUES ($1, NULL, 0) ON CONFLICT (key) DO NOTHING`,
    lockPaceRow: `SELECT state FROM ${s}.pacing WHERE key = $1 FOR UPDATE`,
    putPaceRow: `UPDATE ${s}.pacing SET state = $2, updated_at = $3 WHERE key = $1`,
    addSpend: `INSERT INTO ${s}.spend AS t (tenant, session_id, tokens, cost_usd, model_calls, tool_calls, wall_ms, updated_at)
      VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
      ON CONFLICT (tenant, session_id) DO UPDATE SET tokens = t.tokens + EXCLUDED.tokens,
        cost_usd = t.cost_usd + EXCLUDED.cost_usd, model_calls = t.model_calls + EXCLUDED.model_calls,
        tool_calls = t.tool_calls + EXCLUDED.tool_calls, wall_ms = t.wall_ms + EXCLUDED.wall_ms,
        updated_at = EXCLUDED.updated_at`,
    foldErasedSpend: `INSERT INTO ${s}.spend AS t (tenant, session_id, tokens, cost_usd, model_calls, tool_calls, wall_ms, updated_at)
      SELECT tenant, $1, tokens, cost_usd, model_calls, tool_calls, wall_ms, $2 FROM ${s}.spend WHERE session_id = $3
      ON CONFLICT (tenant, session_id) DO UPDATE SET tokens = t.tokens + EXCLUDED.tokens,
        cost_usd = t.cost_usd + EXCLUDED.cost_usd, model_calls = t.model_calls + EXCLUDED.model_calls,
        tool_calls = t.tool_calls + EXCLUDED.tool_calls, wall_ms = t.wall_ms + EXCLUDED.wall_ms,
        updated_at = EXCLUDED.updated_at`,
    deleteSpend: `DELETE FROM ${s}.spend WHERE session_id = $1`,
    tenantSpend: `SELECT coalesce(sum(tokens), 0)::float8 AS tokens, coalesce(sum(cost_usd), 0)::float8 AS cost_usd,
        coalesce(sum(model_calls), 0)::float8 AS model_calls, coalesce(sum(tool_calls), 0)::float8 AS tool_calls,
        coalesce(sum(wall_ms), 0)::float8 AS wall_ms,
        count(CASE WHEN session_id <> $1 THEN 1 END)::int AS sessions
      FROM ${s}.spend WHERE tenant = $2`,
    insertSession: `INSERT INTO ${s}.sessions (id, header) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING RETURNING key`,
    listSessions: `SELECT id, header FROM ${s}.sessions ORDER BY id COLLATE "C"`,
    lockSession: `SELECT key FROM ${s}.sessions WHERE id = $1 FOR NO KEY UPDATE`,
    lockSessionForErase: `SELECT key FROM ${s}.sessions WHERE id = $1 FOR UPDATE`,
    eventsFrom: `SELECT seq, type, time, data, surface_op, source_event_seqs, ignorable FROM ${s}.events WHERE session_key = $1 AND seq >= $2 AND seq < $3 ORDER BY seq`,
    batchesFrom: `SELECT op, first_seq, last_seq FROM ${s}.batches WHERE session_key = $1 AND last_seq >= $2 AND first_seq < $3 ORDER BY first_seq`,
    eventsAt: `SELECT seq, type, time, data, surface_op, source_event_seqs, ignorable FROM ${s}.events WHERE session_key = $1 AND seq = ANY($2::bigint[]) ORDER BY seq`,
    // anchor.ts RelationalDigest, as text and as the SHA-256 of each (hashed here, so 64 bytes
    // cross the wire instead of the text).
    digestText: digestStatement(s, (text) => `coalesce(${text}, '')`),
    // The text of no records hashes as nothing; each record's text ends with chr(30).
    digestHashes: digestStatement(s, (text) => `sha256(convert_to(coalesce(${text} || chr(30), ''), 'UTF8'))`),
    insertEvents: `
      INSERT INTO ${s}.events (session_key, seq, type, time, data, surface_op, source_event_seqs, ignorable, search)
      SELECT $1, seq, type, time, data, surface_op, sources, ignorable, to_tsvector('simple', body)
      FROM unnest($2::bigint[], $3::text[], $4::bigint[], $5::text[], $6::text[], $7::text[], $8::boolean[], $9::text[])
        AS row (seq, type, time, data, surface_op, sources, ignorable, body)`,
    // Both name the partial index's predicate literally, so the planner can use it.
    unindexedOfSession: `
      SELECT session_key, seq, type, data FROM ${s}.events
      WHERE search IS NULL AND type IN (${SEARCHABLE_TYPES_SQL}) AND session_key = $1 AND seq > $2
      ORDER BY seq LIMIT ${INDEX_PAGE_ROWS}`,
    unindexedAfter: `
      SELECT session_key, seq, type, data FROM ${s}.events
      WHERE search IS NULL AND type IN (${SEARCHABLE_TYPES_SQL}) AND (session_key, seq) > ($1, $2)
      ORDER BY session_key, seq LIMIT ${INDEX_PAGE_ROWS}`,
    setSearch: `
      UPDATE ${s}.events e SET search = to_tsvector('simple', u.body)
      FROM unnest($1::bigint[], $2::bigint[], $3::text[]) AS u (session_key, seq, body)
      WHERE e.session_key = u.session_key AND e.seq = u.seq AND e.search IS NULL`,
    // ts_rank normalisation 1 divides by 1 + log(document length); ties go to the later event.
    search: `
      SELECT seq, ts_rank(search, query, 1) AS score
      FROM ${s}.events, plainto_tsquery('simple', $2) AS query
      WHERE session_key = $1 AND search @@ query AND seq < $3
      ORDER BY score DESC, seq DESC LIMIT $4`,
    insertBatch: `INSERT INTO ${s}.batches (session_key, op, first_seq, last_seq) VALUES ($1, $2, $3, $4)`,
    notify: `SELECT pg_notify($1, $2)`,
    insertArtifact: `INSERT INTO ${s}.artifacts (session_key, name, content) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`,
    artifact: `SELECT a.content FROM ${s}.artifacts a JOIN ${s}.sessions s ON s.key = a.session_key WHERE s.id = $1 AND a.name = $2`,
    cacheGet: `SELECT c.record FROM ${s}.projection_cache c JOIN ${s}.sessions s ON s.key = c.session_key WHERE s.id = $1`,
    cachePut: `INSERT INTO ${s}.projection_cache (session_key, record) VALUES ($1, $2) ON CONFLICT (session_key) DO UPDATE SET record = excluded.record`,
    tombstone: `SELECT erased_at, until FROM ${s}.tombstones WHERE id = $1`,
    putTombstone: `INSERT INTO ${s}.tombstones (id, erased_at, until) VALUES ($1, $2, $3) ON CONFLICT (id) DO UPDATE SET erased_at = excluded.erased_at, until = excluded.until`,
    dropExpiredTombstones: `DELETE FROM ${s}.tombstones WHERE until <= $1`,
    deleteEvents: `DELETE FROM ${s}.events WHERE session_key = $1`,
    deleteBatches: `DELETE FROM ${s}.batches WHERE session_key = $1`,
    deleteArtifacts: `DELETE FROM ${s}.artifacts WHERE session_key = $1`,
    deleteCache: `DELETE FROM ${s}.projection_cache WHERE session_key = $1`,
    deleteTranscripts: `DELETE FROM ${s}.transcripts WHERE session_key = $1`,
    deleteSession: `DELETE FROM ${s}.sessions WHERE key = $1`,
    // The schema is part of the lock's key: stores in other schemas do not wait for each other.
    lockSessionId: `SELECT pg_advisory_xact_lock(hashtextextended('${s}.' || $1, 0))`,
    insertInbox: `INSERT INTO ${s}.inbox (session_id, key, body, bytes, digest, stored_at) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING`,
    inboxEntry: `SELECT key, bytes, digest, stored_at FROM ${s}.inbox WHERE session_id = $1 AND key = $2`,
    inboxBody: `SELECT body FROM ${s}.inbox WHERE session_id = $1 AND key = $2`,
    listInbox: `SELECT key, bytes, digest, stored_at FROM ${s}.inbox WHERE session_id = $1 ORDER BY stored_at, key COLLATE "C"`,
    deleteInboxEntries: `DELETE FROM ${s}.inbox WHERE session_id = $1 AND key = ANY($2::text[])`,
    deleteInbox: `DELETE FROM ${s}.inbox WHERE session_id = $1`,
    insertSessionKey: `INSERT INTO ${s}.session_keys (session_id, key_id, key, created_at) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`,
    sessionKey: `SELECT key_id, key FROM ${s}.session_keys WHERE session_id = $1`,
    deleteSessionKey: `DELETE FROM ${s}.session_keys WHERE session_id = $1`,
    upsertTranscript: `
      INSERT INTO ${s}.transcripts (scope, digest, session_key, seq)
      SELECT $1::text, $2::text, key, $3::bigint FROM ${s}.sessions WHERE id = $4
      ON CONFLICT (scope, digest) DO UPDATE SET session_key = excluded.session_key, seq = excluded.seq`,
    transcript: `SELECT s.id AS session_id, t.seq FROM ${s}.transcripts t JOIN ${s}.sessions s ON s.key = t.session_key WHERE t.scope = $1 AND t.digest = $2`,
  };
}

type Statements = ReturnType<typeof statements>;

type InboxQueryRow = { key: string; bytes: number; digest: string; stored_at: number };

type SessionHeadQueryRow = driver.SessionRow & { last_event: number | null; last_batch: number | null };

/** Something that runs queries: the pool, or a client inside a transaction. */
type Queryable = Pick<PoolClient, 'query'>;

/** A second connection lent to a read transaction's statements, or undefined when none is to be had at once. */
type SpareConnection = () => Promise<PoolClient> | undefined;

/** Connections in a store's pool (node-postgres's default, set explicitly: the spare's check reads it back). */
const POOL_SIZE = 10;

/**
 * Keeps a checked-out connection's 'error' heard until it is released: one that breaks between
 * statements (the server restarted or was killed) emits 'error', which the pool no longer listens
 * to; unheard, it would crash the process. The next statement on it fails and says why; that is
 * enough. The returned `release` gives it back, discarded when given an error.
 */
function checkedOut(client: PoolClient): (error?: Error) => void {
  const onBroken = (): void => undefined;
  client.on('error', onBroken);
  return (error) => {
    client.off('error', onBroken);
    client.release(error);
  };
}

/** SQLSTATE of a foreign key violation. */
const FOREIGN_KEY_VIOLATION = '23503';

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

function unavailableKind(error: unknown): 'lock' | 'server' | undefined {
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
function scrub(message: string, password: string | undefined): string {
  return password && password.length >= 3 ? message.split(password).join('***') : message;
}

// ---------------------------------------------------------------------------------------------

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

/**
 * A connection pool for the statements and one connection that listens for other processes'
 * appends. A body runs on one pooled connection inside its transaction, or on the pool
 * statement by statement (`single`).
 */
class PostgresDriver implements driver.RelationalDriver {
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

  /** Creates the schema, or checks its version and upgrades it, in one transaction under an advisory lock. */
  async initializeSchema(): Promise<void> {
    const s = quoteIdent(this.schema);
    await this.transaction('write', async (client) => {
      await client.query(`SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, [`sessionlog:schema:${this.schema}`]);
      const exists = await client.query(`SELECT 1 FROM pg_namespace WHERE nspname = $1`, [this.schema]);
      // Only create when missing: CREATE SCHEMA IF NOT EXISTS needs CREATE on the database even when it exists.
      if (exists.rowCount === 0) await client.query(`CREATE SCHEMA ${s}`);
      const tables = await client.query<{ name: string }>(
        `SELECT tablename AS name FROM pg_tables WHERE schemaname = $1`,
        [this.schema],
      );
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
        throw new SessionlogError(
          'CORRUPT_LOG',
          `PostgreSQL schema ${this.schema} has an empty schema_version table; restore it from a backup`,
        );
      }
      if (version > POSTGRES_SCHEMA_VERSION) {
        throw new SessionlogError(
          'UNSUPPORTED_FORMAT',
          `PostgreSQL schema ${this.schema} has schema version ${version}, written by a newer version of sessionlog (this build reads version ${POSTGRES_SCHEMA_VERSION}); upgrade sessionlog to open it`,
        );
      }
      if (version < 1) {
        throw new SessionlogError(
          'UNSUPPORTED_FORMAT',
          `PostgreSQL schema ${this.schema} has schema version ${version}, older than this build reads, and there is no upgrade path`,
        );
      }
      // Version 2 adds the tombstones of erased sessions, version 3 the search column, version 4
      // the inbox and the session keys, version 5 the transcript index.
      if (version < 2) await client.query(tombstonesDdl(s));
      if (version < 3) {
        await client.query(`ALTER TABLE ${s}.events ADD COLUMN search tsvector`);
        await client.query(unindexedIndexDdl(s));
        await this.statementsOn(client).indexUnindexed(undefined);
        // Built after the backfill: one pass over the filled column instead of one insert per row.
        await client.query(searchIndexDdl(s));
      }
      if (version < 4) await client.query(inboxDdl(s));
      if (version < 5) await client.query(transcriptsDdl(s));
      if (version < 6) await client.query(pacingDdl(s));
      // Version 7 adds the spend rows (what a session spent before it is not in them).
      if (version < 7) await client.query(spendDdl(s));
      if (version < POSTGRES_SCHEMA_VERSION)
        await client.query(`UPDATE ${s}.schema_version SET version = $1`, [POSTGRES_SCHEMA_VERSION]);
      await this.ensureBatchStartsIndex(client, s);
    });
  }

  /**
   * Makes `batches_by_first_seq` where a schema lacks it. Looked up first: CREATE INDEX IF NOT
   * EXISTS takes the table's lock before it checks. A role that may not create it (not the
   * table's owner) opens the store all the same, inside a savepoint: anchored reads are then only
   * slower.
   */
  private async ensureBatchStartsIndex(client: PoolClient, s: string): Promise<void> {
    const found = await client.query<{ present: boolean }>(`SELECT to_regclass($1) IS NOT NULL AS present`, [
      `${s}.${BATCH_STARTS_INDEX}`,
    ]);
    if (found.rows[0]!.present) return;
    await client.query('SAVEPOINT batch_starts_index');
    try {
      await client.query(batchStartsDdl(s));
      await client.query('RELEASE SAVEPOINT batch_starts_index');
    } catch {
      await client.query('ROLLBACK TO SAVEPOINT batch_starts_index');
    }
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

/** One chunk's digest statement (`digestHashes` or `digestText`) on `db`. */
async function digestChunk(
  db: Queryable,
  sql: Statements,
  key: number,
  range: driver.SeqRange,
  hashed: boolean,
): Promise<driver.PrefixDigestChunk> {
  type Row = { rows_text: Uint8Array | string; batches_text: Uint8Array | string; rows: number; misplaced: number };
  const row = (await db.query<Row>(hashed ? sql.digestHashes : sql.digestText, [key, range.from, range.to])).rows[0]!;
  const counts = { rows: row.rows, misplaced: row.misplaced };
  return hashed
    ? { hashed, rowsDigest: row.rows_text as Uint8Array, batchesDigest: row.batches_text as Uint8Array, ...counts }
    : { hashed, rowsText: row.rows_text, batchesText: row.batches_text, ...counts };
}

/**
 * Runs `hashOn` on a lent connection and gives the connection back; never fails. A connection that
 * could not be had, or failed a statement, leaves its chunks to the reader's own connection (a
 * failed one is discarded, not reused).
 */
async function hashOnSpare(lent: Promise<PoolClient>, hashOn: (db: Queryable) => Promise<void>): Promise<void> {
  let client: PoolClient;
  try {
    client = await lent;
  } catch {
    return;
  }
  const release = checkedOut(client);
  let broken: Error | undefined;
  try {
    await hashOn(client);
  } catch (error) {
    broken = error as Error;
  }
  release(broken);
}

/** The statements of the relational core in PostgreSQL's dialect, on a pooled connection or the pool. */
class PostgresStatements implements driver.RelationalTx {
  constructor(
    private readonly db: Queryable,
    private readonly sql: Statements,
    private readonly channel: string,
    private readonly location: string,
    /** Where a read transaction may borrow a second connection ({@link wholeChunkDigests}). */
    private readonly spare?: SpareConnection,
  ) {}

  async sessionHead(id: string): Promise<driver.SessionHeadRow | undefined> {
    const row = (await this.db.query<SessionHeadQueryRow>(this.sql.sessionHead, [id])).rows[0];
    return row && { key: row.key, header: row.header, head: storedHead(row.last_event, row.last_batch) };
  }

  async sessionRow(id: string): Promise<driver.SessionRow | undefined> {
    return (await this.db.query<driver.SessionRow>(this.sql.sessionById, [id])).rows[0];
  }

  async listSessions(): Promise<Array<{ id: string; header: string }>> {
    return (await this.db.query<{ id: string; header: string }>(this.sql.listSessions, [])).rows;
  }

  async insertSession(id: string, header: string): Promise<boolean> {
    return (await this.db.query(this.sql.insertSession, [id, header])).rowCount === 1;
  }

  /** `FOR NO KEY UPDATE`: serializes the session's writers across hosts without blocking artifact writes. */
  async lockSession(id: string): Promise<boolean> {
    return ((await this.db.query(this.sql.lockSession, [id])).rowCount ?? 0) > 0;
  }

  async lockSessionForErase(id: string): Promise<number | undefined> {
    return (await this.db.query<{ key: number }>(this.sql.lockSessionForErase, [id])).rows[0]?.key;
  }

  async rowsFrom(key: number, from: number, to: number): Promise<driver.StoredRows> {
    const events = (await this.db.query<EventRow>(this.sql.eventsFrom, [key, from, to])).rows;
    const batches = (await this.db.query<BatchRow>(this.sql.batchesFrom, [key, from, to])).rows;
    return { events, batches };
  }

  async rowsAt(key: number, seqs: readonly number[]): Promise<EventRow[]> {
    return (await this.db.query<EventRow>(this.sql.eventsAt, [key, seqs])).rows;
  }

  prefixDigest(key: number, from: number, to: number, hashed: boolean): Promise<driver.PrefixDigestChunk> {
    return digestChunk(this.db, this.sql, key, { from, to }, hashed);
  }

  /**
   * Hashes the chunks on this connection and, when the pool lends a second one at once, on that
   * one too: the server hashes two chunks at a time (BENCHMARKS.md, "Cold reads through the
   * checkpoint"). The second connection reads outside this transaction's snapshot. That is sound
   * for a prefix: its rows are never changed once written, only deleted with the whole session,
   * and a session deleted meanwhile shows as missing rows, so the read is a miss. A chunk the
   * second connection fails on is hashed here after all.
   */
  async wholeChunkDigests(key: number, ranges: readonly driver.SeqRange[]): Promise<driver.PrefixDigestChunk[]> {
    const chunks: Array<driver.PrefixDigestChunk | undefined> = new Array(ranges.length);
    let next = 0;
    const hashOn = async (db: Queryable): Promise<void> => {
      while (next < ranges.length) {
        const at = next++;
        chunks[at] = await digestChunk(db, this.sql, key, ranges[at]!, true);
      }
    };
    const lent = ranges.length > 1 ? this.spare?.() : undefined;
    const spare = lent && hashOnSpare(lent, hashOn);
    try {
      await hashOn(this.db);
    } catch (error) {
      next = ranges.length;
      throw error;
    }
    // Waited for only while it holds a chunk: a spare still connecting when every chunk is taken
    // finds none left and goes back to the pool by itself (hashOnSpare never fails).
    if (spare && chunks.includes(undefined)) await spare;
    for (let at = 0; at < ranges.length; at++)
      chunks[at] ??= await digestChunk(this.db, this.sql, key, ranges[at]!, true);
    return chunks as driver.PrefixDigestChunk[];
  }

  async insertBatch(key: number, id: string, events: readonly StoredEvent[], op: string): Promise<void> {
    const rows = events.map(encodeEvent);
    await this.db.query(this.sql.insertEvents, [
      key,
      rows.map((r) => r.seq),
      rows.map((r) => r.type),
      rows.map((r) => r.time),
      rows.map((r) => r.data),
      rows.map((r) => r.surfaceOp),
      rows.map((r) => r.sourceEventSeqs),
      rows.map((r) => r.ignorable),
      events.map((event) => indexText(event) ?? null),
    ]);
    await this.db.query(this.sql.insertBatch, [key, op, events[0]!.seq, events[events.length - 1]!.seq]);
    // Delivered to listeners when (and only if) the transaction commits.
    await this.db.query(this.sql.notify, [this.channel, id]);
  }

  async deleteSession(key: number, id: string): Promise<driver.SessionRemoval> {
    const removed = {
      transcripts: (await this.db.query(this.sql.deleteTranscripts, [key])).rowCount ?? 0,
      events: (await this.db.query(this.sql.deleteEvents, [key])).rowCount ?? 0,
      batches: (await this.db.query(this.sql.deleteBatches, [key])).rowCount ?? 0,
      artifacts: (await this.db.query(this.sql.deleteArtifacts, [key])).rowCount ?? 0,
      projection_cache: (await this.db.query(this.sql.deleteCache, [key])).rowCount ?? 0,
      sessions: (await this.db.query(this.sql.deleteSession, [key])).rowCount ?? 0,
    };
    // Watchers of the session wake up and find it gone.
    await this.db.query(this.sql.notify, [this.channel, id]);
    return {
      removed: {
        header: removed.sessions,
        events: removed.events,
        artifacts: removed.artifacts,
        projectionCheckpoints: removed.projection_cache,
        transcriptEntries: removed.transcripts,
      },
      places: Object.entries(removed).map(([table, n]) => ({ place: `${this.location} table ${table}`, removed: n })),
      notes: [],
    };
  }

  async tombstone(id: string): Promise<driver.Tombstone | undefined> {
    const row = (await this.db.query<{ erased_at: number; until: number }>(this.sql.tombstone, [id])).rows[0];
    return row && { erasedAt: row.erased_at, until: row.until };
  }

  async putTombstone(id: string, tombstone: driver.Tombstone): Promise<void> {
    await this.db.query(this.sql.putTombstone, [id, tombstone.erasedAt, tombstone.until]);
  }

  async dropExpiredTombstones(now: number): Promise<void> {
    await this.db.query(this.sql.dropExpiredTombstones, [now]);
  }

  /** As bytea: UTF-8, since `text` cannot hold NUL. */
  async insertArtifact(key: number, name: string, content: string): Promise<boolean> {
    return (await this.db.query(this.sql.insertArtifact, [key, name, Buffer.from(content, 'utf8')])).rowCount === 1;
  }

  async artifactContent(id: string, name: string): Promise<string | undefined> {
    const row = (await this.db.query<{ content: Buffer }>(this.sql.artifact, [id, name])).rows[0];
    return row?.content.toString('utf8');
  }

  async projectionRecord(id: string): Promise<string | undefined> {
    return (await this.db.query<{ record: string }>(this.sql.cacheGet, [id])).rows[0]?.record;
  }

  async putProjectionRecord(key: number, record: string): Promise<void> {
    await this.db.query(this.sql.cachePut, [key, record]);
  }

  async lockSessionId(id: string): Promise<void> {
    await this.db.query(this.sql.lockSessionId, [id]);
  }

  /** The body as UTF-8 bytea, since `text` cannot hold NUL. */
  async insertInboxEntry(id: string, row: driver.InboxRow): Promise<boolean> {
    const values = [id, row.key, Buffer.from(row.body, 'utf8'), row.bytes, row.digest, row.storedAt];
    return (await this.db.query(this.sql.insertInbox, values)).rowCount === 1;
  }

  async inboxEntry(id: string, key: string): Promise<InboxEntry | undefined> {
    const row = (await this.db.query<InboxQueryRow>(this.sql.inboxEntry, [id, key])).rows[0];
    return row && { key: row.key, bytes: row.bytes, digest: row.digest, storedAt: row.stored_at };
  }

  async inboxBody(id: string, key: string): Promise<string | undefined> {
    const row = (await this.db.query<{ body: Buffer }>(this.sql.inboxBody, [id, key])).rows[0];
    return row?.body.toString('utf8');
  }

  async listInbox(id: string): Promise<InboxEntry[]> {
    return (await this.db.query<InboxQueryRow>(this.sql.listInbox, [id])).rows.map((row) => ({
      key: row.key,
      bytes: row.bytes,
      digest: row.digest,
      storedAt: row.stored_at,
    }));
  }

  async deleteInboxEntries(id: string, keys: readonly string[]): Promise<number> {
    return (await this.db.query(this.sql.deleteInboxEntries, [id, keys])).rowCount ?? 0;
  }

  async deleteInbox(id: string): Promise<ErasedPlace> {
    const removed = (await this.db.query(this.sql.deleteInbox, [id])).rowCount ?? 0;
    return { place: `${this.location} table inbox`, removed };
  }

  async insertSessionKey(id: string, key: SessionKey, createdAt: number): Promise<void> {
    await this.db.query(this.sql.insertSessionKey, [id, key.id, key.key, createdAt]);
  }

  async sessionKey(id: string): Promise<{ keyId: unknown; key: unknown } | undefined> {
    const row = (await this.db.query<{ key_id: unknown; key: unknown }>(this.sql.sessionKey, [id])).rows[0];
    return row && { keyId: row.key_id, key: row.key };
  }

  async deleteSessionKey(id: string): Promise<ErasedPlace> {
    const removed = (await this.db.query(this.sql.deleteSessionKey, [id])).rowCount ?? 0;
    return { place: `${this.location} table session_keys`, removed };
  }

  /**
   * An erasure of the session that committed while the upsert waited for its row lock deleted
   * the row the upsert was about to reference: a foreign key violation, which means the same as
   * finding no session.
   */
  async upsertTranscriptEntry(scope: string, digest: string, entry: TranscriptEntry): Promise<boolean> {
    try {
      const values = [scope, digest, entry.seq, entry.sessionId];
      return (await this.db.query(this.sql.upsertTranscript, values)).rowCount === 1;
    } catch (error) {
      if ((error as { code?: unknown } | null)?.code === FOREIGN_KEY_VIOLATION) return false;
      throw error;
    }
  }

  async lockPaceRow(key: string): Promise<string | undefined> {
    await this.db.query(this.sql.insertPaceRow, [key]);
    const row = (await this.db.query<{ state: string | null }>(this.sql.lockPaceRow, [key])).rows[0];
    return row?.state ?? undefined;
  }

  async putPaceRow(key: string, state: string, now: number): Promise<void> {
    await this.db.query(this.sql.putPaceRow, [key, state, now]);
  }

  async addSpend(tenant: string, id: string, spent: SpendTotals, now: number): Promise<void> {
    await this.db.query(this.sql.addSpend, [tenant, id, ...spendColumns(spent), now]);
  }

  async retireSpend(id: string, now: number): Promise<void> {
    await this.db.query(this.sql.foldErasedSpend, [ERASED_SPEND_ROW, now, id]);
    await this.db.query(this.sql.deleteSpend, [id]);
  }

  async tenantSpend(tenant: string): Promise<TenantSpend> {
    const row = (
      await this.db.query<{
        tokens: number;
        cost_usd: number;
        model_calls: number;
        tool_calls: number;
        wall_ms: number;
        sessions: number;
      }>(this.sql.tenantSpend, [ERASED_SPEND_ROW, tenant])
    ).rows[0]!;
    return {
      tokens: row.tokens,
      costUsd: row.cost_usd,
      modelCalls: row.model_calls,
      toolCalls: row.tool_calls,
      wallMs: row.wall_ms,
      sessions: row.sessions,
    };
  }

  async transcriptEntry(scope: string, digest: string): Promise<{ sessionId: unknown; seq: unknown } | undefined> {
    const row = (await this.db.query<{ session_id: unknown; seq: unknown }>(this.sql.transcript, [scope, digest]))
      .rows[0];
    return row && { sessionId: row.session_id, seq: row.seq };
  }

  /**
   * Fills `search` for text events stored without it: every such event of the session `key`, or
   * of every session (the upgrade to version 3), a page at a time. A row whose data does not
   * decode gets an empty vector, so it is not read again: its session is refused as CORRUPT_LOG by
   * every read, search included.
   */
  async indexUnindexed(key: number | undefined): Promise<void> {
    type Row = { session_key: number; seq: number; type: string; data: string };
    let after = { key: key ?? -1, seq: -1 };
    for (;;) {
      const rows =
        key === undefined
          ? (await this.db.query<Row>(this.sql.unindexedAfter, [after.key, after.seq])).rows
          : (await this.db.query<Row>(this.sql.unindexedOfSession, [key, after.seq])).rows;
      if (rows.length === 0) return;
      const bodies = rows.map((row) => {
        let data: unknown;
        try {
          data = JSON.parse(row.data);
        } catch {
          // Damaged row: nothing to index (see above).
          return '';
        }
        return indexText({ type: row.type, data }) ?? '';
      });
      await this.db.query(this.sql.setSearch, [rows.map((row) => row.session_key), rows.map((row) => row.seq), bodies]);
      const last = rows[rows.length - 1]!;
      after = { key: last.session_key, seq: last.seq };
    }
  }

  /** The search candidates of session `key` below `head`, best first. */
  async search(key: number, words: string, head: number, limit: number): Promise<RankedSeq[]> {
    return (await this.db.query<RankedSeq>(this.sql.search, [key, words, head, limit])).rows;
  }
}

// ---------------------------------------------------------------------------------------------
// LISTEN/NOTIFY

/**
 * One dedicated connection per store that `LISTEN`s on the store's channel and fans each
 * notification (payload: a session id) out to that session's watchers. A lost connection
 * wakes every watcher (they re-read) and is re-established on the next watcher poll.
 */
class NotificationListener implements RemoteAppends {
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
  listen(): Promise<void> {
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

function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}
