/**
 * Rejoining a response stream across a worker crash (DESIGN §8, §10): a client streams a
 * response through the OpenAI SDK and drops the stream mid-reply; the worker writing that
 * reply is killed with SIGKILL; a fresh worker retries the model call, which streams the
 * reply again from its start into the log. The client's
 * `responses.retrieve(id, {stream: true, starting_after: n})` then yields what came after n —
 * what was missed coalesced into one delta, then the live tail: no gap, no repeat, and none of
 * the retried call's replayed text twice — and the text it assembles is the logged reply.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Client, Connection } from '@temporalio/client';
import OpenAI from 'openai';
import type { ResponseStreamEvent } from 'openai/resources/responses/responses';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SessionClient } from '../../src/client/session-client.js';
import { startGateway, type RunningGateway } from '../../src/gateway/index.js';
import { chunkAttemptOf } from '../../src/gateway/turn-stream/output-items.js';
import { startFakeModelServer, type FakeModelServer } from '../../src/model/fake-server.js';
import { openStore } from '../../src/persistence/open.js';
import type { SessionStore } from '../../src/persistence/store.js';
import { textOf, type SessionEvent } from '../../src/session/index.js';
import { workflowBundle } from '../../src/worker.js';
import { bundleScript } from '../support/spawn-ts.js';
import { TEST_TUNABLES, temporalAddress } from '../support/stack.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
/** Bound on a child worker's start. */
const START_BOUND_MS = 120_000;

type Worker = { proc: ChildProcess; ready: Promise<void>; exited: Promise<unknown> };

function startWorker(script: string, env: Record<string, string>): Worker {
  const proc = spawn(process.execPath, [script], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  proc.stderr!.on('data', (d: Buffer) => (stderr = (stderr + d.toString('utf8')).slice(-4000)));
  const exited = new Promise((resolve) => proc.once('exit', resolve));
  const ready = new Promise<void>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`worker not ready after ${START_BOUND_MS} ms:\n${stderr}`)),
      START_BOUND_MS,
    );
    createInterface({ input: proc.stdout! }).on('line', (line) => {
      if (line.includes('"event":"ready"')) {
        clearTimeout(timer);
        resolve();
      }
    });
    void exited.then(() => {
      clearTimeout(timer);
      reject(new Error(`worker exited before it was ready:\n${stderr}`));
    });
  });
  ready.catch(() => undefined);
  return { proc, ready, exited };
}

const WORDS = Array.from({ length: 40 }, (_, i) => `word${i}`).join(' ');

let dir: string;
let fake: FakeModelServer;
let store: SessionStore;
let connection: Connection;
let gateway: RunningGateway;
let env: Record<string, string>;
let script: string;
const workers: Worker[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'sessionlog-openai-crash-'));
  // The first call streams one word every 400 ms, so the kill lands mid-reply; the retried call is fast.
  fake = await startFakeModelServer({ tokenDelayMs: 400, matcher: () => ({ text: WORDS }) });
  store = await openStore(`sqlite:${join(dir, 'sessions.db')}`, { pollIntervalMs: 20 });
  connection = await Connection.connect({ address: temporalAddress() });
  const taskQueue = `openai-crash-${randomUUID()}`;
  const client = new SessionClient({
    temporal: new Client({ connection, namespace: 'default' }),
    store,
    taskQueue,
    tunables: { ...TEST_TUNABLES, modelHeartbeatMs: 2_000 },
  });
  gateway = await startGateway({
    client,
    host: '127.0.0.1',
    port: 0,
    bodyLimitBytes: 64 * 1024,
    defaultAgent: { model: 'fake', system: 'You are a test assistant.' },
  });
  const bundlePath = join(dir, 'workflow-bundle.js');
  writeFileSync(bundlePath, (await workflowBundle()).code);
  script = await bundleScript('test/support/worker-child.ts');
  env = {
    TEMPORAL_ADDRESS: temporalAddress(),
    SESSIONLOG_STORE: `sqlite:${join(dir, 'sessions.db')}`,
    FAKE_MODEL_BASE_URL: fake.baseURL,
    SESSIONLOG_TASK_QUEUE: taskQueue,
    WORKFLOW_BUNDLE_PATH: bundlePath,
  };
});

afterAll(async () => {
  for (const worker of workers) {
    worker.proc.kill('SIGKILL');
    await worker.exited;
  }
  await gateway?.close();
  await connection?.close();
  await fake?.close();
  await store?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('rejoining an OpenAI response stream after the worker was SIGKILLed', () => {
  it('yields what came after starting_after, and the reply text once', { timeout: 300_000 }, async () => {
    const first = startWorker(script, env);
    workers.push(first);
    await first.ready;
    const openai = new OpenAI({ baseURL: `${gateway.url}/openai/v1`, apiKey: 'unused', maxRetries: 0 });

    const stream = await openai.responses.create({ model: 'fake', input: 'a long answer, please', stream: true });
    const before: ResponseStreamEvent[] = [];
    for await (const event of stream) {
      before.push(event);
      if (before.filter((e) => e.type === 'response.output_text.delta').length === 2) break;
    }
    const responseId = (before[0] as { response: { id: string; conversation: { id: string } } }).response.id;
    const sessionId = (before[0] as { response: { conversation: { id: string } } }).response.conversation.id;
    const n = before.at(-1)!.sequence_number;

    // Kill the worker mid-reply; the next one retries the model call, fast this time.
    first.proc.kill('SIGKILL');
    await first.exited;
    fake.configure({ tokenDelayMs: 0 });
    const second = startWorker(script, env);
    workers.push(second);
    await second.ready;

    const after: ResponseStreamEvent[] = [];
    for await (const event of await openai.responses.retrieve(responseId, { stream: true, starting_after: n }))
      after.push(event);

    const all = [...before, ...after];
    expect(after[0]!.sequence_number).toBeGreaterThan(n);
    // Sequence numbers only grow: what was missed came coalesced (one delta), skipping some.
    expect(all.map((e) => e.sequence_number).every((s, i, list) => i === 0 || s > list[i - 1]!)).toBe(true);
    expect(all.at(-1)!.type).toBe('response.completed');
    const streamed = all
      .filter((e) => e.type === 'response.output_text.delta')
      .map((e) => (e as { delta: string }).delta)
      .join('');
    expect(streamed).toBe(WORDS);

    // The log holds the chunks of two model calls (the killed one's partial reply, then the
    // retried one's whole reply) and one assistant message: the stream sent the replayed text once.
    const log = await store.readFrom(sessionId, 0);
    // (A call's last chunks may be held for the reply's own batch, which names no attempt.)
    const attempts = new Set(
      log.filter((e) => e.type === 'assistant/chunk').map((e) => chunkAttemptOf(e.op) ?? 'held for the reply batch'),
    );
    expect(attempts.size).toBeGreaterThanOrEqual(2);
    const replies = log.filter((e): e is SessionEvent<'assistant/message'> => e.type === 'assistant/message');
    expect(replies).toHaveLength(1);
    expect(textOf(replies[0]!.data.message.content)).toBe(WORDS);
    const final = await openai.responses.retrieve(responseId);
    expect(final).toMatchObject({ status: 'completed', output_text: WORDS });
    // A client starting over gets the finished response whole at once: its text as one delta, the same end.
    const full: ResponseStreamEvent[] = [];
    for await (const event of await openai.responses.retrieve(responseId, { stream: true })) full.push(event);
    const deltas = full.filter((e) => e.type === 'response.output_text.delta');
    expect(deltas.map((e) => (e as { delta: string }).delta)).toEqual([WORDS]);
    expect(full.at(-1)).toEqual(all.at(-1));
  });
});
