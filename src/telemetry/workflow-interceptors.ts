/**
 * Workflow interceptors for tracing (bundled into the workflow code only when tracing is on;
 * see `Tracing.workflowInterceptorModules`). They run in the workflow sandbox: deterministic,
 * no I/O. On top of `@temporalio/interceptors-opentelemetry`'s own interceptors they make one
 * trace per turn:
 *
 * - A session workflow lives for many turns, so its `RunWorkflow` span belongs to the first
 *   message's trace. Each turn's activities are scheduled under the span of the update (or
 *   signal) that delivered the turn's first message instead, so the turn's model call, tools
 *   and appends join the trace of the request that asked for the turn.
 * - Every workflow span gets the session id, and the turn where it is known.
 * - Span ids stay the same when a replaying worker takes over (see ReplayStableInbound).
 *
 * Messages and activity inputs are read by shape (`{id}`, `{sessionId, turn, entering}`), so
 * this module imports nothing of the workflow's own.
 */
import { context as otelContext, trace, type Context } from '@opentelemetry/api';
import { extractContextFromHeaders } from '@temporalio/interceptors-opentelemetry/lib/instrumentation.js';
import {
  OpenTelemetryInboundInterceptor,
  OpenTelemetryInternalsInterceptor,
  OpenTelemetryOutboundInterceptor,
} from '@temporalio/interceptors-opentelemetry/lib/workflow/index.js';
import type {
  ActivityInput,
  LocalActivityInput,
  Next,
  QueryInput,
  SignalInput,
  UpdateInput,
  WorkflowExecuteInput,
  WorkflowInboundCallsInterceptor,
  WorkflowInterceptors,
  WorkflowOutboundCallsInterceptor,
} from '@temporalio/workflow';
import { workflowInfo } from '@temporalio/workflow';
import { SESSION_ID, TURN, sessionOfWorkflow, sessionTurnOf } from './attributes.js';

/** Bound on remembered message contexts (messages wait at most a few turns in the queue). */
const MAX_REMEMBERED = 256;

/**
 * Temporal's inbound interceptor without spans for update validators and queries. Those run
 * only when live, never in a replay; a span made there draws its id from the workflow's random
 * sequence, so after a worker crash the replaying worker would give every later span a
 * different id than the crashed one did — and the retried activity, whose parent id was
 * recorded in history, would point at the wrong span.
 */
class ReplayStableInbound extends OpenTelemetryInboundInterceptor {
  override validateUpdate(input: UpdateInput, next: Next<WorkflowInboundCallsInterceptor, 'validateUpdate'>): void {
    next(input);
  }

  override handleQuery(
    input: QueryInput,
    next: Next<WorkflowInboundCallsInterceptor, 'handleQuery'>,
  ): Promise<unknown> {
    return next(input);
  }
}

/** Per workflow: the trace context of each queued message, and of each turn once it began. */
class TurnContexts {
  private readonly messages = new Map<string, Context>();
  private readonly turns = new Map<number, Context>();

  rememberMessage(id: string, ctx: Context): void {
    if (this.messages.size >= MAX_REMEMBERED) this.messages.delete(this.messages.keys().next().value!);
    this.messages.set(id, ctx);
  }

  /** The context activities of `arg`'s turn run in: its first entering message's, once seen. */
  forActivity(arg: unknown): Context | undefined {
    const { turn } = sessionTurnOf(arg);
    if (turn === undefined) return undefined;
    const entering = (arg as { entering?: unknown }).entering;
    if (!this.turns.has(turn) && Array.isArray(entering)) {
      for (const message of entering) {
        const id = (message as { id?: unknown } | null)?.id;
        const ctx = typeof id === 'string' ? this.messages.get(id) : undefined;
        if (typeof id === 'string') this.messages.delete(id);
        if (ctx) {
          this.turns.set(turn, ctx);
          this.turns.delete(turn - 2);
          break;
        }
      }
    }
    return this.turns.get(turn);
  }
}

function annotate(arg: unknown): void {
  const span = trace.getActiveSpan();
  if (!span) return;
  const { sessionId, turn } = sessionTurnOf(arg);
  if (sessionId !== undefined) span.setAttribute(SESSION_ID, sessionId);
  if (turn !== undefined) span.setAttribute(TURN, turn);
}

/** The session id on the active span, from the workflow id. */
function annotateSession(): void {
  const sessionId = sessionOfWorkflow(workflowInfo().workflowId);
  if (sessionId !== undefined) trace.getActiveSpan()?.setAttribute(SESSION_ID, sessionId);
}

/** Inside the OpenTelemetry inbound spans: remembers each message's context, annotates the spans. */
class SessionInbound implements WorkflowInboundCallsInterceptor {
  constructor(private readonly contexts: TurnContexts) {}

  execute(input: WorkflowExecuteInput, next: Next<WorkflowInboundCallsInterceptor, 'execute'>): Promise<unknown> {
    annotate(input.args[0]);
    return next(input);
  }

  handleSignal(input: SignalInput, next: Next<WorkflowInboundCallsInterceptor, 'handleSignal'>): Promise<void> {
    this.remember(input.args[0], input.headers);
    return next(input);
  }

  async handleUpdate(
    input: UpdateInput,
    next: Next<WorkflowInboundCallsInterceptor, 'handleUpdate'>,
  ): Promise<unknown> {
    this.remember(input.args[0], input.headers);
    const result = await next(input);
    annotate(result);
    return result;
  }

  private remember(message: unknown, headers: SignalInput['headers']): void {
    annotateSession();
    const id = (message as { id?: unknown } | null)?.id;
    if (typeof id !== 'string') return;
    // The handler's own span when the SDK made one, else the caller's context from the headers.
    const ctx = trace.getActiveSpan() ? otelContext.active() : extractContextFromHeaders(headers);
    if (ctx) this.contexts.rememberMessage(id, ctx);
  }
}

/** Outside the OpenTelemetry outbound interceptor: schedules a turn's activities under the turn's context. */
class TurnScheduling implements WorkflowOutboundCallsInterceptor {
  constructor(private readonly contexts: TurnContexts) {}

  scheduleActivity(
    input: ActivityInput,
    next: Next<WorkflowOutboundCallsInterceptor, 'scheduleActivity'>,
  ): Promise<unknown> {
    const ctx = this.contexts.forActivity(input.args[0]);
    return ctx ? otelContext.with(ctx, () => next(input)) : next(input);
  }

  scheduleLocalActivity(
    input: LocalActivityInput,
    next: Next<WorkflowOutboundCallsInterceptor, 'scheduleLocalActivity'>,
  ): Promise<unknown> {
    const ctx = this.contexts.forActivity(input.args[0]);
    return ctx ? otelContext.with(ctx, () => next(input)) : next(input);
  }
}

/** Inside the OpenTelemetry outbound interceptor: annotates the StartActivity spans. */
class ActivityAnnotation implements WorkflowOutboundCallsInterceptor {
  scheduleActivity(
    input: ActivityInput,
    next: Next<WorkflowOutboundCallsInterceptor, 'scheduleActivity'>,
  ): Promise<unknown> {
    annotate(input.args[0]);
    return next(input);
  }

  scheduleLocalActivity(
    input: LocalActivityInput,
    next: Next<WorkflowOutboundCallsInterceptor, 'scheduleLocalActivity'>,
  ): Promise<unknown> {
    annotate(input.args[0]);
    return next(input);
  }
}

/** The workflow interceptors factory Temporal looks for in an interceptor module. */
export const interceptors = (): WorkflowInterceptors => {
  const contexts = new TurnContexts();
  return {
    inbound: [new ReplayStableInbound(), new SessionInbound(contexts)],
    outbound: [new TurnScheduling(contexts), new OpenTelemetryOutboundInterceptor(), new ActivityAnnotation()],
    internals: [new OpenTelemetryInternalsInterceptor()],
  };
};
