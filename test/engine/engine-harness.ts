/**
 * The turn engine driven directly, without Temporal (DESIGN §2 "Tested directly"): a real SQLite
 * store in a temp dir, the offline model (src/model/fake-server.ts, one per test file) behind the
 * worker's own OpenAI-compatible model port, and the operations called as the workflow calls
 * them: `openRun`, then `modelStep`, `runTool`, `appendToolResults` with the heads each returns.
 */
import { afterEach } from 'vitest';
import { resolveContextDeps, type ContextDeps } from '../../src/context/deps.js';
import type { ContextPolicy } from '../../src/context/compaction.js';
import { createTokenMeter } from '../../src/context/token-meter.js';
import {
  createTurnEngine,
  type EngineDeps,
  type ModelStepInput,
  type ModelStepResult,
  type StepContext,
  type TurnEngine,
  type UserInput,
} from '../../src/engine/index.js';
import { DEFAULT_MODEL_CATALOGUE, lookupModel } from '../../src/model/catalogue.js';
import type { FakeModelServer } from '../../src/model/fake-server.js';
import { createOpenAIProvider } from '../../src/model/provider.js';
import { inboxKeys, openStore, type SessionStore } from '../../src/persistence/index.js';
import { isEventOfType, type KnownEventType, type SessionEvent, type StoredEvent } from '../../src/session/index.js';
import { ToolRegistry, type Tool } from '../../src/tools/registry.js';
import { sqliteFixture, tempDir } from '../support/store-fixtures.js';

/** A step context as an activity's, recording what the step reported while alive. */
export type RecordingContext = StepContext & { heartbeats: unknown[] };

export function stepContext(attempt = 1): RecordingContext {
  const heartbeats: unknown[] = [];
  return {
    attempt,
    signal: new AbortController().signal,
    heartbeat: (details) => void heartbeats.push(details),
    cancelRequested: () => false,
    heartbeats,
  };
}

/** Context management as the worker builds it by default, over the catalogue's tokenizers and windows. */
export function catalogueContext(policy: Partial<ContextPolicy> = {}): ContextDeps {
  return resolveContextDeps({
    meter: createTokenMeter({ catalogue: DEFAULT_MODEL_CATALOGUE }),
    contextWindow: (model) => lookupModel(DEFAULT_MODEL_CATALOGUE, model).contextWindow,
    policy,
  });
}

export type EngineHarness = {
  store: SessionStore;
  engine: TurnEngine;
  sessionId: string;
  runId: string;
  /** The log's head as the workflow last saw it (updated by each call below). */
  head: number;
  /** Puts a user message in the inbox, as the client does, and returns what crosses Temporal. */
  message(id: string, text: string): Promise<UserInput>;
  /** One model step at the harness's head (`input` overrides the rest of the workflow's input). */
  modelStep(
    input: Partial<ModelStepInput> & Pick<ModelStepInput, 'turn' | 'step'>,
    ctx?: StepContext,
  ): Promise<ModelStepResult>;
  /** Runs the step's tool calls in `order` (default: as asked for), then logs their results. */
  toolRound(turn: number, step: number, result: ModelStepResult, order?: 'reversed'): Promise<void>;
  events(): Promise<StoredEvent[]>;
  /** The chat-completion requests the model server answered. */
  modelCalls(): number;
};

export type HarnessOptions = {
  tools?: Tool[];
  context?: ContextDeps;
  pacing?: EngineDeps['pacing'];
  /** The store as the engine sees it (e.g. to watch what it calls). */
  wrapStore?: (store: SessionStore) => SessionStore;
};

/**
 * A harness factory for the test file: each harness gets its own store (closed and removed after
 * the test) and a session opened by a run, over the file's fake model server.
 */
export function useEngineHarness(fake: () => FakeModelServer): (options?: HarnessOptions) => Promise<EngineHarness> {
  const cleanups: Array<() => Promise<void> | void> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });
  return async (options = {}) => {
    const { dir, cleanup } = tempDir('sessionlog-engine-');
    cleanups.push(cleanup);
    const store = await openStore(sqliteFixture.url(dir));
    cleanups.push(() => store.close());
    const tools = options.tools ?? [];
    const deps: EngineDeps = {
      store: options.wrapStore ? options.wrapStore(store) : store,
      model: createOpenAIProvider({ baseURL: fake().baseURL, apiKey: 'test-key', provider: 'fake' }),
      tools: new ToolRegistry(tools),
      agent: { model: 'fake', tools: tools.map((tool) => tool.name) },
      approval: { mode: 'never' },
      heartbeatMs: 20,
      now: Date.now,
      ...(options.context ? { context: options.context } : {}),
      ...(options.pacing ? { pacing: options.pacing } : {}),
    };
    const engine = createTurnEngine(deps);
    const sessionId = 'engine-direct';
    const runId = 'run-1';
    const opened = await engine.openRun({ sessionId, workflowId: `session/${sessionId}`, runId });
    const harness: EngineHarness = {
      store,
      engine,
      sessionId,
      runId,
      head: opened.headSeq,
      async message(id, text) {
        const ref = await store.inbox.put(sessionId, inboxKeys.message(id), JSON.stringify({ text }));
        return { id, ref };
      },
      async modelStep(input, ctx = stepContext()) {
        const result = await engine.modelStep(
          { sessionId, runId, knownHead: harness.head, entering: [], maxAttempts: 3, pass: 0, ...input },
          ctx,
        );
        harness.head = result.headSeq;
        return result;
      },
      async toolRound(turn, step, result, order) {
        const calls = order === 'reversed' ? [...result.toolCalls].reverse() : result.toolCalls;
        const refs = [];
        for (const call of calls)
          refs.push(
            await engine.runTool({ sessionId, turn, step, callSeq: call.callSeq, maxAttempts: 1 }, stepContext()),
          );
        const appended = await engine.appendToolResults({
          sessionId,
          runId,
          turn,
          step,
          knownHead: harness.head,
          results: refs,
        });
        harness.head = appended.headSeq;
      },
      events: () => store.readFrom(sessionId, 0),
      modelCalls: () => fake().chatRequests().length,
    };
    return harness;
  };
}

/** The events of `type` in `events`. */
export function ofType<K extends KnownEventType>(events: readonly StoredEvent[], type: K): Array<SessionEvent<K>> {
  const found: Array<SessionEvent<K>> = [];
  for (const event of events) if (isEventOfType(event, type)) found.push(event);
  return found;
}
