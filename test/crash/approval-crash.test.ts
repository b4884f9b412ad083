/**
 * A turn waiting for approval survives its worker (DESIGN §5.1): the worker runs as a child
 * process and is killed with SIGKILL while the turn waits; a new worker process starts; the
 * approval arrives later over HTTP; the turn completes, and the tool (whose effect is a line
 * in a file, outside every worker process) ran exactly once.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SessionClient } from '../../src/client/session-client.js';
import { startGateway, type RunningGateway } from '../../src/gateway/index.js';
import { startFakeModelServer, type FakeModelServer } from '../../src/model/fake-server.js';
import { openStore } from '../../src/persistence/open.js';
import type { SessionStore } from '../../src/persistence/store.js';
import { isEventOfType, type SessionEvent } from '../../src/session/index.js';
import { workflowBundle } from '../../src/worker.js';
import { workflowIdFor } from '../../src/workflows/api.js';
import { request } from '../gateway/http.js';
import { eventually, waitForEvent } from '../support/log-wait.js';
import { bundleScript } from '../support/spawn-ts.js';
import { TEST_TUNABLES, temporalAddress } from '../support/stack.js';

const ROOT = new URL('../..', import.meta.url).pathname;

/** A worker child process (test/support/worker-child.ts) and the JSON lines it prints. */
class WorkerProcess {
  readonly proc: ChildProcess;
  readonly exited: Promise<void>;
  readonly ready: Promise<void>;
  private stderr = '';

  constructor(file: string, env: Record<string, string>) {
    this.proc = spawn(process.execPath, [file], {
      cwd: ROOT,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.exited = new Promise((resolve) => this.proc.once('exit', () => resolve()));
    this.proc.stderr!.on('data', (d: Buffer) => (this.stderr += d.toString()));
    this.ready = new Promise((resolve, reject) => {
      createInterface({ input: this.proc.stdout! }).on('line', (line) => {
        if (line.includes('"event":"ready"')) resolve();
      });
      void this.exited.then(() => reject(new Error(`worker child exited before it was ready:\n${this.stderr}`)));
    });
  }

  async kill(): Promise<void> {
    this.proc.kill('SIGKILL');
    await this.exited;
  }

  async stop(): Promise<void> {
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) return;
    this.proc.kill('SIGTERM');
    await this.exited;
  }
}

let dir: string;
let fake: FakeModelServer;
let store: SessionStore;
let connection: Connection;
let client: SessionClient;
let gateway: RunningGateway;
let childEnv: Record<string, string>;
let childFile: string;
const workers: WorkerProcess[] = [];
const taskQueue = `approval-crash-${randomUUID()}`;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'sessionlog-approval-crash-'));
  fake = await startFakeModelServer({});
  store = await openStore(`sqlite:${join(dir, 'sessions.db')}`, { pollIntervalMs: 20 });
  connection = await Connection.connect({ address: temporalAddress() });
  client = new SessionClient({
    temporal: new Client({ connection, namespace: 'default' }),
    store,
    taskQueue,
    tunables: TEST_TUNABLES,
  });
  gateway = await startGateway({ client, host: '127.0.0.1', port: 0, bodyLimitBytes: 64 * 1024 });
  const bundlePath = join(dir, 'workflow-bundle.js');
  writeFileSync(bundlePath, (await workflowBundle()).code);
  childFile = await bundleScript('test/support/worker-child.ts');
  childEnv = {
    TEMPORAL_ADDRESS: temporalAddress(),
    SESSIONLOG_STORE: `sqlite:${join(dir, 'sessions.db')}`,
    FAKE_MODEL_BASE_URL: fake.baseURL,
    SESSIONLOG_TASK_QUEUE: taskQueue,
    WORKFLOW_BUNDLE_PATH: bundlePath,
    CHILD_SIDE_EFFECT_FILE: join(dir, 'side-effects.txt'),
  };
});

afterAll(async () => {
  for (const worker of workers) await worker.stop();
  await gateway?.close();
  await connection?.close();
  await fake?.close();
  await store?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

async function startWorker(): Promise<WorkerProcess> {
  const worker = new WorkerProcess(childFile, childEnv);
  workers.push(worker);
  await worker.ready;
  return worker;
}

function sideEffects(): string[] {
  try {
    return readFileSync(childEnv.CHILD_SIDE_EFFECT_FILE!, 'utf8')
      .split('\n')
      .filter((l) => l.length > 0);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw error;
  }
}

describe('a turn waiting for approval when its worker is SIGKILLed', () => {
  it(
    'completes on a new worker once the approval arrives, and the tool ran exactly once',
    { timeout: 300_000 },
    async () => {
      const id = `approval-crash-${randomUUID().slice(0, 8)}`;
      const first = await startWorker();
      fake.enqueueReplies(
        { text: 'Recording.', toolCalls: [{ id: 'rec-1', name: 'record', arguments: { note: 'launch' } }] },
        { text: 'recorded it' },
      );
      await client.start({ sessionId: id });
      await client.post(id, 'record the launch');
      await waitForEvent(client, id, (e) => isEventOfType(e, 'tool/approval-request') && e.data.callId === 'rec-1');
      await eventually(async () => ((await client.status(id)).phase === 'waiting' ? true : undefined), 60_000, 50);

      await first.kill();
      expect(sideEffects()).toEqual([]);
      // The wait is in Temporal and the log, not in a worker: the request is still pending.
      expect((await client.pendingApprovals({ sessionId: id })).map((p) => p.callId)).toEqual(['rec-1']);

      await startWorker();
      const answered = await request(gateway.url, 'POST', `/v1/sessions/${id}/approvals/rec-1`, {
        json: { decision: 'approve', by: 'ops' },
      });
      expect(answered.status, JSON.stringify(answered.body)).toBe(200);
      expect(answered.body).toEqual({ callId: 'rec-1', decision: 'approve' });

      const end = (await waitForEvent(client, id, (e) => e.type === 'turn/end', 120_000)) as SessionEvent<'turn/end'>;
      expect(end.data.reason).toEqual({ kind: 'completed' });
      expect(sideEffects()).toEqual(['rec-1 launch']);

      const events = await client.events(id);
      expect(events.filter((e) => e.type === 'tool/approval')).toHaveLength(1);
      const results = events.filter((e): e is SessionEvent<'tool/result'> => e.type === 'tool/result');
      expect(results).toHaveLength(1);
      expect(results[0]!.data.message.content[0]).toMatchObject({
        toolCallId: 'rec-1',
        content: [{ type: 'text', text: 'recorded launch' }],
      });
      const requests = fake.chatRequests();
      expect(requests).toHaveLength(2);
      expect(requests[1]!.messages.find((m) => m.role === 'tool' && m.tool_call_id === 'rec-1')?.content).toBe(
        'recorded launch',
      );
      // One run of the workflow throughout: the wait was not repaired or restarted.
      expect(events.filter((e) => e.type === 'session/run')).toHaveLength(1);
      const { status } = await client.temporal.workflow.getHandle(workflowIdFor(id)).describe();
      expect(status.name).toBe('RUNNING');
    },
  );
});
