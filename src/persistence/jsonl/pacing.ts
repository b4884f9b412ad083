/** The JSONL backend's provider pacing buckets (pacing.ts `PacingStore`). */
import { createHash } from 'node:crypto';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { acquireFileLock } from './file-lock.js';
import { pacingStore, parsePaceState, type PaceRowUpdate, type PaceState } from '../pacing.js';
import { type ResolvedStoreOptions } from '../store.js';
import { replaceFile, readIfExists } from './files.js';
import { PACING_DIR } from './layout.js';
import type { JsonlSessionStore } from './store.js';
import type { PacingStore } from '../store.js';

/** A pacing bucket's read-modify-write under its own lock file (a replaced file: whole or not at all). */
async function updatePace(
  store: JsonlSessionStore,
  options: ResolvedStoreOptions,
  key: string,
  change: PaceRowUpdate,
): Promise<PaceState | undefined> {
  store.assertOpen();
  const dir = join(store.layout.root, PACING_DIR);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const stem = createHash('sha256').update(key, 'utf8').digest('hex');
  const path = join(dir, `${stem}.json`);
  const lock = await acquireFileLock(join(dir, `${stem}.lock`), {
    timeoutMs: options.lockTimeoutMs,
    staleMs: options.lockStaleMs,
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

/** The JSONL backend's pacing buckets: a file per bucket in `.pacing`, replaced under its lock file. */
export function jsonlPacing(store: JsonlSessionStore, options: ResolvedStoreOptions): PacingStore {
  return pacingStore((key, change) => updatePace(store, options, key, change));
}
