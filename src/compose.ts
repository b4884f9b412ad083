/**
 * Composition (DESIGN §2): the parts a validated `Config` names, assembled for the CLI's runtime
 * (src/cli/runtime.ts) to build `dev`, `worker` and `serve` from: the store, the model, the
 * default agent, the client's checks and context report, and the gateway's model routing.
 * `config.ts` only validates; everything here opens, starts or builds.
 */
import { mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import type { Config } from './config.js';
import { createContextReporter } from './context/report.js';
import { createTokenMeter } from './context/token-meter.js';
import type { AgentConfig } from './engine/agent.js';
import type { ModelRouting } from './gateway/route-table.js';
import { ModelCatalogueError, lookupModel, type ModelCatalogue, type ResolvedModel } from './model/catalogue.js';
import type { FakeModelServer } from './model/fake-server.js';
import { createOpenAIProvider, type ModelPort } from './model/provider.js';
import { checkMediaSupported, type UnsupportedMedia } from './model/media-support.js';
import { takesForcedToolChoice } from './model/tool-choice.js';
import { openStore } from './persistence/open.js';
import { redactUrl } from './persistence/relational/postgres/store.js';
import type { SessionStore } from './persistence/store.js';
import { SessionlogError, type AgentSpec } from './session/index.js';
import { DEFAULT_AGENT_TOOLS } from './tools/builtin.js';

/** What the parts below return, for the CLI (which imports no store or model module itself: DESIGN §2). */
export type { ModelPort, SessionStore };

/** The agent of sessions that name none: the configured model and request settings with the default tools. */
export function defaultAgent(config: Config): AgentConfig {
  const m = config.model;
  return {
    model: m.name,
    tools: [...DEFAULT_AGENT_TOOLS],
    ...(m.system !== undefined ? { system: m.system } : {}),
    ...(m.maxTokens !== undefined ? { maxTokens: m.maxTokens } : {}),
    ...(m.thinking !== undefined ? { thinking: m.thinking } : {}),
    ...(m.reasoningEffort !== undefined ? { reasoningEffort: m.reasoningEffort } : {}),
  };
}

/** Opens the configured store, creating the parent directory of a default SQLite path. */
export async function openConfiguredStore(config: Config): Promise<SessionStore> {
  if (config.store.startsWith('sqlite:') && !config.store.startsWith('sqlite::memory:')) {
    mkdirSync(dirname(resolve(config.store.slice('sqlite:'.length))), { recursive: true, mode: 0o700 });
  }
  return openStore(config.store);
}

/** A store URL fit for a log line (no password). */
export function storeLabel(url: string): string {
  return url.startsWith('postgres') ? redactUrl(url) : url;
}

export type ModelRuntime = { model: ModelPort; offline?: FakeModelServer; description: string };

/** The latest requests (and reported usages) the offline model keeps, for its `/_control/requests`. */
export const OFFLINE_MODEL_KEPT_REQUESTS = 100;

/** The configured model, or the built-in offline model server when no API key is set. */
export async function startModel(config: Config): Promise<ModelRuntime> {
  const m = config.model;
  const common = { catalogue: config.catalogue, timeoutMs: m.timeoutMs, coalesce: { maxDelayMs: config.chunkFlushMs } };
  if (m.offline) {
    const { startFakeModelServer } = await import('./model/fake-server.js');
    // It runs as long as dev or the worker does: keeping every prompt for /_control/requests would hold them all.
    const offline = await startFakeModelServer({ model: m.name, keepRequests: OFFLINE_MODEL_KEPT_REQUESTS });
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
 * The client's media check (issue 50): a message's media must suit the model it goes to (the
 * catalogue's `input`; `model` undefined: the worker's default), else MEDIA_NOT_SUPPORTED naming
 * the part, unless SESSIONLOG_MEDIA_UNSUPPORTED is `stand-in`. A model the catalogue does not
 * know is left to the agent check.
 */
export function mediaCheck(
  catalogue: ModelCatalogue,
  defaultModel: string,
  unsupported: UnsupportedMedia,
): (model: string | undefined, parts: readonly { type: string }[]) => void {
  return (model, parts) => {
    let resolved: ResolvedModel;
    try {
      resolved = lookupModel(catalogue, model ?? defaultModel);
    } catch (error) {
      if (error instanceof ModelCatalogueError) return;
      throw error;
    }
    checkMediaSupported(resolved, parts, unsupported);
  };
}

/** The context report the client serves: the worker's meter, catalogue and budget, so both see one picture. */
export function contextReporter(config: Config): ReturnType<typeof createContextReporter> {
  return createContextReporter({
    meter: createTokenMeter({ catalogue: config.catalogue, media: config.media }),
    catalogue: config.catalogue,
    defaultModel: config.model.name,
    ...(config.contextBudget !== undefined ? { policy: { budgetTokens: config.contextBudget } } : {}),
  });
}

/**
 * The model names the gateway's OpenAI-compatible API lets requests use (issue 24): the
 * catalogue's models of the workers' provider, each as itself, and the aliases of those; the
 * default model always. Other names run the default or are refused (`unknownModels`). The
 * models that cannot be forced to call a tool are listed (`unforcedToolChoice`).
 */
export function modelRouting(config: Pick<Config, 'catalogue' | 'model' | 'unknownModels'>): ModelRouting {
  const names: Record<string, string> = { [config.model.name]: config.model.name };
  for (const [name, spec] of Object.entries(config.catalogue.models))
    if (spec.provider === config.model.provider) names[name] = name;
  for (const [alias, target] of Object.entries(config.catalogue.aliases))
    if (names[target.model] !== undefined) names[alias] = target.model;
  // Checked by the model a name runs (an alias runs its target), with the workers' thinking (model/tool-choice.ts).
  const unforced = [...new Set(Object.values(names))].filter(
    (model) =>
      config.catalogue.models[model] !== undefined &&
      !takesForcedToolChoice(lookupModel(config.catalogue, model), config.model.thinking),
  );
  return { names, unknown: config.unknownModels, ...(unforced.length > 0 ? { unforcedToolChoice: unforced } : {}) };
}
