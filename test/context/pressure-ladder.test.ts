/**
 * The pressure ladder (src/context/pressure.ts) over a real SQLite store, through the fenced log
 * writer, with the exact length meter and a scripted summarizer: compaction rounds that each fit
 * one summarizer request, escalation (harder prune and spill, then no retained tail), the stall
 * with its numbers, the breaker that re-arms when the request has grown, the error that names
 * the parts of a request that cannot fit, resumption after a failed round, and the window taken
 * below a refused request's size.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { COMPACTION_INSTRUCTION, type ContextPolicy } from '../../src/context/compaction.js';
import { runCompaction } from '../../src/context/compactor.js';
import { resolveContextDeps } from '../../src/context/deps.js';
import { relieveContext, type ReliefOutcome } from '../../src/context/pressure.js';
import { PRUNE_MARKER, type PrunerConfig } from '../../src/context/pruner.js';
import { LogWriter } from '../../src/engine/index.js';
import type { ModelRequest } from '../../src/model/provider.js';
import type { NewEvent, RequestHeader, SessionEvent, StoredEvent } from '../../src/session/index.js';
import {
  HEADER,
  RUN,
  T0,
  compactionHarness,
  compactionLog,
  headerEvent,
  runEvent,
  textBlocks,
  toolTurn,
  user,
  type Harness,
} from './context-fakes.js';

const SUMMARY = '## Goal\n- answer the questions';
const TURN = 9;

let open: Harness[] = [];
afterEach(async () => {
  for (const h of open) await h.close();
  open = [];
});

async function harness(replies: Array<string | Error> = [SUMMARY], retryable = false): Promise<Harness> {
  const h = await compactionHarness({ replies, retryable });
  open.push(h);
  return h;
}

/** `turns` closed tool turns of `size`, then the open turn TURN with its user message (and `extra` events); returns the turn/start seq. */
async function sessionWithOpenTurn(h: Harness, turns: number, size: number, current: NewEvent[]): Promise<number> {
  await h.seed([runEvent(), headerEvent()], 'open');
  for (let t = 1; t <= turns; t++) await h.seed(toolTurn(t, size), `turn${t}`);
  const turnStart = await h.store.nextSeq(h.id);
  await h.seed(
    [
      { type: 'turn/start', time: T0, data: { turn: TURN } },
      { type: 'step/start', time: T0, data: { turn: TURN, step: 1 } },
      ...current,
    ],
    'current',
  );
  return turnStart;
}

/** A tool call of the open turn answered by a `text` result whose whole output is artifact `locator`. */
function calledTool(text: string, locator: string): NewEvent[] {
  const callId = 'call-current';
  return [
    {
      type: 'assistant/message',
      time: T0,
      data: {
        turn: TURN,
        step: 1,
        message: {
          id: 'a-current',
          role: 'assistant',
          content: [{ type: 'tool-call', id: callId, name: 'echo', arguments: '{}' }],
          source: { kind: 'model', provider: 'fake', model: 'fake' },
        },
      },
      surfaceOp: 'append',
    },
    { type: 'tool/call', time: T0, data: { turn: TURN, step: 1, callId, name: 'echo', arguments: '{}' } },
    {
      type: 'tool/result',
      time: T0,
      data: {
        turn: TURN,
        step: 1,
        message: {
          id: 'r-current',
          role: 'user',
          content: [{ type: 'tool-result', toolCallId: callId, content: [{ type: 'text', text }] }],
          source: { kind: 'tool', callId },
        },
        meta: { locator, bytes: text.length },
      },
      surfaceOp: 'append',
    },
  ];
}

type ClimbOptions = {
  window: number;
  protectFromSeq: number;
  policy?: Partial<ContextPolicy>;
  pruner?: Partial<PrunerConfig>;
  trigger?: 'pressure' | 'context-overflow';
  refusedTokens?: number;
  attempt?: number;
  pass?: number;
  /** The head before the step (the same for every attempt of it); default: the head now. */
  fromSeq?: number;
  /** The turn's request header; default HEADER. */
  header?: RequestHeader;
};

/** One climb of the ladder as the model step runs it (its op keys and compaction ids from a step key). */
async function climb(h: Harness, options: ClimbOptions): Promise<ReliefOutcome> {
  const head = await h.store.nextSeq(h.id);
  const writer = await LogWriter.open(h.store, h.id, RUN, head);
  const pass = options.pass ?? 0;
  const context = resolveContextDeps({
    meter: h.meter,
    contextWindow: () => options.window,
    policy: options.policy ?? {},
    pruner: options.pruner ?? {},
  });
  return relieveContext(
    {
      log: {
        get session() {
          return writer.session;
        },
        append: (events, suffix) => writer.append(events, `${RUN}/t${TURN}/s1/p${pass}/${suffix}`),
      },
      compactionLog: (id) => compactionLog(writer, RUN, id),
      summarizer: h.model,
      context,
      now: () => T0,
    },
    {
      header: options.header ?? HEADER,
      turn: TURN,
      compactionBase: `${RUN}.t${TURN}.s1.p${pass}`,
      ownedPrefix: `${RUN}.t${TURN}.s1.`,
      trigger: options.trigger ?? 'pressure',
      ...(options.refusedTokens !== undefined ? { refusedTokens: options.refusedTokens } : {}),
      protectFromSeq: options.protectFromSeq,
      fromSeq: options.fromSeq ?? head,
      attempt: options.attempt ?? 1,
      maxAttempts: 3,
    },
  );
}

function ofType<K extends SessionEvent['type']>(events: readonly StoredEvent[], type: K): Array<SessionEvent<K>> {
  return events.filter((e) => e.type === type) as Array<SessionEvent<K>>;
}

/** A summarizer request's size as the meter prices it (envelope + every message). */
function requestTokens(h: Harness, request: ModelRequest): number {
  return (
    h.meter.headerTokens(request.header) + request.messages.reduce((s, m) => s + h.meter.messageTokens(m, 'fake'), 0)
  );
}

const target = (window: number, policy: { thresholdRatio: number; minHeadroomRatio: number }) =>
  Math.floor(Math.floor(window * policy.thresholdRatio) * (1 - policy.minHeadroomRatio));
const DEFAULTS = { thresholdRatio: 0.8, minHeadroomRatio: 0.1 };

describe('the pressure ladder', () => {
  it('does nothing below the threshold', async () => {
    const h = await harness();
    const protect = await sessionWithOpenTurn(h, 1, 50, [user('u-now', 'hello')]);
    const before = await h.events();
    const outcome = await climb(h, { window: 100_000, protectFromSeq: protect });
    expect(outcome).toMatchObject({ compactions: 0, escalated: false, stalled: false });
    expect(await h.events()).toEqual(before);
  });

  it('prunes oversized tool results first, in one batch of the step, and summarises nothing when that is enough', async () => {
    const h = await harness();
    const protect = await sessionWithOpenTurn(h, 2, 1_000, [user('u-now', 'and?')]);
    const before = await h.events();
    const measured = h.meter.measure(await h.session(), HEADER).totalTokens;
    // Just over the threshold: pruning the two long results alone brings it back under.
    const outcome = await climb(h, {
      window: Math.ceil(measured / 0.8) - 1,
      protectFromSeq: protect,
      pruner: { thresholdChars: 300, headChars: 100, tailChars: 100 },
    });
    const added = (await h.events()).slice(before.length);
    expect(added.map((e) => e.type)).toEqual(['compaction/prune', 'tool/result', 'compaction/prune', 'tool/result']);
    for (const e of added) expect(e.op).toBe(`${RUN}/t${TURN}/s1/p0/prune`);
    for (const r of ofType(added, 'tool/result'))
      expect(textBlocks(r.data.message.content[0].content).join('')).toContain(PRUNE_MARKER);
    expect(outcome.compactions).toBe(0);
    expect(outcome.measurement.totalTokens).toBeLessThan(measured);
    expect(outcome.measurement.totalTokens).toBe(h.meter.measure(await h.session(), HEADER).totalTokens);
  });

  it('summarises in as many rounds as it takes, each summarizer request within the budget, down to its target, never touching the current message', async () => {
    const h = await harness();
    const protect = await sessionWithOpenTurn(h, 6, 200, [user('u-now', 'what next?')]);
    const window = 1_000;
    const outcome = await climb(h, { window, protectFromSeq: protect });
    expect(outcome.errors).toEqual([]);
    expect(outcome.compactions).toBeGreaterThan(1);
    expect(outcome.stalled).toBe(false);
    expect(outcome.measurement.totalTokens).toBeLessThanOrEqual(target(window, DEFAULTS));
    const summarizerRequests = h.model.requests.filter(
      (r) => textBlocks(r.messages.at(-1)!.content)[0] === COMPACTION_INSTRUCTION,
    );
    expect(summarizerRequests).toHaveLength(outcome.compactions);
    for (const request of summarizerRequests) {
      expect(requestTokens(h, request) + (request.header.maxTokens ?? 0)).toBeLessThanOrEqual(window);
    }
    const events = await h.events();
    // Only history before the current turn, and earlier checkpoints, were summarised; the current message is on the surface.
    const current = ofType(events, 'user/message').find((e) => e.data.id === 'u-now')!;
    const checkpoints = new Set(
      ofType(events, 'user/message')
        .filter((e) => e.data.source.kind === 'plugin')
        .map((e) => e.seq),
    );
    for (const summary of ofType(events, 'compaction/summary')) {
      expect(summary.data.shadowedSeqs.every((seq) => seq < protect || checkpoints.has(seq))).toBe(true);
    }
    expect((await h.session()).surfaceNodes).toContain(current.seq);
    // Every bracket is closed, and their ids are the step's, then `.r1`, `.r2`, ….
    const starts = ofType(events, 'compaction/start').map((e) => e.data.compactionId);
    expect(starts[0]).toBe(`${RUN}.t${TURN}.s1.p0`);
    expect(starts.slice(1)).toEqual(starts.slice(1).map((_, i) => `${RUN}.t${TURN}.s1.p0.r${i + 1}`));
    expect(ofType(events, 'compaction/end').map((e) => e.data.compactionId)).toEqual(starts);
  });

  it("sends the summarizer none of the turn's hints (a response format, stop sequences, a token cap are for the reply)", async () => {
    const h = await harness();
    const protect = await sessionWithOpenTurn(h, 6, 200, [user('u-now', 'what next?')]);
    const header: RequestHeader = {
      ...HEADER,
      hints: {
        maxTokens: 3,
        stop: ['.'],
        responseFormat: { type: 'json_schema', name: 'r', schema: { type: 'object' } },
      },
    };
    // The step logs the turn's header (hints included) before it climbs.
    await h.seed([{ type: 'request/header', time: T0, data: { header, reason: 'change' } }], 'hinted');
    const outcome = await climb(h, { window: 1_000, protectFromSeq: protect, header });
    expect(outcome.compactions).toBeGreaterThan(0);
    const summarizerRequests = h.model.requests.filter(
      (r) => textBlocks(r.messages.at(-1)!.content)[0] === COMPACTION_INSTRUCTION,
    );
    expect(summarizerRequests.length).toBeGreaterThan(0);
    for (const request of summarizerRequests) {
      expect(request.header.hints).toBeUndefined();
      expect(request.header.maxTokens).toBeGreaterThan(3);
    }
  });

  it('escalates when the retained tail keeps it above target: spills a long result of the current turn behind its locator, then summarises without a retained tail', async () => {
    const h = await harness();
    const page = Array.from({ length: 120 }, (_, i) => `line ${i} of the page`).join('\n');
    const protect = await sessionWithOpenTurn(h, 2, 100, [
      user('u-now', 'read the page'),
      ...calledTool(page, 'artifact:s/page'),
    ]);
    const window = 1_000;
    const outcome = await climb(h, { window, protectFromSeq: protect });
    expect(outcome.escalated).toBe(true);
    expect(outcome.stalled).toBe(false);
    expect(outcome.measurement.totalTokens).toBeLessThanOrEqual(target(window, DEFAULTS));
    const events = await h.events();
    const escalatedPrunes = ofType(events, 'compaction/prune').filter((e) => e.data.reason === 'escalation');
    expect(escalatedPrunes).toHaveLength(1);
    const spilled = ofType(events, 'tool/result').at(-1)!;
    const text = textBlocks(spilled.data.message.content[0].content).join('');
    expect(text).toContain('artifact:s/page');
    expect(text).toContain('read_artifact');
    expect(text.length).toBeLessThan(page.length / 2);
    // The original result stays in the log, unchanged.
    expect(
      ofType(events, 'tool/result').some((e) => textBlocks(e.data.message.content[0].content).join('') === page),
    ).toBe(true);
  });

  it('logs a stall with its numbers when what it cannot shrink is above target, and still lets a request that fits the window go', async () => {
    const h = await harness();
    const protect = await sessionWithOpenTurn(h, 2, 100, [user('u-now', `long question ${'x'.repeat(3_000)}`)]);
    const window = 1_000;
    const outcome = await climb(h, { window, protectFromSeq: protect });
    expect(outcome.stalled).toBe(true);
    expect(outcome.tooLarge).toBeUndefined();
    expect(outcome.measurement.totalTokens).toBeLessThan(window);
    const [stall] = ofType(await h.events(), 'compaction/stalled');
    expect(stall!.data).toMatchObject({ budget: window, threshold: 800, tokensAfter: outcome.measurement.totalTokens });
    expect(stall!.data.irreducible).toBeGreaterThan(target(window, DEFAULTS));
    expect(stall!.data.reason).toContain(`above its target of ${target(window, DEFAULTS)}`);
  });

  it('the breaker spares another climb until the request has grown by the headroom a compaction must win', async () => {
    const h = await harness();
    const protect = await sessionWithOpenTurn(h, 2, 100, [user('u-now', `long question ${'x'.repeat(3_000)}`)]);
    const window = 1_000;
    await climb(h, { window, protectFromSeq: protect });
    const settled = await h.events();
    const requests = h.model.requests.length;
    // Nothing changed: the breaker holds, nothing is appended, no summarizer call.
    const again = await climb(h, { window, protectFromSeq: protect });
    expect(again.stalled).toBe(true);
    expect(await h.events()).toEqual(settled);
    expect(h.model.requests.length).toBe(requests);
    // A little growth (less than threshold − target = 80 tokens): still held.
    await h.seed([user('u-more', 'ok')], 'small');
    await climb(h, { window, protectFromSeq: protect });
    expect(ofType(await h.events(), 'compaction/stalled')).toHaveLength(1);
    // Growth past the headroom: the ladder climbs again (and, the tail being irreducible, stalls again).
    await h.seed([user('u-much', `more ${'y'.repeat(400)}`)], 'large');
    await climb(h, { window, protectFromSeq: protect, pass: 1 });
    expect(ofType(await h.events(), 'compaction/stalled')).toHaveLength(2);
  });

  it('names the parts and the excess when the request cannot fit the window even after the climb', async () => {
    const h = await harness();
    const protect = await sessionWithOpenTurn(h, 2, 100, [user('u-now', `huge ${'z'.repeat(5_000)}`)]);
    const outcome = await climb(h, { window: 1_000, protectFromSeq: protect });
    expect(outcome.tooLarge).toBeDefined();
    expect(outcome.tooLarge).toMatch(/over the 1000-token context window/);
    expect(outcome.tooLarge).toMatch(
      /the largest is the current message and this turn's replies and tool results \(\d+\)/,
    );
    expect(outcome.tooLarge).toMatch(/the system prompt takes \d+, the tool schemas \d+/);
    const excess = Number(/takes (\d+) tokens, (\d+) over/.exec(outcome.tooLarge!)?.[2]);
    expect(excess).toBeGreaterThan(0);
  });

  it('a climb whose summarizer failed transiently resumes on the retry: each bracket opens once and closes once', async () => {
    const h = await harness([SUMMARY, new Error('summarizer hiccup'), SUMMARY], true);
    const protect = await sessionWithOpenTurn(h, 6, 200, [user('u-now', 'what next?')]);
    const fromSeq = await h.store.nextSeq(h.id);
    await expect(climb(h, { window: 1_000, protectFromSeq: protect, attempt: 1, fromSeq })).rejects.toThrow(
      'summarizer hiccup',
    );
    const outcome = await climb(h, { window: 1_000, protectFromSeq: protect, attempt: 2, fromSeq });
    expect(outcome.measurement.totalTokens).toBeLessThanOrEqual(target(1_000, DEFAULTS));
    const events = await h.events();
    const starts = ofType(events, 'compaction/start').map((e) => e.data.compactionId);
    expect(new Set(starts).size).toBe(starts.length);
    expect(
      ofType(events, 'compaction/end')
        .map((e) => e.data.compactionId)
        .sort(),
    ).toEqual([...starts].sort());
    expect(ofType(events, 'compaction/summary')).toHaveLength(starts.length);
  });

  it("after a provider's refusal takes the window to be below the refused request, though the meter thought it fit", async () => {
    const h = await harness();
    const protect = await sessionWithOpenTurn(h, 8, 200, [user('u-now', 'what next?')]);
    const measured = h.meter.measure(await h.session(), HEADER).totalTokens;
    const window = measured * 2;
    const pressure = await climb(h, { window, protectFromSeq: protect });
    expect(pressure.compactions).toBe(0);
    const overflow = await climb(h, {
      window,
      protectFromSeq: protect,
      trigger: 'context-overflow',
      refusedTokens: measured,
      pass: 1,
    });
    expect(overflow.compactions).toBeGreaterThan(0);
    const refusedWindow = Math.floor(measured * 0.9);
    expect(overflow.measurement.totalTokens).toBeLessThanOrEqual(target(refusedWindow, DEFAULTS));
  });
});

describe("a checkpoint's preamble", () => {
  it('names the original log seqs it stands for, also when its span starts with an earlier checkpoint', async () => {
    const h = await harness();
    await h.seed([runEvent(), headerEvent()], 'open');
    for (let t = 1; t <= 4; t++) await h.seed(toolTurn(t, 100), `turn${t}`);
    const context = resolveContextDeps({ meter: h.meter, contextWindow: () => 100_000, pruner: false });
    const compact = async (compactionId: string) => {
      const head = await h.store.nextSeq(h.id);
      const writer = await LogWriter.open(h.store, h.id, RUN, head);
      return runCompaction(
        { log: compactionLog(writer, RUN, compactionId), summarizer: h.model, context, recall: true, now: () => T0 },
        { compactionId, trigger: 'manual', turn: null, fromSeq: head, attempt: 1, maxAttempts: 1 },
      );
    };
    const first = await compact('m1');
    const firstSpan = first.result!.shadowedSeqs;
    await h.seed(toolTurn(5, 100), 'turn5');
    const second = await compact('m2');
    const secondSeqs = second.result!.shadowedSeqs;
    const events = await h.events();
    // The second span starts with the first checkpoint, which stands for the first span's originals.
    const firstCheckpoint = ofType(events, 'user/message').find((e) => e.data.id === 'checkpoint-m1')!;
    expect(secondSeqs[0]).toBe(firstCheckpoint.seq);
    const checkpoint = ofType(events, 'user/message').find((e) => e.data.id === 'checkpoint-m2')!;
    const preamble = textBlocks(checkpoint.data.content)[0]!;
    const lastOriginal = Math.max(...secondSeqs.filter((seq) => seq !== firstCheckpoint.seq));
    expect(preamble).toContain(`(log seqs ${firstSpan[0]}-${lastOriginal})`);
  });
});
