/**
 * A cross-process exclusive lock held as a file created with O_EXCL, used by the JSONL backend
 * to serialize writers of one session. The file holds `{pid, host, at}`; a lock whose owner is
 * a dead process on this host, or older than `staleMs`, is broken.
 */
import { link, open, readFile, rename, stat, unlink } from 'node:fs/promises';
import { hostname } from 'node:os';
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { SessionlogError } from '../session/index.js';

type LockOwner = { pid: number; host: string; at: number; token: string };

export type FileLockOptions = { timeoutMs: number; staleMs: number };

const HOST = hostname();

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // ESRCH: no such process. EPERM means it exists but belongs to someone else.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function parseOwner(text: string): LockOwner | undefined {
  try {
    const value = JSON.parse(text) as Partial<LockOwner>;
    if (typeof value.pid === 'number' && typeof value.host === 'string' && typeof value.at === 'number' && typeof value.token === 'string') {
      return value as LockOwner;
    }
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

/** Acquires the lock at `path`, waiting up to `timeoutMs`. Returns the release function. */
export async function acquireFileLock(path: string, options: FileLockOptions): Promise<() => Promise<void>> {
  const token = randomUUID();
  const deadline = Date.now() + options.timeoutMs;
  let delay = 1;
  for (;;) {
    const owner: LockOwner = { pid: process.pid, host: HOST, at: Date.now(), token };
    try {
      const handle = await open(path, 'wx', 0o600);
      try {
        await handle.writeFile(JSON.stringify(owner));
      } finally {
        await handle.close();
      }
      return () => releaseFileLock(path, token);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    await breakIfStale(path, options.staleMs);
    if (Date.now() >= deadline) {
      const current = await readOwner(path);
      throw new SessionlogError(
        'INVALID_ARGUMENT',
        `timed out after ${options.timeoutMs} ms waiting for lock ${path} (held by ${current?.text ?? 'nobody'}); if no sessionlog process is writing this session, delete the lock file`,
      );
    }
    await sleep(delay + Math.random() * delay);
    delay = Math.min(delay * 2, 25);
  }
}

async function breakIfStale(path: string, staleMs: number): Promise<void> {
  const seen = await readOwner(path);
  if (!seen) return;
  const { owner } = seen;
  const deadOwner = owner !== undefined && owner.host === HOST && !processAlive(owner.pid);
  let old = false;
  if (!deadOwner) {
    const at = owner?.at;
    if (at !== undefined) old = Date.now() - at > staleMs;
    else {
      // Unreadable owner: give its creator a moment to finish writing before judging by mtime.
      try {
        old = Date.now() - (await stat(path)).mtimeMs > Math.min(staleMs, 1000);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
        throw error;
      }
    }
  }
  if (!deadOwner && !old) return;
  // Move the stale lock aside atomically; only one breaker wins the rename. If what we moved is
  // not the lock we judged (someone re-took it meanwhile), put it back.
  const aside = `${path}.stale-${randomUUID()}`;
  try {
    await rename(path, aside);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw error;
  }
  const moved = await readOwner(aside);
  if (moved && moved.text !== seen.text) {
    try {
      await link(aside, path);
    } catch (error) {
      // EEXIST: yet another writer took the lock; the one we moved was being released anyway.
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
  }
  await unlink(aside).catch((error: NodeJS.ErrnoException) => {
    if (error.code !== 'ENOENT') throw error;
  });
}

async function releaseFileLock(path: string, token: string): Promise<void> {
  const current = await readOwner(path);
  if (current?.owner?.token !== token) return; // broken as stale and re-taken by another writer
  await unlink(path).catch((error: NodeJS.ErrnoException) => {
    if (error.code !== 'ENOENT') throw error;
  });
}
