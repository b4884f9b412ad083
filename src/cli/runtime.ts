/**
 * Assembly shared by the CLI commands: the store, the model provider (or the built-in offline
 * model), the Temporal address (from config or a running `sessionlog dev`), and the client.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SessionClient } from '../client/session-client.js';
import { ConfigError, type Config } from '../config.js';
import type { FakeModelServer } from '../model/fake-server.js';
import { createOpenAIProvider, type ModelProvider } from '../model/provider.js';
import { openStore } from '../persistence/open.js';
import type { SessionStore } from '../persistence/store.js';
import type { CreateWorkerOptions } from '../worker.js';

/** The package root (holds package.json and scripts/), found from this module's location. */
export function packageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 6; i++) {
    const manifest = join(dir, 'package.json');
    if (existsSync(manifest) && (JSON.parse(readFileSync(manifest, 'utf8')) as { name?: string }).name === 'sessionlog') return dir;
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
  throw new ConfigError('TEMPORAL_ADDRESS is not set and no `sessionlog dev` is running here: start `sessionlog dev`, or set TEMPORAL_ADDRESS=host:port');
}

/** Opens the configured store, creating the parent directory of a default SQLite path. */
export async function openConfiguredStore(config: Config): Promise<SessionStore> {
  if (config.store.startsWith('sqlite:') && !config.store.startsWith('sqlite::memory:')) {
    mkdirSync(dirname(resolve(config.store.slice('sqlite:'.length))), { recursive: true, mode: 0o700 });
  }
  return openStore(config.store);
}

export type ModelRuntime = { provider: ModelProvider; providerName: string; offline?: FakeModelServer; description: string };

/** The configured provider, or the built-in offline model server when no API key is set. */
export async function startModel(config: Config): Promise<ModelRuntime> {
  const m = config.model;
  if (m.offline) {
    const { startFakeModelServer } = await import('../model/fake-server.js');
    const offline = await startFakeModelServer({ model: m.name });
    return {
      provider: createOpenAIProvider({ baseURL: offline.baseURL, apiKey: 'offline', timeoutMs: m.timeoutMs }),
      providerName: 'fake',
      offline,
      description: `offline model (no OPENAI_API_KEY or DEEPSEEK_API_KEY set): replies echo your message; set a key to use ${'deepseek-flash'}`,
    };
  }
  return {
    provider: createOpenAIProvider({ baseURL: m.baseURL!, apiKey: m.apiKey ?? 'none', timeoutMs: m.timeoutMs }),
    providerName: m.provider,
    description: `${m.name} at ${m.baseURL}`,
  };
}

/** A SessionClient connected to the configured (or dev) Temporal server and store. */
export async function connectClient(config: Config, store: SessionStore): Promise<SessionClient> {
  return SessionClient.connect({ address: temporalAddressFor(config), namespace: config.namespace, store, taskQueue: config.taskQueue, tunables: config.tunables });
}

/** The agent of sessions that name none, from the model settings (one function for `dev` and `worker`). */
export function configuredAgent(config: Config): CreateWorkerOptions['agent'] {
  const m = config.model;
  return {
    model: m.name,
    tools: ['read_artifact', 'calculator', 'word_count'],
    ...(m.system !== undefined ? { system: m.system } : {}),
    ...(m.maxTokens !== undefined ? { maxTokens: m.maxTokens } : {}),
    ...(m.thinking !== undefined ? { thinking: m.thinking } : {}),
    ...(m.reasoningEffort !== undefined ? { reasoningEffort: m.reasoningEffort } : {}),
  };
}
