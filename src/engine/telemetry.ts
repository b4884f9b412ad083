/**
 * The turn engine's telemetry seam (DESIGN §8 "Operations"): what the engine tells an observer
 * as it runs, so metrics and traces never need a second source of truth. Model calls and tool
 * runs are reported as they happen; everything else is read off the batches the engine appends
 * (the log is the truth): turns started and ended with their outcome and duration, compactions,
 * prunes, spills, retries, and each append's latency and size.
 *
 * The engine runs the same without an observer; src/telemetry implements one. Nothing here
 * imports it: the observer is a plain interface, and an observer must never throw.
 */
import { replyCost, type ModelPort, type ModelReply, type ModelRequest } from '../model/provider.js';
import type { SessionStore } from '../persistence/store.js';
import {
  waitsForAnswer,
  type NewEvent,
  type SessionView,
  type TokenUsage,
  type TurnOutcome,
} from '../session/index.js';
import { classifyModelError } from '../model/errors.js';

/** A model call about to start: a step's reply or a compaction's summary. */
export type ModelCallInfo = {
  sessionId: string;
  /** The open turn, or null for a manual compaction between turns. */
  turn: number | null;
  step?: number;
  purpose: 'reply' | 'summary';
  provider: string;
  model: string;
  /** The request's derived messages; an observer records their text only when told to. */
  messages: readonly unknown[];
};

/** How a model call ended: its usage and reply, or the failure's code (ModelFailure codes). */
export type ModelCallEnd = {
  usage?: TokenUsage;
  /** The reply's cost in USD at the catalogue's prices (as logged with it); absent when none are known. */
  cost?: number;
  finishReason?: string;
  /** The model that answered (the catalogue's canonical id). */
  responseModel?: string;
  aborted?: boolean;
  /** The reply's content blocks; recorded only when told to. */
  output?: readonly unknown[];
  errorCode?: string;
};

export interface ModelCallObserver {
  /** The first streamed delta arrived (time to first token). */
  firstToken(): void;
  end(result: ModelCallEnd): void;
}

export type ToolCallInfo = {
  sessionId: string;
  turn: number;
  step: number;
  callId: string;
  tool: string;
  attempt: number;
};

export interface ToolCallObserver {
  /** The tool returned (`isError` when it reported an error to the model) or threw (`errorCode` set, `failed`). */
  end(result: { isError: boolean; errorCode?: string; failed?: boolean }): void;
}

/**
 * What the turn engine reports to an observer as it runs (model calls, tool runs, appends, turns):
 * `startTelemetry(…).engine` implements it for `createWorker({ telemetry })`. An observer must
 * never throw.
 */
export interface EngineTelemetry {
  modelCall(call: ModelCallInfo): ModelCallObserver;
  toolCall(call: ToolCallInfo): ToolCallObserver;
  /** One append to a session's log: how long it took and how many events it carried (`replayed`: found already stored). */
  appended(batch: { sessionId: string; backend: string; events: number; replayed: boolean; durationMs: number }): void;
  turnStarted(turn: { sessionId: string; turn: number }): void;
  /** A `turn/end` was logged; `durationMs` runs from its `turn/start` (log times). */
  turnEnded(turn: {
    sessionId: string;
    turn: number;
    outcome: TurnOutcome;
    durationMs: number | undefined;
    errorCode?: string;
  }): void;
  /** A compaction bracket closed: `ok` with a summary, `error` without one. */
  compacted(compaction: { sessionId: string; turn: number | null; trigger: string; outcome: 'ok' | 'error' }): void;
  /** Old tool results shortened by the pruner in one batch. */
  pruned(prune: { sessionId: string; results: number }): void;
  /** A tool's output logged as a preview of its stored artifact. */
  spilled(spill: { sessionId: string; tool: string; bytes: number }): void;
  /** A transient model failure logged as `llm/retry`. */
  modelRetried(retry: { sessionId: string; turn: number; code: string }): void;
  /** How many of the session's tool calls wait for an answer (approval or external result), after a batch that may change it. */
  callsWaiting(report: { sessionId: string; count: number }): void;
  /** A programming error ended a turn (`internal_error`): its stack belongs in the process log. */
  internalError?(where: { sessionId: string; turn: number; step: number }, error: unknown): void;
}

/**
 * The model port as `call` sees it: each stream is reported to the observer (first token, end
 * with usage or failure). Returns `model` itself when there is no telemetry.
 */
export function observedModel(
  model: ModelPort,
  telemetry: EngineTelemetry | undefined,
  call: Omit<ModelCallInfo, 'provider' | 'model' | 'messages'>,
): ModelPort {
  if (!telemetry) return model;
  return {
    provider: model.provider,
    model: (name) => model.model(name),
    async stream(request: ModelRequest): Promise<ModelReply> {
      const observer = telemetry.modelCall({
        ...call,
        provider: model.provider,
        model: request.header.model,
        messages: request.messages,
      });
      let reply: ModelReply;
      try {
        reply = await model.stream({
          ...request,
          onFirstDelta: () => {
            observer.firstToken();
            request.onFirstDelta?.();
          },
        });
      } catch (error) {
        observer.end({ errorCode: classifyModelError(error).code });
        throw error;
      }
      const cost = replyCost(model, reply.model, reply.usage);
      observer.end({
        ...(reply.usage ? { usage: reply.usage } : {}),
        ...(cost !== undefined ? { cost } : {}),
        finishReason: reply.finishReason,
        responseModel: reply.model,
        aborted: reply.aborted,
        output: reply.content,
      });
      return reply;
    },
  };
}

/**
 * The store as the engine writes it, with every append reported: its latency and size, and
 * what the batch says happened (the same facts a reader of the log would find).
 */
export function observedStore(store: SessionStore, telemetry: EngineTelemetry): SessionStore {
  const triggers = new Map<string, string>();
  const append: SessionStore['append'] = async (id, events, options) => {
    const started = performance.now();
    const result = await store.append(id, events, options);
    telemetry.appended({
      sessionId: id,
      backend: store.kind,
      events: events.length,
      replayed: result.replayed,
      durationMs: performance.now() - started,
    });
    if (!result.replayed) await reportBatch(store, telemetry, id, events, triggers);
    return result;
  };
  return new Proxy(store, {
    get(target, property) {
      if (property === 'append') return append;
      const value: unknown = Reflect.get(target, property, target);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}

const OUTCOME: Record<NewEvent<'turn/end'>['data']['reason']['kind'], TurnOutcome> = {
  completed: 'completed',
  aborted: 'aborted',
  error: 'error',
  'max-tokens': 'max-tokens',
  'max-steps': 'max-steps',
  interrupted: 'interrupted',
};

/** Events after which the number of calls waiting for an answer may have changed. */
const WAITING_CHANGES: ReadonlySet<string> = new Set([
  'tool/approval-request',
  'tool/approval',
  'tool/result',
  'turn/end',
]);

async function reportBatch(
  store: SessionStore,
  telemetry: EngineTelemetry,
  sessionId: string,
  events: readonly NewEvent[],
  triggers: Map<string, string>,
): Promise<void> {
  let pruned = 0;
  // The session as the store holds it after the batch, read at most once.
  let view: SessionView | undefined;
  const session = async () => (view ??= await store.session(sessionId));
  if (events.some((event) => WAITING_CHANGES.has(event.type))) {
    // Counted from the log, as `SessionClient.pendingApprovals` lists them.
    telemetry.callsWaiting({
      sessionId,
      count: [...(await session()).turns.pending.values()].filter(waitsForAnswer).length,
    });
  }
  for (const event of events) {
    switch (event.type) {
      case 'turn/start':
        telemetry.turnStarted({ sessionId, turn: event.data.turn });
        break;
      case 'turn/end': {
        const { turn, reason } = event.data as NewEvent<'turn/end'>['data'];
        const log = await session();
        const startSeq = log.turns.turns.get(turn)?.startSeq;
        const started = startSeq === undefined ? undefined : log.storedAt(startSeq)?.time;
        telemetry.turnEnded({
          sessionId,
          turn,
          outcome: OUTCOME[reason.kind],
          durationMs: started === undefined ? undefined : Math.max(0, event.time - started),
          ...(reason.kind === 'error' ? { errorCode: reason.error.code } : {}),
        });
        break;
      }
      case 'compaction/start': {
        const data = event.data as NewEvent<'compaction/start'>['data'];
        if (triggers.size > 1_000) triggers.clear();
        triggers.set(data.compactionId, data.trigger);
        break;
      }
      case 'compaction/end': {
        const data = event.data as NewEvent<'compaction/end'>['data'];
        telemetry.compacted({
          sessionId,
          turn: data.turn,
          trigger: triggers.get(data.compactionId) ?? 'unknown',
          outcome: data.error === undefined ? 'ok' : 'error',
        });
        triggers.delete(data.compactionId);
        break;
      }
      case 'compaction/prune':
        pruned += 1;
        break;
      case 'tool/result': {
        const data = event.data as NewEvent<'tool/result'>['data'];
        const meta = data.meta as { bytes?: unknown } | undefined;
        const logged = data.message.content.reduce(
          (sum, block) =>
            sum + block.content.reduce((n, part) => n + (part.type === 'text' ? Buffer.byteLength(part.text) : 0), 0),
          0,
        );
        // Logged shorter than the stored output, on the first logging of the result: a spill (a prune replaces, it does not append).
        if (event.surfaceOp === 'append' && typeof meta?.bytes === 'number' && logged < meta.bytes) {
          const call = (await session()).eventAt(event.sourceEventSeqs?.[0] ?? -1);
          telemetry.spilled({
            sessionId,
            tool: call?.type === 'tool/call' ? call.data.name : 'unknown',
            bytes: meta.bytes,
          });
        }
        break;
      }
      case 'llm/retry': {
        const data = event.data as NewEvent<'llm/retry'>['data'];
        telemetry.modelRetried({ sessionId, turn: data.turn, code: data.failure.code });
        break;
      }
      default:
        break;
    }
  }
  if (pruned > 0) telemetry.pruned({ sessionId, results: pruned });
}
