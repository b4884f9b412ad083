/**
 * Turn benchmarks against a real Temporal server and the fake model server over HTTP:
 *
 * - peers: one 300-turn conversation kept three ways side by side (support/peer-turns.ts):
 *   Temporal's naive chat (the message list in workflow state, passed whole to the model
 *   activity every turn), the floor (one update + one no-op activity), and sessionlog; turn
 *   time, Temporal history, where the naive chat is terminated, where each millisecond of a
 *   sessionlog turn goes, and its bytes written, CPU and projection checkpoint per turn;
 * - chunks: the chunk coalescing settings (flush window, character cap) compared on interleaved
 *   conversations, at a realistic token rate (support/chunk-settings.ts);
 * - latency: per-turn latency of `SessionClient.send` beside a minimal one-activity workflow
 *   on the same server, and Temporal history growth per turn;
 * - concurrency: load shapes of N sessions × T turns on one in-process worker (the 3-turn burst
 *   at 100 and 200 sessions, long sessions at 100 × 30 and 50 × 100), each beside the naive chat
 *   and the floor at the same shape in the same run.
 *
 *   scripts/temporal-dev-server run -- npx tsx bench/turns.ts [--phases peers,chunks,latency,concurrency]
 *     [--peer-turns 300] [--points 10,100,240,300] [--breakdown-turns 50] [--peers naive,floor,sessionlog]
 *     [--chunk-settings WINDOW_MS:MAX_CHARS,…] [--token-delay 10] [--chunk-turns 5]
 *     [--turns 50] [--loads 100x3,200x3,100x30,50x100] [--systems sessionlog,naive,floor]
 *     [--worker-options '{"workflowThreadPoolSize":2}'] [--tunables '{"continueAsNewAfterTurns":1}']
 *
 * Needs TEMPORAL_ADDRESS (the command above provides a private dev server). The worker and the
 * client run in this process, the fake model server in a child process of its own, so "worker
 * RSS" and "CPU per turn" are this process's: an upper bound on the worker's own.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Client, Connection } from '@temporalio/client';
import proto from '@temporalio/proto';
import {
  DefaultLogger,
  NativeConnection,
  Runtime,
  Worker,
  bundleWorkflowCode,
  type WorkerOptions,
} from '@temporalio/worker';
import { SessionClient } from '../src/client/session-client.js';
import { createOpenAIProvider } from '../src/model/provider.js';
import { openSqliteStore } from '../src/persistence/index.js';
import { createWorker } from '../src/worker.js';
import { workflowIdFor, type SessionTunables } from '../src/workflows/api.js';
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
import { benchChunkSettings, parseCoalesce } from './support/chunk-settings.js';
import { waitClosed } from './support/idle-probe.js';
import { eachLimited } from './support/lanes.js';
import { questionFor, startFakeModelProcess } from './support/fake-model-process.js';
import { SYSTEM_PROMPT, benchPeerTurns, createChatPeerWorker, type PeerName } from './support/peer-turns.js';
import { roundTripActivities } from './support/round-trip-activities.js';
import {
  chatUpdate,
  endSignal,
  floorTurnUpdate,
  type floorWorkflow,
  type naiveChatWorkflow,
} from './workflows/chat-peers.js';

const { values: args } = parseArgs({
  options: {
    turns: { type: 'string', default: '50' },
    warmup: { type: 'string', default: '10' },
    'history-turn': { type: 'string', default: '100' },
    // The concurrency phase's load shapes: SESSIONSxTURNS, each session's turns after its first.
    loads: { type: 'string', default: '100x3,200x3,100x30,50x100' },
    // Worker options (JSON) over WORKER_TUNING, for every worker here: levers of the SDK's worker.
    'worker-options': { type: 'string', default: '{}' },
    // Session workflow tunables (JSON) for the sessions started here, e.g. '{"continueAsNewAfterTurns":1}'.
    tunables: { type: 'string', default: '{}' },
    // The concurrency phase's systems: sessionlog, naive (Temporal's naive chat), floor.
    systems: { type: 'string', default: 'sessionlog,naive,floor' },
    phases: { type: 'string', default: 'peers,chunks,latency,concurrency' },
    'peer-turns': { type: 'string', default: '300' },
    points: { type: 'string', default: '10,100,240,300' },
    'breakdown-turns': { type: 'string', default: '50' },
    peers: { type: 'string', default: 'naive,floor,sessionlog' },
    'chunk-settings': { type: 'string', default: '50:,100:,200:' },
    'token-delay': { type: 'string', default: '10' },
    'chunk-turns': { type: 'string', default: '5' },
  },
});
const MEASURED_TURNS = Number(args.turns);
const WARMUP = Number(args.warmup);
const HISTORY_LATE_TURN = Number(args['history-turn']);
const HISTORY_EARLY_TURN = 5;
const LOADS = args.loads.split(',').map(parseLoad);
const TUNABLES = JSON.parse(args.tunables) as Partial<SessionTunables>;

/** `100x30`: 100 sessions at once, each doing 30 measured turns after its first. */
function parseLoad(text: string): { sessions: number; turns: number } {
  const match = /^(\d+)x(\d+)$/.exec(text.trim());
  if (!match || Number(match[1]) < 1 || Number(match[2]) < 1)
    throw new Error(`--loads: "${text}" is not SESSIONSxTURNS (e.g. 100x30)`);
  return { sessions: Number(match[1]), turns: Number(match[2]) };
}
const SYSTEMS = new Set(args.systems.split(','));
const PHASES = new Set(args.phases.split(','));
const PEER_TURNS = Number(args['peer-turns']);
const POINTS = args.points.split(',').map(Number);
const BREAKDOWN_TURNS = Number(args['breakdown-turns']);
const PEERS = new Set(args.peers.split(',') as PeerName[]);
const CHUNK_SETTINGS = args['chunk-settings'].split(',').map(parseCoalesce);
const TOKEN_DELAY_MS = Number(args['token-delay']);
const CHUNK_TURNS = Number(args['chunk-turns']);

/**
 * Worker settings for 500 concurrent sessions (SDK defaults in brackets): every session's
 * workflow stays cached, so no turn pays a replay [derived from heap size]; enough activity
 * and local-activity slots that a turn does not queue behind the slot limit [100 each].
 * Workflow-task slots stay at the default [40]: more slots only let tasks wait inside a
 * saturated worker, where their 10 s start-to-close timeout runs (tried 200: tasks timed out).
 */
const WORKER_TUNING: Partial<WorkerOptions> = {
  maxCachedWorkflows: 1_000,
  maxConcurrentActivityTaskExecutions: 250,
  maxConcurrentLocalActivityExecutions: 250,
  ...(JSON.parse(args['worker-options']) as Partial<WorkerOptions>),
};
/** How many sessions start their workflow at once in the (unmeasured) first turn. */
const START_PARALLELISM = 25;
/** The store keeps a validated log per session in memory; sized for every session here [32]. */
const STORE_SESSION_CACHE = 1_024;

type History = Awaited<ReturnType<ReturnType<Client['workflow']['getHandle']>['fetchHistory']>>;

function historySize(history: History): { events: number; bytes: number } {
  return {
    events: history.events?.length ?? 0,
    bytes: proto.temporal.api.history.v1.History.encode(history).finish().length,
  };
}

class RssSampler {
  peak = process.memoryUsage().rss;
  private readonly timer = setInterval(() => {
    this.peak = Math.max(this.peak, process.memoryUsage().rss);
  }, 100);
  stop(): number {
    clearInterval(this.timer);
    this.peak = Math.max(this.peak, process.memoryUsage().rss);
    return this.peak;
  }
}

type Bench = { temporal: Client; client: SessionClient; roundTripQueue: string; peerQueue: string; sessions: string[] };

/** Sequential turns of one session beside the minimal round trip, and history growth per turn. */
async function benchLatency({ temporal, client, roundTripQueue, sessions }: Bench): Promise<void> {
  const latencyId = `latency-${randomUUID()}`;
  sessions.push(latencyId);
  const handle = temporal.workflow.getHandle(workflowIdFor(latencyId));
  const sendMs: number[] = [];
  const roundTripMs: number[] = [];
  const history: Record<number, { events: number; bytes: number; continuedAsNew: boolean }> = {};
  const lastTurn = Math.max(WARMUP + MEASURED_TURNS, HISTORY_LATE_TURN);
  for (let turn = 1; turn <= lastTurn; turn++) {
    const observe = turn === HISTORY_EARLY_TURN || turn === HISTORY_LATE_TURN;
    const before = observe
      ? { size: historySize(await handle.fetchHistory()), runId: (await handle.describe()).runId }
      : undefined;
    let start = performance.now();
    const reply = await client.send(latencyId, `question ${turn}: how many words are in this sentence?`);
    const ms = since(start);
    if (reply.outcome !== 'completed') throw new Error(`turn ${turn} ended ${reply.outcome}`);
    if (before) {
      const after = historySize(await handle.fetchHistory());
      const continuedAsNew = (await handle.describe()).runId !== before.runId;
      history[turn] = {
        events: after.events - before.size.events,
        bytes: after.bytes - before.size.bytes,
        continuedAsNew,
      };
    }
    if (turn > WARMUP + MEASURED_TURNS) continue;
    start = performance.now();
    await temporal.workflow.execute('roundTripWorkflow', {
      taskQueue: roundTripQueue,
      workflowId: `round-trip-${randomUUID()}`,
      args: [`ping ${turn}`],
    });
    const rtMs = since(start);
    if (turn > WARMUP) {
      sendMs.push(ms);
      roundTripMs.push(rtMs);
    }
  }
  const turnMedian = median(sendMs);
  const rtMedian = median(roundTripMs);
  const early = history[HISTORY_EARLY_TURN]!;
  const late = history[HISTORY_LATE_TURN]!;
  const historyFigure = (turn: number, h: typeof early): Figure => ({
    name: `Temporal history added by turn ${turn}`,
    value: h.continuedAsNew
      ? 'n/a (the run continued as new during this turn)'
      : `${h.events} events, ${fmtBytes(h.bytes)}`,
  });
  printTable(`One session, sequential turns (median of ${MEASURED_TURNS} after ${WARMUP} warm-up, interleaved)`, [
    {
      name: 'session turn (SessionClient.send round trip)',
      value: `${fmtMs(turnMedian)} (p90 ${fmtMs(percentile(sendMs, 90))})`,
    },
    {
      name: 'minimal Temporal round trip (start + 1 activity + result)',
      value: `${fmtMs(rtMedian)} (p90 ${fmtMs(percentile(roundTripMs, 90))})`,
    },
    {
      name: 'session turn ÷ minimal round trip',
      value: fmtRatio(turnMedian / rtMedian),
      target: '≤ 2×',
      met: turnMedian <= rtMedian * 2,
    },
    historyFigure(HISTORY_EARLY_TURN, early),
    historyFigure(HISTORY_LATE_TURN, late),
    {
      name: `history per turn, turn ${HISTORY_LATE_TURN} vs turn ${HISTORY_EARLY_TURN}`,
      value: `${late.events - early.events >= 0 ? '+' : ''}${late.events - early.events} events, ${late.bytes - early.bytes >= 0 ? '+' : ''}${late.bytes - early.bytes} B`,
      target: 'constant',
      met:
        !early.continuedAsNew &&
        !late.continuedAsNew &&
        late.events === early.events &&
        Math.abs(late.bytes - early.bytes) <= early.bytes * 0.05,
    },
  ]);
}

/**
 * The user message of a load's turn `turn`: 80 characters, opening as the fake model process
 * expects (`question N:`), so every system gets the same ~1,600-character reply for it.
 */
function loadMessage(turn: number): string {
  return questionFor(turn).padEnd(80, ' (please count them all)');
}

/** One conversation's next turn; `expected` gives the reply to check, where one is known. */
type Conversation = { turn: (text: string) => Promise<string>; expected?: (text: string) => string };
/** The concurrency phase's systems, as `--systems` names them. */
type System = 'sessionlog' | 'naive' | 'floor';
const SYSTEM_LABELS: Record<System, string> = { sessionlog: 'sessionlog', naive: 'naive chat', floor: 'floor' };
type LoadResult = {
  turns: number;
  failed: Map<string, number>;
  turnsPerSecond: number;
  latencies: number[];
  peakRss: number;
  /** This process's CPU (user + system) over the measured turns, per turn completed. */
  cpuMsPerTurn: number;
};

/**
 * `n` conversations of one system at once, each doing a first (workflow-starting, unmeasured)
 * turn and then `turns` sequential measured turns.
 */
async function runLoad(n: number, turns: number, open: (i: number) => Promise<Conversation>): Promise<LoadResult> {
  const conversations: Conversation[] = [];
  await eachLimited(
    Array.from({ length: n }, (_, i) => i),
    START_PARALLELISM,
    async (i) => {
      const conversation = await open(i);
      await conversation.turn(loadMessage(0));
      conversations[i] = conversation;
    },
  );
  const sampler = new RssSampler();
  const latencies: number[] = [];
  const failed = new Map<string, number>();
  const cpuBefore = process.cpuUsage();
  const start = performance.now();
  await Promise.all(
    conversations.map(async (conversation) => {
      for (let t = 0; t < turns; t++) {
        const text = loadMessage(t + 1);
        const turnStart = performance.now();
        try {
          const reply = await conversation.turn(text);
          const expected = conversation.expected?.(text);
          if (expected !== undefined && reply !== expected) throw new Error(`unexpected reply: ${reply.slice(0, 40)}`);
          latencies.push(since(turnStart));
        } catch (error) {
          // Counted and reported: an overloaded stack is a result, not a crash of the bench.
          const key = (error as Error).message.slice(0, 80);
          failed.set(key, (failed.get(key) ?? 0) + 1);
        }
      }
    }),
  );
  const wallMs = since(start);
  const cpu = process.cpuUsage(cpuBefore);
  return {
    cpuMsPerTurn: (cpu.user + cpu.system) / 1000 / Math.max(1, latencies.length),
    turns: latencies.length,
    failed,
    turnsPerSecond: (latencies.length / wallMs) * 1000,
    latencies,
    peakRss: sampler.stop(),
  };
}

/**
 * Each load shape: N sessions on one worker, each doing T sequential turns, all sessions at once;
 * beside them, in the same run, process and Temporal server, Temporal's naive chat (the message
 * list in workflow state) and the floor (one update and one no-op activity per turn), with the
 * same zero-latency model. Systems take turns going first from one shape to the next.
 */
async function benchConcurrency({ temporal, client, peerQueue, sessions }: Bench): Promise<void> {
  const rows: string[][] = [];
  const figures: Figure[] = [];
  const tag = randomUUID().slice(0, 8);
  // `shape` (e.g. `100x30`) keeps the ids of two shapes with the same N apart.
  const openers: Record<System, (shape: string, i: number) => Promise<Conversation>> = {
    sessionlog: async (shape, i) => {
      const id = `c${shape}-${i}-${tag}`;
      sessions.push(id);
      return {
        turn: async (text) => {
          const reply = await client.send(id, text);
          if (reply.outcome !== 'completed') throw new Error(`turn ended ${reply.outcome}`);
          return reply.text;
        },
      };
    },
    naive: async (shape, i) => {
      const handle = await temporal.workflow.start<typeof naiveChatWorkflow>('naiveChatWorkflow', {
        taskQueue: peerQueue,
        workflowId: `naive-c${shape}-${i}-${tag}`,
        args: [SYSTEM_PROMPT],
      });
      peers.push(handle.workflowId);
      return { turn: (text) => handle.executeUpdate(chatUpdate, { args: [text] }) };
    },
    floor: async (shape, i) => {
      const handle = await temporal.workflow.start<typeof floorWorkflow>('floorWorkflow', {
        taskQueue: peerQueue,
        workflowId: `floor-c${shape}-${i}-${tag}`,
        args: [],
      });
      peers.push(handle.workflowId);
      return {
        turn: async (text) => String(await handle.executeUpdate(floorTurnUpdate, { args: [text] })),
        expected: (text) => String(text.length),
      };
    },
  };
  const peers: string[] = [];
  const systems = (Object.keys(openers) as System[]).filter((system) => SYSTEMS.has(system));
  for (const [round, { sessions: n, turns }] of LOADS.entries()) {
    const shape = `${n}x${turns}`;
    const label = `${fmtInt(n)} sessions × ${turns} turns`;
    const results = new Map<System, LoadResult>();
    for (let k = 0; k < systems.length; k++) {
      const system = systems[(k + round) % systems.length]!;
      const result = await runLoad(n, turns, (i) => openers[system](shape, i));
      results.set(system, result);
      const failed = [...result.failed.values()].reduce((a, b) => a + b, 0);
      rows.push([
        label,
        SYSTEM_LABELS[system],
        fmtInt(result.turns),
        failed === 0 ? '0' : `${failed} (${[...result.failed].map(([m, c]) => `${c}× ${m}`).join('; ')})`,
        result.turnsPerSecond.toFixed(1),
        fmtMs(percentile(result.latencies, 50)),
        fmtMs(percentile(result.latencies, 99)),
        fmtMs(result.cpuMsPerTurn),
        fmtBytes(result.peakRss),
      ]);
      // End this system's conversations before the next system runs, so each has the worker alone.
      await Promise.allSettled(
        system === 'sessionlog'
          ? sessions.splice(0).map(async (id) => {
              await client.close(id);
              // Not handle.result(): a bare client cannot decode the session's sealed result.
              await waitClosed(temporal, workflowIdFor(id));
            })
          : peers.splice(0).map(async (id) => {
              const handle = temporal.workflow.getHandle(id);
              await handle.signal(endSignal);
              await handle.result();
            }),
      );
    }
    const ours = results.get('sessionlog');
    const naive = results.get('naive');
    const floor = results.get('floor');
    // A run of some systems only (--systems, e.g. to profile one) has no comparison.
    if (!ours || !naive || !floor) continue;
    const ratio = ours.turnsPerSecond / naive.turnsPerSecond;
    // Issue 53's targets: at least the naive chat's turns/s, 1.5× it from 100 turns a session.
    const wanted = turns >= 100 ? 1.5 : 1;
    figures.push({
      name: `${label}: sessionlog turns/s ÷ naive chat's`,
      value: `${fmtRatio(ratio)} (÷ floor's ${fmtRatio(ours.turnsPerSecond / floor.turnsPerSecond)})`,
      target: `≥ ${wanted.toFixed(1)}×`,
      met: ratio >= wanted,
    });
    const p99 = percentile(ours.latencies, 99) / percentile(floor.latencies, 99);
    figures.push({
      name: `${label}: sessionlog p99 ÷ floor's p99`,
      value: fmtRatio(p99),
      ...(n === 200 ? { target: '≤ 1.3×', met: p99 <= 1.3 } : {}),
    });
  }
  printGrid(
    'Concurrent sessions on one worker (the measured turns of each session follow a first, workflow-starting turn)',
    [
      'sessions',
      'system',
      'turns',
      'failed',
      'turns/s',
      'p50 latency',
      'p99 latency',
      'CPU per turn (worker + client)',
      'peak RSS (worker + client)',
    ],
    rows,
  );
  if (figures.length > 0)
    printTable('Concurrent sessions: sessionlog against the naive chat and the floor (same run)', figures);
  console.log(
    `\nworker options: ${JSON.stringify(WORKER_TUNING)} (the peers' worker too); store sessionCacheSize ${STORE_SESSION_CACHE}; first turns started ${START_PARALLELISM} at a time`,
  );
}

async function main(): Promise<void> {
  const address = process.env.TEMPORAL_ADDRESS;
  if (!address) {
    throw new Error(
      'TEMPORAL_ADDRESS is not set; run `scripts/temporal-dev-server run -- npx tsx bench/turns.ts` (or `npm run bench`)',
    );
  }
  try {
    // ERROR only: under load the SDK warns per slow workflow task, which would bury the tables.
    Runtime.install({ logger: new DefaultLogger('ERROR') });
  } catch (error) {
    // A runtime already exists in this process (it cannot be installed twice); keep it.
    void error;
  }
  console.log(`bench/turns.ts · ${machineLine()} · Temporal at ${address}`);

  const dir = mkdtempSync(join(tmpdir(), 'sessionlog-bench-turns-'));
  const native = await NativeConnection.connect({ address });
  const connection = await Connection.connect({ address });
  const temporal = new Client({ connection, namespace: 'default' });
  try {
    if (PHASES.has('peers')) {
      await benchPeerTurns({
        temporal,
        native,
        dir,
        turns: PEER_TURNS,
        points: POINTS,
        breakdownTurns: BREAKDOWN_TURNS,
        peers: PEERS,
      });
    }
    if (PHASES.has('chunks'))
      await benchChunkSettings({
        temporal,
        native,
        dir,
        settings: CHUNK_SETTINGS,
        tokenDelayMs: TOKEN_DELAY_MS,
        turns: CHUNK_TURNS,
      });
    if (PHASES.has('latency') || PHASES.has('concurrency')) await benchSessionTurns(temporal, native, dir);
  } finally {
    await connection.close();
    await native.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The latency and concurrency phases, on one worker with the fake model in its own process (~1,600-character replies). */
async function benchSessionTurns(temporal: Client, native: NativeConnection, dir: string): Promise<void> {
  const store = openSqliteStore(join(dir, 'sessions.db'), { sessionCacheSize: STORE_SESSION_CACHE });
  // In a process of its own, as a provider would be: its tokenizing of each prompt (which grows
  // with the naive chat's conversation) stays out of this process's CPU and event loop.
  const fake = await startFakeModelProcess();
  const provider = createOpenAIProvider({
    baseURL: fake.baseURL,
    apiKey: 'bench',
    timeoutMs: 120_000,
    idleTimeoutMs: 120_000,
    provider: 'fake',
  });
  const sessionQueue = `bench-session-${randomUUID()}`;
  const roundTripQueue = `bench-round-trip-${randomUUID()}`;
  const sessionWorker = await createWorker({
    connection: native,
    taskQueue: sessionQueue,
    store,
    model: provider,
    agent: { model: 'fake', system: SYSTEM_PROMPT, tools: [] },
    workerOptions: WORKER_TUNING,
  });
  const roundTripBundle = await bundleWorkflowCode({
    workflowsPath: fileURLToPath(new URL('./workflows/round-trip.ts', import.meta.url)),
    logger: { log() {}, info() {}, warn() {}, error() {}, debug() {}, trace() {} },
  });
  const roundTripWorker = await Worker.create({
    connection: native,
    taskQueue: roundTripQueue,
    workflowBundle: roundTripBundle,
    activities: roundTripActivities,
  });
  // The naive chat and the floor for the concurrency phase: a worker tuned as the session worker.
  const peerQueue = `bench-peers-${randomUUID()}`;
  const peerWorker = await createChatPeerWorker(native, peerQueue, fake.baseURL, WORKER_TUNING);
  const running = [sessionWorker.run(), roundTripWorker.run(), peerWorker.run()];
  const client = new SessionClient({ temporal, store, taskQueue: sessionQueue, tunables: TUNABLES });
  const sessions: string[] = [];
  const bench: Bench = { temporal, client, roundTripQueue, peerQueue, sessions };
  try {
    if (PHASES.has('latency')) await benchLatency(bench);
    if (PHASES.has('concurrency')) await benchConcurrency(bench);
  } finally {
    // Let every session workflow finish (while the worker still runs) so a shared server is left clean.
    await Promise.allSettled(sessions.map((id) => client.close(id)));
    const finished = Promise.allSettled(sessions.map((id) => waitClosed(temporal, workflowIdFor(id))));
    const timeout = new AbortController();
    await Promise.race([finished, sleep(30_000, undefined, { signal: timeout.signal }).catch(() => undefined)]);
    timeout.abort();
    sessionWorker.shutdown();
    roundTripWorker.shutdown();
    peerWorker.shutdown();
    await Promise.allSettled(running);
    await fake.close();
    await store.close();
  }
}

await main();
