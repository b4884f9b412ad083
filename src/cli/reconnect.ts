/**
 * Start-up of a fleet process (`sessionlog worker`, `sessionlog serve`) while its store or
 * Temporal is not there yet, or is restarting: retry with backoff and a clear line per
 * attempt, instead of exiting. Configuration errors still fail at once.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { storeLabel, type SessionStore } from '../compose.js';
import { probeStore, probeTemporal, type TemporalConnectionLike } from '../gateway/readiness.js';
import { isSessionlogError } from '../session/index.js';
import type { Probe } from '../telemetry/reachability.js';

/** First and largest wait between connection attempts. */
const FIRST_DELAY_MS = 500;
const MAX_DELAY_MS = 10_000;

/**
 * Errors that mean "the server is not reachable (yet)" rather than "the settings are wrong":
 * refused, reset or timed-out connections, DNS not (yet) resolving, and PostgreSQL starting,
 * stopping, recovering or out of connections. A store's open error that the store itself
 * classified as UNAVAILABLE (PostgreSQL by its SQLSTATE class, e.g. 57P03 "not yet accepting
 * connections" during recovery) is one; for the rest the driver's message is the only signal,
 * hence the text match.
 */
const CONNECTIVITY =
  /ECONNREFUSED|ECONNRESET|ETIMEDOUT|EHOSTUNREACH|ENETUNREACH|ENOTFOUND|EAI_AGAIN|timeout|timed out|terminated|starting up|shutting down|recovery mode|too many clients|Connection refused/i;

/** Whether opening the store failed because its server is unreachable (worth retrying). */
export function isConnectivityError(error: unknown): boolean {
  if (isSessionlogError(error, 'UNAVAILABLE')) return true;
  const message =
    error instanceof Error ? `${error.message} ${(error.cause as Error | undefined)?.message ?? ''}` : String(error);
  return CONNECTIVITY.test(message);
}

/**
 * Whether a Temporal call failed because the server is not reachable or not serving (yet): a
 * connectivity error, or a gRPC status Unavailable or DeadlineExceeded (as the SDK core reports
 * it, `Status { code: Unavailable, … }`, or as a numeric gRPC code 14 or 4).
 */
export function isTemporalUnavailable(error: unknown): boolean {
  if (isConnectivityError(error)) return true;
  const code = (error as { code?: unknown } | null)?.code;
  if (code === 14 || code === 4) return true;
  const message = error instanceof Error ? error.message : String(error);
  return /\bcode: (Unavailable|DeadlineExceeded)\b/.test(message);
}

function firstLine(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).split('\n')[0]!.slice(0, 300);
}

/**
 * Calls `connect` until it succeeds, waiting 0.5 s, 1 s, 2 s … (at most 10 s) between attempts
 * and logging each failure. Returns undefined when `signal` aborts first (the process is asked
 * to stop); rethrows at once an error `retryable` rejects.
 */
export async function untilConnected<T>(
  label: string,
  connect: () => Promise<T>,
  options: { log: (line: string) => void; signal: AbortSignal; retryable?: (error: unknown) => boolean },
): Promise<T | undefined> {
  for (
    let attempt = 1, delay = FIRST_DELAY_MS;
    !options.signal.aborted;
    attempt++, delay = Math.min(delay * 2, MAX_DELAY_MS)
  ) {
    try {
      const connected = await connect();
      if (attempt > 1) options.log(`${label}: connected after ${attempt} attempts`);
      return connected;
    } catch (error) {
      if (options.retryable && !options.retryable(error)) throw error;
      options.log(`${label} is unreachable (${firstLine(error)}); retrying in ${(delay / 1000).toFixed(1)} s`);
    }
    try {
      await sleep(delay, undefined, { signal: options.signal });
    } catch {
      // AbortError: asked to stop while waiting; the loop condition ends it.
    }
  }
  return undefined;
}

/** The probes a fleet process runs: its store and the Temporal frontend. */
export function fleetProbes(
  store: SessionStore,
  storeUrl: string,
  connection: TemporalConnectionLike,
  address: string,
): Probe[] {
  return [
    { name: 'store', label: `store ${storeLabel(storeUrl)}`, check: () => probeStore(store) },
    { name: 'temporal', label: `Temporal at ${address}`, check: () => probeTemporal(connection) },
  ];
}
