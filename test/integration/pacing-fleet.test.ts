/**
 * Provider pacing across workers (issue 26, DESIGN §5.3): four workers on one task queue, each
 * with its own store connection (PostgreSQL, as a fleet runs) and its own model client, serve
 * 40 sessions at once against a fake provider that enforces 300 requests a minute with a
 * two-second burst (a token bucket, 429 with retry-after past it) and states its limits in
 * `x-ratelimit-limit-*` headers, as OpenAI does. The workers pace by the limits the provider
 * stated, through the one bucket in the store: the provider, counting what it let in, sees the
 * limit kept, and fewer than 2% of requests are refused. A control run without pacing shows
 * the refusals the pacing avoids. Timings are asserted only as the provider's own limit.
 */
import { createHash, randomUUID } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection, type Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SessionClient } from '../../src/client/session-client.js';
import { startFakeModelServer, type FakeModelServer } from '../../src/model/fake-server.js';
import { createOpenAIProvider } from '../../src/model/provider.js';
import { openStore } from '../../src/persistence/open.js';
import type { SessionStore } from '../../src/persistence/store.js';
import { createWorker } from '../../src/worker.js';
import { installQuietRuntime, temporalAddress, TEST_TUNABLES } from '../support/stack.js';
import { dropPostgresTestSchemas, postgresTestSchema, postgresUrlWithSchema } from '../support/store-fixtures.js';

const RPM = 300;
const SESSIONS = 40;
const TURNS = 2;
/**
 * The provider's bucket holds two seconds' worth (real providers allow a minute's): the pacer's
 * own burst is half a second, and the rest absorbs requests that reach the provider late on a
 * loaded two-core machine running four workers, Temporal and PostgreSQL.
 */
const BURST_MS = 2_000;

type Fleet = { client: SessionClient; stores: SessionStore[]; workers: Worker[]; runs: Promise<void>[] };

let fake: FakeModelServer;
const fleets: Fleet[] = [];

beforeAll(async () => {
  installQuietRuntime();
  fake = await startFakeModelServer({ rateLimit: { requestsPerMinute: RPM, burstMs: BURST_MS } });
});
afterAll(async () => {
  for (const fleet of fleets) {
    for (const worker of fleet.workers) worker.shutdown();
    await Promise.allSettled(fleet.runs);
    for (const store of fleet.stores) await store.close();
  }
  await fake?.close();
  dropPostgresTestSchemas();
});

async function startFleet(pacing: { limits?: { requestsPerMinute: number } } | false, workers = 4): Promise<Fleet> {
  const url = postgresUrlWithSchema(postgresTestSchema());
  const taskQueue = `pacing-${randomUUID()}`;
  const fleet: Fleet = { client: undefined as never, stores: [], workers: [], runs: [] };
  fleets.push(fleet);
  for (let i = 0; i < workers; i++) {
    const store = await openStore(url);
    fleet.stores.push(store);
    const worker = await createWorker({
      connection: await NativeConnection.connect({ address: temporalAddress() }),
      taskQueue,
      store,
      // Each worker has its own client of the same account: the same pacing key.
      model: createOpenAIProvider({ baseURL: fake.baseURL, apiKey: 'fleet-key', provider: 'fake', timeoutMs: 20_000 }),
      agent: { model: 'fake', system: 'You are a test assistant.', tools: [] },
      context: false,
      pacing,
    });
    fleet.workers.push(worker);
    fleet.runs.push(worker.run());
  }
  const temporal = new Client({ connection: await Connection.connect({ address: temporalAddress() }) });
  // A provider wait up to 60 s is the activity's; the retry of a 429 is the model step's own.
  fleet.client = new SessionClient({
    temporal,
    store: fleet.stores[0]!,
    taskQueue,
    tunables: { ...TEST_TUNABLES, modelMaxAttempts: 20 },
  });
  return fleet;
}

/** 40 sessions, each sending its turns one after another, all at once. */
async function drive(fleet: Fleet, tag: string): Promise<string[]> {
  const outcomes: string[] = [];
  await Promise.all(
    Array.from({ length: SESSIONS }, async (_, s) => {
      const id = `${tag}-${s}-${Date.now()}`;
      await fleet.client.create({ sessionId: id });
      for (let t = 1; t <= TURNS; t++) outcomes.push((await fleet.client.send(id, `turn ${t} of ${s}`)).outcome);
    }),
  );
  return outcomes;
}

describe('pacing a fleet under a provider limit', () => {
  /** What the provider saw: the limit kept in every window, and the share it refused. */
  function expectPaced(): void {
    const { admitted, refused, refusedAt } = fake.rateLimitCounts();
    expect(admitted.length).toBeGreaterThanOrEqual(SESSIONS * TURNS);
    // The provider's own limit: its bucket admits at most a second's burst plus the rate.
    const perSecond = RPM / 60;
    for (const window of [1_000, 5_000, 10_000])
      expect(fake.mostAdmittedWithin(window), `${window} ms`).toBeLessThanOrEqual(
        Math.ceil(perSecond * (1 + window / 1_000)),
      );
    // On a failure, when each request was let in or refused (ms from the first).
    const timeline = `admitted ${admitted.map((t) => t - admitted[0]!).join(' ')}; refused ${refusedAt.map((t) => t - admitted[0]!).join(' ')}`;
    expect(refused / (admitted.length + refused), timeline).toBeLessThan(0.02);
  }

  it('four workers and 40 sessions share one bucket under configured limits: the limit holds at the provider, under 2% refused', async () => {
    const fleet = await startFleet({ limits: { requestsPerMinute: RPM } });
    fake.reset();
    const outcomes = await drive(fleet, 'paced');
    expect(outcomes.filter((o) => o !== 'completed')).toEqual([]);
    expectPaced();
    // One bucket row for the account, shared by the workers' stores.
    const key = `fake:${createHash('sha256').update('fleet-key').digest('hex').slice(0, 16)}`;
    expect(await fleet.stores[3]!.pacing.state(key)).toBeDefined();
  });

  it('paces by the limits the provider states in its rate-limit headers once it has answered', async () => {
    const fleet = await startFleet({}, 1);
    const warm = `warm-${Date.now()}`;
    await fleet.client.create({ sessionId: warm });
    await fleet.client.send(warm, 'first contact');
    fake.reset();
    const outcomes = await drive(fleet, 'stated');
    expect(outcomes.filter((o) => o !== 'completed')).toEqual([]);
    expectPaced();
  });

  it('without pacing the same load is refused often (the control)', async () => {
    const fleet = await startFleet(false);
    fake.reset();
    const outcomes = await drive(fleet, 'unpaced');
    expect(outcomes.filter((o) => o !== 'completed')).toEqual([]);
    const { admitted, refused } = fake.rateLimitCounts();
    expect(admitted).toHaveLength(SESSIONS * TURNS);
    expect(refused / (admitted.length + refused)).toBeGreaterThan(0.02);
  });
});
