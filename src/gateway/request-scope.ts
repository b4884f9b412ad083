/**
 * The request a piece of gateway code runs for. Every HTTP request runs inside its own async
 * context, so whatever it starts (timers, stream callbacks, promises) carries it: the process's
 * fault policy (src/cli/fault-policy.ts) reads it to tell a fault that belongs to one request
 * from one that belongs to the process.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import type { IncomingMessage, ServerResponse } from 'node:http';

export type RequestScope = {
  /** The request id fastify logs as `reqId`. */
  readonly id: string;
  readonly method: string;
  readonly url: string;
  /** Ends the request's connection: whatever the faulty code left half done, its client is not left waiting. */
  abandon(): void;
};

const scopes = new AsyncLocalStorage<RequestScope>();
let nextRequest = 0;

/** The request the calling code runs for, if any. */
export function currentRequestScope(): RequestScope | undefined {
  return scopes.getStore();
}

/** Runs `handle` (the server's request handler) inside a new scope for `request`. */
export function runInRequestScope(request: IncomingMessage, response: ServerResponse, handle: () => void): void {
  nextRequest += 1;
  const scope: RequestScope = {
    id: `req-${nextRequest.toString(36)}`,
    method: request.method ?? 'GET',
    // The path only: a query string may carry a stream token.
    url: (request.url ?? '/').split('?')[0]!,
    abandon: () => {
      response.destroy();
      request.socket.destroy();
    },
  };
  scopes.run(scope, handle);
}
