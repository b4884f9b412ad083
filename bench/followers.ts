/**
 * Idle live-tail followers: the CPU a gateway spends on N SSE followers that receive nothing,
 * with one store watch per follower (how `SessionClient.follow` worked before the WatchHub)
 * beside one shared watch per session (`WatchHub`, today's `follow`). No Temporal needed.
 *
 *   npx tsx bench/followers.ts [--counts 0,1,200,1000] [--shapes one,many] [--window 10] [--settle 2] [--phases poll,followers]
 *
 * Each run starts a fresh gateway process (a real fastify gateway over a SQLite store in a temp
 * directory, SSE heartbeats at the default 15 s), opens N SSE streams to it over loopback from
 * this process, lets them settle, then reads the gateway process's CPU time (user + system,
 * `process.cpuUsage()`) over a fixed window. Shapes: `one` = all N followers on one session;
 * `many` = N sessions with one follower each (the shared watch cannot merge those).
 *
 * The `poll` phase takes one idle store watch apart (in this process, before any follower): the
 * CPU of one idle `store.watch`, of a bare timer loop at the same 40 ms interval, and of the
 * `readFrom` each poll makes.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Client, Connection } from '@temporalio/client';
import { SessionClient } from '../src/client/session-client.js';
import { startGateway } from '../src/gateway/index.js';
import { openSqliteStore } from '../src/persistence/index.js';
import { REALISTIC_EVENTS_PER_TURN, benchHeader, realisticEvents, takeBatches } from './support/events.js';
import { fmtBytes, fmtRatio, machineLine, printGrid, printTable } from './support/report.js';

const { values: args } = parseArgs({
  options: {
    counts: { type: 'string', default: '0,1,200,1000' },
    shapes: { type: 'string', default: 'one,many' },
    window: { type: 'string', default: '10' },
    settle: { type: 'string', default: '2' },
    phases: { type: 'string', default: 'poll,followers' },
    // Internal: run as the measured gateway process.
    serve: { type: 'boolean', default: false },
    mode: { type: 'string', default: 'hub' },
    sessions: { type: 'string', default: '1' },
    dir: { type: 'string', default: '' },
  },
});

type Mode = 'per-follower' | 'hub';
type Shape = 'one' | 'many';
type GatewayReport = { cpuMicros: number; rss: number };
type ParentMessage = { kind: 'measure' } | { kind: 'exit' };
type ChildMessage = { kind: 'ready'; url: string; sessions: string[] } | ({ kind: 'measured' } & GatewayReport);

const MODE_LABEL: Record<Mode, string> = {
  'per-follower': 'one watch per follower (before)',
  hub: 'one shared watch per session (WatchHub)',
};

// ---------------------------------------------------------------------------------------------
// The measured gateway process

async function serve(): Promise<void> {
  const store = openSqliteStore(join(args.dir, 'followers.db'));
  const sessions: string[] = [];
  for (let i = 0; i < Number(args.sessions); i++) {
    const id = `idle-${i}`;
    await store.create(benchHeader(id));
    const [turn] = takeBatches(realisticEvents(), REALISTIC_EVENTS_PER_TURN, REALISTIC_EVENTS_PER_TURN);
    await store.append(id, turn!, { expectedSeq: 0, op: `${id}:1` });
    sessions.push(id);
  }
  // Follows never reach Temporal; a lazy connection is never opened.
  const connection = Connection.lazy({ address: '127.0.0.1:1' });
  const client = new SessionClient({ temporal: new Client({ connection }), store });
  if ((args.mode as Mode) === 'per-follower') {
    // SessionClient.follow before the WatchHub: every follower runs its own store watch.
    client.follow = (sessionId, fromSeq = 0, signal) => store.watch(sessionId, fromSeq, signal ? { signal } : {});
  }
  // Every follower comes from this one loopback address: the per-address guard (256 by default,
  // against one client hogging the listener) is raised past the largest count measured.
  const gateway = await startGateway({
    client,
    host: '127.0.0.1',
    port: 0,
    bodyLimitBytes: 1024 * 1024,
    listenerLimits: { maxConnectionsPerAddress: 4_096, maxWaitingConnections: 4_096 },
  });
  const send = (message: ChildMessage): void => {
    process.send!(message);
  };
  process.on('message', (message: ParentMessage) => {
    if (message.kind === 'measure') {
      const cpu = process.cpuUsage();
      send({ kind: 'measured', cpuMicros: cpu.user + cpu.system, rss: process.memoryUsage().rss });
    } else {
      void (async () => {
        await gateway.close();
        await connection.close();
        await store.close();
        process.exit(0);
      })();
    }
  });
  send({ kind: 'ready', url: gateway.url, sessions });
}

// ---------------------------------------------------------------------------------------------
// The driver

async function nextMessage<K extends ChildMessage['kind']>(
  child: ChildProcess,
  kind: K,
): Promise<Extract<ChildMessage, { kind: K }>> {
  for (;;) {
    const [message] = (await once(child, 'message')) as [ChildMessage];
    if (message.kind === kind) return message as Extract<ChildMessage, { kind: K }>;
  }
}

/** Opens an SSE stream and resolves once its first bytes (the retry hint) arrived. */
function openFollower(url: string, agent: http.Agent): Promise<http.ClientRequest> {
  return new Promise((resolve, reject) => {
    const request = http.get(url, { agent, headers: { accept: 'text/event-stream' } }, (response) => {
      if (response.statusCode !== 200) reject(new Error(`SSE ${url} answered ${response.statusCode}`));
      response.once('data', () => resolve(request));
      response.on('data', () => undefined);
    });
    request.on('error', reject);
  });
}

async function measure(mode: Mode, shape: Shape, followers: number): Promise<GatewayReport & { windowMs: number }> {
  const dir = mkdtempSync(join(tmpdir(), 'sessionlog-bench-followers-'));
  const sessionCount = shape === 'one' ? 1 : Math.max(1, followers);
  const child = fork(
    fileURLToPath(import.meta.url),
    ['--serve', '--mode', mode, '--sessions', String(sessionCount), '--dir', dir],
    {
      execArgv: ['--import', 'tsx'],
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    },
  );
  const agent = new http.Agent({ keepAlive: false, maxSockets: Infinity });
  const requests: http.ClientRequest[] = [];
  try {
    const ready = await nextMessage(child, 'ready');
    for (let i = 0; i < followers; i += 50) {
      const batch = Array.from({ length: Math.min(50, followers - i) }, (_, j) => {
        const session = ready.sessions[(i + j) % ready.sessions.length]!;
        return openFollower(`${ready.url}/v1/sessions/${session}/events?from=0`, agent);
      });
      requests.push(...(await Promise.all(batch)));
    }
    await sleep(Number(args.settle) * 1000);
    child.send({ kind: 'measure' } satisfies ParentMessage);
    const before = await nextMessage(child, 'measured');
    const start = performance.now();
    await sleep(Number(args.window) * 1000);
    child.send({ kind: 'measure' } satisfies ParentMessage);
    const after = await nextMessage(child, 'measured');
    const windowMs = performance.now() - start;
    return { cpuMicros: after.cpuMicros - before.cpuMicros, rss: after.rss, windowMs };
  } finally {
    for (const request of requests) request.destroy();
    agent.destroy();
    child.send({ kind: 'exit' } satisfies ParentMessage);
    await once(child, 'exit');
    rmSync(dir, { recursive: true, force: true });
  }
}

/** CPU time over wall time, as a percentage of one core. */
function corePercent(report: { cpuMicros: number; windowMs: number }): number {
  return (report.cpuMicros / 1000 / report.windowMs) * 100;
}

/** CPU of this process while `run` lasts `ms`, as a percentage of one core. */
async function cpuWhile(ms: number, run: (signal: AbortSignal) => Promise<void>): Promise<number> {
  const abort = new AbortController();
  const start = process.cpuUsage();
  const startedAt = performance.now();
  const running = run(abort.signal);
  await sleep(ms);
  abort.abort();
  await running;
  const used = process.cpuUsage(start);
  return ((used.user + used.system) / 1000 / (performance.now() - startedAt)) * 100;
}

/** What one idle store watch costs, and where it goes. */
async function pollAnatomy(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'sessionlog-bench-poll-'));
  const store = openSqliteStore(join(dir, 'poll.db'));
  try {
    await store.create(benchHeader('idle'));
    const [turn] = takeBatches(realisticEvents(), REALISTIC_EVENTS_PER_TURN, REALISTIC_EVENTS_PER_TURN);
    await store.append('idle', turn!, { expectedSeq: 0, op: 'idle:1' });
    const ms = Number(args.window) * 1000;
    const idle = await cpuWhile(
      ms,
      (signal) => new Promise((resolve) => signal.addEventListener('abort', () => resolve())),
    );
    const watch = await cpuWhile(ms, async (signal) => {
      for await (const _event of store.watch('idle', REALISTIC_EVENTS_PER_TURN, { signal }))
        throw new Error('an idle session got an event');
    });
    const timer = await cpuWhile(ms, async (signal) => {
      while (!signal.aborted) await sleep(40);
    });
    const reads = 5_000;
    const before = process.cpuUsage();
    for (let i = 0; i < reads; i++) await store.readFrom('idle', REALISTIC_EVENTS_PER_TURN, 1000);
    const used = process.cpuUsage(before);
    printTable(`One idle store watch taken apart (SQLite, default 40 ms poll, ${args.window} s each)`, [
      { name: 'this process doing nothing', value: `${idle.toFixed(2)}% of a core` },
      { name: 'one idle store.watch (poll loop)', value: `${watch.toFixed(2)}% of a core` },
      { name: 'a bare 40 ms timer loop (no store read)', value: `${timer.toFixed(2)}% of a core` },
      { name: "one poll's readFrom at the head (CPU)", value: `${((used.user + used.system) / reads).toFixed(1)} µs` },
    ]);
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  const counts = args.counts.split(',').map(Number);
  const shapes = args.shapes.split(',') as Shape[];
  const phases = new Set(args.phases.split(','));
  console.log(
    `# Idle SSE followers\n\n${machineLine()}\nwindow ${args.window} s after ${args.settle} s settling; gateway CPU = user + system time of the gateway process`,
  );
  if (phases.has('poll')) await pollAnatomy();
  if (!phases.has('followers')) return;
  for (const shape of shapes) {
    const rows: string[][] = [];
    for (const followers of counts) {
      if (shape === 'many' && followers === 0) continue;
      const before = await measure('per-follower', shape, followers);
      const after = await measure('hub', shape, followers);
      const [b, a] = [corePercent(before), corePercent(after)];
      rows.push([
        String(followers),
        `${b.toFixed(1)}% (${fmtBytes(before.rss)})`,
        `${a.toFixed(1)}% (${fmtBytes(after.rss)})`,
        b > 0.5 ? fmtRatio(a / b) : '',
      ]);
      console.error(`  ${shape} × ${followers}: before ${b.toFixed(1)}%, after ${a.toFixed(1)}%`);
    }
    const title = shape === 'one' ? 'N idle followers of one session' : 'N idle sessions, one follower each';
    printGrid(
      `${title}: gateway CPU, % of one core (RSS at the end)`,
      ['followers', MODE_LABEL['per-follower'], MODE_LABEL.hub, 'after ÷ before'],
      rows,
    );
  }
}

if (args.serve) await serve();
else await main();
