/**
 * Provider pacing on a fleet (issue 26): how close a fleet of workers sharing one bucket in the
 * store runs to a provider's limit without going over it. Four workers on one task queue, each
 * with its own PostgreSQL connection and model client, serve `--sessions` sessions of `--turns`
 * turns at once against the fake provider, which enforces `--rpm` requests a minute as a token
 * bucket (two seconds' burst; a 429 with retry-after past it) and counts what it lets in. The
 * same load runs paced (configured limits) and unpaced (the control).
 *
 * Figures, all counted at the provider (not by sessionlog): requests let in per second over the
 * busy span ÷ the limit; the most let in within any 10 s ÷ what the provider's bucket allows in
 * 10 s; the share refused; the wall time of the load.
 *
 *   scripts/temporal-dev-server run -- npx tsx bench/pacing.ts [--rpm 300,600] [--sessions 40] [--turns 3]
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime, type Worker } from '@temporalio/worker';
import pg from 'pg';
import { SessionClient } from '../src/client/session-client.js';
import { startFakeModelServer, type FakeModelServer } from '../src/model/fake-server.js';
import { createOpenAIProvider } from '../src/model/provider.js';
import { openStore } from '../src/persistence/open.js';
import type { SessionStore } from '../src/persistence/store.js';
import { createWorker } from '../src/worker.js';
import { fmtMs, machineLine, printGrid } from './support/report.js';

const { values } = parseArgs({
  options: {
    rpm: { type: 'string', default: '300,600' },
    sessions: { type: 'string', default: '40' },
    turns: { type: 'string', default: '3' },
    workers: { type: 'string', default: '4' },
  },
});
const SESSIONS = Number(values.sessions);
const TURNS = Number(values.turns);
const WORKERS = Number(values.workers);
const BURST_MS = 2_000;
const BASE_URL = process.env.SESSIONLOG_BENCH_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const ADDRESS = process.env.TEMPORAL_ADDRESS ?? '127.0.0.1:7233';

Runtime.install({ logger: new DefaultLogger('WARN') });

async function runLoad(fake: FakeModelServer, rpm: number, paced: boolean): Promise<string[]> {
  const schema = `bench_pacing_${randomBytes(5).toString('hex')}`;
  const url = new URL(BASE_URL);
  url.searchParams.set('schema', schema);
  const stores: SessionStore[] = [];
  const workers: Worker[] = [];
  const runs: Promise<void>[] = [];
  const taskQueue = `bench-pacing-${randomUUID()}`;
  try {
    for (let i = 0; i < WORKERS; i++) {
      const store = await openStore(url.toString());
      stores.push(store);
      const worker = await createWorker({
        connection: await NativeConnection.connect({ address: ADDRESS }),
        taskQueue,
        store,
        model: createOpenAIProvider({
          baseURL: fake.baseURL,
          apiKey: 'bench-key',
          provider: 'fake',
          timeoutMs: 30_000,
        }),
        agent: { model: 'fake', system: 'You are a test assistant.', tools: [] },
        context: false,
        pacing: paced ? { limits: { requestsPerMinute: rpm } } : false,
      });
      workers.push(worker);
      runs.push(worker.run());
    }
    const temporal = new Client({ connection: await Connection.connect({ address: ADDRESS }) });
    const client = new SessionClient({
      temporal,
      store: stores[0]!,
      taskQueue,
      tunables: { modelMaxAttempts: 50, modelRetryInitialMs: 200 },
    });
    fake.reset();
    const started = Date.now();
    await Promise.all(
      Array.from({ length: SESSIONS }, async (_, s) => {
        const id = `pace-${s}-${randomUUID()}`;
        await client.create({ sessionId: id });
        for (let t = 1; t <= TURNS; t++) {
          const reply = await client.send(id, `turn ${t} of session ${s}`);
          if (reply.outcome !== 'completed') throw new Error(`session ${id} turn ${t}: ${reply.outcome}`);
        }
      }),
    );
    const wall = Date.now() - started;
    const { admitted, refused } = fake.rateLimitCounts();
    const span = (admitted.at(-1)! - admitted[0]!) / 1000;
    const allowed10s = Math.ceil((rpm / 60) * ((BURST_MS + 10_000) / 1000));
    await temporal.connection.close();
    return [
      String(rpm),
      paced ? 'paced' : 'unpaced',
      `${admitted.length}`,
      `${((admitted.length - 1) / span / (rpm / 60)).toFixed(2)}×`,
      `${fake.mostAdmittedWithin(10_000)} / ${allowed10s}`,
      `${((100 * refused) / (admitted.length + refused)).toFixed(1)}%`,
      fmtMs(wall),
    ];
  } finally {
    for (const worker of workers) worker.shutdown();
    await Promise.allSettled(runs);
    for (const store of stores) await store.close();
    const admin = new pg.Client({ connectionString: BASE_URL });
    await admin.connect();
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await admin.end();
  }
}

const rows: string[][] = [];
for (const rpm of values.rpm.split(',').map(Number)) {
  const fake = await startFakeModelServer({ rateLimit: { requestsPerMinute: rpm, burstMs: BURST_MS } });
  try {
    rows.push(await runLoad(fake, rpm, true));
    rows.push(await runLoad(fake, rpm, false));
  } finally {
    await fake.close();
  }
}
console.log(machineLine());
printGrid(
  `Pacing a fleet: ${WORKERS} workers (PostgreSQL store), ${SESSIONS} sessions × ${TURNS} turns at once; counted at the fake provider (bucket: the limit, ${BURST_MS / 1000} s burst)`,
  ['limit (req/min)', 'mode', 'requests let in', 'rate ÷ limit', 'most in any 10 s / allowed', 'refused', 'wall'],
  rows,
);
