export * from './store.js';
export * from './artifacts.js';
export * from './projection-cache.js';
export { resolveStoreOptions, type StoreOptions, type ResolvedStoreOptions } from './base.js';
export { openStore } from './open.js';
export { openSqliteStore, SqliteSessionStore, SQLITE_APPLICATION_ID, SQLITE_SCHEMA_VERSION } from './sqlite.js';
export { openJsonlStore, JsonlSessionStore, JSONL_FORMAT_VERSION } from './jsonl.js';
export { openPostgresStore, PostgresSessionStore, POSTGRES_SCHEMA_VERSION, POSTGRES_DEFAULT_SCHEMA } from './postgres.js';
export * from './derived-history.js';
