/**
 * Learned limits (DESIGN §6): overflow refusals per 100 turns on one scripted conversation
 * against a provider whose context limit the catalogue does not know, without and with
 * learning the limit from the provider's refusal, in one run on one Temporal server.
 *
 *   scripts/temporal-dev-server run -- npx tsx bench/limits.ts [--turns 100] [--limit 2500]
 *
 * The provider is the fake model server with `contextLimitTokens` set: it refuses a request
 * above the limit with OpenAI's wording ("This model's maximum context length is N tokens"),
 * while the catalogue says the model has a 128K window.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime } from '@temporalio/worker';
import { SessionClient } from '../src/client/session-client.js';
import { COMPACTION_INSTRUCTION } from '../src/context/compaction.js';
import { startFakeModelServer } from '../src/model/fake-server.js';
import { createOpenAIProvider } from '../src/model/provider.js';
import { openSqliteStore } from '../src/persistence/index.js';
import { createWorker } from '../src/worker.js';
import { fmtInt, machineLine, printGrid, printTable } from './support/report.js';

const { values: args } = parseArgs({
  options: { turns: { type: 'string', default: '100' }, limit: { type: 'string', default: '2500' } },
});
const TURNS = Number(args.turns);
const LIMIT = Number(args.limit);

/** The same user messages every run: a few hundred tokens each, so the limit is reached every few turns. */
function userText(turn: number): string {
  return `turn ${turn}: ${Array.from({ length: 8 }, (_, i) => `item ${i} of turn ${turn} is a mild note about the weather and the schedule`).join('. ')}`;
}

type Run = { refused: number; requests: number; compactions: number; errors: number };

async function conversation(address: string, learnLimits: boolean): Promise<Run> {
  const dir = mkdtempSync(join(tmpdir(), 'sessionlog-bench-limits-'));
  const store = openSqliteStore(join(dir, 'sessions.db'));
  const fake = await startFakeModelServer({ contextLimitTokens: LIMIT });
  fake.setMatcher((request) =>
    request.lastUserText === COMPACTION_INSTRUCTION
      ? { text: '## Goal\n- a long chat about the weather\n## Facts\n- (none)' }
      : { text: `noted ${'w'.repeat(200)}` },
  );
  const taskQueue = `bench-limits-${randomUUID()}`;
  const native = await NativeConnection.connect({ address });
  const worker = await createWorker({
    connection: native,
    taskQueue,
    store,
    model: createOpenAIProvider({ baseURL: fake.baseURL, apiKey: 'bench', provider: 'fake' }),
    agent: { model: 'fake', tools: [] },
    context: { pruner: false, learnLimits },
  });
  const running = worker.run();
  const connection = await Connection.connect({ address });
  const client = new SessionClient({ temporal: new Client({ connection }), store, taskQueue });
  const id = `limits-${learnLimits ? 'learned' : 'unlearned'}-${randomUUID()}`;
  let errors = 0;
  try {
    for (let turn = 1; turn <= TURNS; turn++)
      if ((await client.send(id, userText(turn))).outcome !== 'completed') errors += 1;
    const main = fake
      .requests()
      .filter(
        (r) =>
          r.path === '/v1/chat/completions' && !JSON.stringify(r.body).includes(COMPACTION_INSTRUCTION.slice(0, 60)),
      );
    const compactions = (await client.events(id)).filter((e) => e.type === 'compaction/summary').length;
    return { refused: main.filter((r) => r.status === 400).length, requests: main.length, compactions, errors };
  } finally {
    worker.shutdown();
    await running;
    await connection.close();
    await native.close();
    await fake.close();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  const address = process.env.TEMPORAL_ADDRESS;
  if (!address)
    throw new Error('set TEMPORAL_ADDRESS (run: scripts/temporal-dev-server run -- npx tsx bench/limits.ts)');
  Runtime.install({ logger: new DefaultLogger('ERROR') });
  console.log(
    `bench/limits.ts · ${machineLine()} · ${TURNS} turns · provider limit ${fmtInt(LIMIT)} tokens (catalogue: 128K)`,
  );
  const without = await conversation(address, false);
  const withLearning = await conversation(address, true);
  const per100 = (run: Run) => ((run.refused / TURNS) * 100).toFixed(1);
  printGrid(
    'Overflow refusals on one scripted conversation',
    ['', 'refused requests', 'per 100 turns', 'model requests', 'compactions', 'turns ended in error'],
    [
      [
        'without learned limits',
        fmtInt(without.refused),
        per100(without),
        fmtInt(without.requests),
        fmtInt(without.compactions),
        fmtInt(without.errors),
      ],
      [
        'with learned limits',
        fmtInt(withLearning.refused),
        per100(withLearning),
        fmtInt(withLearning.requests),
        fmtInt(withLearning.compactions),
        fmtInt(withLearning.errors),
      ],
    ],
  );
  printTable('Target', [
    {
      name: 'overflow refusals after the first, with learned limits',
      value: fmtInt(Math.max(0, withLearning.refused - 1)),
      target: '0',
      met: withLearning.refused <= 1,
    },
  ]);
}

await main();
