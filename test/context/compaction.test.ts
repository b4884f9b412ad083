/**
 * The pure parts of compaction (src/context/compaction.ts): checkpoint framing and summary
 * filtering (property 22), summarizer input (31), the commit batch (18, 19), the lock scan
 * (25) and the bracket resume scan, and policy validation.
 *
 * Adaptation (DESIGN §3): a bracket is stale once a later `session/run` (a new workflow run
 * took over the session) or `session/end-seed` follows its unmatched start.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  CHECKPOINT_PREAMBLE,
  COMPACTION_INSTRUCTION,
  DEFAULT_CONTEXT_POLICY,
  bracketState,
  frameCheckpoint,
  liveBracket,
  planCommit,
  resolveContextPolicy,
  summarizerMessages,
  summaryBlocks,
} from '../../src/context/compaction.js';
import { Session, lookupOf, type StoredEvent, type ContentBlock, type NewEvent } from '../../src/session/index.js';
import { T0, sessionHeader, toolTurn, user } from './context-fakes.js';

describe('checkpoint framing', () => {
  it('is preamble + <compacted-summary>, the summary blocks in order, then </compacted-summary>', () => {
    fc.assert(
      fc.property(fc.array(fc.string(), { minLength: 1, maxLength: 5 }), (texts) => {
        const summary: ContentBlock[] = texts.map((text) => ({ type: 'text', text }));
        const framed = frameCheckpoint(summary);
        expect(framed[0]).toEqual({ type: 'text', text: `${CHECKPOINT_PREAMBLE}\n\n<compacted-summary>` });
        expect(framed.slice(1, -1)).toEqual(summary);
        expect(framed.at(-1)).toEqual({ type: 'text', text: '</compacted-summary>' });
      }),
    );
  });

  it('keeps only the text blocks of a summarizer reply, dropping reasoning and tool calls', () => {
    const reply: ContentBlock[] = [
      { type: 'reasoning', text: 'hmm' },
      { type: 'text', text: '## A' },
      { type: 'tool-call', id: 'c', name: 'echo', arguments: '{}' },
      { type: 'text', text: '## B' },
    ];
    expect(summaryBlocks(reply, 'stop')).toEqual([
      { type: 'text', text: '## A' },
      { type: 'text', text: '## B' },
    ]);
  });

  it('refuses a truncated reply and one without non-whitespace text', () => {
    expect(() => summaryBlocks([{ type: 'text', text: '## A' }], 'length')).toThrow(/MAX_TOKENS/);
    expect(() =>
      summaryBlocks(
        [
          { type: 'text', text: ' \n\t' },
          { type: 'reasoning', text: 'thought' },
        ],
        'stop',
      ),
    ).toThrow(/no text/);
    expect(() => summaryBlocks([], 'stop')).toThrow(/no text/);
  });
});

function sessionOf(events: readonly NewEvent[]): Session {
  const session = Session.create(sessionHeader('pure'));
  session.appendBatch(events);
  return session;
}

describe('summarizer messages', () => {
  it('are the derived messages of the shadowed nodes in surface order, skipping content-less replies, then one instruction', () => {
    const emptyReply: NewEvent = {
      type: 'assistant/message',
      time: T0,
      data: {
        turn: 9,
        step: 1,
        message: {
          id: 'empty',
          role: 'assistant',
          content: [],
          source: { kind: 'model', provider: 'fake', model: 'fake' },
        },
        finishReason: 'length',
      },
      surfaceOp: 'append',
    };
    const session = sessionOf([...toolTurn(1), emptyReply, user('u2', 'more')]);
    const nodes = [...session.surfaceNodes];
    const messages = summarizerMessages(session, nodes, 'c1');
    expect(messages.slice(0, -1)).toEqual(session.deriveMessages());
    expect(messages).toHaveLength(session.deriveMessages().length + 1);
    expect(messages.at(-1)).toEqual({
      id: 'compaction-instruction-c1',
      role: 'user',
      content: [{ type: 'text', text: COMPACTION_INSTRUCTION }],
      source: { kind: 'plugin', plugin: 'sessionlog-compaction' },
    });
  });
});

describe('the commit batch', () => {
  it('is compaction/summary then the replacement with sources [start, summary, ...shadowed], valid even for a numerically reversed span', () => {
    const session = sessionOf([user('u0', 'zero'), user('u1', 'one'), user('u2', 'two')]);
    const first = session.append({
      type: 'compaction/start',
      time: T0,
      data: { compactionId: 'c1', turn: null, trigger: 'manual' },
    });
    const batch1 = planCommit({
      compactionId: 'c1',
      startSeq: first.seq,
      nextSeq: session.nextSeq,
      shadowedSeqs: [0, 1],
      shadowedTokenCount: 7,
      summary: [{ type: 'text', text: 'S1' }],
      provider: 'fake',
      model: 'fake',
      time: T0,
    });
    const [summary, checkpoint] = session.appendBatch(batch1);
    expect(summary!.type).toBe('compaction/summary');
    expect(checkpoint!.seq).toBe(summary!.seq + 1);
    expect(checkpoint!.surfaceOp).toEqual({ op: 'replace', start: 0, end: 1 });
    expect(checkpoint!.sourceEventSeqs).toEqual([first.seq, summary!.seq, 0, 1]);
    expect(summary!.data).toMatchObject({
      compactionId: 'c1',
      shadowedRange: { start: 0, end: 1 },
      shadowedSeqs: [0, 1],
      shadowedTokenCount: 7,
    });
    expect(session.surfaceNodes).toEqual([checkpoint!.seq, 2]);

    // Re-compaction: the previous checkpoint (high seq) heads a span ending at a lower seq.
    const second = session.append({
      type: 'compaction/start',
      time: T0,
      data: { compactionId: 'c2', turn: null, trigger: 'manual' },
    });
    const batch2 = planCommit({
      compactionId: 'c2',
      startSeq: second.seq,
      nextSeq: session.nextSeq,
      shadowedSeqs: [checkpoint!.seq, 2],
      shadowedTokenCount: 3,
      summary: [{ type: 'text', text: 'S2' }],
      provider: 'fake',
      model: 'fake',
      time: T0,
    });
    const [, checkpoint2] = session.appendBatch(batch2);
    expect(checkpoint2!.surfaceOp).toEqual({ op: 'replace', start: checkpoint!.seq, end: 2 });
    expect(session.surfaceNodes).toEqual([checkpoint2!.seq]);
    expect(session.deriveMessages()[0]!.source).toEqual({ kind: 'plugin', plugin: 'compact', compactionId: 'c2' });
  });
});

const marker = (type: string, compactionId = 'x'): StoredEvent => {
  const data =
    type === 'compaction/start'
      ? { compactionId, turn: null, trigger: 'manual' }
      : type === 'compaction/end'
        ? { compactionId, turn: null }
        : type === 'session/run'
          ? { workflowId: 'w', runId: 'r' }
          : type === 'turn/start'
            ? { turn: 1 }
            : {};
  return { seq: 0, type, time: T0, data } as StoredEvent;
};

describe('the compaction lock', () => {
  const kinds = ['compaction/start', 'compaction/end', 'session/run', 'session/end-seed', 'turn/start'] as const;

  it('is the latest compaction/start not followed by its end, a session/run or a session/end-seed (random marker sequences)', () => {
    fc.assert(
      fc.property(fc.array(fc.constantFrom(...kinds), { maxLength: 12 }), (sequence) => {
        const events = sequence.map((type, i) => ({ ...marker(type, `c${i}`), seq: i }));
        // Forward oracle: a start opens the lock; its end, a new run or an end-seed clears it.
        let open: { compactionId: string; seq: number } | undefined;
        for (const e of events) {
          if (e.type === 'compaction/start') open = { compactionId: `c${e.seq}`, seq: e.seq };
          else if (e.type !== 'turn/start') open = undefined;
        }
        expect(liveBracket(lookupOf(events))).toEqual(open);
      }),
      { numRuns: 300 },
    );
  });
});

describe('bracketState', () => {
  it('reports only the named bracket’s seqs, shadowed span and error, from the given seq on', () => {
    const session = sessionOf([user('u0', 'zero'), user('u1', 'one'), user('u2', 'two')]);
    const s1 = session.append({
      type: 'compaction/start',
      time: T0,
      data: { compactionId: 'c1', turn: null, trigger: 'manual' },
    });
    const [sum1, rep1] = session.appendBatch(
      planCommit({
        compactionId: 'c1',
        startSeq: s1.seq,
        nextSeq: session.nextSeq,
        shadowedSeqs: [0, 1],
        shadowedTokenCount: 4,
        summary: [{ type: 'text', text: 'S' }],
        provider: 'p',
        model: 'm',
        time: T0,
      }),
    );
    const e1 = session.append({ type: 'compaction/end', time: T0, data: { compactionId: 'c1', turn: null } });
    const s2 = session.append({
      type: 'compaction/start',
      time: T0,
      data: { compactionId: 'c2', turn: null, trigger: 'manual' },
    });
    const e2 = session.append({
      type: 'compaction/end',
      time: T0,
      data: { compactionId: 'c2', turn: null, error: 'boom' },
    });

    expect(bracketState(session, 'c1')).toEqual({
      startSeq: s1.seq,
      summarySeq: sum1!.seq,
      replacementSeq: rep1!.seq,
      endSeq: e1.seq,
      shadowedSeqs: [0, 1],
      shadowedTokenCount: 4,
    });
    expect(bracketState(session, 'c2')).toEqual({ startSeq: s2.seq, endSeq: e2.seq, error: 'boom' });
    expect(bracketState(session, 'c1', s2.seq)).toEqual({});
    expect(bracketState(session, 'c3')).toEqual({});
  });
});

describe('context policy', () => {
  it('fills the documented defaults', () => {
    expect(resolveContextPolicy()).toEqual(DEFAULT_CONTEXT_POLICY);
    expect(DEFAULT_CONTEXT_POLICY).toEqual({
      thresholdRatio: 0.8,
      retainRatio: 0.16,
      summaryMaxTokens: 8192,
      summaryBudgetRatio: 0.2,
      minHeadroomRatio: 0.1,
    });
  });

  it.each([
    [{ thresholdRatio: 0 }, /thresholdRatio/],
    [{ summaryBudgetRatio: 0 }, /summaryBudgetRatio/],
    [{ summaryBudgetRatio: 0.6 }, /summaryBudgetRatio/],
    [{ thresholdRatio: 1.1 }, /thresholdRatio/],
    [{ thresholdRatio: 0.5, retainRatio: 0.5 }, /retainRatio/],
    [{ retainRatio: -0.1 }, /retainRatio/],
    [{ budgetTokens: 0 }, /budgetTokens/],
    [{ budgetTokens: 1.5 }, /budgetTokens/],
    [{ summaryMaxTokens: 0 }, /summaryMaxTokens/],
  ])('rejects %j naming the field', (policy, message) => {
    expect(() => resolveContextPolicy(policy)).toThrow(message);
  });
});
