/**
 * The relational store core: every `SessionStore` operation of the SQLite and PostgreSQL backends,
 * written once over a dialect driver (driver.ts). Both keep events and batches in the shared row
 * codec (rows.ts); their storage formats are documented in sqlite/schema.ts and postgres/schema.ts.
 * The sub-stores (artifacts, projection cache, inbox, keys, transcripts, pacing, spend) are the
 * files of those names beside this one, as in jsonl/.
 *
 * A write is one sequence: lock (this process's per-session lock, then the driver's) → sync (the
 * store's validated copy brought up to the stored head, reading only the tail) → plan (plan.ts:
 * replay, OP_CONFLICT, SEQ_CONFLICT, the one validation of the batch) → insert → commit → the
 * batch joins the validated copy → notify watchers. A write that fails once it began evicts the
 * copy (rolled back, or a commit whose outcome is unknown): the next call reads the log afresh.
 * A read brings the copy up to the head the same way, and only checks the head when the copy
 * is current.
 */
import {
  SessionlogError,
  assertSessionId,
  assertStoredEvent,
  deepFreeze,
  jsonEqual,
  parseHeader,
  spendOfBatch,
  tenantOf,
  type NewEvent,
  type SessionHeader,
  type SessionView,
  type StoredEvent,
  type SurfaceSnapshot,
} from '../../session/index.js';
import {
  anchorMatches,
  anchorOpAt,
  anchorOpRanges,
  DIGEST_CHUNK_ROWS,
  RelationalDigest,
  sealAnchor,
  type PrefixAnchor,
} from '../anchor.js';
import { alreadyExists, assertAppendArguments, assertReadArguments, notFound, storeClosed } from '../errors.js';
import { SessionCopies } from '../copies.js';
import { alreadyErasedReceipt, appendResultOf, loadedSession, planAppend, planRepair, sliceEvents } from '../plan.js';
import { LogScanner, ResumedLog, assertScanned, headerProblemReport, scanReport, type ScanTarget } from '../scanner.js';
import { parseSearchRequest, searchHits, searchable, type SearchHit, type SearchOptions } from '../search.js';
import {
  ALL_TENANTS,
  assertTenantScope,
  inTenantScope,
  type TenantScope,
  type AnchoredRead,
  type AppendOptions,
  type AppendResult,
  type InboxStore,
  type LoadedSession,
  type ResolvedStoreOptions,
  type ScanReport,
  type SessionKeyStore,
  type SessionStore,
  type StoreEraseReceipt,
  type TranscriptIndex,
  type WatchOptions,
} from '../store.js';
import { LiveTail } from '../watch.js';
import {
  step,
  type Awaitable,
  type RelationalDriver,
  type RelationalTx,
  type SeqRange,
  type SessionRemoval,
  type Steps,
  refuseTombstoned,
  type Use,
} from './driver.js';
import { decodeRows, encodeEvent, parseStoredHeader } from './rows.js';
import { RelationalArtifacts } from './artifacts.js';
import { RelationalProjectionCache } from './projection-cache.js';
import { RelationalInbox } from './inbox.js';
import { RelationalSessionKeys } from './keys.js';
import { RelationalTranscripts } from './transcripts.js';
import { relationalPacing } from './pacing.js';
import { relationalSpend } from './spend.js';
import type { ArtifactStore, ProjectionCacheStore, PacingStore, SpendStore } from '../store.js';

/**
 * The validated copy this process keeps of one session, bound to the row it came from; with the
 * digest of its first `digest.next` events once an anchor was asked of it (anchor.ts).
 */
type CachedSession = { key: number; headerText: string; scanner: LogScanner; digest?: RelationalDigest };

/**
 * Feeds `scan`'s events from `digest.next` to its head into `digest`: each event encoded as it is
 * stored, with the batch record starting on it. False when an event cannot be put in a digest
 * (anchor.ts `RelationalDigest.addEvent`): the log is then not anchored.
 */
function digestValidated(digest: RelationalDigest, scan: LogScanner<ScanTarget>): boolean {
  const target = scan.session;
  for (let seq = digest.next; seq < target.nextSeq; seq++) {
    const event = target.storedAt(seq)!;
    const range = event.op === undefined ? undefined : scan.ops.get(event.op);
    const batch = range?.firstSeq === seq ? { op: event.op!, lastSeq: range.lastSeq } : undefined;
    if (!digest.addEvent(encodeEvent(event), batch)) return false;
  }
  return true;
}

/** What a write decides against the synced copy: its result, and the batch to store (none: nothing to write). */
type WritePlan<T> = {
  result: T;
  batch?: { events: readonly StoredEvent[]; op: string };
  /** Inbox keys of the entries the (stored or replayed) batch logs: removed in the same transaction. */
  delivered?: readonly string[];
};

/** A write's outcome: the batch the transaction stored, to commit into the copy once it committed. */
type Written<T> = { result: T; stored?: { scanner: LogScanner; events: readonly StoredEvent[] } };

export abstract class RelationalSessionStore implements SessionStore {
  abstract readonly kind: 'sqlite' | 'postgres';
  readonly artifacts: ArtifactStore;
  readonly projectionCache: ProjectionCacheStore;
  readonly inbox: InboxStore;
  readonly sessionKeys: SessionKeyStore;
  readonly transcripts: TranscriptIndex;
  readonly pacing: PacingStore;
  readonly spend: SpendStore;
  private readonly copies: SessionCopies<CachedSession>;
  private readonly tail: LiveTail;
  private closed = false;
  private closing: Promise<void> | undefined;

  protected constructor(
    private readonly driver: RelationalDriver,
    private readonly options: ResolvedStoreOptions,
  ) {
    this.copies = new SessionCopies(options.sessionCacheSize);
    this.tail = new LiveTail(
      driver.location,
      driver.pollIntervalMs,
      (id, fromSeq, limit) => this.readFrom(id, fromSeq, limit),
      driver.remoteAppends,
    );
    const use: Use = (body) => this.use(body);
    this.artifacts = new RelationalArtifacts(use, driver);
    this.projectionCache = new RelationalProjectionCache(use, driver);
    this.inbox = new RelationalInbox(use, driver);
    this.sessionKeys = new RelationalSessionKeys(use, driver);
    this.transcripts = new RelationalTranscripts(use, driver);
    this.pacing = relationalPacing(use, driver);
    this.spend = relationalSpend(use, driver);
  }

  /** Identifies the database (no credentials), in messages and for in-process watch wake-ups. */
  get location(): string {
    return this.driver.location;
  }

  create(header: SessionHeader): Promise<void> {
    return this.use(() => {
      const parsed = parseHeader(header, `create session ${String((header as { id?: unknown } | null)?.id)}`);
      return this.driver.run('write', (tx) => this.createSteps(tx, parsed));
    });
  }

  header(id: string): Promise<SessionHeader> {
    return this.use(async () => {
      assertSessionId(id);
      const row = await this.statement((tx) => tx.sessionRow(id));
      if (!row) throw notFound(id);
      return parseStoredHeader(row.header, id, this.where(id));
    });
  }

  exists(id: string): Promise<boolean> {
    return this.use(async () => {
      assertSessionId(id);
      return (await this.statement((tx) => tx.sessionRow(id))) !== undefined;
    });
  }

  list(scope: TenantScope): Promise<SessionHeader[]> {
    return this.use(async () => {
      assertTenantScope(scope);
      const rows = await this.statement((tx) => tx.listSessions());
      return rows
        .map((row) => parseStoredHeader(row.header, row.id, this.where(row.id)))
        .filter((header) => inTenantScope(scope, header));
    });
  }

  append(id: string, events: readonly NewEvent[], options: AppendOptions): Promise<AppendResult> {
    return this.use(() => {
      assertAppendArguments(id, events, options);
      this.driver.assertStorableOp(options.op);
      return this.write(id, (scanner) => {
        const plan = planAppend(scanner, events, options);
        const delivered = options.delivered ?? [];
        if (plan.kind === 'replayed') return { result: plan.result, delivered };
        return { result: appendResultOf(plan.events), batch: { events: plan.events, op: options.op }, delivered };
      });
    });
  }

  load(id: string): Promise<LoadedSession> {
    return this.use(() => {
      assertSessionId(id);
      return this.write(id, (scanner) => {
        const closers = planRepair(scanner);
        const result = loadedSession(scanner, closers, 0);
        return closers.length === 0 ? { result } : { result, batch: { events: closers, op: closers[0]!.op! } };
      });
    });
  }

  readFrom(id: string, fromSeq: number, limit?: number): Promise<StoredEvent[]> {
    return this.use(async () => {
      assertReadArguments(id, fromSeq, limit);
      return sliceEvents((await this.readSynced(id)).scanner.session, fromSeq, limit);
    });
  }

  nextSeq(id: string): Promise<number> {
    return this.use(async () => {
      assertSessionId(id);
      return (await this.readSynced(id)).scanner.nextSeq;
    });
  }

  session(id: string): Promise<SessionView> {
    return this.use(async () => {
      assertSessionId(id);
      return (await this.readSynced(id)).scanner.session;
    });
  }

  readAnchored(id: string, anchor: PrefixAnchor, surface: SurfaceSnapshot): Promise<AnchoredRead | 'held' | 'differs'> {
    return this.use(async () => {
      assertSessionId(id);
      return this.copies.serial(id, async () =>
        // With a validated copy here, reading through it costs less than hashing the prefix.
        this.copies.get(id) ? 'held' : this.driver.run('read', (tx) => this.anchoredSteps(tx, id, anchor, surface)),
      );
    });
  }

  prefixAnchor(id: string, seq: number): Promise<PrefixAnchor | undefined> {
    return this.use(async () => {
      assertSessionId(id);
      return this.copies.serial(id, async () => {
        const entry = this.copies.get(id);
        if (!entry || entry.scanner.nextSeq !== seq + 1) return undefined;
        entry.digest ??= new RelationalDigest(entry.headerText, this.driver.batchLayout);
        if (!digestValidated(entry.digest, entry.scanner)) return undefined;
        return sealAnchor(entry.digest.current(), seq, entry.scanner.session.surface, entry.scanner.ops);
      });
    });
  }

  inspect(id: string): Promise<LoadedSession> {
    return this.use(async () => {
      assertSessionId(id);
      const { scanner } = await this.readSynced(id);
      return loadedSession(scanner, planRepair(scanner), 0);
    });
  }

  scan(id: string): Promise<ScanReport> {
    return this.use(() => {
      assertSessionId(id);
      return this.driver.run('read', (tx) => this.scanSteps(tx, id));
    });
  }

  erase(id: string, scope: TenantScope): Promise<StoreEraseReceipt> {
    return this.use(() => {
      assertSessionId(id);
      assertTenantScope(scope);
      return this.copies.serial(id, async () => {
        const receipt = await this.driver.run('write', (tx) => this.eraseSteps(tx, id, scope, Date.now()));
        this.copies.evict(id);
        if (receipt.erased) receipt.notes.push(...this.driver.afterErase());
        return receipt;
      });
    });
  }

  search(id: string, query: string, options?: SearchOptions): Promise<SearchHit[]> {
    return this.use(async () => {
      assertSessionId(id);
      const request = parseSearchRequest(query, options);
      const entry = await this.readSynced(id);
      if (!searchable(request)) return [];
      const { session, nextSeq } = entry.scanner;
      // Rows past the copy's head (appended meanwhile) are left out: the snippets come from the copy.
      const scope = { id, key: entry.key, header: entry.headerText, head: nextSeq };
      return searchHits(session, await this.driver.searchMatches(scope, request), request.words);
    });
  }

  watch(id: string, fromSeq: number, options: WatchOptions = {}): AsyncIterable<StoredEvent> {
    return this.tail.watch(id, fromSeq, options.signal);
  }

  /** Ends every watch and the driver's connections; idempotent. */
  close(): Promise<void> {
    this.closing ??= this.shutDown();
    return this.closing;
  }

  // -------------------------------------------------------------------------------------------

  /**
   * Runs `body` on the open store. A driver error raised because the store closed meanwhile reads
   * as STORE_CLOSED; a lock wait or an unreachable server as the driver says (UNAVAILABLE).
   */
  private async use<T>(body: () => Awaitable<T>): Promise<T> {
    if (this.closed) throw storeClosed();
    try {
      return await body();
    } catch (error) {
      if (error instanceof SessionlogError) throw error;
      if (this.closed) throw storeClosed();
      throw this.driver.storeError(error);
    }
  }

  private async shutDown(): Promise<void> {
    this.closed = true;
    this.copies.clear();
    this.tail.close();
    await this.driver.close();
  }

  /** One statement, on its own. */
  private statement<T>(query: (tx: RelationalTx) => Awaitable<T>): Awaitable<T> {
    return this.driver.run('single', (tx) => step(query(tx)));
  }

  private where(id: string): string {
    return `session ${id} in ${this.location}`;
  }

  private *createSteps(tx: RelationalTx, header: SessionHeader): Steps<void> {
    const id = header.id;
    yield* refuseTombstoned(tx, id);
    if (yield* step(tx.insertSession(id, JSON.stringify(header)))) return;
    const existing = yield* step(tx.sessionRow(id));
    if (!existing || !jsonEqual(parseStoredHeader(existing.header, id, this.where(id)), header))
      throw alreadyExists(id);
  }

  /**
   * The write sequence: lock → sync → plan → insert → commit → notify. The batch joins the
   * validated copy only once the transaction committed; a write that fails after it began evicts
   * the copy, so the next call reads the log afresh.
   */
  private write<T>(id: string, plan: (scanner: LogScanner) => WritePlan<T>): Promise<T> {
    return this.copies.serial(id, async () => {
      let began = false;
      let written: Written<T>;
      try {
        written = await this.driver.run('write', (tx) => this.writeSteps(tx, id, plan, () => (began = true)));
      } catch (error) {
        if (began) this.copies.evict(id);
        throw error;
      }
      if (written.stored) {
        written.stored.scanner.commitWritten(written.stored.events);
        this.tail.appended(id);
      }
      return written.result;
    });
  }

  private *writeSteps<T>(
    tx: RelationalTx,
    id: string,
    plan: (scanner: LogScanner) => WritePlan<T>,
    begin: () => void,
  ): Steps<Written<T>> {
    if (!(yield* step(tx.lockSession(id)))) throw notFound(id);
    const entry = yield* this.sync(tx, id);
    const { result, batch, delivered } = plan(entry.scanner);
    // The inbox entries the batch logs go in its commit (none of their own).
    const removeDelivered = function* () {
      if (delivered && delivered.length > 0) yield* step(tx.deleteInboxEntries(id, delivered));
    };
    if (!batch) {
      yield* removeDelivered();
      return { result };
    }
    begin();
    yield* step(tx.insertBatch(entry.key, id, batch.events, batch.op));
    const spent = spendOfBatch(batch.events, entry.scanner.session.budget.openTurnStartedAt);
    if (spent) yield* step(tx.addSpend(tenantOf(entry.scanner.session.header), id, spent, Date.now()));
    yield* removeDelivered();
    return { result, stored: { scanner: entry.scanner, events: batch.events } };
  }

  /**
   * The session's validated copy brought up to the stored head for a read: one statement when
   * the cached copy is current, else the tail read in one snapshot.
   */
  private readSynced(id: string): Promise<CachedSession> {
    return this.copies.serial(id, async () => {
      const cached = this.copies.get(id);
      if (cached) {
        const row = await this.statement((tx) => tx.sessionHead(id));
        if (!row) throw notFound(id);
        if (row.key === cached.key && row.header === cached.headerText && row.head === cached.scanner.nextSeq)
          return cached;
      }
      return this.driver.run('read', (tx) => this.sync(tx, id));
    });
  }

  /**
   * Brings the session's validated copy up to the stored head inside a transaction: only rows past
   * the cached copy are read. A copy of another incarnation of the id (another key or header), or
   * ahead of the stored log (restored from a backup), is rebuilt from seq 0. CORRUPT_LOG, with
   * nothing cached, when the stored log is damaged.
   */
  private *sync(tx: RelationalTx, id: string): Steps<CachedSession> {
    const row = yield* step(tx.sessionHead(id));
    if (!row) throw notFound(id);
    let entry = this.copies.get(id);
    if (!entry || entry.key !== row.key || entry.headerText !== row.header || row.head < entry.scanner.nextSeq) {
      const header = parseStoredHeader(row.header, id, this.where(id));
      entry = {
        key: row.key,
        headerText: row.header,
        scanner: new LogScanner(header, 'transactional', this.where(id)),
      };
    }
    yield* this.readTail(tx, row.key, entry.scanner, row.head);
    entry.scanner.finish(row.head);
    if (entry.scanner.problem) {
      this.copies.evict(id);
      assertScanned(entry.scanner);
    }
    this.copies.set(id, entry);
    return entry;
  }

  /**
   * A cold read from an anchor (anchor.ts) in one snapshot: the prefix's stored rows hashed, not
   * decoded; on a match, the surface nodes of the prefix decoded and the rows after it validated
   * from the anchored state. `differs` for a prefix that differs or a tail that does not validate.
   */
  private *anchoredSteps(
    tx: RelationalTx,
    id: string,
    anchor: PrefixAnchor,
    surface: SurfaceSnapshot,
  ): Steps<AnchoredRead | 'differs'> {
    const row = yield* step(tx.sessionHead(id));
    if (!row) throw notFound(id);
    if (row.head <= anchor.seq) return 'differs';
    const digest = new RelationalDigest(row.header, this.driver.batchLayout);
    const whole: SeqRange[] = [];
    for (let from = 0; from + DIGEST_CHUNK_ROWS <= anchor.seq + 1; from += DIGEST_CHUNK_ROWS)
      whole.push({ from, to: from + DIGEST_CHUNK_ROWS });
    const hashed = tx.wholeChunkDigests && whole.length > 0 ? yield* step(tx.wholeChunkDigests(row.key, whole)) : [];
    for (let from = 0, k = 0; from <= anchor.seq; from += DIGEST_CHUNK_ROWS, k++) {
      const to = Math.min(anchor.seq + 1, from + DIGEST_CHUNK_ROWS);
      // A whole chunk may come hashed; the last one, not whole, as text, since the tail goes on hashing into it.
      const chunk = hashed[k] ?? (yield* step(tx.prefixDigest(row.key, from, to, to - from === DIGEST_CHUNK_ROWS)));
      // The text leaves seqs out: the rows must be exactly seqs from..to-1, each in its place.
      if (chunk.rows !== to - from || chunk.misplaced !== 0) return 'differs';
      if (chunk.hashed) digest.addChunkHashes(chunk.rowsDigest, chunk.batchesDigest);
      else digest.addText(chunk.rowsText, chunk.batchesText, chunk.rows);
    }
    if (!anchorMatches(digest.current(), anchor, surface)) return 'differs';
    const header = parseStoredHeader(row.header, id, this.where(id));
    const wanted = [...new Set([...surface.nodes, anchor.seq])].sort((a, b) => a - b);
    const prefix = new Map<number, StoredEvent>();
    for (const stored of decodeRows(yield* step(tx.rowsAt(row.key, wanted)), [])) {
      // The digest matched, so these rows are the validated ones; decoding them cannot fail short of a bug.
      if (stored.kind !== 'event') return 'differs';
      const value = stored.value as Record<string, unknown>;
      const op = anchorOpAt(anchor, value.seq as number);
      const event = op === undefined ? value : { ...value, op };
      assertStoredEvent(event, value.seq as number, id);
      prefix.set(event.seq, deepFreeze(event));
    }
    if (prefix.size !== wanted.length) return 'differs';
    const scanner = LogScanner.resume(
      new ResumedLog(header, anchor.seq + 1, surface, prefix),
      anchorOpRanges(anchor),
      'transactional',
      this.where(id),
      0,
    );
    yield* this.readTail(tx, row.key, scanner, row.head);
    scanner.finish(row.head);
    if (scanner.problem || !digestValidated(digest, scanner)) return 'differs';
    const target = scanner.session;
    return {
      header,
      nextSeq: target.nextSeq,
      storedAt: (seq) => target.storedAt(seq),
      anchor: sealAnchor(
        digest.current(),
        target.nextSeq - 1,
        { nodes: target.surfaceNodes, replaceGeneration: target.replaceGeneration },
        scanner.ops,
      ),
    };
  }

  /** Feeds the stored rows between the scanner's next seq and `head` into it. */
  private *readTail(tx: RelationalTx, key: number, scanner: LogScanner<ScanTarget>, head: number): Steps<void> {
    const from = scanner.nextSeq;
    if (head <= from) return;
    const rows = yield* step(tx.rowsFrom(key, from, head));
    for (const record of decodeRows(rows.events, rows.batches)) scanner.push(record);
  }

  private *scanSteps(tx: RelationalTx, id: string): Steps<ScanReport> {
    const row = yield* step(tx.sessionHead(id));
    if (!row) throw notFound(id);
    let header: SessionHeader;
    try {
      header = parseStoredHeader(row.header, id, this.where(id));
    } catch (error) {
      return headerProblemReport(id, error);
    }
    const scanner = new LogScanner(header, 'transactional', this.where(id));
    yield* this.readTail(tx, row.key, scanner, row.head);
    return scanReport(scanner, scanner.finish(row.head));
  }

  /**
   * Deletes the session's rows, its inbox entries and its key in one transaction, and leaves a
   * tombstone. An id without a session but with inbox entries or a key (written before the
   * session was created) is erased too; one with nothing at all is SESSION_NOT_FOUND, or the
   * receipt of an earlier erasure while its tombstone lasts.
   */
  private *eraseSteps(tx: RelationalTx, id: string, scope: TenantScope, now: number): Steps<StoreEraseReceipt> {
    yield* step(tx.lockSessionId(id));
    const key = yield* step(tx.lockSessionForErase(id));
    // Another tenant's session is not there for this scope; checked under the erase's lock.
    if (key !== undefined && scope !== ALL_TENANTS) {
      const row = yield* step(tx.sessionRow(id));
      if (row && !inTenantScope(scope, parseStoredHeader(row.header, id, this.where(id)))) throw notFound(id);
    }
    const inbox = yield* step(tx.deleteInbox(id));
    const sessionKey = yield* step(tx.deleteSessionKey(id));
    if (key === undefined && inbox.removed === 0 && sessionKey.removed === 0) {
      const tombstone = yield* step(tx.tombstone(id));
      if (!tombstone) throw notFound(id);
      return alreadyErasedReceipt(id, tombstone.until);
    }
    const removal: SessionRemoval =
      key === undefined
        ? {
            removed: { header: 0, events: 0, artifacts: 0, media: 0, projectionCheckpoints: 0, transcriptEntries: 0 },
            places: [],
            notes: [],
          }
        : yield* step(tx.deleteSession(key, id));
    yield* step(tx.retireSpend(id, now));
    yield* step(tx.dropExpiredTombstones(now));
    const until = now + this.options.tombstoneMs;
    yield* step(tx.putTombstone(id, { erasedAt: now, until }));
    return {
      sessionId: id,
      erased: true,
      removed: { ...removal.removed, inboxEntries: inbox.removed, sessionKey: sessionKey.removed },
      places: [...removal.places, inbox, sessionKey],
      tombstoneUntil: until,
      notes: removal.notes,
    };
  }
}
