/**
 * The operations listener of a process that serves no HTTP of its own (the worker; DESIGN §8
 * "Operations"): `GET /healthz` (the process is up) and `GET /readyz` (it can do its work: the
 * store and Temporal are reachable and it is not draining). Probes answer from state the
 * process keeps current, so a load balancer polling often costs nothing.
 *
 * More GET routes (`/metrics`) are added through `routes`. Every answer is JSON except what a
 * route writes itself.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** One dependency's state as `/readyz` reports it. */
export type DependencyState = {
  ok: boolean;
  /** Why it is not ok (the last probe's error), absent when ok. */
  error?: string;
  /** Since when (epoch ms) it has been in this state. */
  since: number;
};

/** What `/readyz` answers: 200 when `ready`, else 503 with `reason`. */
export type Readiness = { ready: boolean; reason?: string; checks: Record<string, DependencyState> };

/** A GET route answered with `status` and a body (JSON unless `contentType` says otherwise). */
export type OpsRoute = () => Promise<{ status: number; body: unknown; contentType?: string }>;

export type OpsServerOptions = {
  /** Listen address; loopback unless the process is meant to be probed from elsewhere. */
  host: string;
  /** Port; 0 picks a free one (see `RunningOpsServer.port`). */
  port: number;
  /** The process's readiness, evaluated per `/readyz` request. */
  ready: () => Readiness | Promise<Readiness>;
  /** Extra GET routes by exact path, e.g. `/metrics`. */
  routes?: Record<string, OpsRoute>;
  /** Called with the server before it listens (the CLI applies the gateway's connection limits here). */
  prepare?: (server: http.Server) => void;
  /** A request's headers must arrive within this, ms (default 10 s; Node's own is 60 s). */
  headersTimeoutMs?: number;
  /** The whole request must arrive within this, ms (default 15 s; Node's own is 300 s). Probes are short GETs. */
  requestTimeoutMs?: number;
};

export type RunningOpsServer = {
  /** `http://host:port` */
  url: string;
  port: number;
  close(): Promise<void>;
};

function send(
  res: http.ServerResponse,
  status: number,
  body: unknown,
  contentType = 'application/json; charset=utf-8',
): void {
  const text = contentType.startsWith('application/json') ? `${JSON.stringify(body)}\n` : String(body);
  res.writeHead(status, {
    'content-type': contentType,
    'cache-control': 'no-store',
    'content-length': Buffer.byteLength(text),
  });
  res.end(text);
}

/** Starts the listener; resolves once it accepts connections. */
export async function startOpsServer(options: OpsServerOptions): Promise<RunningOpsServer> {
  const routes: Record<string, OpsRoute> = {
    '/healthz': async () => ({ status: 200, body: { ok: true } }),
    '/readyz': async () => {
      const readiness = await options.ready();
      return { status: readiness.ready ? 200 : 503, body: readiness };
    },
    ...options.routes,
  };
  const server = http.createServer(
    {
      headersTimeout: options.headersTimeoutMs ?? 10_000,
      requestTimeout: Math.max(options.requestTimeoutMs ?? 15_000, options.headersTimeoutMs ?? 10_000),
      connectionsCheckingInterval: 1_000,
    },
    (req, res) => {
      const path = (req.url ?? '/').split('?')[0]!;
      const route = routes[path];
      if (!route) {
        send(res, 404, {
          error: {
            code: 'NOT_FOUND',
            message: `no route ${req.method} ${path}; this listener serves GET ${Object.keys(routes).join(', ')}`,
          },
        });
        return;
      }
      if (req.method !== 'GET' && req.method !== 'HEAD') {
        res.setHeader('allow', 'GET, HEAD');
        send(res, 405, {
          error: { code: 'METHOD_NOT_ALLOWED', message: `${req.method} is not allowed on ${path}; use GET` },
        });
        return;
      }
      route().then(
        ({ status, body, contentType }) => send(res, status, body, contentType),
        (error: unknown) => send(res, 500, { error: { code: 'INTERNAL', message: (error as Error).message } }),
      );
    },
  );
  // Probes are short requests; do not let an idle keep-alive connection hold `close()` up.
  server.keepAliveTimeout = 1_000;
  options.prepare?.(server);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  const host = options.host.includes(':') ? `[${options.host}]` : options.host;
  return {
    url: `http://${host}:${port}`,
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
