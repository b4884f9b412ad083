/**
 * A cross-process exclusive lock held as a file created with O_EXCL, used by the JSONL backend
 * to serialize writers of one session. The file holds `{pid, host, token, start}`; its holder
 * refreshes the file's mtime while it holds it (a heartbeat).
 *
 * A lock is broken when its holder is a dead process on this host (pid gone, or reused by a
 * process that started at another time) or when its heartbeat stopped for longer than
 * `staleMs` (a paused or hung holder, or one on another host). Breaking renames the lock file to
 * `<lock>.broken-<random>`: that marker tells the next holder that a writer may still hold an
 * open handle on the session's file, so it must fence that writer off before writing (the JSONL
 * backend moves its log to a new inode). A holder that lost its lock finds out through
 * {@link FileLock.held} and must write nothing.
 */
import { open, readFile, readdir, rename, stat, unlink, utimes } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { SessionlogError } from '../../session/index.js';

type LockOwner = { pid: number; host: string; token: string; start?: string };

export type FileLockOptions = { timeoutMs: number; staleMs: number };

export type FileLock = {
  readonly token: string;
  /** Markers of locks broken since the last holder released cleanly (see the module comment). */
  readonly broken: readonly string[];
  /** Whether the lock file still names this holder. */
  held(): Promise<boolean>;
  /** Removes the broken-lock markers once their writers are fenced off. */
  clearBroken(): Promise<void>;
  release(): Promise<void>;
};

const HOST = hostname();

/** The kernel's start time of a process (Linux), to tell a live holder from a reused pid. */
function processStart(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
  } catch {
    // No /proc (not Linux) or no such process: liveness falls back to kill(pid, 0).
    return undefined;
  }
}

const OWN_START = processStart(process.pid);

function processAlive(owner: LockOwner): boolean {
  try {
    process.kill(owner.pid, 0);
  } catch (error) {
    // ESRCH: no such process. EPERM means it exists but belongs to someone else.
    if ((error as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  const start = processStart(owner.pid);
  return owner.start === undefined || start === undefined || start === owner.start;
}

function parseOwner(text: string): LockOwner | undefined {
  try {
    const value = JSON.parse(text) as Partial<LockOwner>;
    if (typeof value.pid === 'number' && typeof value.host === 'string' && typeof value.token === 'string')
      return value as LockOwner;
  } catch {
    // A half-written lock file (its creator died between create and write): judged by age below.
  }
  return undefined;
}

async function readOwner(path: string): Promise<{ owner: LockOwner | undefined; text: string } | undefined> {
  try {
    const text = await readFile(path, 'utf8');
    return { owner: parseOwner(text), text };
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}

/** The owner and the age of its heartbeat (the file's mtime). */
async function readOwnerAndHeartbeat(
  path: string,
): Promise<{ owner: LockOwner | undefined; text: string; mtimeMs: number } | undefined> {
  try {
    const [seen, info] = await Promise.all([readOwner(path), stat(path)]);
    return seen && { ...seen, mtimeMs: info.mtimeMs };
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}

function isErrno(error: unknown, code: string): boolean {
  return (error as NodeJS.ErrnoException | undefined)?.code === code;
}

async function brokenMarkers(path: string): Promise<string[]> {
  const prefix = `${basename(path)}.broken-`;
  try {
    return (await readdir(dirname(path)))
      .filter((name) => name.startsWith(prefix))
      .map((name) => join(dirname(path), name));
  } catch (error) {
    if (isErrno(error, 'ENOENT')) return [];
    throw error;
  }
}

/** Acquires the lock at `path`, waiting up to `timeoutMs` (then UNAVAILABLE). */
export async function acquireFileLock(path: string, options: FileLockOptions): Promise<FileLock> {
  const token = randomUUID();
  const owner: LockOwner = { pid: process.pid, host: HOST, token, ...(OWN_START ? { start: OWN_START } : {}) };
  const deadline = Date.now() + options.timeoutMs;
  let delay = 1;
  for (;;) {
    try {
      const handle = await open(path, 'wx', 0o600);
      try {
        await handle.writeFile(JSON.stringify(owner));
      } finally {
        await handle.close();
      }
      return heldLock(path, token, await brokenMarkers(path), options.staleMs);
    } catch (error) {
      if (!isErrno(error, 'EEXIST')) throw error;
    }
    await breakIfStale(path, options.staleMs);
    if (Date.now() >= deadline) {
      const current = await readOwner(path);
      throw new SessionlogError(
        'UNAVAILABLE',
        `timed out after ${options.timeoutMs} ms waiting for lock ${path} (held by ${current?.text ?? 'nobody'}); check whether that process is still writing this session (a paused or stopped holder loses the lock after lockStaleMs)`,
      );
    }
    await sleep(delay + Math.random() * delay);
    delay = Math.min(delay * 2, 25);
  }
}

function heldLock(path: string, token: string, broken: string[], staleMs: number): FileLock {
  // The heartbeat touches whatever lock file is there: refreshing a lock another writer took
  // after breaking ours only makes theirs look fresher.
  const heartbeat = setInterval(
    () => {
      const now = new Date();
      utimes(path, now, now).catch(() => {
        // The lock file is gone (released, broken or its directory erased): nothing to refresh.
      });
    },
    Math.max(10, Math.floor(staleMs / 4)),
  );
  heartbeat.unref();
  return {
    token,
    broken,
    async held() {
      return (await readOwner(path))?.owner?.token === token;
    },
    async clearBroken() {
      for (const marker of broken) {
        await unlink(marker).catch((error: unknown) => {
          if (!isErrno(error, 'ENOENT')) throw error;
        });
      }
    },
    async release() {
      clearInterval(heartbeat);
      const current = await readOwner(path);
      if (current?.owner?.token !== token) return; // broken and perhaps re-taken by another writer
      await unlink(path).catch((error: unknown) => {
        if (!isErrno(error, 'ENOENT')) throw error;
      });
    },
  };
}

async function breakIfStale(path: string, staleMs: number): Promise<void> {
  const seen = await readOwnerAndHeartbeat(path);
  if (!seen) return;
  const { owner } = seen;
  const deadOwner = owner !== undefined && owner.host === HOST && !processAlive(owner);
  // An unreadable owner is a creator that died between create and write, or one still writing:
  // its mtime ages like a heartbeat, but give it at most a second.
  const limit = owner === undefined ? Math.min(staleMs, 1000) : staleMs;
  if (!deadOwner && Date.now() - seen.mtimeMs <= limit) return;
  // Only one breaker wins the rename. If the lock was re-taken between our look and the rename,
  // we broke a live lock: its holder's fence finds out, and the marker makes the next holder
  // fence off any handle it may still use.
  try {
    await rename(path, `${path}.broken-${randomUUID()}`);
  } catch (error) {
    if (!isErrno(error, 'ENOENT')) throw error;
  }
}
