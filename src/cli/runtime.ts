/**
 * Assembly shared by the CLI commands: the store, the model (or the built-in offline model),
 * the Temporal address (from config or a running `sessionlog dev`), and the one function that
 * turns a `Config` into worker, client, gateway and telemetry options for `dev`, `worker` and
 * `serve`.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client, Connection } from '@temporalio/client';
import type { NativeConnection } from '@temporalio/worker';
import { SessionClient, type SessionClientOptions } from '../client/session-client.js';
import { ConfigError, type Config } from '../config.js';
import { createContextReporter } from '../context/report.js';
import { createTokenMeter } from '../context/token-meter.js';
import type { GatewayOptions } from '../gateway/server.js';
import { ModelCatalogueError, lookupModel, type ModelCatalogue } from '../model/catalogue.js';
import type { FakeModelServer } from '../model/fake-server.js';
import { createOpenAIProvider, type ModelPort } from '../model/provider.js';
import { openStore } from '../persistence/open.js';
import type { SessionStore } from '../persistence/store.js';
import { SessionlogError, type AgentSpec } from '../session/index.js';
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

/** Where `sessionlog dev` keeps its data: ./.sessionlog next to the default store. */
export const DEV_DIR = '.sessionlog';
const DEV_STATE = 'dev.json';

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

/** The state of a `sessionlog dev` running from this directory, if one is. */
export function readDevState(dir = DEV_DIR): DevState | undefined {
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

/** The Temporal address to use: configured, else a running `sessionlog dev`'s, else a clear error. */
export function temporalAddressFor(config: Config): string {
  if (config.temporalAddress) return config.temporalAddress;
  const dev = readDevState();
  if (dev) return dev.temporalAddress;
  throw new ConfigError(
    'TEMPORAL_ADDRESS is not set and no `sessionlog dev` is running here: start `sessionlog dev`, or set TEMPORAL_ADDRESS=host:port',
  );
}

/** Opens the configured store, creating the parent directory of a default SQLite path. */
export async function openConfiguredStore(config: Config): Promise<SessionStore> {
  if (config.store.startsWith('sqlite:') && !config.store.startsWith('sqlite::memory:')) {
    mkdirSync(dirname(resolve(config.store.slice('sqlite:'.length))), { recursive: true, mode: 0o700 });
  }
  return openStore(config.store);
}

export type ModelRuntime = { model: ModelPort; offline?: FakeModelServer; description: string };

/** The configured model, or the built-in offline model server when no API key is set. */
export async function startModel(config: Config): Promise<ModelRuntime> {
  const m = config.model;
  const common = { catalogue: config.catalogue, timeoutMs: m.timeoutMs, coalesce: { maxDelayMs: config.chunkFlushMs } };
  if (m.offline) {
    const { startFakeModelServer } = await import('../model/fake-server.js');
    const offline = await startFakeModelServer({ model: m.name });
    return {
      model: createOpenAIProvider({ ...common, baseURL: offline.baseURL, apiKey: 'offline', provider: 'fake' }),
      offline,
      description: `offline model (no OPENAI_API_KEY or DEEPSEEK_API_KEY set): replies echo your message; set a key to use ${'deepseek-flash'}`,
    };
  }
  return {
    model: createOpenAIProvider({ ...common, baseURL: m.baseURL!, apiKey: m.apiKey ?? 'none', provider: m.provider }),
    description: `${m.name} at ${m.baseURL}`,
  };
}

/** Refuses an agent whose model `catalogue` does not know (SessionlogError UNKNOWN_MODEL). */
export function agentCheck(catalogue: ModelCatalogue): (agent: AgentSpec) => void {
  return (agent) => {
    if (agent.model === undefined) return;
    try {
      lookupModel(catalogue, agent.model);
    } catch (error) {
      if (error instanceof ModelCatalogueError) throw new SessionlogError('UNKNOWN_MODEL', error.message);
      throw error;
    }
  };
}

/**
 * The one translation of a `Config` into the options of the parts `dev`, `worker` and `serve`
 * run: the worker's agent and limits, the client's checks and meter, the gateway's listener.
 */
export function runtimeOptions(config: Config) {
  const catalogue = config.catalogue;
  return {
    /** Starts this part's telemetry: metrics priced from the catalogue, logs at SESSIONLOG_LOG_LEVEL (readable in dev), tracing when configured. */
    telemetry(part: ProcessPart, options: Parameters<typeof startTelemetry>[1] = {}): Promise<Telemetry> {
      return startTelemetry(
        {
          serviceName: `sessionlog-${part}`,
          logLevel: config.telemetry.logLevel,
          logFormat: part === 'dev' ? 'pretty' : 'json',
          otlpEndpoint: config.telemetry.otlpEndpoint,
          captureContent: config.telemetry.captureContent,
        },
        { prices: (model) => pricesOf(catalogue, model), ...options },
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
        agent: {
          model: config.model.name,
          tools: ['read_artifact', 'calculator', 'word_count'],
          ...(config.model.system !== undefined ? { system: config.model.system } : {}),
          ...(config.model.maxTokens !== undefined ? { maxTokens: config.model.maxTokens } : {}),
          ...(config.model.thinking !== undefined ? { thinking: config.model.thinking } : {}),
          ...(config.model.reasoningEffort !== undefined ? { reasoningEffort: config.model.reasoningEffort } : {}),
        },
        spillMaxInlineBytes: config.spillMaxInlineBytes,
        approval: config.approval,
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
        contextReport: createContextReporter({
          meter: createTokenMeter({ catalogue }),
          catalogue,
          defaultModel: config.model.name,
          ...(config.contextBudget !== undefined ? { policy: { budgetTokens: config.contextBudget } } : {}),
        }),
      };
    },
    gateway(client: SessionClient, telemetry?: Telemetry): GatewayOptions {
      const { port: _port, ...gateway } = config.gateway;
      // The worker's agent (above): what a session that names no model or system prompt runs with.
      const defaultAgent = {
        model: config.model.name,
        ...(config.model.system !== undefined ? { system: config.model.system } : {}),
      };
      const listenerLimits = config.listenerLimits;
      if (!telemetry) return { client, ...gateway, defaultAgent, listenerLimits };
      // Fastify logs every request at info; that is for debugging sessions, not for every day.
      const verbose = config.telemetry.logLevel === 'debug' || config.telemetry.logLevel === 'trace';
      return {
        client,
        ...gateway,
        defaultAgent,
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
  const address = config.temporalAddress ?? readDevState()?.temporalAddress ?? '127.0.0.1:7233';
  const temporal = new Client({ connection: Connection.lazy({ address }), namespace: config.namespace });
  return new SessionClient({ ...clientOptions, temporal });
}

/** A model's prices from the catalogue, for the cost estimate; none for a model it does not know. */
function pricesOf(catalogue: Config['catalogue'], model: string) {
  try {
    return lookupModel(catalogue, model).prices;
  } catch (error) {
    // A model the catalogue does not know has no price: its tokens are counted, its cost is not.
    if (error instanceof ModelCatalogueError) return undefined;
    throw error;
  }
}
