/**
 * JSONL backend of `SessionStore` (DESIGN §4, dsh-spec §8.6): one directory per session.
 *
 * Layout under the root (directories 0700, files 0600):
 *
 * ```
 * <root>/<sessionId>/session.jsonl          header line, then one event per line
 * <root>/<sessionId>/session.lock           exclusive writer lock (present only while writing)
 * <root>/<sessionId>/artifacts/<name>       artifact files
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
import { createHash, randomUUID, type Hash } from 'node:crypto';
import { mkdirSync, realpathSync } from 'node:fs';
import { link, mkdir, open, readFile, readdir, rename, rm, stat, unlink, type FileHandle } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import {
  SessionlogError,
  addSpend,
  assertSessionId,
  emptySpend,
  isValidSessionId,
  jsonEqual,
  parseHeader,
  spendOfEvents,
  tenantOf,
  type SpendTotals,
  type StoredEvent,
  type NewEvent,
  type SessionHeader,
  type SessionView,
  type SurfaceSnapshot,
} from '../../session/index.js';
import { anchorMatches, anchorOpRanges, newPrefixHash, sealAnchor, type PrefixAnchor } from '../anchor.js';
import { type ArtifactStore } from '../artifacts.js';
import {
  LogScanner,
  ResumedLog,
  assertScanned,
  assertTornTailUnacknowledged,
  headerProblemReport,
  scanReport,
  type TornTail,
} from '../scanner.js';
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
import { acquireFileLock, type FileLock } from '../file-lock.js';
import { pacingStore, parsePaceState, type PaceRowUpdate, type PaceState, type PacingStore } from '../pacing.js';
import { spendStore, type SpendStore, type TenantSpend } from '../spend.js';
import { type ProjectionCacheStore } from '../projection-cache.js';
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
  tenantScope,
  type TenantScope,
  type ResolvedStoreOptions,
  type StoreOptions,
  type AnchoredRead,
  type AppendOptions,
  type AppendResult,
  type ErasedPlace,
  type InboxStore,
  type LoadedSession,
  type ScanReport,
  type SessionKeyStore,
  type SessionStore,
  type StoreEraseReceipt,
  type TranscriptIndex,
  type WatchOptions,
} from '../store.js';
import { isErrno, fsyncDir, ensureDir, replaceFile, readIfExists, readFully, writeFully } from './files.js';
import { headerLine, encodeBatch, readHeaderLine, prefixLines, scanLines, type Format } from './format.js';
import {
  LOG_FILE,
  LOCK_FILE,
  ARTIFACT_DIR,
  CACHE_FILE,
  INBOX_DIR,
  KEY_FILE,
  TRANSCRIPTS_DIR,
  PACING_DIR,
  SPEND_DIR,
  TRANSCRIPT_INDEX_DIR,
  TRANSCRIPT_FILE_PATTERN,
  TOMBSTONE_DIR,
  ERASING_PREFIX,
} from './layout.js';
import { JsonlArtifacts } from './artifacts.js';
import { JsonlProjectionCache } from './projection-cache.js';
import { JsonlInbox } from './inbox.js';
import { JsonlSessionKeys } from './keys.js';
import { JsonlTranscripts, transcriptPointerTarget } from './transcripts.js';

/** What this process knows of one session's file: the validated copy and where it ends. */
type SessionFile = {
  format: Format;
  scanner: LogScanner;
  ino: number;
  /** Byte offset through which the file has been read (beyond `scanner.validEnd` only with a torn tail). */
  scannedEnd: number;
  /** The torn final write found by the last read, if any. */
  torn: TornTail | undefined;
  /** The hash of the file's bytes before `scanner.validEnd`, as read and validated or written (anchor.ts). */
  digest: Hash;
};

/** Opens (creating the root directory 0700 if needed) a JSONL store rooted at `root`. */
export function openJsonlStore(root: string, options: StoreOptions = {}): JsonlSessionStore {
  return new JsonlSessionStore(root, resolveStoreOptions(options));
}

export class JsonlSessionStore implements SessionStore {
  readonly kind = 'jsonl' as const;
  readonly root: string;
  readonly location: string;
  readonly artifacts: ArtifactStore;
  readonly projectionCache: ProjectionCacheStore;
  readonly inbox: InboxStore;
  readonly sessionKeys: SessionKeyStore;
  readonly transcripts: TranscriptIndex;
  readonly pacing: PacingStore;
  readonly spend: SpendStore;
  private readonly copies: SessionCopies<SessionFile>;
  private readonly tail: LiveTail;
  private closed = false;

  constructor(
    root: string,
    private readonly options: ResolvedStoreOptions,
  ) {
    const absolute = resolve(root);
    mkdirSync(absolute, { recursive: true, mode: 0o700 });
    this.root = realpathSync(absolute);
    this.location = `jsonl:${this.root}`;
    this.copies = new SessionCopies(options.sessionCacheSize);
    this.tail = new LiveTail(this.location, options.pollIntervalMs, (id, fromSeq, limit) =>
      this.readFrom(id, fromSeq, limit),
    );
    this.artifacts = new JsonlArtifacts(this);
    this.projectionCache = new JsonlProjectionCache(this);
    this.inbox = new JsonlInbox(this);
    this.sessionKeys = new JsonlSessionKeys(this);
    this.transcripts = new JsonlTranscripts(this);
    this.pacing = pacingStore((key, change) => this.updatePace(key, change));
    this.spend = spendStore((tenant) => this.tenantSpend(tenant));
  }

  /** The tenant's sessions' spend, from their validated copies, plus what its erased sessions spent. */
  private async tenantSpend(tenant: string): Promise<TenantSpend> {
    this.assertOpen();
    const erased = await readIfExists(join(this.root, SPEND_DIR, `${tenant}.erased.json`));
    const total: TenantSpend = {
      ...(erased === undefined ? emptySpend() : this.parseSpend(erased, tenant)),
      sessions: 0,
    };
    for (const header of await this.list(tenantScope(tenant))) {
      let spent: SpendTotals | undefined;
      try {
        spent = await this.sessionSpend(header);
      } catch (error) {
        // Erased since it was listed, or damaged: nothing of it can be read.
        if (error instanceof SessionlogError) continue;
        throw error;
      }
      if (!spent) continue;
      addSpend(total, spent);
      total.sessions += 1;
    }
    return total;
  }

  /** What a session spent: its events after the prefix a fork or salvage copied (the header's `seedLength`). */
  private async sessionSpend(header: SessionHeader): Promise<SpendTotals | undefined> {
    return spendOfEvents(await this.readFrom(header.id, header.seedLength ?? 0));
  }

  private parseSpend(text: string, tenant: string): SpendTotals {
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      value = undefined;
    }
    const spent = value as Partial<SpendTotals> | undefined;
    const fields = ['tokens', 'costUsd', 'modelCalls', 'toolCalls', 'wallMs'] as const;
    if (!spent || typeof spent !== 'object' || !fields.every((f) => Number.isFinite(spent[f])))
      throw new SessionlogError(
        'CORRUPT_LOG',
        `${join(this.root, SPEND_DIR, `${tenant}.erased.json`)} does not hold a tenant's spend`,
      );
    return {
      tokens: spent.tokens!,
      costUsd: spent.costUsd!,
      modelCalls: spent.modelCalls!,
      toolCalls: spent.toolCalls!,
      wallMs: spent.wallMs!,
    };
  }

  /** Adds what an erased session spent to its tenant's `.erased` file, under the tenant's lock file. */
  private async retireSpend(tenant: string, spent: SpendTotals): Promise<void> {
    const dir = join(this.root, SPEND_DIR);
    await mkdir(dir, { recursive: true, mode: 0o700 });
    const path = join(dir, `${tenant}.erased.json`);
    const lock = await acquireFileLock(join(dir, `${tenant}.lock`), {
      timeoutMs: this.options.lockTimeoutMs,
      staleMs: this.options.lockStaleMs,
    });
    try {
      const text = await readIfExists(path);
      const total = text === undefined ? emptySpend() : this.parseSpend(text, tenant);
      addSpend(total, spent);
      await replaceFile(path, dir, JSON.stringify(total));
    } finally {
      await lock.release();
    }
  }

  /** A pacing bucket's read-modify-write under its own lock file (a replaced file: whole or not at all). */
  private async updatePace(key: string, change: PaceRowUpdate): Promise<PaceState | undefined> {
    this.assertOpen();
    const dir = join(this.root, PACING_DIR);
    await mkdir(dir, { recursive: true, mode: 0o700 });
    const stem = createHash('sha256').update(key, 'utf8').digest('hex');
    const path = join(dir, `${stem}.json`);
    const lock = await acquireFileLock(join(dir, `${stem}.lock`), {
      timeoutMs: this.options.lockTimeoutMs,
      staleMs: this.options.lockStaleMs,
    });
    try {
      const text = await readIfExists(path);
      const previous = text === undefined ? undefined : parsePaceState(text, path);
      const next = change(previous);
      if (next === undefined) return previous;
      await replaceFile(path, dir, JSON.stringify(next));
      return next;
    } finally {
      await lock.release();
    }
  }

  sessionDir(id: string): string {
    return join(this.root, id);
  }

  private logPath(id: string): string {
    return join(this.root, id, LOG_FILE);
  }

  inboxDir(id: string): string {
    return join(this.root, id, INBOX_DIR);
  }

  keyPath(id: string): string {
    return join(this.root, id, KEY_FILE);
  }

  transcriptsDir(id: string): string {
    return join(this.root, id, TRANSCRIPTS_DIR);
  }

  /** The directory of the pointer of (scope, digest) key `k`. */
  transcriptPointerDir(k: string): string {
    return join(this.root, TRANSCRIPT_INDEX_DIR, k.slice(0, 2));
  }

  /** Makes the directory of the pointer of `k` unless it exists. */
  async ensureTranscriptPointerDir(k: string): Promise<void> {
    const index = join(this.root, TRANSCRIPT_INDEX_DIR);
    await ensureDir(index, this.root);
    await ensureDir(this.transcriptPointerDir(k), index);
  }

  /** Makes the session's directory unless it exists (an inbox entry or key may come before the session). */
  async ensureSessionDir(id: string): Promise<void> {
    await ensureDir(this.sessionDir(id), this.root);
  }

  private tombstonePath(id: string): string {
    return join(this.root, TOMBSTONE_DIR, `${id}.json`);
  }

  assertOpen(): void {
    if (this.closed) throw storeClosed();
  }

  /** Throws SESSION_NOT_FOUND unless the session's log file exists. */
  async requireSession(id: string): Promise<void> {
    if (!(await this.fileExists(id))) throw notFound(id);
  }

  /** Throws unless the session's log file exists: SESSION_ERASED while its tombstone lasts, else SESSION_NOT_FOUND. */
  async requireLiveSession(id: string): Promise<void> {
    if (await this.fileExists(id)) return;
    await this.refuseTombstoned(id);
    throw notFound(id);
  }

  private async fileExists(id: string): Promise<boolean> {
    try {
      await stat(this.logPath(id));
      return true;
    } catch (error) {
      if (isErrno(error, 'ENOENT')) return false;
      throw error;
    }
  }

  /** Opens the session's log for reading; SESSION_NOT_FOUND when there is none. */
  private async openLog(id: string): Promise<FileHandle> {
    try {
      return await open(this.logPath(id), 'r');
    } catch (error) {
      if (isErrno(error, 'ENOENT')) throw notFound(id);
      throw error;
    }
  }

  async create(header: SessionHeader): Promise<void> {
    this.assertOpen();
    const parsed = parseHeader(header, `create session ${String((header as { id?: unknown } | null)?.id)}`);
    const id = parsed.id;
    await this.copies.serial(id, async () => {
      await this.refuseTombstoned(id);
      const dir = this.sessionDir(id);
      try {
        await mkdir(dir, { mode: 0o700 });
        await fsyncDir(this.root);
      } catch (error) {
        if (!isErrno(error, 'EEXIST')) throw error;
      }
      if (await this.fileExists(id)) return this.checkSameHeader(id, parsed);
      // Publish the header atomically: a temp file linked into place never clobbers a log
      // another process created meanwhile.
      const temp = join(dir, `${LOG_FILE}.${randomUUID()}.tmp`);
      const handle = await open(temp, 'wx', 0o600);
      try {
        await handle.writeFile(headerLine(parsed));
        await handle.sync();
      } finally {
        await handle.close();
      }
      try {
        await link(temp, this.logPath(id));
      } catch (error) {
        if (!isErrno(error, 'EEXIST')) throw error;
        return this.checkSameHeader(id, parsed);
      } finally {
        await unlink(temp);
      }
      await fsyncDir(dir);
    });
  }

  /** SESSION_ERASED while the id's tombstone lasts; an expired tombstone is removed. */
  async refuseTombstoned(id: string): Promise<void> {
    const tombstone = await this.readTombstone(id);
    if (!tombstone) return;
    if (tombstone.until > Date.now()) throw sessionErased(id, tombstone.erasedAt, tombstone.until);
    await unlink(this.tombstonePath(id)).catch((error: unknown) => {
      if (!isErrno(error, 'ENOENT')) throw error;
    });
  }

  private async readTombstone(id: string): Promise<{ erasedAt: number; until: number } | undefined> {
    let text: string;
    try {
      text = await readFile(this.tombstonePath(id), 'utf8');
    } catch (error) {
      if (isErrno(error, 'ENOENT')) return undefined;
      throw error;
    }
    try {
      const value = JSON.parse(text) as { erasedAt?: unknown; until?: unknown };
      if (typeof value.erasedAt === 'number' && typeof value.until === 'number')
        return { erasedAt: value.erasedAt, until: value.until };
    } catch {
      // A damaged tombstone still marks the id as erased, for the default period from now.
    }
    return { erasedAt: Date.now(), until: Date.now() + this.options.tombstoneMs };
  }

  private async checkSameHeader(id: string, header: SessionHeader): Promise<void> {
    if (!jsonEqual(await this.readHeader(id), header)) throw alreadyExists(id);
  }

  private async readHeader(id: string): Promise<SessionHeader> {
    const handle = await this.openLog(id);
    try {
      return (await readHeaderLine(handle, id, this.logPath(id))).header;
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
    return this.fileExists(id);
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
        await this.writeBatch(id, file, lock, plan.events);
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
        if (closers.length > 0) await this.writeBatch(id, file, lock, closers);
        else if (file.torn) await this.cutTornTail(id, file, lock);
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
      const handle = await this.openLog(id);
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
    const path = this.logPath(id);
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
    const path = this.logPath(id);
    const handle = await this.openLog(id);
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
      await this.removeLeftovers(id);
      const dir = this.sessionDir(id);
      const hasLog = await this.fileExists(id);
      // An id without a log may still hold inbox entries or a key, written before the session.
      if (!hasLog && !(await this.holdsInboxOrKey(id))) {
        const tombstone = await this.readTombstone(id);
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
        const counted = await this.countForErase(id, hasLog);
        const now = Date.now();
        const until = now + this.options.tombstoneMs;
        await this.writeTombstone(id, { erasedAt: now, until });
        // One rename takes the whole directory out of the store's view, then it is deleted.
        const doomed = join(this.root, `${ERASING_PREFIX}${id}-${randomUUID()}`);
        await rename(dir, doomed);
        await fsyncDir(this.root);
        // After the rename: an entry a put lands from now on fails, or its put sees the session gone.
        const transcriptEntries = await this.dropTranscriptPointers(doomed, id);
        await rm(doomed, { recursive: true, force: true });
        await fsyncDir(this.root);
        return {
          sessionId: id,
          erased: true,
          removed: { ...counted.removed, transcriptEntries },
          places: [...counted.places, { place: join(this.root, TRANSCRIPT_INDEX_DIR), removed: transcriptEntries }],
          tombstoneUntil: until,
          notes: [`directory ${dir} removed; tombstone kept in ${this.tombstonePath(id)}`],
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
      file = await this.refresh(id);
    } catch (error) {
      if (error instanceof SessionlogError) return;
      throw error;
    }
    const { header, events } = file.scanner.session;
    const spent = spendOfEvents(events.slice(header.seedLength ?? 0));
    if (spent) await this.retireSpend(tenantOf(header), spent);
  }

  /** Directories of an erase that crashed after taking the session out of view. */
  private async removeLeftovers(id: string): Promise<void> {
    const prefix = `${ERASING_PREFIX}${id}-`;
    for (const name of await readdir(this.root)) {
      // The suffix after the id is a UUID (no dashes beyond its own), so another id cannot match.
      if (name.startsWith(prefix) && /^[0-9a-f-]{36}$/.test(name.slice(prefix.length))) {
        await this.dropTranscriptPointers(join(this.root, name), id);
        await rm(join(this.root, name), { recursive: true, force: true });
      }
    }
  }

  /**
   * Takes away the pointers of the transcript entries in session directory `dir` that still name
   * session `id`; how many it took away.
   */
  private async dropTranscriptPointers(dir: string, id: string): Promise<number> {
    let names: string[];
    try {
      names = await readdir(join(dir, TRANSCRIPTS_DIR));
    } catch (error) {
      if (isErrno(error, 'ENOENT')) return 0;
      throw error;
    }
    let dropped = 0;
    for (const name of names)
      if (TRANSCRIPT_FILE_PATTERN.test(name) && (await this.dropTranscriptPointer(name.slice(0, -'.json'.length), id)))
        dropped++;
    return dropped;
  }

  /**
   * Takes away the pointer of `k` if it names session `id`. A file system cannot remove a file only
   * if it still holds what was read, so the pointer is first renamed aside (taking whatever is
   * current), then read: one naming another session (a newer put) is linked back, unless an even
   * newer put has placed one meanwhile. True when it named `id`.
   */
  async dropTranscriptPointer(k: string, id: string): Promise<boolean> {
    const dir = this.transcriptPointerDir(k);
    const path = join(dir, `${k}.json`);
    const aside = join(dir, `.${k}.${randomUUID()}.aside`);
    try {
      await rename(path, aside);
    } catch (error) {
      if (isErrno(error, 'ENOENT')) return false;
      throw error;
    }
    const names = transcriptPointerTarget(await readFile(aside, 'utf8')) === id;
    try {
      if (!names) await link(aside, path);
    } catch (error) {
      if (!isErrno(error, 'EEXIST')) throw error;
    } finally {
      await unlink(aside);
    }
    await fsyncDir(dir);
    return names;
  }

  private async holdsInboxOrKey(id: string): Promise<boolean> {
    return (await this.inboxFiles(id)).length > 0 || (await readIfExists(this.keyPath(id))) !== undefined;
  }

  /** The file names of the session's inbox entries (not temp files of writes under way). */
  async inboxFiles(id: string): Promise<string[]> {
    try {
      return (await readdir(this.inboxDir(id))).filter((name) => !name.startsWith('.') && name.endsWith('.json'));
    } catch (error) {
      if (isErrno(error, 'ENOENT')) return [];
      throw error;
    }
  }

  private async countForErase(
    id: string,
    hasLog: boolean,
  ): Promise<{ removed: Omit<StoreEraseReceipt['removed'], 'transcriptEntries'>; places: ErasedPlace[] }> {
    const dir = this.sessionDir(id);
    let events = 0;
    if (hasLog) {
      const log = await readFile(this.logPath(id));
      let lines = 0;
      for (let i = log.indexOf(10); i >= 0; i = log.indexOf(10, i + 1)) lines++;
      events = Math.max(0, lines - 1);
    }
    let artifacts = 0;
    try {
      artifacts = (await readdir(join(dir, ARTIFACT_DIR))).length;
    } catch (error) {
      if (!isErrno(error, 'ENOENT')) throw error;
    }
    const names = await readdir(dir);
    const checkpoint = names.includes(CACHE_FILE) ? 1 : 0;
    const inboxEntries = (await this.inboxFiles(id)).length;
    const sessionKey = names.includes(KEY_FILE) ? 1 : 0;
    const header = hasLog ? 1 : 0;
    return {
      removed: { header, events, artifacts, projectionCheckpoints: checkpoint, inboxEntries, sessionKey },
      places: [
        { place: `${this.logPath(id)} (header and event lines)`, removed: header + events },
        { place: join(dir, ARTIFACT_DIR), removed: artifacts },
        { place: join(dir, CACHE_FILE), removed: checkpoint },
        { place: this.inboxDir(id), removed: inboxEntries },
        { place: this.keyPath(id), removed: sessionKey },
      ],
    };
  }

  private async writeTombstone(id: string, tombstone: { erasedAt: number; until: number }): Promise<void> {
    const dir = join(this.root, TOMBSTONE_DIR);
    try {
      await mkdir(dir, { mode: 0o700 });
      await fsyncDir(this.root);
    } catch (error) {
      if (!isErrno(error, 'EEXIST')) throw error;
    }
    const temp = join(dir, `.${id}.${randomUUID()}.tmp`);
    const handle = await open(temp, 'wx', 0o600);
    try {
      await handle.writeFile(JSON.stringify(tombstone));
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(temp, this.tombstonePath(id));
    await fsyncDir(dir);
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
    return this.copies.serial(id, () => this.refresh(id));
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
      const lock = await acquireFileLock(join(this.sessionDir(id), LOCK_FILE), {
        timeoutMs: this.options.lockTimeoutMs,
        staleMs: this.options.lockStaleMs,
      }).catch((error: unknown) => {
        // The directory went away under us: the session was erased meanwhile.
        throw isErrno(error, 'ENOENT') ? notFound(id) : error;
      });
      try {
        if (lock.broken.length > 0) await this.fenceOffBrokenLock(id, lock);
        return await body(await this.refresh(id), lock);
      } finally {
        await lock.release();
      }
    });
    if (outcome.written) this.tail.appended(id);
    return outcome.result;
  }

  /**
   * Brings the session's validated copy up to the file (reading only bytes past its valid end).
   * A file replaced (another inode) or shorter than the copy is read again from the start.
   * CORRUPT_LOG, with nothing cached, when the stored log is damaged.
   */
  private async refresh(id: string): Promise<SessionFile> {
    const path = this.logPath(id);
    const handle = await this.openLog(id);
    try {
      const info = await handle.stat();
      let file = this.copies.get(id);
      if (file && (file.ino !== info.ino || info.size < file.scanner.validEnd)) file = undefined;
      if (!file) {
        const { header, format, end, line } = await readHeaderLine(handle, id, path);
        const scanner = new LogScanner(header, format === 2 ? 'jsonl-v2' : 'jsonl-v1', `session ${id} in ${path}`, end);
        const digest = newPrefixHash().update(line).update('\n');
        file = { format, scanner, ino: info.ino, scannedEnd: end, torn: undefined, digest };
      }
      const from = file.scanner.validEnd;
      if (info.size > from) {
        const bytes = await readFully(handle, from, info.size - from);
        scanLines(file.scanner, file.format, bytes, from);
        file.digest.update(bytes.subarray(0, file.scanner.validEnd - from));
      }
      file.torn = file.scanner.finish();
      file.scannedEnd = Math.max(info.size, file.scanner.validEnd);
      if (file.scanner.problem) {
        this.copies.evict(id);
        assertScanned(file.scanner);
      }
      this.copies.set(id, file);
      return file;
    } finally {
      await handle.close();
    }
  }

  /**
   * The fence before a write through `handle`: this process still holds the lock, and the log is
   * still the file (inode) and size it read. Otherwise SEQ_CONFLICT and nothing is written.
   */
  private async assertFenced(id: string, file: SessionFile, lock: FileLock, handle: FileHandle): Promise<void> {
    const [held, opened, named] = [
      await lock.held(),
      await handle.stat(),
      await stat(this.logPath(id)).catch(() => undefined),
    ];
    if (held && opened.ino === file.ino && named?.ino === file.ino && opened.size === file.scannedEnd) return;
    this.copies.evict(id);
    throw lostLock(id, 'before writing; nothing was written');
  }

  /** Durably cuts a torn final write (fenced; caller holds the lock). */
  private async cutTornTail(id: string, file: SessionFile, lock: FileLock): Promise<void> {
    const handle = await open(this.logPath(id), 'r+');
    try {
      await this.assertFenced(id, file, lock, handle);
      await handle.truncate(file.scanner.validEnd);
      await handle.sync();
    } finally {
      await handle.close();
    }
    file.torn = undefined;
    file.scannedEnd = file.scanner.validEnd;
  }

  /**
   * Writes planned events as one batch at the valid end (cutting a torn final write first), fsyncs,
   * and confirms the batch counts before committing it to the validated copy. A failed write is
   * cut back while the lock is still held.
   */
  private async writeBatch(
    id: string,
    file: SessionFile,
    lock: FileLock,
    events: readonly StoredEvent[],
  ): Promise<void> {
    const bytes = encodeBatch(events, file.format);
    const at = file.scanner.validEnd;
    const handle = await open(this.logPath(id), 'r+');
    let confirmed: 'kept' | 'moved' | 'lost';
    try {
      await this.assertFenced(id, file, lock, handle);
      try {
        if (file.torn) await handle.truncate(at);
        await writeFully(handle, bytes, at);
        await handle.sync();
      } catch (error) {
        this.copies.evict(id);
        if (await lock.held()) {
          await handle.truncate(at).then(
            () => handle.sync(),
            (cleanup: unknown) => {
              throw new SessionlogError(
                'UNAVAILABLE',
                `append to ${this.logPath(id)} failed and the partial batch could not be removed; the next writer cuts it off as a torn final write`,
                {
                  cause: new AggregateError([error, cleanup]),
                },
              );
            },
          );
        }
        throw error;
      }
      confirmed = await this.confirmWritten(id, handle, lock, bytes, at);
    } finally {
      await handle.close();
    }
    if (confirmed === 'lost') {
      this.copies.evict(id);
      throw lostLock(
        id,
        'while writing; the batch may or may not have been kept (a retry with the same op finds it if it was)',
      );
    }
    // Kept, but in the new inode of the writer that broke the lock: read the file afresh next time.
    if (confirmed === 'moved') return;
    file.scanner.commitWritten(events, at + bytes.length);
    file.digest.update(bytes);
    file.torn = undefined;
    file.scannedEnd = at + bytes.length;
  }

  /**
   * After the fsync: the batch counts if this process still held the lock with the log still at
   * the inode it wrote, or if the writer that broke the lock moved the log to a new inode that
   * holds these very bytes at this offset (it read them as committed).
   */
  private async confirmWritten(
    id: string,
    handle: FileHandle,
    lock: FileLock,
    bytes: Buffer,
    at: number,
  ): Promise<'kept' | 'moved' | 'lost'> {
    // The order matters: a lock broken after this check is broken after the fsync, so its new
    // holder reads this batch as committed.
    const held = await lock.held();
    const opened = await handle.stat();
    const named = await stat(this.logPath(id)).catch((error: unknown) => {
      if (isErrno(error, 'ENOENT')) return undefined;
      throw error;
    });
    if (named === undefined) return 'lost';
    // Not moved: ours if the lock still is; if it was broken, the new holder may or may not keep it.
    if (named.ino === opened.ino) return held ? 'kept' : 'lost';
    let current: FileHandle;
    try {
      current = await open(this.logPath(id), 'r');
    } catch (error) {
      if (isErrno(error, 'ENOENT')) return 'lost';
      throw error;
    }
    try {
      return (await readFully(current, at, bytes.length)).equals(bytes) ? 'moved' : 'lost';
    } finally {
      await current.close();
    }
  }

  /**
   * After a lock was broken, its old holder may still write through a handle it opened: move the
   * log's valid bytes to a new inode (a copy renamed over the name), so such a write lands in
   * the old file, which no reader opens any more. A torn final write is not copied.
   */
  private async fenceOffBrokenLock(id: string, lock: FileLock): Promise<void> {
    this.copies.evict(id);
    const file = await this.refresh(id);
    const path = this.logPath(id);
    const temp = join(this.sessionDir(id), `${LOG_FILE}.${randomUUID()}.tmp`);
    const source = await open(path, 'r');
    try {
      const bytes = await readFully(source, 0, file.scanner.validEnd);
      const copy = await open(temp, 'wx', 0o600);
      try {
        await writeFully(copy, bytes, 0);
        await copy.sync();
      } finally {
        await copy.close();
      }
    } finally {
      await source.close();
    }
    if (!(await lock.held())) {
      await unlink(temp);
      throw lostLock(id, 'before writing; nothing was written');
    }
    await rename(temp, path);
    await fsyncDir(this.sessionDir(id));
    await lock.clearBroken();
    this.copies.evict(id);
  }
}

function lostLock(id: string, when: string): SessionlogError {
  return new SessionlogError(
    'SEQ_CONFLICT',
    `session ${id}: this writer lost the session's lock ${when}. Another writer took the lock because this one made no progress for longer than lockStaleMs (a paused or very slow process); reload the session and retry`,
  );
}
