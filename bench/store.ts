/**
 * Store benchmarks (no Temporal needed): durable append rate against raw better-sqlite3, bytes
 * on disk per event, cold derived-history reads through the projection cache against a full
 * fold (the log in one append per turn, and again in appends of `--read-batch` events), cold
 * `load`, and the same conversation kept by LangGraph JS's `SqliteSaver`.
 *
 *   npx tsx bench/store.ts [--reps 5] [--peer-turns 1000] [--read-batch 10] [--only append,stages,reads,peer] [--keep]
 *
 * Every file is written under a fresh temp directory (removed at the end unless --keep). The
 * OS page cache is warm for all reads: "cold" means a freshly opened store instance (no
 * in-memory session cache), not an evicted page cache.
 */
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';
import { AIMessage, HumanMessage, type BaseMessage } from '@langchain/core/messages';
import { emptyCheckpoint, uuid6, type Checkpoint } from '@langchain/langgraph-checkpoint';
import { SqliteSaver } from '@langchain/langgraph-checkpoint-sqlite';
import {
  openJsonlStore,
  openSqliteStore,
  readDerivedHistory,
  SQLITE_PAGE_SIZE,
  writeProjectionCheckpoint,
  type ProjectionCacheRecord,
  type SessionStore,
} from '../src/persistence/index.js';
import {
  Session,
  assertEventData,
  buildEvent,
  deepFreeze,
  eventDataSchema,
  toFrozenLosslessJson,
  toLosslessJson,
  type NewEvent,
} from '../src/session/index.js';
import { encodeEvent } from '../src/persistence/relational/rows.js';
import { openPostgresStore } from '../src/persistence/relational/postgres/store.js';
import {
  ASSISTANT_CHARS,
  REALISTIC_EVENTS_PER_TURN,
  TextSource,
  assistantMessage,
  benchHeader,
  chunkHeavyTurn,
  realisticEvents,
  stepEnd,
  stepStart,
  takeBatches,
  turnEnd,
  turnStart,
  userMessage,
} from './support/events.js';
import {
  fmtBytes,
  fmtInt,
  fmtMs,
  fmtRatio,
  machineLine,
  mean,
  median,
  printGrid,
  printTable,
  since,
  collectGarbage,
  type Figure,
} from './support/report.js';
import {
  POSTGRES_BENCH_URL,
  benchSchema,
  dropBenchSchema,
  postgresBenchUrl,
  postgresUnreachable,
} from './support/postgres.js';
import { copyWithText, textThenParse } from './support/one-walk.js';

type Backend = 'sqlite' | 'jsonl' | 'postgres';

const { values: args } = parseArgs({
  options: {
    reps: { type: 'string', default: '5' },
    'peer-turns': { type: 'string', default: '1000' },
    keep: { type: 'boolean', default: false },
    // Comma-separated: append, stages, reads, peer (all by default; the results file keeps a whole run).
    only: { type: 'string', default: 'append,stages,reads,peer' },
    // The cold reads' log is also built with appends of this many events (0: only one append per turn).
    'read-batch': { type: 'string', default: '10' },
  },
});
const REPS = Number(args.reps);
const PEER_TURNS = Number(args['peer-turns']);
const SECTIONS = new Set(args.only.split(','));
const READ_BATCH = Number(args['read-batch']);
const ROOT = mkdtempSync(join(tmpdir(), 'sessionlog-bench-store-'));

/** PostgreSQL (cold reads only): this run's schema on SESSIONLOG_BENCH_POSTGRES_URL, dropped at the end. */
const POSTGRES_SCHEMA = benchSchema();

async function openBackend(backend: Backend, path: string): Promise<SessionStore> {
  if (backend === 'postgres') return openPostgresStore(path);
  return backend === 'sqlite' ? openSqliteStore(path) : openJsonlStore(path);
}

/** A store's location: a SQLite file or a JSONL folder under ROOT; PostgreSQL's URL (one schema, sessions by name). */
function backendPath(backend: Backend, name: string): string {
  if (backend === 'postgres') return postgresBenchUrl(POSTGRES_SCHEMA);
  return join(ROOT, backend === 'sqlite' ? `${name}.db` : name);
}

function fileSize(path: string): number {
  return existsSync(path) ? statSync(path).size : 0;
}

/** Removes a store's files: a SQLite file with its WAL and shared-memory index, or a JSONL folder. */
function removeStoreFiles(path: string): void {
  for (const suffix of ['', '-wal', '-shm']) rmSync(`${path}${suffix}`, { recursive: true, force: true });
}

/** Database plus WAL bytes after `wal_checkpoint(TRUNCATE)` (the `-shm` index is not data). */
function sqliteBytes(path: string): number {
  const db = new Database(path);
  db.pragma('wal_checkpoint(TRUNCATE)');
  db.close();
  return fileSize(path) + fileSize(`${path}-wal`);
}

async function withStore<T>(backend: Backend, path: string, body: (store: SessionStore) => Promise<T>): Promise<T> {
  const store = await openBackend(backend, path);
  try {
    return await body(store);
  } finally {
    await store.close();
  }
}

// ---------------------------------------------------------------------------------------------
// 1. Batched durable append rate and bytes on disk

const APPEND_EVENTS = 10_000;
const APPEND_BATCH = 100;

type RawRow = [
  number,
  number,
  number,
  string,
  number,
  string,
  string | null,
  string | null,
  number | null,
  string | null,
  number | null,
];

/** The rows sessionlog stores (schema version 10: id = key << 32 | seq, the batch's op and last seq on its first row). */
function rawRows(batches: readonly NewEvent[][]): RawRow[][] {
  let seq = 0;
  return batches.map((batch, b) => {
    const last = seq + batch.length - 1;
    return batch.map((e, i): RawRow => [
      2 ** 32 + seq,
      1,
      seq++,
      e.type,
      e.time,
      JSON.stringify(e.data),
      e.surfaceOp === undefined ? null : e.surfaceOp === 'append' ? 'append' : JSON.stringify(e.surfaceOp),
      null,
      null,
      i === 0 ? `op${b}` : null,
      i === 0 ? last : null,
    ]);
  });
}

/**
 * The same rows sessionlog stores, in a table of the same shape and page size, inserted with no
 * validation, no checks, no reads.
 */
function appendRaw(path: string, batches: readonly RawRow[][], synchronous: 'OFF' | 'FULL' = 'FULL'): number {
  const db = new Database(path);
  db.pragma(`page_size = ${SQLITE_PAGE_SIZE}`);
  db.pragma('journal_mode = WAL');
  db.pragma(`synchronous = ${synchronous}`);
  db.exec(`CREATE TABLE events (
    id INTEGER PRIMARY KEY, session_key INTEGER NOT NULL, seq INTEGER NOT NULL, type TEXT NOT NULL, time INTEGER NOT NULL,
    data TEXT NOT NULL, surface_op TEXT, source_event_seqs TEXT, ignorable INTEGER, batch_op TEXT, batch_last_seq INTEGER) STRICT`);
  const insert = db.prepare<RawRow>(`INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`);
  const insertBatch = db.transaction((rows: readonly RawRow[]) => {
    for (const row of rows) insert.run(...row);
  });
  const start = performance.now();
  for (const rows of batches) insertBatch.immediate(rows);
  const ms = since(start);
  db.close();
  return ms;
}

async function appendStore(backend: Backend, path: string, batches: readonly NewEvent[][]): Promise<number> {
  return withStore(backend, path, async (store) => {
    await store.create(benchHeader('append'));
    const runId = '6f1c2a4e-8d3b-4f7a-9c1e-2b5d7a9e0c31';
    let seq = 0;
    const start = performance.now();
    for (let i = 0; i < batches.length; i++) {
      const batch = batches[i]!;
      await store.append('append', batch, { expectedSeq: seq, op: `${runId}/b${i}` });
      seq += batch.length;
    }
    return since(start);
  });
}

/** Alternating 80-character user messages and 1,600-character replies: the events that carry text. */
function* textEvents(text = new TextSource(5)): Generator<NewEvent> {
  const time = 1_700_000_000_000;
  for (let i = 0; ; i++) {
    yield userMessage(`u${i}`, text.text(80), time);
    yield assistantMessage(`a${i}`, 1, 1, text.text(ASSISTANT_CHARS), time);
  }
}

type AppendRun = {
  rates: Record<'raw' | 'sqlite' | 'jsonl', number[]>;
  bytes: Record<'raw' | 'sqlite' | 'jsonl', number>;
  ratios: number[];
};

/**
 * Appends the same batches raw, through the SQLite backend and through JSONL, `REPS` times in a
 * rotating order. `ratios` pairs each SQLite run with the raw run of the same repetition: fsync
 * times on this machine drift by 2× over a minute, and a pair shares the drift.
 */
async function runAppends(batches: readonly NewEvent[][]): Promise<AppendRun> {
  const rows = rawRows(batches);
  const rates: Record<'raw' | 'sqlite' | 'jsonl', number[]> = { raw: [], sqlite: [], jsonl: [] };
  const bytes: Record<'raw' | 'sqlite' | 'jsonl', number> = { raw: 0, sqlite: 0, jsonl: 0 };
  const ratios: number[] = [];
  const kinds = ['raw', 'sqlite', 'jsonl'] as const;
  for (let rep = 0; rep < REPS; rep++) {
    // Rotate the order so a noisy neighbour does not always hit the same contestant.
    for (let k = 0; k < kinds.length; k++) {
      const kind = kinds[(k + rep) % kinds.length]!;
      const path = join(ROOT, `append-${kind}-${rep}${kind === 'jsonl' ? '' : '.db'}`);
      const ms = kind === 'raw' ? appendRaw(path, rows) : await appendStore(kind, path, batches);
      rates[kind].push((APPEND_EVENTS / ms) * 1000);
      bytes[kind] = kind === 'jsonl' ? fileSize(join(path, 'append', 'session.jsonl')) : sqliteBytes(path);
      removeStoreFiles(path);
    }
    ratios.push(rates.sqlite[rep]! / rates.raw[rep]!);
  }
  return { rates, bytes, ratios };
}

async function benchTextAppend(): Promise<Figure[]> {
  const { rates, ratios } = await runAppends(takeBatches(textEvents(), APPEND_EVENTS, APPEND_BATCH));
  const ratio = median(ratios);
  return [
    { name: 'text events: raw better-sqlite3 insert, events/s', value: fmtInt(median(rates.raw)) },
    {
      name: 'text events: SQLite backend append, events/s (÷ raw, median of paired runs)',
      value: `${fmtInt(median(rates.sqlite))} (${(ratio * 100).toFixed(0)}% of raw)`,
      target: '≥ 50% of raw',
      met: ratio >= 0.5,
    },
  ];
}

async function benchAppend(): Promise<Figure[]> {
  const batches = takeBatches(realisticEvents(), APPEND_EVENTS, APPEND_BATCH);
  const payloadBytes = batches.flat().reduce((sum, e) => sum + Buffer.byteLength(JSON.stringify(e)), 0);
  const { rates, bytes, ratios } = await runAppends(batches);
  const raw = median(rates.raw);
  const sqlite = median(rates.sqlite);
  const jsonl = median(rates.jsonl);
  const ratio = median(ratios);
  const perEvent = payloadBytes / APPEND_EVENTS;
  return [
    { name: `raw better-sqlite3 insert, events/s (${APPEND_BATCH}/txn, WAL, synchronous=FULL)`, value: fmtInt(raw) },
    {
      name: 'SQLite backend append, events/s (÷ raw, median of paired runs)',
      value: `${fmtInt(sqlite)} (${(ratio * 100).toFixed(0)}% of raw)`,
      target: '≥ 60% of raw',
      met: ratio >= 0.6,
    },
    { name: 'JSONL backend append, events/s', value: `${fmtInt(jsonl)} (${((jsonl / raw) * 100).toFixed(0)}% of raw)` },
    { name: 'payload JSON bytes per event (NewEvent as appended)', value: `${perEvent.toFixed(0)} B` },
    {
      name: 'SQLite bytes on disk per event (db + WAL after checkpoint)',
      value: `${(bytes.sqlite / APPEND_EVENTS).toFixed(0)} B = ${fmtRatio(bytes.sqlite / payloadBytes)} payload`,
      target: '≤ 2×',
      met: bytes.sqlite <= 2 * payloadBytes,
    },
    {
      name: 'JSONL bytes on disk per event (session.jsonl)',
      value: `${(bytes.jsonl / APPEND_EVENTS).toFixed(0)} B = ${fmtRatio(bytes.jsonl / payloadBytes)} payload`,
      target: '≤ 1.5×',
      met: bytes.jsonl <= 1.5 * payloadBytes,
    },
    {
      name: 'raw table bytes on disk per event',
      value: `${(bytes.raw / APPEND_EVENTS).toFixed(0)} B = ${fmtRatio(bytes.raw / payloadBytes)} payload`,
    },
  ];
}

/**
 * Where an append's microseconds go, per event of the realistic mix, stage by stage in this
 * process (no I/O but the raw inserts): the validation and copy a `Session` does, the row
 * encoding, and the raw insert of the same rows with and without the commit's fsync. Each
 * stage runs over all 10,000 events; median of `REPS` passes after three warm-up passes.
 */
function benchAppendStages(): Figure[] {
  const batches = takeBatches(realisticEvents(), APPEND_EVENTS, APPEND_BATCH);
  const events = batches.flat();
  const datas = events.map((e) => toLosslessJson(e.data));
  const built = events.map((e, i) => buildEvent(e, i, 'op'));
  // Bodies timed together run in turn within each repetition, so a machine that speeds up or
  // slows down during the stages moves them alike.
  const perEventAlternately = <T extends ReadonlyArray<() => void>>(bodies: T): { [K in keyof T]: number } => {
    for (let warm = 0; warm < 3; warm++) bodies.forEach((body) => body());
    const runs: number[][] = bodies.map(() => []);
    for (let rep = 0; rep < REPS; rep++)
      bodies.forEach((body, i) => {
        const start = performance.now();
        body();
        runs[i]!.push((since(start) * 1000) / APPEND_EVENTS);
      });
    return runs.map(median) as { [K in keyof T]: number };
  };
  const perEvent = (body: () => void): number => perEventAlternately([body] as const)[0];
  const zodCheck = (type: string, data: unknown): void => {
    if (!eventDataSchema(type)!.safeParse(data).success) throw new Error(`${type} refused`);
  };
  const copyOld = perEvent(() => events.forEach((e) => deepFreeze(toLosslessJson(e.data))));
  const copyNew = perEvent(() => events.forEach((e) => toFrozenLosslessJson(e.data)));
  const checkZod = perEvent(() => events.forEach((e, i) => zodCheck(e.type, datas[i])));
  const checkNew = perEvent(() => events.forEach((e, i) => assertEventData(e.type, datas[i], 'bench')));
  const plan = perEvent(() => {
    const session = Session.create(benchHeader('stages'));
    batches.forEach((batch, i) => session.appendBatch(batch, `op${i}`));
  });
  const encode = perEvent(() => built.forEach((e) => encodeEvent(e)));
  // One serialisation shared by the copy and the row, two ways (bench/support/one-walk.ts), against
  // what the append path does: the frozen copy, then the row's JSON.stringify of it.
  for (const e of events) {
    const expected = JSON.stringify(toFrozenLosslessJson(e.data));
    for (const shared of [copyWithText(e.data), textThenParse(e.data)])
      if (shared.text !== expected || JSON.stringify(shared.copy) !== expected)
        throw new Error(`a shared serialisation disagrees with the copy and JSON.stringify on a ${e.type} event`);
  }
  const [copyThenText, oneWalk, parsedBack] = perEventAlternately([
    () => events.forEach((e) => JSON.stringify(toFrozenLosslessJson(e.data))),
    () => events.forEach((e) => copyWithText(e.data)),
    () => events.forEach((e) => textThenParse(e.data)),
  ] as const);
  const rows = rawRows(batches);
  const insert = (synchronous: 'OFF' | 'FULL'): number => {
    const runs: number[] = [];
    for (let rep = 0; rep < REPS; rep++) {
      const path = join(ROOT, `stages-${synchronous}-${rep}.db`);
      runs.push((appendRaw(path, rows, synchronous) * 1000) / APPEND_EVENTS);
      removeStoreFiles(path);
    }
    return median(runs);
  };
  const insertOff = insert('OFF');
  const insertFull = insert('FULL');
  const us = (value: number): string => `${value.toFixed(2)} µs`;
  return [
    { name: 'lossless-JSON copy + deep freeze, two passes (toLosslessJson, deepFreeze; before)', value: us(copyOld) },
    { name: 'lossless-JSON copy frozen as it is built, one pass (toFrozenLosslessJson; now)', value: us(copyNew) },
    { name: "payload check, zod's safeParse (before)", value: us(checkZod) },
    { name: 'payload check, compiled from the zod schemas (assertEventData; now)', value: us(checkNew) },
    { name: 'Session.appendBatch per event: build (copy, check), surface, turn and budget folds', value: us(plan) },
    { name: 'row encoding (encodeEvent: JSON.stringify of the payload)', value: us(encode) },
    { name: 'the frozen copy, then the JSON text of it (what the copy and the row do now)', value: us(copyThenText) },
    { name: 'one walk building the frozen copy and its JSON text (not used)', value: us(oneWalk) },
    { name: 'JSON text first, the copy parsed back from it, no lossless checks (not used)', value: us(parsedBack) },
    { name: 'raw insert of the encoded rows, synchronous=OFF (no fsync)', value: us(insertOff) },
    { name: 'raw insert, synchronous=FULL: the commit fsync adds', value: us(insertFull - insertOff) },
  ];
}

// ---------------------------------------------------------------------------------------------
// 2. Cold derived history through the projection cache, and cold load

const HEAVY_TURNS = 100;
const HEAVY_EVENTS_PER_TURN = 1_000;

/**
 * 100 turns × 1,000 events: 200 surface nodes, the rest assistant/chunk and turn markers; each
 * turn one append (`batch` 0), or appends of `batch` events, as a worker whose replies stream in
 * chunk appends writes them (the checkpoint's anchor then lists 100 times the ops).
 */
async function buildChunkHeavy(store: SessionStore, id: string, batch: number): Promise<ProjectionCacheRecord> {
  const text = new TextSource(7);
  await store.create(benchHeader(id));
  let seq = 0;
  for (let turn = 1; turn <= HEAVY_TURNS; turn++) {
    const events = chunkHeavyTurn(turn, HEAVY_EVENTS_PER_TURN - 8, text);
    const size = batch > 0 ? batch : events.length;
    for (let at = 0; at < events.length; at += size) {
      const part = events.slice(at, at + size);
      await store.append(id, part, { expectedSeq: seq, op: `build/t${turn}/${at}` });
      seq += part.length;
    }
    // The checkpoint a worker would have written after the previous turn's turn/end.
    if (turn === HEAVY_TURNS - 1) await writeProjectionCheckpoint(store, id);
  }
  return (await store.projectionCache.get(id))!;
}

async function buildRealistic(store: SessionStore, id: string, turns: number): Promise<number> {
  await store.create(benchHeader(id));
  const source = realisticEvents(new TextSource(11));
  const perTurn = REALISTIC_EVENTS_PER_TURN;
  let seq = 0;
  for (let t = 0; t < turns; t += 50) {
    const n = Math.min(50, turns - t) * perTurn;
    const batch = takeBatches(source, n, n)[0]!;
    await store.append(id, batch, { expectedSeq: seq, op: `build/${t}` });
    seq += n;
  }
  return seq;
}

type ReadFigures = {
  cached: number;
  full: number;
  load10k: number;
  load100k: number;
  events10k: number;
  events100k: number;
};

/** A cold derived-history read through the checkpoint `record` of `id`, and a full fold, each on a fresh store. */
async function coldAndFull(
  backend: Backend,
  path: string,
  id: string,
  record: ProjectionCacheRecord,
): Promise<{ cached: number; full: number }> {
  // The cold read refreshes the checkpoint to the log's end; put the near-end one back.
  await withStore(backend, path, (store) => store.projectionCache.put(id, record));
  const cached = await withStore(backend, path, async (store) => {
    collectGarbage();
    const start = performance.now();
    const history = await readDerivedHistory(store, id);
    const ms = since(start);
    if (!history.fromCache || history.messages.length !== 2 * HEAVY_TURNS)
      throw new Error(`cold read did not use the cache (${history.messages.length} messages)`);
    return ms;
  });
  const full = await withStore(backend, path, async (store) => {
    collectGarbage();
    const start = performance.now();
    const session = Session.fromEvents(await store.header(id), await store.readFrom(id, 0));
    const messages = session.deriveMessages();
    const ms = since(start);
    if (messages.length !== 2 * HEAVY_TURNS) throw new Error(`full fold derived ${messages.length} messages`);
    return ms;
  });
  return { cached, full };
}

async function benchReads(backend: Backend): Promise<ReadFigures> {
  const path = backendPath(backend, `reads-${backend}`);
  const { record, events10k, events100k } = await withStore(backend, path, async (store) => ({
    record: await buildChunkHeavy(store, 'heavy', 0),
    events10k: await buildRealistic(store, 'load-10k', Math.ceil(10_000 / REALISTIC_EVENTS_PER_TURN)),
    events100k: await buildRealistic(store, 'load-100k', Math.ceil(100_000 / REALISTIC_EVENTS_PER_TURN)),
  }));
  const cached: number[] = [];
  const full: number[] = [];
  const load10k: number[] = [];
  const load100k: number[] = [];
  for (let rep = 0; rep < REPS; rep++) {
    const read = await coldAndFull(backend, path, 'heavy', record);
    cached.push(read.cached);
    full.push(read.full);
    for (const [id, into] of [
      ['load-10k', load10k],
      ['load-100k', load100k],
    ] as const) {
      into.push(
        await withStore(backend, path, async (store) => {
          collectGarbage();
          const start = performance.now();
          const loaded = await store.load(id);
          const ms = since(start);
          if (loaded.repaired !== 0) throw new Error(`load of ${id} repaired ${loaded.repaired} events`);
          return ms;
        }),
      );
    }
  }
  return {
    cached: median(cached),
    full: median(full),
    load10k: median(load10k),
    load100k: median(load100k),
    events10k,
    events100k,
  };
}

/** The same cold read and full fold over the log built in appends of `batch` events (its own store or session). */
async function benchBatchedReads(backend: Backend, batch: number): Promise<{ cached: number; full: number }> {
  const id = `heavy-b${batch}`;
  const path = backendPath(backend, `reads-${backend}-b${batch}`);
  const record = await withStore(backend, path, (store) => buildChunkHeavy(store, id, batch));
  const cached: number[] = [];
  const full: number[] = [];
  for (let rep = 0; rep < REPS; rep++) {
    const read = await coldAndFull(backend, path, id, record);
    cached.push(read.cached);
    full.push(read.full);
  }
  return { cached: median(cached), full: median(full) };
}

function batchedReadFiguresOf(backend: Backend, batch: number, r: { cached: number; full: number }): Figure[] {
  return [
    {
      name: `${backend}, the log in appends of ${batch} events: cached ÷ full fold`,
      value: `${((r.cached / r.full) * 100).toFixed(1)}% (${fmtMs(r.cached)} ÷ ${fmtMs(r.full)})`,
      target: '≤ 10%',
      met: r.cached <= r.full * 0.1,
    },
  ];
}

function readFiguresOf(backend: Backend, r: ReadFigures): Figure[] {
  return [
    { name: `${backend}: cold derived history, 100k events / 200 nodes, via projection cache`, value: fmtMs(r.cached) },
    { name: `${backend}: same, full fold (readFrom(0) + Session.fromEvents + deriveMessages)`, value: fmtMs(r.full) },
    {
      name: `${backend}: cached ÷ full fold`,
      value: `${((r.cached / r.full) * 100).toFixed(1)}%`,
      target: '≤ 10%',
      met: r.cached <= r.full * 0.1,
    },
    { name: `${backend}: cold load, ${fmtInt(r.events10k)} events`, value: fmtMs(r.load10k) },
    {
      name: `${backend}: cold load, ${fmtInt(r.events100k)} events`,
      value: `${fmtMs(r.load100k)} (${fmtInt((r.events100k / r.load100k) * 1000)} events/s)`,
    },
  ];
}

// ---------------------------------------------------------------------------------------------
// 3. The same conversation in sessionlog and in LangGraph's SqliteSaver

type PeerResult = { perTurnMs: number[]; bytes: number; note: string; payloadBytes?: number };

function conversation(turns: number): Array<{ user: string; assistant: string }> {
  const text = new TextSource(3);
  return Array.from({ length: turns }, () => ({ user: text.text(80), assistant: text.text(ASSISTANT_CHARS) }));
}

/** Each turn appends what a real turn appends, in the worker's three batches (start, header on turn 1, reply). */
async function peerSessionlog(turns: ReturnType<typeof conversation>, inMemory = false): Promise<PeerResult> {
  const path = inMemory ? ':memory:' : join(ROOT, 'peer-sessionlog.db');
  const perTurnMs: number[] = [];
  let payloadBytes = 0;
  await withStore('sqlite', path, async (store) => {
    const id = 'peer';
    const prefix = '6f1c2a4e-8d3b-4f7a-9c1e-2b5d7a9e0c31';
    await store.create(benchHeader(id));
    let seq = 0;
    const append = async (events: NewEvent[], op: string): Promise<void> => {
      payloadBytes += events.reduce((sum, e) => sum + Buffer.byteLength(JSON.stringify(e)), 0);
      await store.append(id, events, { expectedSeq: seq, op });
      seq += events.length;
    };
    for (let i = 0; i < turns.length; i++) {
      const turn = i + 1;
      const time = 1_700_000_000_000 + turn * 1_000;
      const start = performance.now();
      await append(
        [turnStart(turn, time), stepStart(turn, 1, time), userMessage(`u${turn}`, turns[i]!.user, time)],
        `${prefix}/t${turn}/s1/start`,
      );
      if (turn === 1) {
        await append(
          [
            {
              type: 'request/header',
              time,
              data: {
                header: { provider: 'deepseek', model: 'deepseek-chat', system: 'You are a helpful assistant.' },
                reason: 'initial',
              },
            },
          ],
          `${prefix}/t${turn}/s1/header`,
        );
      }
      await append(
        [assistantMessage(`a${turn}`, turn, 1, turns[i]!.assistant, time), stepEnd(turn, 1, time), turnEnd(turn, time)],
        `${prefix}/t${turn}/s1/reply`,
      );
      perTurnMs.push(since(start));
    }
  });
  return {
    perTurnMs,
    bytes: inMemory ? 0 : sqliteBytes(path),
    payloadBytes,
    note: 'WAL, synchronous=FULL (fsync per commit), 2 commits per turn (3 on turn 1)',
  };
}

/** Each turn `put`s one checkpoint whose messages channel holds the whole list, as an agent's state does. */
async function peerLangGraph(turns: ReturnType<typeof conversation>): Promise<PeerResult> {
  const path = join(ROOT, 'peer-langgraph.db');
  const saver = SqliteSaver.fromConnString(path);
  const perTurnMs: number[] = [];
  const messages: BaseMessage[] = [];
  let config: Parameters<SqliteSaver['put']>[0] = { configurable: { thread_id: 'peer', checkpoint_ns: '' } };
  for (let i = 0; i < turns.length; i++) {
    const turn = i + 1;
    const start = performance.now();
    messages.push(
      new HumanMessage({ id: `u${turn}`, content: turns[i]!.user }),
      new AIMessage({ id: `a${turn}`, content: turns[i]!.assistant }),
    );
    const checkpoint: Checkpoint = {
      ...emptyCheckpoint(),
      id: uuid6(turn),
      channel_values: { messages: [...messages] },
      channel_versions: { __start__: turn, messages: turn },
      versions_seen: { agent: { messages: turn } },
    };
    // SqliteSaver.put takes no newVersions argument (it stores every channel value).
    config = await saver.put(config, checkpoint, { source: 'loop', step: turn, parents: {} });
    perTurnMs.push(since(start));
  }
  // Read back after the first put (which runs the saver's own setup: WAL, no synchronous pragma).
  const synchronous = saver.db.pragma('synchronous', { simple: true }) as number;
  const journal = saver.db.pragma('journal_mode', { simple: true }) as string;
  saver.db.close();
  return {
    perTurnMs,
    bytes: sqliteBytes(path),
    note: `journal_mode=${journal}, synchronous=${synchronous === 2 ? 'FULL' : synchronous === 1 ? 'NORMAL (no fsync per commit)' : String(synchronous)}, 1 commit per turn`,
  };
}

/** Mean per-turn time over the 10 turns around `turn` (clamped to the run). */
function around(perTurnMs: readonly number[], turn: number): number {
  const from = Math.max(0, Math.min(perTurnMs.length - 10, turn - 6));
  return mean(perTurnMs.slice(from, from + 10));
}

async function benchPeer(): Promise<Figure[]> {
  const turns = conversation(PEER_TURNS);
  const ours = await peerSessionlog(turns);
  // The same appends without fsync: separates the store's own work from the disk's latency.
  const cpuOnly = await peerSessionlog(turns, true);
  const theirs = await peerLangGraph(turns);
  const early = 10;
  const late = PEER_TURNS;
  const ours10 = around(ours.perTurnMs, early);
  const oursLate = around(ours.perTurnMs, late);
  const theirs10 = around(theirs.perTurnMs, early);
  const theirsLate = around(theirs.perTurnMs, late);
  printGrid(
    `Same ${fmtInt(PEER_TURNS)}-turn conversation: sessionlog SQLite store vs LangGraph SqliteSaver`,
    ['', 'sessionlog', 'LangGraph SqliteSaver'],
    [
      [`time per turn @ turn ${early} (mean of turns ${early - 4}–${early + 5})`, fmtMs(ours10), fmtMs(theirs10)],
      [`time per turn @ turn ${fmtInt(late)} (mean of the last 10)`, fmtMs(oursLate), fmtMs(theirsLate)],
      [`growth turn ${fmtInt(late)} ÷ turn ${early}`, fmtRatio(oursLate / ours10), fmtRatio(theirsLate / theirs10)],
      [
        'sessionlog on a :memory: store (no fsync): turn 10 / last 10 / growth',
        `${fmtMs(around(cpuOnly.perTurnMs, early))} / ${fmtMs(around(cpuOnly.perTurnMs, late))} / ${fmtRatio(around(cpuOnly.perTurnMs, late) / around(cpuOnly.perTurnMs, early))}`,
        '',
      ],
      [
        'total time for all turns',
        fmtMs(ours.perTurnMs.reduce((a, b) => a + b, 0)),
        fmtMs(theirs.perTurnMs.reduce((a, b) => a + b, 0)),
      ],
      ['file at the end (db + WAL after checkpoint)', fmtBytes(ours.bytes), fmtBytes(theirs.bytes)],
      [
        'file ÷ payload JSON of the appended events',
        fmtRatio(ours.bytes / ours.payloadBytes!),
        fmtRatio(theirs.bytes / ours.payloadBytes!, 0),
      ],
      ['durability settings', ours.note, theirs.note],
    ],
  );
  return [
    {
      name: `sessionlog time per turn, turn ${fmtInt(late)} ÷ turn ${early}`,
      value: fmtRatio(oursLate / ours10),
      target: '≤ 1.2× (flat)',
      met: oursLate <= ours10 * 1.2,
    },
    {
      name: 'sessionlog SQLite bytes on disk ÷ payload, this conversation (~1.9 KB assistant rows)',
      value: fmtRatio(ours.bytes / ours.payloadBytes!),
      target: '≤ 2×',
      met: ours.bytes <= 2 * ours.payloadBytes!,
    },
    {
      name: 'LangGraph file ÷ sessionlog file',
      value: fmtRatio(theirs.bytes / ours.bytes, 0),
      target: '≥ 100×',
      met: theirs.bytes >= ours.bytes * 100,
    },
  ];
}

// ---------------------------------------------------------------------------------------------

let postgresUsed = false;

async function main(): Promise<void> {
  console.log(`bench/store.ts · ${machineLine()} · ${REPS} repetitions (medians) · files in ${ROOT}`);
  try {
    if (SECTIONS.has('append')) {
      printTable(
        `Append rate and bytes on disk (${fmtInt(APPEND_EVENTS)} realistic events in batches of ${APPEND_BATCH}, median of ${REPS})`,
        await benchAppend(),
      );
      printTable(
        `Append rate of text events (${fmtInt(APPEND_EVENTS)} user messages and replies in batches of ${APPEND_BATCH}, median of ${REPS})`,
        await benchTextAppend(),
      );
    }
    if (SECTIONS.has('stages'))
      printTable(
        `Where an append's time goes, µs per event of the realistic mix (median of ${REPS} passes after 3 warm-ups, over ${fmtInt(APPEND_EVENTS)} events)`,
        benchAppendStages(),
      );
    if (SECTIONS.has('reads')) {
      const unreachable = await postgresUnreachable();
      if (unreachable)
        console.log(`PostgreSQL cold reads skipped: no server answers at ${POSTGRES_BENCH_URL} (${unreachable})`);
      else postgresUsed = true;
      printTable(`Cold reads (fresh store instance; median of ${REPS})`, [
        ...readFiguresOf('sqlite', await benchReads('sqlite')),
        ...readFiguresOf('jsonl', await benchReads('jsonl')),
        ...(unreachable ? [] : readFiguresOf('postgres', await benchReads('postgres'))),
      ]);
      if (READ_BATCH > 0) {
        const backends: Backend[] = unreachable ? ['sqlite', 'jsonl'] : ['sqlite', 'jsonl', 'postgres'];
        const figures: Figure[] = [];
        for (const backend of backends)
          figures.push(...batchedReadFiguresOf(backend, READ_BATCH, await benchBatchedReads(backend, READ_BATCH)));
        printTable(
          `Cold reads, the same log in appends of ${READ_BATCH} events (${fmtInt((HEAVY_TURNS * HEAVY_EVENTS_PER_TURN) / READ_BATCH)} batches; fresh store instance; median of ${REPS})`,
          figures,
        );
      }
    }
    if (SECTIONS.has('peer')) printTable('sessionlog vs LangGraph SqliteSaver: targets', await benchPeer());
  } finally {
    if (args.keep) console.log(`\nkept ${ROOT}${postgresUsed ? ` and PostgreSQL schema ${POSTGRES_SCHEMA}` : ''}`);
    else {
      rmSync(ROOT, { recursive: true, force: true });
      if (postgresUsed) await dropBenchSchema(POSTGRES_SCHEMA);
    }
  }
}

await main();
