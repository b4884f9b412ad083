/**
 * Prometheus metrics of a sessionlog process (DESIGN §8 "Operations"), with `prom-client`: one
 * registry per process part (a worker's, a gateway's), exposed in the text format at `/metrics`.
 * docs/operations.md ("Metrics, traces and logs") lists every metric; the names below are that list.
 *
 * Label values are bounded sets: model names (the catalogue), tool names (the registry), store
 * backends, outcomes and failure codes. Session ids never become labels.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** Token counts of one model reply: uncached input, cached input (read), cache writes, output. */
export type TokenCounts = {
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens?: number;
  cacheWriteTokens?: number;
  reasoningTokens?: number;
};

export type MetricsOptions = {
  /** Node process metrics (CPU, memory, event-loop lag, GC) as prom-client collects them. Default true. */
  processMetrics?: boolean;
};

const SECONDS_TURN = [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600];
const SECONDS_MODEL = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];
const SECONDS_TTFT = [0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30];
const SECONDS_APPEND = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1];
const SECONDS_TOOL = [0.005, 0.025, 0.1, 0.5, 1, 5, 30, 120];
const EVENTS_PER_BATCH = [1, 2, 4, 8, 16, 32, 64, 128, 256];

/** The metrics of one process part, registered in their own registry. */
export class SessionlogMetrics {
  readonly registry = new Registry();
  readonly turnsStarted = new Counter({
    name: 'sessionlog_turns_started_total',
    help: 'Turns begun (turn/start logged).',
    registers: [this.registry],
  });
  readonly turnsFinished = new Counter({
    name: 'sessionlog_turns_finished_total',
    help: 'Turns ended (turn/end logged), by outcome: completed, error, aborted, max-steps, max-tokens, interrupted.',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });
  readonly turnDuration = new Histogram({
    name: 'sessionlog_turn_duration_seconds',
    help: 'From turn/start to turn/end as the log times them, by outcome.',
    labelNames: ['outcome'] as const,
    buckets: SECONDS_TURN,
    registers: [this.registry],
  });
  readonly modelCalls = new Counter({
    name: 'sessionlog_model_calls_total',
    help: 'Model calls by model, purpose (reply, summary) and outcome (ok, or the failure code: rate_limit, server, timeout, context_overflow, ...).',
    labelNames: ['model', 'purpose', 'outcome'] as const,
    registers: [this.registry],
  });
  readonly modelTimeToFirstToken = new Histogram({
    name: 'sessionlog_model_time_to_first_token_seconds',
    help: 'From the start of a model call to its first streamed delta, by model.',
    labelNames: ['model'] as const,
    buckets: SECONDS_TTFT,
    registers: [this.registry],
  });
  readonly modelDuration = new Histogram({
    name: 'sessionlog_model_call_duration_seconds',
    help: 'Whole model calls (first byte to last), by model and purpose; failed calls included.',
    labelNames: ['model', 'purpose'] as const,
    buckets: SECONDS_MODEL,
    registers: [this.registry],
  });
  readonly tokens = new Counter({
    name: 'sessionlog_model_tokens_total',
    help: 'Tokens the provider reported, by model and kind: input (uncached prompt), cached_input (prompt cache hits), cache_write, output.',
    labelNames: ['model', 'kind'] as const,
    registers: [this.registry],
  });
  readonly cost = new Counter({
    name: 'sessionlog_model_cost_usd_total',
    help: "Spend in USD by model: each reply's cost as the engine logged it (reported tokens at the catalogue's prices).",
    labelNames: ['model'] as const,
    registers: [this.registry],
  });
  readonly modelRetries = new Counter({
    name: 'sessionlog_model_retries_total',
    help: 'Transient model failures logged as llm/retry, by failure code.',
    labelNames: ['code'] as const,
    registers: [this.registry],
  });
  readonly contextOverflows = new Counter({
    name: 'sessionlog_context_overflows_total',
    help: 'Model calls the provider refused as over its context window, by model.',
    labelNames: ['model'] as const,
    registers: [this.registry],
  });
  readonly compactions = new Counter({
    name: 'sessionlog_compactions_total',
    help: 'Compaction brackets closed, by trigger (pressure, context-overflow, manual) and outcome (ok, error).',
    labelNames: ['trigger', 'outcome'] as const,
    registers: [this.registry],
  });
  readonly prunes = new Counter({
    name: 'sessionlog_prunes_total',
    help: 'Tool results shortened by the pruner (compaction/prune events).',
    registers: [this.registry],
  });
  readonly spills = new Counter({
    name: 'sessionlog_spills_total',
    help: 'Tool outputs logged as a preview of their stored artifact, by tool.',
    labelNames: ['tool'] as const,
    registers: [this.registry],
  });
  readonly toolCalls = new Counter({
    name: 'sessionlog_tool_calls_total',
    help: 'Tool runs by tool and outcome: ok, error (an error result the model sees), failed (the attempt threw and is retried).',
    labelNames: ['tool', 'outcome'] as const,
    registers: [this.registry],
  });
  readonly toolDuration = new Histogram({
    name: 'sessionlog_tool_duration_seconds',
    help: 'Tool runs, by tool.',
    labelNames: ['tool'] as const,
    buckets: SECONDS_TOOL,
    registers: [this.registry],
  });
  readonly appendDuration = new Histogram({
    name: 'sessionlog_append_duration_seconds',
    help: 'One durable append of a batch to a session log, by store backend (sqlite, jsonl, postgres).',
    labelNames: ['backend'] as const,
    buckets: SECONDS_APPEND,
    registers: [this.registry],
  });
  readonly appendBatchSize = new Histogram({
    name: 'sessionlog_append_batch_events',
    help: 'Events per appended batch, by store backend.',
    labelNames: ['backend'] as const,
    buckets: EVENTS_PER_BATCH,
    registers: [this.registry],
  });
  readonly sseClients = new Gauge({
    name: 'sessionlog_sse_clients',
    help: 'Open server-sent event streams on this gateway.',
    registers: [this.registry],
  });
  readonly httpConnections = new Gauge({
    name: 'sessionlog_http_connections',
    help: 'Open connections of the HTTP listener, by state: open (all), waiting (on their clients: headers or body still coming, or idle between keep-alive requests).',
    labelNames: ['state'] as const,
    registers: [this.registry],
  });
  readonly httpConnectionsClosed = new Counter({
    name: 'sessionlog_http_connections_closed_total',
    help: 'Connections the listener closed for its limits, by reason: per_address (refused with 429: the address held its limit), waiting (the longest-waiting one closed with 408 to make room).',
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });
  readonly crossTenant = new Counter({
    name: 'sessionlog_cross_tenant_refusals_total',
    help: "Requests refused (404) because they named another tenant's session, by the requesting token's tenant.",
    labelNames: ['tenant'] as const,
    registers: [this.registry],
  });
  private connectionsSeen = { refused: 0, evicted: 0 };
  /** Sets the connection figures from the listener's running counts. */
  recordConnections(stats: { open: number; waiting: number; refused: number; evicted: number }): void {
    this.httpConnections.set({ state: 'open' }, stats.open);
    this.httpConnections.set({ state: 'waiting' }, stats.waiting);
    this.httpConnectionsClosed.inc({ reason: 'per_address' }, stats.refused - this.connectionsSeen.refused);
    this.httpConnectionsClosed.inc({ reason: 'waiting' }, stats.evicted - this.connectionsSeen.evicted);
    this.connectionsSeen = { refused: stats.refused, evicted: stats.evicted };
  }
  readonly processFaults = new Counter({
    name: 'sessionlog_process_faults_total',
    help: 'Uncaught exceptions and unhandled rejections, by kind (exception, rejection) and disposition: request (the fault belonged to one HTTP request, whose connection was closed; the process kept serving) exit (the process exited non-zero for its supervisor to restart it) or stopping (the process was already stopping and went on).',
    labelNames: ['kind', 'disposition'] as const,
    registers: [this.registry],
  });
  readonly pendingApprovals = new Gauge({
    name: 'sessionlog_pending_approvals',
    help: 'Tool calls waiting for an answer (approval or external result) in the sessions this worker last wrote to, counted from their logs.',
    registers: [this.registry],
  });

  constructor(options: MetricsOptions = {}) {
    if (options.processMetrics !== false) collectDefaultMetrics({ register: this.registry });
  }

  /** Counts the tokens of one reply and its cost (USD, as the engine logged it; undefined: no prices known). */
  recordUsage(model: string, usage: TokenCounts, costUsd: number | undefined): void {
    const cached = usage.cacheReadTokens ?? 0;
    const written = usage.cacheWriteTokens ?? 0;
    this.tokens.inc({ model, kind: 'input' }, usage.inputTokens);
    this.tokens.inc({ model, kind: 'output' }, usage.outputTokens);
    if (cached > 0) this.tokens.inc({ model, kind: 'cached_input' }, cached);
    if (written > 0) this.tokens.inc({ model, kind: 'cache_write' }, written);
    if (costUsd !== undefined) this.cost.inc({ model }, costUsd);
  }

  /** Sets the pending-approvals gauge (the engine observer reports the sum over the sessions it wrote to). */
  setPendingApprovals(count: number): void {
    this.pendingApprovals.set(count);
  }

  /** The registry in the Prometheus text format, with its content type. */
  async exposition(): Promise<{ contentType: string; text: string }> {
    return { contentType: this.registry.contentType, text: await this.registry.metrics() };
  }
}
