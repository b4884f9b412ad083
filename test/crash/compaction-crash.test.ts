/**
 * SIGKILL of the worker inside a compaction bracket (DESIGN §6): between `compaction/start`
 * and `compaction/summary`, and between the summary and `compaction/end`. A fresh worker
 * resumes the bracket; the fake model sees at most one summarizer call for it, and the surface
 * is at every moment either wholly before or wholly after the compaction.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SessionClient } from '../../src/client/session-client.js';
import { COMPACTION_INSTRUCTION } from '../../src/context/compaction.js';
import { startFakeModelServer, type FakeModelServer } from '../../src/model/fake-server.js';
import { openStore } from '../../src/persistence/open.js';
import type { SessionStore } from '../../src/persistence/store.js';
import { verifyLog, type Message } from '../../src/session/index.js';
import { workflowBundle } from '../../src/worker.js';
import { TEST_TUNABLES, temporalAddress } from '../support/stack.js';

const ROOT = new URL('../..', import.meta.url).pathname;
const dir = mkdtempSync(join(tmpdir(), 'sessionlog-compaction-crash-'));
const storeUrl = `sqlite:${join(dir, 'sessions.db')}`;
const taskQueue = `compaction-crash-${randomUUID()}`;

let fake: FakeModelServer;
let store: SessionStore;
let client: SessionClient;
let connection: Connection;
let bundlePath: string;
const children = new Set<ChildProcess>();

type Hold = { event: 'hold'; op: string };

/** Starts a worker child; resolves once it polls. `hold` makes it hang (to be killed) after the first append whose op matches. */
async function startWorker(hold?: string): Promise<{ child: ChildProcess; held: Promise<Hold> }> {
  const child = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'test/support/worker-child.ts')], {
    cwd: ROOT,
    env: {
      ...process.env,
      TEMPORAL_ADDRESS: temporalAddress(),
      SESSIONLOG_STORE: storeUrl,
      FAKE_MODEL_BASE_URL: fake.baseURL,
      SESSIONLOG_TASK_QUEUE: taskQueue,
      WORKFLOW_BUNDLE_PATH: bundlePath,
      ...(hold ? { CHILD_HOLD_APPEND: `after:${hold}` } : {}),
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children.add(child);
  child.once('exit', () => children.delete(child));
  const lines = createInterface({ input: child.stdout! });
  let onHold: (hold: Hold) => void = () => undefined;
  const held = new Promise<Hold>((resolve) => (onHold = resolve));
  await new Promise<void>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`worker child exited early with ${code}`)));
    lines.on('line', (line) => {
      const event = JSON.parse(line) as { event: string };
      if (event.event === 'ready') resolve();
      if (event.event === 'hold') onHold(event as Hold);
    });
  });
  return { child, held };
}

async function kill(child: ChildProcess): Promise<void> {
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGKILL');
  await exited;
}

const summarizerCalls = () =>
  fake.chatRequests().filter((r) => (r.messages.at(-1) as { content?: unknown }).content === COMPACTION_INSTRUCTION)
    .length;

beforeAll(async () => {
  fake = await startFakeModelServer({
    matcher: (request) =>
      request.lastUserText === COMPACTION_INSTRUCTION
        ? { text: '## Primary request\n- several long questions' }
        : undefined,
  });
  store = await openStore(storeUrl);
  connection = await Connection.connect({ address: temporalAddress() });
  client = new SessionClient({ temporal: new Client({ connection }), store, taskQueue, tunables: TEST_TUNABLES });
  bundlePath = join(dir, 'workflow-bundle.js');
  writeFileSync(bundlePath, (await workflowBundle()).code);
}, 120_000);

afterAll(async () => {
  for (const child of children) child.kill('SIGKILL');
  await connection?.close();
  await fake?.close();
  await store?.close();
});

describe.each([
  { point: 'between compaction/start and compaction/summary', hold: '\\.m\\d+/start$', after: false },
  { point: 'between compaction/summary and compaction/end', hold: '\\.m\\d+/commit$', after: true },
])('SIGKILL $point', ({ hold, after }) => {
  it('resumes the bracket on a fresh worker with at most one summarizer call and an all-or-nothing surface', async () => {
    const id = `compaction-crash-${after ? 'late' : 'early'}-${Date.now()}`;
    const first = await startWorker(hold);
    for (let turn = 1; turn <= 3; turn++)
      await client.send(id, `question ${turn}: ${'please consider this long message '.repeat(20)}`);
    const before: Message[] = await client.history(id);
    fake.reset();

    const compaction = client.compact(id);
    const held = await first.held;
    expect(held.op).toMatch(new RegExp(hold));
    await kill(first.child);

    // At the kill the surface is wholly before (no replacement yet) or wholly after (replacement logged).
    const atKill = await client.history(id);
    if (after) {
      expect(atKill[0]!.source).toMatchObject({ kind: 'plugin', plugin: 'compact' });
      expect(atKill.slice(1)).toEqual(before.slice(before.length - (atKill.length - 1)));
    } else {
      expect(atKill).toEqual(before);
    }
    expect(summarizerCalls()).toBe(after ? 1 : 0);

    const second = await startWorker();
    const result = await compaction;
    expect(result).not.toBeNull();
    expect(summarizerCalls()).toBe(1);

    const events = await client.events(id);
    const bracket = events.filter((e) => (e.data as { compactionId?: string }).compactionId === result!.compactionId);
    expect(bracket.map((e) => e.type)).toEqual(['compaction/start', 'compaction/summary', 'compaction/end']);
    expect(verifyLog(await store.header(id), events)).toEqual([]);
    const history = await client.history(id);
    expect(history[0]!.source).toMatchObject({ kind: 'plugin', plugin: 'compact', compactionId: result!.compactionId });
    const reply = await client.send(id, 'after the crash');
    expect(reply.text).toBe('echo: after the crash');
    await kill(second.child);
  }, 240_000);
});
