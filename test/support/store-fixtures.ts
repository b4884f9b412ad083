/**
 * Backend fixtures for the store conformance and crash suites: a fresh store URL per test, and
 * raw access to a backend's storage to plant records the public API cannot write (foreign
 * types, future headers, torn tails) and to dump the stored data for "wrote nothing" checks.
 */
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync, appendFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MessageChannel, Worker, receiveMessageOnPort, type MessagePort } from 'node:worker_threads';
import Database from 'better-sqlite3';
import pg from 'pg';
import { parsePostgresUrl, redactUrl } from '../../src/persistence/relational/postgres/store.js';
import { indexText } from '../../src/persistence/search.js';

export type RawEvent = { seq: number; type: string; time: number; data: unknown; op: string; ignorable?: true };

/**
 * A hand-made change to one stored record, as an operator or a disk might make it:
 * `replace` stores `event` (any JSON object, valid or not) in the record's place keeping its
 * batch framing; `garble` leaves a complete record that does not decode; `delete` removes it.
 */
export type RecordEdit = { kind: 'replace'; event: Record<string, unknown> } | { kind: 'garble' } | { kind: 'delete' };

export type BackendFixture = {
  name: 'sqlite' | 'jsonl' | 'postgres';
  /** A store URL for a store living under `dir`. */
  url(dir: string): string;
  /** Appends one stored record verbatim, bypassing validation. The store must be closed. */
  plantEvent(url: string, id: string, event: RawEvent): void;
  /**
   * Appends a damaged record at `seq`: a torn write when `final` (JSONL: no newline), else a
   * complete but undecodable record that later records may follow. The store must be closed.
   */
  plantDamagedRecord(url: string, id: string, seq: number, final: boolean): void;
  /** Changes the stored record of event `seq` (see {@link RecordEdit}). The store must be closed. */
  editRecord(url: string, id: string, seq: number, edit: RecordEdit): void;
  /** Rewrites the stored header's `version`. The store must be closed. */
  setHeaderVersion(url: string, id: string, version: number): void;
  /** Replaces the stored projection cache record with arbitrary text. The store must be closed. */
  plantCacheText(url: string, id: string, text: string): void;
  /**
   * Removes the session's last stored batch whole, as restoring a backup taken before it was
   * written would. The store may stay open.
   */
  dropLastBatch(url: string, id: string): void;
  /** A canonical dump of everything stored (to prove an operation wrote nothing). */
  dump(url: string): string;
};

export function tempDir(prefix = 'sessionlog-test-'): { dir: string; cleanup: () => void } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** The columns a relational backend stores for an event given as a plain object (no validation). */
function relationalRow(event: Record<string, unknown>): {
  seq: unknown;
  type: unknown;
  time: unknown;
  data: string;
  surfaceOp: string | null;
  sources: string | null;
  ignorable: true | null;
} {
  const surfaceOp = event.surfaceOp;
  return {
    seq: event.seq,
    type: event.type,
    time: event.time,
    data: JSON.stringify(event.data),
    surfaceOp: surfaceOp === undefined ? null : surfaceOp === 'append' ? 'append' : JSON.stringify(surfaceOp),
    sources: event.sourceEventSeqs === undefined ? null : JSON.stringify(event.sourceEventSeqs),
    ignorable: event.ignorable === true ? true : null,
  };
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
      // A batch of its own: its op and last seq on its row (relational/sqlite/schema.ts, version 10).
      db.prepare(
        'INSERT INTO events (id, session_key, seq, type, time, data, ignorable, batch_op, batch_last_seq) VALUES ((? << 32) + ?, ?, ?, ?, ?, ?, ?, ?, ?)',
      ).run(
        key,
        event.seq,
        key,
        event.seq,
        event.type,
        event.time,
        JSON.stringify(event.data),
        event.ignorable ? 1 : null,
        event.op,
        event.seq,
      );
    });
  },
  plantDamagedRecord(url, id, seq) {
    withDb(url, (db) => {
      const key = sessionKey(db, id);
      db.prepare(
        "INSERT INTO events (id, session_key, seq, type, time, data) VALUES ((? << 32) + ?, ?, ?, 'session/run', 1, '{\"workflowId\":')",
      ).run(key, seq, key, seq);
    });
  },
  editRecord(url, id, seq, edit) {
    withDb(url, (db) => {
      const key = sessionKey(db, id);
      if (edit.kind === 'delete') {
        db.prepare('DELETE FROM events WHERE session_key = ? AND seq = ?').run(key, seq);
      } else if (edit.kind === 'garble') {
        db.prepare(`UPDATE events SET data = '{"garbled":' WHERE session_key = ? AND seq = ?`).run(key, seq);
      } else {
        const row = relationalRow(edit.event);
        // The id is the key and the seq (relational/sqlite/schema.ts): a moved row moves in the tree.
        db.prepare(
          'UPDATE events SET id = (session_key << 32) + ?, seq = ?, type = ?, time = ?, data = ?, surface_op = ?, source_event_seqs = ?, ignorable = ? WHERE session_key = ? AND seq = ?',
        ).run(
          row.seq,
          row.seq,
          row.type,
          row.time,
          row.data,
          row.surfaceOp,
          row.sources,
          row.ignorable === null ? null : 1,
          key,
          seq,
        );
      }
    });
  },
  setHeaderVersion(url, id, version) {
    withDb(url, (db) => {
      db.prepare("UPDATE sessions SET header = json_set(header, '$.version', ?) WHERE id = ?").run(version, id);
    });
  },
  dropLastBatch(url, id) {
    withDb(url, (db) => {
      const key = sessionKey(db, id);
      const last = db
        .prepare(
          'SELECT seq AS first_seq, batch_last_seq AS last_seq FROM events WHERE session_key = ? AND batch_op IS NOT NULL ORDER BY seq DESC LIMIT 1',
        )
        .get(key) as { first_seq: number; last_seq: number };
      const rows = db
        .prepare('SELECT seq, type, data FROM events WHERE session_key = ? AND seq BETWEEN ? AND ?')
        .all(key, last.first_seq, last.last_seq) as Array<{ seq: number; type: string; data: string }>;
      for (const row of rows) {
        // Its words leave the contentless search index the way they came in (relational/sqlite/schema.ts).
        const words = indexText({ type: row.type, data: JSON.parse(row.data) as unknown });
        const rowid = key * 2 ** 32 + row.seq;
        // Only a row a search indexed already is in the index (appends do not index).
        const indexed = db.prepare('SELECT 1 FROM search_rows WHERE search_rowid = ?').get(rowid) !== undefined;
        if (words !== undefined && indexed) {
          db.prepare(`INSERT INTO search (search, rowid, body) VALUES ('delete', ?, ?)`).run(rowid, words);
          db.prepare('DELETE FROM search_rows WHERE search_rowid = ?').run(rowid);
        }
        // The batch's op and last seq go with its first row.
        db.prepare('DELETE FROM events WHERE session_key = ? AND seq = ?').run(key, row.seq);
      }
    });
  },
  plantCacheText(url, id, text) {
    withDb(url, (db) => {
      const key = sessionKey(db, id);
      db.prepare(
        'INSERT INTO projection_cache (session_key, record) VALUES (?, ?) ON CONFLICT (session_key) DO UPDATE SET record = excluded.record',
      ).run(key, text);
    });
  },
  dump(url) {
    return withDb(
      url,
      (db) => {
        // A virtual table (the FTS5 index) is dumped through its shadow tables, which hold its data.
        const tables = db
          .prepare(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND sql NOT LIKE 'CREATE VIRTUAL TABLE%' ORDER BY name",
          )
          .all() as Array<{ name: string }>;
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

/** The JSONL file format of a session's log (the header's `format`, absent in version 1). */
function jsonlFormat(url: string, id: string): number {
  const text = readFileSync(jsonlLog(url, id), 'utf8');
  return (JSON.parse(text.slice(0, text.indexOf('\n'))) as { format?: number }).format ?? 1;
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
    // Version-2 files frame every line with its batch's event count; a planted event is a batch of one.
    const framed = jsonlFormat(url, id) === 2 ? { ...event, batchSize: 1 } : event;
    appendFileSync(jsonlLog(url, id), `${JSON.stringify(framed)}\n`);
  },
  plantDamagedRecord(url, id, seq, final) {
    appendFileSync(jsonlLog(url, id), `{"seq":${seq},"type":"session/run","time":1,"data":{"workf${final ? '' : '\n'}`);
  },
  editRecord(url, id, seq, edit) {
    const path = jsonlLog(url, id);
    const lines = readFileSync(path, 'utf8').split('\n');
    const index = lines.findIndex(
      (line, i) => i > 0 && line.length > 0 && (JSON.parse(line) as { seq?: unknown }).seq === seq,
    );
    if (index < 0) throw new Error(`fixture: no line for seq ${seq}`);
    const original = JSON.parse(lines[index]!) as Record<string, unknown>;
    if (edit.kind === 'delete') lines.splice(index, 1);
    else if (edit.kind === 'garble') lines[index] = lines[index]!.slice(0, Math.floor(lines[index]!.length / 2));
    else
      lines[index] = JSON.stringify(
        'batchSize' in original ? { ...edit.event, batchSize: original.batchSize } : edit.event,
      );
    writeFileSync(path, lines.join('\n'));
  },
  setHeaderVersion(url, id, version) {
    const path = jsonlLog(url, id);
    const text = readFileSync(path, 'utf8');
    const newline = text.indexOf('\n');
    const header = JSON.parse(text.slice(0, newline)) as Record<string, unknown>;
    writeFileSync(path, `${JSON.stringify({ ...header, version })}${text.slice(newline)}`);
  },
  dropLastBatch(url, id) {
    const path = jsonlLog(url, id);
    const lines = readFileSync(path, 'utf8').split('\n');
    lines.pop(); // after the final newline
    const op = (JSON.parse(lines[lines.length - 1]!) as { op: string }).op;
    while (lines.length > 1 && (JSON.parse(lines[lines.length - 1]!) as { op: string }).op === op) lines.pop();
    // In place (the same inode), as a restore over the file would.
    writeFileSync(path, `${lines.join('\n')}\n`);
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

// ---------------------------------------------------------------------------------------------
// PostgreSQL

/** The server the PostgreSQL tests use: `SESSIONLOG_TEST_POSTGRES_URL`, or the local trust-auth default. */
export const POSTGRES_TEST_URL = process.env.SESSIONLOG_TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

/** Network failures that mean "no server answers"; anything else (bad password, missing database) is a real failure. */
const UNREACHABLE = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ETIMEDOUT',
  'EAI_AGAIN',
  'ENOENT',
]);

/**
 * Whether a PostgreSQL server answers at {@link POSTGRES_TEST_URL}. Only an unreachable server
 * reads as unavailable (so the suites skip); a server that answers but refuses us throws.
 */
export async function probePostgres(): Promise<{ available: true } | { available: false; reason: string }> {
  const client = new pg.Client({
    connectionString: parsePostgresUrl(POSTGRES_TEST_URL).connectionString,
    connectionTimeoutMillis: 5000,
  });
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.query('SELECT 1');
    return { available: true };
  } catch (error) {
    const code = (error as { code?: string }).code;
    const timedOut = /timeout/i.test((error as Error).message);
    if ((code && UNREACHABLE.has(code)) || timedOut) {
      return {
        available: false,
        reason: `no PostgreSQL server answers at ${redactUrl(POSTGRES_TEST_URL)} (${code ?? (error as Error).message}); set SESSIONLOG_TEST_POSTGRES_URL to point at one`,
      };
    }
    throw error;
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** A fresh schema name `sl_test_<random>`. */
export function postgresTestSchema(): string {
  return `sl_test_${randomBytes(6).toString('hex')}`;
}

/** The test server's URL with `?schema=NAME` set. */
export function postgresUrlWithSchema(schema: string, base = POSTGRES_TEST_URL): string {
  const url = new URL(base);
  url.searchParams.set('schema', schema);
  return url.toString();
}

const createdSchemas = new Set<string>();

/** Drops every schema {@link postgresFixture} handed out (call after the stores using them closed). */
export function dropPostgresTestSchemas(): void {
  for (const schema of [...createdSchemas]) {
    pgRaw(POSTGRES_TEST_URL, [[`DROP SCHEMA IF EXISTS "${schema}" CASCADE`, []]]);
    createdSchemas.delete(schema);
  }
}

/**
 * Synchronous SQL for the fixtures (the conformance suite calls them synchronously): a worker
 * thread owns the connections and runs each request's statements in one transaction while this
 * thread blocks on an Atomics wait. Results are the row arrays, one per statement.
 */
const RAW_WORKER_SOURCE = `
const { workerData } = require('node:worker_threads');
const pg = require(workerData.pgPath);
const { port, signal } = workerData;
const clients = new Map();
port.on('message', async ({ connectionString, statements }) => {
  let reply;
  try {
    let client = clients.get(connectionString);
    if (!client) {
      client = new pg.Client({ connectionString });
      client.on('error', () => clients.delete(connectionString));
      await client.connect();
      clients.set(connectionString, client);
    }
    await client.query('BEGIN');
    const results = [];
    try {
      for (const [sql, params] of statements) results.push((await client.query(sql, params)).rows);
      await client.query('COMMIT');
    } catch (error) {
      await client.query('ROLLBACK');
      throw error;
    }
    reply = { ok: true, results };
  } catch (error) {
    reply = { ok: false, message: String((error && error.message) || error) };
  }
  port.postMessage(reply);
  Atomics.store(signal, 0, 1);
  Atomics.notify(signal, 0);
});
`;

let rawWorker: { port: MessagePort; signal: Int32Array } | undefined;

function rawChannel(): { port: MessagePort; signal: Int32Array } {
  if (!rawWorker) {
    const { port1, port2 } = new MessageChannel();
    const signal = new Int32Array(new SharedArrayBuffer(4));
    const pgPath = createRequire(import.meta.url).resolve('pg');
    const worker = new Worker(RAW_WORKER_SOURCE, {
      eval: true,
      workerData: { port: port2, signal, pgPath },
      transferList: [port2],
    });
    worker.unref();
    port1.unref();
    rawWorker = { port: port1, signal };
  }
  return rawWorker;
}

function pgRaw(url: string, statements: Array<[string, unknown[]]>): unknown[][] {
  const { port, signal } = rawChannel();
  Atomics.store(signal, 0, 0);
  port.postMessage({ connectionString: parsePostgresUrl(url).connectionString, statements });
  if (Atomics.wait(signal, 0, 0, 30_000) === 'timed-out') throw new Error('fixture: raw PostgreSQL access timed out');
  const reply = receiveMessageOnPort(port)?.message as
    { ok: true; results: unknown[][] } | { ok: false; message: string } | undefined;
  if (!reply) throw new Error('fixture: raw PostgreSQL access returned nothing');
  if (!reply.ok) throw new Error(`fixture: raw PostgreSQL access failed: ${reply.message}`);
  return reply.results;
}

function pgSchema(url: string): string {
  return `"${parsePostgresUrl(url).schema}"`;
}

function pgSessionKey(url: string, id: string): number {
  const [rows] = pgRaw(url, [[`SELECT key FROM ${pgSchema(url)}.sessions WHERE id = $1`, [id]]]) as [
    Array<{ key: string }>,
  ];
  if (!rows[0]) throw new Error(`fixture: no session ${id}`);
  return Number(rows[0].key);
}

export const postgresFixture: BackendFixture = {
  name: 'postgres',
  url() {
    const schema = postgresTestSchema();
    createdSchemas.add(schema);
    return postgresUrlWithSchema(schema);
  },
  plantEvent(url, id, event) {
    const s = pgSchema(url);
    const key = pgSessionKey(url, id);
    pgRaw(url, [
      [
        `INSERT INTO ${s}.events (session_key, seq, type, time, data, surface_op, source_event_seqs, ignorable) VALUES ($1, $2, $3, $4, $5, NULL, NULL, $6)`,
        [key, event.seq, event.type, event.time, JSON.stringify(event.data), event.ignorable ? true : null],
      ],
      [
        `INSERT INTO ${s}.batches (session_key, op, first_seq, last_seq) VALUES ($1, $2, $3, $3)`,
        [key, event.op, event.seq],
      ],
    ]);
  },
  plantDamagedRecord(url, id, seq) {
    const key = pgSessionKey(url, id);
    pgRaw(url, [
      [
        `INSERT INTO ${pgSchema(url)}.events (session_key, seq, type, time, data) VALUES ($1, $2, 'session/run', 1, '{"workflowId":')`,
        [key, seq],
      ],
    ]);
  },
  editRecord(url, id, seq, edit) {
    const s = pgSchema(url);
    const key = pgSessionKey(url, id);
    if (edit.kind === 'delete') {
      pgRaw(url, [[`DELETE FROM ${s}.events WHERE session_key = $1 AND seq = $2`, [key, seq]]]);
    } else if (edit.kind === 'garble') {
      pgRaw(url, [[`UPDATE ${s}.events SET data = '{"garbled":' WHERE session_key = $1 AND seq = $2`, [key, seq]]]);
    } else {
      const row = relationalRow(edit.event);
      pgRaw(url, [
        [
          `UPDATE ${s}.events SET seq = $3, type = $4, time = $5, data = $6, surface_op = $7, source_event_seqs = $8, ignorable = $9 WHERE session_key = $1 AND seq = $2`,
          [key, seq, row.seq, row.type, row.time, row.data, row.surfaceOp, row.sources, row.ignorable],
        ],
      ]);
    }
  },
  setHeaderVersion(url, id, version) {
    pgRaw(url, [
      [
        `UPDATE ${pgSchema(url)}.sessions SET header = jsonb_set(header::jsonb, '{version}', to_jsonb($1::int))::text WHERE id = $2`,
        [version, id],
      ],
    ]);
  },
  dropLastBatch(url, id) {
    const s = pgSchema(url);
    const key = pgSessionKey(url, id);
    const [rows] = pgRaw(url, [
      [`SELECT op, first_seq, last_seq FROM ${s}.batches WHERE session_key = $1 ORDER BY last_seq DESC LIMIT 1`, [key]],
    ]) as [Array<{ op: string; first_seq: string; last_seq: string }>];
    const last = rows[0]!;
    pgRaw(url, [
      [
        `DELETE FROM ${s}.events WHERE session_key = $1 AND seq BETWEEN $2 AND $3`,
        [key, last.first_seq, last.last_seq],
      ],
      [`DELETE FROM ${s}.batches WHERE session_key = $1 AND op = $2`, [key, last.op]],
    ]);
  },
  plantCacheText(url, id, text) {
    const key = pgSessionKey(url, id);
    pgRaw(url, [
      [
        `INSERT INTO ${pgSchema(url)}.projection_cache (session_key, record) VALUES ($1, $2) ON CONFLICT (session_key) DO UPDATE SET record = excluded.record`,
        [key, text],
      ],
    ]);
  },
  dump(url) {
    const schema = parsePostgresUrl(url).schema;
    const [tables] = pgRaw(url, [
      [`SELECT tablename AS name FROM pg_tables WHERE schemaname = $1 ORDER BY tablename`, [schema]],
    ]) as [Array<{ name: string }>];
    const contents = pgRaw(
      url,
      tables.map(({ name }) => [`SELECT * FROM "${schema}"."${name}" ORDER BY 1, 2`, []]),
    );
    return tables.map(({ name }, i) => `${name}:${JSON.stringify(contents[i])}`).join('\n');
  },
};
