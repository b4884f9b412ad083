/**
 * The JSONL backend's transcript index: entries in the session directories, pointers in
 * `.transcripts` (store.ts describes how they stay right).
 */
import { createHash, randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { SessionlogError, isValidSessionId } from '../../session/index.js';
import { type TranscriptEntry, type TranscriptIndex } from '../store.js';
import {
  assertTranscriptKey,
  damagedTranscriptRecord,
  storedTranscriptEntry,
  transcriptPutEntry,
} from '../transcripts.js';
import { ensureDir, fsyncDir, isErrno, replaceFile, readIfExists, parseJsonOrUndefined } from './files.js';
import type { JsonlSessionStore } from './store.js';
import type { JsonlLayout } from './layout.js';
import { link, readFile, rename, unlink } from 'node:fs/promises';

/** The file name stem of (scope, digest): the hex SHA-256 of both (a scope is printable ASCII, never a newline). */
function transcriptKey(scope: string, digest: string): string {
  return createHash('sha256').update(`${scope}\n${digest}`, 'utf8').digest('hex');
}

/** The session a pointer file's text names, or undefined when it is damaged. */
function transcriptPointerTarget(text: string): string | undefined {
  const value = parseJsonOrUndefined(text) as { sessionId?: unknown } | null | undefined;
  return isValidSessionId(value?.sessionId) ? value.sessionId : undefined;
}

/** The transcript index as entries in the session directories and pointers in `.transcripts` (see the top of this file). */
export class JsonlTranscripts implements TranscriptIndex {
  constructor(private readonly store: JsonlSessionStore) {}

  async put(scope: string, digest: string, entry: TranscriptEntry): Promise<void> {
    this.store.assertOpen();
    const { sessionId, seq } = transcriptPutEntry(scope, digest, entry);
    await this.store.requireLiveSession(sessionId);
    const k = transcriptKey(scope, digest);
    try {
      const dir = this.store.layout.transcriptsDir(sessionId);
      await ensureDir(dir, this.store.layout.sessionDir(sessionId));
      await replaceFile(join(dir, `${k}.json`), dir, JSON.stringify({ scope, digest, seq }));
      const pointerDir = this.store.layout.transcriptPointerDir(k);
      const pointer = join(pointerDir, `${k}.json`);
      const current = await readIfExists(pointer);
      if (current === undefined || transcriptPointerTarget(current) !== sessionId) {
        await this.store.layout.ensureTranscriptPointerDir(k);
        await replaceFile(pointer, pointerDir, JSON.stringify({ sessionId }));
      }
    } catch (error) {
      // An erasure under way moved the directory away: say so rather than how the write failed.
      if (!(error instanceof SessionlogError)) await this.store.requireLiveSession(sessionId);
      throw error;
    }
    try {
      await this.store.requireLiveSession(sessionId);
    } catch (error) {
      // Erased after the entry landed, perhaps after the erasure took the pointers: take this one too.
      await dropTranscriptPointer(this.store.layout, k, sessionId);
      throw error;
    }
  }

  async get(scope: string, digest: string): Promise<TranscriptEntry | undefined> {
    this.store.assertOpen();
    assertTranscriptKey(scope, digest);
    const k = transcriptKey(scope, digest);
    const pointer = join(this.store.layout.transcriptPointerDir(k), `${k}.json`);
    const text = await readIfExists(pointer);
    if (text === undefined) return undefined;
    const sessionId = transcriptPointerTarget(text);
    if (sessionId === undefined) throw damagedTranscriptRecord(pointer, 'a {sessionId} record');
    const path = join(this.store.layout.transcriptsDir(sessionId), `${k}.json`);
    const entryText = await readIfExists(path);
    // The session was erased, or the pointer was left by a put that failed.
    if (entryText === undefined) return undefined;
    const value = parseJsonOrUndefined(entryText) as { scope?: unknown; digest?: unknown; seq?: unknown } | undefined;
    if (value?.scope !== scope || value.digest !== digest)
      throw damagedTranscriptRecord(path, `the entry of this scope and digest`);
    const found = storedTranscriptEntry(sessionId, value.seq, path);
    return (await this.store.exists(sessionId)) ? found : undefined;
  }
}

/**
 * Takes away the pointer of `k` if it names session `id`. A file system cannot remove a file only
 * if it still holds what was read, so the pointer is first renamed aside (taking whatever is
 * current), then read: one naming another session (a newer put) is linked back, unless an even
 * newer put has placed one meanwhile. True when it named `id`.
 */
export async function dropTranscriptPointer(layout: JsonlLayout, k: string, id: string): Promise<boolean> {
  const dir = layout.transcriptPointerDir(k);
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
