/**
 * The model-free tool-result pruner (src/context/pruner.ts, dsh-spec §5): properties 32 and 33.
 * `planPrune` returns the events; the activity appends them (see compaction-activity.test.ts for
 * the pressure path). Lengths are Unicode code points of text blocks.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  DEFAULT_PRUNER_CONFIG,
  PRUNE_MARKER,
  planPrune,
  pruneContent,
  resolvePrunerConfig,
  type PrunerConfig,
} from '../../src/context/pruner.js';
import {
  Session,
  deriveEventMessage,
  type ContentBlock,
  type NewEvent,
  type SessionEvent,
} from '../../src/session/index.js';
import { ANY_REPLACES, BALANCED_REPLACES, buildLog, programArb } from '../support/log-gen.js';
import { T0, sessionHeader, toolTurn } from './context-fakes.js';

const MARKER_CODE_POINTS = 39;
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const codePoints = (s: string) => [...s].length;
const textOf = (blocks: readonly ContentBlock[]) => blocks.map((b) => (b.type === 'text' ? b.text : '')).join('');

/** Text mixing ASCII, multi-byte BMP characters and astral (surrogate-pair) characters. */
const textArb = fc
  .array(fc.constantFrom('a', 'b', ' ', '\n', 'é', '中', '😀', '𝄞', '👍🏽'), { maxLength: 80, size: 'max' })
  .map((parts) => parts.join(''));

const blockArb: fc.Arbitrary<ContentBlock> = fc.oneof(
  { weight: 4, arbitrary: textArb.map((text): ContentBlock => ({ type: 'text', text })) },
  { weight: 1, arbitrary: fc.nat(99).map((n): ContentBlock => ({ type: 'reasoning', text: `r${n}` })) },
  {
    weight: 1,
    arbitrary: fc.nat(99).map((n): ContentBlock => ({ type: 'tool-call', id: `c${n}`, name: 'echo', arguments: '{}' })),
  },
);

const configArb: fc.Arbitrary<PrunerConfig> = fc
  .record({ headChars: fc.nat(30), tailChars: fc.nat(30), slack: fc.nat(30) })
  .map(({ headChars, tailChars, slack }) => ({
    headChars,
    tailChars,
    thresholdChars: headChars + MARKER_CODE_POINTS + tailChars + slack,
  }));

describe('pruner config', () => {
  it('has the documented defaults and a 39-code-point marker', () => {
    expect(resolvePrunerConfig()).toEqual({ thresholdChars: 8192, headChars: 4096, tailChars: 1024 });
    expect(DEFAULT_PRUNER_CONFIG).toEqual(resolvePrunerConfig());
    expect(codePoints(PRUNE_MARKER)).toBe(MARKER_CODE_POINTS);
    expect(PRUNE_MARKER).toBe('\n\n[... tool result middle pruned ...]\n\n');
  });

  it.each([
    [{ thresholdChars: 0, headChars: 0, tailChars: 0 }, /thresholdChars must be positive/],
    [{ headChars: -1 }, /headChars must be a non-negative integer/],
    [{ tailChars: 1.5 }, /tailChars must be a non-negative integer/],
    [{ thresholdChars: 100, headChars: 40, tailChars: 22 }, /must not exceed thresholdChars/],
  ])('rejects %j', (config, message) => {
    expect(() => resolvePrunerConfig(config)).toThrow(message);
  });

  it('accepts head + marker + tail exactly equal to the threshold', () => {
    expect(resolvePrunerConfig({ thresholdChars: 100, headChars: 40, tailChars: 21 })).toEqual({
      thresholdChars: 100,
      headChars: 40,
      tailChars: 21,
    });
  });
});

describe('pruneContent', () => {
  it('returns null within the threshold, else head + marker + tail within the threshold, strictly smaller and surrogate-safe (random blocks)', () => {
    let prunedCount = 0;
    fc.assert(
      fc.property(fc.array(blockArb, { maxLength: 6, size: 'max' }), configArb, (blocks, config) => {
        const original = textOf(blocks);
        const total = codePoints(original);
        const pruned = pruneContent(blocks, config);
        if (total <= config.thresholdChars) {
          expect(pruned).toBeNull();
          return;
        }
        prunedCount += 1;
        expect(pruned).not.toBeNull();
        const text = textOf(pruned!);
        const cps = [...original];
        expect(text).toBe(
          cps.slice(0, config.headChars).join('') + PRUNE_MARKER + cps.slice(total - config.tailChars).join(''),
        );
        expect(codePoints(text)).toBeLessThanOrEqual(config.thresholdChars);
        expect(codePoints(text)).toBeLessThan(total);
        for (const block of pruned!) if (block.type === 'text') expect(block.text).not.toMatch(LONE_SURROGATE);
        // Non-text blocks keep their relative order; a text block is either kept whole or non-empty.
        expect(pruned!.filter((b) => b.type !== 'text')).toEqual(blocks.filter((b) => b.type !== 'text'));
        for (const block of pruned!)
          if (block.type === 'text' && block.text.length === 0) expect(blocks).toContainEqual(block);
        // Idempotent: the result is within the threshold.
        expect(pruneContent(pruned!, config)).toBeNull();
      }),
      { numRuns: 500 },
    );
    expect(prunedCount).toBeGreaterThan(100);
  });

  it('places the marker at the first text block that intersects the removed span and drops blocks that become empty', () => {
    const blocks: ContentBlock[] = [
      { type: 'text', text: 'aaaa' },
      { type: 'tool-call', id: 'c', name: 'echo', arguments: '{}' },
      { type: 'text', text: 'b'.repeat(100) },
      { type: 'text', text: 'c'.repeat(100) },
      { type: 'text', text: 'dddd' },
    ];
    const config = { thresholdChars: 60, headChars: 6, tailChars: 6 };
    expect(pruneContent(blocks, config)).toEqual([
      { type: 'text', text: 'aaaa' },
      { type: 'tool-call', id: 'c', name: 'echo', arguments: '{}' },
      { type: 'text', text: `bb${PRUNE_MARKER}` },
      { type: 'text', text: 'cc' },
      { type: 'text', text: 'dddd' },
    ]);
  });

  it('never splits a surrogate pair at the cut points', () => {
    const text = '😀'.repeat(100);
    const pruned = pruneContent([{ type: 'text', text }], { thresholdChars: 50, headChars: 5, tailChars: 3 })!;
    expect(pruned).toEqual([{ type: 'text', text: `${'😀'.repeat(5)}${PRUNE_MARKER}${'😀'.repeat(3)}` }]);
  });
});

const priceOf = (seq: number): number => 1000 + seq;

/** Data of a tool/result with its inner content blanked, for "differs only in content" checks. */
function withoutInnerContent(event: SessionEvent<'tool/result'>): unknown {
  const block = event.data.message.content[0];
  return { ...event.data, message: { ...event.data.message, content: [{ ...block, content: null }] } };
}

/**
 * Rebuilds a generated log with the text of its appended tool results repeated (1 + index % 4)
 * times, so that many of them exceed a small pruning threshold. Rewrites of those results
 * (log-gen's replacements) stay valid: they may differ from the original only in content.
 */
function withLongerToolResults(inputs: readonly NewEvent[]): Session {
  const session = Session.create(sessionHeader('prune-prop'));
  session.appendBatch(
    inputs.map((input, index) => {
      if (input.type !== 'tool/result' || input.surfaceOp !== 'append') return input;
      const block = input.data.message.content[0];
      const content = block.content.map((b) =>
        b.type === 'text' ? { ...b, text: b.text.repeat(1 + (index % 4)) } : b,
      );
      return {
        ...input,
        data: { ...input.data, message: { ...input.data.message, content: [{ ...block, content }] } },
      } as NewEvent;
    }),
  );
  return session;
}

describe('planPrune', () => {
  const config: PrunerConfig = { thresholdChars: 40, headChars: 0, tailChars: 1 };

  it('prunes every oversized tool-result node, each preceded by compaction/prune pricing the original, and a second pass finds nothing (random logs)', () => {
    fc.assert(
      fc.property(programArb(), fc.boolean(), (program, balanced) => {
        const session = withLongerToolResults(buildLog(program, balanced ? BALANCED_REPLACES : ANY_REPLACES).inputs);
        const nodesBefore = [...session.surfaceNodes];
        const oversized = nodesBefore.filter((seq) => {
          const e = session.eventAt(seq)!;
          return (
            e.type === 'tool/result' &&
            codePoints(textOf((e as SessionEvent<'tool/result'>).data.message.content[0].content)) >
              config.thresholdChars
          );
        });
        const logBefore = session.events;
        const planned = planPrune(session, config, priceOf, T0);
        expect(planned).toHaveLength(2 * oversized.length);

        const appended = session.appendBatch(planned);

        expect(session.events.slice(0, logBefore.length)).toEqual(logBefore);
        oversized.forEach((seq, i) => {
          const prune = appended[2 * i] as SessionEvent<'compaction/prune'>;
          const replacement = appended[2 * i + 1] as SessionEvent<'tool/result'>;
          const original = session.eventAt(seq) as SessionEvent<'tool/result'>;
          expect(prune.type).toBe('compaction/prune');
          expect(prune.data).toEqual({
            shadowedRange: { start: seq, end: seq },
            shadowedSeqs: [seq],
            shadowedTokenCount: 1000 + seq,
          });
          expect(replacement.seq).toBe(prune.seq + 1);
          expect(replacement.surfaceOp).toEqual({ op: 'replace', start: seq, end: seq });
          expect(replacement.sourceEventSeqs).toEqual([seq]);
          expect(withoutInnerContent(replacement)).toEqual(withoutInnerContent(original));
          const text = textOf(replacement.data.message.content[0].content);
          expect(text).toContain(PRUNE_MARKER);
          expect(codePoints(text)).toBeLessThanOrEqual(config.thresholdChars);
          // The replacement sits where the original was.
          expect(session.surfaceNodes.indexOf(replacement.seq)).toBe(nodesBefore.indexOf(seq));
        });
        // Nodes that were not oversized are untouched.
        const replaced = new Set(oversized);
        nodesBefore.forEach((seq, i) => {
          if (!replaced.has(seq)) expect(session.surfaceNodes[i]).toBe(seq);
        });
        expect(planPrune(session, config, priceOf, T0)).toEqual([]);
      }),
      { numRuns: 200 },
    );
  });

  it('prunes only the oversized tool result, leaving equally long user and assistant messages alone', () => {
    const big = Session.create(sessionHeader('q'));
    big.appendBatch(toolTurn(1, 9_000));
    const pruned = planPrune(big, DEFAULT_PRUNER_CONFIG, () => 1, T0);
    expect(pruned.map((e) => e.type)).toEqual(['compaction/prune', 'tool/result']);
    const before = big.deriveMessages();
    big.appendBatch(pruned);
    const after = big.deriveMessages();
    expect(after.map((m) => m.id)).toEqual(before.map((m) => m.id));
    after.forEach((m, i) => {
      if (m.content[0]?.type !== 'tool-result') expect(m).toBe(before[i]);
    });
    expect(deriveEventMessage(big.eventAt(big.surfaceNodes[2]!)!)!.content[0]).toMatchObject({
      type: 'tool-result',
      toolCallId: 'call-1',
    });
  });
});

describe('a tool/result replacement (Session rule)', () => {
  function prunedLog() {
    const session = Session.create(sessionHeader('rule'));
    session.appendBatch(toolTurn(1, 9_000));
    const resultSeq = session.surfaceNodes.find((seq) => session.eventAt(seq)!.type === 'tool/result')!;
    const original = session.eventAt(resultSeq) as SessionEvent<'tool/result'>;
    const replacement = planPrune(session, DEFAULT_PRUNER_CONFIG, () => 1, T0)[1] as NewEvent<'tool/result'>;
    return { session, original, replacement, resultSeq };
  }

  it.each([
    ['the message id', (d: SessionEvent<'tool/result'>['data']) => ({ ...d, message: { ...d.message, id: 'other' } })],
    [
      'the error flag',
      (d: SessionEvent<'tool/result'>['data']) => ({
        ...d,
        message: {
          ...d.message,
          content: [{ ...d.message.content[0], isError: true as const }] as typeof d.message.content,
        },
      }),
    ],
    ['meta', (d: SessionEvent<'tool/result'>['data']) => ({ ...d, meta: { bytes: 1 } })],
    ['the step', (d: SessionEvent<'tool/result'>['data']) => ({ ...d, step: d.step + 1 })],
  ])('is rejected when it changes %s, leaving log and surface untouched', (_what, mutate) => {
    const { session, replacement } = prunedLog();
    const nodes = [...session.surfaceNodes];
    const next = session.nextSeq;
    expect(() => session.append({ ...replacement, data: mutate(replacement.data) })).toThrow(
      /only the tool result's inner content/,
    );
    expect(session.nextSeq).toBe(next);
    expect(session.surfaceNodes).toEqual(nodes);
  });

  it('is accepted when only the inner content changes, and the original stays in the log', () => {
    const { session, original, replacement, resultSeq } = prunedLog();
    session.append(replacement);
    expect(session.eventAt(resultSeq)).toEqual(original);
    expect(session.surfaceNodes).not.toContain(resultSeq);
  });
});
