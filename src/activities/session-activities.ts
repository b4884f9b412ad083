/**
 * The session activities (DESIGN §5): thin functions that bring the session up to date, call
 * the model or a tool, append to the log idempotently, and return references.
 */
import { randomUUID } from 'node:crypto';
import { ApplicationFailure, CancelledFailure, Context, log } from '@temporalio/activity';
import { writeProjectionCheckpoint } from '../persistence/derived-history.js';
import type { SessionStore } from '../persistence/store.js';
import {
  SESSION_FORMAT_VERSION,
  interruptedTurnClosers,
  jsonEqual,
  latestRequestHeader,
  isSessionlogError,
  turnState,
  type AgentSpec,
  type StoredEvent,
  type AssistantMessage,
  type ContentBlock,
  type NewEvent,
  type RequestHeader,
  type Session,
  type SessionEvent,
  type StreamChunk,
  type TurnEndReason,
} from '../session/index.js';
import { parseToolCallArguments } from '../model/tool-arguments.js';
import { ToolInputError, type ToolRegistry } from '../tools/registry.js';
import type { ModelFailure, ModelPort } from './ports.js';
import type { TokenMeasurement } from '../context/meter-types.js';
import { createAbandonCompactionActivity, createCompactionActivity, relievePressure, type ContextDeps } from './context-activities.js';
import { SessionCache, appendBatch, assertOwnTail, eventsWithOp } from './session-writer.js';
import type {
  AppendToolResultsInput,
  EndTurnInput,
  HeadResult,
  ModelStepInput,
  ModelStepResult,
  OpenRunInput,
  OpenRunResult,
  RunToolInput,
  ToolCallRef,
  ToolRunRef,
} from './types.js';
import type { RecentMessage, TurnOutcome } from '../workflows/api.js';

/** How the agent of new sessions is configured (model, system prompt, tool set, limits). */
export type AgentConfig = {
  model: string;
  system?: string;
  tools: string[];
  maxTokens?: number;
  thinking?: boolean;
  reasoningEffort?: string;
};

/** Turns a tool's full output into the text logged inline (spill lives in src/context). */
export type ToolResultShaper = (input: { sessionId: string; callId: string; toolName: string; text: string; locator: string }) => Promise<string>;

export type ActivityDeps = {
  store: SessionStore;
  model: ModelPort;
  tools: ToolRegistry;
  agent: AgentConfig;
  /** Coalescing window for streamed chunks: flush after this many ms… */
  chunkFlushMs: number;
  /** …or once this many characters are buffered. */
  chunkFlushChars: number;
  shapeToolResult?: ToolResultShaper;
  /** Token meter, pressure policy and pruner; omit to run without context management. */
  context?: ContextDeps;
  now?: () => number;
};

const RECENT_IDS = 256;

function nonRetryable(error: unknown): never {
  if (isSessionlogError(error)) throw ApplicationFailure.nonRetryable(error.message, error.code);
  throw error;
}

function requestHeaderFor(deps: ActivityDeps, agent: AgentSpec | undefined): RequestHeader {
  const toolNames = agent?.tools ?? deps.agent.tools;
  const tools = deps.tools.schemas(toolNames);
  const system = agent?.system ?? deps.agent.system;
  return {
    provider: deps.model.provider,
    model: agent?.model ?? deps.agent.model,
    ...(system ? { system } : {}),
    ...(tools.length > 0 ? { tools } : {}),
    ...(deps.agent.maxTokens !== undefined ? { maxTokens: deps.agent.maxTokens } : {}),
    ...(deps.agent.reasoningEffort !== undefined ? { reasoningEffort: deps.agent.reasoningEffort } : {}),
    ...(deps.agent.thinking !== undefined ? { thinking: deps.agent.thinking } : {}),
  };
}

/** Folds streamed chunks into coalesced chunk events and, at the end, content blocks. */
class ChunkCoalescer {
  private pending: StreamChunk[] = [];
  private pendingChars = 0;

  push(chunk: StreamChunk): void {
    const last = this.pending[this.pending.length - 1];
    if (last && last.kind === chunk.kind && chunk.kind !== 'tool-call-delta') {
      (last as { text: string }).text += (chunk as { text: string }).text;
    } else if (
      last &&
      last.kind === 'tool-call-delta' &&
      chunk.kind === 'tool-call-delta' &&
      last.index === chunk.index &&
      chunk.id === undefined &&
      chunk.name === undefined
    ) {
      last.argumentsDelta += chunk.argumentsDelta;
    } else {
      this.pending.push({ ...chunk });
    }
    this.pendingChars += chunk.kind === 'tool-call-delta' ? chunk.argumentsDelta.length : chunk.text.length;
  }

  get size(): number {
    return this.pendingChars;
  }

  take(): StreamChunk[] {
    const out = this.pending;
    this.pending = [];
    this.pendingChars = 0;
    return out;
  }
}

/** Content blocks re-assembled from streamed chunks (used for an interrupted reply). */
function blocksFromChunks(chunks: readonly StreamChunk[]): ContentBlock[] {
  let reasoning = '';
  let text = '';
  for (const chunk of chunks) {
    if (chunk.kind === 'reasoning-delta') reasoning += chunk.text;
    else if (chunk.kind === 'text-delta') text += chunk.text;
  }
  const blocks: ContentBlock[] = [];
  if (reasoning) blocks.push({ type: 'reasoning', text: reasoning });
  if (text) blocks.push({ type: 'text', text });
  return blocks;
}

/** The outcome a `turn/end` reason stands for. */
function turnOutcome(kind: string): TurnOutcome {
  return kind === 'max-steps' || kind === 'max-tokens' || kind === 'aborted' || kind === 'error' || kind === 'interrupted' ? kind : 'completed';
}

function resultFromReply(events: readonly StoredEvent[], headSeq: number): ModelStepResult {
  const reply = events.find((e) => e.type === 'assistant/message') as SessionEvent<'assistant/message'> | undefined;
  const calls: ToolCallRef[] = events
    .filter((e): e is SessionEvent<'tool/call'> => e.type === 'tool/call')
    .map((e) => ({ callId: e.data.callId, name: e.data.name, callSeq: e.seq }));
  const end = events.find((e) => e.type === 'turn/end') as SessionEvent<'turn/end'> | undefined;
  const reason = end ? turnOutcome(end.data.reason.kind) : 'completed';
  const outcome = calls.length > 0 ? 'tools' : reason === 'max-tokens' || reason === 'aborted' || reason === 'error' ? reason : 'completed';
  return { headSeq, replySeq: reply?.seq ?? null, toolCalls: calls, outcome, replayed: true };
}

/** The newest user messages in the log with the outcome of the turn that consumed each. */
export function recentMessages(events: readonly StoredEvent[], limit: number): RecentMessage[] {
  const turns = new Map<number, { replySeq: number | null; outcome: TurnOutcome }>();
  const messages: Array<{ id: string; turn: number }> = [];
  let turn = 0;
  for (const e of events) {
    if (e.type === 'turn/start') {
      turn = (e as SessionEvent<'turn/start'>).data.turn;
      turns.set(turn, { replySeq: null, outcome: 'interrupted' });
    } else if (e.type === 'assistant/message') {
      const t = turns.get((e as SessionEvent<'assistant/message'>).data.turn);
      if (t) t.replySeq = e.seq;
    } else if (e.type === 'turn/end') {
      const data = (e as SessionEvent<'turn/end'>).data;
      const t = turns.get(data.turn);
      if (t) t.outcome = turnOutcome(data.reason.kind);
    } else if (e.type === 'user/message' && e.surfaceOp === 'append' && (e as SessionEvent<'user/message'>).data.source.kind === 'user') {
      messages.push({ id: (e as SessionEvent<'user/message'>).data.id, turn });
    }
  }
  return messages.slice(-limit).map((m) => ({ id: m.id, turn: m.turn, ...(turns.get(m.turn) ?? { replySeq: null, outcome: 'interrupted' as const }) }));
}

export function createActivities(deps: ActivityDeps) {
  const cache = new SessionCache(deps.store);
  const now = deps.now ?? Date.now;

  /**
   * Refreshes the projection cache once a turn is durable (folding only what the last
   * checkpoint lacks), off the turn's critical path. Fail-soft: the cache may lag the log.
   */
  const checkpointProjections = (sessionId: string): void => {
    void writeProjectionCheckpoint(deps.store, sessionId).catch((error: unknown) => {
      // The cache is an accelerator: a failed write leaves it stale, reads fall back to the log.
      log.warn('projection checkpoint failed', { sessionId, error: (error as Error).message });
    });
  };

  /** A new run takes over a session: create it if needed, repair a crashed turn, log `session/run`. */
  async function openRun(input: OpenRunInput): Promise<OpenRunResult> {
    try {
      if (!(await deps.store.exists(input.sessionId))) {
        await deps.store.create({
          version: SESSION_FORMAT_VERSION,
          id: input.sessionId,
          createdAt: now(),
          agent: { model: deps.agent.model, tools: deps.agent.tools, ...(deps.agent.system ? { system: deps.agent.system } : {}) },
        });
      }
      // Log the takeover first: from here on, activities of older runs are fenced out.
      await cache.with(input.sessionId, (session) =>
        appendBatch(deps.store, session, [{ type: 'session/run', time: now(), data: { workflowId: input.workflowId, runId: input.runId } }], `${input.runId}/run`),
      );
      const loaded = await deps.store.load(input.sessionId);
      if (loaded.repaired > 0 || loaded.truncated > 0) cache.forget(input.sessionId);
      return await cache.with(input.sessionId, async (session) => {
        const events = session.events;
        return { headSeq: session.nextSeq, lastTurn: turnState(events).lastTurn, repaired: loaded.repaired, recent: recentMessages(events, RECENT_IDS) };
      });
    } catch (error) {
      nonRetryable(error);
    }
  }

  async function modelStep(input: ModelStepInput): Promise<ModelStepResult> {
    const prefix = `${input.runId}/t${input.turn}/s${input.step}`;
    const ctx = Context.current();
    const attempt = ctx.info.attempt;
    try {
      return await cache.with(input.sessionId, async (session) => {
        assertOwnTail(session, input.knownHead, input.runId);
        const reply = eventsWithOp(session, `${prefix}/reply`, input.knownHead);
        if (reply.length > 0) return resultFromReply(reply, session.nextSeq);
        for (const op of [`${prefix}/cancel`, `${prefix}/error`]) {
          const closed = eventsWithOp(session, op, input.knownHead);
          if (closed.length > 0) return { ...resultFromReply(closed, session.nextSeq), toolCalls: [] };
        }

        const entering: NewEvent[] = [];
        if (input.step === 1) entering.push({ type: 'turn/start', time: now(), data: { turn: input.turn } });
        entering.push({ type: 'step/start', time: now(), data: { turn: input.turn, step: input.step } });
        for (const message of input.entering) {
          entering.push({
            type: 'user/message',
            time: now(),
            data: { id: message.id, role: 'user', content: [{ type: 'text', text: message.text }], source: { kind: 'user' } },
            surfaceOp: 'append',
          });
        }
        await appendBatch(deps.store, session, entering, `${prefix}/start`, input.runId);

        const header = requestHeaderFor(deps, session.header.agent);
        const previous = latestRequestHeader(session);
        if (!previous || !jsonEqual(previous, header)) {
          await appendBatch(deps.store, session, [{ type: 'request/header', time: now(), data: { header, reason: previous ? 'change' : 'initial' } }], `${prefix}/header`, input.runId);
        }
        let pressure: ModelStepResult['pressure'];
        let measured: TokenMeasurement | undefined;
        if (deps.context) {
          const report = await relievePressure({ store: deps.store, session, context: deps.context, header, op: `${prefix}/prune${input.pass}`, runId: input.runId, time: now() });
          measured = report.measurement;
          pressure = { tokens: report.tokens, contextWindow: report.contextWindow, budget: report.budget };
          // Ask the workflow for a compaction once per step; after it, send what we have.
          if (report.needsCompaction && input.pass === 0) {
            return { headSeq: session.nextSeq, replySeq: null, toolCalls: [], outcome: 'needs-compaction', replayed: false, pressure };
          }
        }
        const result = await streamReply(session, input, prefix, attempt, header);
        if (measured && result.replySeq !== null && !result.replayed) {
          const usage = (session.eventAt(result.replySeq) as SessionEvent<'assistant/message'>).data.usage;
          if (usage) deps.context?.onUsage?.({ model: header.model, measurement: measured, usage });
        }
        return pressure ? { ...result, pressure } : result;
      });
    } catch (error) {
      if (error instanceof CancelledFailure || error instanceof ApplicationFailure) throw error;
      nonRetryable(error);
    }
  }

  async function streamReply(session: Session, input: ModelStepInput, prefix: string, attempt: number, header: RequestHeader): Promise<ModelStepResult> {
    const ctx = Context.current();
    const messages = session.deriveMessages();
    const coalescer = new ChunkCoalescer();
    const streamed: StreamChunk[] = [];
    const chunkSeqs: number[] = [];
    let flushIndex = 0;
    let flushing: Promise<void> = Promise.resolve();
    const flush = (): Promise<void> => {
      flushing = flushing.then(async () => {
        const chunks = coalescer.take();
        if (chunks.length === 0) return;
        const events: NewEvent[] = chunks.map((chunk) => ({ type: 'assistant/chunk', time: now(), data: { turn: input.turn, step: input.step, chunk } }));
        const stored = await appendBatch(deps.store, session, events, `${prefix}/a${attempt}/c${flushIndex++}`, input.runId);
        for (const e of stored) chunkSeqs.push(e.seq);
        ctx.heartbeat({ chunks: chunkSeqs.length });
      });
      return flushing;
    };
    const timer = setInterval(() => {
      if (coalescer.size > 0) void flush().catch(() => undefined);
      else ctx.heartbeat({ chunks: chunkSeqs.length });
    }, deps.chunkFlushMs);
    const modelName = header.model;
    try {
      const result = await deps.model.stream({
        messages,
        header,
        signal: ctx.cancellationSignal,
        onChunk(chunk) {
          streamed.push(chunk);
          coalescer.push(chunk);
          if (coalescer.size >= deps.chunkFlushChars) void flush().catch(() => undefined);
        },
      });
      clearInterval(timer);
      await flush();
      await flushing;
      const message: AssistantMessage = {
        id: randomUUID(),
        role: 'assistant',
        content: result.content,
        source: { kind: 'model', provider: result.provider, model: result.model },
      };
      const calls = result.content.filter((b) => b.type === 'tool-call');
      const maxTokens = result.finishReason === 'length';
      const events: NewEvent[] = [
        {
          type: 'assistant/message',
          time: now(),
          data: {
            turn: input.turn,
            step: input.step,
            message,
            ...(result.usage ? { usage: result.usage } : {}),
            finishReason: result.finishReason,
          },
          surfaceOp: 'append',
          sourceEventSeqs: [...chunkSeqs],
        },
      ];
      for (const call of calls) {
        events.push({ type: 'tool/call', time: now(), data: { turn: input.turn, step: input.step, callId: call.id, name: call.name, arguments: call.arguments } });
      }
      if (calls.length === 0) {
        const reason: TurnEndReason = maxTokens ? { kind: 'max-tokens' } : { kind: 'completed' };
        events.push({ type: 'step/end', time: now(), data: { turn: input.turn, step: input.step } });
        events.push({ type: 'turn/end', time: now(), data: { turn: input.turn, reason } });
      }
      const stored = await appendBatch(deps.store, session, events, `${prefix}/reply`, input.runId);
      if (calls.length === 0) checkpointProjections(session.id);
      return { ...resultFromReply(stored, session.nextSeq), replayed: false };
    } catch (error) {
      clearInterval(timer);
      await flushing.catch(() => undefined);
      if (ctx.cancellationSignal.aborted) {
        if (ctx.cancellationDetails?.cancelRequested !== true) {
          // The run is gone, timed out or the worker is stopping: write nothing; the owning
          // (or next) run closes the turn from the log.
          throw new CancelledFailure('model step abandoned: its run is gone or the worker is stopping');
        }
        await flush().catch(() => undefined);
        await flushing.catch(() => undefined);
        const partial: AssistantMessage = {
          id: randomUUID(),
          role: 'assistant',
          content: blocksFromChunks(streamed),
          source: { kind: 'model', provider: deps.model.provider, model: modelName },
        };
        const events: NewEvent[] = [
          {
            type: 'assistant/message',
            time: now(),
            data: { turn: input.turn, step: input.step, message: partial, interrupted: true },
            surfaceOp: 'append',
            sourceEventSeqs: [...chunkSeqs],
          },
          { type: 'step/end', time: now(), data: { turn: input.turn, step: input.step } },
          { type: 'turn/end', time: now(), data: { turn: input.turn, reason: { kind: 'aborted', reason: { kind: 'user' } } } },
        ];
        await appendBatch(deps.store, session, events, `${prefix}/cancel`, input.runId);
        throw new CancelledFailure('model step cancelled; partial reply logged as interrupted');
      }
      const failure = deps.model.classify(error);
      return await handleModelFailure(session, input, prefix, attempt, failure);
    }
  }

  async function handleModelFailure(session: Session, input: ModelStepInput, prefix: string, attempt: number, failure: ModelFailure): Promise<ModelStepResult> {
    if (failure.retryable && attempt < input.maxAttempts) {
      const delayMs = failure.retryAfterMs ?? Math.min(30_000, 1000 * 2 ** (attempt - 1));
      await appendBatch(
        deps.store,
        session,
        [
          {
            type: 'llm/retry',
            time: now(),
            data: {
              turn: input.turn,
              step: input.step,
              attempt: attempt + 1,
              delayMs,
              failure: { code: failure.code, message: failure.message, ...(failure.status !== undefined ? { status: failure.status } : {}) },
            },
          },
        ],
        `${prefix}/a${attempt}/fail`,
        input.runId,
      );
      throw ApplicationFailure.create({ message: failure.message, type: failure.code, nextRetryDelay: delayMs });
    }
    if (failure.code === 'context_overflow') {
      return { headSeq: session.nextSeq, replySeq: null, toolCalls: [], outcome: 'context-overflow', error: { code: failure.code, message: failure.message }, replayed: false };
    }
    const reason: TurnEndReason = {
      kind: 'error',
      error: { message: failure.message, code: failure.code, ...(failure.status !== undefined ? { status: failure.status } : {}) },
    };
    const closers = interruptedTurnClosers(session.events, reason, now());
    await appendBatch(deps.store, session, closers, `${prefix}/error`, input.runId);
    return { headSeq: session.nextSeq, replySeq: null, toolCalls: [], outcome: 'error', error: { code: failure.code, message: failure.message }, replayed: false };
  }

  /** Runs one tool call named by its logged `tool/call`; stores the full output as an artifact. */
  async function runTool(input: RunToolInput): Promise<ToolRunRef> {
    const ctx = Context.current();
    const call = await cache.with(input.sessionId, async (session) => session.eventAt(input.callSeq));
    if (call?.type !== 'tool/call') {
      throw ApplicationFailure.nonRetryable(`seq ${input.callSeq} of session ${input.sessionId} is not a tool/call`, 'INVALID_ARGUMENT');
    }
    const { callId, name, arguments: rawArgs } = (call as SessionEvent<'tool/call'>).data;
    let text: string;
    let isError = false;
    let errorCode: string | undefined;
    const tool = deps.tools.get(name);
    if (!tool) {
      text = `Unknown tool "${name}". Available tools: ${deps.tools.names.join(', ') || '(none)'}.`;
      isError = true;
      errorCode = 'TOOL_UNKNOWN';
    } else {
      // Model output is a boundary: arguments that are not a JSON object go back to the model as an error result.
      const parsed = parseToolCallArguments(name, rawArgs);
      const args = parsed.ok ? parsed.value : undefined;
      if (!parsed.ok) {
        text = parsed.message;
        isError = true;
        errorCode = parsed.code;
      }
      if (!isError) {
        const heartbeat = setInterval(() => ctx.heartbeat(), 1000);
        try {
          const output = await tool.run(args, { sessionId: input.sessionId, callId, artifacts: deps.store.artifacts, signal: ctx.cancellationSignal });
          text = output.text;
          isError = output.isError === true;
        } catch (error) {
          if (ctx.cancellationSignal.aborted) throw new CancelledFailure(`tool ${name} cancelled`);
          if (error instanceof ToolInputError || isSessionlogError(error)) {
            text = error.message;
            errorCode = error.code;
          } else if (ctx.info.attempt < input.maxAttempts) {
            throw error;
          } else {
            text = `The tool ${name} failed after ${ctx.info.attempt} attempts: ${(error as Error)?.message ?? String(error)}`;
            errorCode = 'TOOL_FAILED';
          }
          isError = true;
        } finally {
          clearInterval(heartbeat);
        }
      }
    }
    const ref = await deps.store.artifacts.put({ sessionId: input.sessionId, name: `${name}-${callId}.txt`, content: text! });
    return { callId, callSeq: input.callSeq, locator: ref.locator, bytes: ref.bytes, isError, ...(errorCode ? { errorCode } : {}) };
  }

  /** Logs the step's tool results in call order (with spill) and closes the step. */
  async function appendToolResults(input: AppendToolResultsInput): Promise<HeadResult> {
    const prefix = `${input.runId}/t${input.turn}/s${input.step}`;
    try {
      return await cache.with(input.sessionId, async (session) => {
        assertOwnTail(session, input.knownHead, input.runId);
        if (eventsWithOp(session, `${prefix}/results`, input.knownHead).length > 0) return { headSeq: session.nextSeq };
        const events: NewEvent[] = [];
        for (const result of input.results) {
          const full = await deps.store.artifacts.get(input.sessionId, result.locator);
          const call = session.eventAt(result.callSeq) as SessionEvent<'tool/call'>;
          const text = deps.shapeToolResult
            ? await deps.shapeToolResult({ sessionId: input.sessionId, callId: result.callId, toolName: call.data.name, text: full, locator: result.locator })
            : full;
          events.push({
            type: 'tool/result',
            time: now(),
            data: {
              turn: input.turn,
              step: input.step,
              message: {
                id: randomUUID(),
                role: 'user',
                content: [{ type: 'tool-result', toolCallId: result.callId, content: [{ type: 'text', text }], ...(result.isError ? { isError: true as const } : {}) }],
                source: { kind: 'tool', callId: result.callId },
              },
              ...(result.errorCode ? { error: { name: 'ToolError', code: result.errorCode } } : {}),
              meta: { locator: result.locator, bytes: result.bytes },
            },
            surfaceOp: 'append',
            sourceEventSeqs: [result.callSeq],
          });
        }
        events.push({ type: 'step/end', time: now(), data: { turn: input.turn, step: input.step } });
        if (input.endTurnReason) events.push({ type: 'turn/end', time: now(), data: { turn: input.turn, reason: { kind: input.endTurnReason } } });
        await appendBatch(deps.store, session, events, `${prefix}/results`, input.runId);
        if (input.endTurnReason) checkpointProjections(session.id);
        return { headSeq: session.nextSeq };
      });
    } catch (error) {
      nonRetryable(error);
    }
  }

  /** Closes a turn that did not end by itself (cancel, failure); a no-op when it is closed. */
  async function endTurn(input: EndTurnInput): Promise<HeadResult> {
    try {
      return await cache.with(input.sessionId, async (session) => {
        assertOwnTail(session, input.knownHead, input.runId);
        const reason: TurnEndReason =
          input.reason.kind === 'aborted'
            ? { kind: 'aborted', reason: { kind: 'user' } }
            : { kind: 'error', error: { code: input.reason.code, message: input.reason.message } };
        const closers = interruptedTurnClosers(session.events, reason, now());
        if (closers.length > 0) await appendBatch(deps.store, session, closers, `${input.runId}/t${input.turn}/end`, input.runId);
        return { headSeq: session.nextSeq };
      });
    } catch (error) {
      nonRetryable(error);
    }
  }

  const compact = deps.context
    ? createCompactionActivity({ store: deps.store, model: deps.model, context: deps.context, cache, now })
    : async (): Promise<never> => {
        throw ApplicationFailure.nonRetryable('context management is not configured on this worker', 'NOT_CONFIGURED');
      };

  const abandonCompaction = createAbandonCompactionActivity({ store: deps.store, cache, now });

  return { openRun, modelStep, runTool, appendToolResults, endTurn, compact, abandonCompaction };
}

export type SessionActivities = ReturnType<typeof createActivities>;
