/**
 * `sessionlog serve` as a fleet member (DESIGN §8.1): stateless, so any number of gateways can
 * answer any session, including a live tail of a turn another gateway started (the store's
 * watch: LISTEN/NOTIFY on PostgreSQL, polling on SQLite).
 *
 * - Start-up waits for the store and Temporal (retrying with a line per attempt).
 * - Once running, a store or Temporal outage is logged when it starts and when it ends; requests
 *   meanwhile fail with 503 (`/readyz` says why) and SSE streams end with an `error` event, so
 *   clients reconnect with `Last-Event-ID`. The process keeps running.
 * - `GET /metrics` serves the gateway's metrics; with OTEL_EXPORTER_OTLP_ENDPOINT each request is
 *   the root span of its turn's trace.
 * - SIGTERM (or SIGINT) closes the listener, ends open event streams (clients reconnect to
 *   another gateway) and exits 0.
 */
import { openConfiguredStore, storeLabel, type SessionStore } from '../compose.js';
import type { Config } from '../config.js';
import { installProcessFaultPolicy } from './fault-policy.js';
import { startGateway, type RunningGateway } from '../gateway/index.js';
import type { SessionClient } from '../client/session-client.js';
import { ReachabilityMonitor } from '../telemetry/reachability.js';
import { fleetProbes, isConnectivityError, untilConnected } from './reconnect.js';
import { connectClient, runtimeOptions, temporalAddressFor } from './runtime.js';

const PROBE_INTERVAL_MS = 2_000;
const PROBE_TIMEOUT_MS = 2_000;

/** Serves the gateway until SIGTERM/SIGINT; resolves with the exit status. */
export async function runServeProcess(config: Config, log: (line: string) => void): Promise<number> {
  const address = temporalAddressFor(config);
  const stop = new AbortController();
  let received: NodeJS.Signals = 'SIGTERM';
  const onSignal = (signal: NodeJS.Signals): void => {
    received = signal;
    stop.abort();
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  const stopped = new Promise<void>((resolve) =>
    stop.signal.addEventListener('abort', () => resolve(), { once: true }),
  );

  let store: SessionStore | undefined;
  let client: SessionClient | undefined;
  let gateway: RunningGateway | undefined;
  let monitor: ReachabilityMonitor | undefined;
  const options = runtimeOptions(config);
  const telemetry = await options.telemetry('gateway');
  const removeFaultPolicy = installProcessFaultPolicy(telemetry);
  try {
    store = await untilConnected(`store ${storeLabel(config.store)}`, () => openConfiguredStore(config), {
      log,
      signal: stop.signal,
      retryable: isConnectivityError,
    });
    if (!store) return 0;
    const openStore = store;
    client = await untilConnected(`Temporal at ${address}`, () => connectClient(config, openStore, { telemetry }), {
      log,
      signal: stop.signal,
    });
    if (!client) return 0;
    gateway = await startGateway({ ...options.gateway(client, telemetry), port: config.gateway.port });
    monitor = new ReachabilityMonitor(fleetProbes(store, config.store, client.temporal.connection, address), {
      intervalMs: PROBE_INTERVAL_MS,
      timeoutMs: PROBE_TIMEOUT_MS,
      log,
    });
    await monitor.start();
    log(
      `gateway: ${gateway.url}/v1 (Temporal ${address}, store ${storeLabel(config.store)}; probes ${gateway.url}/healthz, ${gateway.url}/readyz)`,
    );
    await stopped;
    log(`${received}: closing the gateway (open event streams end; clients reconnect elsewhere)`);
    return 0;
  } finally {
    removeFaultPolicy();
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
    await monitor?.stop();
    await gateway?.close();
    await client?.temporal.connection.close();
    await store?.close();
    await telemetry.shutdown();
  }
}
