/**
 * The cost ledger's fold (issue 26): what counts as a model call, what an unpriced call adds,
 * and the time window.
 */
import { describe, expect, it } from 'vitest';
import { costOf, foldUsage, type StoredEvent } from '../../src/session/index.js';

const reply = (
  seq: number,
  time: number,
  turn: number,
  extra: Record<string, unknown>,
  source: object = { kind: 'model', provider: 'p', model: 'm1' },
) =>
  ({
    seq,
    time,
    type: 'assistant/message',
    surfaceOp: 'append',
    data: {
      turn,
      step: 1,
      message: { id: `a${seq}`, role: 'assistant', content: [{ type: 'text', text: 'x' }], source },
      ...extra,
    },
  }) as unknown as StoredEvent;

describe('foldUsage', () => {
  it('prices a cache write as uncached input and a cache read at the cached price', () => {
    expect(
      costOf(
        { inputTokens: 1_000_000, cacheWriteTokens: 1_000_000, cacheReadTokens: 2_000_000, outputTokens: 500_000 },
        { input: 1, cachedInput: 0.1, output: 4 },
      ),
    ).toBeCloseTo(1 + 1 + 0.2 + 2, 12);
  });

  it("counts model replies (priced or not) per turn and model, and skips a caller's messages and hiding replacements", () => {
    const usage = { inputTokens: 10, outputTokens: 5, cacheReadTokens: 2, reasoningTokens: 1 };
    const events = [
      reply(0, 100, 1, { usage, cost: 0.5 }),
      reply(1, 200, 1, { usage }, { kind: 'model', provider: 'p', model: 'm2' }),
      reply(2, 300, 2, { usage, cost: 1 }, { kind: 'caller' }),
      reply(3, 400, 2, { hides: true, cost: 7 }),
    ];
    const ledger = foldUsage(events);
    expect(ledger.total).toEqual({
      calls: 2,
      inputTokens: 20,
      cachedInputTokens: 4,
      cacheWriteTokens: 0,
      outputTokens: 10,
      reasoningTokens: 2,
      costUsd: 0.5,
      unpricedCalls: 1,
    });
    expect(Object.keys(ledger.byModel).sort()).toEqual(['m1', 'm2']);
    expect(ledger.byModel.m2!.unpricedCalls).toBe(1);
    expect(ledger.byTurn.map((t) => [t.turn, t.replies])).toEqual([[1, 2]]);
    // The window: from inclusive, to exclusive.
    expect(foldUsage(events, { from: 200 }).total.calls).toBe(1);
    expect(foldUsage(events, { to: 200 }).total.costUsd).toBe(0.5);
  });
});
