/** The statements of the relational core in PostgreSQL's dialect, on a pooled connection or the pool (the tables: schema.ts). */
import type { PoolClient } from 'pg';
import { type SpendTotals, type StoredEvent } from '../../../session/index.js';
import { ERASED_SPEND_ROW, type TenantSpend } from '../../spend.js';
import { indexText, type RankedSeq } from '../../search.js';
import { type ErasedPlace, type InboxEntry, type SessionKey, type TranscriptEntry } from '../../store.js';
import { spendColumns } from '../driver.js';
import type * as driver from '../driver.js';
import { encodeEvent, storedHead, type BatchRow, type EventRow } from '../rows.js';
import { SEARCHABLE_TYPES_SQL, INDEX_PAGE_ROWS } from './schema.js';

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
export function digestStatement(s: string, out: (text: string) => string): string {
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

export function statements(s: string) {
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
    insertMedia: `INSERT INTO ${s}.media (session_key, name, content) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`,
    media: `SELECT m.content FROM ${s}.media m JOIN ${s}.sessions s ON s.key = m.session_key WHERE s.id = $1 AND m.name = $2`,
    deleteMedia: `DELETE FROM ${s}.media WHERE session_key = $1`,
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

export type Statements = ReturnType<typeof statements>;

export type InboxQueryRow = { key: string; bytes: number; digest: string; stored_at: number };

type SessionHeadQueryRow = driver.SessionRow & { last_event: number | null; last_batch: number | null };

/** Something that runs queries: the pool, or a client inside a transaction. */
export type Queryable = Pick<PoolClient, 'query'>;

/** A second connection lent to a read transaction's statements, or undefined when none is to be had at once. */
export type SpareConnection = () => Promise<PoolClient> | undefined;

/**
 * Keeps a checked-out connection's 'error' heard until it is released: one that breaks between
 * statements (the server restarted or was killed) emits 'error', which the pool no longer listens
 * to; unheard, it would crash the process. The next statement on it fails and says why; that is
 * enough. The returned `release` gives it back, discarded when given an error.
 */
export function checkedOut(client: PoolClient): (error?: Error) => void {
  const onBroken = (): void => undefined;
  client.on('error', onBroken);
  return (error) => {
    client.off('error', onBroken);
    client.release(error);
  };
}

/** SQLSTATE of a foreign key violation. */
const FOREIGN_KEY_VIOLATION = '23503';

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
export class PostgresStatements implements driver.RelationalTx {
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
      media: (await this.db.query(this.sql.deleteMedia, [key])).rowCount ?? 0,
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
        media: removed.media,
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

  async insertMedia(key: number, name: string, content: Uint8Array): Promise<boolean> {
    return (
      (
        await this.db.query(this.sql.insertMedia, [
          key,
          name,
          Buffer.from(content.buffer, content.byteOffset, content.byteLength),
        ])
      ).rowCount === 1
    );
  }

  async mediaContent(id: string, name: string): Promise<Uint8Array | undefined> {
    const content = (await this.db.query<{ content: Buffer }>(this.sql.media, [id, name])).rows[0]?.content;
    return content && new Uint8Array(content.buffer, content.byteOffset, content.byteLength);
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
