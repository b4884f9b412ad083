/**
 * Backend fixtures for the store conformance and crash suites: a fresh store URL per test, and
 * raw access to a backend's storage to plant records the public API cannot write (foreign
 * types, future headers, torn tails) and to dump the stored data for "wrote nothing" checks.
 */
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync, appendFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';

export type RawEvent = { seq: number; type: string; time: number; data: unknown; op: string; ignorable?: true };

export type BackendFixture = {
  name: 'sqlite' | 'jsonl';
  /** A store URL for a store living under `dir`. */
  url(dir: string): string;
  /** Appends one stored record verbatim, bypassing validation. The store must be closed. */
  plantEvent(url: string, id: string, event: RawEvent): void;
  /**
   * Appends a damaged record at `seq`: a torn write when `final` (JSONL: no newline), else a
   * complete but undecodable record that later records may follow. The store must be closed.
   */
  plantDamagedRecord(url: string, id: string, seq: number, final: boolean): void;
  /** Rewrites the stored header's `version`. The store must be closed. */
  setHeaderVersion(url: string, id: string, version: number): void;
  /** Replaces the stored projection cache record with arbitrary text. The store must be closed. */
  plantCacheText(url: string, id: string, text: string): void;
  /** A canonical dump of everything stored (to prove an operation wrote nothing). */
  dump(url: string): string;
};

export function tempDir(prefix = 'sessionlog-test-'): { dir: string; cleanup: () => void } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

function sqlitePath(url: string): string {
  return url.slice('sqlite:'.length);
}

function withDb<T>(url: string, body: (db: Database.Database) => T, readonly = false): T {
  const db = new Database(sqlitePath(url), { readonly, fileMustExist: true });
  try {
    return body(db);
  } finally {
    db.close();
  }
}

function sessionKey(db: Database.Database, id: string): number {
  const row = db.prepare('SELECT key FROM sessions WHERE id = ?').get(id) as { key: number } | undefined;
  if (!row) throw new Error(`fixture: no session ${id}`);
  return row.key;
}

export const sqliteFixture: BackendFixture = {
  name: 'sqlite',
  url: (dir) => `sqlite:${join(dir, 'store.db')}`,
  plantEvent(url, id, event) {
    withDb(url, (db) => {
      const key = sessionKey(db, id);
      db.prepare('INSERT INTO events (session_key, seq, type, time, data, surface_op, source_event_seqs, ignorable) VALUES (?, ?, ?, ?, ?, NULL, NULL, ?)').run(
        key,
        event.seq,
        event.type,
        event.time,
        JSON.stringify(event.data),
        event.ignorable ? 1 : null,
      );
      db.prepare('INSERT INTO batches (session_key, op, first_seq, last_seq) VALUES (?, ?, ?, ?)').run(key, event.op, event.seq, event.seq);
    });
  },
  plantDamagedRecord(url, id, seq) {
    withDb(url, (db) => {
      const key = sessionKey(db, id);
      db.prepare("INSERT INTO events (session_key, seq, type, time, data) VALUES (?, ?, 'session/run', 1, '{\"workflowId\":')").run(key, seq);
    });
  },
  setHeaderVersion(url, id, version) {
    withDb(url, (db) => {
      db.prepare("UPDATE sessions SET header = json_set(header, '$.version', ?) WHERE id = ?").run(version, id);
    });
  },
  plantCacheText(url, id, text) {
    withDb(url, (db) => {
      const key = sessionKey(db, id);
      db.prepare('INSERT INTO projection_cache (session_key, record) VALUES (?, ?) ON CONFLICT (session_key) DO UPDATE SET record = excluded.record').run(key, text);
    });
  },
  dump(url) {
    return withDb(
      url,
      (db) => {
        const tables = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").all() as Array<{ name: string }>;
        return tables
          .map(({ name }) => `${name}:${JSON.stringify(db.prepare(`SELECT * FROM "${name}" ORDER BY 1, 2`).all())}`)
          .join('\n');
      },
      true,
    );
  },
};

function jsonlRoot(url: string): string {
  return url.slice('jsonl:'.length);
}

function jsonlLog(url: string, id: string): string {
  return join(jsonlRoot(url), id, 'session.jsonl');
}

function listFiles(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...listFiles(path));
    else out.push(path);
  }
  return out.sort();
}

export const jsonlFixture: BackendFixture = {
  name: 'jsonl',
  url: (dir) => `jsonl:${join(dir, 'root')}`,
  plantEvent(url, id, event) {
    appendFileSync(jsonlLog(url, id), `${JSON.stringify(event)}\n`);
  },
  plantDamagedRecord(url, id, seq, final) {
    appendFileSync(jsonlLog(url, id), `{"seq":${seq},"type":"session/run","time":1,"data":{"workf${final ? '' : '\n'}`);
  },
  setHeaderVersion(url, id, version) {
    const path = jsonlLog(url, id);
    const text = readFileSync(path, 'utf8');
    const newline = text.indexOf('\n');
    const header = JSON.parse(text.slice(0, newline)) as Record<string, unknown>;
    writeFileSync(path, `${JSON.stringify({ ...header, version })}${text.slice(newline)}`);
  },
  plantCacheText(url, id, text) {
    writeFileSync(join(jsonlRoot(url), id, 'projection-cache.json'), text);
  },
  dump(url) {
    const root = jsonlRoot(url);
    return listFiles(root)
      .map((path) => `${path.slice(root.length)} ${statSync(path).size}\n${readFileSync(path, 'utf8')}`)
      .join('\n');
  },
};

export const BACKENDS: readonly BackendFixture[] = [sqliteFixture, jsonlFixture];
