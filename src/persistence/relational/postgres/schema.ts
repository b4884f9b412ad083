/**
 * The PostgreSQL backend's storage format (DESIGN §4): the schema, its upgrades as named migrations
 * (`POSTGRES_MIGRATIONS`), and how a store uses it (the store is store.ts, the driver driver.ts,
 * the statements statements.ts, `LISTEN/NOTIFY` listener.ts).
 *
 * Storage format (schema version {@link POSTGRES_SCHEMA_VERSION}, in one PostgreSQL schema named
 * by the URL's `?schema=` parameter, default `sessionlog`; a schema whose `schema_version` is
 * newer is refused; versions 1 to 4 are upgraded in place when a store opens, in the schema
 * transaction: version 2 adds the `tombstones` table, version 3 the `search` column, filled from
 * every stored event, and its indexes, version 4 the `inbox` and `session_keys` tables, version 5
 * the `transcripts` table, version 6 the `pacing` table, version 7 the `spend` table, version 8 the
 * `media` table):
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
import type { PoolClient } from 'pg';
import { SessionlogError } from '../../../session/index.js';
import { SEARCHABLE_EVENT_TYPES } from '../../search.js';
import type { PostgresStatements } from './statements.js';

/** The `schema_version` this build writes and reads. */
export const POSTGRES_SCHEMA_VERSION = 8;

/** The schema used when the URL has no `?schema=` parameter. */
export const POSTGRES_DEFAULT_SCHEMA = 'sessionlog';

/** A plain, unquoted-safe identifier; short enough that the notification channel name fits in 63 bytes. */
export const SCHEMA_NAME_PATTERN = /^[a-z_][a-z0-9_]{0,47}$/;

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
export const SEARCHABLE_TYPES_SQL = SEARCHABLE_EVENT_TYPES.map((type) => `'${type}'`).join(', ');

/** Rows per page when indexing events stored without their `search` value. */
export const INDEX_PAGE_ROWS = 1000;

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

/**
 * Version 8: the media (issue 50), one row per distinct content of a session, `name`
 * `media-<sha256>.<ext>`, `content` the bytes.
 */
function mediaDdl(s: string): string {
  return `
CREATE TABLE ${s}.media (
  session_key bigint NOT NULL REFERENCES ${s}.sessions(key),
  name text NOT NULL,
  content bytea NOT NULL,
  PRIMARY KEY (session_key, name)
);`;
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
${mediaDdl(s)}
`;
}

/** One schema upgrade: what version `version` adds, applied to a schema at an older version. */
type PostgresMigration = {
  version: number;
  name: string;
  up(client: PoolClient, context: { s: string; statements: PostgresStatements }): Promise<unknown>;
};

/** The upgrades, in version order; each whose version is above the schema's runs, all in the schema transaction. */
const POSTGRES_MIGRATIONS: readonly PostgresMigration[] = [
  { version: 2, name: 'the tombstones of erased sessions', up: (client, { s }) => client.query(tombstonesDdl(s)) },
  {
    version: 3,
    name: 'the search column, filled from every stored event, and its indexes',
    up: async (client, { s, statements }) => {
      await client.query(`ALTER TABLE ${s}.events ADD COLUMN search tsvector`);
      await client.query(unindexedIndexDdl(s));
      await statements.indexUnindexed(undefined);
      // Built after the backfill: one pass over the filled column instead of one insert per row.
      await client.query(searchIndexDdl(s));
    },
  },
  { version: 4, name: 'the inbox and the session keys', up: (client, { s }) => client.query(inboxDdl(s)) },
  { version: 5, name: 'the transcript index', up: (client, { s }) => client.query(transcriptsDdl(s)) },
  { version: 6, name: 'the provider pacing buckets', up: (client, { s }) => client.query(pacingDdl(s)) },
  {
    version: 7,
    name: 'the spend rows (what a session spent before it is not in them)',
    up: (client, { s }) => client.query(spendDdl(s)),
  },
  { version: 8, name: 'the media of sessions', up: (client, { s }) => client.query(mediaDdl(s)) },
];

/**
 * Creates the schema `schema`, or checks its version and upgrades it ({@link POSTGRES_MIGRATIONS}),
 * on `client` inside the caller's transaction, under an advisory lock so concurrent first opens
 * do not race. `statements` run on the same client (an upgrade indexes stored events).
 */
export async function initializeSchema(
  client: PoolClient,
  schema: string,
  statements: PostgresStatements,
): Promise<void> {
  const s = quoteIdent(schema);
  await client.query(`SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, [`sessionlog:schema:${schema}`]);
  const exists = await client.query(`SELECT 1 FROM pg_namespace WHERE nspname = $1`, [schema]);
  // Only create when missing: CREATE SCHEMA IF NOT EXISTS needs CREATE on the database even when it exists.
  if (exists.rowCount === 0) await client.query(`CREATE SCHEMA ${s}`);
  const tables = await client.query<{ name: string }>(`SELECT tablename AS name FROM pg_tables WHERE schemaname = $1`, [
    schema,
  ]);
  const names = new Set(tables.rows.map((row) => row.name));
  if (!names.has('schema_version')) {
    if (names.size > 0) {
      throw new SessionlogError(
        'INVALID_ARGUMENT',
        `PostgreSQL schema ${schema} holds tables of another application (no sessionlog schema_version table); pick another schema with ?schema=NAME`,
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
      `PostgreSQL schema ${schema} has an empty schema_version table; restore it from a backup`,
    );
  }
  if (version > POSTGRES_SCHEMA_VERSION) {
    throw new SessionlogError(
      'UNSUPPORTED_FORMAT',
      `PostgreSQL schema ${schema} has schema version ${version}, written by a newer version of sessionlog (this build reads version ${POSTGRES_SCHEMA_VERSION}); upgrade sessionlog to open it`,
    );
  }
  if (version < 1) {
    throw new SessionlogError(
      'UNSUPPORTED_FORMAT',
      `PostgreSQL schema ${schema} has schema version ${version}, older than this build reads, and there is no upgrade path`,
    );
  }
  for (const migration of POSTGRES_MIGRATIONS)
    if (version < migration.version) await migration.up(client, { s, statements });
  if (version < POSTGRES_SCHEMA_VERSION)
    await client.query(`UPDATE ${s}.schema_version SET version = $1`, [POSTGRES_SCHEMA_VERSION]);
  await ensureBatchStartsIndex(client, s);
}

/**
 * Makes `batches_by_first_seq` where a schema lacks it. Looked up first: CREATE INDEX IF NOT
 * EXISTS takes the table's lock before it checks. A role that may not create it (not the
 * table's owner) opens the store all the same, inside a savepoint: anchored reads are then only
 * slower.
 */
async function ensureBatchStartsIndex(client: PoolClient, s: string): Promise<void> {
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

export function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}
