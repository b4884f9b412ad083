export * from './store.js';
export * from './inbox-entries.js';
export type { ArtifactPut, ArtifactRef, MediaPut } from './artifacts.js';
export * from './projection-cache.js';
export {
  MAX_QUERY_CHARS,
  MAX_QUERY_WORDS,
  SEARCHABLE_EVENT_TYPES,
  SEARCH_DEFAULT_LIMIT,
  SEARCH_MAX_LIMIT,
  SNIPPET_MAX_CHARS,
  searchableText,
  type SearchHit,
  type SearchOptions,
} from './search.js';
export { resolveStoreOptions, type StoreOptions, type ResolvedStoreOptions } from './store.js';
export { openStore } from './open.js';
export {
  openSqliteStore,
  SqliteSessionStore,
  SQLITE_APPLICATION_ID,
  SQLITE_PAGE_SIZE,
  SQLITE_SCHEMA_VERSION,
} from './relational/sqlite/store.js';
export { openJsonlStore, JsonlSessionStore } from './jsonl/store.js';
export { JSONL_FORMAT_VERSION } from './jsonl/format.js';
export {
  openPostgresStore,
  PostgresSessionStore,
  POSTGRES_SCHEMA_VERSION,
  POSTGRES_DEFAULT_SCHEMA,
} from './relational/postgres/store.js';
export * from './derived-history.js';
export * from './tenants.js';
export * from './pacing.js';
export * from './spend.js';
