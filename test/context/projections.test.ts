import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  createContextBreakdownProjection,
  createContextPressureProjection,
  heuristicPricer,
  meterPricer,
  tokenUsageProjection,
} from '../../src/context/projections.js';
import { createTokenMeter } from '../../src/context/token-meter.js';
import { DEFAULT_MODEL_CATALOGUE } from '../../src/model/catalogue.js';
import { ProjectionRegistry, type StoredEvent, type JsonValue, type NewEvent, type RequestHeader, type Session, type TokenUsage } from '../../src/session/index.js';
import { ANY_REPLACES, buildLog, programArb } from '../support/log-gen.js';
import { TEST_SYSTEM, TEST_TOOLS, appendExchange, meterSession, randomExchange, seededRandom } from './meter-conversations.js';

const HEADER: RequestHeader = { provider: 'fake', model: 'fake', system: TEST_SYSTEM, tools: TEST_TOOLS };
const contextWindowOf = (model: string): number | undefined => DEFAULT_MODEL_CATALOGUE.models[model]?.contextWindow;

function registry(): ProjectionRegistry {
  return new ProjectionRegistry()
    .register(tokenUsageProjection)
    .register(createContextPressureProjection({ pricer: heuristicPricer, contextWindowOf }))
    .register(createContextBreakdownProjection({ pricer: heuristicPricer }));
}

function fold(session: Session): Record<string, JsonValue> {
  return registry().foldAll(session.events);
}

function view(session: Session, key: string): unknown {
  const def = registry().definition(key)!;
  return def.view!(fold(session)[key]!);
}

const T = 1_700_000_000_000;
const user = (id: string, text: string): NewEvent => ({ type: 'user/message', time: T, data: { id, role: 'user', content: [{ type: 'text', text }], source: { kind: 'user' } }, surfaceOp: 'append' });
const reply = (turn: number, step: number, text: string, usage?: TokenUsage): NewEvent => ({
  type: 'assistant/message',
  time: T,
  data: { turn, step, message: { id: `a${turn}.${step}.${text.length}`, role: 'assistant', content: [{ type: 'text', text }], source: { kind: 'model', provider: 'fake', model: 'fake' } }, ...(usage ? { usage } : {}) },
  surfaceOp: 'append',
});

describe('tokenUsage', () => {
  it('adds usage samples into disjoint cumulative buckets', () => {
    const session = meterSession();
    session.appendBatch([
      user('u1', 'hi'),
      reply(1, 1, 'a', { inputTokens: 10, outputTokens: 3, cacheReadTokens: 90 }),
      reply(1, 2, 'b', { inputTokens: 5, outputTokens: 4, cacheReadTokens: 100, cacheWriteTokens: 2 }),
    ]);
    expect(view(session, 'tokenUsage')).toEqual({ uncachedInputTokens: 15, outputTokens: 7, cacheReadTokens: 190, cacheWriteTokens: 2 });
  });

  it('replaces an earlier sample for the same (turn, step) instead of double counting', () => {
    const session = meterSession();
    session.appendBatch([reply(1, 1, 'first', { inputTokens: 10, outputTokens: 3 }), reply(1, 1, 'again', { inputTokens: 12, outputTokens: 5, cacheReadTokens: 1 })]);
    expect(view(session, 'tokenUsage')).toEqual({ uncachedInputTokens: 12, outputTokens: 5, cacheReadTokens: 1, cacheWriteTokens: 0 });
  });

  it('counts the summarizer usage of a compaction', () => {
    const session = meterSession();
    session.appendBatch([user('u1', 'hi'), reply(1, 1, 'a', { inputTokens: 10, outputTokens: 3 })]);
    const nodes = session.surface.nodes;
    session.appendBatch([
      { type: 'compaction/start', time: T, data: { compactionId: 'c1', turn: null, trigger: 'manual' } },
      {
        type: 'compaction/summary',
        time: T,
        data: { compactionId: 'c1', summary: [{ type: 'text', text: 's' }], shadowedRange: { start: nodes[0]!, end: nodes[1]! }, shadowedSeqs: [...nodes], shadowedTokenCount: 9, provider: 'fake', model: 'fake', usage: { inputTokens: 40, outputTokens: 6 } },
      },
    ]);
    expect(view(session, 'tokenUsage')).toEqual({ uncachedInputTokens: 50, outputTokens: 9, cacheReadTokens: 0, cacheWriteTokens: 0 });
  });

  it('returns the same state for events without usage', () => {
    const state = tokenUsageProjection.init();
    const event = { seq: 0, type: 'turn/start', time: T, data: { turn: 1 } } as StoredEvent;
    expect(tokenUsageProjection.apply(state, event)).toBe(state);
  });
});

describe('contextPressure', () => {
  it('projects the latest prompt-side usage forward by the surface priced since, and reads the window from the header', () => {
    const session = meterSession();
    session.append({ type: 'request/header', time: T, data: { header: HEADER, reason: 'initial' } });
    session.appendBatch([user('u1', 'x'.repeat(40)), reply(1, 1, 'y'.repeat(80), { inputTokens: 100, cacheReadTokens: 20, outputTokens: 999 })]);
    const afterReply = view(session, 'contextPressure') as { pressureTokens: number; projectedTokens: number; contextWindow: number };
    // The reply itself is new since the prompt was counted: 80/4 + 4 (block) + 4 (role).
    expect(afterReply).toEqual({ pressureTokens: 120, projectedTokens: 120 + 28, contextWindow: 128_000 });
    session.append(user('u2', 'z'.repeat(8)));
    expect((view(session, 'contextPressure') as { projectedTokens: number }).projectedTokens).toBe(148 + 10);
  });

  it('has no window for a model the catalogue does not know, and no pressure before any usage', () => {
    const session = meterSession();
    session.append({ type: 'request/header', time: T, data: { header: { provider: 'x', model: 'mystery' }, reason: 'initial' } });
    session.append(user('u1', 'hello'));
    expect(view(session, 'contextPressure')).toEqual({ pressureTokens: null, projectedTokens: null, contextWindow: null });
  });

  it('subtracts the shadow price of a compaction replace, and folds an unclaimed replace with delta 0', () => {
    const session = meterSession();
    session.appendBatch([user('u1', 'a'.repeat(400)), reply(1, 1, 'b', { inputTokens: 200, outputTokens: 1 }), user('u2', 'c')]);
    const before = fold(session).contextPressure as { surfaceTokens: number; projectedTokens: number };
    const nodes = session.surface.nodes;
    session.appendBatch([
      { type: 'compaction/start', time: T, data: { compactionId: 'c1', turn: null, trigger: 'manual' } },
      { type: 'compaction/summary', time: T, data: { compactionId: 'c1', summary: [], shadowedRange: { start: nodes[0]!, end: nodes[1]! }, shadowedSeqs: [nodes[0]!, nodes[1]!], shadowedTokenCount: 117, provider: 'fake', model: 'fake' } },
      { type: 'user/message', time: T, data: { id: 's', role: 'user', content: [{ type: 'text', text: 'sum' }], source: { kind: 'plugin', plugin: 'compact', compactionId: 'c1' } }, surfaceOp: { op: 'replace', start: nodes[0]!, end: nodes[1]! }, sourceEventSeqs: [nodes[0]!, nodes[1]!] },
    ]);
    const after = fold(session).contextPressure as { surfaceTokens: number; projectedTokens: number; claim: unknown };
    expect(after.surfaceTokens).toBe(before.surfaceTokens - 117 + 9);
    expect(after.projectedTokens).toBe(before.projectedTokens - 117 + 9);
    expect(after.claim).toBeNull();

    const s = session.surface.nodes;
    session.append({ type: 'user/message', time: T, data: { id: 'r', role: 'user', content: [{ type: 'text', text: 'legacy' }], source: { kind: 'user' } }, surfaceOp: { op: 'replace', start: s[0]!, end: s[0]! }, sourceEventSeqs: [s[0]!] });
    expect((fold(session).contextPressure as { surfaceTokens: number }).surfaceTokens).toBe(after.surfaceTokens);
  });

  it('rejects a replace that follows a shadow price for a different range', () => {
    const session = meterSession();
    session.appendBatch([user('u1', 'a'), user('u2', 'b')]);
    const [n0, n1] = session.surface.nodes;
    session.appendBatch([
      { type: 'compaction/prune', time: T, data: { shadowedRange: { start: n0!, end: n0! }, shadowedSeqs: [n0!], shadowedTokenCount: 5 } },
      { type: 'user/message', time: T, data: { id: 's', role: 'user', content: [{ type: 'text', text: 's' }], source: { kind: 'user' } }, surfaceOp: { op: 'replace', start: n1!, end: n1! }, sourceEventSeqs: [n1!] },
    ]);
    expect(() => fold(session)).toThrow(expect.objectContaining({ code: 'CORRUPT_LOG' }));
  });
});

describe('contextBreakdown', () => {
  it('splits the request into system, tools and messages by the heuristic', () => {
    const session = meterSession();
    session.append({ type: 'request/header', time: T, data: { header: HEADER, reason: 'initial' } });
    session.appendBatch([user('u1', 'x'.repeat(8)), reply(1, 1, 'y'.repeat(4))]);
    expect(view(session, 'contextBreakdown')).toEqual({
      systemTokens: Math.ceil(TEST_SYSTEM.length / 4) + 4,
      toolsTokens: Math.ceil(JSON.stringify(TEST_TOOLS).length / 4) + 4,
      messageTokens: 10 + 9,
      totalTokens: Math.ceil(TEST_SYSTEM.length / 4) + 4 + Math.ceil(JSON.stringify(TEST_TOOLS).length / 4) + 4 + 19,
    });
  });

  it('with the meter pricer, system plus tools is the meter header and messages are the standalone meter prices', () => {
    const meter = createTokenMeter();
    const session = meterSession();
    appendExchange(session, randomExchange(seededRandom(11)), 1, { header: HEADER });
    const def = createContextBreakdownProjection({ pricer: meterPricer(meter) });
    const state = session.events.reduce(def.apply, def.init());
    const v = def.view!(state);
    expect(v.systemTokens + v.toolsTokens).toBe(meter.headerTokens(HEADER));
    expect(v.messageTokens).toBe(session.deriveMessages().reduce((sum, m) => sum + meter.messageTokens(m, 'fake'), 0));
    const measured = meter.measure(session, HEADER);
    // Standalone prices differ from in-context ones only by shared tool-output brackets.
    expect(v.messageTokens - measured.surfaceTokens).toBeGreaterThanOrEqual(0);
    expect((v.messageTokens - measured.surfaceTokens) % 2).toBe(0);
  });
});

describe('token projections as projection units', () => {
  it('fold to plain JSON and restore from a checkpoint at any seq to the full fold, over random logs', () => {
    fc.assert(
      fc.property(programArb(50), fc.nat(), (program, cutSeed) => {
        const { session } = buildLog(program, ANY_REPLACES);
        const events = session.events;
        const reg = registry();
        const full = reg.foldAll(events);
        expect(JSON.parse(JSON.stringify(full))).toEqual(full);
        const cut = events.length === 0 ? 0 : cutSeed % events.length;
        const rows = reg.checkpoint(reg.foldAll(events.slice(0, cut + 1)), cut);
        const floor = reg.restoreFloor(rows);
        const restored = reg.restore(JSON.parse(JSON.stringify(rows)), events.slice(floor), floor);
        expect(restored.states).toEqual(full);
      }),
      { numRuns: 80 },
    );
  });

  it('refuses a checkpoint priced in another unit', () => {
    const pressure = createContextPressureProjection({ pricer: heuristicPricer, contextWindowOf });
    const meterPressure = createContextPressureProjection({ pricer: meterPricer(createTokenMeter()), contextWindowOf });
    expect(pressure.stateSchema.safeParse(pressure.init()).success).toBe(true);
    expect(meterPressure.stateSchema.safeParse(pressure.init()).success).toBe(false);
  });
});
