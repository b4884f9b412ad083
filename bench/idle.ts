/**
 * Idle sessions at scale (issue 53): one worker holding many open sessions, each with a few turns
 * of history, with a workflow cache far smaller than the session count; then turns one at a time
 * on sessions untouched since setup (long evicted from the workflow cache: "cold") interleaved
 * with turns on the session that just had one ("cached"). The same for Temporal's naive chat
 * (bench/workflows/chat-peers.ts: the conversation in workflow state, replayed whole).
 *
 * Each system's worker runs alone in a child process (this script re-spawned with `--worker`),
 * so the RSS and heap reported are the worker's own, taken after a forced GC; this process runs
 * the Temporal client, the SessionClient and the fake model server (echo replies, as in
 * bench/turns.ts). The sessionlog worker opens the same SQLite file as the client. sessionlog
 * runs once per store `sessionCacheSize` in `--store-cache` (default the store's own 32; `32,all`,
 * all = the session count, shows how much of a cold turn is the store re-reading and
 * re-validating the session's log).
 *
 * Reported per system: setup time and turns/s; p50/p99 of cold and cached turns and their
 * ratio; worker RSS and heap after setup and after the measured turns; Temporal history per
 * session (a sample); where a turn's time goes (workflow tasks, which hold replay and local
 * activities, activity tasks, store calls in the worker and in the client).
 *
 *   scripts/temporal-dev-server run -- npx tsx bench/idle.ts [--sessions 10000] [--history-turns 5]
 *     [--cache 500] [--measured 200] [--warmup 10] [--lanes 32] [--store-cache 32] [--tunables '{}']
 *     [--systems sessionlog,naive] [--history-sample 20]
 *
 * Needs TEMPORAL_ADDRESS (the command above provides a private dev server).
 */
import { fork, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime, type Worker, type WorkerOptions } from '@temporalio/worker';
import { SessionClient } from '../src/client/session-client.js';
import { startFakeModelServer } from '../src/model/fake-server.js';
import { createOpenAIProvider } from '../src/model/provider.js';
import { openSqliteStore } from '../src/persistence/index.js';
import type { SessionStore } from '../src/persistence/store.js';
import { createWorker } from '../src/worker.js';
import { workflowIdFor, type SessionTunables } from '../src/workflows/api.js';
import { historyStats } from './support/history.js';
import {
  StoreTimer,
  serverTimesIn,
  waitClosed,
  wallNow,
  type ServerTimes,
  type StoreTime,
} from './support/idle-probe.js';
import { eachLimited } from './support/lanes.js';
import { SYSTEM_PROMPT, createChatPeerWorker } from './support/peer-turns.js';
import {
  collectGarbage,
  fmtBytes,
  fmtInt,
  fmtMs,
  fmtRatio,
  machineLine,
  mean,
  median,
  percentile,
  printGrid,
  printTable,
  since,
  type Figure,
} from './support/report.js';
import { chatUpdate, endSignal, type naiveChatWorkflow } from './workflows/chat-peers.js';

const { values: args } = parseArgs({
  options: {
    sessions: { type: 'string', default: '10000' },
    'history-turns': { type: 'string', default: '5' },
    cache: { type: 'string', default: '500' },
    measured: { type: 'string', default: '200' },
    warmup: { type: 'string', default: '10' },
    lanes: { type: 'string', default: '32' },
    'store-cache': { type: 'string', default: '32' },
    // Session workflow tunables (JSON) for the sessions started here, e.g. '{"continueAsNewAfterTurns":1}'.
    tunables: { type: 'string', default: '{}' },
    systems: { type: 'string', default: 'sessionlog,naive' },
    'history-sample': { type: 'string', default: '20' },
    // Child mode (set by this script when it re-spawns itself): run one system's worker.
    worker: { type: 'string' },
  },
});
const SESSIONS = Number(args.sessions);
const HISTORY_TURNS = Number(args['history-turns']);
const CACHE = Number(args.cache);
const MEASURED = Number(args.measured);
const WARMUP = Number(args.warmup);
const LANES = Number(args.lanes);
const STORE_CACHES = args['store-cache'].split(',').map((s) => (s === 'all' ? SESSIONS : Number(s)));
const TUNABLES = JSON.parse(args.tunables) as Partial<SessionTunables>;
const SYSTEMS = new Set(args.systems.split(','));
const HISTORY_SAMPLE = Number(args['history-sample']);

/**
 * Both workers' options: the workflow cache under test, and slots enough that setup's lanes do
 * not queue behind the activity slot limits (as bench/turns.ts's tuning).
 */
const WORKER_TUNING: Partial<WorkerOptions> = {
  maxCachedWorkflows: CACHE,
  maxConcurrentActivityTaskExecutions: 250,
  maxConcurrentLocalActivityExecutions: 250,
};
/** How long closing one session may take at the end before it is counted as not closed. */
const CLOSE_TIMEOUT_MS = 60_000;

// ---------------------------------------------------------------------------------------------
// The worker child: one system's worker, answering the parent's requests over IPC.

type WorkerKind = 'sessionlog' | 'naive';
type WorkerConfig = {
  kind: WorkerKind;
  address: string;
  taskQueue: string;
  modelBaseURL: string;
  /** sessionlog only: the SQLite file the client also opens, and the store's session cache. */
  storePath?: string;
  storeCache?: number;
};
type Memory = { rss: number; heapUsed: number; heapTotal: number; external: number; peakRss: number };
type ToChild = { type: 'memory' } | { type: 'store-time' } | { type: 'stop' };
type FromChild =
  | { type: 'ready' }
  | { type: 'memory'; memory: Memory }
  | { type: 'store-time'; time: StoreTime }
  | { type: 'stopped' }
  | { type: 'failed'; error: string };

async function runWorkerChild(config: WorkerConfig): Promise<void> {
  const send = (message: FromChild) => process.send!(message);
  Runtime.install({ logger: new DefaultLogger('ERROR') });
  const native = await NativeConnection.connect({ address: config.address });
  const timer = new StoreTimer();
  let store: SessionStore | undefined;
  let worker: Worker;
  if (config.kind === 'sessionlog') {
    store = openSqliteStore(config.storePath!, { sessionCacheSize: config.storeCache! });
    worker = await createWorker({
      connection: native,
      taskQueue: config.taskQueue,
      store: timer.wrap(store),
      model: createOpenAIProvider({
        baseURL: config.modelBaseURL,
        apiKey: 'bench',
        timeoutMs: 120_000,
        idleTimeoutMs: 120_000,
        provider: 'fake',
      }),
      agent: { model: 'fake', system: SYSTEM_PROMPT, tools: [] },
      workerOptions: WORKER_TUNING,
    });
  } else {
    worker = await createChatPeerWorker(native, config.taskQueue, config.modelBaseURL, WORKER_TUNING);
  }
  let peakRss = process.memoryUsage().rss;
  const sampler = setInterval(() => {
    peakRss = Math.max(peakRss, process.memoryUsage().rss);
  }, 200);
  const running = worker.run();
  running.catch((error: unknown) => send({ type: 'failed', error: String(error) }));
  process.on('message', (message: ToChild) => {
    switch (message.type) {
      case 'memory': {
        collectGarbage();
        const { rss, heapUsed, heapTotal, external } = process.memoryUsage();
        send({ type: 'memory', memory: { rss, heapUsed, heapTotal, external, peakRss: Math.max(peakRss, rss) } });
        return;
      }
      case 'store-time':
        send({ type: 'store-time', time: timer.take() });
        return;
      case 'stop':
        clearInterval(sampler);
        worker.shutdown();
        void running
          .catch(() => undefined)
          .then(async () => {
            await native.close();
            await store?.close();
            send({ type: 'stopped' });
            process.disconnect();
          });
        return;
    }
  });
  send({ type: 'ready' });
}

/** The parent's side of a worker child: requests in order, one answer each. */
class WorkerChild {
  private readonly waiting: Array<(message: FromChild) => void> = [];
  private failure: string | undefined;

  private constructor(private readonly child: ChildProcess) {
    child.on('message', (message: FromChild) => {
      if (message.type === 'failed') {
        this.failure = message.error;
        console.error(`worker child failed: ${message.error}`);
        return;
      }
      this.waiting.shift()?.(message);
    });
  }

  static async start(config: WorkerConfig): Promise<WorkerChild> {
    const child = fork(fileURLToPath(import.meta.url), ['--worker', JSON.stringify(config)], {
      execArgv: process.execArgv,
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    const worker = new WorkerChild(child);
    const ready = await Promise.race([
      worker.next(),
      new Promise<never>((_, reject) => child.once('exit', (code) => reject(new Error(`worker child exited ${code}`)))),
    ]);
    if (ready.type !== 'ready') throw new Error(`worker child answered ${ready.type}`);
    return worker;
  }

  private next(): Promise<FromChild> {
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  private async ask(message: ToChild): Promise<FromChild> {
    if (this.failure) throw new Error(`worker child failed: ${this.failure}`);
    const answer = this.next();
    this.child.send(message);
    return answer;
  }

  async memory(): Promise<Memory> {
    const answer = await this.ask({ type: 'memory' });
    if (answer.type !== 'memory') throw new Error(`worker child answered ${answer.type}`);
    return answer.memory;
  }

  async storeTime(): Promise<StoreTime> {
    const answer = await this.ask({ type: 'store-time' });
    if (answer.type !== 'store-time') throw new Error(`worker child answered ${answer.type}`);
    return answer.time;
  }

  /** Stops the worker (gracefully, else after 30 s by its pid). */
  async stop(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => this.child.once('exit', () => resolve()));
    this.child.send({ type: 'stop' } satisfies ToChild);
    const timeout = new AbortController();
    const inTime = await Promise.race([
      exited.then(() => true),
      sleep(30_000, false, { signal: timeout.signal }).catch(() => false),
    ]);
    timeout.abort();
    if (!inTime) {
      this.child.kill('SIGKILL');
      await exited;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The parent: setup, measured turns and reports, one system after another.

/** A user message of about 80 characters. */
function messageFor(session: number, turn: number): string {
  return `session ${session}, turn ${turn}: how many words are in this sentence, roughly?`.padEnd(80, '.');
}

/** One system under test, as the parent drives it. */
type System = {
  label: string;
  /** The Temporal workflow id of session `i`. */
  workflowId(i: number): string;
  turn(i: number, text: string): Promise<void>;
  /** Ends session `i`'s workflow and waits until it has ended. */
  end(i: number): Promise<void>;
  /** Summed store time in the client since the last call (sessionlog only). */
  clientStoreTime?(): StoreTime;
  storeCache?: number;
};

type TurnSample = {
  session: number;
  ms: number;
  start: number;
  end: number;
  workerStore?: StoreTime;
  clientStore?: StoreTime;
  server?: ServerTimes;
};

type SystemResult = {
  label: string;
  setupMs: number;
  setupTurns: number;
  setupFailed: number;
  afterSetup: Memory;
  afterTurns: Memory;
  history: { events: number; bytes: number; sampled: number };
  cold: TurnSample[];
  cached: TurnSample[];
  closeMs: number;
  notClosed: number;
};

async function measureSystem(system: System, child: WorkerChild, temporal: Client): Promise<SystemResult> {
  const indexes = Array.from({ length: SESSIONS }, (_, i) => i);
  const failed = new Set<number>();
  // Setup: sessions in index order, each given its history turns in one lane, so the lowest
  // indexes are the oldest-touched.
  let start = performance.now();
  await eachLimited(indexes, LANES, async (i) => {
    try {
      for (let t = 1; t <= HISTORY_TURNS; t++) await system.turn(i, messageFor(i, t));
    } catch (error) {
      // Counted and reported; the session is then left out of the measured turns.
      if (failed.size === 0) console.error(`setup turn failed: ${(error as Error).message}`);
      failed.add(i);
    }
  });
  const setupMs = since(start);
  const afterSetup = await child.memory();

  const sampleEvery = Math.max(1, Math.floor(SESSIONS / HISTORY_SAMPLE));
  const sampled = indexes.filter((i) => i % sampleEvery === 0 && !failed.has(i)).slice(0, HISTORY_SAMPLE);
  const stats = await Promise.all(sampled.map((i) => historyStats(temporal, system.workflowId(i))));

  // Measured: warm-up pairs, then measured pairs, each a turn on an oldest-touched session
  // (evicted from the workflow cache long ago) and a turn on the same session right after.
  const candidates = indexes.filter((i) => !failed.has(i)).slice(0, WARMUP + MEASURED);
  const cold: TurnSample[] = [];
  const cached: TurnSample[] = [];
  for (const [k, i] of candidates.entries()) {
    for (const [kind, into] of [
      ['cold', cold],
      ['cached', cached],
    ] as const) {
      await child.storeTime();
      system.clientStoreTime?.();
      const text = messageFor(i, kind === 'cold' ? HISTORY_TURNS + 1 : HISTORY_TURNS + 2);
      const startWall = wallNow();
      start = performance.now();
      await system.turn(i, text);
      const ms = since(start);
      const endWall = wallNow();
      const workerStore = await child.storeTime();
      const clientStore = system.clientStoreTime?.();
      if (k >= WARMUP)
        into.push({
          session: i,
          ms,
          start: startWall,
          end: endWall,
          ...(system.clientStoreTime ? { workerStore, clientStore: clientStore! } : {}),
        });
    }
  }
  const afterTurns = await child.memory();

  // Where the time went, from each measured session's history (read after all turns).
  await eachLimited([...cold, ...cached], 4, async (sample) => {
    const history = await temporal.workflow.getHandle(system.workflowId(sample.session)).fetchHistory();
    sample.server = serverTimesIn(history.events ?? [], sample.start, sample.end);
  });

  start = performance.now();
  let notClosed = 0;
  await eachLimited(indexes, LANES, async (i) => {
    const timeout = new AbortController();
    const ended = await Promise.race([
      system.end(i).then(
        () => true,
        (error: unknown) => {
          if (notClosed === 0) console.error(`closing a session failed: ${String(error)}`);
          return false;
        },
      ),
      sleep(CLOSE_TIMEOUT_MS, false, { signal: timeout.signal }).catch(() => false),
    ]);
    timeout.abort();
    if (!ended) notClosed += 1;
  });
  const closeMs = since(start);

  return {
    label: system.label,
    setupMs,
    setupTurns: (SESSIONS - failed.size) * HISTORY_TURNS,
    setupFailed: failed.size,
    afterSetup,
    afterTurns,
    history: {
      events: mean(stats.map((s) => s.events)),
      bytes: mean(stats.map((s) => s.bytes)),
      sampled: stats.length,
    },
    cold,
    cached,
    closeMs,
    notClosed,
  };
}

type Shared = { address: string; temporal: Client; modelBaseURL: string; dir: string; tag: string };

async function sessionlogRun(shared: Shared, storeCache: number): Promise<SystemResult> {
  const { temporal, tag } = shared;
  const storePath = join(shared.dir, `sessions-${storeCache}.db`);
  const timer = new StoreTimer();
  const rawStore = openSqliteStore(storePath, { sessionCacheSize: storeCache });
  const taskQueue = `bench-idle-session-${storeCache}-${tag}`;
  const client = new SessionClient({ temporal, store: timer.wrap(rawStore), taskQueue, tunables: TUNABLES });
  const child = await WorkerChild.start({
    kind: 'sessionlog',
    address: shared.address,
    taskQueue,
    modelBaseURL: shared.modelBaseURL,
    storePath,
    storeCache,
  });
  const idOf = (i: number) => `idle-${storeCache}-${i}-${tag}`;
  try {
    return await measureSystem(
      {
        label: `sessionlog (store cache ${fmtInt(storeCache)})`,
        storeCache,
        workflowId: (i) => workflowIdFor(idOf(i)),
        turn: async (i, text) => {
          const reply = await client.send(idOf(i), text);
          if (reply.outcome !== 'completed') throw new Error(`turn ended ${reply.outcome}`);
        },
        end: async (i) => {
          await client.close(idOf(i));
          await waitClosed(temporal, workflowIdFor(idOf(i)));
        },
        clientStoreTime: () => timer.take(),
      },
      child,
      temporal,
    );
  } finally {
    await child.stop();
    await rawStore.close();
  }
}

async function naiveRun(shared: Shared): Promise<SystemResult> {
  const { temporal, tag } = shared;
  const taskQueue = `bench-idle-naive-${tag}`;
  const child = await WorkerChild.start({
    kind: 'naive',
    address: shared.address,
    taskQueue,
    modelBaseURL: shared.modelBaseURL,
  });
  const idOf = (i: number) => `idle-naive-${i}-${tag}`;
  const started = new Set<number>();
  try {
    return await measureSystem(
      {
        label: 'naive chat',
        workflowId: idOf,
        turn: async (i, text) => {
          if (!started.has(i)) {
            await temporal.workflow.start<typeof naiveChatWorkflow>('naiveChatWorkflow', {
              taskQueue,
              workflowId: idOf(i),
              args: [SYSTEM_PROMPT],
            });
            started.add(i);
          }
          await temporal.workflow.getHandle(idOf(i)).executeUpdate(chatUpdate, { args: [text] });
        },
        end: async (i) => {
          if (!started.has(i)) return;
          const handle = temporal.workflow.getHandle(idOf(i));
          await handle.signal(endSignal);
          await handle.result();
        },
      },
      child,
      temporal,
    );
  } finally {
    await child.stop();
  }
}

function report(results: SystemResult[]): void {
  const naive = results.find((r) => r.label === 'naive chat');
  const p = (samples: TurnSample[], q: number) =>
    percentile(
      samples.map((s) => s.ms),
      q,
    );
  const ratioAt = (r: SystemResult, q: number) => p(r.cold, q) / p(r.cached, q);

  printGrid(
    `Setup: ${fmtInt(SESSIONS)} sessions × ${HISTORY_TURNS} turns, ${LANES} lanes at once, one worker (workflow cache ${fmtInt(CACHE)})`,
    ['system', 'setup time', 'turns/s', 'failed sessions', 'closing all at the end', 'not closed'],
    results.map((r) => [
      r.label,
      fmtMs(r.setupMs),
      ((r.setupTurns / r.setupMs) * 1000).toFixed(1),
      fmtInt(r.setupFailed),
      fmtMs(r.closeMs),
      fmtInt(r.notClosed),
    ]),
  );

  printGrid(
    `Turns one at a time after setup: ${MEASURED} cold (a session untouched since setup) interleaved with ${MEASURED} cached (the same session right after), ${WARMUP} warm-up pairs first`,
    ['system', 'cold p50', 'cold p99', 'cached p50', 'cached p99', 'cold ÷ cached p50', 'cold ÷ cached p99'],
    results.map((r) => [
      r.label,
      fmtMs(p(r.cold, 50)),
      fmtMs(p(r.cold, 99)),
      fmtMs(p(r.cached, 50)),
      fmtMs(p(r.cached, 99)),
      fmtRatio(ratioAt(r, 50)),
      fmtRatio(ratioAt(r, 99)),
    ]),
  );

  const med = (samples: TurnSample[], pick: (s: TurnSample) => number | undefined): string => {
    const values = samples.map(pick).filter((v): v is number => v !== undefined);
    return values.length === 0 ? 'n/a' : fmtMs(median(values));
  };
  const rows: string[][] = [];
  for (const r of results) {
    for (const [kind, samples] of [
      ['cold', r.cold],
      ['cached', r.cached],
    ] as const) {
      rows.push([
        r.label,
        kind,
        med(samples, (s) => s.ms),
        med(samples, (s) => s.server?.taskMs),
        med(samples, (s) => s.server?.taskWaitMs),
        med(samples, (s) => s.server?.activityMs),
        med(samples, (s) => s.server?.activityWaitMs),
        med(samples, (s) => s.workerStore?.ms),
        med(samples, (s) => s.clientStore?.ms),
        med(samples, (s) => (s.server ? s.ms - s.server.taskMs - s.server.activityMs : undefined)),
        fmtInt(samples.reduce((n, s) => n + (s.server?.failedTasks ?? 0), 0)),
      ]);
    }
  }
  printGrid(
    'Where a turn goes (medians per column; workflow tasks hold replay and local activities, store time is summed calls)',
    [
      'system',
      'turn',
      'turn (client)',
      'workflow tasks',
      'task queue wait',
      'activities',
      'activity queue wait',
      'store calls, worker',
      'store calls, client',
      'turn − tasks − activities',
      'failed/timed-out tasks',
    ],
    rows,
  );

  printGrid(
    'Worker process memory (child process alone, after a forced GC) and Temporal history per session',
    [
      'system',
      `RSS, ${fmtInt(SESSIONS)} open sessions after setup`,
      'heap used / total after setup',
      'external after setup',
      'RSS after measured turns',
      'heap used after measured turns',
      'peak RSS',
      `history per session (mean of ${results[0]?.history.sampled ?? 0}, ${HISTORY_TURNS} turns)`,
    ],
    results.map((r) => [
      r.label,
      fmtBytes(r.afterSetup.rss),
      `${fmtBytes(r.afterSetup.heapUsed)} / ${fmtBytes(r.afterSetup.heapTotal)}`,
      fmtBytes(r.afterSetup.external),
      fmtBytes(r.afterTurns.rss),
      fmtBytes(r.afterTurns.heapUsed),
      fmtBytes(Math.max(r.afterSetup.peakRss, r.afterTurns.peakRss)),
      `${r.history.events.toFixed(1)} events, ${fmtBytes(r.history.bytes)}`,
    ]),
  );

  const figures: Figure[] = [];
  for (const r of results) {
    if (r === naive) continue;
    const ratio = ratioAt(r, 50);
    const naiveRatio = naive ? ratioAt(naive, 50) : undefined;
    figures.push({
      name: `turn on a cache-evicted session ÷ turn on a cached one, ${fmtInt(SESSIONS)} sessions, p50: ${r.label}`,
      value: `${fmtRatio(ratio)} (p99 ${fmtRatio(ratioAt(r, 99))}; naive chat ${naiveRatio === undefined ? 'not run' : fmtRatio(naiveRatio)})`,
      target: '≤ 1.5× (and ≤ the naive chat’s ratio)',
      met: ratio <= 1.5 && (naiveRatio === undefined || ratio <= naiveRatio),
    });
    if (naive)
      figures.push({
        name: `worker RSS with ${fmtInt(SESSIONS)} open sessions: ${r.label} vs naive chat`,
        value: `${fmtBytes(r.afterSetup.rss)} vs ${fmtBytes(naive.afterSetup.rss)}`,
        target: '≤ naive chat’s',
        met: r.afterSetup.rss <= naive.afterSetup.rss,
      });
  }
  if (figures.length > 0) printTable(`Idle sessions at scale: sessionlog against the naive chat (same run)`, figures);
}

async function main(): Promise<void> {
  const address = process.env.TEMPORAL_ADDRESS;
  if (!address) {
    throw new Error(
      'TEMPORAL_ADDRESS is not set; run `scripts/temporal-dev-server run -- npx tsx bench/idle.ts` (or `npm run bench`)',
    );
  }
  if (WARMUP + MEASURED > SESSIONS - CACHE)
    throw new Error(
      `--warmup + --measured (${WARMUP + MEASURED}) must be at most --sessions − --cache (${SESSIONS - CACHE}): every cold turn needs a session evicted from the cache`,
    );
  console.log(`bench/idle.ts · ${machineLine()} · Temporal at ${address}`);
  const dir = mkdtempSync(join(tmpdir(), 'sessionlog-bench-idle-'));
  const connection = await Connection.connect({ address });
  const temporal = new Client({ connection, namespace: 'default' });
  const fake = await startFakeModelServer({});
  const shared: Shared = { address, temporal, modelBaseURL: fake.baseURL, dir, tag: randomUUID().slice(0, 8) };
  const results: SystemResult[] = [];
  try {
    // The naive chat between the sessionlog runs, so neither store cache gets the quietest slot.
    const runs: Array<() => Promise<SystemResult>> = [];
    if (SYSTEMS.has('sessionlog')) runs.push(() => sessionlogRun(shared, STORE_CACHES[0]!));
    if (SYSTEMS.has('naive')) runs.push(() => naiveRun(shared));
    if (SYSTEMS.has('sessionlog'))
      for (const size of STORE_CACHES.slice(1)) runs.push(() => sessionlogRun(shared, size));
    for (const run of runs) {
      const result = await run();
      console.log(
        `  ${result.label}: setup ${fmtMs(result.setupMs)}, cold p50 ${fmtMs(
          percentile(
            result.cold.map((s) => s.ms),
            50,
          ),
        )}, cached p50 ${fmtMs(
          percentile(
            result.cached.map((s) => s.ms),
            50,
          ),
        )}`,
      );
      results.push(result);
    }
    report(results);
    console.log(
      `\nworker options (both systems): ${JSON.stringify(WORKER_TUNING)}; sessionlog store sessionCacheSize ${STORE_CACHES.map(fmtInt).join(' and ')} (default 32; the client's store the same); memory after v8 gc() (report.ts collectGarbage, not --expose-gc on the command line); heap figures are the worker's main thread, the workflow threads' V8 heaps count in RSS only; fake model: echo replies`,
    );
  } finally {
    await fake.close();
    await connection.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (args.worker !== undefined) await runWorkerChild(JSON.parse(args.worker) as WorkerConfig);
else await main();
