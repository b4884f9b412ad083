/**
 * The JSONL log file's read and write path: a session's file read into its validated copy, a
 * batch appended under the lock with its fences, a torn final write cut (store.ts serializes and
 * locks around it).
 */
import { randomUUID, type Hash } from 'node:crypto';
import { open, rename, stat, unlink, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { SessionlogError, type StoredEvent } from '../../session/index.js';
import { newPrefixHash } from '../anchor.js';
import { LogScanner, assertScanned, type TornTail } from '../scanner.js';
import type { SessionCopies } from '../copies.js';
import { type FileLock } from './file-lock.js';
import { isErrno, fsyncDir, readFully, writeFully } from './files.js';
import { encodeBatch, readHeaderLine, scanLines, type Format } from './format.js';
import { LOG_FILE, type JsonlLayout } from './layout.js';

/** What this process knows of one session's file: the validated copy and where it ends. */
export type SessionFile = {
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

/** Reads and writes sessions' log files, keeping each one's {@link SessionFile} in `copies`. */
export class JsonlLogFiles {
  constructor(
    private readonly layout: JsonlLayout,
    private readonly copies: SessionCopies<SessionFile>,
  ) {}

  /**
   * Brings the session's validated copy up to the file (reading only bytes past its valid end).
   * A file replaced (another inode) or shorter than the copy is read again from the start.
   * CORRUPT_LOG, with nothing cached, when the stored log is damaged.
   */
  async refresh(id: string): Promise<SessionFile> {
    const path = this.layout.logPath(id);
    const handle = await this.layout.openLog(id);
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
      await stat(this.layout.logPath(id)).catch(() => undefined),
    ];
    if (held && opened.ino === file.ino && named?.ino === file.ino && opened.size === file.scannedEnd) return;
    this.copies.evict(id);
    throw lostLock(id, 'before writing; nothing was written');
  }

  /** Durably cuts a torn final write (fenced; caller holds the lock). */
  async cutTornTail(id: string, file: SessionFile, lock: FileLock): Promise<void> {
    const handle = await open(this.layout.logPath(id), 'r+');
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
  async writeBatch(id: string, file: SessionFile, lock: FileLock, events: readonly StoredEvent[]): Promise<void> {
    const bytes = encodeBatch(events, file.format);
    const at = file.scanner.validEnd;
    const handle = await open(this.layout.logPath(id), 'r+');
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
                `append to ${this.layout.logPath(id)} failed and the partial batch could not be removed; the next writer cuts it off as a torn final write`,
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
    const named = await stat(this.layout.logPath(id)).catch((error: unknown) => {
      if (isErrno(error, 'ENOENT')) return undefined;
      throw error;
    });
    if (named === undefined) return 'lost';
    // Not moved: ours if the lock still is; if it was broken, the new holder may or may not keep it.
    if (named.ino === opened.ino) return held ? 'kept' : 'lost';
    let current: FileHandle;
    try {
      current = await open(this.layout.logPath(id), 'r');
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
  async fenceOffBrokenLock(id: string, lock: FileLock): Promise<void> {
    this.copies.evict(id);
    const file = await this.refresh(id);
    const path = this.layout.logPath(id);
    const temp = join(this.layout.sessionDir(id), `${LOG_FILE}.${randomUUID()}.tmp`);
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
    await fsyncDir(this.layout.sessionDir(id));
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
