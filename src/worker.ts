/**
 * Worker assembly: one Temporal worker that runs the session workflow and its activities
 * against a store, a model provider and a tool registry.
 */
import { fileURLToPath } from 'node:url';
import type { DataConverter } from '@temporalio/common';
import { NativeConnection, Worker, bundleWorkflowCode, type WorkerOptions } from '@temporalio/worker';
import { SESSION_FAILURE_CONVERTER_PATH, SessionPayloadCodec } from './client/session-codec.js';
import { createActivities } from './activities/activities.js';
import type { ContextPolicy } from './context/compaction.js';
import type { TokenMeter } from './context/meter-types.js';
import { resolveContextDeps, type ContextDeps } from './context/deps.js';
import { resolveMediaPolicy, type MediaPolicy } from './context/media-policy.js';
import type { PrunerConfig } from './context/pruner.js';
import { spillText } from './context/spill.js';
import { createTokenMeter, type MeterMeasurement, type SessionTokenMeter } from './context/token-meter.js';
import type { AgentConfig } from './engine/agent.js';
import type { ToolResultShaper } from './engine/deps.js';
import type { EngineTelemetry } from './engine/telemetry.js';
import type { PacingConfig } from './engine/admission/pacing.js';
import { TenantGate } from './engine/admission/tenant-gate.js';
import type { PaceLimits } from './persistence/pacing.js';
import { createTurnEngine } from './engine/engine.js';
import { DEFAULT_MODEL_CATALOGUE, lookupModel, type ModelCatalogue } from './model/catalogue.js';
import type { ModelPort } from './model/provider.js';
import {
  CheckpointSchedule,
  DEFAULT_CHECKPOINT_POLICY,
  writeProjectionCheckpoint,
  type CheckpointPolicy,
} from './persistence/derived-history.js';
import type { SessionStore } from './persistence/store.js';
import type { ApprovalPolicy } from './tools/approval.js';
import { BUILTIN_TOOLS } from './tools/builtin.js';
import { McpToolSource, resolveMcpServers, type McpServerConfig, type ResolvedMcpServer } from './tools/mcp/index.js';
import { ToolRegistry, type ToolCollection } from './tools/registry.js';
import { SessionlogError, assertTenant, tenantCapsProblem, type TenantCaps } from './session/index.js';
import { DEFAULT_TASK_QUEUE } from './workflows/api.js';

/** The default context management: the catalogue's tokenizers and windows, calibrated by usage. */
function contextDeps(
  options: {
    policy?: Partial<ContextPolicy>;
    pruner?: Partial<PrunerConfig> | false;
    meter?: TokenMeter;
    catalogue?: ModelCatalogue;
  },
  media: MediaPolicy,
): ContextDeps {
  const catalogue = options.catalogue ?? DEFAULT_MODEL_CATALOGUE;
  const meter = options.meter ?? createTokenMeter({ catalogue, media });
  const calibration = 'calibration' in meter ? (meter as SessionTokenMeter).calibration : undefined;
  return resolveContextDeps({
    meter,
    contextWindow: (model) => lookupModel(catalogue, model).contextWindow,
    ...(options.policy ? { policy: options.policy } : {}),
    ...(options.pruner !== undefined ? { pruner: options.pruner } : {}),
    ...(calibration
      ? {
          onUsage: ({ model, measurement, usage }) => {
            const uncalibrated =
              (measurement as Partial<MeterMeasurement>).uncalibratedTokens ?? measurement.totalTokens;
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

/**
 * The worker's data converter: `own` (a caller's, if any) with the session codec after its codecs,
 * so every payload of a session workflow is sealed with the session's key (DESIGN §5.2), and the
 * failure converter that sends failure messages as sealed payloads.
 */
function sessionDataConverter(store: SessionStore, own: DataConverter | undefined): DataConverter {
  return {
    ...own,
    payloadCodecs: [...(own?.payloadCodecs ?? []), new SessionPayloadCodec(store.sessionKeys)],
    failureConverterPath: SESSION_FAILURE_CONVERTER_PATH,
  };
}

const cachedBundles = new Map<string, Promise<{ code: string }>>();

/**
 * The workflow bundle, built once per process for each set of workflow interceptor modules
 * (bundling takes seconds). Tracing adds its interceptors (src/telemetry); none by default.
 */
export function workflowBundle(interceptorModules: readonly string[] = []): Promise<{ code: string }> {
  const key = interceptorModules.join('\n');
  let bundle = cachedBundles.get(key);
  if (!bundle) {
    const ext = import.meta.url.endsWith('.ts') ? '.ts' : '.js';
    const workflowsPath = fileURLToPath(new URL(`./workflows/index${ext}`, import.meta.url));
    bundle = bundleWorkflowCode({
      workflowsPath,
      failureConverterPath: SESSION_FAILURE_CONVERTER_PATH,
      ...(interceptorModules.length > 0 ? { workflowInterceptorModules: [...interceptorModules] } : {}),
      logger: { log() {}, info() {}, warn() {}, error() {}, debug() {}, trace() {} },
    });
    cachedBundles.set(key, bundle);
  }
  return bundle;
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
  /** The model behind every turn: an OpenAI-compatible endpoint through {@link createOpenAIProvider}, or any {@link ModelPort}. */
  model: ModelPort;
  /**
   * The agent of sessions whose header names none: model, system prompt, tool names and
   * request limits. A session's own `agent` (given at start) overrides model, system and tools.
   */
  agent: AgentConfig;
  /**
   * The tools a session may name (default: {@link BUILTIN_TOOLS}; the agent's `tools` picks which of
   * them it offers): a registry, a list, or a record keyed by name, as the AI SDK's tool sets are
   * (sessionlog tools, `defineTool()`, AI SDK `tool()` and LangChain `tool()` objects).
   */
  tools?: ToolRegistry | ToolCollection;
  /**
   * Which calls wait for a person's approval when the tool itself does not say (default
   * `{mode: 'never'}`; `SESSIONLOG_APPROVAL`). A tool's own `approval` rule wins.
   */
  approval?: ApprovalPolicy;
  /**
   * MCP servers whose tools the worker offers to every session (DESIGN §5.4; `SESSIONLOG_MCP_SERVERS`):
   * stdio (`{name, command, args?, env?}`) or Streamable HTTP (`{name, url, headers?}`), each tool
   * named `<server>__<tool>`. Listed before the worker polls and again when a server says its list
   * changed; closed when the worker's run ends. See docs/typescript-api.md, "MCP servers as tool sources".
   */
  mcpServers?: readonly McpServerConfig[];
  /** Replaces the default spill shaper (preview + notice above `spillMaxInlineBytes`). */
  shapeToolResult?: ToolResultShaper;
  /** Tool output above this many UTF-8 bytes is logged as a head/tail preview (default 16 KiB). */
  spillMaxInlineBytes?: number;
  /**
   * Which media a request carries (context/media-policy.ts; default `DEFAULT_MEDIA_POLICY`: the
   * last 3 user turns' and the current tool round's). The default meter prices the same.
   */
  media?: Partial<MediaPolicy>;
  /** Context management (meter, pressure policy, pruner); `false` turns it off. */
  context?:
    | false
    | {
        policy?: Partial<ContextPolicy>;
        pruner?: Partial<PrunerConfig> | false;
        meter?: TokenMeter;
        catalogue?: ModelCatalogue;
        /** Learn context windows from providers' overflow refusals (default true). */
        learnLimits?: boolean;
      };
  /** How often a streaming model call or a running tool heartbeats, ms (default 1000). */
  heartbeatMs?: number;
  /**
   * When the worker refreshes a session's projection checkpoint after a turn (default: once the
   * log has grown 256 events and a quarter past the last one; see {@link CheckpointPolicy}).
   */
  checkpoints?: Partial<CheckpointPolicy>;
  /** Extra Temporal worker options (concurrency limits, heartbeat throttling…). */
  workerOptions?: Partial<WorkerOptions>;
  /** Metrics and traces of the turn engine (src/telemetry's `engine`); omit to run unobserved. */
  telemetry?: EngineTelemetry;
  /**
   * Pacing of model calls through the store's shared bucket (DESIGN §5.3): the limits to pace
   * by (requests and tokens per minute), or none to pace by what the provider states in its
   * rate-limit headers (the default; a provider that states none is not paced); `false`: off.
   */
  pacing?: { limits?: PaceLimits; key?: string } | false;
  /**
   * At most this many model steps and compactions of one tenant run at once on this worker
   * (engine/tenant-gate.ts); default 16. Keep `workerOptions.maxConcurrentActivityTaskExecutions`
   * well above it.
   */
  tenantConcurrency?: number;
  /**
   * Caps on what all of a tenant's sessions spend together (DESIGN §5.3): by tenant, or a
   * function asked before each check (so a caller can change them without a restart).
   */
  tenantCaps?: Readonly<Record<string, TenantCaps>> | ((tenant: string) => TenantCaps | undefined);
  /** Workflow interceptor modules bundled into the workflow code (tracing's); ignored when `workerOptions` brings its own bundle. */
  workflowInterceptorModules?: string[];
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
 *   model: createOpenAIProvider({ baseURL: 'https://api.deepseek.com', apiKey: process.env.DEEPSEEK_API_KEY!, provider: 'deepseek' }),
 *   agent: { model: 'deepseek-flash', tools: ['calculator'] },
 * });
 * await worker.run(); // until worker.shutdown()
 * await store.close();
 */
export async function createWorker(options: CreateWorkerOptions): Promise<Worker> {
  const resolved = resolveWorkerOptions(options);
  const connection = resolved.connection ?? (await NativeConnection.connect({ address: resolved.address }));
  const { store, context } = resolved;
  // Listed before the worker polls, so the first step already offers the servers' tools.
  const mcp =
    resolved.mcpServers.length > 0
      ? await McpToolSource.start(resolved.mcpServers, resolved.tools, 'mcpServers')
      : undefined;
  const checkpoints = new CheckpointSchedule(resolved.checkpoints);
  const engine = createTurnEngine({
    store,
    model: resolved.model,
    tools: resolved.tools,
    agent: resolved.agent,
    approval: resolved.approval,
    shapeToolResult: resolved.shapeToolResult,
    ...(context ? { context } : {}),
    media: resolved.media,
    heartbeatMs: resolved.heartbeatMs,
    learnedWindows: new Map(),
    ...(resolved.learnLimits ? {} : { learnLimits: false }),
    now: Date.now,
    onTurnEnded: (sessionId, headSeq) => checkpointProjections(store, checkpoints, sessionId, headSeq),
    ...(resolved.telemetry ? { telemetry: resolved.telemetry } : {}),
    ...(resolved.pacing ? { pacing: resolved.pacing } : {}),
    tenantGate: new TenantGate(resolved.tenantConcurrency),
    ...(resolved.tenantCaps ? { tenantCaps: resolved.tenantCaps } : {}),
  });
  // Load the tokenizer now: its vocabulary takes seconds to load, and loading it inside the
  // first model step would block that worker's heartbeats.
  context?.meter.messageTokens(
    { id: 'warm-up', role: 'user', content: [{ type: 'text', text: 'warm up' }], source: { kind: 'user' } },
    resolved.agent.model,
  );
  const worker = await Worker.create({
    connection,
    namespace: resolved.namespace,
    taskQueue: resolved.taskQueue,
    // A caller that supplies its own bundle (or workflowsPath) skips the seconds-long bundling.
    ...(resolved.workerOptions.workflowBundle || resolved.workerOptions.workflowsPath
      ? {}
      : { workflowBundle: await workflowBundle(resolved.workflowInterceptorModules) }),
    activities: createActivities(engine),
    ...resolved.workerOptions,
    dataConverter: sessionDataConverter(store, resolved.workerOptions.dataConverter),
  }).catch(async (error: unknown) => {
    await mcp?.close();
    throw error;
  });
  if (mcp) closeWithWorker(worker, mcp);
  return worker;
}

/** Closes the MCP connections when the worker's run ends: its stdio servers end with it. */
function closeWithWorker(worker: Worker, mcp: McpToolSource): void {
  const run = worker.run.bind(worker);
  worker.run = () => run().finally(() => mcp.close());
}

/** The defaults of {@link CreateWorkerOptions}, in one place. */
export const WORKER_DEFAULTS = {
  address: '127.0.0.1:7233',
  namespace: 'default',
  taskQueue: DEFAULT_TASK_QUEUE,
  approval: { mode: 'never' } as ApprovalPolicy,
  spillMaxInlineBytes: 16 * 1024,
  heartbeatMs: 1000,
  checkpoints: DEFAULT_CHECKPOINT_POLICY,
  tenantConcurrency: 16,
} as const;

/**
 * {@link CreateWorkerOptions} with every default filled in: what {@link createWorker} assembles
 * from, so nothing downstream falls back to a default of its own.
 */
export type ResolvedWorkerOptions = {
  address: string;
  connection: NativeConnection | undefined;
  namespace: string;
  taskQueue: string;
  store: SessionStore;
  model: ModelPort;
  agent: AgentConfig;
  tools: ToolRegistry;
  approval: ApprovalPolicy;
  mcpServers: ResolvedMcpServer[];
  shapeToolResult: ToolResultShaper;
  /** Context management; undefined when the caller turned it off (`context: false`). */
  context: ContextDeps | undefined;
  media: MediaPolicy;
  learnLimits: boolean;
  heartbeatMs: number;
  checkpoints: CheckpointPolicy;
  workerOptions: Partial<WorkerOptions>;
  telemetry: EngineTelemetry | undefined;
  pacing: PacingConfig | undefined;
  tenantConcurrency: number;
  tenantCaps: ((tenant: string) => TenantCaps | undefined) | undefined;
  workflowInterceptorModules: readonly string[];
};

/** Fills every default of `options` in one step ({@link WORKER_DEFAULTS}, the built-in tools, the catalogue's context management). */
export function resolveWorkerOptions(options: CreateWorkerOptions): ResolvedWorkerOptions {
  const maxInlineBytes = options.spillMaxInlineBytes ?? WORKER_DEFAULTS.spillMaxInlineBytes;
  const media = resolveMediaPolicy(options.media);
  return {
    address: options.address ?? WORKER_DEFAULTS.address,
    connection: options.connection,
    namespace: options.namespace ?? WORKER_DEFAULTS.namespace,
    taskQueue: options.taskQueue ?? WORKER_DEFAULTS.taskQueue,
    store: options.store,
    model: options.model,
    agent: options.agent,
    tools: options.tools instanceof ToolRegistry ? options.tools : new ToolRegistry(options.tools ?? BUILTIN_TOOLS),
    approval: options.approval ?? WORKER_DEFAULTS.approval,
    mcpServers: resolveMcpServers(options.mcpServers ?? [], 'mcpServers'),
    shapeToolResult:
      options.shapeToolResult ??
      (async ({ text, locator, toolName }) => spillText({ text, locator, toolName, maxInlineBytes })),
    context: options.context === false ? undefined : contextDeps(options.context ?? {}, media),
    media,
    learnLimits: options.context === false || options.context?.learnLimits !== false,
    heartbeatMs: options.heartbeatMs ?? WORKER_DEFAULTS.heartbeatMs,
    checkpoints: { ...WORKER_DEFAULTS.checkpoints, ...options.checkpoints },
    workerOptions: options.workerOptions ?? {},
    telemetry: options.telemetry,
    pacing:
      options.pacing === false
        ? undefined
        : {
            key: options.pacing?.key ?? options.model.paceKey ?? options.model.provider,
            ...(options.pacing?.limits ? { limits: options.pacing.limits } : {}),
          },
    tenantConcurrency: options.tenantConcurrency ?? WORKER_DEFAULTS.tenantConcurrency,
    tenantCaps: tenantCapsOf(options.tenantCaps),
    workflowInterceptorModules: options.workflowInterceptorModules ?? [],
  };
}

/**
 * Refreshes the projection cache once a turn is durable and the log has grown enough past the
 * last checkpoint (`CheckpointSchedule`), off the turn's critical path. Fail-soft: the cache may
 * lag the log, and reads fold the tail (and refresh it) or fall back to the log.
 */
function checkpointProjections(
  store: SessionStore,
  schedule: CheckpointSchedule,
  sessionId: string,
  headSeq: number,
): void {
  if (!schedule.due(sessionId, headSeq)) return;
  // Noted before the write, so the next turn does not start a second one meanwhile (a failed write waits for the next due point).
  schedule.wrote(sessionId, headSeq);
  void writeProjectionCheckpoint(store, sessionId)
    .then(({ asOfSeq }) => schedule.wrote(sessionId, asOfSeq))
    .catch((error: unknown) => {
      // The cache is an accelerator: a failed write leaves it stale.
      process.emitWarning(`projection checkpoint of session ${sessionId} failed: ${(error as Error).message}`);
    });
}

/** The tenant caps as the engine asks for them; a table's entries are checked here (a function's answers by the model step, before each check). */
function tenantCapsOf(
  caps: CreateWorkerOptions['tenantCaps'],
): ((tenant: string) => TenantCaps | undefined) | undefined {
  if (caps === undefined || typeof caps === 'function') return caps;
  const table = new Map<string, TenantCaps>();
  for (const [tenant, limits] of Object.entries(caps)) {
    assertTenant(tenant);
    const problem = tenantCapsProblem(limits);
    if (problem) throw new SessionlogError('INVALID_ARGUMENT', `tenantCaps.${tenant}: ${problem}`);
    table.set(tenant, limits);
  }
  return table.size === 0 ? undefined : (tenant) => table.get(tenant);
}
