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
 * Besides wall time it reports the process's CPU per turn, and the telemetry's own CPU per turn
 * measured without a stack (the same calls a turn makes, repeated), which a loaded machine
 * disturbs far less. Targets: metrics cost under 2 % of turn time, tracing under 5 %.
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
import {
  fmtInt,
  fmtMs,
  machineLine,
  median,
  percentile,
  printGrid,
  printTable,
  since,
  type Figure,
} from './support/report.js';

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

/** `cpuMs`: CPU time (user + system) of the whole process — gateway, client, worker, fake model — over the sequential turns. */
type ChildResult = { mode: Mode; turnMs: number[]; cpuMs: number; throughput: { turns: number; seconds: number } };

// ---- one mode, in a child process ----------------------------------------------------------

async function runMode(mode: Mode, collector: string): Promise<ChildResult> {
  const dir = mkdtempSync(join(tmpdir(), 'sessionlog-bench-telemetry-'));
  let telemetry: Telemetry | undefined;
  if (mode === 'off') {
    Runtime.install({ logger: new DefaultLogger('WARN') });
  } else {
    telemetry = await startTelemetry(
      {
        serviceName: 'sessionlog-bench',
        logLevel: 'info',
        logFormat: 'json',
        otlpEndpoint: mode === 'tracing' ? collector : undefined,
        captureContent: false,
      },
      { logDestination: pino.destination({ dest: join(dir, 'log.jsonl'), sync: false }) },
    );
    await telemetry.installTemporalRuntime();
  }
  const store = openSqliteStore(join(dir, 'sessions.db'));
  const fake = await startFakeModelServer({});
  fake.setMatcher(({ body }) =>
    body.messages.at(-1)?.role === 'tool'
      ? { text: 'the answer is 42' }
      : { text: 'let me compute', toolCalls: [{ name: 'calculator', arguments: { expression: '6*7' } }] },
  );
  const model = createOpenAIProvider({
    baseURL: fake.baseURL,
    apiKey: 'bench',
    provider: 'fake',
    coalesce: { maxDelayMs: 20 },
  });
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
    workerOptions: {
      maxCachedWorkflows: 1_000,
      ...(tracing ? { interceptors: tracing.interceptors, sinks: tracing.sinks } : {}),
    },
  });
  const running = worker.run();
  const interceptors = telemetry?.tracing?.clientInterceptors();
  const client = await SessionClient.connect({ address, store, taskQueue, ...(interceptors ? { interceptors } : {}) });
  const gateway = await startGateway({
    client,
    host: '127.0.0.1',
    port: 0,
    bodyLimitBytes: 1 << 20,
    ...(telemetry ? { telemetry: telemetry.gateway } : {}),
  });
  const scraper = telemetry
    ? setInterval(() => void fetch(`${gateway.url}/metrics`).then((r) => r.text()), 5_000)
    : undefined;

  const turn = async (sessionId: string, n: number): Promise<void> => {
    const response = await fetch(`${gateway.url}/v1/sessions/${sessionId}/messages?wait=true`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ text: `question ${n}: what is six times seven?` }),
    });
    const body = (await response.json()) as { outcome?: string };
    if (response.status !== 200 || body.outcome !== 'completed')
      throw new Error(`turn ${n} of ${sessionId}: ${response.status} ${JSON.stringify(body)}`);
  };

  const create = async (sessionId: string): Promise<void> => {
    const response = await fetch(`${gateway.url}/v1/sessions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ id: sessionId }),
    });
    if (response.status !== 201) throw new Error(`creating ${sessionId}: ${response.status} ${await response.text()}`);
  };

  const latencyId = `latency-${randomUUID()}`;
  await create(latencyId);
  const turnMs: number[] = [];
  const warmup = Number(args.warmup);
  let cpu = process.cpuUsage();
  for (let n = 1; n <= warmup + Number(args.turns); n++) {
    if (n === warmup + 1) cpu = process.cpuUsage();
    const start = performance.now();
    await turn(latencyId, n);
    if (n > warmup) turnMs.push(since(start));
  }
  const used = process.cpuUsage(cpu);
  const cpuMs = (used.user + used.system) / 1000;

  const sessions = Array.from({ length: Number(args.sessions) }, () => `throughput-${randomUUID()}`);
  await Promise.all(
    sessions.map(async (id) => {
      await create(id);
      await turn(id, 0);
    }),
  );
  const perSession = Number(args['session-turns']);
  const start = performance.now();
  await Promise.all(
    sessions.map(async (id) => {
      for (let n = 1; n <= perSession; n++) await turn(id, n);
    }),
  );
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
  return { mode, turnMs, cpuMs, throughput: { turns: sessions.length * perSession, seconds } };
}

// ---- the telemetry's own work per turn, without a stack ------------------------------------

/**
 * The calls one bench turn makes into the telemetry (a gateway request span, turn start and
 * end with its log line, two model calls with first token and usage, one tool, eight appends,
 * and for tracing the eleven spans Temporal's interceptors add per such turn), repeated: CPU
 * microseconds per turn, measured in a process of its own. Export goes to the collector.
 */
async function unitCost(mode: 'metrics' | 'tracing', collector: string, iterations: number): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), 'sessionlog-bench-telemetry-'));
  const telemetry = await startTelemetry(
    {
      serviceName: 'sessionlog-bench',
      logLevel: 'info',
      logFormat: 'json',
      otlpEndpoint: mode === 'tracing' ? collector : undefined,
      captureContent: false,
    },
    { logDestination: pino.destination({ dest: join(dir, 'log.jsonl'), sync: false }) },
  );
  const engine = telemetry.engine;
  const tracer = telemetry.tracing?.tracer;
  const usage = { inputTokens: 40, cacheReadTokens: 260, outputTokens: 12 };
  const oneTurn = (n: number) =>
    telemetry.gateway.traceRequest(
      { method: 'POST', route: '/v1/sessions/:id/messages', sessionId: 's' },
      async (span) => {
        for (let i = 0; i < 11; i++)
          tracer
            ?.startSpan(`StartActivity:modelStep`, {
              attributes: { 'session.id': 's', 'sessionlog.turn': n, temporalActivityId: String(i) },
            })
            .end();
        engine.turnStarted({ sessionId: 's', turn: n });
        for (let step = 1; step <= 2; step++) {
          const call = engine.modelCall({
            sessionId: 's',
            turn: n,
            step,
            purpose: 'reply',
            provider: 'fake',
            model: 'fake',
            messages: [],
          });
          call.firstToken();
          call.end({ usage, finishReason: step === 1 ? 'tool_calls' : 'stop', responseModel: 'fake', output: [] });
          for (let a = 0; a < 4; a++)
            engine.appended({ sessionId: 's', backend: 'sqlite', events: 3, replayed: false, durationMs: 1.5 });
        }
        engine
          .toolCall({ sessionId: 's', turn: n, step: 1, callId: 'c', tool: 'calculator', attempt: 1 })
          .end({ isError: false });
        engine.turnEnded({ sessionId: 's', turn: n, outcome: 'completed', durationMs: 250 });
        span.setTurn(n);
        span.setStatus(200);
      },
    );
  for (let n = 0; n < 200; n++) await oneTurn(n);
  const start = process.cpuUsage();
  for (let n = 0; n < iterations; n++) await oneTurn(n);
  await telemetry.tracing?.forceFlush();
  const used = process.cpuUsage(start);
  await telemetry.shutdown();
  rmSync(dir, { recursive: true, force: true });
  return (used.user + used.system) / iterations;
}

// ---- the parent: a collector, the modes in rounds, the table ------------------------------

/** An OTLP/HTTP endpoint that accepts every export and drops it, counting the requests. */
async function startCollector(): Promise<{
  url: string;
  requests: () => number;
  bytes: () => number;
  close(): Promise<void>;
}> {
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
  if (args.child === 'unit-metrics' || args.child === 'unit-tracing') {
    const micros = await unitCost(args.child === 'unit-metrics' ? 'metrics' : 'tracing', args.collector!, 5_000);
    process.stdout.write(`UNIT ${micros}\n`);
    return;
  }
  if (args.child) {
    const result = await runMode(args.child as Mode, args.collector!);
    process.stdout.write(`RESULT ${JSON.stringify(result)}\n`);
    return;
  }
  if (!process.env.TEMPORAL_ADDRESS)
    throw new Error('TEMPORAL_ADDRESS is not set: run under `scripts/temporal-dev-server run -- …`');
  const collector = await startCollector();
  const script = fileURLToPath(import.meta.url);
  const tsx = fileURLToPath(new URL('../node_modules/.bin/tsx', import.meta.url));
  const results = new Map<Mode, ChildResult[]>(MODES.map((m) => [m, []]));
  const passThrough = [
    '--turns',
    args.turns,
    '--warmup',
    args.warmup,
    '--sessions',
    args.sessions,
    '--session-turns',
    args['session-turns'],
  ];
  for (let round = 1; round <= Number(args.rounds); round++) {
    // Rotate the order each round so no mode always runs first (cold caches) or last.
    const order = MODES.map((_, i) => MODES[(i + round - 1) % MODES.length]!);
    for (const mode of order) {
      const { stdout } = await run(tsx, [script, '--child', mode, '--collector', collector.url, ...passThrough], {
        env: process.env,
        maxBuffer: 1 << 24,
      });
      const line = stdout.split('\n').find((l) => l.startsWith('RESULT '));
      if (!line) throw new Error(`mode ${mode} printed no result:\n${stdout}`);
      results.get(mode)!.push(JSON.parse(line.slice('RESULT '.length)) as ChildResult);
      process.stderr.write(`round ${round}: ${mode} done\n`);
    }
  }
  const unit: Record<string, number> = {};
  for (const kind of ['unit-metrics', 'unit-tracing']) {
    const { stdout } = await run(tsx, [script, '--child', kind, '--collector', collector.url], {
      env: process.env,
      maxBuffer: 1 << 24,
    });
    unit[kind] = Number(/UNIT (\S+)/.exec(stdout)?.[1]);
  }
  await collector.close();

  const summary = MODES.map((mode) => {
    const runs = results.get(mode)!;
    const turnMs = runs.flatMap((r) => r.turnMs);
    const turns = runs.reduce((n, r) => n + r.throughput.turns, 0);
    const seconds = runs.reduce((n, r) => n + r.throughput.seconds, 0);
    const cpuPerTurn = runs.reduce((n, r) => n + r.cpuMs, 0) / turnMs.length;
    const roundP50s = runs.map((r) => median(r.turnMs));
    return {
      mode,
      p50: median(turnMs),
      p90: percentile(turnMs, 90),
      mean: turnMs.reduce((a, b) => a + b, 0) / turnMs.length,
      samples: turnMs.length,
      cpuPerTurn,
      roundP50s: `${fmtMs(Math.min(...roundP50s))} – ${fmtMs(Math.max(...roundP50s))}`,
      turnsPerSecond: turns / seconds,
    };
  });
  const off = summary[0]!;
  console.log(`\n${machineLine()}`);
  console.log(
    `${args.rounds} rounds × (${args.turns} sequential turns after ${args.warmup} warm-up, then ${args.sessions} sessions × ${args['session-turns']} turns concurrently) per mode; each turn = 2 model calls + 1 tool`,
  );
  printGrid(
    'Turn latency and throughput by telemetry mode',
    [
      'mode',
      'turns',
      'p50',
      'p50 of each round',
      'p90',
      'mean',
      'p50 vs off',
      'CPU per turn',
      'turns/s (concurrent)',
      'turns/s vs off',
    ],
    summary.map((s) => [
      s.mode,
      fmtInt(s.samples),
      fmtMs(s.p50),
      s.roundP50s,
      fmtMs(s.p90),
      fmtMs(s.mean),
      s.mode === 'off' ? '' : `${(((s.p50 - off.p50) / off.p50) * 100).toFixed(1)} %`,
      fmtMs(s.cpuPerTurn),
      s.turnsPerSecond.toFixed(1),
      s.mode === 'off' ? '' : `${(((s.turnsPerSecond - off.turnsPerSecond) / off.turnsPerSecond) * 100).toFixed(1)} %`,
    ]),
  );
  const of = (mode: Mode) => summary.find((s) => s.mode === mode)!;
  const cost = (mode: Mode) => (of(mode).p50 - off.p50) / off.p50;
  // CPU this process spent on a turn beyond the off mode's, against the off mode's turn time:
  // what the telemetry itself costs, much less disturbed by other processes than wall time.
  const cpuCost = (mode: Mode) => (of(mode).cpuPerTurn - off.cpuPerTurn) / off.p50;
  const figures: Figure[] = [
    {
      name: 'metrics: added p50 turn time',
      value: `${(cost('metrics') * 100).toFixed(1)} %`,
      target: '< 2 %',
      met: cost('metrics') < 0.02,
    },
    {
      name: 'metrics + tracing: added p50 turn time',
      value: `${(cost('tracing') * 100).toFixed(1)} %`,
      target: '< 5 %',
      met: cost('tracing') < 0.05,
    },
    {
      name: 'metrics: added CPU per turn / turn time',
      value: `${(cpuCost('metrics') * 100).toFixed(1)} %`,
      target: '< 2 %',
      met: cpuCost('metrics') < 0.02,
    },
    {
      name: 'metrics + tracing: added CPU per turn / turn time',
      value: `${(cpuCost('tracing') * 100).toFixed(1)} %`,
      target: '< 5 %',
      met: cpuCost('tracing') < 0.05,
    },
    {
      name: "metrics: the telemetry's own CPU per turn / turn time",
      value: `${fmtMs(unit['unit-metrics']! / 1000)} = ${((unit['unit-metrics']! / 1000 / off.p50) * 100).toFixed(2)} %`,
      target: '< 2 %',
      met: unit['unit-metrics']! / 1000 / off.p50 < 0.02,
    },
    {
      name: "metrics + tracing: the telemetry's own CPU per turn / turn time",
      value: `${fmtMs(unit['unit-tracing']! / 1000)} = ${((unit['unit-tracing']! / 1000 / off.p50) * 100).toFixed(2)} %`,
      target: '< 5 %',
      met: unit['unit-tracing']! / 1000 / off.p50 < 0.05,
    },
    {
      name: 'OTLP exports received (tracing runs)',
      value: `${fmtInt(collector.requests())} requests, ${fmtInt(collector.bytes() / 1024)} KiB`,
    },
  ];
  printTable('Telemetry cost against the targets', figures);
}

await main();
