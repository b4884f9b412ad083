/**
 * The CLI's wiring of telemetry, through child processes: `sessionlog worker` with
 * SESSIONLOG_METRICS_PORT serves `/metrics` (its turns and the Temporal SDK's worker metrics)
 * and writes JSON log lines; `sessionlog serve` serves `/metrics` on the gateway.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SessionClient } from '../../src/client/session-client.js';
import { openStore } from '../../src/persistence/open.js';
import type { SessionStore } from '../../src/persistence/store.js';
import { eventually } from '../support/log-wait.js';
import { TEST_TUNABLES, temporalAddress } from '../support/stack.js';
import { histogram, names, scrape, value } from './scrape.js';

const ROOT = new URL('../..', import.meta.url).pathname;
const BIN = join(ROOT, 'bin/sessionlog.mjs');
const dir = mkdtempSync(join(tmpdir(), 'sessionlog-cli-telemetry-'));
const storeUrl = `sqlite:${join(dir, 'sessions.db')}`;
const taskQueue = `cli-telemetry-${randomUUID()}`;

type Child = { proc: ChildProcess; stdout: () => string; stderr: () => string };

function start(command: string, env: Record<string, string>): Child {
  const base: NodeJS.ProcessEnv = { ...process.env };
  for (const key of ['OPENAI_API_KEY', 'DEEPSEEK_API_KEY', 'OPENAI_BASE_URL', 'OTEL_EXPORTER_OTLP_ENDPOINT'])
    delete base[key];
  const proc = spawn(process.execPath, [BIN, command], {
    cwd: dir,
    env: {
      ...base,
      TEMPORAL_ADDRESS: temporalAddress(),
      SESSIONLOG_STORE: storeUrl,
      SESSIONLOG_TASK_QUEUE: taskQueue,
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  proc.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
  proc.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  return { proc, stdout: () => stdout, stderr: () => stderr };
}

async function stop(child: Child | undefined): Promise<void> {
  if (!child || child.proc.exitCode !== null) return;
  const exited = new Promise((resolve) => child.proc.once('exit', resolve));
  child.proc.kill('SIGTERM');
  await exited;
}

let worker: Child | undefined;
let serve: Child | undefined;
let store: SessionStore;
let client: SessionClient;

beforeAll(async () => {
  store = await openStore(storeUrl, { pollIntervalMs: 20 });
  client = await SessionClient.connect({ address: temporalAddress(), store, taskQueue, tunables: TEST_TUNABLES });
});

afterAll(async () => {
  await stop(worker);
  await stop(serve);
  await client?.temporal.connection.close();
  await store?.close();
}, 60_000);

describe('telemetry of the CLI processes', () => {
  it('sessionlog worker serves /metrics on SESSIONLOG_METRICS_PORT and logs a JSON line per turn', async () => {
    worker = start('worker', { SESSIONLOG_METRICS_PORT: '0', SESSIONLOG_LOG_LEVEL: 'info' });
    const metricsUrl = await eventually(
      async () => /operations: (http:\/\/127\.0\.0\.1:\d+)\/healthz/.exec(worker!.stdout())?.[1],
      120_000,
      200,
    ).catch((error: unknown) => {
      throw new Error(`sessionlog worker did not start:\n${worker!.stdout()}\n${worker!.stderr()}`, { cause: error });
    });
    const sessionId = `cli-telemetry-${randomUUID()}`;
    const reply = await client.send(sessionId, 'hello metrics');
    expect(reply.outcome).toBe('completed');

    const scraped = await scrape(`${metricsUrl}/metrics`);
    expect(value(scraped, 'sessionlog_turns_finished_total', { outcome: 'completed' })).toBe(1);
    expect(
      histogram(scraped, 'sessionlog_model_call_duration_seconds', { model: 'fake', purpose: 'reply' }).count,
    ).toBe(1);
    expect(names(scraped).filter((name) => name.startsWith('temporal_')).length).toBeGreaterThan(5);
    expect((await fetch(`${metricsUrl}/readyz`)).status).toBe(200);

    const lines = await eventually(
      async () => {
        const parsed = worker!
          .stdout()
          .split('\n')
          .filter((line) => line.startsWith('{'))
          .map((line) => JSON.parse(line) as Record<string, unknown>);
        return parsed.some((line) => line.msg === 'turn ended') ? parsed : undefined;
      },
      10_000,
      100,
    );
    expect(lines.find((line) => line.msg === 'turn ended')).toMatchObject({
      name: 'sessionlog-worker',
      sessionId,
      turn: 1,
      outcome: 'completed',
      activity: 'modelStep',
    });
    expect(worker.stdout()).not.toContain('hello metrics');
  });

  it('sessionlog serve answers GET /metrics on the gateway', async () => {
    serve = start('serve', { SESSIONLOG_PORT: '0' });
    const gatewayUrl = await eventually(
      async () => /gateway: (http:\/\/127\.0\.0\.1:\d+)\/v1/.exec(serve!.stdout())?.[1],
      60_000,
      200,
    ).catch((error: unknown) => {
      throw new Error(`sessionlog serve did not start:\n${serve!.stdout()}\n${serve!.stderr()}`, { cause: error });
    });
    const scraped = await scrape(`${gatewayUrl}/metrics`);
    expect(scraped.contentType).toMatch(/^text\/plain/);
    expect(value(scraped, 'sessionlog_sse_clients')).toBe(0);
    expect(names(scraped)).toContain('sessionlog_turns_started_total');
  });
});
