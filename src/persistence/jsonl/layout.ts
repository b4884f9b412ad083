/** The names of the JSONL store's files and directories under its root (the layout is drawn in store.ts). */

export const LOG_FILE = 'session.jsonl';
export const LOCK_FILE = 'session.lock';
export const ARTIFACT_DIR = 'artifacts';
export const CACHE_FILE = 'projection-cache.json';
export const INBOX_DIR = 'inbox';
export const KEY_FILE = 'session.key';
export const TRANSCRIPTS_DIR = 'transcripts';
export const PACING_DIR = '.pacing';
export const SPEND_DIR = '.spend';
export const TRANSCRIPT_INDEX_DIR = '.transcripts';
/** An entry's file name in the session's `transcripts` directory: `<k>.json`. */
export const TRANSCRIPT_FILE_PATTERN = /^[0-9a-f]{64}\.json$/;
export const TOMBSTONE_DIR = '.tombstones';
export const ERASING_PREFIX = '.erasing-';
