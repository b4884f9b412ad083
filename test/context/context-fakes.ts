/**
 * Deterministic fakes and a store-backed harness for unit tests of the compaction transaction
 * (src/activities/context-activities.ts). The meter prices by content length so expected token
 * counts can be computed exactly; the model port returns scripted summaries or throws and
 * records every request. The store is a real SQLite store and the activity runs in Temporal's
 * MockActivityEnvironment (it reads `Context.current()`).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger } from '@temporalio/worker';
import { createCompactionActivity, resolveContextDeps, type CompactActivityResult, type CompactInput } from '../../src/activities/context-activities.js';
import type { ModelCallRequest, ModelCallResult, ModelPort } from '../../src/activities/ports.js';
import { SessionCache } from '../../src/activities/session-writer.js';
import type { ContextPolicy } from '../../src/context/compaction.js';
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
} from '../../src/session/index.js';

export const T0 = 1_700_000_000_000;
export const RUN = 'run-1';

/** A meter with exact, easily predicted arithmetic: a message costs ceil(len(JSON of its content) / 4). */
export function lengthMeter(): TokenMeter {
  const messageTokens = (message: Message): number => Math.ceil(JSON.stringify(message.content).length / 4);
  const headerTokens = (header: RequestHeader): number => Math.ceil(((header.system ?? '').length + JSON.stringify(header.tools ?? []).length) / 4);
  return {
    messageTokens,
    headerTokens,
    measure(session: Session, header: RequestHeader): TokenMeasurement {
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

export type ScriptedReply = string | ModelCallResult | Error;

/** A model port that answers each call with the next scripted reply (the last one repeats) and records requests. */
export function scriptedModel(replies: ScriptedReply[], options: { retryable?: boolean } = {}): ModelPort & { requests: ModelCallRequest[] } {
  const requests: ModelCallRequest[] = [];
  return {
    provider: 'fake',
    requests,
    async stream(request) {
      requests.push(request);
      const reply = replies[Math.min(requests.length - 1, replies.length - 1)]!;
      if (reply instanceof Error) throw reply;
      if (typeof reply === 'string') return { content: [{ type: 'text', text: reply }], finishReason: 'stop', provider: 'fake', model: request.header.model, usage: { inputTokens: 100, outputTokens: 10 } };
      return reply;
    },
    classify(error) {
      return { code: 'SUMMARY_FAILED', message: error instanceof Error ? error.message : String(error), retryable: options.retryable ?? false };
    },
  };
}

export const HEADER: RequestHeader = {
  provider: 'fake',
  model: 'fake',
  system: 'You are a careful assistant.',
  tools: [{ name: 'echo', description: 'Echo the input.', parameters: { type: 'object', properties: { x: { type: 'string' } } } }],
};

export function sessionHeader(id: string): SessionHeader {
  return { version: SESSION_FORMAT_VERSION, id, createdAt: T0 };
}

export function user(id: string, text: string): NewEvent {
  return { type: 'user/message', time: T0, data: { id, role: 'user', content: [{ type: 'text', text }], source: { kind: 'user' } }, surfaceOp: 'append' };
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
        message: { id: `r${turn}`, role: 'user', content: [{ type: 'tool-result', toolCallId: callId, content: [{ type: 'text', text: `result ${turn} ${'r'.repeat(size)}` }] }], source: { kind: 'tool', callId } },
      },
      surfaceOp: 'append',
    },
    { type: 'step/end', time: T0, data: { turn, step: 1 } },
    { type: 'step/start', time: T0, data: { turn, step: 2 } },
    {
      type: 'assistant/message',
      time: T0,
      data: { turn, step: 2, message: { id: `a${turn}.2`, role: 'assistant', content: [{ type: 'text', text: `answer ${turn} ${'a'.repeat(size)}` }], source: { kind: 'model', provider: 'fake', model: 'fake' } } },
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

export type Harness = {
  store: SessionStore;
  id: string;
  model: ReturnType<typeof scriptedModel>;
  meter: TokenMeter;
  /** Appends events directly to the store (as another activity of the run would), op `<runId>/<label>`. */
  seed(events: readonly NewEvent[], label: string, runId?: string): Promise<void>;
  /** Runs the compaction activity; `knownHead` defaults to the stored next seq. */
  compact(input: Partial<CompactInput> & { compactionId: string }, info?: { attempt?: number }): Promise<CompactActivityResult>;
  events(): Promise<StoredEvent[]>;
  session(): Promise<Session>;
  close(): Promise<void>;
};

let counter = 0;

/** A real SQLite store in a temp dir holding one session, and the compaction activity over it. */
export async function compactionHarness(options: {
  replies?: ScriptedReply[];
  retryable?: boolean;
  policy?: Partial<ContextPolicy>;
  contextWindow?: number;
  meter?: TokenMeter;
  url?: string;
  /** Wraps the store the activity writes through (fault injection); the harness reads the real one. */
  wrapStore?: (store: SessionStore) => SessionStore;
} = {}): Promise<Harness> {
  const dir = options.url ? undefined : mkdtempSync(join(tmpdir(), 'sessionlog-compaction-'));
  const store = await openStore(options.url ?? `sqlite:${join(dir!, 'store.db')}`);
  const activityStore = options.wrapStore ? options.wrapStore(store) : store;
  const id = `cmp-${process.pid}-${counter++}`;
  await store.create(sessionHeader(id));
  const model = scriptedModel(options.replies ?? ['## Primary request\n- short summary'], { retryable: options.retryable ?? false });
  const meter = options.meter ?? lengthMeter();
  const cache = new SessionCache(activityStore);
  const context = resolveContextDeps({ meter, contextWindow: () => options.contextWindow ?? 100_000, policy: options.policy ?? {}, pruner: false });
  let clock = T0;
  const activity = createCompactionActivity({ store: activityStore, model, context, cache, now: () => ++clock });
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
      const knownHead = input.knownHead ?? (await store.nextSeq(id));
      const full: CompactInput = { sessionId: id, runId: RUN, trigger: 'manual', turn: null, knownHead, maxAttempts: 3, ...input } as CompactInput;
      // Expected activity failures are asserted by the tests; keep the SDK's warnings out of the output.
      return new MockActivityEnvironment({ attempt: info.attempt ?? 1 }, { logger: new DefaultLogger('ERROR') }).run(activity, full);
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
