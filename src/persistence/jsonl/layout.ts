/**
 * The names of the JSONL store's files and directories under its root, and where they are (the
 * layout is drawn in store.ts).
 */
import { open, stat, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { notFound } from '../errors.js';
import { ensureDir, isErrno } from './files.js';

export const LOG_FILE = 'session.jsonl';
export const LOCK_FILE = 'session.lock';
export const ARTIFACT_DIR = 'artifacts';
/** Media (issue 50): one file per distinct content, `media-<sha256>.<ext>`. */
export const MEDIA_DIR = 'media';
export const CACHE_FILE = 'projection-cache.json';
const INBOX_DIR = 'inbox';
export const KEY_FILE = 'session.key';
export const TRANSCRIPTS_DIR = 'transcripts';
export const PACING_DIR = '.pacing';
export const SPEND_DIR = '.spend';
export const TRANSCRIPT_INDEX_DIR = '.transcripts';
/** An entry's file name in the session's `transcripts` directory: `<k>.json`. */
export const TRANSCRIPT_FILE_PATTERN = /^[0-9a-f]{64}\.json$/;
export const TOMBSTONE_DIR = '.tombstones';
export const ERASING_PREFIX = '.erasing-';

/** Where one JSONL store's files are (the names above, under its root); a session's log opened. */
export class JsonlLayout {
  constructor(readonly root: string) {}

  sessionDir(id: string): string {
    return join(this.root, id);
  }

  logPath(id: string): string {
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

  tombstonePath(id: string): string {
    return join(this.root, TOMBSTONE_DIR, `${id}.json`);
  }

  async fileExists(id: string): Promise<boolean> {
    try {
      await stat(this.logPath(id));
      return true;
    } catch (error) {
      if (isErrno(error, 'ENOENT')) return false;
      throw error;
    }
  }

  /** Opens the session's log for reading; SESSION_NOT_FOUND when there is none. */
  async openLog(id: string): Promise<FileHandle> {
    try {
      return await open(this.logPath(id), 'r');
    } catch (error) {
      if (isErrno(error, 'ENOENT')) throw notFound(id);
      throw error;
    }
  }
}
