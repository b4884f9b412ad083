/**
 * `openStore(url)`: the one place a store URL (config `SESSIONLOG_STORE`) becomes a backend.
 */
import { SessionlogError } from '../session/index.js';
import { resolveStoreOptions, type StoreOptions } from './store.js';
import { JsonlSessionStore } from './jsonl/store.js';
import { PostgresSessionStore, redactUrl } from './relational/postgres/store.js';
import { SqliteSessionStore } from './relational/sqlite/store.js';
import type { SessionStore } from './store.js';

const ACCEPTED =
  'sqlite:PATH (e.g. sqlite:./.sessionlog/sessionlog.db, or sqlite::memory:), jsonl:DIR or postgres://USER:PASSWORD@HOST:PORT/DATABASE[?schema=NAME]';

/**
 * Opens the store named by `url`: `sqlite:PATH` (`sqlite::memory:` for an in-memory database),
 * `jsonl:DIR`, or `postgres://…` / `postgresql://…` (a libpq-style URL; the optional `?schema=`
 * parameter picks the PostgreSQL schema, default `sessionlog`). Anything else is
 * INVALID_ARGUMENT naming the accepted forms; a password never appears in an error.
 */
export async function openStore(url: string, options: StoreOptions = {}): Promise<SessionStore> {
  const resolved = resolveStoreOptions(options);
  if (typeof url === 'string') {
    if (url.startsWith('sqlite:')) {
      const path = url.slice('sqlite:'.length);
      if (path.length > 0) return new SqliteSessionStore(path, resolved);
    } else if (url.startsWith('jsonl:')) {
      const dir = url.slice('jsonl:'.length);
      if (dir.length > 0) return new JsonlSessionStore(dir, resolved);
    } else if (/^postgres(ql)?:\/\//.test(url)) {
      return PostgresSessionStore.open(url, resolved);
    }
  }
  throw new SessionlogError(
    'INVALID_ARGUMENT',
    `store URL ${redact(String(url))} is not recognised; use ${ACCEPTED} (set SESSIONLOG_STORE)`,
  );
}

function redact(url: string): string {
  return JSON.stringify(redactUrl(url).slice(0, 300));
}
