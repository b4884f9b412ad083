/**
 * JSONL backend of `SessionStore` (DESIGN §4, dsh-spec §8.6): one directory per session.
 *
 * Layout under the root (directories 0700, files 0600):
 *
 * ```
 * <root>/<sessionId>/session.jsonl          header line, then one event per line
 * <root>/<sessionId>/session.lock           exclusive writer lock (present only while writing)
 * <root>/<sessionId>/artifacts/<name>       artifact files
 * <root>/<sessionId>/media/media-<sha256>.<ext>  a medium's bytes, once per content (issue 50)
 * <root>/<sessionId>/projection-cache.json  projection checkpoint, replaced atomically
 * <root>/<sessionId>/inbox/<sha256(key)>.json  an inbox entry {key, body, bytes, digest, storedAt}
 * <root>/<sessionId>/session.key            the session's data key {id, key (base64)}
 * <root>/<sessionId>/transcripts/<k>.json   a transcript index entry {scope, digest, seq} naming the session
 * <root>/.transcripts/<k[0:2]>/<k>.json     {sessionId}: the session whose entry answers (scope, digest)
 * <root>/.tombstones/<sessionId>.json       {erasedAt, until} of an erased session
 * <root>/.pacing/<sha256(key)>.json         a provider pacing bucket's state (pacing.ts)
 * <root>/.pacing/<sha256(key)>.lock         held while a reservation reads and replaces it
 * <root>/.spend/<tenant>.erased.json        what the tenant's erased sessions spent (spend.ts)
 * <root>/.spend/<tenant>.lock               held while an erasure adds to it
 * ```
 *
 * A tenant's spend (spend.ts) is summed from its sessions' logs (each one's events after the
 * prefix a fork or salvage copied) plus its `.erased` file: nothing more is written per append,
 * and each check reads every session of the tenant (fine for the development store; SQLite and
 * PostgreSQL keep a row per session). A session whose log is damaged adds nothing (its spend
 * cannot be read), also when it is erased.
 *
 * Inbox entries and the key may be written before the session exists (its directory then holds
 * no `session.jsonl`). Each is written to a temp file, fsynced and linked into place, never over
 * an existing one: the first writer of a key wins, and a reader sees a whole file or none. An
 * entry's file name is the hex SHA-256 of its key (keys are any text); `erase` removes both with
 * the directory, also for an id that has nothing else.
 *
 * The transcript index (store.ts `TranscriptIndex`) keeps each entry in the directory of the
 * session it names, so the entry goes with the directory when the session is erased, and a small
 * global pointer, found from (scope, digest) alone, says which session's directory to look in.
 * `<k>` is the hex SHA-256 of the scope, a newline and the digest; pointers are spread over 256
 * directories by its first two digits. The global directory starts with a dot, which no session
 * id does, so it cannot collide with a session's. A put replaces the entry, then the pointer
 * (each a temp file fsynced and renamed into place); a get follows the pointer and returns the
 * entry only if that session's directory holds it and its log exists. So a pointer left behind
 * by a crash, a concurrent erasure or a newer put for another session never names a wrong or
 * erased session: it finds no entry. Erasure reads the names of the session's entries and takes
 * away each pointer that still names the session (a pointer another session took over since is
 * put back), counting those as the entries removed; a get of such a pair in that moment finds
 * nothing.
 *
 * The log file's format and its integrity rules: format.ts; the names under the root: layout.ts.
 *
 * Search keeps no index on disk: `search` scans the session's validated copy (search.ts
 * `scanSession`), so there is nothing to upgrade or to erase besides the session's folder.
 *
 * Writers in several processes are serialized by the session's lock file (file-lock.ts); under
 * it the writer re-reads the file's new bytes, so a stale `expectedSeq` is always SEQ_CONFLICT.
 * The lock is fenced: right before the positioned write the writer checks that the lock file
 * still names it and that the log is still the file (inode) and size it scanned; after the fsync
 * it checks again. A writer whose lock was broken while it was paused finds out and fails with
 * SEQ_CONFLICT; and the next holder after a break first moves the log to a new inode (a copy
 * linked over the name), so a paused writer's late write lands in the old, unlinked file.
 */
import { randomUUID } from 'node:crypto';
import { mkdirSync, realpathSync } from 'node:fs';
import { readdir, rename, rm, unlink, type FileHandle } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import {
  SessionlogError,
  assertSessionId,
  isValidSessionId,
  jsonEqual,
  parseHeader,
  spendOfEvents,
  tenantOf,
  type StoredEvent,
  type NewEvent,
  type SessionHeader,
  type SessionView,
  type SurfaceSnapshot,
} from '../../session/index.js';
import { anchorMatches, anchorOpRanges, newPrefixHash, sealAnchor, type PrefixAnchor } from '../anchor.js';
import { LogScanner, ResumedLog, assertTornTailUnacknowledged, headerProblemReport, scanReport } from '../scanner.js';
import {
  alreadyExists,
  assertAppendArguments,
  assertReadArguments,
  notFound,
  sessionErased,
  storeClosed,
} from '../errors.js';
import { alreadyErasedReceipt, appendResultOf, loadedSession, planAppend, planRepair, sliceEvents } from '../plan.js';
import { LiveTail } from '../watch.js';
import { SessionCopies } from '../copies.js';
import { acquireFileLock, type FileLock } from './file-lock.js';
import { spendStore } from '../spend.js';
import {
  parseSearchRequest,
  scanSession,
  searchHits,
  searchable,
  type SearchHit,
  type SearchOptions,
} from '../search.js';
import {
  ALL_TENANTS,
  assertTenantScope,
  inTenantScope,
  resolveStoreOptions,
  type TenantScope,
  type ResolvedStoreOptions,
  type StoreOptions,
  type AnchoredRead,
  type AppendOptions,
  type AppendResult,
  type InboxStore,
  type LoadedSession,
  type ScanReport,
  type SessionKeyStore,
  type SessionStore,
  type StoreEraseReceipt,
  type TranscriptIndex,
  type WatchOptions,
} from '../store.js';
import { isErrno, ensureDir, fsyncDir, publishOnce, readFully } from './files.js';
import { headerLine, readHeaderLine, prefixLines, scanLines, type Format } from './format.js';
import { LOCK_FILE, TRANSCRIPT_INDEX_DIR, ERASING_PREFIX, JsonlLayout } from './layout.js';
import { JsonlArtifacts } from './artifacts.js';
import { JsonlLogFiles, type SessionFile } from './log-file.js';
import { JsonlSpend } from './spend.js';
import { jsonlPacing } from './pacing.js';
import {
  countForErase,
  holdsInboxOrKey,
  readTombstone,
  removeLeftovers,
  dropTranscriptPointers,
  writeTombstone,
} from './erase.js';
import { JsonlProjectionCache } from './projection-cache.js';
import { JsonlInbox } from './inbox.js';
import { JsonlSessionKeys } from './keys.js';
import { JsonlTranscripts } from './transcripts.js';
import type { ArtifactStore, PacingStore, SpendStore, ProjectionCacheStore } from '../store.js';

/** Opens (creating the root directory 0700 if needed) a JSONL store rooted at `root`. */
export function openJsonlStore(root: string, options: StoreOptions = {}): JsonlSessionStore {
  return new JsonlSessionStore(root, resolveStoreOptions(options));
}

export class JsonlSessionStore implements SessionStore {
  readonly kind = 'jsonl' as const;
  readonly root: string;
  /** Where this store's files are. */
  readonly layout: JsonlLayout;
  readonly location: string;
  readonly artifacts: ArtifactStore;
  readonly projectionCache: ProjectionCacheStore;
  readonly inbox: InboxStore;
  readonly sessionKeys: SessionKeyStore;
  readonly transcripts: TranscriptIndex;
  readonly pacing: PacingStore;
  readonly spend: SpendStore;
  private readonly copies: SessionCopies<SessionFile>;
  private readonly files: JsonlLogFiles;
  private readonly spendFiles: JsonlSpend;
  private readonly tail: LiveTail;
  private closed = false;

  constructor(
    root: string,
    private readonly options: ResolvedStoreOptions,
  ) {
    const absolute = resolve(root);
    mkdirSync(absolute, { recursive: true, mode: 0o700 });
    this.root = realpathSync(absolute);
    this.layout = new JsonlLayout(this.root);
    this.location = `jsonl:${this.root}`;
    this.copies = new SessionCopies(options.sessionCacheSize);
    this.files = new JsonlLogFiles(this.layout, this.copies);
    this.tail = new LiveTail(this.location, options.pollIntervalMs, (id, fromSeq, limit) =>
      this.readFrom(id, fromSeq, limit),
    );
    this.artifacts = new JsonlArtifacts(this);
    this.projectionCache = new JsonlProjectionCache(this);
    this.inbox = new JsonlInbox(this);
    this.sessionKeys = new JsonlSessionKeys(this);
    this.transcripts = new JsonlTranscripts(this);
    this.pacing = jsonlPacing(this, options);
    this.spendFiles = new JsonlSpend(this, options);
    this.spend = spendStore((tenant) => this.spendFiles.tenantSpend(tenant));
  }

  assertOpen(): void {
    if (this.closed) throw storeClosed();
  }

  /** Throws SESSION_NOT_FOUND unless the session's log file exists. */
  async requireSession(id: string): Promise<void> {
    if (!(await this.layout.fileExists(id))) throw notFound(id);
  }

  /** Throws unless the session's log file exists: SESSION_ERASED while its tombstone lasts, else SESSION_NOT_FOUND. */
  async requireLiveSession(id: string): Promise<void> {
    if (await this.layout.fileExists(id)) return;
    await this.refuseTombstoned(id);
    throw notFound(id);
  }

  async create(header: SessionHeader): Promise<void> {
    this.assertOpen();
    const parsed = parseHeader(header, `create session ${String((header as { id?: unknown } | null)?.id)}`);
    const id = parsed.id;
    await this.copies.serial(id, async () => {
      await this.refuseTombstoned(id);
      const dir = this.layout.sessionDir(id);
      await ensureDir(dir, this.root);
      if (await this.layout.fileExists(id)) return this.checkSameHeader(id, parsed);
      // Publish the header atomically: a temp file linked into place never clobbers a log
      // another process created meanwhile.
      if (!(await publishOnce(this.layout.logPath(id), dir, headerLine(parsed))))
        return this.checkSameHeader(id, parsed);
    });
  }

  /** SESSION_ERASED while the id's tombstone lasts; an expired tombstone is removed. */
  async refuseTombstoned(id: string): Promise<void> {
    const tombstone = await readTombstone(this.layout, id, this.options.tombstoneMs);
    if (!tombstone) return;
    if (tombstone.until > Date.now()) throw sessionErased(id, tombstone.erasedAt, tombstone.until);
    await unlink(this.layout.tombstonePath(id)).catch((error: unknown) => {
      if (!isErrno(error, 'ENOENT')) throw error;
    });
  }

  private async checkSameHeader(id: string, header: SessionHeader): Promise<void> {
    if (!jsonEqual(await this.readHeader(id), header)) throw alreadyExists(id);
  }

  private async readHeader(id: string): Promise<SessionHeader> {
    const handle = await this.layout.openLog(id);
    try {
      return (await readHeaderLine(handle, id, this.layout.logPath(id))).header;
    } finally {
      await handle.close();
    }
  }

  async header(id: string): Promise<SessionHeader> {
    this.assertOpen();
    assertSessionId(id);
    return this.readHeader(id);
  }

  async exists(id: string): Promise<boolean> {
    this.assertOpen();
    assertSessionId(id);
    return this.layout.fileExists(id);
  }

  async list(scope: TenantScope): Promise<SessionHeader[]> {
    this.assertOpen();
    assertTenantScope(scope);
    const entries = await readdir(this.root, { withFileTypes: true });
    const ids = entries
      .filter((e) => e.isDirectory() && isValidSessionId(e.name))
      .map((e) => e.name)
      .sort();
    const headers: SessionHeader[] = [];
    for (const id of ids) {
      try {
        const header = await this.readHeader(id);
        if (inTenantScope(scope, header)) headers.push(header);
      } catch (error) {
        // A directory without a log is a create that has not published its header yet.
        if (!(error instanceof SessionlogError && error.code === 'SESSION_NOT_FOUND')) throw error;
      }
    }
    return headers;
  }

  append(id: string, events: readonly NewEvent[], options: AppendOptions): Promise<AppendResult> {
    return this.write(
      id,
      async (file, lock) => {
        assertTornTailUnacknowledged(file.scanner.where, id, file.torn, options.expectedSeq);
        const plan = planAppend(file.scanner, events, options);
        if (plan.kind === 'replayed') return { result: plan.result, written: false };
        await this.files.writeBatch(id, file, lock, plan.events);
        return { result: appendResultOf(plan.events), written: true };
      },
      () => assertAppendArguments(id, events, options),
    ).then(async (result) => {
      // The inbox is files of its own here: the entries the batch logs go right after it (best
      // effort; one left behind is removed by the session's next run, never logged twice).
      if (options.delivered && options.delivered.length > 0)
        await this.inbox.remove(id, options.delivered).catch(() => undefined);
      return result;
    });
  }

  load(id: string): Promise<LoadedSession> {
    return this.write(
      id,
      async (file, lock) => {
        const truncated = file.torn?.records ?? 0;
        const closers = planRepair(file.scanner);
        const result = loadedSession(file.scanner, closers, truncated);
        if (closers.length > 0) await this.files.writeBatch(id, file, lock, closers);
        else if (file.torn) await this.files.cutTornTail(id, file, lock);
        return { result, written: closers.length > 0 };
      },
      () => assertSessionId(id),
    );
  }

  async inspect(id: string): Promise<LoadedSession> {
    const file = await this.readState(id);
    return loadedSession(file.scanner, planRepair(file.scanner), file.torn?.records ?? 0);
  }

  async readFrom(id: string, fromSeq: number, limit?: number): Promise<StoredEvent[]> {
    assertReadArguments(id, fromSeq, limit);
    return sliceEvents((await this.readState(id)).scanner.session, fromSeq, limit);
  }

  async nextSeq(id: string): Promise<number> {
    return (await this.readState(id)).scanner.nextSeq;
  }

  async session(id: string): Promise<SessionView> {
    return (await this.readState(id)).scanner.session;
  }

  async readAnchored(
    id: string,
    anchor: PrefixAnchor,
    surface: SurfaceSnapshot,
  ): Promise<AnchoredRead | 'held' | 'differs'> {
    this.assertOpen();
    assertSessionId(id);
    return this.copies.serial(id, async () => {
      // With a validated copy here, reading through it costs less than hashing the prefix.
      if (this.copies.get(id)) return 'held';
      await this.requireSession(id);
      const handle = await this.layout.openLog(id);
      try {
        return await this.anchoredRead(id, handle, anchor, surface);
      } finally {
        await handle.close();
      }
    });
  }

  /**
   * A cold read from an anchor (anchor.ts): the file's bytes before `anchor.position` hashed, not
   * parsed; on a match, the lines of the prefix's surface nodes parsed and the lines after it
   * validated from the anchored state. `differs` for a prefix that differs or a tail that does not
   * validate. A torn final write is left out, as every read leaves it.
   */
  private async anchoredRead(
    id: string,
    handle: FileHandle,
    anchor: PrefixAnchor,
    surface: SurfaceSnapshot,
  ): Promise<AnchoredRead | 'differs'> {
    const position = anchor.position;
    const size = (await handle.stat()).size;
    if (position === undefined || size < position) return 'differs';
    const path = this.layout.logPath(id);
    const top = await readHeaderLine(handle, id, path);
    if (position < top.end) return 'differs';
    const bytes = await readFully(handle, 0, size);
    const digest = newPrefixHash().update(bytes.subarray(0, position));
    if (!anchorMatches(digest, anchor, surface)) return 'differs';
    const prefix = prefixLines(bytes.subarray(0, position), top.end, [...surface.nodes, anchor.seq], top.format, id);
    if (prefix === undefined) return 'differs';
    const where = `session ${id} in ${path}`;
    const framing = top.format === 2 ? 'jsonl-v2' : 'jsonl-v1';
    const target = new ResumedLog(top.header, anchor.seq + 1, surface, prefix);
    const scanner = LogScanner.resume(target, anchorOpRanges(anchor), framing, where, position);
    scanLines(scanner, top.format, bytes.subarray(position), position);
    scanner.finish();
    if (scanner.problem) return 'differs';
    digest.update(bytes.subarray(position, scanner.validEnd));
    return {
      header: top.header,
      nextSeq: target.nextSeq,
      storedAt: (seq) => target.storedAt(seq),
      anchor: sealAnchor(
        digest,
        target.nextSeq - 1,
        { nodes: target.surfaceNodes, replaceGeneration: target.replaceGeneration },
        scanner.ops,
        scanner.validEnd,
      ),
    };
  }

  async prefixAnchor(id: string, seq: number): Promise<PrefixAnchor | undefined> {
    this.assertOpen();
    assertSessionId(id);
    return this.copies.serial(id, async () => {
      const file = this.copies.get(id);
      if (!file || file.scanner.nextSeq !== seq + 1) return undefined;
      const { scanner } = file;
      return sealAnchor(file.digest, seq, scanner.session.surface, scanner.ops, scanner.validEnd);
    });
  }

  async search(id: string, query: string, options?: SearchOptions): Promise<SearchHit[]> {
    this.assertOpen();
    assertSessionId(id);
    const request = parseSearchRequest(query, options);
    const { session } = (await this.readState(id)).scanner;
    if (!searchable(request)) return [];
    return searchHits(session, scanSession(session, request.words, request.limit), request.words);
  }

  async scan(id: string): Promise<ScanReport> {
    this.assertOpen();
    assertSessionId(id);
    const path = this.layout.logPath(id);
    const handle = await this.layout.openLog(id);
    try {
      let top: { header: SessionHeader; format: Format; end: number };
      try {
        top = await readHeaderLine(handle, id, path);
      } catch (error) {
        return headerProblemReport(id, error);
      }
      const scanner = new LogScanner(
        top.header,
        top.format === 2 ? 'jsonl-v2' : 'jsonl-v1',
        `session ${id} in ${path}`,
        top.end,
      );
      const size = (await handle.stat()).size;
      scanLines(scanner, top.format, await readFully(handle, top.end, Math.max(0, size - top.end)), top.end);
      return scanReport(scanner, scanner.finish());
    } finally {
      await handle.close();
    }
  }

  async erase(id: string, scope: TenantScope): Promise<StoreEraseReceipt> {
    this.assertOpen();
    assertSessionId(id);
    assertTenantScope(scope);
    return this.copies.serial(id, async () => {
      this.copies.evict(id);
      await removeLeftovers(this.layout, id);
      const dir = this.layout.sessionDir(id);
      const hasLog = await this.layout.fileExists(id);
      // An id without a log may still hold inbox entries or a key, written before the session.
      if (!hasLog && !(await holdsInboxOrKey(this.layout, id))) {
        const tombstone = await readTombstone(this.layout, id, this.options.tombstoneMs);
        if (!tombstone) throw notFound(id);
        return alreadyErasedReceipt(id, tombstone.until);
      }
      // Wait for a writer in another process to finish; the lock file goes with the directory.
      const lock = await acquireFileLock(join(dir, LOCK_FILE), {
        timeoutMs: this.options.lockTimeoutMs,
        staleMs: this.options.lockStaleMs,
      });
      try {
        // Another tenant's session is not there for this scope; checked under the erase's lock.
        if (hasLog && scope !== ALL_TENANTS && !inTenantScope(scope, await this.readHeader(id))) throw notFound(id);
        if (hasLog) await this.retireSessionSpend(id);
        const counted = await countForErase(this.layout, id, hasLog);
        const now = Date.now();
        const until = now + this.options.tombstoneMs;
        await writeTombstone(this.layout, id, { erasedAt: now, until });
        // One rename takes the whole directory out of the store's view, then it is deleted.
        const doomed = join(this.root, `${ERASING_PREFIX}${id}-${randomUUID()}`);
        await rename(dir, doomed);
        await fsyncDir(this.root);
        // After the rename: an entry a put lands from now on fails, or its put sees the session gone.
        const transcriptEntries = await dropTranscriptPointers(this.layout, doomed, id);
        await rm(doomed, { recursive: true, force: true });
        await fsyncDir(this.root);
        return {
          sessionId: id,
          erased: true,
          removed: { ...counted.removed, transcriptEntries },
          places: [...counted.places, { place: join(this.root, TRANSCRIPT_INDEX_DIR), removed: transcriptEntries }],
          tombstoneUntil: until,
          notes: [`directory ${dir} removed; tombstone kept in ${this.layout.tombstonePath(id)}`],
        };
      } finally {
        await lock.release();
      }
    });
  }

  /** What a session about to be erased spent, kept in its tenant's `.erased` file (nothing for a damaged log). */
  private async retireSessionSpend(id: string): Promise<void> {
    let file: SessionFile;
    try {
      file = await this.files.refresh(id);
    } catch (error) {
      if (error instanceof SessionlogError) return;
      throw error;
    }
    const { header, events } = file.scanner.session;
    const spent = spendOfEvents(events.slice(header.seedLength ?? 0));
    if (spent) await this.spendFiles.retire(tenantOf(header), spent);
  }

  watch(id: string, fromSeq: number, options: WatchOptions = {}): AsyncIterable<StoredEvent> {
    return this.tail.watch(id, fromSeq, options.signal);
  }

  close(): Promise<void> {
    if (!this.closed) {
      this.closed = true;
      this.copies.clear();
      this.tail.close();
    }
    return Promise.resolve();
  }

  // -------------------------------------------------------------------------------------------

  private readState(id: string): Promise<SessionFile> {
    this.assertOpen();
    assertSessionId(id);
    return this.copies.serial(id, () => this.files.refresh(id));
  }

  /**
   * Runs a write under the in-process serializer and the cross-process lock file, with the state
   * refreshed under the lock (after fencing off the writer of a broken lock). Wakes in-process
   * watchers when something was written.
   */
  private async write<T>(
    id: string,
    body: (file: SessionFile, lock: FileLock) => Promise<{ result: T; written: boolean }>,
    check: () => void,
  ): Promise<T> {
    this.assertOpen();
    check();
    const outcome = await this.copies.serial(id, async () => {
      await this.requireSession(id);
      const lock = await acquireFileLock(join(this.layout.sessionDir(id), LOCK_FILE), {
        timeoutMs: this.options.lockTimeoutMs,
        staleMs: this.options.lockStaleMs,
      }).catch((error: unknown) => {
        // The directory went away under us: the session was erased meanwhile.
        throw isErrno(error, 'ENOENT') ? notFound(id) : error;
      });
      try {
        if (lock.broken.length > 0) await this.files.fenceOffBrokenLock(id, lock);
        return await body(await this.files.refresh(id), lock);
      } finally {
        await lock.release();
      }
    });
    if (outcome.written) this.tail.appended(id);
    return outcome.result;
  }
}
