/**
 * Listener settings of the gateway that configuration fills in: its timeouts and the rule
 * that decides whether a host is loopback (a token is mandatory beyond it).
 */
import { ConfigError } from '../session/index.js';

/**
 * How long the gateway waits for each part of a request (ms). Documented in the configuration
 * reference (docs/configuration.md); none of them cuts a request once it has fully arrived, so `?wait=true`
 * turns and SSE streams run as long as they need.
 */
export type GatewayTimeouts = {
  /**
   * A socket idle this long before its first request's headers are in is closed (fastify
   * `connectionTimeout`). After a response Node's keep-alive timeout takes over; a silent
   * connection meets the headers timeout first unless that is set longer.
   */
  connectionTimeoutMs: number;
  /** The request line and headers must arrive within this (Node's `headersTimeout`); else 408. */
  headersTimeoutMs: number;
  /** Once the headers are in, the body must arrive within this; else 408. */
  bodyTimeoutMs: number;
  /** The whole request, headers and body, must arrive within this (fastify/Node `requestTimeout`); else 408. At least `headersTimeoutMs`. */
  requestTimeoutMs: number;
};

export const DEFAULT_GATEWAY_TIMEOUTS: Readonly<GatewayTimeouts> = {
  connectionTimeoutMs: 60_000,
  headersTimeoutMs: 10_000,
  bodyTimeoutMs: 30_000,
  requestTimeoutMs: 60_000,
};

/**
 * Throws ConfigError unless every timeout is a positive whole number and the headers fit in
 * the request timeout (Node refuses the server otherwise).
 */
export function assertGatewayTimeouts(timeouts: GatewayTimeouts): void {
  const names: Record<keyof GatewayTimeouts, string> = {
    connectionTimeoutMs: 'SESSIONLOG_CONNECTION_TIMEOUT_MS',
    headersTimeoutMs: 'SESSIONLOG_HEADERS_TIMEOUT_MS',
    bodyTimeoutMs: 'SESSIONLOG_BODY_TIMEOUT_MS',
    requestTimeoutMs: 'SESSIONLOG_REQUEST_TIMEOUT_MS',
  };
  for (const key of Object.keys(names) as Array<keyof GatewayTimeouts>) {
    const value = timeouts[key];
    if (!Number.isSafeInteger(value) || value < 1)
      throw new ConfigError(
        `${names[key]} (gateway ${key}) must be a positive whole number of milliseconds, got ${String(value)}`,
      );
  }
  if (timeouts.headersTimeoutMs > timeouts.requestTimeoutMs) {
    throw new ConfigError(
      `SESSIONLOG_HEADERS_TIMEOUT_MS (${timeouts.headersTimeoutMs}) must not exceed SESSIONLOG_REQUEST_TIMEOUT_MS (${timeouts.requestTimeoutMs}): the request timeout covers the headers too`,
    );
  }
}

/** Fills unset timeouts with the defaults and validates the result (ConfigError naming the setting). */
export function resolveGatewayTimeouts(timeouts: Partial<GatewayTimeouts>): GatewayTimeouts {
  const resolved: GatewayTimeouts = {
    connectionTimeoutMs: timeouts.connectionTimeoutMs ?? DEFAULT_GATEWAY_TIMEOUTS.connectionTimeoutMs,
    headersTimeoutMs: timeouts.headersTimeoutMs ?? DEFAULT_GATEWAY_TIMEOUTS.headersTimeoutMs,
    bodyTimeoutMs: timeouts.bodyTimeoutMs ?? DEFAULT_GATEWAY_TIMEOUTS.bodyTimeoutMs,
    requestTimeoutMs: timeouts.requestTimeoutMs ?? DEFAULT_GATEWAY_TIMEOUTS.requestTimeoutMs,
  };
  assertGatewayTimeouts(resolved);
  return resolved;
}

/** True for addresses that only this machine can reach. */
export function isLoopbackHost(host: string): boolean {
  return host === 'localhost' || host === '::1' || host === '[::1]' || /^127(\.\d{1,3}){3}$/.test(host);
}
