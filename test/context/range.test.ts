/**
 * Range selection (src/context/range.ts, dsh-spec §4.3): property 21 — a compactable range is
 * always head-anchored and never splits a tool call from its result — checked against an
 * independent oracle over random surfaces with tool calls (test/support/log-gen.ts).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { balancedCuts, selectCompactableRange } from '../../src/context/range.js';
import { deriveEventMessage, type Session, type SessionEvent } from '../../src/session/index.js';
import { BALANCED_REPLACES, buildLog, programArb } from '../support/log-gen.js';

/** Oracle: cut `i` (before node i) is balanced iff every tool call before it is answered before it (by call id). */
function oracleBalanced(session: Session, nodes: readonly number[], cut: number): boolean {
  const calls = new Set<string>();
  const answered = new Set<string>();
  for (const seq of nodes.slice(0, cut)) {
    const message = deriveEventMessage(session.eventAt(seq)!);
    for (const block of message?.content ?? []) {
      if (block.type === 'tool-call') calls.add(block.id);
      if (block.type === 'tool-result') answered.add(block.toolCallId);
    }
  }
  return [...calls].every((id) => answered.has(id));
}

const pricesArb = fc.array(fc.nat(40), { minLength: 1, maxLength: 16 });

describe('balancedCuts', () => {
  it('marks exactly the cuts where every earlier tool call has its result earlier (random surfaces)', () => {
    fc.assert(
      fc.property(programArb(), (program) => {
        const { session } = buildLog(program, BALANCED_REPLACES);
        const nodes = [...session.surfaceNodes];
        const cuts = balancedCuts(nodes, (seq) => session.eventAt(seq));
        expect(cuts).toHaveLength(nodes.length + 1);
        cuts.forEach((balanced, i) => expect(balanced).toBe(oracleBalanced(session, nodes, i)));
      }),
      { numRuns: 200 },
    );
  });

  it('throws CORRUPT_LOG for a tool result with no open call', () => {
    const result = {
      seq: 0,
      type: 'tool/result',
      time: 0,
      data: {
        turn: 1,
        step: 1,
        message: {
          id: 'r',
          role: 'user',
          content: [{ type: 'tool-result', toolCallId: 'c', content: [] }],
          source: { kind: 'tool', callId: 'c' },
        },
      },
      surfaceOp: 'append',
    } as SessionEvent;
    expect(() => balancedCuts([0], () => result)).toThrow(expect.objectContaining({ code: 'CORRUPT_LOG' }));
  });
});

/** Independent oracle: a compaction's replacement message (its source names the compaction). */
function oracleCheckpoint(event: SessionEvent | undefined): boolean {
  if (event?.type !== 'user/message' || event.surfaceOp === 'append') return false;
  const source = event.data.source as { kind: string; compactionId?: string };
  return source.kind === 'plugin' && typeof source.compactionId === 'string';
}

describe('selectCompactableRange', () => {
  it('selects the head span up to the largest balanced cut that keeps a tail of at least retainTokens (random surfaces)', () => {
    fc.assert(
      fc.property(programArb(), pricesArb, fc.nat(200), (program, priceCycle, retain) => {
        const { session } = buildLog(program, BALANCED_REPLACES);
        const nodes = [...session.surfaceNodes];
        const prices = nodes.map((seq, i) => ({ seq, tokens: priceCycle[i % priceCycle.length]! }));

        const range = selectCompactableRange(nodes, prices, retain, (seq) => session.eventAt(seq));

        // Oracle: k0 = the first kept node when walking back until the tail reaches `retain`
        // (always at least the newest node); then round head-ward to a balanced cut.
        let k = 0;
        let tail = 0;
        for (let i = nodes.length - 1; i >= 0; i--) {
          tail += prices[i]!.tokens;
          k = i;
          if (tail >= retain) break;
        }
        while (k > 0 && !oracleBalanced(session, nodes, k)) k -= 1;
        // A span of nothing but earlier checkpoints is not worth a summary.
        if (k === 0 || nodes.slice(0, k).every((seq) => oracleCheckpoint(session.eventAt(seq)))) {
          expect(range).toBeNull();
          return;
        }
        expect(range).not.toBeNull();
        expect(range!.seqs).toEqual(nodes.slice(0, k));
        expect(range!.start).toBe(nodes[0]);
        expect(range!.end).toBe(nodes[k - 1]);
        expect(range!.tokens).toBe(prices.slice(0, k).reduce((s, p) => s + p.tokens, 0));
        // Never splits a pair, and the verbatim tail is at least the retain budget.
        expect(oracleBalanced(session, nodes, k)).toBe(true);
        expect(prices.slice(k).reduce((s, p) => s + p.tokens, 0)).toBeGreaterThanOrEqual(retain);
      }),
      { numRuns: 300 },
    );
  });

  it('with retain 0 keeps exactly the newest node when the cut before it is balanced', () => {
    fc.assert(
      fc.property(programArb(), (program) => {
        const { session } = buildLog(program, BALANCED_REPLACES);
        const nodes = [...session.surfaceNodes];
        fc.pre(nodes.length >= 2 && oracleBalanced(session, nodes, nodes.length - 1));
        const prices = nodes.map((seq) => ({ seq, tokens: 1 }));
        fc.pre(!nodes.slice(0, -1).every((seq) => oracleCheckpoint(session.eventAt(seq))));
        const range = selectCompactableRange(nodes, prices, 0, (seq) => session.eventAt(seq));
        expect(range?.seqs).toEqual(nodes.slice(0, -1));
      }),
      { numRuns: 100 },
    );
  });

  it('refuses a measurement whose priced nodes differ from the surface', () => {
    const eventAt = () => undefined;
    expect(() => selectCompactableRange([1, 2], [{ seq: 1, tokens: 1 }], 0, eventAt)).toThrow(
      /does not match the current surface/,
    );
    expect(() =>
      selectCompactableRange(
        [1, 2],
        [
          { seq: 2, tokens: 1 },
          { seq: 1, tokens: 1 },
        ],
        0,
        eventAt,
      ),
    ).toThrow(/does not match the current surface/);
  });

  it('returns null for an empty surface and when the tail budget needs every node', () => {
    const eventAt = () => undefined;
    expect(selectCompactableRange([], [], 0, eventAt)).toBeNull();
    expect(
      selectCompactableRange(
        [0, 1],
        [
          { seq: 0, tokens: 5 },
          { seq: 1, tokens: 5 },
        ],
        11,
        eventAt,
      ),
    ).toBeNull();
    expect(
      selectCompactableRange(
        [0, 1],
        [
          { seq: 0, tokens: 5 },
          { seq: 1, tokens: 5 },
        ],
        5,
        eventAt,
      )?.seqs,
    ).toEqual([0]);
  });
});
