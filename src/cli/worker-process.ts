/**
 * `sessionlog worker` as a fleet member (DESIGN §8.1): any number of these poll one task queue
 * and write one shared store.
 *
 * - Start-up waits for the store and Temporal (retrying with a line per attempt) rather than
 *   exit, so a fleet can start in any order.
 * - Once running, a store or Temporal outage is logged once when it starts and once when it
 *   ends; the process keeps running (the pool and the gRPC channel reconnect, Temporal retries
 *   the activities that failed). Should the Temporal worker itself fail, a new one is started.
 * - SIGTERM (or SIGINT) drains: polling stops at once, running activities get
 *   `SESSIONLOG_SHUTDOWN_GRACE_MS` to finish and are then cancelled, so Temporal hands them to
 *   another worker; connections close; the exit status is 0.
 * - With `SESSIONLOG_METRICS_PORT` set, `GET /healthz`, `GET /readyz` and `GET /metrics` are
 *   served there. Logs are JSON lines (the Temporal SDK's too); the SDK core's line per retried
 *   poll while Temporal is unreachable is kept out: the reachability monitor says once when
 *   Temporal goes away and once when it is back.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { NativeConnection, makeTelemetryFilterString, type Worker } from '@temporalio/worker';
import { openConfiguredStore, startModel, storeLabel, type ModelRuntime, type SessionStore } from '../compose.js';
import type { Config } from '../config.js';
import { installProcessFaultPolicy } from './fault-policy.js';
import { guardListener } from '../gateway/listener-guard.js';
import type { TemporalConnectionLike } from '../gateway/readiness.js';
import { startOpsServer, type Readiness, type RunningOpsServer } from '../telemetry/ops-server.js';
import { ReachabilityMonitor } from '../telemetry/reachability.js';
import { createWorker } from '../worker.js';
import { fleetProbes, isConnectivityError, isTemporalUnavailable, untilConnected } from './reconnect.js';
import { runtimeOptions, temporalAddressFor } from './runtime.js';

/** Probe interval of the reachability monitor. */
const PROBE_INTERVAL_MS = 2_000;
const PROBE_TIMEOUT_MS = 2_000;
/** Wait before replacing a Temporal worker that failed. */
const RESTART_DELAY_MS = 2_000;
/** Beyond the grace period, how long the SDK may take to wind down before it gives up. */
const FORCE_AFTER_GRACE_MS = 15_000;

type Phase = 'starting' | 'running' | 'draining';

/** Runs the worker until SIGTERM/SIGINT has drained it; resolves with the exit status. */
export async function runWorkerProcess(config: Config, log: (line: string) => void): Promise<number> {
  const address = temporalAddressFor(config);
  const stop = new AbortController();
  let phase: Phase = 'starting';
  let startingStep = 'opening the store';
  let worker: Worker | undefined;
  let monitor: ReachabilityMonitor | undefined;

  const onSignal = (signal: NodeJS.Signals): void => {
    if (stop.signal.aborted) return;
    phase = 'draining';
    log(
      `${signal}: draining: polling stops; running activities get ${config.shutdownGraceMs / 1000} s to finish, then go back to Temporal for another worker`,
    );
    stop.abort();
    if (worker?.getState() === 'RUNNING') worker.shutdown();
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);

  const readiness = (): Readiness => {
    const checks = monitor?.snapshot() ?? {};
    if (phase === 'starting') return { ready: false, reason: `starting: ${startingStep}`, checks };
    if (phase === 'draining') return { ready: false, reason: 'draining: shutting down', checks };
    const down = monitor?.firstDown();
    return down
      ? { ready: false, reason: `${down.label} is unreachable: ${down.state.error ?? 'unknown'}`, checks }
      : { ready: true, checks };
  };

  const options = runtimeOptions(config);
  const telemetry = await options.telemetry('worker');
  const removeFaultPolicy = installProcessFaultPolicy(telemetry);
  await telemetry.installTemporalRuntime({
    coreLogFilter: `${makeTelemetryFilterString({ core: 'ERROR', other: 'ERROR' })},temporalio_client::retry=off`,
  });

  let ops: RunningOpsServer | undefined;
  let store: SessionStore | undefined;
  let model: ModelRuntime | undefined;
  let connection: NativeConnection | undefined;
  let exitCode = 0;
  try {
    if (config.ops.port !== undefined) {
      ops = await startOpsServer({
        host: config.ops.host,
        port: config.ops.port,
        ready: readiness,
        routes: telemetry.metricsRoute(),
        prepare: (server) => guardListener(server, config.listenerLimits),
        headersTimeoutMs: config.gateway.headersTimeoutMs,
        requestTimeoutMs: config.gateway.requestTimeoutMs,
      });
      log(`operations: ${ops.url}/healthz, ${ops.url}/readyz, ${ops.url}/metrics`);
    }
    store = await untilConnected(`store ${storeLabel(config.store)}`, () => openConfiguredStore(config), {
      log,
      signal: stop.signal,
      retryable: isConnectivityError,
    });
    if (!store) return 0;
    model = await startModel(config);
    log(`model: ${model.description}`);
    startingStep = `connecting to Temporal at ${address}`;
    connection = await untilConnected(`Temporal at ${address}`, () => NativeConnection.connect({ address }), {
      log,
      signal: stop.signal,
    });
    if (!connection) return 0;
    // The probes follow the connection the Temporal worker uses, which a failed creation replaces (below).
    const temporal: TemporalConnectionLike = {
      get workflowService() {
        return connection!.workflowService;
      },
      withDeadline: (deadline, fn) => connection!.withDeadline(deadline, fn),
    };
    monitor = new ReachabilityMonitor(fleetProbes(store, config.store, temporal, address), {
      intervalMs: PROBE_INTERVAL_MS,
      timeoutMs: PROBE_TIMEOUT_MS,
      log,
    });
    await monitor.start();

    /** Set when a worker creation failed: the next attempt starts on a new connection. */
    let staleConnection = false;
    const createTemporalWorker = async (): Promise<Worker> => {
      if (staleConnection) {
        const previous = connection;
        connection = await NativeConnection.connect({ address });
        staleConnection = false;
        await previous?.close().catch(() => undefined);
      }
      // Asked first on its own: a Worker.create that fails leaves the workflow threads it started
      // running (an SDK leak), so it is only tried once Temporal answers.
      await connection!.workflowService.describeNamespace({ namespace: config.namespace });
      const workerOptions = options.worker({ connection: connection!, store: store!, model: model!.model, telemetry });
      try {
        return await createWorker({
          ...workerOptions,
          workerOptions: {
            ...workerOptions.workerOptions,
            shutdownGraceTime: config.shutdownGraceMs,
            shutdownForceTime: config.shutdownGraceMs + FORCE_AFTER_GRACE_MS,
          },
        });
      } catch (error) {
        // The SDK core registers the worker on its connection before it asks Temporal for the
        // namespace and keeps it registered when that fails, so the connection would refuse the
        // next worker for this task queue ("Registration of multiple workers with overlapping
        // worker task types … not allowed").
        staleConnection = true;
        throw error;
      }
    };

    while (!stop.signal.aborted) {
      startingStep = 'creating the Temporal worker';
      // Creating a worker asks Temporal for the namespace: while Temporal restarts (or, after a
      // failed worker, is still away) that fails, and is retried like a connection instead of
      // ending the process.
      const created = await untilConnected(`Temporal at ${address}`, createTemporalWorker, {
        log,
        signal: stop.signal,
        retryable: isTemporalUnavailable,
      });
      if (!created) break;
      worker = created;
      const run = worker.run();
      // A signal that came while the worker was being created: drain it at once (a created worker
      // that never runs keeps its workflow threads, and the process, alive).
      if (stop.signal.aborted) worker.shutdown();
      if (phase === 'starting') phase = 'running';
      log(
        `worker on ${address}, namespace ${config.namespace}, task queue ${config.taskQueue}, store ${storeLabel(config.store)}`,
      );
      try {
        await run;
      } catch (error) {
        if (stop.signal.aborted) {
          log(`drain did not finish cleanly: ${(error as Error).message}`);
          exitCode = 1;
          break;
        }
        log(
          `the Temporal worker stopped (${(error as Error).message.split('\n')[0]}); starting a new one in ${RESTART_DELAY_MS / 1000} s`,
        );
        phase = 'starting';
        // An AbortError here means a signal came while waiting: the loop condition ends it.
        await sleep(RESTART_DELAY_MS, undefined, { signal: stop.signal }).catch(() => undefined);
      }
    }
    if (exitCode === 0) log('drained');
    return exitCode;
  } finally {
    removeFaultPolicy();
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
    await monitor?.stop();
    await connection?.close();
    await model?.offline?.close();
    await store?.close();
    await ops?.close();
    await telemetry.shutdown();
  }
}
