/**
 * `openStore(url)`: the one place a store URL (config `SESSIONLOG_STORE`) becomes a backend.
 */
import { SessionlogError } from '../session/index.js';
import { resolveStoreOptions, type StoreOptions } from './base.js';
import { JsonlSessionStore } from './jsonl.js';
import { SqliteSessionStore } from './sqlite.js';
import type { SessionStore } from './store.js';

const ACCEPTED = 'sqlite:PATH (e.g. sqlite:./.sessionlog/sessionlog.db, or sqlite::memory:) or jsonl:DIR';

/**
 * Opens the store named by `url`: `sqlite:PATH` (`sqlite::memory:` for an in-memory database)
 * or `jsonl:DIR`. Anything else, including `postgres://` (not implemented yet), is
 * INVALID_ARGUMENT naming the accepted forms.
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
      throw new SessionlogError('INVALID_ARGUMENT', `store URL ${redact(url)}: the PostgreSQL backend is not available in this build; use ${ACCEPTED}`);
    }
  }
  throw new SessionlogError('INVALID_ARGUMENT', `store URL ${redact(String(url))} is not recognised; use ${ACCEPTED} (set SESSIONLOG_STORE)`);
}

/** Hides a password in a URL before it goes into an error message. */
function redact(url: string): string {
  return JSON.stringify(url.replace(/\/\/([^:/@]+):([^@]*)@/, '//$1:***@').slice(0, 300));
}
