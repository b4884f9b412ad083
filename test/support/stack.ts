/**
 * An in-process sessionlog stack for integration tests: a real Temporal server (from the
 * global setup), a SQLite store in a temp dir, the fake model server over HTTP with the real
 * `openai` client, a worker on a private task queue, and a SessionClient.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection, Runtime, DefaultLogger, type Worker } from '@temporalio/worker';
import { inject } from 'vitest';
import { SessionClient } from '../../src/client/session-client.js';
import { createContextReporter } from '../../src/context/report.js';
import { createTokenMeter } from '../../src/context/token-meter.js';
import { DEFAULT_MODEL_CATALOGUE, type ModelCatalogue } from '../../src/model/catalogue.js';
import {
  startFakeModelServer,
  type FakeModelServer,
  type FakeModelServerOptions,
} from '../../src/model/fake-server.js';
import { createOpenAIProvider } from '../../src/model/provider.js';
import { openSqliteStore } from '../../src/persistence/relational/sqlite/store.js';
import type { SessionStore } from '../../src/persistence/store.js';
import { createWorker, type CreateWorkerOptions } from '../../src/worker.js';
import type { SessionTunables } from '../../src/workflows/api.js';

let runtimeInstalled = false;

/** Quiet SDK logging in tests (warnings and errors only). */
export function installQuietRuntime(): void {
  if (runtimeInstalled) return;
  runtimeInstalled = true;
  try {
    Runtime.install({ logger: new DefaultLogger('WARN') });
  } catch (error) {
    // Runtime.install throws when a runtime already exists in this process; keep that one.
    void error;
  }
}

export function temporalAddress(): string {
  return process.env.TEMPORAL_ADDRESS ?? inject('temporalAddress');
}

/** Short timeouts so crash and fault tests finish quickly against the dev server. */
export const TEST_TUNABLES: Partial<SessionTunables> = {
  modelHeartbeatMs: 3_000,
  modelStartToCloseMs: 60_000,
  toolStartToCloseMs: 30_000,
  appendStartToCloseMs: 10_000,
  modelMaxAttempts: 4,
};

export type Stack = {
  store: SessionStore;
  fake: FakeModelServer;
  worker: Worker;
  workerRun: Promise<void>;
  client: SessionClient;
  temporal: Client;
  taskQueue: string;
  dir: string;
  /** Stops the worker and starts a new one on the same task queue (in-memory worker state is lost), with `overrides`. */
  restartWorker(overrides?: Partial<CreateWorkerOptions>): Promise<void>;
  close(): Promise<void>;
};

export type StackOptions = {
  fake?: FakeModelServerOptions;
  tunables?: Partial<SessionTunables>;
  worker?: Partial<CreateWorkerOptions>;
  store?: SessionStore;
  modelTimeoutMs?: number;
  /** The API key the worker's model client sends (default `test-key`). */
  apiKey?: string;
  /** The worker's task queue (default: a new one); a stack restarted on the same queue serves the same workflows. */
  taskQueue?: string;
  /** The model client's catalogue (default: the built-in one), e.g. to price the fake model. */
  catalogue?: ModelCatalogue;
};

export async function startStack(options: StackOptions = {}): Promise<Stack> {
  installQuietRuntime();
  const dir = mkdtempSync(join(tmpdir(), 'sessionlog-it-'));
  const store = options.store ?? openSqliteStore(join(dir, 'sessions.db'));
  const fake = await startFakeModelServer(options.fake ?? {});
  const provider = createOpenAIProvider({
    baseURL: fake.baseURL,
    apiKey: options.apiKey ?? 'test-key',
    timeoutMs: options.modelTimeoutMs ?? 20_000,
    idleTimeoutMs: options.modelTimeoutMs ?? 20_000,
    provider: 'fake',
    coalesce: { maxDelayMs: 20 },
    ...(options.catalogue ? { catalogue: options.catalogue } : {}),
  });
  const taskQueue = options.taskQueue ?? `test-${randomUUID()}`;
  const address = temporalAddress();
  const nativeConnection = await NativeConnection.connect({ address });
  const workerOptions = (overrides: Partial<CreateWorkerOptions> = {}): CreateWorkerOptions => ({
    connection: nativeConnection,
    taskQueue,
    store,
    model: provider,
    agent: { model: 'fake', system: 'You are a test assistant.', tools: ['read_artifact', 'calculator', 'word_count'] },
    workerOptions: { maxHeartbeatThrottleInterval: '500ms', defaultHeartbeatThrottleInterval: '500ms' },
    ...options.worker,
    ...overrides,
  });
  let worker = await createWorker(workerOptions());
  let workerRun = worker.run();
  const connection = await Connection.connect({ address });
  const temporal = new Client({ connection, namespace: 'default' });
  const workerContext = options.worker?.context === false ? undefined : options.worker?.context;
  const client = new SessionClient({
    temporal,
    store,
    taskQueue,
    tunables: { ...TEST_TUNABLES, ...options.tunables },
    // The same catalogue and policy as the worker's, so the reported budget is the one it acts on.
    contextReport: createContextReporter({
      meter: createTokenMeter(),
      catalogue: DEFAULT_MODEL_CATALOGUE,
      defaultModel: 'fake',
      ...(workerContext?.policy ? { policy: workerContext.policy } : {}),
    }),
  });
  return {
    store,
    fake,
    get worker() {
      return worker;
    },
    get workerRun() {
      return workerRun;
    },
    client,
    // The client's own Temporal client: it opens what the workers sealed.
    temporal: client.temporal,
    taskQueue,
    dir,
    async restartWorker(overrides = {}) {
      worker.shutdown();
      await workerRun.catch(() => undefined);
      worker = await createWorker(workerOptions(overrides));
      workerRun = worker.run();
    },
    async close() {
      worker.shutdown();
      await workerRun.catch(() => undefined);
      await connection.close();
      await nativeConnection.close();
      await fake.close();
      await store.close();
    },
  };
}
