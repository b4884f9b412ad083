/**
 * The fleet of test/fleet/topology.ts as real processes on this machine, for the fleet test and
 * bench/fleet.ts (which also runs the same processes on the CLI's dev server and SQLite): the full Temporal server on a private PostgreSQL (scripts/temporal-server),
 * sessionlog's store on a second private PostgreSQL (scripts/postgres-cluster, so it can be
 * killed with -9), `sessionlog worker` and `sessionlog serve` child processes started exactly
 * as an operator would (bin/sessionlog.mjs, environment from the topology), and the means to
 * break them: SIGKILL and restart a worker or a gateway, restart Temporal, kill -9 the store.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { appendFileSync, chmodSync, mkdirSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { gatewayCommand, gatewayEnvironment, workerEnvironment, type FleetEndpoints } from './topology.js';

const run = promisify(execFile);

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const BIN = join(ROOT, 'bin/sessionlog.mjs');

/** The first build of the Temporal server takes about 6 minutes; a busy machine, more. */
const BUILD_TIMEOUT_MS = 30 * 60_000;
const SCRIPT_TIMEOUT_MS = 5 * 60_000;

/** Runs scripts/<name>; returns its stdout, or throws with its stderr. */
export async function runScript(name: string, args: string[], timeoutMs = SCRIPT_TIMEOUT_MS): Promise<string> {
  try {
    return (await run(join(ROOT, 'scripts', name), args, { cwd: ROOT, timeout: timeoutMs, maxBuffer: 16 << 20 }))
      .stdout;
  } catch (error) {
    const { stderr, stdout } = error as { stderr?: string; stdout?: string };
    throw new Error(
      `scripts/${name} ${args.join(' ')} failed: ${(error as Error).message}\n${stderr ?? ''}${stdout ?? ''}`,
      { cause: error },
    );
  }
}

function lineValue(out: string, name: string): string {
  const value = new RegExp(`^${name}=(.+)$`, 'm').exec(out)?.[1];
  if (!value) throw new Error(`no ${name}= line in:\n${out}`);
  return value;
}

/** Builds the Temporal server and its SQL tool if they are not in the per-user cache yet. */
export async function ensureTemporalServerBuilt(): Promise<void> {
  await runScript('temporal-server', ['ensure'], BUILD_TIMEOUT_MS);
}

/** A free TCP port on loopback (closed again, so the caller can bind it). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/**
 * As root, the clusters run as the `postgres` user, which must pass through `dir` (a mkdtemp
 * folder is 0700): allow traversal, not listing.
 */
export function allowPostgresThrough(dir: string): void {
  if (process.getuid?.() === 0) chmodSync(dir, 0o711);
}

/** A private PostgreSQL cluster (scripts/postgres-cluster) in `dir`. */
export class PostgresCluster {
  private constructor(
    readonly dir: string,
    /** `postgres://postgres@127.0.0.1:PORT/postgres` */
    readonly url: string,
  ) {}

  static async start(dir: string): Promise<PostgresCluster> {
    mkdirSync(dir, { recursive: true });
    const out = await runScript('postgres-cluster', ['start', '--dir', dir]);
    return new PostgresCluster(dir, lineValue(out, 'POSTGRES_URL'));
  }

  /** kill -9 of the postmaster. */
  async kill(): Promise<void> {
    await runScript('postgres-cluster', ['kill', '--dir', this.dir]);
  }

  /** Starts it again on the same port (retrying while a killed postmaster's backends linger). */
  async start(): Promise<void> {
    await runScript('postgres-cluster', ['start', '--dir', this.dir]);
  }

  async destroy(): Promise<void> {
    await runScript('postgres-cluster', ['destroy', '--dir', this.dir]);
  }
}

/** A running Temporal frontend the fleet uses. */
export interface TemporalService {
  readonly address: string;
  restart(): Promise<void>;
  stop(): Promise<void>;
}

/** The full Temporal server (scripts/temporal-server) with its own private PostgreSQL, state in `stateDir`. */
export class TemporalServer implements TemporalService {
  private constructor(
    readonly stateDir: string,
    readonly address: string,
  ) {}

  static async start(stateDir: string): Promise<TemporalServer> {
    mkdirSync(stateDir, { recursive: true });
    const out = await runScript('temporal-server', ['start', '--state-dir', stateDir]);
    return new TemporalServer(stateDir, lineValue(out, 'TEMPORAL_ADDRESS'));
  }

  /** Stops the server and starts it again on the same ports and database. */
  async restart(): Promise<void> {
    await runScript('temporal-server', ['restart', '--state-dir', this.stateDir]);
  }

  /** Stops the server and its private PostgreSQL. */
  async stop(): Promise<void> {
    await runScript('temporal-server', ['stop', '--state-dir', this.stateDir]);
  }
}

/** The Temporal CLI's dev server (scripts/temporal-dev-server, in-memory SQLite), for comparison runs. */
export class DevTemporalServer implements TemporalService {
  private constructor(
    readonly stateDir: string,
    readonly address: string,
  ) {}

  static async start(stateDir: string): Promise<DevTemporalServer> {
    mkdirSync(stateDir, { recursive: true });
    const out = await runScript('temporal-dev-server', ['start', '--port', '0', '--state-dir', stateDir]);
    return new DevTemporalServer(stateDir, lineValue(out, 'TEMPORAL_ADDRESS'));
  }

  restart(): Promise<void> {
    return Promise.reject(
      new Error('the in-memory dev server loses every workflow on a restart; restart the full server instead'),
    );
  }

  async stop(): Promise<void> {
    await runScript('temporal-dev-server', ['stop', '--state-dir', this.stateDir]);
  }
}

export type ProcessExit = { code: number | null; signal: NodeJS.Signals | null };

/** One `sessionlog worker` or `sessionlog serve` process. */
export class FleetProcess {
  readonly child: ChildProcess;
  readonly lines: string[] = [];
  readonly exited: Promise<ProcessExit>;
  /** Set when the test killed it on purpose. */
  killedOnPurpose = false;

  constructor(
    readonly name: string,
    args: string[],
    env: Record<string, string>,
    private readonly logFile: string,
  ) {
    const base: NodeJS.ProcessEnv = {};
    // Nothing of the test's own environment that configures sessionlog, Temporal or a model leaks in.
    for (const [key, value] of Object.entries(process.env))
      if (!/^(SESSIONLOG_|TEMPORAL_|OPENAI_|DEEPSEEK_)/.test(key)) base[key] = value;
    this.child = spawn(process.execPath, [BIN, ...args], {
      cwd: ROOT,
      env: { ...base, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    appendFileSync(
      this.logFile,
      `--- ${new Date().toISOString()} ${name}: sessionlog ${args.join(' ')} (pid ${this.child.pid})\n`,
    );
    for (const stream of [this.child.stdout!, this.child.stderr!]) {
      createInterface({ input: stream }).on('line', (line) => {
        this.lines.push(line);
        appendFileSync(this.logFile, `${line}\n`);
      });
    }
    this.exited = new Promise((resolve) => this.child.once('exit', (code, signal) => resolve({ code, signal })));
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Resolves with the first line matching `pattern` (bounded; rejects if the process exits first). */
  async waitForLine(pattern: RegExp, timeoutMs: number): Promise<string> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const line = this.lines.find((l) => pattern.test(l));
      if (line !== undefined) return line;
      if (!this.running)
        throw new Error(
          `${this.name} exited (${this.child.exitCode ?? this.child.signalCode}) before printing ${pattern}; see ${this.logFile}`,
        );
      if (Date.now() > deadline)
        throw new Error(`${this.name} did not print ${pattern} within ${timeoutMs} ms; see ${this.logFile}`);
      await sleep(50);
    }
  }

  async kill(signal: NodeJS.Signals): Promise<ProcessExit> {
    this.killedOnPurpose = true;
    if (this.running) this.child.kill(signal);
    return this.exited;
  }
}

/**
 * Polls `url` until it answers 200 (bounded). With `owner`, a process that exits meanwhile fails
 * the wait at once, with its exit status and last lines (its log file has the rest).
 */
export async function waitReady(url: string, timeoutMs: number, owner?: FleetProcess): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  for (;;) {
    if (owner && !owner.running)
      throw new Error(
        `${owner.name} exited (${owner.child.exitCode ?? owner.child.signalCode}) while ${url} was awaited; its last lines:\n${owner.lines.slice(-25).join('\n')}`,
      );
    try {
      const response = await fetch(url, { signal: AbortSignal.timeout(5_000) });
      if (response.ok) return;
      last = `${response.status} ${await response.text()}`;
    } catch (error) {
      last = (error as Error).message;
    }
    if (Date.now() > deadline)
      throw new Error(
        `${url} not ready within ${timeoutMs} ms: ${last}${owner ? `; ${owner.name}'s last lines:\n${owner.lines.slice(-25).join('\n')}` : ''}`,
      );
    await sleep(200);
  }
}

export type FleetOptions = {
  /** Where the clusters, the server's state and the process logs go. */
  dir: string;
  /**
   * `full` (default): the production topology, the full Temporal server and the store on
   * PostgreSQL. `dev`: the same processes on the CLI's dev server and one SQLite file.
   */
  backend?: 'full' | 'dev';
  workers: number;
  gateways: number;
  /** The shared model's OpenAI-compatible base URL (…/v1). */
  modelBaseUrl: string;
  /** Bearer token of the gateways. */
  token: string;
  /** Workflow tunables of the sessions the gateways start. */
  modelHeartbeatMs: number;
  modelMaxAttempts: number;
  shutdownGraceMs?: number;
  /** Task queue (default `sessionlog`). */
  taskQueue?: string;
};

/** The whole topology, started; see the file comment. */
export class Fleet {
  readonly workers: FleetProcess[] = [];
  readonly gateways: FleetProcess[] = [];
  /** Every process ever started (killed ones included), for the final checks. */
  readonly history: FleetProcess[] = [];
  /** Each gateway slot keeps its port across restarts, so clients find it again. */
  readonly gatewayPorts: number[] = [];
  private started = 0;

  private constructor(
    readonly options: FleetOptions,
    readonly temporal: TemporalService,
    /** The store's PostgreSQL (absent on the `dev` backend, whose store is a SQLite file). */
    readonly storeDatabase: PostgresCluster | undefined,
    readonly endpoints: FleetEndpoints,
  ) {}

  static async start(options: FleetOptions): Promise<Fleet> {
    mkdirSync(join(options.dir, 'logs'), { recursive: true });
    allowPostgresThrough(options.dir);
    let temporal: TemporalService;
    let storeDatabase: PostgresCluster | undefined;
    let storeUrl: string;
    if (options.backend === 'dev') {
      temporal = await DevTemporalServer.start(join(options.dir, 'temporal-dev'));
      mkdirSync(join(options.dir, 'store'), { recursive: true });
      storeUrl = `sqlite:${join(options.dir, 'store', 'sessions.db')}`;
    } else {
      await ensureTemporalServerBuilt();
      const [server, cluster] = await Promise.allSettled([
        TemporalServer.start(join(options.dir, 'temporal')),
        PostgresCluster.start(join(options.dir, 'store-postgres')),
      ]);
      if (server.status === 'rejected' || cluster.status === 'rejected') {
        // Stop whichever did start before failing.
        if (server.status === 'fulfilled') await server.value.stop();
        if (cluster.status === 'fulfilled') await cluster.value.destroy();
        throw server.status === 'rejected' ? server.reason : (cluster as PromiseRejectedResult).reason;
      }
      [temporal, storeDatabase] = [server.value, cluster.value];
      storeUrl = `${storeDatabase.url}?schema=sessionlog`;
    }
    const endpoints: FleetEndpoints = {
      temporalAddress: temporal.address,
      namespace: 'default',
      taskQueue: options.taskQueue ?? 'sessionlog',
      storeUrl,
      modelBaseUrl: options.modelBaseUrl,
      model: 'fake',
    };
    const fleet = new Fleet(options, temporal, storeDatabase, endpoints);
    try {
      for (let i = 0; i < options.gateways; i++) fleet.gatewayPorts.push(await freePort());
      // One worker first: it creates the store's schema (the others would only wait on its lock).
      fleet.workers.push(fleet.spawnWorker(0));
      await fleet.workerReady(fleet.workers[0]!);
      for (let i = 1; i < options.workers; i++) fleet.workers.push(fleet.spawnWorker(i));
      for (let i = 0; i < options.gateways; i++) fleet.gateways.push(fleet.spawnGateway(i));
      await Promise.all([
        ...fleet.workers.slice(1).map((w) => fleet.workerReady(w)),
        ...fleet.gateways.map((g, i) => fleet.gatewayReady(g, i)),
      ]);
    } catch (error) {
      await fleet.forceStop();
      throw error;
    }
    return fleet;
  }

  gatewayUrl(slot: number): string {
    return `http://127.0.0.1:${this.gatewayPorts[slot]}`;
  }

  logFile(): string {
    return join(this.options.dir, 'logs', 'fleet.log');
  }

  private spawnWorker(slot: number): FleetProcess {
    const env = workerEnvironment(this.endpoints, {
      opsPort: 0,
      shutdownGraceMs: this.options.shutdownGraceMs ?? 10_000,
    });
    const proc = new FleetProcess(
      `worker-${slot}#${++this.started}`,
      ['worker'],
      env,
      join(this.options.dir, 'logs', `worker-${slot}.log`),
    );
    this.history.push(proc);
    return proc;
  }

  private spawnGateway(slot: number): FleetProcess {
    const env = gatewayEnvironment(this.endpoints, {
      token: this.options.token,
      modelHeartbeatMs: this.options.modelHeartbeatMs,
      modelMaxAttempts: this.options.modelMaxAttempts,
    });
    const proc = new FleetProcess(
      `gateway-${slot}#${++this.started}`,
      gatewayCommand('127.0.0.1', this.gatewayPorts[slot]!),
      env,
      join(this.options.dir, 'logs', `gateway-${slot}.log`),
    );
    this.history.push(proc);
    return proc;
  }

  /** Waits until the worker's operations listener says ready; returns its URL. */
  async workerReady(worker: FleetProcess, timeoutMs = 180_000): Promise<string> {
    const line = await worker.waitForLine(/ operations: http:\/\/\S+\/healthz/, timeoutMs);
    const url = / operations: (http:\/\/\S+)\/healthz/.exec(line)![1]!;
    await waitReady(`${url}/readyz`, timeoutMs, worker);
    return url;
  }

  async gatewayReady(gateway: FleetProcess, slot: number, timeoutMs = 180_000): Promise<void> {
    await gateway.waitForLine(/ gateway: http:/, timeoutMs);
    await waitReady(`${this.gatewayUrl(slot)}/readyz`, timeoutMs, gateway);
  }

  /** SIGKILLs the worker in `slot` and starts a replacement at once (not waiting for it). */
  async killWorker(slot: number): Promise<FleetProcess> {
    await this.workers[slot]!.kill('SIGKILL');
    const replacement = this.spawnWorker(slot);
    this.workers[slot] = replacement;
    return replacement;
  }

  /** SIGKILLs the gateway in `slot`; `restartGateway` brings it back on the same port. */
  async killGateway(slot: number): Promise<void> {
    await this.gateways[slot]!.kill('SIGKILL');
  }

  async restartGateway(slot: number): Promise<void> {
    this.gateways[slot] = this.spawnGateway(slot);
    await this.gatewayReady(this.gateways[slot]!, slot);
  }

  /** SIGTERMs every worker and gateway (a drain), waits for them, then stops the servers. */
  async stop(): Promise<{ exits: Array<{ name: string; exit: ProcessExit }> }> {
    const live = [...this.workers, ...this.gateways].filter((p) => p.running);
    const exits = await Promise.all(live.map(async (p) => ({ name: p.name, exit: await p.kill('SIGTERM') })));
    await this.stopServers();
    return { exits };
  }

  /** Last resort for a failed run: SIGKILL whatever is left. */
  async forceStop(): Promise<void> {
    for (const p of this.history) if (p.running) p.child.kill('SIGKILL');
    await this.stopServers();
  }

  private async stopServers(): Promise<void> {
    // Best effort: a failure to stop one must not keep the other running; each script says why on stderr.
    await this.temporal
      .stop()
      .catch((error: unknown) => appendFileSync(this.logFile(), `temporal stop: ${(error as Error).message}\n`));
    await this.storeDatabase
      ?.destroy()
      .catch((error: unknown) =>
        appendFileSync(this.logFile(), `store cluster destroy: ${(error as Error).message}\n`),
      );
  }
}
