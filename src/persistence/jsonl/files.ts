/**
 * The file operations of the JSONL backend: durable creation and replacement (fsync of the file
 * and its directory), whole reads and writes.
 */
import { randomUUID } from 'node:crypto';
import { link, mkdir, open, readFile, rename, unlink, type FileHandle } from 'node:fs/promises';
import { basename, join } from 'node:path';

export function isErrno(error: unknown, code: string): boolean {
  return (error as NodeJS.ErrnoException | undefined)?.code === code;
}

/** fsyncs a directory so a created or renamed entry in it survives a crash. */
export async function fsyncDir(path: string): Promise<void> {
  const handle = await open(path, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** Makes directory `path` (0700) unless it exists, fsyncing `parent` so it survives a crash. */
export async function ensureDir(path: string, parent: string): Promise<void> {
  try {
    await mkdir(path, { mode: 0o700 });
  } catch (error) {
    if (isErrno(error, 'EEXIST')) return;
    throw error;
  }
  await fsyncDir(parent);
}

/** Writes `content` to a new owner-only temp file in `dir`, named after `path`, fsynced; returns its path. */
async function writeTempFile(path: string, dir: string, content: string | Uint8Array): Promise<string> {
  const temp = join(dir, `.${basename(path)}.${randomUUID()}.tmp`);
  const handle = await open(temp, 'wx', 0o600);
  try {
    await (typeof content === 'string' ? handle.writeFile(content, 'utf8') : handle.writeFile(content));
    await handle.sync();
  } finally {
    await handle.close();
  }
  return temp;
}

/**
 * Publishes `content` at `path` unless a file is there: written to a temp file beside it,
 * fsynced, linked into place (never over an existing file) and the directory fsynced. False when
 * `path` was taken (the first writer wins).
 */
export async function publishOnce(path: string, dir: string, content: string | Uint8Array): Promise<boolean> {
  const temp = await writeTempFile(path, dir, content);
  try {
    await link(temp, path);
  } catch (error) {
    if (isErrno(error, 'EEXIST')) return false;
    throw error;
  } finally {
    await unlink(temp);
  }
  await fsyncDir(dir);
  return true;
}

/**
 * Replaces `path` with `content` atomically: written to a temp file beside it, fsynced, renamed
 * over it and the directory fsynced. A reader sees the old file or the new one.
 */
export async function replaceFile(path: string, dir: string, content: string): Promise<void> {
  const temp = await writeTempFile(path, dir, content);
  try {
    await rename(temp, path);
  } catch (error) {
    await unlink(temp).catch(() => {
      // The temp file may already be gone; the rename error is what matters.
    });
    throw error;
  }
  await fsyncDir(dir);
}

/** The file's text, or undefined when it does not exist. */
export async function readIfExists(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, 'utf8');
  } catch (error) {
    if (isErrno(error, 'ENOENT')) return undefined;
    throw error;
  }
}

export async function readFully(handle: FileHandle, position: number, length: number): Promise<Buffer> {
  const buffer = Buffer.alloc(length);
  let done = 0;
  while (done < length) {
    const { bytesRead } = await handle.read(buffer, done, length - done, position + done);
    if (bytesRead === 0) return buffer.subarray(0, done);
    done += bytesRead;
  }
  return buffer;
}

export async function writeFully(handle: FileHandle, buffer: Buffer, position: number): Promise<void> {
  let done = 0;
  while (done < buffer.length) {
    const { bytesWritten } = await handle.write(buffer, done, buffer.length - done, position + done);
    done += bytesWritten;
  }
}

/** The JSON value of `text`, or undefined when it is not JSON (the caller refuses it as damaged). */
export function parseJsonOrUndefined(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    // Not JSON: undefined, which the caller's shape check refuses.
    return undefined;
  }
}
