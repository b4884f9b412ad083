/** The relational backends' projection cache (the `projection_cache` table). */
import { assertSessionId } from '../../session/index.js';
import { notFound } from '../errors.js';
import {
  parseProjectionCacheRecord,
  serializeProjectionCacheRecord,
  type ProjectionCacheRecord,
} from '../projection-cache.js';
import { step, type RelationalDriver, type RelationalTx, type Steps, type Use } from './driver.js';
import type { ProjectionCacheStore } from '../store.js';

/** The projection cache in the `projection_cache` table, one record per session. */
export class RelationalProjectionCache implements ProjectionCacheStore {
  constructor(
    private readonly use: Use,
    private readonly driver: RelationalDriver,
  ) {}

  get(sessionId: string): Promise<ProjectionCacheRecord | undefined> {
    return this.use(async () => {
      assertSessionId(sessionId);
      const text = await this.driver.run('single', (tx) => step(tx.projectionRecord(sessionId)));
      return text === undefined ? undefined : parseProjectionCacheRecord(text);
    });
  }

  put(sessionId: string, record: ProjectionCacheRecord): Promise<void> {
    return this.use(() => {
      assertSessionId(sessionId);
      return this.driver.run('write', (tx) => putProjectionRecord(tx, sessionId, record));
    });
  }
}

function* putProjectionRecord(tx: RelationalTx, sessionId: string, record: ProjectionCacheRecord): Steps<void> {
  const row = yield* step(tx.sessionRow(sessionId));
  if (!row) throw notFound(sessionId);
  yield* step(tx.putProjectionRecord(row.key, serializeProjectionCacheRecord(record)));
}
