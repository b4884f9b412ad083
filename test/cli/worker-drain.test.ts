/**
 * `sessionlog worker` as a process a fleet runs (DESIGN §8.1): its operations listener answers
 * `/healthz` and `/readyz`; SIGTERM drains it. A model call that is streaming when SIGTERM
 * arrives finishes on the draining worker within the grace period (the model is asked once),
 * or, past the grace period, is handed back to Temporal and finished by another worker (asked
 * twice); either way the turn completes and the draining worker exits 0.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SessionClient, type Reply } from '../../src/client/session-client.js';
import { startFakeModelServer, type FakeModelServer } from '../../src/model/fake-server.js';
import { openSqliteStore } from '../../src/persistence/relational/sqlite/store.js';
import type { SessionStore } from '../../src/persistence/store.js';
import { eventually, waitForEvent } from '../support/log-wait.js';
import { temporalAddress } from '../support/stack.js';

const ROOT = new URL('../..', import.meta.url).pathname;
const BIN = join(ROOT, 'bin/sessionlog.mjs');
const dir = mkdtempSync(join(tmpdir(), 'sessionlog-drain-'));
const dbPath = join(dir, 'sessions.db');
const taskQueue = `drain-${randomUUID()}`;
/** 40 words at 100 ms each: a reply that streams for about 4 s. */
const LONG_TEXT = Array.from({ length: 40 }, (_, i) => `word${i}`).join(' ');

let fake: FakeModelServer;
let store: SessionStore;
let connection: Connection;
let client: SessionClient;
const workers: WorkerProcess[] = [];

class WorkerProcess {
  readonly child: ChildProcess;
  readonly lines: string[] = [];
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;

  constructor(graceMs: number) {
    this.child = spawn(process.execPath, [BIN, 'worker'], {
      cwd: dir,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: {
        ...process.env,
        TEMPORAL_ADDRESS: temporalAddress(),
        SESSIONLOG_STORE: `sqlite:${dbPath}`,
        SESSIONLOG_TASK_QUEUE: taskQueue,
        OPENAI_BASE_URL: fake.baseURL,
        SESSIONLOG_MODEL: 'fake',
        SESSIONLOG_METRICS_PORT: '0',
        SESSIONLOG_SHUTDOWN_GRACE_MS: String(graceMs),
        SESSIONLOG_CHUNK_FLUSH_MS: '20',
      },
    });
    for (const stream of [this.child.stdout!, this.child.stderr!])
      createInterface({ input: stream }).on('line', (line) => this.lines.push(line));
    this.exited = new Promise((resolve) => this.child.once('exit', (code, signal) => resolve({ code, signal })));
    workers.push(this);
  }

  /** Waits until it polls; returns its operations listener's base URL. */
  async ready(): Promise<string> {
    await eventually(
      async () => {
        if (this.child.exitCode !== null)
          throw new Error(`worker exited (${this.child.exitCode}):\n${this.lines.join('\n')}`);
        return this.lines.some((line) => / worker on /.test(line)) ? true : undefined;
      },
      120_000,
      100,
    );
    const ops = this.lines
      .map((line) => / operations: (http:\/\/\S+)\/healthz/.exec(line)?.[1])
      .find((url) => url !== undefined);
    if (!ops) throw new Error(`no operations line:\n${this.lines.join('\n')}`);
    return ops;
  }
}

async function getJson(
  url: string,
): Promise<{ status: number; body: { ready?: boolean; reason?: string; ok?: boolean } }> {
  const response = await fetch(url);
  return { status: response.status, body: (await response.json()) as { ready?: boolean; reason?: string } };
}

/** Chat requests the fake model received for this session's turn (the user's text is unique per test). */
function modelCallsFor(text: string): number {
  return fake.chatRequests().filter((body) => JSON.stringify(body.messages).includes(text)).length;
}

beforeAll(async () => {
  fake = await startFakeModelServer({ tokenDelayMs: 100 });
  store = openSqliteStore(dbPath);
  connection = await Connection.connect({ address: temporalAddress() });
  client = new SessionClient({
    temporal: new Client({ connection }),
    store,
    taskQueue,
    tunables: { modelHeartbeatMs: 2_000, modelMaxAttempts: 5 },
  });
});

afterAll(async () => {
  for (const worker of workers) {
    if (worker.child.exitCode === null && worker.child.signalCode === null) {
      worker.child.kill('SIGKILL');
      await worker.exited;
    }
  }
  await connection?.close();
  await store?.close();
  await fake?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** Sends `text`, SIGTERMs `worker` once the reply streams, and returns the reply and what /readyz said during the drain. */
async function sendAndDrain(
  sessionId: string,
  text: string,
  worker: WorkerProcess,
  ops: string,
): Promise<{ reply: Promise<Reply>; drainingReadyz: Awaited<ReturnType<typeof getJson>> }> {
  await client.start({ sessionId });
  const reply = client.send(sessionId, text);
  await waitForEvent(client, sessionId, (event) => event.type === 'assistant/chunk', 60_000);
  worker.child.kill('SIGTERM');
  await eventually(
    async () => (worker.lines.some((line) => /SIGTERM: draining/.test(line)) ? true : undefined),
    10_000,
    20,
  );
  return { reply, drainingReadyz: await getJson(`${ops}/readyz`) };
}

describe('sessionlog worker', () => {
  it('serves /healthz and /readyz, and on SIGTERM lets the streaming model call finish (one model call), then exits 0', async () => {
    const first = new WorkerProcess(30_000);
    const ops = await first.ready();
    expect(await getJson(`${ops}/healthz`)).toEqual({ status: 200, body: { ok: true } });
    const ready = await getJson(`${ops}/readyz`);
    expect(ready.status).toBe(200);
    expect(ready.body).toMatchObject({ ready: true, checks: { store: { ok: true }, temporal: { ok: true } } });

    const text = `finish me ${randomUUID()} ${LONG_TEXT}`;
    const { reply, drainingReadyz } = await sendAndDrain('drain-finish', text, first, ops);
    expect(drainingReadyz).toMatchObject({ status: 503, body: { ready: false, reason: 'draining: shutting down' } });
    expect(await first.exited).toEqual({ code: 0, signal: null });
    expect(first.lines.join('\n')).toMatch(/ drained$/m);
    // The draining worker stopped polling, so the rest of the turn needs another worker.
    const second = new WorkerProcess(30_000);
    await second.ready();
    const answer = await reply;
    expect(answer.outcome).toBe('completed');
    expect(answer.text).toBe(`echo: ${text}`);
    expect(modelCallsFor(text)).toBe(1);
    second.child.kill('SIGTERM');
    expect(await second.exited).toEqual({ code: 0, signal: null });
  }, 300_000);

  it('past the grace period hands the model call back, and another worker answers the turn', async () => {
    const first = new WorkerProcess(300);
    const ops = await first.ready();
    const text = `hand me back ${randomUUID()} ${LONG_TEXT}`;
    const { reply } = await sendAndDrain('drain-handback', text, first, ops);
    expect(await first.exited).toEqual({ code: 0, signal: null });
    const second = new WorkerProcess(30_000);
    await second.ready();
    const answer = await reply;
    expect(answer.outcome).toBe('completed');
    expect(answer.text).toBe(`echo: ${text}`);
    // Asked once on the first worker (cancelled) and once more on the second.
    expect(modelCallsFor(text)).toBe(2);
    second.child.kill('SIGTERM');
    expect(await second.exited).toEqual({ code: 0, signal: null });
  }, 300_000);
});
