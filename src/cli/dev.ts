/**
 * `sessionlog dev`: the local Temporal dev server (file-backed, so sessions survive a restart),
 * a worker, the offline or configured model, and the HTTP gateway, in one process tree with
 * data under ./.sessionlog/ (or $SESSIONLOG_HOME). Ctrl-C, SIGTERM and SIGHUP (the terminal closed) stop every child
 * cleanly, also while it is still starting: the dev server runs in its own session (so a key
 * press in the terminal does not reach it) and would otherwise outlive us on port 7233.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { NativeConnection } from '@temporalio/worker';
import { openConfiguredStore, startModel } from '../compose.js';
import type { Config } from '../config.js';
import { installProcessFaultPolicy } from './fault-policy.js';
import { startGateway, type RunningGateway } from '../gateway/index.js';
import { createWorker } from '../worker.js';
import {
  absoluteStore,
  connectClient,
  devHome,
  packageRoot,
  readDevState,
  runtimeOptions,
  writeDevState,
} from './runtime.js';

type TemporalServer = { address: string; uiUrl: string | undefined };

const TEMPORAL_SCRIPT = (): string => join(packageRoot(), 'scripts', 'temporal-dev-server');
const temporalStateDir = (home: string): string => join(home, 'temporal');

/**
 * The lines of scripts/temporal-dev-server's stderr worth showing while dev starts: those saying
 * the `temporal` binary is being obtained (built with Go, or downloaded), which can take
 * minutes, and happens only when no usable binary is found. Its other notes stay quiet (and end
 * up in the error message when the start fails).
 */
export function binaryNotes(stderr: string): string[] {
  return stderr
    .split('\n')
    .filter((line) =>
      /^temporal-dev-server: (building |waiting for the build lock|trying the TypeScript SDK's download)/.test(line),
    )
    .map((line) => line.slice('temporal-dev-server: '.length));
}

/**
 * Runs scripts/temporal-dev-server with `args`; resolves with its stdout, or rejects with an
 * error carrying its stderr. `onNote` gets each {@link binaryNotes} line as it is printed.
 */
function runScript(args: string[], onNote: (line: string) => void = () => undefined): Promise<string> {
  return new Promise((resolveRun, reject) => {
    const child = spawn(TEMPORAL_SCRIPT(), args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    let pending = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => {
      const text = chunk.toString('utf8');
      stderr += text;
      const lines = (pending + text).split('\n');
      pending = lines.pop()!;
      for (const note of binaryNotes(lines.join('\n'))) onNote(note);
    });
    child.once('error', reject);
    child.once('close', (code) => {
      if (code === 0) resolveRun(stdout);
      else
        reject(
          Object.assign(new Error(`scripts/temporal-dev-server ${args[0]} exited with ${code}`), { stdout, stderr }),
        );
    });
  });
}

/** Stops the dev server recorded in HOME/temporal (a no-op when none runs there). */
async function stopTemporal(home: string): Promise<void> {
  await runScript(['stop', '--state-dir', temporalStateDir(home)]);
}

/** Starts (or reuses) the file-backed dev server in HOME/temporal via scripts/temporal-dev-server. */
async function startTemporal(
  home: string,
  preferredPort: number,
  log: (line: string) => void,
): Promise<TemporalServer> {
  const stateDir = temporalStateDir(home);
  mkdirSync(stateDir, { recursive: true, mode: 0o700 });
  const base = ['--state-dir', stateDir, '--db-filename', join(stateDir, 'temporal.db'), '--ui'];
  const start = (port: string) => runScript(['start', '--port', port, ...base], (note) => log(`Temporal: ${note}`));
  let out: string;
  try {
    out = await start(String(preferredPort));
  } catch (error) {
    const stderr = String((error as { stderr?: string }).stderr ?? '');
    if (preferredPort === 0 || !stderr.includes('already answers'))
      throw new Error(`could not start the Temporal dev server:\n${stderr.trim()}`, { cause: error });
    log(`port ${preferredPort} is taken by another Temporal server; using a free port`);
    out = await start('0');
  }
  const address = /TEMPORAL_ADDRESS=(\S+)/.exec(out)?.[1];
  if (!address) throw new Error(`scripts/temporal-dev-server printed no address:\n${out}`);
  const port = Number(address.split(':').pop());
  return { address, uiUrl: Number.isFinite(port) ? `http://127.0.0.1:${port + 1000}` : undefined };
}

/** dev's fault policy, installed once telemetry is up (startStack) and removed last. */
type FaultPolicyHolder = { stopping: boolean; remove: () => void };

/** The signals that stop `dev`: Ctrl-C, a service manager, and a closed terminal. */
const STOP_SIGNALS: readonly NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP'];

/**
 * Runs the dev stack until a stop signal. `home` is its data folder (default ./.sessionlog, or
 * SESSIONLOG_HOME): the Temporal dev server's state, and dev.json while it runs.
 */
export async function runDev(
  config: Config,
  log: (line: string) => void = (line) => process.stdout.write(`${line}\n`),
  home: string = devHome(),
): Promise<void> {
  const running = readDevState(home);
  if (running)
    throw new Error(
      `sessionlog dev is already running with data in ${home} (pid ${running.pid}, gateway ${running.gatewayUrl}); stop it first`,
    );
  mkdirSync(home, { recursive: true, mode: 0o700 });

  // Listen before starting anything, so a signal during start-up stops what already started.
  const stop = new AbortController();
  let terminalGone = false;
  const onSignal = (signal: NodeJS.Signals): void => {
    if (signal === 'SIGHUP' && !terminalGone) {
      terminalGone = true;
      // The terminal is gone: a write to it fails (EIO, EPIPE), and neither that nor the
      // CLI's exit-on-EPIPE may cut the clean-up short.
      for (const stream of [process.stdout, process.stderr]) {
        stream.removeAllListeners('error');
        stream.on('error', () => undefined);
      }
    }
    stop.abort();
  };
  for (const signal of STOP_SIGNALS) process.on(signal, onSignal);
  const say = (line: string): void => {
    // After SIGHUP no one reads the terminal, and writing to it may fail.
    if (!terminalGone) log(line);
  };

  const cleanups: Array<() => Promise<void>> = [];
  // The fault policy stays until everything else has stopped: a fault while stopping (a closed
  // Temporal client's retry timer) is then logged, and the rest (the dev server) still stops.
  const faults: FaultPolicyHolder = { stopping: false, remove: () => undefined };
  cleanups.push(async () => faults.remove());
  const stopAll = async () => {
    faults.stopping = true;
    while (cleanups.length > 0) {
      const cleanup = cleanups.pop()!;
      await cleanup().catch((error: unknown) => say(`while stopping: ${(error as Error).message}`));
    }
    rmSync(join(home, 'dev.json'), { force: true });
  };
  try {
    let address = config.temporalAddress;
    let uiUrl: string | undefined;
    if (address) {
      say(`Temporal: using ${address} (TEMPORAL_ADDRESS)`);
    } else {
      say('Temporal: starting the local dev server…');
      // Registered before the start, which may be cut short after the server was launched.
      cleanups.push(() => stopTemporal(home));
      const temporal = await startTemporal(home, config.devTemporalPort, say);
      address = temporal.address;
      uiUrl = temporal.uiUrl;
    }
    if (!stop.signal.aborted)
      await startStack(config, address, uiUrl, {
        home,
        say,
        cleanups,
        faults,
        stop: stop.signal,
        requestStop: () => stop.abort(),
      });
    say('Stopping…');
  } finally {
    try {
      await stopAll();
    } finally {
      for (const signal of STOP_SIGNALS) process.off(signal, onSignal);
    }
  }
  say('Stopped.');
}

/** Store, model, worker and gateway on `address`; returns when `stop` aborts or the worker fails. */
async function startStack(
  config: Config,
  address: string,
  uiUrl: string | undefined,
  {
    home,
    say,
    cleanups,
    faults,
    stop,
    requestStop,
  }: {
    home: string;
    say: (line: string) => void;
    cleanups: Array<() => Promise<void>>;
    faults: FaultPolicyHolder;
    stop: AbortSignal;
    requestStop: () => void;
  },
): Promise<void> {
  const store = await openConfiguredStore(config);
  cleanups.push(() => store.close());
  const model = await startModel(config);
  if (model.offline) cleanups.push(() => model.offline!.close());
  say(`Model: ${model.description}`);
  if (stop.aborted) return;

  const options = runtimeOptions(config);
  // One telemetry for the whole dev process: the gateway's /metrics shows the worker's metrics too.
  const telemetry = await options.telemetry('dev');
  // A fault outside any request stops dev the clean way (every child stopped), with status 70.
  faults.remove = installProcessFaultPolicy(
    telemetry,
    (status) => {
      process.exitCode = status;
      requestStop();
    },
    () => faults.stopping,
  );
  cleanups.push(() => telemetry.shutdown());
  await telemetry.installTemporalRuntime();
  const connection = await NativeConnection.connect({ address });
  cleanups.push(() => connection.close());
  const worker = await createWorker(options.worker({ connection, store, model: model.model, telemetry }));
  if (stop.aborted) return;
  const workerRun = worker.run();
  cleanups.push(async () => {
    // The SDK's runtime may already be shutting the worker down on SIGINT/SIGTERM itself.
    if (worker.getState() === 'RUNNING') worker.shutdown();
    await workerRun;
  });

  const client = await connectClient({ ...config, temporalAddress: address }, store, { telemetry });
  cleanups.push(() => client.temporal.connection.close());
  let gateway: RunningGateway;
  const gatewayOptions = options.gateway(client, telemetry);
  try {
    gateway = await startGateway({ ...gatewayOptions, port: config.gateway.port });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw error;
    say(`port ${config.gateway.port} is taken; the gateway uses a free port`);
    gateway = await startGateway({ ...gatewayOptions, port: 0 });
  }
  cleanups.push(() => gateway.close());
  writeDevState(home, {
    pid: process.pid,
    temporalAddress: address,
    gatewayUrl: gateway.url,
    // Absolute, so a command run from another folder opens this same store.
    store: absoluteStore(config.store),
    startedAt: Date.now(),
  });

  say(`Gateway: ${gateway.url}/v1 (OpenAPI at ${gateway.url}/v1/openapi.json)`);
  say(`OpenAI API: ${gateway.url}/openai/v1 (point the openai SDK's baseURL here)`);
  say(`Inspector: ${gateway.url}/ui/`);
  say(`Metrics: ${gateway.url}/metrics${telemetry.tracing ? `; traces to ${config.telemetry.otlpEndpoint}` : ''}`);
  if (uiUrl) say(`Temporal UI: ${uiUrl}`);
  say(`Store: ${config.store}`);
  say('Ready. Chat in another terminal: npx sessionlog chat');
  say(
    `   or over HTTP: curl -X POST ${gateway.url}/v1/sessions -H 'content-type: application/json' -d '{"id":"http-demo"}'`,
  );
  say(
    `                 curl -X POST '${gateway.url}/v1/sessions/http-demo/messages?wait=true' -H 'content-type: application/json' -d '{"text":"hello"}'`,
  );
  say('Press Ctrl-C to stop.');

  await new Promise<void>((resolveStop) => {
    if (stop.aborted) resolveStop();
    stop.addEventListener('abort', () => resolveStop(), { once: true });
    workerRun.catch((error: unknown) => {
      say(`worker stopped: ${(error as Error).message}`);
      resolveStop();
    });
  });
}
