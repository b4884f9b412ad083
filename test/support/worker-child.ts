/**
 * A sessionlog worker as a child process, for crash tests (DESIGN §10): the parent kills it
 * with SIGKILL and starts a fresh one. Run with `node --import tsx test/support/worker-child.ts`.
 *
 * Configured by environment variables:
 *   TEMPORAL_ADDRESS        Temporal frontend (required)
 *   SESSIONLOG_STORE        store URL for `openStore`, e.g. `sqlite:/tmp/x/sessions.db` (required)
 *   FAKE_MODEL_BASE_URL     the fake model server's `…/v1` base URL (required)
 *   FAKE_MODEL_API_KEY      the key the worker's model client sends (default `test-key`)
 *   SESSIONLOG_TASK_QUEUE   task queue (required)
 *   WORKFLOW_BUNDLE_PATH    a prebuilt workflow bundle (skips bundling, which takes seconds)
 *   CHILD_WAIT_FOR_GO       when `1`, get everything ready (imports, store, connection, worker)
 *                           but start polling only after a `go` line on stdin, so a parent can
 *                           prepare the replacement of a worker it is about to kill
 *   CHILD_HOLD_APPEND       `before:REGEX` or `after:REGEX`: the first append whose op matches
 *                           REGEX is held forever, before it is written or after it committed,
 *                           and reported, so the parent can kill the worker inside an append.
 *   CHILD_SIDE_EFFECT_FILE  enables the `record` tool, which appends to this file
 *   CHILD_MCP_SERVERS       the worker's `mcpServers`, as JSON (SESSIONLOG_MCP_SERVERS's form)
 *   OTEL_EXPORTER_OTLP_ENDPOINT  when set, the worker runs with sessionlog's telemetry and traces
 *                           to this OTLP/HTTP endpoint (its log lines go to stderr; a prebuilt
 *                           WORKFLOW_BUNDLE_PATH must then include the tracing interceptors).
 *   CHILD_MODEL_IDLE_MS     how long a model stream may send nothing before it fails (default
 *                           20000): shorter than a SIGSTOP, so the stream of a resumed worker
 *                           fails at once
 *   CHILD_ONE_ACTIVITY      when `1`, run one activity at a time (so no activity poll is open
 *                           while one runs) and keep two workflow-task polls: the server still
 *                           hands tasks to the open polls of a worker stopped with SIGSTOP, and
 *                           each is lost to a timeout before another worker gets it
 *
 * Besides the built-in tools the worker has a `sleep` tool (`{ms}`) that waits while
 * honouring the activity's abort signal, so "kill during a tool" is reliable; with
 * CHILD_SIDE_EFFECT_FILE also a `record` tool (`{note}`) that needs approval and appends one
 * line (`callId note`) to that file per run, so the parent counts runs across worker processes.
 *
 * It prints one JSON object per line on stdout: `{"event":"armed"}` when it waits for `go`,
 * `{"event":"ready"}` once polling,
 * `{"event":"tool-start","callId":…,"ms":…}` when a sleep starts, `{"event":"hold",…}` when
 * an append is held. SIGTERM shuts the worker down gracefully.
 */
import { appendFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { countOrdinaryTokens } from '../../src/model/deepseek-tokens.js';
import { createOpenAIProvider } from '../../src/model/provider.js';
import { openStore } from '../../src/persistence/open.js';
import type { SessionStore } from '../../src/persistence/store.js';
import { BUILTIN_TOOLS } from '../../src/tools/builtin.js';
import { ToolInputError, ToolRegistry, type Tool } from '../../src/tools/registry.js';
import { startTelemetry } from '../../src/telemetry/index.js';
import { createWorker, type CreateWorkerOptions } from '../../src/worker.js';

function required(name: string): string {
  const value = process.env[name];
  if (!value) {
    process.stderr.write(`worker-child: ${name} must be set\n`);
    process.exit(2);
  }
  return value;
}

function report(event: Record<string, unknown>): void {
  process.stdout.write(`${JSON.stringify({ ...event, pid: process.pid, at: Date.now() })}\n`);
}

const sleepTool: Tool = {
  name: 'sleep',
  description: 'Waits the given number of milliseconds, then says so.',
  parameters: {
    type: 'object',
    properties: { ms: { type: 'integer', minimum: 0, maximum: 60000 } },
    required: ['ms'],
    additionalProperties: false,
  },
  async run(args, context) {
    const ms = (args as { ms?: unknown } | null)?.ms;
    if (typeof ms !== 'number' || !Number.isInteger(ms) || ms < 0 || ms > 60_000)
      throw new ToolInputError('sleep: ms must be an integer 0-60000');
    report({ event: 'tool-start', sessionId: context.sessionId, callId: context.callId, ms });
    await sleep(ms, undefined, { signal: context.signal });
    return { text: `slept ${ms} ms` };
  },
};

/** A tool with an effect outside the worker: one line appended to `file` per run (approval required). */
function recordTool(file: string): Tool {
  return {
    name: 'record',
    description: 'Records a note (needs approval).',
    parameters: { type: 'object', properties: { note: { type: 'string' } }, required: ['note'] },
    approval: 'always',
    run(args, context) {
      const note = (args as { note?: unknown } | null)?.note;
      if (typeof note !== 'string') throw new ToolInputError('record: note must be a string');
      appendFileSync(file, `${context.callId} ${note}\n`);
      report({ event: 'tool-run', sessionId: context.sessionId, callId: context.callId });
      return Promise.resolve({ text: `recorded ${note}` });
    },
  };
}

/** Wraps `store` so the first append whose op matches `rule` hangs (before or after it is written). */
function holdingStore(store: SessionStore, rule: string | undefined): SessionStore {
  if (!rule) return store;
  const colon = rule.indexOf(':');
  const when = rule.slice(0, colon);
  const pattern = new RegExp(rule.slice(colon + 1));
  if (when !== 'before' && when !== 'after')
    throw new Error(`CHILD_HOLD_APPEND must be before:REGEX or after:REGEX, got ${rule}`);
  let held = false;
  const hold = async (id: string, op: string, committed: boolean): Promise<never> => {
    report({ event: 'hold', when, sessionId: id, op, committed });
    // The parent kills this process now; never return.
    for (;;) await sleep(60_000);
  };
  return new Proxy(store, {
    get(target, property, receiver) {
      if (property !== 'append') {
        const value: unknown = Reflect.get(target, property, receiver);
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      }
      const append: SessionStore['append'] = async (id, events, options) => {
        const matches = !held && pattern.test(options.op);
        if (matches) held = true;
        if (matches && when === 'before') return hold(id, options.op, false);
        const result = await target.append(id, events, options);
        if (matches) return hold(id, options.op, true);
        return result;
      };
      return append;
    },
  });
}

const otlpEndpoint = process.env.OTEL_EXPORTER_OTLP_ENDPOINT;
const telemetry = otlpEndpoint
  ? await startTelemetry(
      { serviceName: 'sessionlog-worker', logLevel: 'info', logFormat: 'json', otlpEndpoint, captureContent: false },
      { logDestination: { write: (line: string) => void process.stderr.write(line) } },
    )
  : undefined;
if (telemetry) await telemetry.installTemporalRuntime();
else Runtime.install({ logger: new DefaultLogger('WARN') });
const tracing = telemetry?.tracing?.workerOptions();

const address = required('TEMPORAL_ADDRESS');
const storeUrl = required('SESSIONLOG_STORE');
const baseURL = required('FAKE_MODEL_BASE_URL');
const taskQueue = required('SESSIONLOG_TASK_QUEUE');
const bundlePath = process.env.WORKFLOW_BUNDLE_PATH;
const sideEffectFile = process.env.CHILD_SIDE_EFFECT_FILE;

const baseStore = await openStore(storeUrl, { pollIntervalMs: 20 });
const store = holdingStore(baseStore, process.env.CHILD_HOLD_APPEND);
const provider = createOpenAIProvider({
  baseURL,
  apiKey: process.env.FAKE_MODEL_API_KEY ?? 'test-key',
  timeoutMs: 20_000,
  idleTimeoutMs: Number(process.env.CHILD_MODEL_IDLE_MS ?? 20_000),
  provider: 'fake',
  coalesce: { maxDelayMs: 30 },
});
const worker = await createWorker({
  address,
  taskQueue,
  store,
  model: provider,
  agent: {
    model: 'fake',
    system: 'You are a test assistant.',
    tools: ['read_artifact', 'calculator', 'sleep', ...(sideEffectFile ? ['record'] : [])],
  },
  tools: new ToolRegistry([...BUILTIN_TOOLS, sleepTool, ...(sideEffectFile ? [recordTool(sideEffectFile)] : [])]),
  ...(process.env.CHILD_MCP_SERVERS
    ? { mcpServers: JSON.parse(process.env.CHILD_MCP_SERVERS) as CreateWorkerOptions['mcpServers'] }
    : {}),
  ...(telemetry ? { telemetry: telemetry.engine } : {}),
  ...(telemetry?.tracing ? { workflowInterceptorModules: telemetry.tracing.workflowInterceptorModules } : {}),
  workerOptions: {
    ...(tracing ? { sinks: tracing.sinks, interceptors: tracing.interceptors } : {}),
    maxHeartbeatThrottleInterval: '500ms',
    defaultHeartbeatThrottleInterval: '500ms',
    // After a kill, tasks parked on this worker's sticky queue move to the normal queue fast.
    stickyQueueScheduleToStartTimeout: '1s',
    shutdownGraceTime: '2s',
    ...(process.env.CHILD_ONE_ACTIVITY === '1'
      ? { maxConcurrentActivityTaskExecutions: 1, maxConcurrentActivityTaskPolls: 1, maxConcurrentWorkflowTaskPolls: 2 }
      : {}),
    ...(bundlePath ? { workflowBundle: { codePath: bundlePath } } : {}),
    ...(process.env.CHILD_DEBUG === '1'
      ? {
          interceptors: {
            activity: [
              (ctx) => ({
                inbound: {
                  async execute(input, next) {
                    const name = `${ctx.info.activityType} attempt ${ctx.info.attempt} ${ctx.info.workflowExecution?.workflowId}`;
                    process.stderr.write(`${new Date().toISOString()} activity start ${name}\n`);
                    try {
                      const out = await next(input);
                      process.stderr.write(`${new Date().toISOString()} activity done ${name}\n`);
                      return out;
                    } catch (error) {
                      process.stderr.write(
                        `${new Date().toISOString()} activity failed ${name}: ${(error as Error).message}\n`,
                      );
                      throw error;
                    }
                  },
                },
              }),
            ],
          },
        }
      : {}),
  },
});

// Load the DeepSeek vocabulary now: the token meter loads it synchronously on first use (seconds
// on a busy machine), which would block heartbeats of the first model steps past a short
// heartbeat timeout.
countOrdinaryTokens('warm up');

if (process.env.CHILD_WAIT_FOR_GO === '1') {
  report({ event: 'armed' });
  const go = await new Promise<boolean>((resolve) => {
    const lines = createInterface({ input: process.stdin });
    lines.on('line', (line) => {
      if (line.trim() === 'go') {
        resolve(true);
        lines.close();
      }
    });
    lines.on('close', () => resolve(false));
  });
  if (!go) {
    // The parent went away without starting this worker.
    await baseStore.close();
    process.exit(0);
  }
}

let stopping = false;
process.on('SIGTERM', () => {
  if (stopping) return;
  stopping = true;
  worker.shutdown();
});

const running = worker.run();
report({ event: 'ready' });
try {
  await running;
} finally {
  await baseStore.close();
  await telemetry?.shutdown();
}
