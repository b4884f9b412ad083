/** The statements of the relational core in SQLite's dialect (the tables are drawn in schema.ts). */
import Database from 'better-sqlite3';
import { SessionlogError, type SpendTotals, type StoredEvent } from '../../../session/index.js';
import { ERASED_SPEND_ROW, type TenantSpend } from '../../spend.js';
import { type RankedSeq } from '../../search.js';
import { type ErasedPlace, type InboxEntry, type SessionKey, type TranscriptEntry } from '../../store.js';
import { spendColumns } from '../driver.js';
import type * as driver from '../driver.js';
import { encodeEvent, storedHead, type BatchRow, type EventRow } from '../rows.js';
import {
  MAX_SEQ,
  EMPTY,
  SEARCHABLE_TYPES_SQL,
  SEARCH_INDEX_PAGE,
  INSERT_SEARCH,
  INSERT_SEARCH_ROW,
  wordsDigest,
  indexWords,
  storedRowWords,
  backfillSearchIndex,
} from './schema.js';

/** The statements of the relational core in SQLite's dialect, prepared once per connection. */
export class SqliteStatements implements driver.RelationalTx {
  private readonly sql: ReturnType<typeof prepareStatements>;

  constructor(
    private readonly db: Database.Database,
    private readonly location: string,
  ) {
    this.sql = prepareStatements(db);
  }

  sessionHead(id: string): driver.SessionHeadRow | undefined {
    const row = this.sql.sessionHead.get(id);
    return row && { key: row.key, header: row.header, head: storedHead(row.last_event, row.last_batch) };
  }

  sessionRow(id: string): driver.SessionRow | undefined {
    return this.sql.sessionById.get(id);
  }

  listSessions(): Array<{ id: string; header: string }> {
    return this.sql.listSessions.all();
  }

  insertSession(id: string, header: string): boolean {
    return this.sql.insertSession.run(id, header).changes === 1;
  }

  lockSession(): boolean {
    // BEGIN IMMEDIATE holds the database's write lock already.
    return true;
  }

  lockSessionForErase(id: string): number | undefined {
    return this.sql.sessionById.get(id)?.key;
  }

  /**
   * The rows of seqs `from` to `to` (exclusive) and the batches covering them: the batch that
   * starts before `from` (the nearest batch start below it) and those starting on the rows.
   */
  rowsFrom(key: number, from: number, to: number): driver.StoredRows {
    const events = this.sql.eventsFrom.all(key, from, key, to);
    const batches: BatchRow[] = [];
    const before = from > 0 ? this.sql.batchBefore.get(key, from, key) : undefined;
    if (before) batches.push(before);
    for (const row of events)
      if (row.batch_op !== null) batches.push({ op: row.batch_op, first_seq: row.seq, last_seq: row.batch_last_seq! });
    return { events, batches };
  }

  rowsAt(key: number, seqs: readonly number[]): EventRow[] {
    const rows: EventRow[] = [];
    for (const seq of seqs) {
      const row = this.sql.eventAt.get(key, seq);
      if (row) rows.push(row);
    }
    return rows;
  }

  /** Always the text: hashing it here or in the caller costs the same. */
  prefixDigest(key: number, from: number, to: number): driver.PrefixDigestChunk {
    const chunk = this.sql.digest.get(key, from, key, to)!;
    return {
      hashed: false,
      rowsText: chunk.text ?? EMPTY,
      batchesText: EMPTY,
      rows: chunk.rows,
      misplaced: chunk.misplaced,
    };
  }

  /** The batch's rows, its op and last seq on the first (indexed for search by the session's next search, not here). */
  insertBatch(key: number, _id: string, events: readonly StoredEvent[], op: string): void {
    const lastSeq = events[events.length - 1]!.seq;
    if (lastSeq > MAX_SEQ)
      throw new SessionlogError(
        'INVALID_ARGUMENT',
        `seq ${lastSeq} is past the SQLite store's limit of 2^32 events per session; continue in a fork`,
      );
    events.forEach((event, i) => {
      const row = encodeEvent(event);
      this.sql.insertEvent.run(
        key,
        row.seq,
        key,
        row.seq,
        row.type,
        row.time,
        row.data,
        row.surfaceOp,
        row.sourceEventSeqs,
        row.ignorable ? 1 : null,
        i === 0 ? op : null,
        i === 0 ? lastSeq : null,
      );
    });
  }

  /**
   * Counts and deletes the session's rows, and removes its words from the search index (see
   * {@link unindexSession}); when a row's words could not be given back, the whole index is
   * rebuilt from the other sessions, so none of the erased session's words stay.
   */
  deleteSession(key: number): driver.SessionRemoval {
    const counts = {
      events: this.sql.countEvents.get(key, key)!.n,
      artifacts: this.sql.countArtifacts.get(key)!.n,
      media: this.sql.countMedia.get(key)!.n,
      projection_cache: this.sql.countCache.get(key)!.n,
      transcripts: this.sql.countTranscripts.get(key)!.n,
    };
    const unindexed = this.unindexSession(key);
    this.sql.deleteTranscripts.run(key);
    this.sql.deleteEvents.run(key, key);
    this.sql.deleteArtifacts.run(key);
    this.sql.deleteMedia.run(key);
    this.sql.deleteCache.run(key);
    this.sql.deleteSession.run(key);
    if (!unindexed.exact) {
      this.db.exec(`INSERT INTO search (search) VALUES ('delete-all'); DELETE FROM search_rows;`);
      backfillSearchIndex(this.db);
    }
    return {
      removed: {
        header: 1,
        events: counts.events,
        artifacts: counts.artifacts,
        media: counts.media,
        projectionCheckpoints: counts.projection_cache,
        transcriptEntries: counts.transcripts,
      },
      places: [
        { place: `${this.location} table sessions`, removed: 1 },
        ...Object.entries({ ...counts, search: unindexed.rows }).map(([table, n]) => ({
          place: `${this.location} table ${table}`,
          removed: n,
        })),
      ],
      notes: unindexed.exact
        ? []
        : [
            'a text row of the session no longer had the words it was indexed with (damaged or edited in the file), so the whole search index was rebuilt from the remaining sessions: none of its words stay',
          ],
    };
  }

  /**
   * Removes session `key`'s words from the contentless index: each row's words are re-derived
   * from its event and given back to the index, if they still hash to the digest taken when the
   * row was indexed. `exact` is false when some row's could not be (a damaged or edited row):
   * the caller then rebuilds the whole index, since a contentless index cannot forget words it
   * is not given. `rows`: how many indexed rows the session had.
   */
  private unindexSession(key: number): { rows: number; exact: boolean } {
    const indexed = this.sql.indexedRows.all(key, key);
    let exact = true;
    for (const row of indexed) {
      const words = row.type === null || row.data === null ? undefined : storedRowWords(row.type, row.data);
      if (words !== undefined && wordsDigest(words).equals(row.digest)) this.sql.unindexSearch.run(row.rowid, words);
      else exact = false;
    }
    this.sql.deleteSearchRows.run(key, key);
    return { rows: indexed.length, exact };
  }

  tombstone(id: string): driver.Tombstone | undefined {
    const row = this.sql.tombstone.get(id);
    return row && { erasedAt: row.erased_at, until: row.until };
  }

  putTombstone(id: string, tombstone: driver.Tombstone): void {
    this.sql.putTombstone.run(id, tombstone.erasedAt, tombstone.until);
  }

  dropExpiredTombstones(now: number): void {
    this.sql.dropExpiredTombstones.run(now);
  }

  insertArtifact(key: number, name: string, content: string): boolean {
    return this.sql.insertArtifact.run(key, name, content).changes === 1;
  }

  artifactContent(id: string, name: string): string | undefined {
    return this.sql.artifact.get(id, name)?.content;
  }

  insertMedia(key: number, name: string, content: Uint8Array): boolean {
    return this.sql.insertMedia.run(key, name, content).changes === 1;
  }

  mediaContent(id: string, name: string): Uint8Array | undefined {
    const content = this.sql.media.get(id, name)?.content;
    return content && new Uint8Array(content.buffer, content.byteOffset, content.byteLength);
  }

  projectionRecord(id: string): string | undefined {
    return this.sql.cacheGet.get(id)?.record;
  }

  putProjectionRecord(key: number, record: string): void {
    this.sql.cachePut.run(key, record);
  }

  lockSessionId(): void {
    // BEGIN IMMEDIATE holds the database's write lock already.
  }

  insertInboxEntry(id: string, row: driver.InboxRow): boolean {
    return this.sql.insertInbox.run(id, row.key, row.body, row.bytes, row.digest, row.storedAt).changes === 1;
  }

  inboxEntry(id: string, key: string): InboxEntry | undefined {
    const row = this.sql.inboxEntry.get(id, key);
    return row && { key: row.key, bytes: row.bytes, digest: row.digest, storedAt: row.stored_at };
  }

  inboxBody(id: string, key: string): string | undefined {
    return this.sql.inboxBody.get(id, key)?.body;
  }

  listInbox(id: string): InboxEntry[] {
    return this.sql.listInbox
      .all(id)
      .map((row) => ({ key: row.key, bytes: row.bytes, digest: row.digest, storedAt: row.stored_at }));
  }

  deleteInboxEntries(id: string, keys: readonly string[]): number {
    let removed = 0;
    for (const key of keys) removed += this.sql.deleteInboxEntry.run(id, key).changes;
    return removed;
  }

  deleteInbox(id: string): ErasedPlace {
    return { place: `${this.location} table inbox`, removed: this.sql.deleteInbox.run(id).changes };
  }

  insertSessionKey(id: string, key: SessionKey, createdAt: number): void {
    this.sql.insertSessionKey.run(id, key.id, key.key, createdAt);
  }

  sessionKey(id: string): { keyId: unknown; key: unknown } | undefined {
    const row = this.sql.sessionKey.get(id);
    return row && { keyId: row.key_id, key: row.key };
  }

  deleteSessionKey(id: string): ErasedPlace {
    return { place: `${this.location} table session_keys`, removed: this.sql.deleteSessionKey.run(id).changes };
  }

  upsertTranscriptEntry(scope: string, digest: string, entry: TranscriptEntry): boolean {
    return this.sql.upsertTranscript.run(scope, digest, entry.seq, entry.sessionId).changes === 1;
  }

  lockPaceRow(key: string): string | undefined {
    // BEGIN IMMEDIATE already holds the database's write lock.
    return this.sql.paceRow.get(key)?.state;
  }

  putPaceRow(key: string, state: string, now: number): void {
    this.sql.putPaceRow.run(key, state, now);
  }

  addSpend(tenant: string, id: string, spent: SpendTotals, now: number): void {
    this.sql.addSpend.run(tenant, id, ...spendColumns(spent), now);
  }

  retireSpend(id: string, now: number): void {
    this.sql.foldErasedSpend.run(ERASED_SPEND_ROW, now, id);
    this.sql.deleteSpend.run(id);
  }

  tenantSpend(tenant: string): TenantSpend {
    const row = this.sql.tenantSpend.get(ERASED_SPEND_ROW, tenant)!;
    return {
      tokens: row.tokens ?? 0,
      costUsd: row.cost_usd ?? 0,
      modelCalls: row.model_calls ?? 0,
      toolCalls: row.tool_calls ?? 0,
      wallMs: row.wall_ms ?? 0,
      sessions: row.sessions,
    };
  }

  transcriptEntry(scope: string, digest: string): { sessionId: unknown; seq: unknown } | undefined {
    const row = this.sql.transcript.get(scope, digest);
    return row && { sessionId: row.session_id, seq: row.seq };
  }

  /**
   * Indexes session `key`'s events that carry text, from just past the last one indexed (or past
   * `options.after`, when further) up to `head` (exclusive), in seq order, at most
   * `options.pages` pages of rows. Returns the seq it stopped after when rows remain, else
   * undefined. The last indexed seq is the session's highest search rowid (rows are added in
   * seq order); a cursor carries a caller past rows without words, which leave no rowid.
   */
  indexTail(key: number, head: number, options: { pages?: number; after?: number } = {}): number | undefined {
    let after = Math.max(this.sql.lastIndexed.get(key, key)?.seq ?? -1, options.after ?? -1);
    // A page of rows at a time (a statement being iterated would hold the connection).
    for (let page = 0; page < (options.pages ?? Number.POSITIVE_INFINITY); page++) {
      const rows = this.sql.searchableFrom.all(key, after, key, head);
      for (const row of rows) {
        // A damaged row has no words: nothing to index (a read refuses its session as CORRUPT_LOG).
        const body = storedRowWords(row.type, row.data);
        if (body) indexWords(this.sql, key, row.seq, body);
      }
      if (rows.length < SEARCH_INDEX_PAGE) return undefined;
      after = rows[rows.length - 1]!.seq;
    }
    return after;
  }

  /** The search candidates of session `key` below `head`, best first (bm25 is lower for a better match). */
  searchMatches(key: number, match: string, head: number, limit: number): RankedSeq[] {
    return this.sql.searchMatch.all(match, key, key, head, limit).map((row) => ({ seq: row.seq, score: -row.rank }));
  }
}

/** A tenant's sums (null when it has no rows). */
type SpendSums = {
  tokens: number | null;
  cost_usd: number | null;
  model_calls: number | null;
  tool_calls: number | null;
  wall_ms: number | null;
  sessions: number;
};
/** An events row with its batch columns (set on a batch's first row only). */
type BatchedEventRow = EventRow & { batch_op: string | null; batch_last_seq: number | null };
export type InboxQueryRow = { key: string; bytes: number; digest: string; stored_at: number };

function prepareStatements(db: Database.Database) {
  return {
    sessionById: db.prepare<[string], driver.SessionRow>(`SELECT key, header FROM sessions WHERE id = ?`),
    // The session row and the stored head in one statement (one snapshot).
    // The last batch's last seq: the last row that starts a batch (a backward walk of one batch).
    sessionHead: db.prepare<[string], driver.SessionRow & { last_event: number | null; last_batch: number | null }>(
      `SELECT s.key, s.header,
         (SELECT max(e.id) & ${MAX_SEQ} FROM events e WHERE e.id >= (s.key << 32) AND e.id < ((s.key + 1) << 32)) AS last_event,
         (SELECT e.batch_last_seq FROM events e WHERE e.id >= (s.key << 32) AND e.id < ((s.key + 1) << 32)
            AND e.batch_op IS NOT NULL ORDER BY e.id DESC LIMIT 1) AS last_batch
       FROM sessions s WHERE s.id = ?`,
    ),
    insertSession: db.prepare<[string, string]>(
      `INSERT INTO sessions (id, header) VALUES (?, ?) ON CONFLICT (id) DO NOTHING`,
    ),
    listSessions: db.prepare<[], { header: string; id: string }>(`SELECT id, header FROM sessions ORDER BY id`),
    eventsFrom: db.prepare<[number, number, number, number], BatchedEventRow>(
      `SELECT seq, type, time, data, surface_op, source_event_seqs, ignorable, batch_op, batch_last_seq FROM events
       WHERE id >= (? << 32) + ? AND id < (? << 32) + ? ORDER BY id`,
    ),
    eventAt: db.prepare<[number, number], EventRow>(
      `SELECT seq, type, time, data, surface_op, source_event_seqs, ignorable FROM events WHERE id = (? << 32) + ?`,
    ),
    // anchor.ts RelationalDigest: the rows' text, each with the batch record on it, joined with
    // char(30) and built from the stored columns in rowid (= seq) order, as bytes (NULL for no
    // rows); with the rows whose seq column disagrees with their key.
    digest: db.prepare<[number, number, number, number], { text: Buffer | null; rows: number; misplaced: number }>(
      `SELECT CAST(group_concat(concat_ws(char(31), time,
             (ignorable IS NULL) + 2 * (surface_op IS NULL) + 4 * (source_event_seqs IS NULL)
               + 8 * (batch_last_seq IS NULL) + 16 * (batch_op IS NULL),
             ignorable, type, data, surface_op, source_event_seqs, batch_last_seq, batch_op), char(30)) AS BLOB) AS text,
         count(*) AS rows, ifnull(sum(seq <> (id & ${MAX_SEQ})), 0) AS misplaced
       FROM events WHERE id >= (? << 32) + ? AND id < (? << 32) + ?`,
    ),
    // The batch a read from seq `from` starts inside: the nearest batch start below it.
    batchBefore: db.prepare<[number, number, number], BatchRow>(
      `SELECT batch_op AS op, seq AS first_seq, batch_last_seq AS last_seq FROM events
       WHERE id < (? << 32) + ? AND id >= (? << 32) AND batch_op IS NOT NULL ORDER BY id DESC LIMIT 1`,
    ),
    insertEvent: db.prepare<
      [
        number,
        number,
        number,
        number,
        string,
        number,
        string,
        string | null,
        string | null,
        number | null,
        string | null,
        number | null,
      ]
    >(
      `INSERT INTO events (id, session_key, seq, type, time, data, surface_op, source_event_seqs, ignorable, batch_op, batch_last_seq)
       VALUES ((? << 32) + ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ),
    insertArtifact: db.prepare<[number, string, string]>(
      `INSERT INTO artifacts (session_key, name, content) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`,
    ),
    insertMedia: db.prepare<[number, string, Uint8Array]>(
      `INSERT INTO media (session_key, name, content) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`,
    ),
    media: db.prepare<[string, string], { content: Buffer }>(
      `SELECT m.content FROM media m JOIN sessions s ON s.key = m.session_key WHERE s.id = ? AND m.name = ?`,
    ),
    countMedia: db.prepare<[number], { n: number }>(`SELECT count(*) AS n FROM media WHERE session_key = ?`),
    deleteMedia: db.prepare<[number]>(`DELETE FROM media WHERE session_key = ?`),
    artifact: db.prepare<[string, string], { content: string }>(
      `SELECT a.content FROM artifacts a JOIN sessions s ON s.key = a.session_key WHERE s.id = ? AND a.name = ?`,
    ),
    cacheGet: db.prepare<[string], { record: string }>(
      `SELECT c.record FROM projection_cache c JOIN sessions s ON s.key = c.session_key WHERE s.id = ?`,
    ),
    cachePut: db.prepare<[number, string]>(
      `INSERT INTO projection_cache (session_key, record) VALUES (?, ?) ON CONFLICT (session_key) DO UPDATE SET record = excluded.record`,
    ),
    tombstone: db.prepare<[string], { erased_at: number; until: number }>(
      `SELECT erased_at, until FROM tombstones WHERE id = ?`,
    ),
    putTombstone: db.prepare<[string, number, number]>(
      `INSERT INTO tombstones (id, erased_at, until) VALUES (?, ?, ?) ON CONFLICT (id) DO UPDATE SET erased_at = excluded.erased_at, until = excluded.until`,
    ),
    dropExpiredTombstones: db.prepare<[number]>(`DELETE FROM tombstones WHERE until <= ?`),
    countEvents: db.prepare<[number, number], { n: number }>(
      `SELECT count(*) AS n FROM events WHERE id >= (? << 32) AND id < ((? + 1) << 32)`,
    ),
    countArtifacts: db.prepare<[number], { n: number }>(`SELECT count(*) AS n FROM artifacts WHERE session_key = ?`),
    countCache: db.prepare<[number], { n: number }>(`SELECT count(*) AS n FROM projection_cache WHERE session_key = ?`),
    countTranscripts: db.prepare<[number], { n: number }>(
      `SELECT count(*) AS n FROM transcripts WHERE session_key = ?`,
    ),
    deleteEvents: db.prepare<[number, number]>(`DELETE FROM events WHERE id >= (? << 32) AND id < ((? + 1) << 32)`),
    deleteArtifacts: db.prepare<[number]>(`DELETE FROM artifacts WHERE session_key = ?`),
    deleteCache: db.prepare<[number]>(`DELETE FROM projection_cache WHERE session_key = ?`),
    deleteSession: db.prepare<[number]>(`DELETE FROM sessions WHERE key = ?`),
    insertSearch: db.prepare<[number, number, string]>(INSERT_SEARCH),
    insertSearchRow: db.prepare<[number, number, Buffer]>(INSERT_SEARCH_ROW),
    // A contentless index forgets a row's words only when given them again, exactly.
    unindexSearch: db.prepare<[number, string]>(`INSERT INTO search (search, rowid, body) VALUES ('delete', ?, ?)`),
    // A search row's rowid is its event's id.
    indexedRows: db.prepare<
      [number, number],
      { rowid: number; digest: Buffer; type: string | null; data: string | null }
    >(
      `SELECT r.search_rowid AS rowid, r.words_sha256 AS digest, e.type, e.data FROM search_rows r
       LEFT JOIN events e ON e.id = r.search_rowid
       WHERE r.search_rowid >= (? << 32) AND r.search_rowid < ((? + 1) << 32)`,
    ),
    // The last indexed seq of a session: its highest rowid in search_rows (rowid = key << 32 | seq).
    lastIndexed: db.prepare<[number, number], { seq: number | null }>(
      `SELECT max(search_rowid) & ${MAX_SEQ} AS seq FROM search_rows WHERE search_rowid >= (? << 32) AND search_rowid < ((? + 1) << 32)`,
    ),
    searchableFrom: db.prepare<[number, number, number, number], { seq: number; type: string; data: string }>(
      `SELECT seq, type, data FROM events WHERE id > (? << 32) + ? AND id < (? << 32) + ? AND type IN (${SEARCHABLE_TYPES_SQL}) ORDER BY id LIMIT ${SEARCH_INDEX_PAGE}`,
    ),
    // bm25 is lower for a better match; ties go to the later event.
    searchMatch: db.prepare<[string, number, number, number, number], { seq: number; rank: number }>(
      `SELECT rowid & ${MAX_SEQ} AS seq, rank FROM search WHERE search MATCH ? AND rowid >= (? << 32) AND rowid < (? << 32) + ? ORDER BY rank, rowid DESC LIMIT ?`,
    ),
    insertInbox: db.prepare<[string, string, string, number, string, number]>(
      `INSERT INTO inbox (session_id, key, body, bytes, digest, stored_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
    ),
    inboxEntry: db.prepare<[string, string], InboxQueryRow>(
      `SELECT key, bytes, digest, stored_at FROM inbox WHERE session_id = ? AND key = ?`,
    ),
    inboxBody: db.prepare<[string, string], { body: string }>(
      `SELECT body FROM inbox WHERE session_id = ? AND key = ?`,
    ),
    listInbox: db.prepare<[string], InboxQueryRow>(
      `SELECT key, bytes, digest, stored_at FROM inbox WHERE session_id = ? ORDER BY stored_at, key`,
    ),
    deleteInboxEntry: db.prepare<[string, string]>(`DELETE FROM inbox WHERE session_id = ? AND key = ?`),
    deleteInbox: db.prepare<[string]>(`DELETE FROM inbox WHERE session_id = ?`),
    insertSessionKey: db.prepare<[string, string, Buffer, number]>(
      `INSERT INTO session_keys (session_id, key_id, key, created_at) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING`,
    ),
    sessionKey: db.prepare<[string], { key_id: unknown; key: unknown }>(
      `SELECT key_id, key FROM session_keys WHERE session_id = ?`,
    ),
    deleteSessionKey: db.prepare<[string]>(`DELETE FROM session_keys WHERE session_id = ?`),
    // The WHERE clause also keeps SQLite from reading ON CONFLICT as a join's ON.
    upsertTranscript: db.prepare<[string, string, number, string]>(
      `INSERT INTO transcripts (scope, digest, session_key, seq) SELECT ?, ?, key, ? FROM sessions WHERE id = ?
       ON CONFLICT (scope, digest) DO UPDATE SET session_key = excluded.session_key, seq = excluded.seq`,
    ),
    transcript: db.prepare<[string, string], { session_id: unknown; seq: unknown }>(
      `SELECT s.id AS session_id, t.seq FROM transcripts t JOIN sessions s ON s.key = t.session_key WHERE t.scope = ? AND t.digest = ?`,
    ),
    deleteTranscripts: db.prepare<[number]>(`DELETE FROM transcripts WHERE session_key = ?`),
    paceRow: db.prepare<[string], { state: string }>(`SELECT state FROM pacing WHERE key = ?`),
    putPaceRow: db.prepare<[string, string, number]>(
      `INSERT INTO pacing (key, state, updated_at) VALUES (?, ?, ?)
       ON CONFLICT (key) DO UPDATE SET state = excluded.state, updated_at = excluded.updated_at`,
    ),
    addSpend: db.prepare<[string, string, number, number, number, number, number, number]>(
      `INSERT INTO spend (tenant, session_id, tokens, cost_usd, model_calls, tool_calls, wall_ms, updated_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (tenant, session_id) DO UPDATE SET tokens = tokens + excluded.tokens,
         cost_usd = cost_usd + excluded.cost_usd, model_calls = model_calls + excluded.model_calls,
         tool_calls = tool_calls + excluded.tool_calls, wall_ms = wall_ms + excluded.wall_ms,
         updated_at = excluded.updated_at`,
    ),
    // The WHERE clause also keeps SQLite from reading ON CONFLICT as a join's ON.
    foldErasedSpend: db.prepare<[string, number, string]>(
      `INSERT INTO spend (tenant, session_id, tokens, cost_usd, model_calls, tool_calls, wall_ms, updated_at)
       SELECT tenant, ?, tokens, cost_usd, model_calls, tool_calls, wall_ms, ? FROM spend WHERE session_id = ?
       ON CONFLICT (tenant, session_id) DO UPDATE SET tokens = tokens + excluded.tokens,
         cost_usd = cost_usd + excluded.cost_usd, model_calls = model_calls + excluded.model_calls,
         tool_calls = tool_calls + excluded.tool_calls, wall_ms = wall_ms + excluded.wall_ms,
         updated_at = excluded.updated_at`,
    ),
    deleteSpend: db.prepare<[string]>(`DELETE FROM spend WHERE session_id = ?`),
    tenantSpend: db.prepare<[string, string], SpendSums>(
      `SELECT sum(tokens) AS tokens, sum(cost_usd) AS cost_usd, sum(model_calls) AS model_calls,
         sum(tool_calls) AS tool_calls, sum(wall_ms) AS wall_ms,
         count(CASE WHEN session_id <> ? THEN 1 END) AS sessions
       FROM spend WHERE tenant = ?`,
    ),
    deleteSearchRows: db.prepare<[number, number]>(
      `DELETE FROM search_rows WHERE search_rowid >= (? << 32) AND search_rowid < ((? + 1) << 32)`,
    ),
  };
}
