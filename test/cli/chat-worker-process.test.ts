/**
 * `sessionlog chat` as users run it: the worker in another process (here a child worker, as
 * `sessionlog dev` is to `chat`), so the chat's live tail learns of appends by polling the
 * store, not from an in-process signal. Every streamed reply must reach the screen whole,
 * however the reply to `send` and the tail's next poll are ordered, and an approval asked for
 * inline must reach the worker.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { PassThrough, Writable } from 'node:stream';
import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runChat } from '../../src/cli/chat.js';
import { SessionClient } from '../../src/client/session-client.js';
import { startFakeModelServer, type FakeModelServer } from '../../src/model/fake-server.js';
import { openStore } from '../../src/persistence/open.js';
import type { SessionStore } from '../../src/persistence/store.js';
import { workflowBundle } from '../../src/worker.js';
import { eventually } from '../support/log-wait.js';
import { bundleScript } from '../support/spawn-ts.js';
import { TEST_TUNABLES, temporalAddress } from '../support/stack.js';

const ROOT = new URL('../..', import.meta.url).pathname;
const TURNS = 20;

let dir: string;
let fake: FakeModelServer;
let store: SessionStore;
let connection: Connection;
let client: SessionClient;
let worker: ChildProcess;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'sessionlog-chat-process-'));
  fake = await startFakeModelServer({});
  store = await openStore(`sqlite:${join(dir, 'sessions.db')}`);
  connection = await Connection.connect({ address: temporalAddress() });
  const taskQueue = `chat-process-${randomUUID()}`;
  client = new SessionClient({
    temporal: new Client({ connection, namespace: 'default' }),
    store,
    taskQueue,
    tunables: TEST_TUNABLES,
  });
  const bundlePath = join(dir, 'workflow-bundle.js');
  writeFileSync(bundlePath, (await workflowBundle()).code);
  const env = {
    ...process.env,
    TEMPORAL_ADDRESS: temporalAddress(),
    SESSIONLOG_STORE: `sqlite:${join(dir, 'sessions.db')}`,
    FAKE_MODEL_BASE_URL: fake.baseURL,
    SESSIONLOG_TASK_QUEUE: taskQueue,
    WORKFLOW_BUNDLE_PATH: bundlePath,
    CHILD_SIDE_EFFECT_FILE: join(dir, 'side-effects.txt'),
  };
  worker = spawn(process.execPath, [await bundleScript('test/support/worker-child.ts')], {
    cwd: ROOT,
    env,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await new Promise<void>((resolve, reject) => {
    createInterface({ input: worker.stdout! }).on('line', (line) => {
      if (line.includes('"event":"ready"')) resolve();
    });
    worker.once('exit', (code) => reject(new Error(`worker child exited (${code}) before it was ready`)));
  });
});

afterAll(async () => {
  if (worker && worker.exitCode === null && worker.signalCode === null) {
    const exited = new Promise((resolve) => worker.once('exit', resolve));
    worker.kill('SIGTERM');
    await exited;
  }
  await connection?.close();
  await fake?.close();
  await store?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

class CapturedOutput extends Writable {
  text = '';
  override _write(chunk: Buffer | string, _encoding: BufferEncoding, done: () => void): void {
    this.text += chunk.toString();
    done();
  }
}

describe('sessionlog chat with the worker in another process', () => {
  it(
    `shows each of ${TURNS} streamed replies whole, and an inline approval reaches the worker`,
    { timeout: 300_000 },
    async () => {
      const input = new PassThrough();
      const output = new CapturedOutput();
      const done = runChat(client, { sessionId: `chat-process-${randomUUID().slice(0, 8)}`, input, output });
      const prompts = () => output.text.split('you> ').length - 1;
      const waitForPrompt = (n: number) =>
        eventually(async () => Promise.resolve(prompts() >= n ? true : undefined), 120_000, 10);

      // Each reply streams in many small chunks, its last one appended with the turn's end.
      fake.configure({ tokenDelayMs: 2 });
      const expected: string[] = [];
      for (let turn = 1; turn <= TURNS; turn++) {
        const text = `reply ${turn}: ${Array.from({ length: 40 }, (_, i) => `w${turn}x${i}`).join(' ')} end-of-reply-${turn}`;
        expected.push(`bot> ${text}`);
        fake.enqueueReplies({ text });
        await waitForPrompt(turn);
        input.write(`message ${turn}\n`);
      }
      fake.enqueueReplies(
        { text: '', toolCalls: [{ id: 'chat-rec', name: 'record', arguments: { note: 'from chat' } }] },
        { text: 'recorded from chat' },
      );
      await waitForPrompt(TURNS + 1);
      input.write('record something\n');
      await eventually(
        async () =>
          Promise.resolve(/approve record\(\{"note":"from chat"\}\)\?.*: $/.test(output.text) ? true : undefined),
        120_000,
        10,
      );
      input.write('y\n');
      await waitForPrompt(TURNS + 2);
      input.write('/quit\n');
      await done;

      const lines = output.text.split('\n').map((l) => l.replace(/^(you> )+/, ''));
      for (const line of expected) expect(lines, output.text).toContain(line);
      expect(lines).toContain('bot> recorded from chat');
      expect(output.text).toContain('approved');
      // The worker process ran the approved tool once.
      expect(readFileSync(join(dir, 'side-effects.txt'), 'utf8')).toBe('chat-rec from chat\n');
    },
  );
});
