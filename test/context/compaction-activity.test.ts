/**
 * The compaction bracket (src/context/compactor.ts) as the engine runs it for the compaction
 * activity, over a real SQLite store, with a deterministic meter and a scripted model port: dsh-spec §14
 * properties 17–20, 22–28, 30, 31 as they apply to sessionlog.
 *
 * Adaptations to DESIGN §3/§6 (where our design differs from the harness):
 * - The commit is one store batch holding `compaction/summary` + the replacement (so they are
 *   adjacent by construction); `compaction/end` is a separate batch.
 * - The compaction id comes from the caller (the workflow). A retried activity with the same id
 *   resumes its own bracket; a summary already logged is never requested again.
 * - A stale bracket is an unmatched `compaction/start` followed by a later `session/run` (a new
 *   workflow run took over) or `session/end-seed`; a live one makes the activity fail
 *   non-retryably without appending ("busy").
 * - Manual compaction runs with `turn: null` and retain 0; overflow also uses retain 0. The
 *   workflow (not the activity) guarantees a manual compaction runs only between turns.
 * - Our `ModelCallRequest` has no `purpose` field; the summarizer call is recognised by its
 *   final instruction message (COMPACTION_INSTRUCTION).
 *
 * Retried activities and the fenced writer (the engine's operations around the bracket) are
 * tested in test/engine/compaction-operations.test.ts.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it, onTestFinished } from 'vitest';
import { CHECKPOINT_PREAMBLE, COMPACTION_INSTRUCTION, frameCheckpoint } from '../../src/context/compaction.js';
import { openStore } from '../../src/persistence/open.js';
import {
  Session,
  deriveEventMessage,
  type StoredEvent,
  type Message,
  type NewEvent,
  type SessionEvent,
} from '../../src/session/index.js';
import { BALANCED_REPLACES, buildLog, programArb } from '../support/log-gen.js';
import {
  HEADER,
  RUN,
  T0,
  SUMMARY,
  compactionHarness,
  conversation,
  useHarnesses,
  headerEvent,
  runEvent,
  textBlocks,
  toolTurn,
  user,
} from './context-fakes.js';

const harness = useHarnesses();

function ofType<K extends SessionEvent['type']>(events: readonly StoredEvent[], type: K): Array<SessionEvent<K>> {
  return events.filter((e) => e.type === type) as Array<SessionEvent<K>>;
}

function derivedOf(session: Session, seqs: readonly number[]): Message[] {
  return seqs.map((seq) => deriveEventMessage(session.eventAt(seq)!)).filter((m): m is Message => m !== null);
}

describe('a successful compaction bracket', () => {
  it('appends start, summary, replacement and end with one compaction id and leaves every earlier event unchanged and durable', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sessionlog-compaction-'));
    const url = `sqlite:${join(dir, 'store.db')}`;
    const h = await harness({ url });
    await conversation(h);
    const before = await h.events();

    const done = await h.compact({ compactionId: 'c1' });

    // Durable: a second store on the same file sees the whole bracket.
    const reopened = await openStore(url);
    const after = await reopened.readFrom(h.id, 0);
    await reopened.close();
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    expect(after.slice(0, before.length)).toEqual(before);
    const added = after.slice(before.length);
    expect(added.map((e) => e.type)).toEqual([
      'compaction/start',
      'compaction/summary',
      'user/message',
      'compaction/end',
    ]);
    expect(
      added.map((e) =>
        e.type === 'user/message'
          ? (e.data as { source: { compactionId: string } }).source.compactionId
          : (e.data as { compactionId: string }).compactionId,
      ),
    ).toEqual(['c1', 'c1', 'c1', 'c1']);
    // Adaptation: summary + replacement are one batch (same op), the end is its own batch.
    expect(added[1]!.op).toBe(added[2]!.op);
    expect(added[3]!.op).not.toBe(added[2]!.op);
    expect(added[2]!.seq).toBe(added[1]!.seq + 1);
    expect(done.headSeq).toBe(after.length);
    expect(done.error).toBeUndefined();
    expect(done.result?.compactionId).toBe('c1');
  });

  it('replaces exactly the removed head-anchored span, lists [start, summary, ...shadowed] as sources and prices the span with the meter', async () => {
    const h = await harness();
    await conversation(h);
    const before = await h.session();
    const nodesBefore = [...before.surfaceNodes];
    const measured = h.meter.measure(before, HEADER);

    const done = await h.compact({ compactionId: 'c1' });

    const after = await h.session();
    const [start] = ofType(after.events, 'compaction/start');
    const [summary] = ofType(after.events, 'compaction/summary');
    const replacement = after.eventAt(summary!.seq + 1)!;
    const shadowed = summary!.data.shadowedSeqs;
    // Manual compaction keeps only the newest indivisible unit (retain 0): here the final text reply.
    expect(shadowed).toEqual(nodesBefore.slice(0, -1));
    expect(after.surfaceNodes).toEqual([replacement.seq, nodesBefore.at(-1)]);
    expect(after.replaceGeneration).toBe(before.replaceGeneration + 1);
    expect(replacement.surfaceOp).toEqual({ op: 'replace', start: shadowed[0], end: shadowed.at(-1) });
    expect(replacement.sourceEventSeqs).toEqual([start!.seq, summary!.seq, ...shadowed]);
    expect((replacement.data as Message).source).toEqual({ kind: 'plugin', plugin: 'compact', compactionId: 'c1' });
    expect(summary!.data.shadowedRange).toEqual({ start: shadowed[0], end: shadowed.at(-1) });
    const priced = measured.nodes.filter((n) => shadowed.includes(n.seq)).reduce((s, n) => s + n.tokens, 0);
    expect(summary!.data.shadowedTokenCount).toBe(priced);
    expect(done.result!.shadowedSeqs).toEqual(shadowed);
    expect(done.result!.tokensBefore).toBe(measured.totalTokens);
    expect(done.result!.tokensAfter).toBe(h.meter.measure(after, HEADER).totalTokens);
    expect(done.result!.tokensAfter).toBeLessThan(done.result!.tokensBefore);
  });

  it('makes the framed checkpoint the first derived message, keeping only the text blocks of the reply', async () => {
    const h = await harness({
      replies: [
        {
          content: [
            { type: 'reasoning', text: 'let me think' },
            { type: 'text', text: '## Primary request' },
            { type: 'tool-call', id: 'x', name: 'echo', arguments: '{}' },
            { type: 'text', text: '- two questions' },
          ],
          finishReason: 'stop',
          provider: 'fake',
          model: 'fake',
        },
      ],
    });
    await conversation(h);
    await h.compact({ compactionId: 'c1' });
    const session = await h.session();
    const first = session.deriveMessages()[0]!;
    expect(first.role).toBe('user');
    expect(first.content).toEqual([
      { type: 'text', text: `${CHECKPOINT_PREAMBLE}\n\n<compacted-summary>` },
      { type: 'text', text: '## Primary request' },
      { type: 'text', text: '- two questions' },
      { type: 'text', text: '</compacted-summary>' },
    ]);
    const [summary] = ofType(session.events, 'compaction/summary');
    expect(summary!.data.summary).toEqual([
      { type: 'text', text: '## Primary request' },
      { type: 'text', text: '- two questions' },
    ]);
  });
});

describe('the summarizer request', () => {
  it('is the shadowed nodes’ derived messages plus one instruction, with system and tools of the latest request header', async () => {
    const h = await harness();
    await conversation(h);
    const latest = { ...HEADER, system: 'A newer system prompt.', tools: [] };
    await h.seed([{ type: 'request/header', time: T0, data: { header: latest, reason: 'change' } }], 'header2');
    const before = await h.session();
    const derivedBefore = before.deriveMessages();

    await h.compact({ compactionId: 'c1' });

    expect(h.model.requests).toHaveLength(1);
    const request = h.model.requests[0]!;
    const shadowed = ofType((await h.session()).events, 'compaction/summary')[0]!.data.shadowedSeqs;
    const leading = request.messages.slice(0, -1);
    // Head-anchored span: the summarizer's prefix is byte-identical to the last request's prefix.
    expect(leading).toEqual(derivedOf(before, shadowed));
    expect(leading).toEqual(derivedBefore.slice(0, leading.length));
    const instruction = request.messages.at(-1)!;
    expect(instruction.role).toBe('user');
    expect(instruction.content).toEqual([{ type: 'text', text: COMPACTION_INSTRUCTION }]);
    expect(request.header.system).toBe('A newer system prompt.');
    expect(request.header.tools).toEqual([]);
    expect(request.header.model).toBe(latest.model);
    expect(request.header.maxTokens).toBe(8192);
  });
});

describe('failed brackets', () => {
  it('refuses a summary that is not smaller than the span: surface unchanged, bracket closed with an error', async () => {
    const h = await harness({ replies: [`## Primary request\n${'- detail\n'.repeat(5_000)}`] });
    await conversation(h);
    const before = await h.session();

    const done = await h.compact({ compactionId: 'c1' });

    const after = await h.session();
    expect(done.result).toBeNull();
    expect(done.error).toMatch(/not smaller/);
    expect(after.surfaceNodes).toEqual(before.surfaceNodes);
    expect(after.replaceGeneration).toBe(before.replaceGeneration);
    const added = after.events.slice(before.nextSeq);
    expect(added.map((e) => e.type)).toEqual(['compaction/start', 'compaction/end']);
    expect((added[1]!.data as { error?: string }).error).toMatch(/not smaller/);
  });

  it.each([
    [
      'a thrown provider error',
      new Error('provider down', { cause: new Error('socket reset') }),
      /provider down: socket reset/,
    ],
    [
      'a reply cut off at the output limit',
      {
        content: [{ type: 'text' as const, text: '## Primary' }],
        finishReason: 'length',
        provider: 'fake',
        model: 'fake',
      },
      /MAX_TOKENS/,
    ],
    [
      'a reply without text',
      {
        content: [{ type: 'tool-call' as const, id: 'x', name: 'echo', arguments: '{}' }],
        finishReason: 'tool_calls',
        provider: 'fake',
        model: 'fake',
      },
      /no text/,
    ],
  ])('on %s leaves the surface unchanged and appends exactly start and end{error}', async (_name, reply, message) => {
    const h = await harness({ replies: [reply] });
    await conversation(h);
    const before = await h.session();

    const done = await h.compact({ compactionId: 'c1' });

    const after = await h.session();
    expect(done.result).toBeNull();
    expect(done.error).toMatch(message);
    expect(after.surfaceNodes).toEqual(before.surfaceNodes);
    expect(after.replaceGeneration).toBe(before.replaceGeneration);
    const added = after.events.slice(before.nextSeq);
    expect(added.map((e) => e.type)).toEqual(['compaction/start', 'compaction/end']);
    const end = added[1] as SessionEvent<'compaction/end'>;
    expect(end.data.compactionId).toBe('c1');
    expect(typeof end.data.error).toBe('string');
    expect(end.data.error).toMatch(message);
  });
});

describe('the compaction lock', () => {
  const openStart = (id: string): NewEvent => ({
    type: 'compaction/start',
    time: T0,
    data: { compactionId: id, turn: null, trigger: 'manual' },
  });

  it('a live unmatched compaction/start makes a new compaction fail non-retryably without appending', async () => {
    const h = await harness();
    await conversation(h);
    await h.seed([openStart('old')], 'old/start');
    const before = await h.events();

    await expect(h.compact({ compactionId: 'c2' })).rejects.toMatchObject({
      nonRetryable: true,
      message: expect.stringMatching(/old.*still running/),
    });

    expect(await h.events()).toEqual(before);
    expect(h.model.requests).toHaveLength(0);
  });

  it.each([
    ['a later session/run', runEvent('run-2')],
    ['a later session/end-seed', { type: 'session/end-seed', time: T0, data: {} } satisfies NewEvent],
  ])('an unmatched start followed by %s is stale and does not block compaction', async (_name, marker) => {
    const runId = marker.type === 'session/run' ? 'run-2' : RUN;
    const h = await harness();
    await h.seed([runEvent(), headerEvent(), ...toolTurn(1), openStart('orphan')], 'old');
    await h.seed([marker, ...toolTurn(2)], 'new', runId);

    const done = await h.compact({ compactionId: 'c2', runId });

    expect(done.result?.compactionId).toBe('c2');
    const ends = ofType(await h.events(), 'compaction/end');
    // Nothing ever closes a stale orphan.
    expect(ends.map((e) => e.data.compactionId)).toEqual(['c2']);
  });

  it('a bracket closed by its compaction/end does not block the next compaction', async () => {
    const h = await harness();
    await conversation(h, 1);
    await h.compact({ compactionId: 'c1' });
    await h.seed(toolTurn(2), 'turn2');
    const done = await h.compact({ compactionId: 'c2' });
    expect(done.result?.compactionId).toBe('c2');
  });
});

describe('bracket ownership', () => {
  it('an automatic bracket carries the open turn number on start and end and adds no turn boundary', async () => {
    const h = await harness();
    await conversation(h, 2);
    await h.seed(
      [
        { type: 'turn/start', time: T0, data: { turn: 3 } },
        { type: 'step/start', time: T0, data: { turn: 3, step: 1 } },
        user('u3', 'next question'),
      ],
      'turn3',
    );
    const knownHead = await h.store.nextSeq(h.id);

    await h.compact({ compactionId: 'c1', trigger: 'context-overflow', turn: 3, knownHead });

    const added = (await h.events()).slice(knownHead);
    expect(added.map((e) => e.type)).toEqual([
      'compaction/start',
      'compaction/summary',
      'user/message',
      'compaction/end',
    ]);
    expect((added[0] as SessionEvent<'compaction/start'>).data.turn).toBe(3);
    expect((added[3] as SessionEvent<'compaction/end'>).data.turn).toBe(3);
  });

  it('a manual bracket carries turn null on start and end', async () => {
    const h = await harness();
    await conversation(h);
    const knownHead = await h.store.nextSeq(h.id);
    await h.compact({ compactionId: 'm1', trigger: 'manual', turn: null });
    const added = (await h.events()).slice(knownHead);
    expect((added[0] as SessionEvent<'compaction/start'>).data).toMatchObject({ turn: null, trigger: 'manual' });
    expect((added.at(-1) as SessionEvent<'compaction/end'>).data.turn).toBeNull();
  });
});

describe('nothing to compact', () => {
  it('returns null and appends nothing when the surface is a single node', async () => {
    const h = await harness();
    await h.seed([runEvent(), headerEvent(), user('u1', 'hello')], 'open');
    const before = await h.events();
    const done = await h.compact({ compactionId: 'c1' });
    expect(done).toEqual({ headSeq: before.length, result: null });
    expect(await h.events()).toEqual(before);
    expect(h.model.requests).toHaveLength(0);
  });

  it('returns null and appends nothing when the whole surface is one tool-call unit', async () => {
    const h = await harness();
    // Only the assistant call and its result (no user message): the one balanced cut inside is none.
    const turn = toolTurn(1)
      .filter((e) => e.type !== 'user/message')
      .slice(0, 5);
    await h.seed([runEvent(), headerEvent(), ...turn], 'open');
    const before = await h.events();
    const done = await h.compact({ compactionId: 'c1', trigger: 'context-overflow', turn: 1 });
    expect(done.result).toBeNull();
    expect(await h.events()).toEqual(before);
  });

  it('returns null and appends nothing without a logged request header', async () => {
    const h = await harness();
    await h.seed([runEvent(), ...toolTurn(1), ...toolTurn(2)], 'open');
    const before = await h.events();
    const done = await h.compact({ compactionId: 'c1' });
    expect(done.result).toBeNull();
    expect(await h.events()).toEqual(before);
    expect(h.model.requests).toHaveLength(0);
  });
});

describe('retention by trigger', () => {
  it('pressure keeps a verbatim tail of at least floor(budget × retainRatio) tokens; overflow keeps only the newest unit', async () => {
    // A window large enough that one summarizer request holds the whole span (the retained tail alone decides).
    const policy = { thresholdRatio: 0.8, retainRatio: 0.02 };
    const pressure = await harness({ contextWindow: 10_000, policy });
    const overflow = await harness({ contextWindow: 10_000, policy });
    for (const h of [pressure, overflow]) await conversation(h, 3);
    const session = await pressure.session();
    const prices = new Map(pressure.meter.measure(session, HEADER).nodes.map((n) => [n.seq, n.tokens]));
    const nodes = [...session.surfaceNodes];

    await pressure.compact({ compactionId: 'p', trigger: 'pressure', turn: 3 });
    await overflow.compact({ compactionId: 'o', trigger: 'context-overflow', turn: 3 });

    const kept = (h: Session, id: string) => {
      const shadowed = ofType(h.events, 'compaction/summary').find((s) => s.data.compactionId === id)!.data
        .shadowedSeqs;
      return nodes.slice(shadowed.length);
    };
    const pressureKept = kept(await pressure.session(), 'p');
    const tailTokens = pressureKept.reduce((s, seq) => s + prices.get(seq)!, 0);
    expect(tailTokens).toBeGreaterThanOrEqual(Math.floor(10_000 * 0.02));
    // Minimal: dropping the oldest kept node (still a balanced cut here: it is a user message) would go below the budget.
    expect(tailTokens - prices.get(pressureKept[0]!)!).toBeLessThan(200);
    expect(kept(await overflow.session(), 'o')).toEqual([nodes.at(-1)]);
  });
});

describe('re-compaction', () => {
  it('folds the previous checkpoint into the next compaction and shows it to the summarizer', async () => {
    const h = await harness();
    await conversation(h, 2);
    await h.compact({ compactionId: 'c1' });
    const checkpointSeq = ofType(await h.events(), 'compaction/summary')[0]!.seq + 1;
    await h.seed(toolTurn(3), 'turn3');

    const done = await h.compact({ compactionId: 'c2' });

    expect(done.result!.shadowedSeqs[0]).toBe(checkpointSeq);
    const second = h.model.requests[1]!;
    const firstMessage = second.messages[0]!;
    expect(textBlocks(firstMessage.content).join('\n')).toContain('<compacted-summary>');
    expect(firstMessage).toEqual((await h.events())[checkpointSeq]!.data);
    // The log keeps both checkpoints; the surface shows only the newest.
    const session = await h.session();
    expect(ofType(session.events, 'user/message').filter((e) => e.surfaceOp !== 'append')).toHaveLength(2);
    expect(session.surfaceNodes[0]).toBe(done.headSeq - 2);
  });
});

describe('compaction over random logs (property)', () => {
  /** Independent oracle for cut balance: every tool call before the cut is answered before it. */
  function balancedAt(session: Session, nodes: readonly number[], cut: number): boolean {
    const calls = new Set<string>();
    const answered = new Set<string>();
    for (const seq of nodes.slice(0, cut)) {
      const message = deriveEventMessage(session.eventAt(seq)!);
      if (!message) continue;
      for (const block of message.content) {
        if (block.type === 'tool-call') calls.add(block.id);
        if (block.type === 'tool-result') answered.add(block.toolCallId);
      }
    }
    return [...calls].every((id) => answered.has(id));
  }

  it('manual compaction either appends nothing or a complete bracket that shadows the largest balanced head span', async () => {
    await fc.assert(
      fc.asyncProperty(programArb(50), fc.boolean(), async (program, addHeader) => {
        const { inputs } = buildLog(program, BALANCED_REPLACES);
        const h = await compactionHarness({ replies: [SUMMARY], url: 'sqlite::memory:' });
        try {
          const seed = [...inputs, runEvent(), ...(addHeader ? [headerEvent()] : [])];
          await h.seed(seed, 'seed');
          const before = await h.session();
          const nodes = [...before.surfaceNodes];
          const derivedBefore = before.deriveMessages();
          const header = [...before.events].reverse().find((e) => e.type === 'request/header') as
            SessionEvent<'request/header'> | undefined;

          const done = await h.compact({ compactionId: 'cp' });

          const after = await h.session();
          // Append-only (property 17).
          expect(after.events.slice(0, before.nextSeq)).toEqual(before.events);
          const added = after.events.slice(before.nextSeq);
          let k = nodes.length - 1;
          while (k > 0 && !balancedAt(before, nodes, k)) k -= 1;
          const onlyCheckpoints = nodes.slice(0, k).every((seq) => {
            const e = before.eventAt(seq);
            return (
              e?.type === 'user/message' &&
              e.surfaceOp !== 'append' &&
              e.data.source.kind === 'plugin' &&
              e.data.source.compactionId !== undefined
            );
          });
          const prices = header ? h.meter.measure(before, header.data.header).nodes : [];
          const spanTokens = prices.slice(0, Math.max(0, k)).reduce((s, n) => s + n.tokens, 0);
          // A span shorter than twice an empty checkpoint's frame is not worth a summary.
          const frameTokens = h.meter.messageTokens(
            { id: 'x', role: 'user', content: frameCheckpoint([], { start: 0, end: 0 }), source: { kind: 'user' } },
            'fake',
          );
          if (!header || k <= 0 || onlyCheckpoints || spanTokens < 2 * frameTokens) {
            expect(done.result).toBeNull();
            expect(added).toEqual([]);
            expect(h.model.requests).toHaveLength(0);
            return;
          }
          const span = nodes.slice(0, k);
          const checkpointTokens = h.meter.messageTokens(
            {
              id: 'x',
              role: 'user',
              content: frameCheckpoint([{ type: 'text', text: SUMMARY }]),
              source: { kind: 'user' },
            },
            header.data.header.model,
          );
          // The summarizer saw the head span's derived messages (property 31).
          expect(h.model.requests[0]!.messages.slice(0, -1)).toEqual(derivedOf(before, span));
          if (checkpointTokens >= spanTokens) {
            expect(done.result).toBeNull();
            expect(added.map((e) => e.type)).toEqual(['compaction/start', 'compaction/end']);
            expect(after.surfaceNodes).toEqual(nodes);
            return;
          }
          expect(added.map((e) => e.type)).toEqual([
            'compaction/start',
            'compaction/summary',
            'user/message',
            'compaction/end',
          ]);
          expect(done.result!.shadowedSeqs).toEqual(span);
          expect((added[1] as SessionEvent<'compaction/summary'>).data.shadowedTokenCount).toBe(spanTokens);
          expect(after.surfaceNodes).toEqual([added[2]!.seq, ...nodes.slice(k)]);
          const derivedAfter = after.deriveMessages();
          expect(derivedAfter.slice(1)).toEqual(derivedBefore.slice(derivedOf(before, span).length));
          // Every tool result still follows its call (property 15 after compaction).
          const seen = new Set<string>();
          for (const message of derivedAfter) {
            for (const block of message.content) {
              if (block.type === 'tool-call') seen.add(block.id);
              if (block.type === 'tool-result') expect(seen.has(block.toolCallId)).toBe(true);
            }
          }
        } finally {
          await h.close();
        }
      }),
      { numRuns: 60 },
    );
  });
});
