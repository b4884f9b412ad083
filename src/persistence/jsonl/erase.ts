/**
 * The JSONL store's erasure helpers (store.ts `erase`): tombstones, what a session's directory
 * holds, leftovers of a crashed erase, the transcript pointers that name it.
 */
import { readFile, readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { type ErasedPlace, type StoreEraseReceipt } from '../store.js';
import { isErrno, readIfExists, ensureDir, replaceFile } from './files.js';
import {
  ARTIFACT_DIR,
  MEDIA_DIR,
  CACHE_FILE,
  KEY_FILE,
  TRANSCRIPTS_DIR,
  TRANSCRIPT_FILE_PATTERN,
  TOMBSTONE_DIR,
  ERASING_PREFIX,
} from './layout.js';
import type { JsonlLayout } from './layout.js';
import { dropTranscriptPointer } from './transcripts.js';
import { inboxFiles } from './inbox.js';

export async function readTombstone(
  layout: JsonlLayout,
  id: string,
  tombstoneMs: number,
): Promise<{ erasedAt: number; until: number } | undefined> {
  let text: string;
  try {
    text = await readFile(layout.tombstonePath(id), 'utf8');
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
  return { erasedAt: Date.now(), until: Date.now() + tombstoneMs };
}

export async function writeTombstone(
  layout: JsonlLayout,
  id: string,
  tombstone: { erasedAt: number; until: number },
): Promise<void> {
  const dir = join(layout.root, TOMBSTONE_DIR);
  await ensureDir(dir, layout.root);
  await replaceFile(layout.tombstonePath(id), dir, JSON.stringify(tombstone));
}

/** Directories of an erase that crashed after taking the session out of view. */
export async function removeLeftovers(layout: JsonlLayout, id: string): Promise<void> {
  const prefix = `${ERASING_PREFIX}${id}-`;
  for (const name of await readdir(layout.root)) {
    // The suffix after the id is a UUID (no dashes beyond its own), so another id cannot match.
    if (name.startsWith(prefix) && /^[0-9a-f-]{36}$/.test(name.slice(prefix.length))) {
      await dropTranscriptPointers(layout, join(layout.root, name), id);
      await rm(join(layout.root, name), { recursive: true, force: true });
    }
  }
}

/**
 * Takes away the pointers of the transcript entries in session directory `dir` that still name
 * session `id`; how many it took away.
 */
export async function dropTranscriptPointers(layout: JsonlLayout, dir: string, id: string): Promise<number> {
  let names: string[];
  try {
    names = await readdir(join(dir, TRANSCRIPTS_DIR));
  } catch (error) {
    if (isErrno(error, 'ENOENT')) return 0;
    throw error;
  }
  let dropped = 0;
  for (const name of names)
    if (TRANSCRIPT_FILE_PATTERN.test(name) && (await dropTranscriptPointer(layout, name.slice(0, -'.json'.length), id)))
      dropped++;
  return dropped;
}

export async function holdsInboxOrKey(layout: JsonlLayout, id: string): Promise<boolean> {
  return (await inboxFiles(layout, id)).length > 0 || (await readIfExists(layout.keyPath(id))) !== undefined;
}

export async function countForErase(
  layout: JsonlLayout,
  id: string,
  hasLog: boolean,
): Promise<{ removed: Omit<StoreEraseReceipt['removed'], 'transcriptEntries'>; places: ErasedPlace[] }> {
  const dir = layout.sessionDir(id);
  let events = 0;
  if (hasLog) {
    const log = await readFile(layout.logPath(id));
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
  let media = 0;
  try {
    media = (await readdir(join(dir, MEDIA_DIR))).filter((name) => name.startsWith('media-')).length;
  } catch (error) {
    if (!isErrno(error, 'ENOENT')) throw error;
  }
  const names = await readdir(dir);
  const checkpoint = names.includes(CACHE_FILE) ? 1 : 0;
  const inboxEntries = (await inboxFiles(layout, id)).length;
  const sessionKey = names.includes(KEY_FILE) ? 1 : 0;
  const header = hasLog ? 1 : 0;
  return {
    removed: { header, events, artifacts, media, projectionCheckpoints: checkpoint, inboxEntries, sessionKey },
    places: [
      { place: `${layout.logPath(id)} (header and event lines)`, removed: header + events },
      { place: join(dir, ARTIFACT_DIR), removed: artifacts },
      { place: join(dir, MEDIA_DIR), removed: media },
      { place: join(dir, CACHE_FILE), removed: checkpoint },
      { place: layout.inboxDir(id), removed: inboxEntries },
      { place: layout.keyPath(id), removed: sessionKey },
    ],
  };
}
