/** The JSONL backend's projection cache: a record per session, `projection-cache.json`, replaced whole. */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { assertSessionId } from '../../session/index.js';
import {
  parseProjectionCacheRecord,
  serializeProjectionCacheRecord,
  type ProjectionCacheRecord,
} from '../projection-cache.js';
import { isErrno, replaceFile } from './files.js';
import { CACHE_FILE } from './layout.js';
import type { JsonlSessionStore } from './store.js';
import type { ProjectionCacheStore } from '../store.js';

export class JsonlProjectionCache implements ProjectionCacheStore {
  constructor(private readonly store: JsonlSessionStore) {}

  async get(sessionId: string): Promise<ProjectionCacheRecord | undefined> {
    this.store.assertOpen();
    assertSessionId(sessionId);
    try {
      return parseProjectionCacheRecord(
        await readFile(join(this.store.layout.sessionDir(sessionId), CACHE_FILE), 'utf8'),
      );
    } catch (error) {
      if (isErrno(error, 'ENOENT')) return undefined;
      throw error;
    }
  }

  async put(sessionId: string, record: ProjectionCacheRecord): Promise<void> {
    this.store.assertOpen();
    assertSessionId(sessionId);
    const text = serializeProjectionCacheRecord(record);
    await this.store.requireSession(sessionId);
    const dir = this.store.layout.sessionDir(sessionId);
    await replaceFile(join(dir, CACHE_FILE), dir, text);
  }
}
