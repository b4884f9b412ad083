/**
 * A worker and a client in the bench's own process (the benches that drive turns through a real
 * Temporal server): a worker on a private task queue over `store`, answering with the fake model
 * at `baseURL`, and a SessionClient over the same store.
 */
import { randomUUID } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import { SessionClient } from '../../src/client/session-client.js';
import { createOpenAIProvider } from '../../src/model/provider.js';
import type { SessionStore } from '../../src/persistence/index.js';
import { createWorker } from '../../src/worker.js';

export type InProcessStack = { client: SessionClient; close(): Promise<void> };

export async function startInProcessStack(options: {
  address: string;
  store: SessionStore;
  baseURL: string;
  name: string;
}): Promise<InProcessStack> {
  const taskQueue = `bench-${options.name}-${randomUUID()}`;
  const native = await NativeConnection.connect({ address: options.address });
  const worker = await createWorker({
    connection: native,
    taskQueue,
    store: options.store,
    model: createOpenAIProvider({ baseURL: options.baseURL, apiKey: 'bench', provider: 'fake' }),
    agent: { model: 'fake', tools: [] },
  });
  const running = worker.run();
  const connection = await Connection.connect({ address: options.address });
  const client = new SessionClient({ temporal: new Client({ connection }), store: options.store, taskQueue });
  return {
    client,
    async close() {
      worker.shutdown();
      await running;
      await connection.close();
      await native.close();
    },
  };
}
