/**
 * OpenTelemetry tracing (DESIGN §8 "Operations"): on only when `OTEL_EXPORTER_OTLP_ENDPOINT`
 * is set, exported over OTLP/HTTP (protobuf) to `<endpoint>/v1/traces`. Off, nothing of the
 * SDK is loaded: this module's own imports are the API (whose tracer is then a no-op) and the
 * interceptor classes, which are only instantiated when tracing is on.
 *
 * One trace per turn, from the HTTP request (or the client call) through the workflow, its
 * activities, the model call and each tool: Temporal's OpenTelemetry interceptors carry the
 * context across the client → workflow → activity hops in Temporal headers (so a retried
 * activity, on any worker, joins the same trace), and `workflow-interceptors.ts` schedules a
 * turn's activities under the span of the message that asked for it.
 */
import { fileURLToPath } from 'node:url';
import { trace, type Span, type Tracer } from '@opentelemetry/api';
import type { SpanExporter, SpanProcessor } from '@opentelemetry/sdk-trace-base';
import type { WorkflowClientInterceptor } from '@temporalio/client';
import { OpenTelemetryWorkflowClientInterceptor } from '@temporalio/interceptors-opentelemetry/lib/client/index.js';
import {
  OpenTelemetryActivityInboundInterceptor,
  OpenTelemetryActivityOutboundInterceptor,
  makeWorkflowExporter,
} from '@temporalio/interceptors-opentelemetry/lib/worker/index.js';
import type { ActivityInboundCallsInterceptor, ActivityInterceptorsFactory, InjectedSinks } from '@temporalio/worker';
import { SESSION_ID, TURN, sessionOfWorkflow, sessionTurnOf } from './attributes.js';

export type TracingOptions = {
  /** OTLP/HTTP base URL (`OTEL_EXPORTER_OTLP_ENDPOINT`); spans go to `<endpoint>/v1/traces`. */
  endpoint: string;
  /** `service.name` of this process part: `sessionlog-worker`, `sessionlog-gateway`, `sessionlog`. */
  serviceName: string;
  /** Record prompt and reply text in model spans (off by default; SESSIONLOG_TRACE_CONTENT). */
  captureContent: boolean;
  /** Replaces the OTLP exporter (tests, benchmarks). */
  exporter?: SpanExporter;
};

/** Tracing of one process, registered as the global tracer provider. */
export type Tracing = {
  readonly tracer: Tracer;
  readonly captureContent: boolean;
  /** For the SessionClient's Temporal `Client`: spans for starts, signals and updates, context into headers. */
  clientInterceptors(): WorkflowClientInterceptor[];
  /** For `Worker.create`: activity interceptors, and the sink that exports the workflow sandbox's spans. */
  workerOptions(): {
    interceptors: { activity: ActivityInterceptorsFactory[] };
    sinks: InjectedSinks<Record<string, never>>;
  };
  /** Modules to bundle into the workflow code (`bundleWorkflowCode({ workflowInterceptorModules })`). */
  readonly workflowInterceptorModules: string[];
  forceFlush(): Promise<void>;
  shutdown(): Promise<void>;
};

/** The workflow interceptor module's path, next to this file (.ts from source, .js when built). */
export function workflowInterceptorModule(): string {
  const ext = import.meta.url.endsWith('.ts') ? '.ts' : '.js';
  return fileURLToPath(new URL(`./workflow-interceptors${ext}`, import.meta.url));
}

/** Starts tracing for this process: loads the SDK, registers the provider, returns the Temporal wiring. */
export async function startTracing(options: TracingOptions): Promise<Tracing> {
  const [{ NodeTracerProvider }, { BatchSpanProcessor }, { Resource }, { OTLPTraceExporter }] = await Promise.all([
    import('@opentelemetry/sdk-trace-node'),
    import('@opentelemetry/sdk-trace-base'),
    import('@opentelemetry/resources'),
    import('@opentelemetry/exporter-trace-otlp-proto'),
  ]);
  const resource = Resource.default().merge(
    new Resource({ 'service.name': options.serviceName, 'process.pid': process.pid }),
  );
  const exporter =
    options.exporter ?? new OTLPTraceExporter({ url: `${options.endpoint.replace(/\/+$/, '')}/v1/traces` });
  const processor: SpanProcessor = new BatchSpanProcessor(exporter, { scheduledDelayMillis: 1_000 });
  const provider = new NodeTracerProvider({ resource, spanProcessors: [processor] });
  // Global: Temporal's interceptors and the engine's spans use the API's global tracer and context.
  provider.register();
  const tracer = trace.getTracer('sessionlog');
  return {
    tracer,
    captureContent: options.captureContent,
    clientInterceptors: () => [new OpenTelemetryWorkflowClientInterceptor(), sessionClientInterceptor],
    workerOptions: () => ({
      interceptors: {
        activity: [
          (ctx) => ({
            inbound: new OpenTelemetryActivityInboundInterceptor(ctx),
            outbound: new OpenTelemetryActivityOutboundInterceptor(ctx),
          }),
          () => ({ inbound: activityAnnotation }),
        ],
      },
      sinks: { exporter: makeWorkflowExporter(processor, resource) } as unknown as InjectedSinks<Record<string, never>>,
    }),
    workflowInterceptorModules: [workflowInterceptorModule()],
    forceFlush: () => provider.forceFlush(),
    shutdown: () => provider.shutdown(),
  };
}

function annotate(span: Span | undefined, fields: { sessionId?: string | undefined; turn?: number | undefined }): void {
  if (!span) return;
  if (fields.sessionId !== undefined) span.setAttribute(SESSION_ID, fields.sessionId);
  if (fields.turn !== undefined) span.setAttribute(TURN, fields.turn);
}

/** Inside Temporal's RunActivity span: the session id and turn the activity's input names. */
const activityAnnotation: ActivityInboundCallsInterceptor = {
  execute(input, next) {
    annotate(trace.getActiveSpan(), sessionTurnOf(input.args[0]));
    return next(input);
  },
};

/** Inside Temporal's client spans: the session the workflow id names. */
const sessionClientInterceptor: WorkflowClientInterceptor = {
  start(input, next) {
    annotate(trace.getActiveSpan(), { sessionId: sessionOfWorkflow(input.options.workflowId) });
    return next(input);
  },
  signal(input, next) {
    annotate(trace.getActiveSpan(), { sessionId: sessionOfWorkflow(input.workflowExecution.workflowId) });
    return next(input);
  },
  signalWithStart(input, next) {
    annotate(trace.getActiveSpan(), { sessionId: sessionOfWorkflow(input.options.workflowId) });
    return next(input);
  },
  startUpdate(input, next) {
    annotate(trace.getActiveSpan(), { sessionId: sessionOfWorkflow(input.workflowExecution.workflowId) });
    return next(input);
  },
  startUpdateWithStart(input, next) {
    annotate(trace.getActiveSpan(), { sessionId: sessionOfWorkflow(input.workflowStartOptions.workflowId) });
    return next(input);
  },
  query(input, next) {
    annotate(trace.getActiveSpan(), { sessionId: sessionOfWorkflow(input.workflowExecution.workflowId) });
    return next(input);
  },
};
