/**
 * Deterministic fakes and a store-backed harness for unit tests of the compaction transaction
 * (src/context/compactor.ts) as the engine runs it: through the fenced log writer, with the
 * engine's op keys, and its failures mapped the way the activity maps them. The meter prices by
 * content length so expected token counts can be computed exactly; the model port returns
 * scripted summaries or throws and records every request. The store is a real SQLite store.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach } from 'vitest';
import { toTemporalFailure } from '../../src/activities/failures.js';
import type { ContextPolicy } from '../../src/context/compaction.js';
import { runCompaction, type CompactionOutcome, type CompactionRequest } from '../../src/context/compactor.js';
import { resolveContextDeps, type LogPort } from '../../src/context/deps.js';
import { LogWriter, compactionOp } from '../../src/engine/index.js';
import { pacedModel, type PacingConfig } from '../../src/engine/admission/pacing.js';
import { DEFAULT_MODEL_CATALOGUE, lookupModel } from '../../src/model/catalogue.js';
import { ModelCallError, modelFailure } from '../../src/model/errors.js';
import type { ModelPort, ModelReply, ModelRequest } from '../../src/model/provider.js';
import type { NodePrice, TokenMeasurement, TokenMeter } from '../../src/context/meter-types.js';
import { openStore } from '../../src/persistence/open.js';
import type { SessionStore } from '../../src/persistence/store.js';
import {
  SESSION_FORMAT_VERSION,
  Session,
  deriveEventMessage,
  type StoredEvent,
  type ContentBlock,
  type Message,
  type NewEvent,
  type RequestHeader,
  type SessionHeader,
  type SessionView,
} from '../../src/session/index.js';

export const T0 = 1_700_000_000_000;
export const RUN = 'run-1';

/** A meter with exact, easily predicted arithmetic: a message costs ceil(len(JSON of its content) / 4). */
export function lengthMeter(): TokenMeter {
  const messageTokens = (message: Message): number => Math.ceil(JSON.stringify(message.content).length / 4);
  const headerTokens = (header: RequestHeader): number =>
    Math.ceil(((header.system ?? '').length + JSON.stringify(header.tools ?? []).length) / 4);
  return {
    messageTokens,
    headerTokens,
    measure(session: SessionView, header: RequestHeader): TokenMeasurement {
      const nodes: NodePrice[] = session.surfaceNodes.map((seq) => {
        const message = deriveEventMessage(session.eventAt(seq)!);
        return { seq, tokens: message ? messageTokens(message) : 0 };
      });
      const surfaceTokens = nodes.reduce((sum, n) => sum + n.tokens, 0);
      const h = headerTokens(header);
      return Object.freeze({
        logRevision: session.nextSeq,
        headerTokens: h,
        surfaceTokens,
        totalTokens: h + surfaceTokens,
        baseline: 'estimated' as const,
        nodes: Object.freeze(nodes),
      });
    },
  };
}

export type ScriptedReply = string | Omit<ModelReply, 'aborted'> | Error;

/**
 * A model port that answers each call with the next scripted reply (the last one repeats) and
 * records requests. A scripted Error is a `server` failure when `retryable`, else `bad_request`.
 */
export function scriptedModel(
  replies: ScriptedReply[],
  options: { retryable?: boolean } = {},
): ModelPort & { requests: ModelRequest[] } {
  const requests: ModelRequest[] = [];
  return {
    provider: 'fake',
    requests,
    model: (name) => lookupModel(DEFAULT_MODEL_CATALOGUE, name),
    async stream(request) {
      requests.push(request);
      const reply = replies[Math.min(requests.length - 1, replies.length - 1)]!;
      if (reply instanceof Error)
        throw new ModelCallError(modelFailure(options.retryable ? 'server' : 'bad_request', reply.message), undefined, {
          cause: reply,
        });
      if (typeof reply === 'string')
        return {
          content: [{ type: 'text', text: reply }],
          finishReason: 'stop',
          provider: 'fake',
          model: request.header.model,
          usage: { inputTokens: 100, outputTokens: 10 },
          aborted: false,
        };
      return { ...reply, aborted: false };
    },
  };
}

export const HEADER: RequestHeader = {
  provider: 'fake',
  model: 'fake',
  system: 'You are a careful assistant.',
  tools: [
    {
      name: 'echo',
      description: 'Echo the input.',
      parameters: { type: 'object', properties: { x: { type: 'string' } } },
    },
  ],
};

export function sessionHeader(id: string): SessionHeader {
  return { version: SESSION_FORMAT_VERSION, id, createdAt: T0 };
}

export function user(id: string, text: string): NewEvent {
  return {
    type: 'user/message',
    time: T0,
    data: { id, role: 'user', content: [{ type: 'text', text }], source: { kind: 'user' } },
    surfaceOp: 'append',
  };
}

/**
 * One complete turn as the loop logs it: the user message, an assistant step that calls
 * `echo` (answered by a tool result), then a final text reply.
 */
export function toolTurn(turn: number, size = 200): NewEvent[] {
  const callId = `call-${turn}`;
  return [
    { type: 'turn/start', time: T0, data: { turn } },
    { type: 'step/start', time: T0, data: { turn, step: 1 } },
    user(`u${turn}`, `question ${turn} ${'q'.repeat(size)}`),
    {
      type: 'assistant/message',
      time: T0,
      data: {
        turn,
        step: 1,
        message: {
          id: `a${turn}.1`,
          role: 'assistant',
          content: [
            { type: 'reasoning', text: `thinking ${turn}` },
            { type: 'tool-call', id: callId, name: 'echo', arguments: JSON.stringify({ x: `arg ${turn}` }) },
          ],
          source: { kind: 'model', provider: 'fake', model: 'fake' },
        },
      },
      surfaceOp: 'append',
    },
    { type: 'tool/call', time: T0, data: { turn, step: 1, callId, name: 'echo', arguments: '{}' } },
    {
      type: 'tool/result',
      time: T0,
      data: {
        turn,
        step: 1,
        message: {
          id: `r${turn}`,
          role: 'user',
          content: [
            {
              type: 'tool-result',
              toolCallId: callId,
              content: [{ type: 'text', text: `result ${turn} ${'r'.repeat(size)}` }],
            },
          ],
          source: { kind: 'tool', callId },
        },
      },
      surfaceOp: 'append',
    },
    { type: 'step/end', time: T0, data: { turn, step: 1 } },
    { type: 'step/start', time: T0, data: { turn, step: 2 } },
    {
      type: 'assistant/message',
      time: T0,
      data: {
        turn,
        step: 2,
        message: {
          id: `a${turn}.2`,
          role: 'assistant',
          content: [{ type: 'text', text: `answer ${turn} ${'a'.repeat(size)}` }],
          source: { kind: 'model', provider: 'fake', model: 'fake' },
        },
      },
      surfaceOp: 'append',
    },
    { type: 'step/end', time: T0, data: { turn, step: 2 } },
    { type: 'turn/end', time: T0, data: { turn, reason: { kind: 'completed' } } },
  ];
}

export function runEvent(runId = RUN): NewEvent {
  return { type: 'session/run', time: T0, data: { workflowId: 'session/s', runId } };
}

export function headerEvent(header: RequestHeader = HEADER): NewEvent {
  return { type: 'request/header', time: T0, data: { header, reason: 'initial' } };
}

/** What the harness's `compact` takes: the transaction's request plus the run and head the workflow would pass. */
export type CompactInput = Partial<Omit<CompactionRequest, 'attempt'>> & {
  compactionId: string;
  runId?: string;
  knownHead?: number;
};

/** What a compaction activity returns. */
export type CompactActivityResult = CompactionOutcome & { headSeq: number };

export type Harness = {
  store: SessionStore;
  id: string;
  model: ReturnType<typeof scriptedModel>;
  meter: TokenMeter;
  /** Appends events directly to the store (as another activity of the run would), op `<runId>/<label>`. */
  seed(events: readonly NewEvent[], label: string, runId?: string): Promise<void>;
  /** Runs the compaction as the activity does; `knownHead` defaults to the stored next seq. */
  compact(input: CompactInput, info?: { attempt?: number }): Promise<CompactActivityResult>;
  events(): Promise<StoredEvent[]>;
  session(): Promise<Session>;
  close(): Promise<void>;
};

let counter = 0;

/** The engine's log port for a compaction: the fenced writer with the compaction's op keys. */
export function compactionLog(writer: LogWriter, runId: string, compactionId: string): LogPort {
  return {
    get session() {
      return writer.session;
    },
    append: (events, suffix) => writer.append(events, compactionOp(runId, compactionId, suffix)),
  };
}

/** A real SQLite store in a temp dir holding one session, and the compaction transaction over it. */
export async function compactionHarness(
  options: {
    replies?: ScriptedReply[];
    retryable?: boolean;
    policy?: Partial<ContextPolicy>;
    contextWindow?: number;
    meter?: TokenMeter;
    url?: string;
    /** Wraps the store the compaction writes through (fault injection); the harness reads the real one. */
    wrapStore?: (store: SessionStore) => SessionStore;
    /** Paces the summaries in the store's bucket (engine/pacing.ts), as a worker with pacing does. */
    pacing?: { config: PacingConfig; pauseAfterMs?: number };
  } = {},
): Promise<Harness> {
  const dir = options.url ? undefined : mkdtempSync(join(tmpdir(), 'sessionlog-compaction-'));
  const store = await openStore(options.url ?? `sqlite:${join(dir!, 'store.db')}`);
  const activityStore = options.wrapStore ? options.wrapStore(store) : store;
  const id = `cmp-${process.pid}-${counter++}`;
  await store.create(sessionHeader(id));
  const model = scriptedModel(options.replies ?? ['## Primary request\n- short summary'], {
    retryable: options.retryable ?? false,
  });
  const meter = options.meter ?? lengthMeter();
  const context = resolveContextDeps({
    meter,
    contextWindow: () => options.contextWindow ?? 100_000,
    policy: options.policy ?? {},
    pruner: false,
  });
  let clock = T0;
  const events = () => store.readFrom(id, 0);
  return {
    store,
    id,
    model,
    meter,
    async seed(batch, label, runId = RUN) {
      await store.append(id, batch, { expectedSeq: await store.nextSeq(id), op: `${runId}/${label}` });
    },
    async compact(input, info = {}) {
      const { runId = RUN, knownHead: head, compactionId, ...request } = input;
      const knownHead = head ?? (await store.nextSeq(id));
      try {
        const writer = await LogWriter.open(activityStore, id, runId, knownHead);
        const outcome = await runCompaction(
          {
            log: compactionLog(writer, runId, compactionId),
            summarizer: options.pacing
              ? pacedModel(
                  { pacing: options.pacing.config, store: activityStore, model, now: Date.now, heartbeatMs: 50 },
                  model,
                  options.pacing,
                  {
                    attempt: info.attempt ?? 1,
                    signal: new AbortController().signal,
                    heartbeat() {},
                    cancelRequested: () => false,
                  },
                )
              : model,
            context,
            now: () => ++clock,
          },
          {
            compactionId,
            trigger: 'manual',
            turn: null,
            maxAttempts: 3,
            ...request,
            fromSeq: knownHead,
            attempt: info.attempt ?? 1,
          },
        );
        return { headSeq: writer.session.nextSeq, ...outcome };
      } catch (error) {
        throw toTemporalFailure(error);
      }
    },
    events,
    async session() {
      return Session.fromEvents(sessionHeader(id), await events());
    },
    async close() {
      await store.close();
      if (dir) rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** `store` with `append` failing once for the first batch whose op ends with `suffix`. */
export function failOnceOnOp(suffix: string): (store: SessionStore) => SessionStore {
  return (store) => {
    let failed = false;
    return new Proxy(store, {
      get(target, prop) {
        if (prop === 'append') {
          return async (...args: Parameters<SessionStore['append']>) => {
            if (!failed && args[2].op.endsWith(suffix)) {
              failed = true;
              throw new Error(`injected append failure for ${args[2].op}`);
            }
            return target.append(...args);
          };
        }
        const value = Reflect.get(target, prop, target) as unknown;
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    });
  };
}

/** Text of a message's text blocks. */
export function textBlocks(content: readonly ContentBlock[]): string[] {
  return content.filter((b) => b.type === 'text').map((b) => (b as { text: string }).text);
}

/** The summary the harnesses of {@link useHarnesses} reply with by default. */
export const SUMMARY = '## Primary request\n- the user asked two questions';

/**
 * A factory of compaction harnesses (replying {@link SUMMARY} unless told otherwise) that the
 * calling test file closes after each test.
 */
export function useHarnesses(): (options?: Parameters<typeof compactionHarness>[0]) => Promise<Harness> {
  let open: Harness[] = [];
  afterEach(async () => {
    for (const h of open) await h.close();
    open = [];
  });
  return async (options = {}) => {
    const h = await compactionHarness({ replies: [SUMMARY], ...options });
    open.push(h);
    return h;
  };
}

/** A session of `turns` closed tool-using turns, owned by {@link RUN}, with a request header. */
export async function conversation(h: Harness, turns = 2): Promise<void> {
  await h.seed([runEvent(), headerEvent()], 'open');
  for (let t = 1; t <= turns; t++) await h.seed(toolTurn(t), `turn${t}`);
}
