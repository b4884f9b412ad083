import fc from 'fast-check';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { createTokenMeter, UsageCalibration, type MeterMeasurement } from '../../src/context/token-meter.js';
import {
  countO200kTokens,
  deepseekEstimator,
  disposeTokenizers,
  o200kEstimator,
} from '../../src/context/tokenizers.js';
import { encodeOrdinary, deepseekPromptTokenIds } from '../../src/model/deepseek-tokens.js';
import type { RequestHeader, Session } from '../../src/session/index.js';
import { ANY_REPLACES, buildLog, programArb } from '../support/log-gen.js';
import {
  TEST_SYSTEM,
  TEST_TOOLS,
  TEXT_FRAGMENTS,
  appendExchange,
  exactPromptTokens,
  meterSession,
  randomExchange,
  seededRandom,
  wireRequest,
  type Exchange,
} from './meter-conversations.js';

afterAll(() => disposeTokenizers());

const HEADER: RequestHeader = { provider: 'fake', model: 'fake', system: TEST_SYSTEM, tools: TEST_TOOLS };

const textArb = fc.oneof(
  fc.array(fc.constantFrom(...TEXT_FRAGMENTS), { minLength: 0, maxLength: 4 }).map((parts) => parts.join('')),
  fc.string({ unit: 'grapheme', maxLength: 40 }),
);
const callArb = fc.record({
  name: fc.constantFrom('read_file', 'run_shell'),
  arguments: fc.json({ maxDepth: 2 }),
  result: textArb,
});
const replyArb = fc.record({ reasoning: textArb, text: textArb, calls: fc.array(callArb, { maxLength: 3 }) });
const exchangeArb: fc.Arbitrary<Exchange> = fc.record({
  user: textArb,
  replies: fc.array(replyArb, { minLength: 1, maxLength: 3 }).map((replies) =>
    // A reply with no content at all derives no message; keep one such case possible but rare.
    replies.map((r, i) => (i === replies.length - 1 ? { ...r, calls: [] } : r)),
  ),
});
const headerArb: fc.Arbitrary<RequestHeader> = fc
  .record({
    provider: fc.constant('fake'),
    model: fc.constantFrom('fake', 'deepseek-flash', 'deepseek-reasoner'),
    system: fc.option(textArb, { nil: undefined }),
    tools: fc.option(fc.constant(TEST_TOOLS), { nil: undefined }),
  })
  .map((h) => Object.fromEntries(Object.entries(h).filter(([, v]) => v !== undefined)) as unknown as RequestHeader);

function sessionOf(exchanges: readonly Exchange[], id = 'meter'): Session {
  const session = meterSession(id);
  exchanges.forEach((exchange, i) => appendExchange(session, exchange, i + 1));
  return session;
}

function surfaceSum(m: MeterMeasurement): number {
  return m.nodes.reduce((sum, n) => sum + n.tokens, 0);
}

describe('DeepSeek V3 pricing', () => {
  it('the meter total equals the fake server count of the same wire request, for random conversations', () => {
    fc.assert(
      fc.property(fc.array(exchangeArb, { maxLength: 4 }), headerArb, (exchanges, header) => {
        const session = sessionOf(exchanges);
        const m = createTokenMeter().measure(session, header);
        expect(m.totalTokens).toBe(exactPromptTokens(session, header));
        expect(m.headerTokens + m.surfaceTokens).toBe(m.totalTokens);
      }),
      { numRuns: 120 },
    );
  });

  it('header plus per-message prices decompose the whole-request count', () => {
    const meter = createTokenMeter();
    const session = sessionOf([randomExchange(seededRandom(7)), randomExchange(seededRandom(8))]);
    const request = wireRequest(session, HEADER);
    const whole = deepseekPromptTokenIds(request.messages, request.tools).length;
    const header = meter.headerTokens(HEADER);
    expect(header).toBe(deepseekPromptTokenIds(request.messages.slice(0, 1), request.tools).length);
    const m = meter.measure(session, HEADER);
    expect(header + m.surfaceTokens).toBe(whole);
  });

  it('prices a tool output that follows another without a second pair of run brackets', () => {
    const meter = createTokenMeter();
    const exchange: Exchange = {
      user: 'go',
      replies: [
        {
          reasoning: '',
          text: '',
          calls: [
            { name: 'read_file', arguments: '{}', result: 'one' },
            { name: 'read_file', arguments: '{}', result: 'two' },
          ],
        },
        { reasoning: '', text: 'done', calls: [] },
      ],
    };
    const session = sessionOf([exchange]);
    const m = meter.measure(session, HEADER);
    const [, , first, second] = m.nodes;
    const standalone = meter.messageTokens(session.deriveMessages()[3]!, 'fake');
    expect(first!.tokens - encodeOrdinary('one').length).toBe(second!.tokens - encodeOrdinary('two').length + 2);
    expect(second!.tokens).toBe(standalone - 2);
    expect(m.totalTokens).toBe(exactPromptTokens(session, HEADER));
  });

  it('counts special-token strings in user text as ordinary text and does not throw', () => {
    const meter = createTokenMeter();
    const eos = '<｜end▁of▁sentence｜>';
    const session = sessionOf([
      { user: `before ${eos} after <|endoftext|>`, replies: [{ reasoning: '', text: eos, calls: [] }] },
    ]);
    const m = meter.measure(session, HEADER);
    expect(encodeOrdinary(eos).length).toBeGreaterThan(1);
    expect(m.totalTokens).toBe(exactPromptTokens(session, HEADER));
    expect(countO200kTokens('<|endoftext|>')).toBeGreaterThan(1);
    expect(createTokenMeter().measure(session, { provider: 'openai', model: 'gpt-4o' }).totalTokens).toBeGreaterThan(0);
  });

  it('stays exact across replacements that split or join tool-output runs', () => {
    fc.assert(
      fc.property(
        fc.array(exchangeArb, { minLength: 1, maxLength: 3 }),
        fc.nat(),
        fc.nat(),
        fc.boolean(),
        (exchanges, a, b, prune) => {
          const session = sessionOf(exchanges);
          const meter = createTokenMeter();
          meter.measure(session, HEADER);
          const nodes = session.surface.nodes;
          if (prune) {
            const results = nodes.filter((seq) => session.eventAt(seq)!.type === 'tool/result');
            if (results.length === 0) return;
            const target = session.eventAt(results[a % results.length]!)!;
            const data = target.data as { message: { content: [{ content: unknown }] } };
            const message = {
              ...data.message,
              content: [{ ...data.message.content[0], content: [{ type: 'text', text: '[pruned]' }] }],
            };
            session.append({
              type: 'tool/result',
              time: 1,
              data: { ...(target.data as object), message } as never,
              surfaceOp: { op: 'replace', start: target.seq, end: target.seq },
              sourceEventSeqs: [target.seq],
            });
          } else {
            const i = a % nodes.length;
            const j = i + (b % (nodes.length - i));
            const shadowed = nodes.slice(i, j + 1);
            session.append({
              type: 'user/message',
              time: 1,
              data: {
                id: 'summary',
                role: 'user',
                content: [{ type: 'text', text: 'summary of earlier work' }],
                source: { kind: 'plugin', plugin: 'compact' },
              },
              surfaceOp: { op: 'replace', start: nodes[i]!, end: nodes[j]! },
              sourceEventSeqs: shadowed,
            });
          }
          const incremental = meter.measure(session, HEADER);
          expect(incremental.totalTokens).toBe(exactPromptTokens(session, HEADER));
          expect(incremental.nodes).toEqual(createTokenMeter().measure(session, HEADER).nodes);
        },
      ),
      { numRuns: 80 },
    );
  });

  it('tokenizes only the new message when measuring after an append', () => {
    const meter = createTokenMeter();
    const session = sessionOf([randomExchange(seededRandom(1)), randomExchange(seededRandom(2))]);
    meter.measure(session, HEADER);
    const spy = vi.spyOn(deepseekEstimator, 'messagePrice');
    try {
      session.append({
        type: 'user/message',
        time: 1,
        data: { id: 'late', role: 'user', content: [{ type: 'text', text: 'one more' }], source: { kind: 'user' } },
        surfaceOp: 'append',
      });
      const m = meter.measure(session, HEADER);
      expect(spy).toHaveBeenCalledTimes(1);
      expect(m.totalTokens).toBe(exactPromptTokens(session, HEADER));
    } finally {
      spy.mockRestore();
    }
  });
});

describe('o200k pricing', () => {
  it('prices OpenAI models with o200k_base ordinary tokens plus per-message overhead', () => {
    const meter = createTokenMeter();
    const session = sessionOf([{ user: 'hello there', replies: [{ reasoning: 'hidden', text: 'hi', calls: [] }] }]);
    const header: RequestHeader = { provider: 'openai', model: 'gpt-4o', system: 'be brief' };
    const m = meter.measure(session, header);
    expect(m.family).toBe('o200k');
    expect(m.headerTokens).toBe(o200kEstimator.envelopeTokens([{ role: 'system', content: 'be brief' }], undefined));
    expect(m.nodes.map((n) => n.tokens)).toEqual([4 + countO200kTokens('hello there'), 4 + countO200kTokens('hi')]);
    expect(m.totalTokens).toBe(m.headerTokens + m.surfaceTokens);
  });

  it('maps an unknown model to a family by its name', () => {
    const meter = createTokenMeter();
    expect(meter.familyOf('gpt-7-mini')).toBe('o200k');
    expect(meter.familyOf('deepseek-v9')).toBe('deepseek');
    expect(meter.familyOf('deepseek-chat')).toBe('deepseek');
  });
});

describe('measure(): properties 36–38', () => {
  it('36: surfaceTokens is the sum of node prices and nodes follow the surface, at every step of random logs', () => {
    fc.assert(
      fc.property(programArb(50), (program) => {
        const meter = createTokenMeter();
        buildLog(program, ANY_REPLACES, (session) => {
          const m = meter.measure(session, HEADER);
          expect(m.surfaceTokens).toBe(surfaceSum(m));
          expect(m.nodes.map((n) => n.seq)).toEqual(session.surface.nodes);
          expect(m.logRevision).toBe(session.nextSeq);
          expect(m.nodes).toEqual(createTokenMeter().measure(session, HEADER).nodes);
        });
      }),
      { numRuns: 40 },
    );
  });

  it('37: without an anchor the total is header + surface; with an anchor under the same envelope it is anchor + surface delta', () => {
    fc.assert(
      fc.property(
        fc.array(exchangeArb, { minLength: 1, maxLength: 3 }),
        fc.nat(500),
        fc.integer({ min: -1, max: 1 }),
        (exchanges, extra, kind) => {
          const session = meterSession();
          // kind −1: bogus usage below the estimate; 0: no usage; 1: usage above the estimate by `extra`.
          const reported = (prompt: number): number => (kind < 0 ? prompt - 1 - extra : prompt + extra);
          const usage =
            kind === 0
              ? undefined
              : (prompt: number) => ({
                  inputTokens: Math.max(0, reported(prompt) - 7),
                  outputTokens: 5,
                  cacheReadTokens: 7,
                });
          exchanges.forEach((exchange, i) =>
            appendExchange(session, exchange, i + 1, { header: HEADER, ...(usage ? { usage } : {}) }),
          );
          const meter = createTokenMeter();
          const m = meter.measure(session, HEADER);
          const estimate = meter.headerTokens(HEADER) + m.surfaceTokens;
          expect(m.estimatedTokens).toBe(estimate);
          if (kind === 1) {
            expect(m.baseline).toBe('usage');
            expect(m.anchor).toBeDefined();
            expect(m.totalTokens).toBe(Math.max(0, m.anchor!.promptTokens + m.surfaceTokens - m.anchor!.surfaceTokens));
            expect(m.totalTokens).toBe(estimate + extra);
          } else {
            expect(m.baseline).toBe('estimated');
            expect(m.totalTokens).toBe(estimate);
          }
          const other = meter.measure(session, { ...HEADER, system: 'a different system prompt' });
          expect(other.baseline).toBe('estimated');
          expect(other.totalTokens).toBe(other.headerTokens + other.surfaceTokens);
        },
      ),
      { numRuns: 60 },
    );
  });

  it('37: exact usage anchors to exactly the fake server count, and later appends add their prices', () => {
    const session = meterSession();
    const exchanges = [randomExchange(seededRandom(3)), randomExchange(seededRandom(4))];
    exchanges.forEach((exchange, i) =>
      appendExchange(session, exchange, i + 1, {
        header: HEADER,
        usage: (prompt) => ({ inputTokens: prompt - 100, cacheReadTokens: 100, outputTokens: 999 }),
      }),
    );
    const meter = createTokenMeter();
    const m = meter.measure(session, HEADER);
    expect(m.baseline).toBe('usage');
    expect(m.totalTokens).toBe(exactPromptTokens(session, HEADER));
    session.append({
      type: 'user/message',
      time: 1,
      data: { id: 'x', role: 'user', content: [{ type: 'text', text: '再来一次' }], source: { kind: 'user' } },
      surfaceOp: 'append',
    });
    expect(meter.measure(session, HEADER).totalTokens).toBe(exactPromptTokens(session, HEADER));
  });

  it('37: a replacement after the anchored reply shrinks the anchored total by the shadowed prices', () => {
    const session = meterSession();
    appendExchange(session, randomExchange(seededRandom(5)), 1, {
      header: HEADER,
      usage: (prompt) => ({ inputTokens: prompt + 40, outputTokens: 1 }),
    });
    const meter = createTokenMeter();
    const before = meter.measure(session, HEADER);
    const nodes = session.surface.nodes;
    session.append({
      type: 'user/message',
      time: 1,
      data: {
        id: 's',
        role: 'user',
        content: [{ type: 'text', text: 'summary' }],
        source: { kind: 'plugin', plugin: 'compact' },
      },
      surfaceOp: { op: 'replace', start: nodes[0]!, end: nodes[nodes.length - 1]! },
      sourceEventSeqs: [...nodes],
    });
    const after = meter.measure(session, HEADER);
    expect(after.baseline).toBe('usage');
    expect(before.totalTokens - after.totalTokens).toBe(before.surfaceTokens - after.surfaceTokens);
    expect(after.totalTokens).toBe(exactPromptTokens(session, HEADER) + 40);
  });

  it('38: a measurement is deeply frozen and unchanged by later appends', () => {
    const meter = createTokenMeter();
    const session = sessionOf([randomExchange(seededRandom(6))]);
    const m = meter.measure(session, HEADER);
    const copy = structuredClone(m);
    expect(Object.isFrozen(m)).toBe(true);
    expect(Object.isFrozen(m.nodes)).toBe(true);
    expect(m.nodes.every((n) => Object.isFrozen(n))).toBe(true);
    expect(() => (m.nodes as { seq: number; tokens: number }[]).push({ seq: 0, tokens: 0 })).toThrow(TypeError);
    appendExchange(session, randomExchange(seededRandom(9)), 2);
    const later = meter.measure(session, HEADER);
    expect(later.nodes.length).toBeGreaterThan(m.nodes.length);
    expect(m).toEqual(copy);
  });
});

describe('usage calibration', () => {
  it('learns estimate/usage per model and corrects approximate models only', () => {
    const calibration = new UsageCalibration();
    const meter = createTokenMeter({ calibration });
    const session = sessionOf([randomExchange(seededRandom(10))]);
    const guessed: RequestHeader = { provider: 'openai', model: 'gpt-next', system: 'x' };
    const raw = meter.measure(session, guessed);
    expect(raw.calibration).toBe(1);
    expect(
      calibration.record({
        model: 'gpt-next',
        estimatedPromptTokens: raw.uncalibratedTokens,
        reportedPromptTokens: Math.round(raw.uncalibratedTokens * 1.25),
      }),
    ).toBe(true);
    const corrected = meter.measure(session, guessed);
    expect(corrected.calibration).toBeCloseTo(1.25, 2);
    expect(corrected.totalTokens / raw.totalTokens).toBeCloseTo(1.25, 1);
    expect(corrected.surfaceTokens).toBe(surfaceSum(corrected));
    expect(corrected.uncalibratedTokens).toBe(raw.uncalibratedTokens);

    expect(calibration.record({ model: 'fake', estimatedPromptTokens: 100, reportedPromptTokens: 150 })).toBe(true);
    expect(meter.measure(session, HEADER).calibration).toBe(1);
  });

  it('discards bogus samples', () => {
    const calibration = new UsageCalibration();
    expect(calibration.record({ model: 'm', estimatedPromptTokens: 1000, reportedPromptTokens: 0 })).toBe(false);
    expect(calibration.record({ model: 'm', estimatedPromptTokens: 1000, reportedPromptTokens: 10 })).toBe(false);
    expect(calibration.record({ model: 'm', estimatedPromptTokens: Number.NaN, reportedPromptTokens: 10 })).toBe(false);
    expect(calibration.ratio('m')).toBeUndefined();
    expect(calibration.correction('m')).toBe(1);
  });

  it('takes the ratio over the latest window of samples', () => {
    const calibration = new UsageCalibration({ window: 2 });
    calibration.record({ model: 'm', estimatedPromptTokens: 100, reportedPromptTokens: 190 });
    calibration.record({ model: 'm', estimatedPromptTokens: 100, reportedPromptTokens: 100 });
    calibration.record({ model: 'm', estimatedPromptTokens: 100, reportedPromptTokens: 125 });
    expect(calibration.ratio('m')).toBeCloseTo(200 / 225, 6);
    expect(calibration.snapshot()).toEqual({ m: { ratio: 200 / 225, samples: 2 } });
  });
});
