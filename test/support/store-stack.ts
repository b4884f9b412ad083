/**
 * A sessionlog stack over a store named by URL that can be stopped and started again on the same
 * store and task queue, so a test can damage stored sessions "while no worker ran" and then talk
 * to the same workflows again: through the SessionClient, the HTTP gateway and the CLI (a child
 * process of `bin/sessionlog.mjs` against the same Temporal server, store and task queue).
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startGateway, type RunningGateway } from '../../src/gateway/index.js';
import { openStore } from '../../src/persistence/open.js';
import type { StoreOptions } from '../../src/persistence/store.js';
import { request, type JsonResponse } from '../gateway/http.js';
import { startStack, temporalAddress, type Stack, type StackOptions } from './stack.js';

const ROOT = new URL('../..', import.meta.url).pathname;
const BIN = join(ROOT, 'bin/sessionlog.mjs');

export type CliResult = { code: number | null; stdout: string; stderr: string };

export class StoreStack {
  readonly taskQueue = `test-${randomUUID()}`;
  private running: { stack: Stack; gateway: RunningGateway } | undefined;
  private readonly cwd = mkdtempSync(join(tmpdir(), 'sessionlog-cli-cwd-'));

  constructor(
    readonly url: string,
    private readonly options: Omit<StackOptions, 'store' | 'taskQueue'> & { store?: StoreOptions } = {},
  ) {}

  /** Opens the store and starts a worker, a client and a gateway on it. */
  async start(): Promise<void> {
    if (this.running) throw new Error('StoreStack: already started');
    const { store: storeOptions, ...stackOptions } = this.options;
    const store = await openStore(this.url, { pollIntervalMs: 20, ...storeOptions });
    const stack = await startStack({ ...stackOptions, store, taskQueue: this.taskQueue });
    const gateway = await startGateway({
      client: stack.client,
      host: '127.0.0.1',
      port: 0,
      bodyLimitBytes: 1024 * 1024,
    });
    this.running = { stack, gateway };
  }

  /** Stops the gateway and the worker and closes the store (the workflows stay in Temporal). */
  async stop(): Promise<void> {
    const running = this.running;
    this.running = undefined;
    if (!running) return;
    await running.gateway.close();
    await running.stack.close();
  }

  get stack(): Stack {
    if (!this.running) throw new Error('StoreStack: not started');
    return this.running.stack;
  }

  get client(): Stack['client'] {
    return this.stack.client;
  }

  /** One HTTP request to the gateway. */
  http(method: string, path: string, init?: Parameters<typeof request>[3]): Promise<JsonResponse> {
    if (!this.running) throw new Error('StoreStack: not started');
    return request(this.running.gateway.url, method, path, init);
  }

  /** Runs `sessionlog ARGS…` against this stack's Temporal server, store and task queue. */
  cli(args: readonly string[]): Promise<CliResult> {
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      TEMPORAL_ADDRESS: temporalAddress(),
      SESSIONLOG_STORE: this.url,
      SESSIONLOG_TASK_QUEUE: this.taskQueue,
    };
    for (const key of ['OPENAI_API_KEY', 'DEEPSEEK_API_KEY', 'OPENAI_BASE_URL']) delete env[key];
    return new Promise((resolve, reject) => {
      const child = spawn(process.execPath, [BIN, ...args], { cwd: this.cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      child.on('error', reject);
      child.on('close', (code) => resolve({ code, stdout, stderr }));
    });
  }
}
