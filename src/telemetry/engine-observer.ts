/**
 * What the turn engine reports (its `EngineTelemetry` seam, src/engine/telemetry.ts), turned
 * into metrics, spans and log lines. Structurally the engine's interface: nothing of ours is
 * imported, the wiring (src/cli/runtime.ts) checks the fit.
 *
 * Spans follow the OpenTelemetry GenAI semantic conventions: a model call is a CLIENT span
 * `chat <model>` (`gen_ai.operation.name`, `gen_ai.system`, `gen_ai.request.model`,
 * `gen_ai.conversation.id`, `gen_ai.usage.input_tokens` / `output_tokens`, the time to first
 * token), a tool run an INTERNAL span `execute_tool <name>`. They start under the active context,
 * which inside an activity is Temporal's RunActivity span. Prompt and reply text are recorded
 * (`gen_ai.input.messages`, `gen_ai.output.messages`) only when `captureContent` is on.
 */
import { SpanKind, SpanStatusCode, context, trace, type Span, type Tracer } from '@opentelemetry/api';
import type { Logger } from 'pino';
import { SESSION_ID, STEP, TURN } from './attributes.js';
import type { SessionlogMetrics, TokenCounts } from './metrics.js';

export type EngineObserverOptions = {
  metrics?: SessionlogMetrics;
  /** Absent when tracing is off: no spans are made at all. */
  tracer?: Tracer;
  captureContent?: boolean;
  logger?: Logger;
};

type ModelCall = {
  sessionId: string;
  turn: number | null;
  step?: number;
  purpose: 'reply' | 'summary';
  provider: string;
  model: string;
  messages: readonly unknown[];
};
type ModelEnd = {
  usage?: TokenCounts;
  cost?: number;
  finishReason?: string;
  responseModel?: string;
  aborted?: boolean;
  output?: readonly unknown[];
  errorCode?: string;
};
type ToolCall = { sessionId: string; turn: number; step: number; callId: string; tool: string; attempt: number };

const seconds = (ms: number): number => ms / 1000;

function sessionAttributes(
  sessionId: string,
  turn: number | null | undefined,
  step?: number,
): Record<string, string | number> {
  return {
    [SESSION_ID]: sessionId,
    ...(turn !== null && turn !== undefined ? { [TURN]: turn } : {}),
    ...(step !== undefined ? { [STEP]: step } : {}),
  };
}

/** An `EngineTelemetry` over the given metrics, tracer and logger (each optional). */
export function createEngineObserver(options: EngineObserverOptions) {
  const { metrics, tracer, logger } = options;
  const capture = options.captureContent === true;

  // Calls waiting for an answer, per session this worker last wrote to; the gauge is their sum.
  const waiting = new Map<string, number>();

  const startSpan = (name: string, kind: SpanKind, attributes: Record<string, string | number>): Span | undefined =>
    tracer?.startSpan(name, { kind, attributes }, context.active());

  return {
    modelCall(call: ModelCall) {
      const started = performance.now();
      let firstTokenMs: number | undefined;
      const span = startSpan(`chat ${call.model}`, SpanKind.CLIENT, {
        'gen_ai.operation.name': 'chat',
        'gen_ai.system': call.provider,
        'gen_ai.request.model': call.model,
        'gen_ai.conversation.id': call.sessionId,
        'sessionlog.model_call.purpose': call.purpose,
        ...sessionAttributes(call.sessionId, call.turn, call.step),
      });
      if (span && capture) span.setAttribute('gen_ai.input.messages', JSON.stringify(call.messages));
      return {
        firstToken() {
          if (firstTokenMs !== undefined) return;
          firstTokenMs = performance.now() - started;
          metrics?.modelTimeToFirstToken.observe({ model: call.model }, seconds(firstTokenMs));
          span?.setAttribute('gen_ai.server.time_to_first_token', seconds(firstTokenMs));
          span?.addEvent('gen_ai.first_token');
        },
        end(result: ModelEnd) {
          const durationMs = performance.now() - started;
          const outcome = result.errorCode ?? (result.aborted ? 'aborted' : 'ok');
          metrics?.modelCalls.inc({ model: call.model, purpose: call.purpose, outcome });
          metrics?.modelDuration.observe({ model: call.model, purpose: call.purpose }, seconds(durationMs));
          if (result.errorCode === 'context_overflow') metrics?.contextOverflows.inc({ model: call.model });
          if (result.usage) metrics?.recordUsage(call.model, result.usage, result.cost);
          if (!span) return;
          if (result.responseModel) span.setAttribute('gen_ai.response.model', result.responseModel);
          if (result.finishReason) span.setAttribute('gen_ai.response.finish_reasons', [result.finishReason]);
          if (result.usage) {
            const cached = result.usage.cacheReadTokens ?? 0;
            span.setAttribute(
              'gen_ai.usage.input_tokens',
              result.usage.inputTokens + cached + (result.usage.cacheWriteTokens ?? 0),
            );
            span.setAttribute('gen_ai.usage.output_tokens', result.usage.outputTokens);
            if (cached > 0) span.setAttribute('gen_ai.usage.cache_read.input_tokens', cached);
          }
          if (capture && result.output) span.setAttribute('gen_ai.output.messages', JSON.stringify(result.output));
          if (result.errorCode) {
            span.setAttribute('error.type', result.errorCode);
            span.setStatus({ code: SpanStatusCode.ERROR, message: result.errorCode });
          }
          span.end();
        },
      };
    },

    toolCall(call: ToolCall) {
      const started = performance.now();
      const span = startSpan(`execute_tool ${call.tool}`, SpanKind.INTERNAL, {
        'gen_ai.operation.name': 'execute_tool',
        'gen_ai.tool.name': call.tool,
        'gen_ai.tool.call.id': call.callId,
        'gen_ai.conversation.id': call.sessionId,
        ...sessionAttributes(call.sessionId, call.turn, call.step),
      });
      return {
        end(result: { isError: boolean; errorCode?: string; failed?: boolean }) {
          const outcome = result.failed ? 'failed' : result.isError ? 'error' : 'ok';
          metrics?.toolCalls.inc({ tool: call.tool, outcome });
          metrics?.toolDuration.observe({ tool: call.tool }, seconds(performance.now() - started));
          if (!span) return;
          if (result.isError) {
            span.setAttribute('error.type', result.errorCode ?? 'tool_error');
            span.setStatus({ code: SpanStatusCode.ERROR, message: result.errorCode ?? 'tool_error' });
          }
          span.end();
        },
      };
    },

    appended(batch: { sessionId: string; backend: string; events: number; replayed: boolean; durationMs: number }) {
      if (batch.replayed) return;
      metrics?.appendDuration.observe({ backend: batch.backend }, seconds(batch.durationMs));
      metrics?.appendBatchSize.observe({ backend: batch.backend }, batch.events);
    },

    turnStarted(turn: { sessionId: string; turn: number }) {
      metrics?.turnsStarted.inc();
      trace.getActiveSpan()?.addEvent('turn/start', sessionAttributes(turn.sessionId, turn.turn));
    },

    turnEnded(turn: {
      sessionId: string;
      turn: number;
      outcome: string;
      durationMs: number | undefined;
      errorCode?: string;
    }) {
      metrics?.turnsFinished.inc({ outcome: turn.outcome });
      if (turn.durationMs !== undefined)
        metrics?.turnDuration.observe({ outcome: turn.outcome }, seconds(turn.durationMs));
      trace.getActiveSpan()?.addEvent('turn/end', {
        ...sessionAttributes(turn.sessionId, turn.turn),
        'sessionlog.turn.outcome': turn.outcome,
      });
      logger?.info(
        {
          sessionId: turn.sessionId,
          turn: turn.turn,
          outcome: turn.outcome,
          ...(turn.durationMs !== undefined ? { durationMs: Math.round(turn.durationMs) } : {}),
          ...(turn.errorCode ? { errorCode: turn.errorCode } : {}),
        },
        'turn ended',
      );
    },

    compacted(compaction: { sessionId: string; turn: number | null; trigger: string; outcome: 'ok' | 'error' }) {
      metrics?.compactions.inc({ trigger: compaction.trigger, outcome: compaction.outcome });
      logger?.info(
        {
          sessionId: compaction.sessionId,
          turn: compaction.turn,
          trigger: compaction.trigger,
          outcome: compaction.outcome,
        },
        'compaction closed',
      );
    },

    pruned(prune: { sessionId: string; results: number }) {
      metrics?.prunes.inc(prune.results);
    },

    spilled(spill: { sessionId: string; tool: string; bytes: number }) {
      metrics?.spills.inc({ tool: spill.tool });
    },

    modelRetried(retry: { sessionId: string; turn: number; code: string }) {
      metrics?.modelRetries.inc({ code: retry.code });
      logger?.warn({ sessionId: retry.sessionId, turn: retry.turn, code: retry.code }, 'model call failed; retrying');
    },

    callsWaiting(report: { sessionId: string; count: number }) {
      if (report.count > 0) waiting.set(report.sessionId, report.count);
      else waiting.delete(report.sessionId);
      let total = 0;
      for (const count of waiting.values()) total += count;
      metrics?.setPendingApprovals(total);
    },
    internalError(where: { sessionId: string; turn: number; step: number }, error: unknown) {
      const err = error instanceof Error ? error : new Error(String(error));
      logger?.error({ ...where, err }, 'a programming error ended the turn (internal_error)');
    },
  };
}
