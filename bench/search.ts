/**
 * Search benchmarks (no Temporal needed): `SessionStore.search` latency on 10k- and 100k-event
 * sessions per backend, and what the index costs: SQLite append rate and bytes on disk with and
 * without it, and the PostgreSQL column and GIN index sizes.
 *
 *   npx tsx bench/search.ts [--reps 10] [--sizes 10000,100000] [--backends sqlite,jsonl,postgres] [--keep]
 *
 * Sessions hold realistic turns (`bench/support/events.ts`); one user message in 500 also states
 * a fact ("tenant t1000 uses port 6000"), so the queries range from words in half the events to a
 * word in one and a word in none. "Warm" searches run on a store whose validated copy of the
 * session is already in memory (a worker's usual state); the first search on a fresh store
 * instance ("cold") also loads and validates the whole log, and on SQLite indexes the events
 * appended since the session's last search (appends do not index: issue 27). PostgreSQL uses
 * SESSIONLOG_BENCH_POSTGRES_URL (default postgres://postgres@127.0.0.1:5432/test) in a fresh
 * schema, dropped at the end; it is skipped, saying so, when no server answers.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';
import pg from 'pg';
import { openStore, SQLITE_PAGE_SIZE, type SessionStore } from '../src/persistence/index.js';
import { parsePostgresUrl } from '../src/persistence/relational/postgres/store.js';
import { encodeEvent } from '../src/persistence/relational/rows.js';
import { indexText } from '../src/persistence/search.js';
import { Session, type NewEvent, type StoredEvent } from '../src/session/index.js';
import { REALISTIC_EVENTS_PER_TURN, TextSource, benchHeader, realisticEvents, takeBatches } from './support/events.js';
import {
  POSTGRES_BENCH_URL,
  benchSchema,
  dropBenchSchema,
  postgresBenchUrl,
  postgresUnreachable,
} from './support/postgres.js';
import {
  fmtBytes,
  fmtInt,
  fmtMs,
  fmtRatio,
  machineLine,
  median,
  percentile,
  printGrid,
  printTable,
  since,
  type Figure,
} from './support/report.js';

type Backend = 'sqlite' | 'jsonl' | 'postgres';

const { values: args } = parseArgs({
  options: {
    reps: { type: 'string', default: '10' },
    sizes: { type: 'string', default: '10000,100000' },
    backends: { type: 'string', default: 'sqlite,jsonl,postgres' },
    keep: { type: 'boolean', default: false },
  },
});
const REPS = Number(args.reps);
const SIZES = args.sizes.split(',').map(Number);
const BACKENDS = args.backends.split(',') as Backend[];
const ROOT = mkdtempSync(join(tmpdir(), 'sessionlog-bench-search-'));
const POSTGRES_URL = POSTGRES_BENCH_URL;
const POSTGRES_SCHEMA = benchSchema();

// ---------------------------------------------------------------------------------------------
// The sessions and the queries

/** Every FACT_EVERY-th turn's user message states a fact nothing else mentions. */
const FACT_EVERY = 500;

/** {@link realisticEvents} with a fact in every FACT_EVERY-th turn's user message. */
function* eventsWithFacts(): Generator<NewEvent> {
  for (const event of realisticEvents(new TextSource(11))) {
    if (event.type === 'user/message') {
      const turn = Number(event.data.id.slice(1));
      if (turn % FACT_EVERY === 0) {
        const [first] = event.data.content;
        const text = `${first?.type === 'text' ? first.text : ''} Remember: tenant t${turn} uses port ${5000 + turn}.`;
        yield { ...event, data: { ...event.data, content: [{ type: 'text', text }] } };
        continue;
      }
    }
    yield event;
  }
}

/** The query set: what each stands for, and the query. */
function queries(events: number): Array<{ name: string; query: string }> {
  const turns = Math.floor(events / REALISTIC_EVENTS_PER_TURN);
  const factTurn = Math.max(FACT_EVERY, Math.floor(turns / 2 / FACT_EVERY) * FACT_EVERY);
  return [
    { name: 'one common word', query: 'durable' },
    { name: 'two common words', query: 'workflow retry' },
    { name: 'three common words', query: 'checkpoint commit timeout' },
    { name: 'the tool name (2 events a turn)', query: 'word_count' },
    { name: `a fact's words (1 turn in ${FACT_EVERY})`, query: 'remember tenant' },
    { name: 'one fact', query: `tenant t${factTurn} port` },
    { name: 'a word in no event', query: 'zeppelin' },
  ];
}

function storeUrl(backend: Backend, name: string): string {
  if (backend === 'sqlite') return `sqlite:${join(ROOT, `${name}.db`)}`;
  if (backend === 'jsonl') return `jsonl:${join(ROOT, name)}`;
  return postgresBenchUrl(POSTGRES_SCHEMA);
}

async function build(store: SessionStore, id: string, events: number): Promise<number> {
  await store.create(benchHeader(id));
  const source = eventsWithFacts();
  const perBatch = 50 * REALISTIC_EVENTS_PER_TURN;
  let seq = 0;
  const start = performance.now();
  while (seq < events) {
    const n = Math.min(perBatch, events - seq);
    const batch = takeBatches(source, n, n)[0]!;
    await store.append(id, batch, { expectedSeq: seq, op: `build/${seq}` });
    seq += n;
  }
  return since(start);
}

// ---------------------------------------------------------------------------------------------
// 1. Search latency

type LatencyResult = {
  backend: Backend;
  events: number;
  buildMs: number;
  coldMs: number;
  warm: number[];
  perQuery: Array<{ name: string; query: string; hits: number; p50: number }>;
};

async function benchLatency(backend: Backend, events: number): Promise<LatencyResult> {
  const url = storeUrl(backend, `search-${events}`);
  const id = `s${events}`;
  const writer = await openStore(url);
  let buildMs: number;
  try {
    buildMs = await build(writer, id, events);
  } finally {
    await writer.close();
  }
  const store = await openStore(url);
  try {
    const set = queries(events);
    let start = performance.now();
    await store.search(id, set[0]!.query);
    const coldMs = since(start);
    const warm: number[] = [];
    const perQuery: LatencyResult['perQuery'] = [];
    for (const { name, query } of set) {
      const times: number[] = [];
      let hits = 0;
      for (let rep = 0; rep < REPS; rep++) {
        start = performance.now();
        hits = (await store.search(id, query)).length;
        times.push(since(start));
      }
      warm.push(...times);
      perQuery.push({ name, query, hits, p50: median(times) });
    }
    return { backend, events, buildMs, coldMs, warm, perQuery };
  } finally {
    await store.close();
  }
}

// ---------------------------------------------------------------------------------------------
// 2. What the SQLite index costs on append and on disk

const APPEND_EVENTS = 10_000;
const APPEND_BATCH = 100;

type Row = ReturnType<typeof encodeEvent> & { event: StoredEvent };

function appendRows(): Row[][] {
  const session = Session.create(benchHeader('append'));
  return takeBatches(eventsWithFacts(), APPEND_EVENTS, APPEND_BATCH).map((batch, i) =>
    session.appendBatch(batch, `b${i}`).map((event) => ({ ...encodeEvent(event), event })),
  );
}

/**
 * The rows sessionlog stores (events with each batch's op on its first row and, `withIndex`, the FTS5 rows with their words
 * computed here), inserted with no validation: the index's own cost, apart from the store's.
 */
function appendRaw(path: string, batches: readonly Row[][], withIndex: boolean): number {
  const db = new Database(path);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = FULL');
  db.pragma(`page_size = ${SQLITE_PAGE_SIZE}`);
  db.exec(`CREATE TABLE events (
    id INTEGER PRIMARY KEY, session_key INTEGER NOT NULL, seq INTEGER NOT NULL, type TEXT NOT NULL, time INTEGER NOT NULL,
    data TEXT NOT NULL, surface_op TEXT, source_event_seqs TEXT, ignorable INTEGER, batch_op TEXT, batch_last_seq INTEGER) STRICT;
    CREATE VIRTUAL TABLE search USING fts5(body, tokenize = 'ascii', content = '');
    INSERT INTO search (search, rank) VALUES ('secure-delete', 1);
    CREATE TABLE search_rows (search_rowid INTEGER PRIMARY KEY, words_sha256 BLOB NOT NULL) STRICT;`);
  const insertEvent = db.prepare(`INSERT INTO events VALUES ((1 << 32) + ?, 1, ?, ?, ?, ?, ?, ?, ?, ?, ?)`);
  const insertSearch = db.prepare(`INSERT INTO search (rowid, body) VALUES ((1 << 32) + ?, ?)`);
  const insertSearchRow = db.prepare(`INSERT INTO search_rows VALUES ((1 << 32) + ?, ?)`);
  const write = db.transaction((rows: readonly Row[], op: string) => {
    const last = rows[rows.length - 1]!.seq;
    for (const [i, r] of rows.entries()) {
      const first = i === 0;
      insertEvent.run(
        r.seq,
        r.seq,
        r.type,
        r.time,
        r.data,
        r.surfaceOp,
        r.sourceEventSeqs,
        r.ignorable ? 1 : null,
        first ? op : null,
        first ? last : null,
      );
      if (withIndex) {
        // The store computes the words inside its transaction; so does this.
        const body = indexText(r.event);
        if (body) {
          insertSearch.run(r.seq, body);
          insertSearchRow.run(r.seq, createHash('sha256').update(body).digest().subarray(0, 16));
        }
      }
    }
  });
  const start = performance.now();
  batches.forEach((rows, i) => write.immediate(rows, `b${i}`));
  const ms = since(start);
  db.close();
  return ms;
}

async function appendStore(path: string, batches: readonly Row[][]): Promise<number> {
  const store = await openStore(`sqlite:${path}`);
  try {
    await store.create(benchHeader('append'));
    const inputs = takeBatches(eventsWithFacts(), APPEND_EVENTS, APPEND_BATCH);
    let seq = 0;
    const start = performance.now();
    for (let i = 0; i < inputs.length; i++) {
      await store.append('append', inputs[i]!, { expectedSeq: seq, op: `b${i}` });
      seq += inputs[i]!.length;
    }
    if (seq !== batches.flat().length) throw new Error('append bench: batches disagree');
    return since(start);
  } finally {
    await store.close();
  }
}

function fileSize(path: string): number {
  return existsSync(path) ? statSync(path).size : 0;
}

/** Bytes per table of a SQLite file after a checkpoint (dbstat), the search index's shadow tables together. */
function sqliteBreakdown(path: string): { total: number; search: number } {
  const db = new Database(path);
  db.pragma('wal_checkpoint(TRUNCATE)');
  const rows = db.prepare(`SELECT name, sum(pgsize) AS bytes FROM dbstat GROUP BY name`).all() as Array<{
    name: string;
    bytes: number;
  }>;
  db.close();
  const search = rows
    .filter((row) => row.name === 'search' || row.name.startsWith('search_'))
    .reduce((sum, row) => sum + row.bytes, 0);
  return { total: fileSize(path) + fileSize(`${path}-wal`), search };
}

async function benchAppendCost(): Promise<Figure[]> {
  const batches = appendRows();
  const rates = { raw: [] as number[], indexed: [] as number[], store: [] as number[] };
  const kinds = ['raw', 'indexed', 'store'] as const;
  let bytes = { raw: 0, indexed: 0, store: { total: 0, search: 0 } };
  const reps = Math.max(3, Math.min(REPS, 5));
  for (let rep = 0; rep < reps; rep++) {
    // Rotate the order so a noisy neighbour does not always hit the same contestant.
    for (let k = 0; k < kinds.length; k++) {
      const kind = kinds[(k + rep) % kinds.length]!;
      const path = join(ROOT, `append-${kind}-${rep}.db`);
      const ms = kind === 'store' ? await appendStore(path, batches) : appendRaw(path, batches, kind === 'indexed');
      rates[kind].push((APPEND_EVENTS / ms) * 1000);
      const breakdown = sqliteBreakdown(path);
      if (kind === 'store') bytes.store = breakdown;
      else bytes = { ...bytes, [kind]: breakdown.total };
      for (const suffix of ['', '-wal', '-shm']) rmSync(`${path}${suffix}`, { force: true });
    }
  }
  const raw = median(rates.raw);
  const indexed = median(rates.indexed);
  const store = median(rates.store);
  // Payload as bench/store.ts counts it: the JSON of each event as handed to append.
  const payload = batches.flat().reduce((sum, r) => {
    const { type, time, data, surfaceOp } = r.event;
    return (
      sum + Buffer.byteLength(JSON.stringify({ type, time, data, ...(surfaceOp === undefined ? {} : { surfaceOp }) }))
    );
  }, 0);
  const texts = batches.flat().filter((r) => indexText(r.event) !== undefined).length;
  return [
    {
      name: `raw insert of the store's rows, no index, events/s (${APPEND_BATCH}/txn, WAL, synchronous=FULL)`,
      value: fmtInt(raw),
    },
    {
      name: 'the same rows plus the FTS5 rows (words computed in the transaction), events/s',
      value: `${fmtInt(indexed)} (${((indexed / raw) * 100).toFixed(0)}% of no index)`,
    },
    {
      name: 'SQLite store append (validation; the index is written by the next search), events/s',
      value: fmtInt(store),
    },
    { name: `text-bearing events indexed`, value: `${fmtInt(texts)} of ${fmtInt(APPEND_EVENTS)}` },
    { name: 'raw rows on disk, no index, per event', value: `${(bytes.raw / APPEND_EVENTS).toFixed(0)} B` },
    {
      name: 'raw rows on disk, with index, per event',
      value: `${(bytes.indexed / APPEND_EVENTS).toFixed(0)} B (${fmtRatio(bytes.indexed / bytes.raw)})`,
    },
    {
      name: 'SQLite store file per event (no search yet), and the index tables share of it',
      value: `${(bytes.store.total / APPEND_EVENTS).toFixed(0)} B; index ${(bytes.store.search / APPEND_EVENTS).toFixed(0)} B = ${((bytes.store.search / bytes.store.total) * 100).toFixed(0)}%`,
    },
    {
      name: 'SQLite store file ÷ payload JSON (events as appended)',
      value: fmtRatio(bytes.store.total / payload),
      target: '≤ 2× (bench/store.ts)',
      met: bytes.store.total <= 2 * payload,
    },
  ];
}

// ---------------------------------------------------------------------------------------------
// 3. PostgreSQL: the column and the GIN index on disk

async function postgresSizes(): Promise<Figure[]> {
  const client = new pg.Client({ connectionString: parsePostgresUrl(POSTGRES_URL).connectionString });
  await client.connect();
  try {
    await client.query(`VACUUM ANALYZE "${POSTGRES_SCHEMA}".events`);
    const row = (
      await client.query<{
        events: string;
        table_bytes: string;
        gin: string;
        column_bytes: string;
        data_bytes: string;
      }>(
        `SELECT (SELECT count(*) FROM "${POSTGRES_SCHEMA}".events) AS events,
                pg_total_relation_size('"${POSTGRES_SCHEMA}".events') AS table_bytes,
                pg_relation_size('"${POSTGRES_SCHEMA}".events_search') AS gin,
                (SELECT coalesce(sum(pg_column_size(search)), 0) FROM "${POSTGRES_SCHEMA}".events) AS column_bytes,
                (SELECT sum(pg_column_size(data)) FROM "${POSTGRES_SCHEMA}".events) AS data_bytes`,
      )
    ).rows[0]!;
    const events = Number(row.events);
    return [
      { name: `events in the schema (all sessions of this run)`, value: fmtInt(events) },
      {
        name: 'events table with its indexes and TOAST',
        value: `${fmtBytes(Number(row.table_bytes))} (${(Number(row.table_bytes) / events).toFixed(0)} B/event)`,
      },
      {
        name: '`search` tsvector column (sum of values)',
        value: `${fmtBytes(Number(row.column_bytes))} (${(Number(row.column_bytes) / events).toFixed(0)} B/event)`,
      },
      {
        name: '`events_search` GIN index',
        value: `${fmtBytes(Number(row.gin))} (${(Number(row.gin) / events).toFixed(0)} B/event)`,
      },
      {
        name: '`data` column (sum of values, for scale)',
        value: `${fmtBytes(Number(row.data_bytes))} (${(Number(row.data_bytes) / events).toFixed(0)} B/event)`,
      },
    ];
  } finally {
    await client.end();
  }
}

// ---------------------------------------------------------------------------------------------

async function main(): Promise<void> {
  console.log(`bench/search.ts · ${machineLine()} · ${REPS} repetitions per query · files in ${ROOT}`);
  const backends = [...BACKENDS];
  if (backends.includes('postgres')) {
    const unreachable = await postgresUnreachable();
    if (unreachable) {
      console.log(`PostgreSQL skipped: no server answers at ${POSTGRES_URL} (${unreachable})`);
      backends.splice(backends.indexOf('postgres'), 1);
    }
  }
  try {
    const results: LatencyResult[] = [];
    for (const backend of backends) for (const events of SIZES) results.push(await benchLatency(backend, events));
    printGrid(
      `search latency, limit 20 (warm: validated copy in memory; ${queries(SIZES[0]!).length} queries × ${REPS})`,
      ['backend', 'events', 'warm p50', 'warm p99', 'cold first search', 'build (append)'],
      results.map((r) => [
        r.backend,
        fmtInt(r.events),
        fmtMs(percentile(r.warm, 50)),
        fmtMs(percentile(r.warm, 99)),
        fmtMs(r.coldMs),
        fmtMs(r.buildMs),
      ]),
    );
    const largest = Math.max(...SIZES);
    const perQueryRows = queries(largest).map(({ name, query }, i) => [
      `${name}: \`${query}\``,
      ...results
        .filter((r) => r.events === largest)
        .map((r) => `${fmtMs(r.perQuery[i]!.p50)} (${r.perQuery[i]!.hits} hits)`),
    ]);
    printGrid(
      `warm p50 per query, ${fmtInt(largest)} events`,
      ['query', ...results.filter((r) => r.events === largest).map((r) => r.backend)],
      perQueryRows,
    );
    if (backends.includes('sqlite'))
      printTable(
        `SQLite: the index's cost (${fmtInt(APPEND_EVENTS)} realistic events in batches of ${APPEND_BATCH}, median)`,
        await benchAppendCost(),
      );
    if (backends.includes('postgres'))
      printTable('PostgreSQL: the index on disk (after VACUUM ANALYZE)', await postgresSizes());
  } finally {
    if (backends.includes('postgres') && !args.keep) await dropBenchSchema(POSTGRES_SCHEMA);
    if (args.keep)
      console.log(`\nkept ${ROOT}${backends.includes('postgres') ? ` and PostgreSQL schema ${POSTGRES_SCHEMA}` : ''}`);
    else rmSync(ROOT, { recursive: true, force: true });
  }
}

await main();
