/**
 * What a turn costs Temporal's history (DESIGN §5.2, issue 23): the bytes a run's history grows
 * by per turn for a message of 80 bytes, 1 MiB and 8 MiB, measured on the dev server with the
 * encoded history (`History.encode`) before and after each turn. The message itself waits in
 * the store's inbox; what crosses Temporal is its reference, sealed. The figure to compare with
 * is the message's own size: what a history holding the text would grow by, at the least.
 *
 *   scripts/temporal-dev-server run -- npx tsx bench/history-bytes.ts [--turns N]
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime } from '@temporalio/worker';
import { SessionClient } from '../src/client/session-client.js';
import { startFakeModelServer } from '../src/model/fake-server.js';
import { createOpenAIProvider } from '../src/model/provider.js';
import { openSqliteStore } from '../src/persistence/index.js';
import { workflowIdFor } from '../src/workflows/api.js';
import { createWorker } from '../src/worker.js';
import { historyStats } from './support/history.js';
import { fmtInt, machineLine, printGrid } from './support/report.js';

const { values } = parseArgs({ options: { turns: { type: 'string', default: '5' } } });
const TURNS = Number(values.turns);
const SIZES: Array<[string, number]> = [
  ['80 B', 80],
  ['1 MiB', 1024 * 1024],
  ['8 MiB', 8 * 1024 * 1024],
];

function message(size: number, turn: number): string {
  return `turn ${turn}: ${'lorem ipsum dolor sit amet '.repeat(Math.ceil(size / 27))}`.slice(0, size);
}

async function main(): Promise<void> {
  const address = process.env.TEMPORAL_ADDRESS;
  if (!address)
    throw new Error('set TEMPORAL_ADDRESS (run: scripts/temporal-dev-server run -- npx tsx bench/history-bytes.ts)');
  Runtime.install({ logger: new DefaultLogger('ERROR') });
  console.log(`bench/history-bytes.ts · ${machineLine()} · ${TURNS} turns per size · SQLite store, dev server`);
  const dir = mkdtempSync(join(tmpdir(), 'sessionlog-bench-history-'));
  const store = openSqliteStore(join(dir, 'sessions.db'));
  const fake = await startFakeModelServer({});
  const taskQueue = `bench-history-${randomUUID()}`;
  const native = await NativeConnection.connect({ address });
  const worker = await createWorker({
    connection: native,
    taskQueue,
    store,
    model: createOpenAIProvider({ baseURL: fake.baseURL, apiKey: 'bench', provider: 'fake' }),
    agent: { model: 'fake', tools: ['read_artifact'] },
  });
  const running = worker.run();
  const connection = await Connection.connect({ address });
  const client = new SessionClient({
    temporal: new Client({ connection }),
    store,
    taskQueue,
    tunables: { maxMessageBytes: 9 * 1024 * 1024, continueAsNewAfterTurns: 1_000 },
  });
  const rows: string[][] = [];
  try {
    for (const [label, size] of SIZES) {
      const id = `history-${size}-${randomUUID()}`;
      // The session's first turn also records the run's start: measured from the second on.
      await client.send(id, 'hello');
      const growth: number[] = [];
      let ms = 0;
      for (let turn = 1; turn <= TURNS; turn++) {
        const before = await historyStats(client.temporal, workflowIdFor(id));
        const started = performance.now();
        const reply = await client.send(id, message(size, turn));
        ms += performance.now() - started;
        if (reply.outcome !== 'completed') throw new Error(`turn ${turn} of ${label}: ${reply.outcome}`);
        const after = await historyStats(client.temporal, workflowIdFor(id));
        growth.push(after.bytes - before.bytes);
      }
      const last = await historyStats(client.temporal, workflowIdFor(id));
      rows.push([
        label,
        fmtInt(Math.min(...growth)),
        fmtInt(Math.round(growth.reduce((a, b) => a + b, 0) / growth.length)),
        fmtInt(Math.max(...growth)),
        fmtInt(last.largestPayload),
        fmtInt(size),
        fmtInt(Math.round(ms / TURNS)),
      ]);
    }
  } finally {
    worker.shutdown();
    await running;
    await connection.close();
    await native.close();
    await fake.close();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
  printGrid(
    'History bytes per turn, by message size',
    [
      'message',
      'min bytes/turn',
      'mean bytes/turn',
      'max bytes/turn',
      'largest payload (bytes)',
      'message bytes',
      'turn ms (mean)',
    ],
    rows,
  );
}

await main();
