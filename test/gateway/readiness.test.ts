/**
 * The gateway's `GET /readyz`: 200 while its store and the Temporal frontend answer, 503 with
 * a reason naming the dependency that does not; public like `/healthz`, and documented.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SessionClient } from '../../src/client/session-client.js';
import { startGateway, type RunningGateway } from '../../src/gateway/index.js';
import { openSqliteStore } from '../../src/persistence/relational/sqlite/store.js';
import { startStack, type Stack } from '../support/stack.js';
import { request } from './http.js';

const TOKEN = 'readiness-test-token-0123456789';
let stack: Stack;
const gateways: RunningGateway[] = [];
beforeAll(async () => {
  stack = await startStack();
});
afterAll(async () => {
  for (const gateway of gateways) await gateway.close();
  await stack?.close();
});

async function gatewayOver(client: SessionClient, token?: string): Promise<RunningGateway> {
  const gateway = await startGateway({
    client,
    host: '127.0.0.1',
    port: 0,
    bodyLimitBytes: 64 * 1024,
    ...(token ? { token } : {}),
  });
  gateways.push(gateway);
  return gateway;
}

type Report = { ready: boolean; reason?: string; checks: Record<string, { ok: boolean; error?: string }> };

describe('GET /readyz on the gateway', () => {
  it('is 200 with both checks ok, needs no token, and is in the OpenAPI document', async () => {
    const gateway = await gatewayOver(stack.client, TOKEN);
    const ready = await request(gateway.url, 'GET', '/readyz');
    expect(ready.status).toBe(200);
    expect(ready.body).toEqual({ ready: true, checks: { store: { ok: true }, temporal: { ok: true } } });
    const doc = (
      await request(gateway.url, 'GET', '/v1/openapi.json', { headers: { authorization: `Bearer ${TOKEN}` } })
    ).body as {
      paths: Record<string, { get?: { responses: Record<string, unknown>; security?: unknown[] } }>;
    };
    expect(Object.keys(doc.paths['/readyz']!.get!.responses)).toEqual(expect.arrayContaining(['200', '503']));
  });

  it('is 503 naming the store when the store does not answer', async () => {
    const store = openSqliteStore(join(mkdtempSync(join(tmpdir(), 'sessionlog-readyz-')), 'sessions.db'));
    const client = new SessionClient({ temporal: stack.temporal, store, taskQueue: stack.taskQueue });
    const gateway = await gatewayOver(client);
    await store.close();
    const response = await request(gateway.url, 'GET', '/readyz');
    expect(response.status).toBe(503);
    const report = response.body as Report;
    expect(report.ready).toBe(false);
    expect(report.reason).toMatch(/^store unreachable: /);
    expect(report.checks.store!.ok).toBe(false);
    expect(report.checks.temporal).toEqual({ ok: true });
  });

  it('is 503 naming Temporal when its frontend does not answer', async () => {
    // A lazy connection to a port nothing listens on: the gateway starts, Temporal never answers.
    // Without the SDK's retry interceptor: its backoff timer of a probe still retrying would fire
    // after the close below and throw on the closed channel (an uncaught error in the test run).
    const connection = Connection.lazy({ address: '127.0.0.1:1', interceptors: [] });
    const client = new SessionClient({
      temporal: new Client({ connection }),
      store: stack.store,
      taskQueue: stack.taskQueue,
    });
    const gateway = await gatewayOver(client);
    const response = await request(gateway.url, 'GET', '/readyz');
    expect(response.status).toBe(503);
    const report = response.body as Report;
    expect(report.reason).toMatch(/^temporal unreachable: /);
    expect(report.checks).toMatchObject({ store: { ok: true }, temporal: { ok: false } });
    await connection.close();
  });
});
