/**
 * What operations telemetry costs a turn: latency and throughput of turns posted through the
 * gateway (`POST …/messages?wait=true`), each with one tool call (two model calls), with
 * telemetry off, with metrics on (prom-client registries, the Temporal SDK's buffered metrics,
 * JSON logs at info, `/metrics` scraped every 5 s), and with metrics plus tracing (every span
 * exported over OTLP/HTTP protobuf to a loopback collector that accepts and drops it).
 *
 *   scripts/temporal-dev-server run -- npx tsx bench/telemetry.ts [--turns 40] [--rounds 3] [--sessions 16] [--session-turns 5]
 *
 * Each mode runs in its own process (the Temporal runtime and the global tracer provider are
 * per process), in alternating rounds so drift of a shared machine spreads over all modes.
 * Targets: metrics cost under 2 % of turn time, tracing under 5 %.
 */
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs, promisify } from 'node:util';
import pino from 'pino';
import { DefaultLogger, NativeConnection, Runtime } from '@temporalio/worker';
import { SessionClient } from '../src/client/session-client.js';
import { startGateway } from '../src/gateway/index.js';
import { startFakeModelServer } from '../src/model/fake-server.js';
import { createOpenAIProvider } from '../src/model/provider.js';
import { openSqliteStore } from '../src/persistence/index.js';
import { startTelemetry, type Telemetry } from '../src/telemetry/index.js';
import { createWorker } from '../src/worker.js';
import { fmtInt, fmtMs, machineLine, median, percentile, printGrid, printTable, since, type Figure } from './support/report.js';

const MODES = ['off', 'metrics', 'tracing'] as const;
type Mode = (typeof MODES)[number];

const { values: args } = parseArgs({
  options: {
    child: { type: 'string' },
    collector: { type: 'string' },
    turns: { type: 'string', default: '40' },
    warmup: { type: 'string', default: '8' },
    rounds: { type: 'string', default: '3' },
    sessions: { type: 'string', default: '16' },
    'session-turns': { type: 'string', default: '5' },
  },
});

type ChildResult = { mode: Mode; turnMs: number[]; throughput: { turns: number; seconds: number } };

// ---- one mode, in a child process ----------------------------------------------------------

async function runMode(mode: Mode, collector: string): Promise<ChildResult> {
  const dir = mkdtempSync(join(tmpdir(), 'sessionlog-bench-telemetry-'));
  let telemetry: Telemetry | undefined;
  if (mode === 'off') {
    Runtime.install({ logger: new DefaultLogger('WARN') });
  } else {
    telemetry = await startTelemetry(
      { serviceName: 'sessionlog-bench', logLevel: 'info', logFormat: 'json', otlpEndpoint: mode === 'tracing' ? collector : undefined, captureContent: false },
      { logDestination: pino.destination({ dest: join(dir, 'log.jsonl'), sync: false }) },
    );
    telemetry.installTemporalRuntime();
  }
  const store = openSqliteStore(join(dir, 'sessions.db'));
  const fake = await startFakeModelServer({});
  fake.setMatcher(({ body }) => (body.messages.at(-1)?.role === 'tool' ? { text: 'the answer is 42' } : { text: 'let me compute', toolCalls: [{ name: 'calculator', arguments: { expression: '6*7' } }] }));
  const model = createOpenAIProvider({ baseURL: fake.baseURL, apiKey: 'bench', provider: 'fake', coalesce: { maxDelayMs: 20 } });
  const address = process.env.TEMPORAL_ADDRESS!;
  const connection = await NativeConnection.connect({ address });
  const taskQueue = `bench-telemetry-${randomUUID()}`;
  const tracing = telemetry?.tracing?.workerOptions();
  const worker = await createWorker({
    connection,
    taskQueue,
    store,
    model,
    agent: { model: 'fake', tools: ['calculator'] },
    ...(telemetry ? { telemetry: telemetry.engine } : {}),
    ...(telemetry?.tracing ? { workflowInterceptorModules: telemetry.tracing.workflowInterceptorModules } : {}),
    workerOptions: { maxCachedWorkflows: 1_000, ...(tracing ? { interceptors: tracing.interceptors, sinks: tracing.sinks } : {}) },
  });
  const running = worker.run();
  const interceptors = telemetry?.tracing?.clientInterceptors();
  const client = await SessionClient.connect({ address, store, taskQueue, ...(interceptors ? { interceptors } : {}) });
  const gateway = await startGateway({ client, host: '127.0.0.1', port: 0, bodyLimitBytes: 1 << 20, ...(telemetry ? { telemetry: telemetry.gateway } : {}) });
  const scraper = telemetry ? setInterval(() => void fetch(`${gateway.url}/metrics`).then((r) => r.text()), 5_000) : undefined;

  const turn = async (sessionId: string, n: number): Promise<void> => {
    const response = await fetch(`${gateway.url}/v1/sessions/${sessionId}/messages?wait=true`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ text: `question ${n}: what is six times seven?` }),
    });
    const body = (await response.json()) as { outcome?: string };
    if (response.status !== 200 || body.outcome !== 'completed') throw new Error(`turn ${n} of ${sessionId}: ${response.status} ${JSON.stringify(body)}`);
  };

  const create = async (sessionId: string): Promise<void> => {
    const response = await fetch(`${gateway.url}/v1/sessions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ id: sessionId }) });
    if (response.status !== 201) throw new Error(`creating ${sessionId}: ${response.status} ${await response.text()}`);
  };

  const latencyId = `latency-${randomUUID()}`;
  await create(latencyId);
  const turnMs: number[] = [];
  const warmup = Number(args.warmup);
  for (let n = 1; n <= warmup + Number(args.turns); n++) {
    const start = performance.now();
    await turn(latencyId, n);
    if (n > warmup) turnMs.push(since(start));
  }

  const sessions = Array.from({ length: Number(args.sessions) }, () => `throughput-${randomUUID()}`);
  await Promise.all(sessions.map(async (id) => {
    await create(id);
    await turn(id, 0);
  }));
  const perSession = Number(args['session-turns']);
  const start = performance.now();
  await Promise.all(sessions.map(async (id) => {
    for (let n = 1; n <= perSession; n++) await turn(id, n);
  }));
  const seconds = since(start) / 1000;

  if (scraper) clearInterval(scraper);
  await telemetry?.tracing?.forceFlush();
  await gateway.close();
  worker.shutdown();
  await running;
  await client.temporal.connection.close();
  await connection.close();
  await fake.close();
  await store.close();
  await telemetry?.shutdown();
  rmSync(dir, { recursive: true, force: true });
  return { mode, turnMs, throughput: { turns: sessions.length * perSession, seconds } };
}

// ---- the parent: a collector, the modes in rounds, the table ------------------------------

/** An OTLP/HTTP endpoint that accepts every export and drops it, counting the requests. */
async function startCollector(): Promise<{ url: string; requests: () => number; bytes: () => number; close(): Promise<void> }> {
  let requests = 0;
  let bytes = 0;
  const server = http.createServer((req, res) => {
    req.on('data', (chunk: Buffer) => (bytes += chunk.length));
    req.on('end', () => {
      requests += 1;
      res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests: () => requests,
    bytes: () => bytes,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

const run = promisify(execFile);

async function main(): Promise<void> {
  if (args.child) {
    const result = await runMode(args.child as Mode, args.collector!);
    process.stdout.write(`RESULT ${JSON.stringify(result)}\n`);
    return;
  }
  if (!process.env.TEMPORAL_ADDRESS) throw new Error('TEMPORAL_ADDRESS is not set: run under `scripts/temporal-dev-server run -- …`');
  const collector = await startCollector();
  const script = fileURLToPath(import.meta.url);
  const tsx = fileURLToPath(new URL('../node_modules/.bin/tsx', import.meta.url));
  const results = new Map<Mode, ChildResult[]>(MODES.map((m) => [m, []]));
  const passThrough = ['--turns', args.turns, '--warmup', args.warmup, '--sessions', args.sessions, '--session-turns', args['session-turns']];
  for (let round = 1; round <= Number(args.rounds); round++) {
    // Rotate the order each round so no mode always runs first (cold caches) or last.
    const order = MODES.map((_, i) => MODES[(i + round - 1) % MODES.length]!);
    for (const mode of order) {
      const { stdout } = await run(tsx, [script, '--child', mode, '--collector', collector.url, ...passThrough], { env: process.env, maxBuffer: 1 << 24 });
      const line = stdout.split('\n').find((l) => l.startsWith('RESULT '));
      if (!line) throw new Error(`mode ${mode} printed no result:\n${stdout}`);
      results.get(mode)!.push(JSON.parse(line.slice('RESULT '.length)) as ChildResult);
      process.stderr.write(`round ${round}: ${mode} done\n`);
    }
  }
  await collector.close();

  const summary = MODES.map((mode) => {
    const runs = results.get(mode)!;
    const turnMs = runs.flatMap((r) => r.turnMs);
    const turns = runs.reduce((n, r) => n + r.throughput.turns, 0);
    const seconds = runs.reduce((n, r) => n + r.throughput.seconds, 0);
    return { mode, p50: median(turnMs), p90: percentile(turnMs, 90), mean: turnMs.reduce((a, b) => a + b, 0) / turnMs.length, samples: turnMs.length, turnsPerSecond: turns / seconds };
  });
  const off = summary[0]!;
  console.log(`\n${machineLine()}`);
  console.log(`${args.rounds} rounds × (${args.turns} sequential turns after ${args.warmup} warm-up, then ${args.sessions} sessions × ${args['session-turns']} turns concurrently) per mode; each turn = 2 model calls + 1 tool`);
  printGrid(
    'Turn latency and throughput by telemetry mode',
    ['mode', 'turns', 'p50', 'p90', 'mean', 'p50 vs off', 'turns/s (concurrent)', 'turns/s vs off'],
    summary.map((s) => [
      s.mode,
      fmtInt(s.samples),
      fmtMs(s.p50),
      fmtMs(s.p90),
      fmtMs(s.mean),
      s.mode === 'off' ? '' : `${(((s.p50 - off.p50) / off.p50) * 100).toFixed(1)} %`,
      s.turnsPerSecond.toFixed(1),
      s.mode === 'off' ? '' : `${(((off.turnsPerSecond - s.turnsPerSecond) / off.turnsPerSecond) * -100).toFixed(1)} %`,
    ]),
  );
  const cost = (mode: Mode) => (summary.find((s) => s.mode === mode)!.p50 - off.p50) / off.p50;
  const figures: Figure[] = [
    { name: 'metrics: added p50 turn time', value: `${(cost('metrics') * 100).toFixed(1)} %`, target: '< 2 %', met: cost('metrics') < 0.02 },
    { name: 'metrics + tracing: added p50 turn time', value: `${(cost('tracing') * 100).toFixed(1)} %`, target: '< 5 %', met: cost('tracing') < 0.05 },
    { name: 'OTLP exports received (tracing runs)', value: `${fmtInt(collector.requests())} requests, ${fmtInt(collector.bytes() / 1024)} KiB` },
  ];
  printTable('Telemetry cost against the targets', figures);
}

await main();
