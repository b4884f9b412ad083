/**
 * The operations listener (`/healthz`, `/readyz`, extra routes) over real loopback HTTP, and
 * the reachability monitor that feeds a worker's `/readyz` and logs each outage once.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { startOpsServer, type Readiness, type RunningOpsServer } from '../../src/telemetry/ops-server.js';
import { ReachabilityMonitor } from '../../src/telemetry/reachability.js';
import { eventually } from '../support/log-wait.js';

let server: RunningOpsServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

async function get(path: string, method = 'GET'): Promise<{ status: number; body: unknown; type: string | null }> {
  const response = await fetch(`${server!.url}${path}`, { method });
  const type = response.headers.get('content-type');
  const text = await response.text();
  return { status: response.status, body: type?.startsWith('application/json') ? JSON.parse(text) : text, type };
}

describe('startOpsServer', () => {
  it('answers /healthz always, and /readyz with 200 or 503 and the reason, from the current readiness', async () => {
    let readiness: Readiness = { ready: false, reason: 'starting: opening the store', checks: {} };
    server = await startOpsServer({ host: '127.0.0.1', port: 0, ready: () => readiness });
    expect(server.url).toBe(`http://127.0.0.1:${server.port}`);

    expect(await get('/healthz')).toMatchObject({ status: 200, body: { ok: true } });
    expect(await get('/readyz')).toMatchObject({
      status: 503,
      body: { ready: false, reason: 'starting: opening the store' },
    });

    readiness = { ready: true, checks: { store: { ok: true, since: 1 }, temporal: { ok: true, since: 2 } } };
    expect(await get('/readyz')).toMatchObject({ status: 200, body: readiness });
    expect((await get('/readyz?verbose=1')).status).toBe(200);
  });

  it('serves extra routes with their own content type, and refuses unknown paths and other methods as JSON', async () => {
    server = await startOpsServer({
      host: '127.0.0.1',
      port: 0,
      ready: () => ({ ready: true, checks: {} }),
      routes: { '/metrics': async () => ({ status: 200, body: 'up 1\n', contentType: 'text/plain; version=0.0.4' }) },
    });
    expect(await get('/metrics')).toEqual({ status: 200, body: 'up 1\n', type: 'text/plain; version=0.0.4' });
    const missing = await get('/nope');
    expect(missing.status).toBe(404);
    expect(missing.body).toMatchObject({ error: { code: 'NOT_FOUND' } });
    expect(JSON.stringify(missing.body)).toContain('/readyz');
    expect(await get('/healthz', 'POST')).toMatchObject({
      status: 405,
      body: { error: { code: 'METHOD_NOT_ALLOWED' } },
    });
  });

  it('answers 500 with the error when readiness itself throws', async () => {
    server = await startOpsServer({
      host: '127.0.0.1',
      port: 0,
      ready: async () => Promise.reject(new Error('probe exploded')),
    });
    expect(await get('/readyz')).toMatchObject({ status: 500, body: { error: { message: 'probe exploded' } } });
  });
});

describe('ReachabilityMonitor', () => {
  it('logs one line when a dependency goes away and one when it is back, and reports its state meanwhile', async () => {
    const lines: string[] = [];
    let storeUp = true;
    const monitor = new ReachabilityMonitor(
      [
        {
          name: 'store',
          label: 'store sqlite:x',
          check: async () => (storeUp ? undefined : Promise.reject(new Error('connect ECONNREFUSED 127.0.0.1:5'))),
        },
        { name: 'temporal', label: 'Temporal at 127.0.0.1:7', check: async () => undefined },
      ],
      { intervalMs: 10, timeoutMs: 1_000, log: (line) => lines.push(line) },
    );
    await monitor.start();
    try {
      expect(monitor.firstDown()).toBeUndefined();
      expect(lines).toEqual([]);

      storeUp = false;
      const down = await eventually(async () => monitor.firstDown());
      expect(down).toMatchObject({ name: 'store', state: { ok: false, error: 'connect ECONNREFUSED 127.0.0.1:5' } });
      // Several more failing rounds: still one line.
      const rounds = Date.now();
      await eventually(async () => (Date.now() - rounds > 100 ? true : undefined), 5_000, 10);
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(/^store sqlite:x is unreachable \(connect ECONNREFUSED 127\.0\.0\.1:5\); still running/);
      expect(monitor.snapshot().temporal).toMatchObject({ ok: true });

      storeUp = true;
      await eventually(async () => (monitor.firstDown() === undefined ? true : undefined));
      expect(lines).toHaveLength(2);
      expect(lines[1]).toMatch(/^store sqlite:x is reachable again after \d+\.\d s$/);
    } finally {
      await monitor.stop();
    }
  });

  it('counts a probe that does not answer within the timeout as down', async () => {
    const lines: string[] = [];
    const monitor = new ReachabilityMonitor(
      [{ name: 'temporal', label: 'Temporal at 10.255.255.1:7233', check: () => new Promise<void>(() => undefined) }],
      {
        intervalMs: 1_000,
        timeoutMs: 20,
        log: (line) => lines.push(line),
      },
    );
    await monitor.start();
    await monitor.stop();
    expect(monitor.firstDown()).toMatchObject({
      name: 'temporal',
      state: { ok: false, error: 'no answer within 20 ms' },
    });
    expect(lines).toHaveLength(1);
  });
});
