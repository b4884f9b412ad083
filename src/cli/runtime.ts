/**
 * Assembly shared by the CLI commands: the Temporal address (from config or a running
 * `sessionlog dev`), and the one function that turns a `Config` into worker, client, gateway and
 * telemetry options for `dev`, `worker` and `serve`. The parts themselves (store, model, default
 * agent, the client's checks) come from src/compose.ts; worker defaults from src/worker.ts.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client, Connection } from '@temporalio/client';
import type { NativeConnection } from '@temporalio/worker';
import { SessionClient, type SessionClientOptions } from '../client/session-client.js';
import {
  agentCheck,
  mediaCheck,
  contextReporter,
  defaultAgent,
  modelRouting,
  type ModelPort,
  type SessionStore,
} from '../compose.js';
import { ConfigError, type Config } from '../config.js';
import type { GatewayOptions } from '../gateway/server.js';
import { startTelemetry, type Telemetry } from '../telemetry/index.js';
import type { CreateWorkerOptions } from '../worker.js';

/** A process part, naming its spans' `service.name` and its log lines. */
export type ProcessPart = 'worker' | 'gateway' | 'dev';

/** The package root (holds package.json and scripts/), found from this module's location. */
export function packageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 6; i++) {
    const manifest = join(dir, 'package.json');
    if (existsSync(manifest) && (JSON.parse(readFileSync(manifest, 'utf8')) as { name?: string }).name === 'sessionlog')
      return dir;
    dir = dirname(dir);
  }
  throw new Error('cannot find the sessionlog package root (package.json) above the CLI module');
}

/** The folder `sessionlog dev` keeps its data in when SESSIONLOG_HOME is not set: ./.sessionlog. */
export const DEV_DIR = '.sessionlog';
const DEV_STATE = 'dev.json';
/** The default store's file inside the data folder. */
const DEV_STORE_FILE = 'sessionlog.db';

/**
 * The data folder of a `sessionlog dev` started here (absolute): `SESSIONLOG_HOME` when set, else
 * ./.sessionlog. It holds the default store (sessionlog.db), the Temporal dev server's state
 * (temporal/) and, while dev runs, dev.json (its pid, Temporal address, gateway URL and store).
 */
export function devHome(env: NodeJS.ProcessEnv = process.env, cwd = process.cwd()): string {
  return resolve(cwd, env.SESSIONLOG_HOME || DEV_DIR);
}

/** The store in `home` used when none is configured: `sqlite:HOME/sessionlog.db`. */
export function homeStore(home: string): string {
  return `sqlite:${join(home, DEV_STORE_FILE)}`;
}

/**
 * `url` with a relative file path made absolute against `cwd` (`sqlite:` and `jsonl:`; other
 * stores and `sqlite::memory:` as given), so dev.json names the store from any folder.
 */
export function absoluteStore(url: string, cwd = process.cwd()): string {
  for (const scheme of ['sqlite:', 'jsonl:']) {
    if (!url.startsWith(scheme)) continue;
    const path = url.slice(scheme.length);
    if (path === '' || path === ':memory:' || isAbsolute(path)) return url;
    return `${scheme}${resolve(cwd, path)}`;
  }
  return url;
}

export type DevState = { pid: number; temporalAddress: string; gatewayUrl: string; store: string; startedAt: number };

export function writeDevState(dir: string, state: DevState): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  writeFileSync(join(dir, DEV_STATE), `${JSON.stringify(state, null, 2)}\n`, { mode: 0o600 });
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // ESRCH: no such process; EPERM would mean alive but not ours.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** The state of the `sessionlog dev` running with data folder `dir`, if one is. */
export function readDevState(dir = devHome()): DevState | undefined {
  const file = join(dir, DEV_STATE);
  if (!existsSync(file)) return undefined;
  try {
    const state = JSON.parse(readFileSync(file, 'utf8')) as DevState;
    return pidAlive(state.pid) ? state : undefined;
  } catch (error) {
    // A half-written or foreign file: treat as no running dev stack.
    void error;
    return undefined;
  }
}

/**
 * The running `sessionlog dev` the other commands talk to. With `SESSIONLOG_HOME` set, the one
 * whose data folder that is; else the nearest `.sessionlog/dev.json` of a running dev in this
 * folder or any folder above it (as git finds `.git`), so the CLI works from anywhere inside
 * the folder `dev` was started in.
 */
export function findRunningDev(
  env: NodeJS.ProcessEnv = process.env,
  cwd = process.cwd(),
): (DevState & { home: string }) | undefined {
  if (env.SESSIONLOG_HOME) {
    const home = devHome(env, cwd);
    const state = readDevState(home);
    return state ? { ...state, home } : undefined;
  }
  for (let dir = resolve(cwd); ; dir = dirname(dir)) {
    const home = join(dir, DEV_DIR);
    const state = readDevState(home);
    if (state) return { ...state, home };
    if (dirname(dir) === dir) return undefined;
  }
}

/**
 * The store a command uses when neither `--store` nor SESSIONLOG_STORE names one: the running
 * dev's (when the Temporal address comes from it too), else the one in the data folder.
 */
export function defaultStore(temporalConfigured: boolean, env: NodeJS.ProcessEnv = process.env): string {
  const dev = temporalConfigured ? undefined : findRunningDev(env);
  return dev?.store ?? homeStore(devHome(env));
}

/** The Temporal address to use: configured, else a running `sessionlog dev`'s, else a clear error. */
export function temporalAddressFor(config: Config): string {
  if (config.temporalAddress) return config.temporalAddress;
  const dev = findRunningDev();
  if (dev) return dev.temporalAddress;
  throw new ConfigError(
    `TEMPORAL_ADDRESS is not set and no running \`sessionlog dev\` was found (${process.env.SESSIONLOG_HOME ? `SESSIONLOG_HOME=${process.env.SESSIONLOG_HOME} has no dev.json of a running dev` : 'no .sessionlog/dev.json here or in a folder above'}): start \`sessionlog dev\`, set SESSIONLOG_HOME to its data folder, or set TEMPORAL_ADDRESS=host:port`,
  );
}

/**
 * The one translation of a `Config` into the options of the parts `dev`, `worker` and `serve`
 * run: the worker's agent and limits, the client's checks and meter, the gateway's listener.
 */
export function runtimeOptions(config: Config) {
  const catalogue = config.catalogue;
  return {
    /** Starts this part's telemetry: metrics (costs come logged with each reply), logs at SESSIONLOG_LOG_LEVEL (readable in dev), tracing when configured. */
    telemetry(part: ProcessPart, options: Parameters<typeof startTelemetry>[1] = {}): Promise<Telemetry> {
      return startTelemetry(
        {
          serviceName: `sessionlog-${part}`,
          logLevel: config.telemetry.logLevel,
          logFormat: part === 'dev' ? 'pretty' : 'json',
          otlpEndpoint: config.telemetry.otlpEndpoint,
          captureContent: config.telemetry.captureContent,
        },
        options,
      );
    },
    worker(parts: {
      connection: NativeConnection;
      store: SessionStore;
      model: ModelPort;
      telemetry?: Telemetry;
    }): CreateWorkerOptions {
      const { telemetry, ...rest } = parts;
      const tracing = telemetry?.tracing?.workerOptions();
      return {
        ...rest,
        ...(telemetry ? { telemetry: telemetry.engine } : {}),
        ...(telemetry?.tracing ? { workflowInterceptorModules: telemetry.tracing.workflowInterceptorModules } : {}),
        ...(tracing ? { workerOptions: { interceptors: tracing.interceptors, sinks: tracing.sinks } } : {}),
        namespace: config.namespace,
        taskQueue: config.taskQueue,
        agent: defaultAgent(config),
        spillMaxInlineBytes: config.spillMaxInlineBytes,
        approval: config.approval,
        ...(config.mcpServers.length > 0
          ? {
              // A server's own media limit, else the one of SESSIONLOG_MAX_MEDIA_BYTES.
              mcpServers: config.mcpServers.map((server) => ({ maxMediaBytes: config.media.maxBytes, ...server })),
            }
          : {}),
        pacing: config.pacing,
        ...(config.tenantConcurrency !== undefined ? { tenantConcurrency: config.tenantConcurrency } : {}),
        tenantCaps: config.tenantCaps,
        media: config.media,
        context: {
          catalogue,
          ...(config.contextBudget !== undefined ? { policy: { budgetTokens: config.contextBudget } } : {}),
        },
      };
    },
    client(store: SessionStore): Omit<SessionClientOptions, 'temporal'> {
      return {
        store,
        taskQueue: config.taskQueue,
        tunables: config.tunables,
        checkAgent: agentCheck(catalogue),
        checkMedia: mediaCheck(catalogue, defaultAgent(config).model, config.media.unsupported),
        contextReport: contextReporter(config),
        tenantBudgets: config.tenantBudgets,
        tenantCaps: config.tenantCaps,
        media: { maxBytes: config.media.maxBytes, fetchImageUrls: config.media.fetchImageUrls },
      };
    },
    gateway(client: SessionClient, telemetry?: Telemetry): GatewayOptions {
      const { port: _port, ...gateway } = config.gateway;
      // The worker's agent: what a session that names no model or system prompt runs with.
      const { model, system } = defaultAgent(config);
      const agent = { model, ...(system !== undefined ? { system } : {}) };
      const listenerLimits = config.listenerLimits;
      const models = modelRouting(config);
      if (!telemetry) return { client, ...gateway, defaultAgent: agent, models, listenerLimits };
      // Fastify logs every request at info; that is for debugging sessions, not for every day.
      const verbose = config.telemetry.logLevel === 'debug' || config.telemetry.logLevel === 'trace';
      return {
        client,
        ...gateway,
        defaultAgent: agent,
        models,
        listenerLimits,
        telemetry: telemetry.gateway,
        logger: telemetry.logger.child(
          { component: 'gateway' },
          { level: verbose ? config.telemetry.logLevel : 'warn' },
        ),
      };
    },
  };
}

/**
 * A SessionClient over `store` and the configured (or dev) Temporal server. `lazy`: connect only
 * when a command first needs Temporal (reads of the store never do).
 */
export async function connectClient(
  config: Config,
  store: SessionStore,
  options: { lazy?: boolean; telemetry?: Telemetry } = {},
): Promise<SessionClient> {
  const clientOptions = runtimeOptions(config).client(store);
  const interceptors = options.telemetry?.tracing?.clientInterceptors();
  if (!options.lazy)
    return SessionClient.connect({
      address: temporalAddressFor(config),
      namespace: config.namespace,
      ...clientOptions,
      ...(interceptors ? { interceptors } : {}),
    });
  const address = config.temporalAddress ?? findRunningDev()?.temporalAddress ?? '127.0.0.1:7233';
  const temporal = new Client({ connection: Connection.lazy({ address }), namespace: config.namespace });
  return new SessionClient({ ...clientOptions, temporal });
}
