/**
 * The production topology (DESIGN §8.1, test/fleet/topology.ts) measured, with a zero-latency
 * fake model, all of it as separate processes on this machine:
 *
 * 1. Throughput and turn latency at N concurrent sessions (each sends a few sequential turns
 *    over HTTP, `POST …/messages?wait=true`, through 2 gateways) with 1 and with 3 workers, on
 *    the fleet topology (full Temporal server, store on PostgreSQL) and on the CLI dev server
 *    with one SQLite file, in one run.
 * 2. Worker failover: a worker is SIGKILLed while it streams a reply; the time until the next
 *    chunk of that turn is appended by another worker, for two model heartbeat timeouts
 *    (`SESSIONLOG_MODEL_HEARTBEAT_MS`, a workflow tunable the gateways pass to new sessions).
 * 3. Gateway failover: a gateway with SSE followers is SIGKILLed; the time until each follower's
 *    stream is open again on the other gateway.
 *
 *   npx tsx bench/fleet.ts [--sessions 100] [--turns 3] [--kills 3] [--heartbeats 2000,5000] [--followers 20]
 *
 * Builds the Temporal server the first time (scripts/temporal-server, about 6 minutes). The
 * workers, gateways, Temporal and PostgreSQL, the fake model and this driver all share the
 * machine's cores: see BENCHMARKS.md for what that limits.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { Client, Connection } from '@temporalio/client';
import { startFakeModelServer, type FakeModelServer } from '../src/model/fake-server.js';
import { openStore } from '../src/persistence/open.js';
import { workflowIdFor } from '../src/workflows/api.js';
import { Fleet, allowPostgresThrough, ensureTemporalServerBuilt } from '../test/fleet/harness.js';
import { HttpDriver, SseFollower } from '../test/fleet/traffic.js';
import { fmtMs, machineLine, median, percentile, printGrid } from './support/report.js';
import { eachLimited } from './support/lanes.js';

const { values: args } = parseArgs({
  options: {
    sessions: { type: 'string', default: '100' },
    turns: { type: 'string', default: '3' },
    kills: { type: 'string', default: '3' },
    heartbeats: { type: 'string', default: '2000,5000' },
    followers: { type: 'string', default: '20' },
    phases: { type: 'string', default: 'throughput,worker-failover,gateway-failover' },
  },
});
const SESSIONS = Number(args.sessions);
const TURNS = Number(args.turns);
const KILLS = Number(args.kills);
const HEARTBEATS = args.heartbeats.split(',').map(Number);
const FOLLOWERS = Number(args.followers);
const PHASES = new Set(args.phases.split(','));
const TOKEN = 'fleet-bench-token-0123456789abcdef';
/** Sessions started (their first, unmeasured turn) at once. */
const START_PARALLELISM = 25;

const root = mkdtempSync(join(tmpdir(), 'sessionlog-bench-fleet-'));
allowPostgresThrough(root);

async function withFleet<T>(
  name: string,
  options: { backend: 'full' | 'dev'; workers: number; fake: FakeModelServer; heartbeatMs?: number },
  body: (fleet: Fleet) => Promise<T>,
): Promise<T> {
  const fleet = await Fleet.start({
    dir: join(root, name),
    backend: options.backend,
    workers: options.workers,
    gateways: 2,
    modelBaseUrl: options.fake.baseURL,
    token: TOKEN,
    modelHeartbeatMs: options.heartbeatMs ?? 30_000,
    modelMaxAttempts: 10,
  });
  try {
    return await body(fleet);
  } finally {
    await fleet.stop();
  }
}

const gatewayUrls = (fleet: Fleet) => () => fleet.gatewayPorts.map((_, slot) => fleet.gatewayUrl(slot));

type ThroughputRow = { label: string; turnsPerSecond: number; p50: number; p99: number; failures: number };

/** N sessions at once, each TURNS sequential turns (after an unmeasured first turn that starts its workflow). */
async function measureThroughput(fleet: Fleet, label: string): Promise<ThroughputRow> {
  const driver = new HttpDriver(gatewayUrls(fleet), TOKEN);
  const ids = Array.from({ length: SESSIONS }, (_, i) => `bench-${i}-${randomUUID().slice(0, 8)}`);
  await eachLimited(ids, START_PARALLELISM, async (id, i) => {
    await driver.createSession(id, i % 2);
    await driver.send(id, `${id}-warm`, 'hello, first turn', i % 2);
  });
  const failuresBefore = [...driver.failures.values()].reduce((a, b) => a + b, 0);
  const latencies: number[] = [];
  const started = performance.now();
  await Promise.all(
    ids.map(async (id, i) => {
      for (let turn = 1; turn <= TURNS; turn++) {
        const ack = await driver.send(
          id,
          `${id}-t${turn}`,
          `question ${turn}: how many words are in this sentence?`,
          i % 2,
        );
        if (ack.reply.outcome !== 'completed') throw new Error(`${id} turn ${turn} ended ${ack.reply.outcome}`);
        latencies.push(ack.latencyMs);
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  const failures = [...driver.failures.values()].reduce((a, b) => a + b, 0) - failuresBefore;
  return {
    label,
    turnsPerSecond: latencies.length / seconds,
    p50: median(latencies),
    p99: percentile(latencies, 99),
    failures,
  };
}

/** Kills the worker streaming a reply; returns ms from the kill to the next chunk of that turn (appended by another worker). */
async function measureWorkerFailover(fleet: Fleet, temporal: Client, fake: FakeModelServer): Promise<number> {
  const driver = new HttpDriver(gatewayUrls(fleet), TOKEN);
  const store = await openStore(fleet.endpoints.storeUrl);
  const id = `failover-${randomUUID().slice(0, 8)}`;
  try {
    await driver.createSession(id, 0);
    const from = await store.nextSeq(id);
    fake.configure({ tokenDelayMs: 50 });
    // 200 words at 50 ms: about 10 s of streaming, so the kill lands mid-stream.
    const text = Array.from({ length: 200 }, (_, i) => `w${i}`).join(' ');
    const answer = driver.send(id, `${id}-m`, text, 0);
    const abort = new AbortController();
    const bound = setTimeout(() => abort.abort(), 180_000);
    let killedAt = 0;
    let failoverMs: number | undefined;
    let chunksBefore = 0;
    for await (const event of store.watch(id, from, { signal: abort.signal })) {
      if (event.type !== 'assistant/chunk') continue;
      if (killedAt === 0) {
        if (++chunksBefore < 5) continue;
        const description = await temporal.workflow.getHandle(workflowIdFor(id)).describe();
        const activity = description.raw.pendingActivities?.find((a) => a.activityType?.name === 'modelStep');
        const pid = Number(activity?.lastWorkerIdentity?.split('@')[0]);
        const slot = fleet.workers.findIndex((w) => w.child.pid === pid);
        if (slot < 0)
          throw new Error(`no worker of ours runs the model step (identity ${activity?.lastWorkerIdentity})`);
        killedAt = Date.now();
        await fleet.killWorker(slot);
        continue;
      }
      if (event.time > killedAt) {
        failoverMs = event.time - killedAt;
        abort.abort();
      }
    }
    clearTimeout(bound);
    const ack = await answer;
    if (ack.reply.outcome !== 'completed') throw new Error(`the failed-over turn ended ${ack.reply.outcome}`);
    for (const worker of fleet.workers) await fleet.workerReady(worker);
    if (failoverMs === undefined) throw new Error('no chunk after the kill');
    return failoverMs;
  } finally {
    fake.configure({ tokenDelayMs: 0 });
    await store.close();
  }
}

/** Kills the gateway SSE followers are on; returns ms from the kill to each follower's reopened stream. */
async function measureGatewayFailover(fleet: Fleet): Promise<number[]> {
  const driver = new HttpDriver(gatewayUrls(fleet), TOKEN);
  const ids = Array.from({ length: FOLLOWERS }, (_, i) => `follow-${i}-${randomUUID().slice(0, 8)}`);
  await eachLimited(ids, START_PARALLELISM, async (id) => {
    await driver.createSession(id, 1);
    await driver.send(id, `${id}-m`, 'hello', 1);
  });
  const followers = ids.map((id) => new SseFollower(id, gatewayUrls(fleet), 0, TOKEN));
  for (const follower of followers) follower.start();
  const deadline = Date.now() + 60_000;
  while (followers.some((f) => f.lastSeq < 0) && Date.now() < deadline) await sleep(50);
  await sleep(500);
  const killedAt = Date.now();
  await fleet.killGateway(0);
  while (followers.some((f) => f.gaps.length === 0) && Date.now() < killedAt + 60_000) await sleep(10);
  const reopened = followers.map((f) => (f.gaps[0] ? f.gaps[0].reopenedAt - killedAt : Number.NaN));
  for (const follower of followers) await follower.stop();
  await fleet.restartGateway(0);
  return reopened;
}

async function main(): Promise<void> {
  console.log(`\nbench/fleet.ts · ${machineLine()}`);
  console.log(
    `${SESSIONS} concurrent sessions × ${TURNS} measured turns · zero-latency fake model · 2 gateways · every process on this machine`,
  );
  await ensureTemporalServerBuilt();
  const fake = await startFakeModelServer({ tokenDelayMs: 0 });
  try {
    if (PHASES.has('throughput')) {
      const rows: ThroughputRow[] = [];
      for (const [backend, workers] of [
        ['dev', 1],
        ['full', 1],
        ['dev', 3],
        ['full', 3],
      ] as const) {
        const label = `${backend === 'full' ? 'fleet: full Temporal server + PostgreSQL store' : 'CLI dev server + SQLite store'}, ${workers} worker${workers > 1 ? 's' : ''}`;
        rows.push(
          await withFleet(`${backend}-${workers}`, { backend, workers, fake }, (fleet) =>
            measureThroughput(fleet, label),
          ),
        );
        console.log(`  done: ${label}`);
      }
      printGrid(
        `Throughput and turn latency, ${SESSIONS} concurrent sessions (HTTP ?wait=true round trip)`,
        ['topology', 'turns/s', 'p50 turn', 'p99 turn', 'failed attempts'],
        rows.map((r) => [r.label, r.turnsPerSecond.toFixed(1), fmtMs(r.p50), fmtMs(r.p99), String(r.failures)]),
      );
    }
    if (PHASES.has('worker-failover') || PHASES.has('gateway-failover')) {
      const workerRows: string[][] = [];
      let reopened: number[] = [];
      for (const [i, heartbeatMs] of HEARTBEATS.entries()) {
        await withFleet(
          `failover-${heartbeatMs}`,
          { backend: 'full', workers: 3, fake, heartbeatMs },
          async (fleet) => {
            if (PHASES.has('worker-failover')) {
              const connection = await Connection.connect({ address: fleet.endpoints.temporalAddress });
              try {
                const temporal = new Client({ connection });
                const samples: number[] = [];
                for (let k = 0; k < KILLS; k++) samples.push(await measureWorkerFailover(fleet, temporal, fake));
                workerRows.push([
                  `${fmtMs(heartbeatMs)}`,
                  `${fmtMs(heartbeatMs + 1_000)}`,
                  fmtMs(median(samples)),
                  fmtMs(Math.max(...samples)),
                  samples.map((s) => fmtMs(s)).join(', '),
                ]);
              } finally {
                await connection.close();
              }
            }
            if (PHASES.has('gateway-failover') && i === 0) reopened = await measureGatewayFailover(fleet);
          },
        );
      }
      if (workerRows.length > 0) {
        printGrid(
          `Worker SIGKILL mid-stream → next chunk of that turn, appended by another worker (${KILLS} kills per row, 3 workers)`,
          ['model heartbeat timeout', 'target (timeout + 1 s)', 'median', 'max', 'samples'],
          workerRows,
        );
      }
      if (reopened.length > 0) {
        printGrid(
          `Gateway SIGKILL → follower's stream open again on the other gateway (${FOLLOWERS} followers)`,
          ['median', 'p90', 'max'],
          [[fmtMs(median(reopened)), fmtMs(percentile(reopened, 90)), fmtMs(Math.max(...reopened))]],
        );
      }
    }
  } finally {
    await fake.close();
    rmSync(root, { recursive: true, force: true });
  }
}

await main();
