/** The JSONL backend's inbox: a file per entry in the session's `inbox` directory (layout: store.ts). */
import { createHash } from 'node:crypto';
import { unlink, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { SessionlogError, assertSessionId } from '../../session/index.js';
import { type InboxEntry, type InboxRef, type InboxStore } from '../store.js';
import { assertInboxKey, assertInboxKeys, inboxConflict, inboxPutRef } from '../inbox.js';
import { isErrno, fsyncDir, ensureDir, publishOnce, readIfExists, parseJsonOrUndefined } from './files.js';
import type { JsonlSessionStore } from './store.js';
import type { JsonlLayout } from './layout.js';

/** An inbox entry as its file holds it. */
type InboxRecord = InboxEntry & { body: string };

/** The file of the entry under `key`: named by the key's hex SHA-256, since a key is any text. */
function inboxFileName(key: string): string {
  return `${createHash('sha256').update(key, 'utf8').digest('hex')}.json`;
}

/** Reads and checks an entry's file; undefined when there is none, CORRUPT_LOG when it is damaged. */
async function readInboxRecord(path: string): Promise<InboxRecord | undefined> {
  const text = await readIfExists(path);
  if (text === undefined) return undefined;
  const value = parseJsonOrUndefined(text) as Partial<Record<keyof InboxRecord, unknown>> | null | undefined;
  if (
    typeof value?.key !== 'string' ||
    typeof value.body !== 'string' ||
    typeof value.bytes !== 'number' ||
    typeof value.digest !== 'string' ||
    typeof value.storedAt !== 'number'
  ) {
    throw new SessionlogError(
      'CORRUPT_LOG',
      `the inbox entry ${path} is damaged (not a {key, body, bytes, digest, storedAt} record); remove it or restore it from a backup`,
    );
  }
  return { key: value.key, body: value.body, bytes: value.bytes, digest: value.digest, storedAt: value.storedAt };
}

/** The inbox as one file per entry in the session's `inbox` directory. */
export class JsonlInbox implements InboxStore {
  constructor(private readonly store: JsonlSessionStore) {}

  async put(sessionId: string, key: string, body: string): Promise<InboxRef> {
    this.store.assertOpen();
    const ref = inboxPutRef(sessionId, key, body);
    await this.store.refuseTombstoned(sessionId);
    try {
      await this.store.layout.ensureSessionDir(sessionId);
      const dir = this.store.layout.inboxDir(sessionId);
      await ensureDir(dir, this.store.layout.sessionDir(sessionId));
      const path = join(dir, inboxFileName(key));
      const stored = await readInboxRecord(path);
      if (!stored) {
        const record: InboxRecord = { ...ref, storedAt: Date.now(), body };
        if (await publishOnce(path, dir, JSON.stringify(record))) {
          // An erasure that ran meanwhile took the directory away before this entry landed.
          await this.store.refuseTombstoned(sessionId);
          return ref;
        }
      }
      const held = stored ?? (await readInboxRecord(path));
      if (held && (held.digest !== ref.digest || held.bytes !== ref.bytes)) throw inboxConflict(sessionId, key);
      return ref;
    } catch (error) {
      // An erasure under way moved the directory away: say so rather than how the write failed.
      if (!(error instanceof SessionlogError)) await this.store.refuseTombstoned(sessionId);
      throw error;
    }
  }

  async get(sessionId: string, key: string): Promise<string | undefined> {
    this.store.assertOpen();
    assertSessionId(sessionId);
    assertInboxKey(sessionId, key);
    const record = await readInboxRecord(join(this.store.layout.inboxDir(sessionId), inboxFileName(key)));
    return record?.key === key ? record.body : undefined;
  }

  async remove(sessionId: string, keys: readonly string[]): Promise<number> {
    this.store.assertOpen();
    assertInboxKeys(sessionId, keys);
    const dir = this.store.layout.inboxDir(sessionId);
    let removed = 0;
    for (const name of new Set(keys.map(inboxFileName))) {
      try {
        await unlink(join(dir, name));
        removed++;
      } catch (error) {
        if (!isErrno(error, 'ENOENT')) throw error;
      }
    }
    if (removed > 0) await fsyncDir(dir);
    return removed;
  }

  async list(sessionId: string): Promise<InboxEntry[]> {
    this.store.assertOpen();
    assertSessionId(sessionId);
    const dir = this.store.layout.inboxDir(sessionId);
    const entries: InboxEntry[] = [];
    for (const name of await inboxFiles(this.store.layout, sessionId)) {
      // Removed since the directory was read: no longer an entry.
      const record = await readInboxRecord(join(dir, name));
      if (record)
        entries.push({ key: record.key, bytes: record.bytes, digest: record.digest, storedAt: record.storedAt });
    }
    return entries.sort((a, b) => a.storedAt - b.storedAt || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  }
}

/** The file names of the session's inbox entries (not temp files of writes under way). */
export async function inboxFiles(layout: JsonlLayout, id: string): Promise<string[]> {
  try {
    return (await readdir(layout.inboxDir(id))).filter((name) => !name.startsWith('.') && name.endsWith('.json'));
  } catch (error) {
    if (isErrno(error, 'ENOENT')) return [];
    throw error;
  }
}
