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
 * ```
 *
 * Format: line 1 is `{"type":"session", ...SessionHeader}` (its `version` is checked first and a
 * newer one refused); every later line is one event envelope
 * `{seq, type, time, data, surfaceOp?, sourceEventSeqs?, op}` as JSON. A batch is written with
 * one positioned write and one fsync; a failed write is truncated back. A damaged line, a seq
 * gap or a final line without newline after the last committed `turn/end` is a torn tail
 * (ignored by reads, truncated by `load` and `append`); earlier damage is CORRUPT_LOG.
 *
 * Writers in several processes are serialized by the session's lock file; under it the writer
 * re-reads the file's new bytes, so a stale `expectedSeq` is always a SEQ_CONFLICT. The op index
 * is built in memory while reading.
 */
import { randomUUID } from 'node:crypto';
import { mkdirSync, realpathSync } from 'node:fs';
import { link, mkdir, open, readFile, readdir, rename, stat, unlink, type FileHandle } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import {
  SessionlogError,
  assertSessionId,
  isValidSessionId,
  jsonEqual,
  parseHeader,
  type StoredEvent,
  type NewEvent,
  type SessionHeader,
  type SessionView,
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
  indexOps,
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
  type OpRange,
  type ResolvedStoreOptions,
  type StoreOptions,
} from './base.js';
import { acquireFileLock } from './file-lock.js';
import { parseProjectionCacheRecord, serializeProjectionCacheRecord, type ProjectionCacheRecord, type ProjectionCacheStore } from './projection-cache.js';
import type { AppendOptions, AppendResult, LoadedSession, SessionStore, WatchOptions } from './store.js';

const LOG_FILE = 'session.jsonl';
const LOCK_FILE = 'session.lock';
const ARTIFACT_DIR = 'artifacts';
const CACHE_FILE = 'projection-cache.json';

/** What this process knows of one session's file: the validated prefix and where it ends. */
type SessionFileState = {
  header: SessionHeader;
  scanner: LogScanner;
  ops: Map<string, OpRange>;
  ino: number;
  /** Byte offset just past the last record of the valid prefix. */
  validEnd: number;
  /** Byte offset through which the file has been scanned (> validEnd only with a torn tail). */
  scannedEnd: number;
};

/** Opens (creating the root directory 0700 if needed) a JSONL store rooted at `root`. */
export function openJsonlStore(root: string, options: StoreOptions = {}): JsonlSessionStore {
  return new JsonlSessionStore(root, resolveStoreOptions(options));
}

function isErrno(error: unknown, code: string): boolean {
  return (error as NodeJS.ErrnoException | undefined)?.code === code;
}

/** fsyncs a directory so a created or renamed entry in it survives a crash. */
async function fsyncDir(path: string): Promise<void> {
  const handle = await open(path, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

async function readFully(handle: FileHandle, position: number, length: number): Promise<Buffer> {
  const buffer = Buffer.alloc(length);
  let done = 0;
  while (done < length) {
    const { bytesRead } = await handle.read(buffer, done, length - done, position + done);
    if (bytesRead === 0) return buffer.subarray(0, done);
    done += bytesRead;
  }
  return buffer;
}

async function writeFully(handle: FileHandle, buffer: Buffer, position: number): Promise<void> {
  let done = 0;
  while (done < buffer.length) {
    const { bytesWritten } = await handle.write(buffer, done, buffer.length - done, position + done);
    done += bytesWritten;
  }
}

function headerLine(header: SessionHeader): string {
  return `${JSON.stringify({ type: 'session', ...header })}\n`;
}

/** Reads and validates the header line; returns the header and the byte offset after it. */
async function readHeaderLine(handle: FileHandle, id: string, path: string): Promise<{ header: SessionHeader; end: number }> {
  let collected = Buffer.alloc(0);
  for (let position = 0; ; ) {
    const chunk = await readFully(handle, position, 64 * 1024);
    const newline = chunk.indexOf(10);
    if (newline >= 0) {
      collected = Buffer.concat([collected, chunk.subarray(0, newline)]);
      break;
    }
    if (chunk.length === 0) {
      throw new SessionlogError('CORRUPT_LOG', `${path}: the header line is incomplete; restore the file from a backup`);
    }
    collected = Buffer.concat([collected, chunk]);
    position += chunk.length;
  }
  let raw: unknown;
  try {
    raw = JSON.parse(collected.toString('utf8'));
  } catch (error) {
    throw new SessionlogError('CORRUPT_LOG', `${path}: the header line is not JSON; restore the file from a backup`, { cause: error });
  }
  if (typeof raw !== 'object' || raw === null || (raw as { type?: unknown }).type !== 'session') {
    throw new SessionlogError('CORRUPT_LOG', `${path}: the first line is not a {"type":"session"} header record`);
  }
  const { type: _type, ...fields } = raw as Record<string, unknown>;
  const header = parseHeader(fields, path);
  if (header.id !== id) {
    throw new SessionlogError('CORRUPT_LOG', `${path}: header names session ${header.id} but the directory is ${id}; the file was moved or copied by hand`);
  }
  return { header, end: collected.length + 1 };
}

export class JsonlSessionStore implements SessionStore {
  readonly kind = 'jsonl' as const;
  readonly root: string;
  readonly location: string;
  readonly artifacts: ArtifactStore;
  readonly projectionCache: ProjectionCacheStore;
  private readonly states: LruMap<string, SessionFileState>;
  private readonly serial = new KeyedSerializer();
  private readonly closeListeners = new Set<() => void>();
  private closed = false;

  constructor(
    root: string,
    private readonly options: ResolvedStoreOptions,
  ) {
    const absolute = resolve(root);
    mkdirSync(absolute, { recursive: true, mode: 0o700 });
    this.root = realpathSync(absolute);
    this.location = `jsonl:${this.root}`;
    this.states = new LruMap(options.sessionCacheSize);
    this.artifacts = new JsonlArtifacts(this);
    this.projectionCache = new JsonlProjectionCache(this);
  }

  sessionDir(id: string): string {
    return join(this.root, id);
  }

  private logPath(id: string): string {
    return join(this.root, id, LOG_FILE);
  }

  assertOpen(): void {
    if (this.closed) throw storeClosed();
  }

  /** Throws SESSION_NOT_FOUND unless the session's log file exists. */
  async requireSession(id: string): Promise<void> {
    if (!(await this.fileExists(id))) throw notFound(id);
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

  async create(header: SessionHeader): Promise<void> {
    this.assertOpen();
    const parsed = parseHeader(header, `create session ${String((header as { id?: unknown } | null)?.id)}`);
    const id = parsed.id;
    await this.serial.run(id, async () => {
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

  private async checkSameHeader(id: string, header: SessionHeader): Promise<void> {
    if (!jsonEqual(await this.readHeader(id), header)) throw alreadyExists(id);
  }

  private async readHeader(id: string): Promise<SessionHeader> {
    const cached = this.states.get(id);
    if (cached) return cached.header;
    let handle: FileHandle;
    try {
      handle = await open(this.logPath(id), 'r');
    } catch (error) {
      if (isErrno(error, 'ENOENT')) throw notFound(id);
      throw error;
    }
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

  async list(): Promise<SessionHeader[]> {
    this.assertOpen();
    const entries = await readdir(this.root, { withFileTypes: true });
    const ids = entries.filter((e) => e.isDirectory() && isValidSessionId(e.name)).map((e) => e.name).sort();
    const headers: SessionHeader[] = [];
    for (const id of ids) {
      try {
        headers.push(await this.readHeader(id));
      } catch (error) {
        // A directory without a log is a create that has not published its header yet.
        if (!isSessionlogError404(error)) throw error;
      }
    }
    return headers;
  }

  append(id: string, events: readonly NewEvent[], options: AppendOptions): Promise<AppendResult> {
    return this.write(id, async (state) => {
      const plan = planAppend(state.scanner, state.ops.get(options.op), events, options);
      if (plan.kind === 'replayed') return { result: plan.result, written: false };
      await this.truncateTorn(id, state);
      await this.writeBatch(id, state, plan.events);
      return { result: appendResultOf(plan.events), written: true };
    }, () => assertAppendArguments(id, events, options));
  }

  load(id: string): Promise<LoadedSession> {
    return this.write(id, async (state) => {
      const truncated = await this.truncateTorn(id, state);
      const closers = planRepair(state.scanner);
      const result = loadedSession(state.scanner, closers, truncated);
      if (closers.length > 0) await this.writeBatch(id, state, closers);
      return { result, written: closers.length > 0 };
    }, () => assertSessionId(id));
  }

  async inspect(id: string): Promise<LoadedSession> {
    const state = await this.readState(id);
    return loadedSession(state.scanner, planRepair(state.scanner), state.scanner.torn?.records ?? 0);
  }

  async readFrom(id: string, fromSeq: number, limit?: number): Promise<StoredEvent[]> {
    assertReadArguments(id, fromSeq, limit);
    const state = await this.readState(id);
    const end = limit === undefined ? undefined : fromSeq + limit;
    return state.scanner.session.events.slice(fromSeq, end);
  }

  async session(id: string): Promise<SessionView> {
    return (await this.readState(id)).scanner.session;
  }

  async nextSeq(id: string): Promise<number> {
    return (await this.readState(id)).scanner.nextSeq;
  }

  watch(id: string, fromSeq: number, options: WatchOptions = {}): AsyncIterable<StoredEvent> {
    assertReadArguments(id, fromSeq, undefined);
    return watchEvents(
      {
        read: (seq) => this.readFrom(id, seq, 1000),
        subscribe: (wake) => subscribeLocal(this.closeListeners, this.location, id, wake),
        isClosed: () => this.closed,
        pollIntervalMs: this.options.pollIntervalMs,
      },
      fromSeq,
      options.signal,
    );
  }

  close(): Promise<void> {
    if (!this.closed) {
      this.closed = true;
      this.states.clear();
      for (const wake of [...this.closeListeners]) wake();
    }
    return Promise.resolve();
  }

  // -------------------------------------------------------------------------------------------

  private readState(id: string): Promise<SessionFileState> {
    this.assertOpen();
    assertSessionId(id);
    return this.serial.run(id, () => this.refresh(id));
  }

  /**
   * Runs a write under the in-process chain and the cross-process lock file, with the state
   * refreshed under the lock. Wakes in-process watchers when something was written.
   */
  private async write<T>(id: string, body: (state: SessionFileState) => Promise<{ result: T; written: boolean }>, check: () => void): Promise<T> {
    this.assertOpen();
    check();
    const outcome = await this.serial.run(id, async () => {
      await this.requireSession(id);
      const release = await acquireFileLock(join(this.sessionDir(id), LOCK_FILE), {
        timeoutMs: this.options.lockTimeoutMs,
        staleMs: this.options.lockStaleMs,
      });
      try {
        const state = await this.refresh(id);
        try {
          return await body(state);
        } catch (error) {
          // The in-memory state may be ahead of or behind the file now; rebuild it next time.
          this.states.delete(id);
          throw error;
        }
      } finally {
        await release();
      }
    });
    if (outcome.written) notifyAppended(this.location, id);
    return outcome.result;
  }

  /** Reads whatever was appended since the last look (by any process) into the cached state. */
  private async refresh(id: string): Promise<SessionFileState> {
    const path = this.logPath(id);
    let handle: FileHandle;
    try {
      handle = await open(path, 'r');
    } catch (error) {
      if (isErrno(error, 'ENOENT')) throw notFound(id);
      throw error;
    }
    try {
      const info = await handle.stat();
      let state = this.states.get(id);
      if (state && (state.ino !== info.ino || info.size < state.validEnd)) state = undefined;
      if (!state) {
        const { header, end } = await readHeaderLine(handle, id, path);
        state = { header, scanner: new LogScanner(header, path), ops: new Map(), ino: info.ino, validEnd: end, scannedEnd: end };
      }
      if (state.scanner.torn) {
        // Rescan the tail: a writer may have truncated it and appended since.
        state.scanner.clearTorn();
        state.scannedEnd = state.validEnd;
      }
      if (info.size > state.scannedEnd) {
        const bytes = await readFully(handle, state.scannedEnd, info.size - state.scannedEnd);
        this.scanLines(state, bytes, state.scannedEnd);
      }
      this.states.set(id, state);
      return state;
    } finally {
      await handle.close();
    }
  }

  private scanLines(state: SessionFileState, bytes: Buffer, base: number): void {
    let position = 0;
    while (position < bytes.length) {
      const at = base + position;
      const newline = bytes.indexOf(10, position);
      if (newline < 0) {
        state.scanner.push({ ok: false, reason: `final line at byte ${at} has no newline (torn write)`, position: at });
        break;
      }
      let value: unknown;
      let parsed = true;
      try {
        value = JSON.parse(bytes.toString('utf8', position, newline));
      } catch {
        // Not JSON: recorded as a damaged record; the scanner decides torn tail vs corruption.
        parsed = false;
      }
      const accepted = state.scanner.push(
        parsed ? { ok: true, value, position: at } : { ok: false, reason: `line at byte ${at} is not valid JSON`, position: at },
      );
      if (accepted) {
        indexOps(state.ops, [state.scanner.session.storedAt(state.scanner.nextSeq - 1)!]);
        state.validEnd = base + newline + 1;
      }
      position = newline + 1;
    }
    state.scannedEnd = base + bytes.length;
  }

  /** Durably cuts a torn tail (caller holds the lock). Returns the records dropped. */
  private async truncateTorn(id: string, state: SessionFileState): Promise<number> {
    const torn = state.scanner.torn;
    if (!torn) return 0;
    const handle = await open(this.logPath(id), 'r+');
    try {
      await handle.truncate(state.validEnd);
      await handle.sync();
    } finally {
      await handle.close();
    }
    state.scanner.clearTorn();
    state.scannedEnd = state.validEnd;
    return torn.records;
  }

  /** Writes planned events as one batch at the valid end and fsyncs; a failure truncates back. */
  private async writeBatch(id: string, state: SessionFileState, events: readonly StoredEvent[]): Promise<void> {
    const bytes = Buffer.from(events.map((event) => `${JSON.stringify(event)}\n`).join(''), 'utf8');
    const handle = await open(this.logPath(id), 'r+');
    try {
      try {
        await writeFully(handle, bytes, state.validEnd);
        await handle.sync();
      } catch (error) {
        await handle.truncate(state.validEnd).then(
          () => handle.sync(),
          (cleanup: unknown) => {
            throw new SessionlogError('CORRUPT_LOG', `append to ${this.logPath(id)} failed and the partial batch could not be removed; the next load drops it as a torn tail`, {
              cause: new AggregateError([error, cleanup]),
            });
          },
        );
        throw error;
      }
    } finally {
      await handle.close();
    }
    state.scanner.commitWritten(events);
    indexOps(state.ops, events);
    state.validEnd += bytes.length;
    state.scannedEnd = state.validEnd;
  }
}

function isSessionlogError404(error: unknown): boolean {
  return error instanceof SessionlogError && error.code === 'SESSION_NOT_FOUND';
}

// ---------------------------------------------------------------------------------------------

class JsonlArtifacts implements ArtifactStore {
  constructor(private readonly store: JsonlSessionStore) {}

  async put(input: ArtifactPut): Promise<ArtifactRef> {
    this.store.assertOpen();
    assertSessionId(input?.sessionId);
    if (typeof input.content !== 'string') throw new SessionlogError('INVALID_ARGUMENT', 'artifact content must be a string');
    await this.store.requireSession(input.sessionId);
    const dir = join(this.store.sessionDir(input.sessionId), ARTIFACT_DIR);
    try {
      await mkdir(dir, { mode: 0o700 });
      await fsyncDir(this.store.sessionDir(input.sessionId));
    } catch (error) {
      if (!isErrno(error, 'EEXIST')) throw error;
    }
    for (const name of artifactNameCandidates(sanitizeArtifactName(String(input.name ?? '')))) {
      let handle: FileHandle;
      try {
        handle = await open(join(dir, name), 'wx', 0o600);
      } catch (error) {
        if (isErrno(error, 'EEXIST')) continue;
        throw error;
      }
      try {
        await handle.writeFile(input.content, 'utf8');
        await handle.sync();
      } finally {
        await handle.close();
      }
      await fsyncDir(dir);
      return { locator: artifactLocator(input.sessionId, name), bytes: Buffer.byteLength(input.content, 'utf8') };
    }
    throw new Error('unreachable: artifact name candidates are infinite');
  }

  async get(locator: string): Promise<string> {
    this.store.assertOpen();
    const { sessionId, name } = parseArtifactLocator(locator);
    try {
      return await readFile(join(this.store.sessionDir(sessionId), ARTIFACT_DIR, name), 'utf8');
    } catch (error) {
      if (isErrno(error, 'ENOENT')) throw artifactNotFound(locator);
      throw error;
    }
  }

  async read(locator: string, offset: number, limit: number): Promise<{ text: string; total: number }> {
    return artifactWindow(await this.get(locator), offset, limit);
  }
}

class JsonlProjectionCache implements ProjectionCacheStore {
  constructor(private readonly store: JsonlSessionStore) {}

  async get(sessionId: string): Promise<ProjectionCacheRecord | undefined> {
    this.store.assertOpen();
    assertSessionId(sessionId);
    try {
      return parseProjectionCacheRecord(await readFile(join(this.store.sessionDir(sessionId), CACHE_FILE), 'utf8'));
    } catch (error) {
      if (isErrno(error, 'ENOENT')) return undefined;
      throw error;
    }
  }

  async put(sessionId: string, record: ProjectionCacheRecord): Promise<void> {
    this.store.assertOpen();
    assertSessionId(sessionId);
    const text = serializeProjectionCacheRecord(record);
    await this.store.requireSession(sessionId);
    const path = join(this.store.sessionDir(sessionId), CACHE_FILE);
    const temp = `${path}.${randomUUID()}.tmp`;
    const handle = await open(temp, 'wx', 0o600);
    try {
      await handle.writeFile(text, 'utf8');
      await handle.sync();
    } finally {
      await handle.close();
    }
    try {
      await rename(temp, path);
    } catch (error) {
      await unlink(temp).catch(() => {
        // The temp file may already be gone; the rename error below is what matters.
      });
      throw error;
    }
  }
}
