/**
 * A fleet worker that is starting while Temporal goes away (a restart slower than the SDK's own
 * retries; CI saw a replacement worker die this way mid-start, its process left running with its
 * listener closed): what the SDK throws then, from a real connection to a private dev server
 * that is stopped after the connect, is what `sessionlog worker` retries (`isTemporalUnavailable`),
 * and a namespace that does not exist is not (it fails the start at once). The retry loop
 * itself is src/cli/worker-process.ts; the fleet test restarts Temporal under it.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { NativeConnection, Worker } from '@temporalio/worker';
import { afterAll, describe, expect, it } from 'vitest';
import { isTemporalUnavailable } from '../../src/cli/reconnect.js';
import { DevTemporalServer } from '../fleet/harness.js';

const dir = mkdtempSync(join(tmpdir(), 'sessionlog-temporal-away-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('a worker starting while Temporal is away', () => {
  it('the namespace check and Worker.create fail as unavailable (retried); an unknown namespace does not', async () => {
    const server = await DevTemporalServer.start(join(dir, 'temporal'));
    let connection: NativeConnection | undefined;
    try {
      connection = await NativeConnection.connect({ address: server.address });
      const unknown = await connection.workflowService
        .describeNamespace({ namespace: 'no-such-namespace' })
        .catch((error: unknown) => error);
      expect(unknown).toBeInstanceOf(Error);
      expect(isTemporalUnavailable(unknown), String(unknown)).toBe(false);

      await server.stop();
      const described = await connection.workflowService
        .describeNamespace({ namespace: 'default' })
        .catch((error: unknown) => error);
      expect(described).toBeInstanceOf(Error);
      expect(isTemporalUnavailable(described), String(described)).toBe(true);

      // What escaped the worker's start before: Worker.create's own namespace check, after its retries.
      const created = await Worker.create({
        connection,
        namespace: 'default',
        taskQueue: 'temporal-away',
        activities: { noop: async () => undefined },
      }).catch((error: unknown) => error);
      expect(created).toBeInstanceOf(Error);
      expect(isTemporalUnavailable(created), String(created)).toBe(true);
    } finally {
      await connection?.close().catch(() => undefined);
      await server.stop().catch(() => undefined);
    }
  }, 120_000);
});
