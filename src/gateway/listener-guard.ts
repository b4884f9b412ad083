/**
 * Connection limits of an HTTP listener (the gateway's, and the worker's operations listener):
 * no client address may hold more than `maxConnectionsPerAddress` connections, and no more than
 * `maxWaitingConnections` connections may wait on their clients at once (the request line,
 * headers or body still coming, or a keep-alive connection idle between requests). When a new
 * connection would exceed the second limit, the connection that has waited longest is closed to
 * make room: a thousand slow clients cost a thousand sockets for a while, never the service.
 *
 * A connection whose request has fully arrived is the server's to answer and is never evicted
 * (a `?wait=true` turn or an SSE stream may take as long as it needs).
 *
 * A connection the guard refuses or evicts is answered and closed, and nothing it sends is ever
 * handled: a refused connection never reaches the HTTP parser, and a request that arrives on an
 * evicted one while its close lingers is dropped. A client told 429 or 408 by the guard has
 * therefore changed nothing and may simply retry.
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { ConfigError } from '../session/index.js';
import { GatewayError, rawHttpResponse, toErrorResponse } from './errors.js';

export type ListenerLimits = {
  /** Open connections one client address may hold; a connection past it is answered 429 and closed. */
  maxConnectionsPerAddress: number;
  /** Connections waiting on their clients; past it the longest-waiting one is closed (408). */
  maxWaitingConnections: number;
};

export const DEFAULT_LISTENER_LIMITS: Readonly<ListenerLimits> = {
  maxConnectionsPerAddress: 256,
  maxWaitingConnections: 1_024,
};

/** Fills unset limits with the defaults and validates them (ConfigError naming the setting). */
export function resolveListenerLimits(limits: Partial<ListenerLimits>): ListenerLimits {
  const resolved: ListenerLimits = {
    maxConnectionsPerAddress: limits.maxConnectionsPerAddress ?? DEFAULT_LISTENER_LIMITS.maxConnectionsPerAddress,
    maxWaitingConnections: limits.maxWaitingConnections ?? DEFAULT_LISTENER_LIMITS.maxWaitingConnections,
  };
  const names: Record<keyof ListenerLimits, string> = {
    maxConnectionsPerAddress: 'SESSIONLOG_MAX_CONNECTIONS_PER_ADDRESS',
    maxWaitingConnections: 'SESSIONLOG_MAX_WAITING_CONNECTIONS',
  };
  for (const key of Object.keys(names) as Array<keyof ListenerLimits>) {
    const value = resolved[key];
    if (!Number.isSafeInteger(value) || value < 1) {
      throw new ConfigError(`${names[key]} (${key}) must be a positive whole number, got ${String(value)}`);
    }
  }
  return resolved;
}

/** What the guard writes to a connection it refuses or evicts (no response object exists for it). */
const GUARD_ANSWERS = {
  tooManyFromAddress: (address: string) =>
    rawHttpResponse(
      toErrorResponse(
        new GatewayError(
          'TOO_MANY_CONNECTIONS',
          `${address} holds as many connections as one address may (SESSIONLOG_MAX_CONNECTIONS_PER_ADDRESS); reuse a keep-alive connection or close idle ones`,
          { connection: 'close', 'retry-after': '1' },
        ),
      ),
    ),
  evicted: () =>
    rawHttpResponse(
      toErrorResponse(
        new GatewayError(
          'REQUEST_TIMEOUT',
          'the connection was closed to make room: too many connections were waiting on their clients (SESSIONLOG_MAX_WAITING_CONNECTIONS); send the request at once after connecting',
          { connection: 'close' },
        ),
      ),
    ),
};

/** Removes and returns the listeners `server` has for `event` now. */
function takeListeners(server: Server, event: 'connection' | 'request'): Array<(...args: unknown[]) => void> {
  const taken = server.listeners(event) as Array<(...args: unknown[]) => void>;
  for (const listener of taken) server.removeListener(event, listener);
  return taken;
}

/** Counters of what the guard did, for tests and metrics. */
export type ListenerGuardStats = { refused: number; evicted: number; waiting: number; open: number };

/**
 * Applies `limits` to `server`. Returns live counters. A refused or evicted connection gets a
 * raw HTTP error response (when it has no response in progress) and is closed.
 */
export function guardListener(server: Server, limits: ListenerLimits): ListenerGuardStats {
  const stats: ListenerGuardStats = { refused: 0, evicted: 0, waiting: 0, open: 0 };
  // The listeners the server was created with: Node's HTTP parser ('connection') and the app's
  // handler ('request'). The guard's own listeners call them, never for a connection it closed.
  const parser = takeListeners(server, 'connection');
  const handlers = takeListeners(server, 'request');
  // The connections this guard refused or evicted: none of their requests may be handled.
  const closedByGuard = new WeakSet<Socket>();
  const perAddress = new Map<string, number>();
  // Insertion order is waiting order: the first entry has waited longest.
  const waiting = new Set<Socket>();

  const wait = (socket: Socket): void => {
    waiting.delete(socket);
    waiting.add(socket);
    stats.waiting = waiting.size;
  };
  const busy = (socket: Socket): void => {
    waiting.delete(socket);
    stats.waiting = waiting.size;
  };
  const closeWith = (socket: Socket, answer: string): void => {
    closedByGuard.add(socket);
    const inFlight = (socket as Socket & { _httpMessage?: ServerResponse | null })._httpMessage;
    if (socket.writable && inFlight?.headersSent !== true) socket.end(answer);
    // A peer that never reads its answer must not keep the socket: destroyed a second later at most.
    closeLingering(socket, 1_000);
  };

  server.on('connection', (socket: Socket) => {
    const address = socket.remoteAddress ?? 'unknown';
    const held = perAddress.get(address) ?? 0;
    if (held >= limits.maxConnectionsPerAddress) {
      stats.refused += 1;
      // Not counted as open: it is closed at once.
      closeWith(socket, GUARD_ANSWERS.tooManyFromAddress(address));
      return;
    }
    perAddress.set(address, held + 1);
    stats.open += 1;
    wait(socket);
    while (waiting.size > limits.maxWaitingConnections) {
      const oldest = waiting.values().next().value as Socket;
      busy(oldest);
      stats.evicted += 1;
      closeWith(oldest, GUARD_ANSWERS.evicted());
    }
    socket.once('close', () => {
      busy(socket);
      stats.open -= 1;
      const left = (perAddress.get(address) ?? 1) - 1;
      if (left > 0) perAddress.set(address, left);
      else perAddress.delete(address);
    });
    for (const listener of parser) listener.call(server, socket);
  });

  server.on('request', (request: IncomingMessage, response: ServerResponse) => {
    const socket = request.socket;
    // A request that arrived on a connection evicted while it waited: answered 408 already, never handled.
    if (closedByGuard.has(socket)) return;
    // The headers are in; the connection waits on its client until the body has arrived too
    // (a request announcing no body has fully arrived with its headers).
    const length = request.headers['content-length'];
    const announcesBody =
      request.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
    if (!announcesBody || request.complete) busy(socket);
    else request.once('end', () => busy(socket));
    // After the answer, a keep-alive connection waits on its client again for its next request.
    response.once('finish', () => {
      if (!socket.destroyed) wait(socket);
    });
    for (const listener of handlers) listener.call(server, request, response);
  });
  return stats;
}

/** How long a lingering close waits at most for the client to close its side. */
const LINGER_MS = 2_000;

/**
 * Closes `socket` after what was written to it, lingering: closing a socket whose peer is still
 * sending makes the kernel answer with a reset, and the peer then loses the answer it had not yet
 * read (it sees "connection reset" instead of a 413 or a 429). So the answer is followed by a
 * FIN, and whatever the peer still sends is read and dropped until it closes its side or
 * `lingerMs` pass; then the socket is destroyed.
 */
export function closeLingering(socket: Socket, lingerMs = LINGER_MS): void {
  if (socket.destroyed) return;
  const timer = setTimeout(() => socket.destroy(), lingerMs).unref();
  socket.once('close', () => clearTimeout(timer));
  socket.once('end', () => socket.destroy());
  socket.on('data', () => {});
  socket.resume();
  if (socket.writable) socket.end();
}
