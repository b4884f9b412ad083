/**
 * Operations telemetry of one process part (DESIGN §8 "Operations"), shared by worker and
 * gateway: Prometheus metrics, OpenTelemetry tracing (only when an OTLP endpoint is set), and
 * structured logs. `startTelemetry` builds it from settings; the CLI's one Config function
 * (src/cli/runtime.ts) wires its pieces into the worker, the client and the gateway.
 */
import { SpanKind, SpanStatusCode, context, trace } from '@opentelemetry/api';
import type { Logger } from 'pino';
import { SESSION_ID, TURN } from './attributes.js';
import { createEngineObserver } from './engine-observer.js';
import { createLogger, temporalLogger, type LogLevelSetting } from './logging.js';
import { SessionlogMetrics } from './metrics.js';
import type { OpsRoute } from './ops-server.js';
import type { TemporalMetricsBridge } from './temporal-metrics.js';
import type { Tracing } from './tracing.js';

export { SessionlogMetrics } from './metrics.js';
export { createLogger, scrubSecrets, temporalLogger, LOG_LEVELS, type LogLevelSetting } from './logging.js';
export type { Tracing } from './tracing.js';

/**
 * What `startTelemetry` is started from: the service name, log level and format, and the OTLP
 * endpoint and content capture of tracing (`SESSIONLOG_LOG_LEVEL`, `OTEL_EXPORTER_OTLP_ENDPOINT`,
 * `SESSIONLOG_TRACE_CONTENT`).
 */
export type TelemetrySettings = {
  /** `service.name` of spans and the `name` of log lines: `sessionlog-worker`, `sessionlog-gateway`, `sessionlog-dev`. */
  serviceName: string;
  logLevel: LogLevelSetting;
  logFormat: 'json' | 'pretty';
  /** OTLP/HTTP endpoint (`OTEL_EXPORTER_OTLP_ENDPOINT`); unset: no tracing, no SDK loaded. */
  otlpEndpoint: string | undefined;
  /** Record prompt and reply text in spans (`SESSIONLOG_TRACE_CONTENT`, default off). */
  captureContent: boolean;
};

/**
 * Replacements for `startTelemetry`'s destinations (the log stream, the span exporter) and its
 * optional parts, for tests and benchmarks.
 */
export type TelemetryOptions = {
  /** Replaces the log destination (tests). */
  logDestination?: Parameters<typeof createLogger>[0]['destination'];
  /** Replaces the OTLP exporter when tracing is on (tests, benchmarks). */
  spanExporter?: import('@opentelemetry/sdk-trace-base').SpanExporter;
  /** Node process metrics in the registry (default true). */
  processMetrics?: boolean;
};

/** What the gateway gets: its `/metrics` answer and a span around each request. */
export type GatewayTelemetryPort = {
  exposition(state: {
    sseClients: number;
    connections?: { open: number; waiting: number; refused: number; evicted: number };
  }): Promise<{ contentType: string; text: string }>;
  traceRequest<T>(
    request: { method: string; route: string; sessionId?: string },
    run: (span: RequestSpan) => Promise<T>,
  ): Promise<T>;
  /** Counts a request refused for naming another tenant's session. */
  crossTenant(tenant: string): void;
};

/** The request's span as the gateway sees it. */
export type RequestSpan = { setTurn(turn: number): void; setStatus(status: number): void };

const NO_SPAN: RequestSpan = { setTurn() {}, setStatus() {} };

/**
 * A process's operations telemetry, from `startTelemetry`: its logger, Prometheus metrics and
 * tracing, the observer to give the worker (`engine`) and the gateway (`gateway`), the Temporal
 * runtime's installation and `/metrics`.
 */
export type Telemetry = {
  readonly logger: Logger;
  readonly metrics: SessionlogMetrics;
  /** Present when tracing is on. */
  readonly tracing: Tracing | undefined;
  /** The engine's observer (pass as `telemetry` to the worker). */
  readonly engine: ReturnType<typeof createEngineObserver>;
  readonly gateway: GatewayTelemetryPort;
  /**
   * Installs the Temporal SDK runtime with this telemetry: the SDK's logger (workflow and
   * activity `log`, the core's forwarded lines, narrowed by `coreLogFilter`, an env-filter
   * string) through ours, and its worker metrics drained into our registry. Call once, before the process opens any Temporal connection; resolves
   * to false when a runtime was already installed (its logger and metrics stay as they were).
   * A gateway never calls it, so it never loads the worker's native SDK.
   */
  installTemporalRuntime(options?: { coreLogFilter?: string }): Promise<boolean>;
  /** `/metrics` for the operations listener (`startOpsServer({ routes })`). */
  metricsRoute(): Record<string, OpsRoute>;
  /** Flushes spans (best effort: an unreachable collector is logged, not thrown) and stops background work. */
  shutdown(): Promise<void>;
};

/** Builds the telemetry of one process part from its settings. */
export async function startTelemetry(settings: TelemetrySettings, options: TelemetryOptions = {}): Promise<Telemetry> {
  const logger = createLogger({
    level: settings.logLevel,
    format: settings.logFormat,
    name: settings.serviceName,
    ...(options.logDestination ? { destination: options.logDestination } : {}),
  });
  const metrics = new SessionlogMetrics({
    ...(options.processMetrics !== undefined ? { processMetrics: options.processMetrics } : {}),
  });
  let tracing: Tracing | undefined;
  if (settings.otlpEndpoint !== undefined) {
    // Loaded only when on: off, no part of the OpenTelemetry SDK is in the process.
    const { startTracing } = await import('./tracing.js');
    tracing = await startTracing({
      endpoint: settings.otlpEndpoint,
      serviceName: settings.serviceName,
      captureContent: settings.captureContent,
      ...(options.spanExporter ? { exporter: options.spanExporter } : {}),
    });
  }
  let bridge: TemporalMetricsBridge | undefined;
  const engine = createEngineObserver({
    metrics,
    logger,
    captureContent: settings.captureContent,
    ...(tracing ? { tracer: tracing.tracer } : {}),
  });

  const exposition = async () => {
    bridge?.drain();
    return metrics.exposition();
  };

  const gateway: GatewayTelemetryPort = {
    crossTenant: (tenant) => metrics.crossTenant.inc({ tenant }),
    async exposition(state) {
      metrics.sseClients.set(state.sseClients);
      if (state.connections) metrics.recordConnections(state.connections);
      return exposition();
    },
    async traceRequest(request, run) {
      if (!tracing) return run(NO_SPAN);
      const span = tracing.tracer.startSpan(`${request.method} ${request.route}`, {
        kind: SpanKind.SERVER,
        attributes: {
          'http.request.method': request.method,
          'http.route': request.route,
          ...(request.sessionId !== undefined ? { [SESSION_ID]: request.sessionId } : {}),
        },
      });
      const handle: RequestSpan = {
        setTurn: (turn) => span.setAttribute(TURN, turn),
        setStatus: (status) => {
          span.setAttribute('http.response.status_code', status);
          if (status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
        },
      };
      try {
        return await context.with(trace.setSpan(context.active(), span), () => run(handle));
      } catch (error) {
        span.setStatus({ code: SpanStatusCode.ERROR, message: (error as { code?: string }).code ?? 'error' });
        throw error;
      } finally {
        span.end();
      }
    },
  };

  return {
    logger,
    metrics,
    tracing,
    engine,
    gateway,
    async installTemporalRuntime(runtimeOptions = {}) {
      const [{ Runtime }, { TemporalMetricsBridge }] = await Promise.all([
        import('@temporalio/worker'),
        import('./temporal-metrics.js'),
      ]);
      const candidate = new TemporalMetricsBridge(metrics.registry);
      try {
        Runtime.install({
          logger: temporalLogger(logger.child({ component: 'temporal' })),
          telemetryOptions: {
            logging: { filter: runtimeOptions.coreLogFilter ?? { core: 'WARN', other: 'ERROR' }, forward: {} },
            metrics: { buffer: candidate.buffer },
          },
        });
      } catch (error) {
        // A runtime is already installed in this process (Runtime.install throws then); it keeps its logger and metrics.
        void error;
        return false;
      }
      bridge = candidate;
      bridge.start();
      return true;
    },
    metricsRoute: () => ({
      '/metrics': async () => {
        const { contentType, text } = await exposition();
        return { status: 200, body: text, contentType };
      },
    }),
    async shutdown() {
      bridge?.stop();
      try {
        await tracing?.shutdown();
      } catch (error) {
        // The collector is unreachable: the last spans are lost, which must not fail a clean stop.
        logger.warn({ err: error }, 'could not export the last spans');
      }
    },
  };
}
