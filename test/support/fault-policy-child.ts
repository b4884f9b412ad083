/**
 * A gateway process under the fault policy (src/cli/fault-policy.ts), for
 * test/cli/fault-policy.test.ts. It adds two routes whose code faults after the handler
 * returned (a timer that throws, a promise nobody awaits), requests each of them and then a
 * real route, prints one JSON line of what it saw, and finally throws outside any request:
 * the policy must then exit with status 70.
 */
import { installFaultPolicy } from '../../src/cli/fault-policy.js';
import { createGateway } from '../../src/gateway/index.js';
import type { SessionClient } from '../../src/client/session-client.js';

const logged: Array<Record<string, unknown>> = [];
const counted: string[] = [];
installFaultPolicy({
  log: {
    error: (fields, message) => logged.push({ level: 'error', reqId: fields.reqId, url: fields.url, message }),
    fatal: (fields, message) =>
      process.stdout.write(`${JSON.stringify({ level: 'fatal', message, fault: fields.fault })}\n`),
  },
  count: (kind, disposition) => counted.push(`${kind}:${disposition}`),
});

const app = createGateway({ client: {} as SessionClient, host: '127.0.0.1', bodyLimitBytes: 1024 });
app.get('/fault/timer', async () => {
  setTimeout(() => {
    throw new TypeError('a bug in a timer a request started');
  }, 10);
  // Never answers: the fault must end the request's connection.
  await new Promise(() => undefined);
});
app.get('/fault/rejection', async () => {
  void Promise.reject(new Error('a promise of a request nobody awaited'));
  await new Promise(() => undefined);
});
await app.listen({ host: '127.0.0.1', port: 0 });
const base = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;

async function outcome(path: string): Promise<string> {
  try {
    const response = await fetch(`${base}${path}`, { signal: AbortSignal.timeout(10_000) });
    return `status ${response.status}`;
  } catch (error) {
    const cause = (error as { cause?: { code?: string; message?: string } }).cause;
    return `failed: ${cause?.code ?? cause?.message ?? (error as Error).name}`;
  }
}

const timer = await outcome('/fault/timer');
const rejection = await outcome('/fault/rejection');
const after = await outcome('/v1/openapi.json');
process.stdout.write(`${JSON.stringify({ timer, rejection, after, logged, counted })}\n`);
setTimeout(() => {
  throw new Error('a fault outside any request');
}, 10);
