/**
 * `sessionlog dev`: the local Temporal dev server (file-backed, so sessions survive a restart),
 * a worker, the offline or configured model, and the HTTP gateway, in one process tree with
 * data under ./.sessionlog/. Ctrl-C stops every child cleanly.
 */
import { execFile } from 'node:child_process';
import { mkdirSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { NativeConnection } from '@temporalio/worker';
import type { Config } from '../config.js';
import { startGateway, type RunningGateway } from '../gateway/index.js';
import { createWorker } from '../worker.js';
import { DEV_DIR, connectClient, openConfiguredStore, packageRoot, readDevState, runtimeOptions, startModel, writeDevState } from './runtime.js';

const run = promisify(execFile);

type TemporalServer = { address: string; uiUrl: string | undefined; stop(): Promise<void> };

/** Starts (or reuses) the file-backed dev server in .sessionlog/temporal via scripts/temporal-dev-server. */
async function startTemporal(log: (line: string) => void): Promise<TemporalServer> {
  const script = join(packageRoot(), 'scripts', 'temporal-dev-server');
  const stateDir = resolve(DEV_DIR, 'temporal');
  mkdirSync(stateDir, { recursive: true, mode: 0o700 });
  const base = ['--state-dir', stateDir, '--db-filename', join(stateDir, 'temporal.db'), '--ui'];
  const start = async (port: string) => (await run(script, ['start', '--port', port, ...base], { maxBuffer: 1 << 20 })).stdout;
  let out: string;
  try {
    out = await start('7233');
  } catch (error) {
    const stderr = String((error as { stderr?: string }).stderr ?? '');
    if (!stderr.includes('already answers')) throw new Error(`could not start the Temporal dev server:\n${stderr.trim()}`, { cause: error });
    log('port 7233 is taken by another Temporal server; using a free port');
    out = await start('0');
  }
  const address = /TEMPORAL_ADDRESS=(\S+)/.exec(out)?.[1];
  if (!address) throw new Error(`scripts/temporal-dev-server printed no address:\n${out}`);
  const port = Number(address.split(':').pop());
  return {
    address,
    uiUrl: Number.isFinite(port) ? `http://127.0.0.1:${port + 1000}` : undefined,
    async stop() {
      await run(script, ['stop', '--state-dir', stateDir]);
    },
  };
}

export async function runDev(config: Config, log: (line: string) => void = (line) => process.stdout.write(`${line}\n`)): Promise<void> {
  const running = readDevState();
  if (running) throw new Error(`sessionlog dev is already running here (pid ${running.pid}, gateway ${running.gatewayUrl}); stop it first`);
  mkdirSync(DEV_DIR, { recursive: true, mode: 0o700 });

  const cleanups: Array<() => Promise<void>> = [];
  const stopAll = async () => {
    while (cleanups.length > 0) {
      const cleanup = cleanups.pop()!;
      await cleanup().catch((error: unknown) => log(`while stopping: ${(error as Error).message}`));
    }
    rmSync(join(DEV_DIR, 'dev.json'), { force: true });
  };
  try {
    let address = config.temporalAddress;
    let uiUrl: string | undefined;
    if (address) {
      log(`Temporal: using ${address} (TEMPORAL_ADDRESS)`);
    } else {
      log('Temporal: starting the local dev server (the first run builds the binary; this can take minutes)…');
      const temporal = await startTemporal(log);
      cleanups.push(() => temporal.stop());
      address = temporal.address;
      uiUrl = temporal.uiUrl;
    }
    const store = await openConfiguredStore(config);
    cleanups.push(() => store.close());
    const model = await startModel(config);
    if (model.offline) cleanups.push(() => model.offline!.close());
    log(`Model: ${model.description}`);

    const options = runtimeOptions(config);
    // One telemetry for the whole dev process: the gateway's /metrics shows the worker's metrics too.
    const telemetry = await options.telemetry('dev');
    cleanups.push(() => telemetry.shutdown());
    await telemetry.installTemporalRuntime();
    const connection = await NativeConnection.connect({ address });
    cleanups.push(() => connection.close());
    const worker = await createWorker(options.worker({ connection, store, model: model.model, telemetry }));
    const workerRun = worker.run();
    cleanups.push(async () => {
      // The SDK's runtime may already be shutting the worker down on SIGINT itself.
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
      log(`port ${config.gateway.port} is taken; the gateway uses a free port`);
      gateway = await startGateway({ ...gatewayOptions, port: 0 });
    }
    cleanups.push(() => gateway.close());
    writeDevState(DEV_DIR, { pid: process.pid, temporalAddress: address, gatewayUrl: gateway.url, store: config.store, startedAt: Date.now() });

    log(`Gateway: ${gateway.url}/v1 (OpenAPI at ${gateway.url}/v1/openapi.json)`);
    log(`Inspector: ${gateway.url}/ui/`);
    log(`Metrics: ${gateway.url}/metrics${telemetry.tracing ? `; traces to ${config.telemetry.otlpEndpoint}` : ''}`);
    if (uiUrl) log(`Temporal UI: ${uiUrl}`);
    log(`Store: ${config.store}`);
    log('Ready. Chat in another terminal: npx sessionlog chat');
    log(`   or over HTTP: curl -X POST ${gateway.url}/v1/sessions -H 'content-type: application/json' -d '{"id":"demo"}'`);
    log(`                 curl -X POST '${gateway.url}/v1/sessions/demo/messages?wait=true' -H 'content-type: application/json' -d '{"text":"hello"}'`);
    log('Press Ctrl-C to stop.');

    await new Promise<void>((resolveStop) => {
      const onSignal = () => resolveStop();
      process.once('SIGINT', onSignal);
      process.once('SIGTERM', onSignal);
      workerRun.catch((error: unknown) => {
        log(`worker stopped: ${(error as Error).message}`);
        resolveStop();
      });
    });
    log('Stopping…');
  } finally {
    await stopAll();
  }
  log('Stopped.');
}
