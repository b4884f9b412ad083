/**
 * Projection cache storage (dsh-spec §9.3). A record binds checkpoint rows to the session's
 * identity (`createdAt`) so a record from a deleted-and-recreated session is never used.
 */
import type { ProjectionRows } from '../session/index.js';

export type ProjectionCacheRecord = { identity: { createdAt: number }; rows: ProjectionRows };

export interface ProjectionCacheStore {
  get(sessionId: string): Promise<ProjectionCacheRecord | undefined>;
  put(sessionId: string, record: ProjectionCacheRecord): Promise<void>;
}
