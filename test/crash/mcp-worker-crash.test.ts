/**
 * A worker SIGKILLed in the middle of an MCP tool call (DESIGN §5.4, issue 51): the worker runs as
 * a child process (test/support/worker-child.ts) with a Streamable HTTP MCP server (built with the
 * SDK in this process, so it outlives the kill and counts each call it receives) as its tool
 * source. A new worker process takes the step over; the call's result is logged exactly once, and
 * the call reaches the server a second time only when the tool says it is idempotent: a tool that
 * does not is answered with a TOOL_NOT_RETRIED error result, since the first call may have taken
 * effect.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SessionClient } from '../../src/client/session-client.js';
import { startFakeModelServer, type FakeModelServer } from '../../src/model/fake-server.js';
import { openStore } from '../../src/persistence/open.js';
import type { SessionStore } from '../../src/persistence/store.js';
import { isEventOfType, type KnownEventType, type SessionEvent, type StoredEvent } from '../../src/session/index.js';
import { workflowBundle } from '../../src/worker.js';
import { eventually, waitForEvent } from '../support/log-wait.js';
import { startTestMcpServer, type TestMcpServer } from '../support/mcp-http-server.js';
import { bundleScript } from '../support/spawn-ts.js';
import { TEST_TUNABLES, temporalAddress } from '../support/stack.js';

const ROOT = new URL('../..', import.meta.url).pathname;

/** A worker child process and its readiness. */
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

const ofType = <K extends KnownEventType>(events: readonly StoredEvent[], type: K): Array<SessionEvent<K>> =>
  events.flatMap((e) => (isEventOfType(e, type) ? [e] : []));

let dir: string;
let fake: FakeModelServer;
let mcp: TestMcpServer;
let store: SessionStore;
let connection: Connection;
let client: SessionClient;
let childEnv: Record<string, string>;
let childFile: string;
const workers: WorkerProcess[] = [];
const taskQueue = `mcp-crash-${randomUUID()}`;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'sessionlog-mcp-crash-'));
  fake = await startFakeModelServer({});
  mcp = await startTestMcpServer({ slowMs: 4000 });
  store = await openStore(`sqlite:${join(dir, 'sessions.db')}`, { pollIntervalMs: 20 });
  connection = await Connection.connect({ address: temporalAddress() });
  client = new SessionClient({
    temporal: new Client({ connection, namespace: 'default' }),
    store,
    taskQueue,
    tunables: { ...TEST_TUNABLES, toolMaxAttempts: 5 },
  });
  const bundlePath = join(dir, 'workflow-bundle.js');
  writeFileSync(bundlePath, (await workflowBundle()).code);
  childFile = await bundleScript('test/support/worker-child.ts');
  childEnv = {
    TEMPORAL_ADDRESS: temporalAddress(),
    SESSIONLOG_STORE: `sqlite:${join(dir, 'sessions.db')}`,
    FAKE_MODEL_BASE_URL: fake.baseURL,
    SESSIONLOG_TASK_QUEUE: taskQueue,
    WORKFLOW_BUNDLE_PATH: bundlePath,
    CHILD_MCP_SERVERS: JSON.stringify([{ name: 'web', url: mcp.url }]),
  };
}, 120_000);

afterAll(async () => {
  for (const worker of workers) await worker.stop();
  await connection?.close();
  await fake?.close();
  await mcp?.close();
  await store?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

async function startWorker(): Promise<WorkerProcess> {
  const worker = new WorkerProcess(childFile, childEnv);
  workers.push(worker);
  await worker.ready;
  return worker;
}

/**
 * Runs a turn that calls `tool` of the MCP server, kills the worker once the server has the call,
 * lets a new worker finish the turn, and returns the turn's tool/results and the server's count.
 */
async function killDuringCall(tool: 'slow_once' | 'slow_idempotent') {
  const id = `mcp-crash-${tool}-${randomUUID().slice(0, 8)}`;
  const callId = `call-${tool}`;
  const first = await startWorker();
  fake.enqueueReplies(
    { text: 'Calling.', toolCalls: [{ id: callId, name: `web__${tool}`, arguments: { note: 'launch' } }] },
    { text: 'after the crash' },
  );
  await client.start({ sessionId: id });
  const runsBefore = mcp.runs.get(tool) ?? 0;
  await client.post(id, `call ${tool}`);
  await waitForEvent(client, id, (e) => e.type === 'tool/call');
  // The server counts the call as it arrives: the worker dies with the call in flight.
  await eventually(async () => ((mcp.runs.get(tool) ?? 0) > runsBefore ? true : undefined), 30_000, 20);
  await first.kill();
  await startWorker();
  await waitForEvent(client, id, (e) => e.type === 'turn/end', 120_000);
  const events = await client.events(id);
  const results = ofType(events, 'tool/result').filter((e) => e.data.message.content[0].toolCallId === callId);
  return { events, results, runs: (mcp.runs.get(tool) ?? 0) - runsBefore };
}

describe('a worker SIGKILLed during an MCP tool call', () => {
  it(
    'does not call a tool that is not idempotent again: one TOOL_NOT_RETRIED error result is logged, and the server got the call once',
    { timeout: 300_000 },
    async () => {
      const { results, runs, events } = await killDuringCall('slow_once');
      expect(results).toHaveLength(1);
      expect(results[0]!.data.message.content[0].isError).toBe(true);
      expect(results[0]!.data.error).toMatchObject({ code: 'TOOL_NOT_RETRIED' });
      expect(JSON.stringify(results[0]!.data.message)).toContain('may or may not have taken effect');
      expect(runs).toBe(1);
      expect(ofType(events, 'turn/end').map((e) => e.data.reason.kind)).toEqual(['completed']);
      await Promise.all(workers.map((w) => w.stop()));
    },
  );

  it('calls an idempotent tool again on the new worker, and logs its one result', { timeout: 300_000 }, async () => {
    const { results, runs, events } = await killDuringCall('slow_idempotent');
    expect(results).toHaveLength(1);
    expect(results[0]!.data.message.content[0].isError).toBeUndefined();
    expect(JSON.stringify(results[0]!.data.message)).toContain('slow_idempotent done: launch');
    expect(runs).toBe(2);
    expect(ofType(events, 'turn/end').map((e) => e.data.reason.kind)).toEqual(['completed']);
    await Promise.all(workers.map((w) => w.stop()));
  });
});
