/**
 * Worker assembly: one Temporal worker that runs the session workflow and its activities
 * against a store, a model provider and a tool registry.
 */
import { fileURLToPath } from 'node:url';
import { NativeConnection, Worker, bundleWorkflowCode, type WorkerOptions } from '@temporalio/worker';
import { resolveContextDeps, type ContextDeps } from './activities/context-activities.js';
import { createActivities, type AgentConfig, type ToolResultShaper } from './activities/session-activities.js';
import type { ContextPolicy } from './context/compaction.js';
import type { TokenMeter } from './context/meter-types.js';
import type { PrunerConfig } from './context/pruner.js';
import { spillText } from './context/spill.js';
import { createTokenMeter, type MeterMeasurement, type SessionTokenMeter } from './context/token-meter.js';
import { DEFAULT_MODEL_CATALOGUE, lookupModel, type ModelCatalogue } from './model/catalogue.js';
import type { ModelPort } from './activities/ports.js';
import { ModelCallError, classifyModelError } from './model/errors.js';
import type { ModelProvider } from './model/provider.js';
import type { SessionStore } from './persistence/store.js';
import { BUILTIN_TOOLS } from './tools/builtin.js';
import { ToolRegistry } from './tools/registry.js';
import { DEFAULT_TASK_QUEUE } from './workflows/api.js';

/** Adapts the OpenAI-compatible provider to the port the activities call. */
export function modelPort(provider: ModelProvider, providerName: string): ModelPort {
  return {
    provider: providerName,
    async stream({ messages, header, signal, onChunk }) {
      const result = await provider.streamCompletion({ messages, header, signal, onChunk });
      if (result.aborted) throw signal.reason ?? new Error('model call aborted');
      const resolved = provider.model(header.model);
      return {
        content: result.content,
        finishReason: result.finishReason ?? 'stop',
        ...(result.usage ? { usage: result.usage } : {}),
        provider: providerName,
        model: resolved.id,
      };
    },
    classify(error) {
      const failure = error instanceof ModelCallError ? error.failure : classifyModelError(error);
      return {
        code: failure.kind,
        message: failure.message,
        retryable: failure.retryable,
        ...(failure.status !== undefined ? { status: failure.status } : {}),
        ...(failure.retryAfterMs !== undefined ? { retryAfterMs: failure.retryAfterMs } : {}),
      };
    },
  };
}

/** The default context management: the catalogue's tokenizers and windows, calibrated by usage. */
function contextDeps(options: { policy?: Partial<ContextPolicy>; pruner?: Partial<PrunerConfig> | false; meter?: TokenMeter; catalogue?: ModelCatalogue }): ContextDeps {
  const catalogue = options.catalogue ?? DEFAULT_MODEL_CATALOGUE;
  const meter = options.meter ?? createTokenMeter({ catalogue });
  const calibration = 'calibration' in meter ? (meter as SessionTokenMeter).calibration : undefined;
  return resolveContextDeps({
    meter,
    contextWindow: (model) => lookupModel(catalogue, model).contextWindow,
    ...(options.policy ? { policy: options.policy } : {}),
    ...(options.pruner !== undefined ? { pruner: options.pruner } : {}),
    ...(calibration
      ? {
          onUsage: ({ model, measurement, usage }) => {
            const uncalibrated = (measurement as Partial<MeterMeasurement>).uncalibratedTokens ?? measurement.totalTokens;
            calibration.record({
              model,
              estimatedPromptTokens: uncalibrated,
              reportedPromptTokens: usage.inputTokens + (usage.cacheReadTokens ?? 0) + (usage.cacheWriteTokens ?? 0),
            });
          },
        }
      : {}),
  });
}

let cachedBundle: Promise<{ code: string }> | undefined;

/** The workflow bundle, built once per process (bundling takes seconds). */
export function workflowBundle(): Promise<{ code: string }> {
  const ext = import.meta.url.endsWith('.ts') ? '.ts' : '.js';
  const workflowsPath = fileURLToPath(new URL(`./workflows/index${ext}`, import.meta.url));
  cachedBundle ??= bundleWorkflowCode({ workflowsPath, logger: { log() {}, info() {}, warn() {}, error() {}, debug() {}, trace() {} } });
  return cachedBundle;
}

/** What {@link createWorker} assembles: where to poll, the store to write, the model and tools. */
export type CreateWorkerOptions = {
  /** Temporal frontend address, e.g. 127.0.0.1:7233 (ignored when `connection` is given; default 127.0.0.1:7233). */
  address?: string;
  /** An open connection to use instead of connecting to `address`; the caller closes it after the worker stops. */
  connection?: NativeConnection;
  /** Temporal namespace (default `default`). */
  namespace?: string;
  /** Task queue to poll; clients must start sessions on the same one (default `sessionlog`). */
  taskQueue?: string;
  /** The session store the activities append to; clients read from the same store. The caller closes it. */
  store: SessionStore;
  /** The model behind every turn (an OpenAI-compatible endpoint through {@link ModelProvider}). */
  provider: ModelProvider;
  /** Provider name logged in request headers (`deepseek`, `openai`, `fake`). */
  providerName: string;
  /**
   * The agent of sessions whose header names none: model, system prompt, tool names and
   * request limits. A session's own `agent` (given at start) overrides model, system and tools.
   */
  agent: AgentConfig;
  /** The tools a session may name (default: the built-in `read_artifact`, `calculator`, `word_count`). */
  tools?: ToolRegistry;
  /** Replaces the default spill shaper (preview + notice above `spillMaxInlineBytes`). */
  shapeToolResult?: ToolResultShaper;
  /** Tool output above this many UTF-8 bytes is logged as a head/tail preview (default 16 KiB). */
  spillMaxInlineBytes?: number;
  /** Context management (meter, pressure policy, pruner); `false` turns it off. */
  context?: false | { policy?: Partial<ContextPolicy>; pruner?: Partial<PrunerConfig> | false; meter?: TokenMeter; catalogue?: ModelCatalogue };
  /** Streamed reply chunks are coalesced into one `assistant/chunk` append per this window, ms (default 50). */
  chunkFlushMs?: number;
  /** …or as soon as this many characters are pending, whichever comes first (default 512). */
  chunkFlushChars?: number;
  /** Extra Temporal worker options (concurrency limits, heartbeat throttling…). */
  workerOptions?: Partial<WorkerOptions>;
};

/**
 * Creates (does not run) a worker for the session workflow. Call `worker.run()` and
 * `worker.shutdown()`; the caller owns the store and closes it after the worker stops.
 *
 * The first call in a process bundles the workflow code (seconds); later calls reuse the
 * bundle, and a caller that passes `workerOptions.workflowBundle` skips it. Without
 * `connection`, a connection to `address` is opened and lives as long as the process: pass
 * your own to close it. Session workflows can run on any number of workers polling the same
 * task queue, as long as all of them write to the same store.
 *
 * @example
 * const store = await openStore('sqlite:./sessions.db');
 * const worker = await createWorker({
 *   address: '127.0.0.1:7233',
 *   store,
 *   provider: createOpenAIProvider({ baseURL: 'https://api.deepseek.com', apiKey: process.env.DEEPSEEK_API_KEY! }),
 *   providerName: 'deepseek',
 *   agent: { model: 'deepseek-flash', tools: ['calculator'] },
 * });
 * await worker.run(); // until worker.shutdown()
 * await store.close();
 */
export async function createWorker(options: CreateWorkerOptions): Promise<Worker> {
  const connection = options.connection ?? (await NativeConnection.connect({ address: options.address ?? '127.0.0.1:7233' }));
  const maxInlineBytes = options.spillMaxInlineBytes ?? 16 * 1024;
  const shapeToolResult: ToolResultShaper =
    options.shapeToolResult ?? (async ({ text, locator, toolName }) => spillText({ text, locator, toolName, maxInlineBytes }));
  const context = options.context === false ? undefined : contextDeps(options.context ?? {});
  const activities = createActivities({
    store: options.store,
    model: modelPort(options.provider, options.providerName),
    tools: options.tools ?? new ToolRegistry(BUILTIN_TOOLS),
    agent: options.agent,
    chunkFlushMs: options.chunkFlushMs ?? 50,
    chunkFlushChars: options.chunkFlushChars ?? 512,
    shapeToolResult,
    ...(context ? { context } : {}),
  });
  // Load the tokenizer now: its vocabulary takes seconds to load, and loading it inside the
  // first model step would block that worker's heartbeats.
  context?.meter.messageTokens({ id: 'warm-up', role: 'user', content: [{ type: 'text', text: 'warm up' }], source: { kind: 'user' } }, options.agent.model);
  return Worker.create({
    connection,
    namespace: options.namespace ?? 'default',
    taskQueue: options.taskQueue ?? DEFAULT_TASK_QUEUE,
    // A caller that supplies its own bundle (or workflowsPath) skips the seconds-long bundling.
    ...(options.workerOptions?.workflowBundle || options.workerOptions?.workflowsPath ? {} : { workflowBundle: await workflowBundle() }),
    activities,
    ...options.workerOptions,
  });
}
