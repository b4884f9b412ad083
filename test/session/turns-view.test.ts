/**
 * The turns view (src/session/turns-view.ts): a pure fold of a log into per-turn summaries,
 * request usage and context actions, checked on hand-written logs and as properties over
 * random valid logs.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  Session,
  TOOL_RESULT_VIEW_CHARS,
  TOOL_RESULT_VIEW_CUT,
  foldTurns,
  type StoredEvent,
  type AssistantMessage,
  type CompactionView,
  type NewEvent,
  type PruneView,
  type ToolResultMessage,
  type UserMessage,
} from '../../src/session/index.js';
import { ANY_REPLACES, buildLog, programArb, testHeader } from '../support/log-gen.js';

const T = 1_700_000_000_000;

const user = (id: string, text: string): UserMessage => ({
  id,
  role: 'user',
  content: [{ type: 'text', text }],
  source: { kind: 'user' },
});
const assistant = (id: string, content: AssistantMessage['content']): AssistantMessage => ({
  id,
  role: 'assistant',
  content,
  source: { kind: 'model', provider: 'fake', model: 'fake' },
});
const toolResult = (id: string, callId: string, text: string): ToolResultMessage => ({
  id,
  role: 'user',
  content: [{ type: 'tool-result', toolCallId: callId, content: [{ type: 'text', text }] }],
  source: { kind: 'tool', callId },
});

/** Appends `inputs` to a fresh session and returns its events. */
function log(inputs: NewEvent[]): StoredEvent[] {
  const session = Session.create(testHeader('turns-view'));
  for (const input of inputs) session.append(input);
  return [...session.events];
}

/** Turn 1: a streamed tool call with a spilled result, a retry, then a streamed answer. */
function toolTurn(): NewEvent[] {
  const spilledPreview = 'head…tail\n\n(Omitted 9000 bytes. Full result stored at: artifact:turns-view/dump-c1.txt.)';
  return [
    { type: 'turn/start', time: T, data: { turn: 1 } },
    { type: 'step/start', time: T, data: { turn: 1, step: 1 } },
    { type: 'user/message', time: T, data: user('u1', 'dump it'), surfaceOp: 'append' },
    {
      type: 'llm/retry',
      time: T + 1,
      data: {
        turn: 1,
        step: 1,
        attempt: 2,
        delayMs: 1000,
        failure: { code: 'rate_limit', message: 'slow down', status: 429 },
      },
    },
    {
      type: 'assistant/chunk',
      time: T + 2,
      data: { turn: 1, step: 1, chunk: { kind: 'reasoning-delta', text: 'think' } },
    },
    { type: 'assistant/chunk', time: T + 2, data: { turn: 1, step: 1, chunk: { kind: 'text-delta', text: 'dump' } } },
    { type: 'assistant/chunk', time: T + 3, data: { turn: 1, step: 1, chunk: { kind: 'text-delta', text: 'ing' } } },
    {
      type: 'assistant/message',
      time: T + 4,
      data: {
        turn: 1,
        step: 1,
        message: assistant('a1', [
          { type: 'reasoning', text: 'think' },
          { type: 'text', text: 'dumping' },
          { type: 'tool-call', id: 'c1', name: 'dump', arguments: '{"size":9000}' },
        ]),
        usage: { inputTokens: 100, outputTokens: 10, cacheReadTokens: 50 },
        finishReason: 'tool_calls',
      },
      surfaceOp: 'append',
      sourceEventSeqs: [4, 5, 6],
    },
    {
      type: 'tool/call',
      time: T + 4,
      data: { turn: 1, step: 1, callId: 'c1', name: 'dump', arguments: '{"size":9000}' },
    },
    {
      type: 'tool/result',
      time: T + 5,
      data: {
        turn: 1,
        step: 1,
        message: toolResult('r1', 'c1', spilledPreview),
        meta: { locator: 'artifact:turns-view/dump-c1.txt', bytes: 9000 },
      },
      surfaceOp: 'append',
      sourceEventSeqs: [8],
    },
    { type: 'step/end', time: T + 5, data: { turn: 1, step: 1 } },
    { type: 'step/start', time: T + 6, data: { turn: 1, step: 2 } },
    { type: 'assistant/chunk', time: T + 7, data: { turn: 1, step: 2, chunk: { kind: 'text-delta', text: 'done' } } },
    {
      type: 'assistant/message',
      time: T + 8,
      data: {
        turn: 1,
        step: 2,
        message: assistant('a2', [{ type: 'text', text: 'done' }]),
        usage: { inputTokens: 300, outputTokens: 5 },
        finishReason: 'stop',
      },
      surfaceOp: 'append',
      sourceEventSeqs: [12],
    },
    { type: 'step/end', time: T + 8, data: { turn: 1, step: 2 } },
    { type: 'turn/end', time: T + 9, data: { turn: 1, reason: { kind: 'completed' } } },
  ];
}

describe('foldTurns on a written log', () => {
  it('folds a tool turn: the user message, each step reply with its chunks folded in, the call with its spilled result, the retry', () => {
    const view = foldTurns(log(toolTurn()));
    expect(view.turns).toHaveLength(1);
    const [turn] = view.turns;
    expect(turn).toMatchObject({
      turn: 1,
      startSeq: 0,
      endSeq: 15,
      startedAt: T,
      endedAt: T + 9,
      outcome: 'completed',
      error: null,
    });
    expect(turn!.userMessages).toEqual([{ seq: 2, id: 'u1', step: 1, text: 'dump it', source: 'user' }]);
    const [first, second] = turn!.steps;
    expect(first!.retries).toEqual([
      { seq: 3, attempt: 2, delayMs: 1000, failure: { code: 'rate_limit', message: 'slow down', status: 429 } },
    ]);
    expect(first!.reply).toMatchObject({
      seq: 7,
      text: 'dumping',
      reasoning: 'think',
      chunkSeqs: [4, 5, 6],
      streaming: false,
      interrupted: false,
      finishReason: 'tool_calls',
    });
    expect(first!.toolCalls).toHaveLength(1);
    expect(first!.toolCalls[0]).toMatchObject({ seq: 8, callId: 'c1', name: 'dump', arguments: '{"size":9000}' });
    expect(first!.toolCalls[0]!.result).toMatchObject({
      seq: 9,
      isError: false,
      spilled: true,
      artifact: {
        locator: 'artifact:turns-view/dump-c1.txt',
        sessionId: 'turns-view',
        name: 'dump-c1.txt',
        bytes: 9000,
      },
    });
    expect(first).toMatchObject({ startSeq: 1, endSeq: 10 });
    expect(second).toMatchObject({
      step: 2,
      startSeq: 11,
      endSeq: 14,
      reply: { seq: 13, text: 'done', chunkSeqs: [12] },
    });
    expect(view.requests).toEqual([
      { index: 1, seq: 7, turn: 1, step: 1, time: T + 4, promptTokens: 150, outputTokens: 10 },
      { index: 2, seq: 13, turn: 1, step: 2, time: T + 8, promptTokens: 300, outputTokens: 5 },
    ]);
    expect(view.activity).toEqual({
      events: 16,
      turns: 1,
      lastActivity: T + 9,
      phase: 'idle',
      openTurn: null,
      lastRequestTokens: 300,
      pendingApprovals: [],
      pausedOn: null,
    });
  });

  it('shows a reply still streaming as the text of its chunks so far, and the session as running', () => {
    const events = log(toolTurn().slice(0, 6));
    const view = foldTurns(events);
    expect(view.turns[0]!.outcome).toBeNull();
    expect(view.turns[0]!.steps[0]!.reply).toMatchObject({
      seq: null,
      text: 'dump',
      reasoning: 'think',
      chunkSeqs: [4, 5],
      streaming: true,
    });
    expect(view.activity).toMatchObject({ phase: 'running', openTurn: 1 });
    expect(view.requests).toEqual([]);
  });

  it('reports errors, cancellations and interrupted replies as the turn ended', () => {
    const events = log([
      { type: 'turn/start', time: T, data: { turn: 1 } },
      { type: 'step/start', time: T, data: { turn: 1, step: 1 } },
      { type: 'user/message', time: T, data: user('u1', 'hi'), surfaceOp: 'append' },
      { type: 'step/end', time: T, data: { turn: 1, step: 1 } },
      {
        type: 'turn/end',
        time: T,
        data: { turn: 1, reason: { kind: 'error', error: { code: 'auth', message: 'bad key', status: 401 } } },
      },
      { type: 'turn/start', time: T, data: { turn: 2 } },
      { type: 'step/start', time: T, data: { turn: 2, step: 1 } },
      { type: 'user/message', time: T, data: user('u2', 'again'), surfaceOp: 'append' },
      { type: 'assistant/chunk', time: T, data: { turn: 2, step: 1, chunk: { kind: 'text-delta', text: 'par' } } },
      {
        type: 'assistant/message',
        time: T,
        data: { turn: 2, step: 1, message: assistant('a2', [{ type: 'text', text: 'par' }]), interrupted: true },
        surfaceOp: 'append',
        sourceEventSeqs: [8],
      },
      { type: 'step/end', time: T, data: { turn: 2, step: 1 } },
      { type: 'turn/end', time: T, data: { turn: 2, reason: { kind: 'aborted', reason: { kind: 'user' } } } },
    ]);
    const view = foldTurns(events);
    expect(view.turns.map((t) => t.outcome)).toEqual(['error', 'aborted']);
    expect(view.turns[0]!.error).toEqual({ code: 'auth', message: 'bad key' });
    expect(view.turns[1]!.steps[0]!.reply).toMatchObject({ seq: 9, text: 'par', interrupted: true, usage: null });
    expect(view.requests).toEqual([
      { index: 1, seq: 9, turn: 2, step: 1, time: T, promptTokens: null, outputTokens: null },
    ]);
  });

  it('cuts a long tool result to its head and tail and keeps its full length', () => {
    const long = `${'a'.repeat(5_000)}TAIL`;
    const events = log([
      { type: 'turn/start', time: T, data: { turn: 1 } },
      { type: 'step/start', time: T, data: { turn: 1, step: 1 } },
      { type: 'user/message', time: T, data: user('u1', 'x'), surfaceOp: 'append' },
      {
        type: 'assistant/message',
        time: T,
        data: {
          turn: 1,
          step: 1,
          message: assistant('a1', [{ type: 'tool-call', id: 'c1', name: 'read', arguments: '{}' }]),
        },
        surfaceOp: 'append',
      },
      { type: 'tool/call', time: T, data: { turn: 1, step: 1, callId: 'c1', name: 'read', arguments: '{}' } },
      {
        type: 'tool/result',
        time: T,
        data: {
          turn: 1,
          step: 1,
          message: toolResult('r1', 'c1', long),
          meta: { locator: 'artifact:turns-view/read.txt', bytes: long.length },
        },
        surfaceOp: 'append',
        sourceEventSeqs: [4],
      },
    ]);
    const result = foldTurns(events).turns[0]!.steps[0]!.toolCalls[0]!.result!;
    expect(result.chars).toBe(long.length);
    expect(result.spilled).toBe(false);
    expect(result.text.length).toBe(TOOL_RESULT_VIEW_CHARS + TOOL_RESULT_VIEW_CUT.length);
    expect(result.text.startsWith('a'.repeat(3_000))).toBe(true);
    expect(result.text.endsWith('TAIL')).toBe(true);
  });

  it('places compaction brackets and prunes between requests, with the tokens of the requests around them', () => {
    const base = toolTurn();
    const events = log([
      ...base,
      { type: 'compaction/start', time: T + 10, data: { compactionId: 'cmp-1', turn: null, trigger: 'manual' } },
      {
        type: 'compaction/summary',
        time: T + 11,
        data: {
          compactionId: 'cmp-1',
          summary: [{ type: 'text', text: 'sum' }],
          shadowedRange: { start: 2, end: 7 },
          shadowedSeqs: [2, 7],
          shadowedTokenCount: 120,
          provider: 'fake',
          model: 'fake',
          usage: { inputTokens: 200, outputTokens: 12 },
        },
      },
      {
        type: 'user/message',
        time: T + 11,
        data: {
          id: 'checkpoint-cmp-1',
          role: 'user',
          content: [{ type: 'text', text: 'sum' }],
          source: { kind: 'plugin', plugin: 'compact', compactionId: 'cmp-1' },
        },
        surfaceOp: { op: 'replace', start: 2, end: 7 },
        sourceEventSeqs: [16, 17, 2, 7],
      },
      { type: 'compaction/end', time: T + 12, data: { compactionId: 'cmp-1', turn: null } },
      { type: 'turn/start', time: T + 20, data: { turn: 2 } },
      { type: 'step/start', time: T + 20, data: { turn: 2, step: 1 } },
      { type: 'user/message', time: T + 20, data: user('u3', 'more'), surfaceOp: 'append' },
      {
        type: 'compaction/prune',
        time: T + 21,
        data: { shadowedRange: { start: 9, end: 9 }, shadowedSeqs: [9], shadowedTokenCount: 40 },
      },
      {
        type: 'tool/result',
        time: T + 21,
        data: {
          turn: 1,
          step: 1,
          message: toolResult('r1', 'c1', 'pruned'),
          meta: { locator: 'artifact:turns-view/dump-c1.txt', bytes: 9000 },
        },
        surfaceOp: { op: 'replace', start: 9, end: 9 },
        sourceEventSeqs: [9],
      },
      {
        type: 'assistant/message',
        time: T + 22,
        data: {
          turn: 2,
          step: 1,
          message: assistant('a3', [{ type: 'text', text: 'ok' }]),
          usage: { inputTokens: 90, outputTokens: 2 },
        },
        surfaceOp: 'append',
      },
      { type: 'step/end', time: T + 22, data: { turn: 2, step: 1 } },
      { type: 'turn/end', time: T + 22, data: { turn: 2, reason: { kind: 'completed' } } },
    ]);
    const view = foldTurns(events);
    const [compaction, prune] = view.contextActions as [CompactionView, PruneView];
    expect(compaction).toEqual({
      kind: 'compaction',
      compactionId: 'cmp-1',
      trigger: 'manual',
      turn: null,
      startSeq: 16,
      summarySeq: 17,
      replacementSeq: 18,
      endSeq: 19,
      shadowedSeqs: [2, 7],
      shadowedTokens: 120,
      summaryTokens: 12,
      error: null,
      afterRequest: 2,
      tokensBefore: 300,
      tokensAfter: 90,
    });
    expect(prune).toEqual({
      kind: 'prune',
      seq: 23,
      shadowedSeq: 9,
      replacementSeq: 24,
      shadowedTokens: 40,
      turn: 2,
      afterRequest: 2,
    });
    // The timeline keeps what the tool returned; the checkpoint is not a user message of turn 2.
    expect(view.turns[0]!.steps[0]!.toolCalls[0]!.result!.seq).toBe(9);
    expect(view.turns[1]!.userMessages.map((m) => m.id)).toEqual(['u3']);
  });

  it('lists an approval request as pending until it is answered, and the session as waiting for it', () => {
    const events = log(toolTurn().slice(0, 9));
    const request: StoredEvent = {
      seq: 9,
      type: 'tool/approval-request',
      time: T + 5,
      data: {
        turn: 1,
        step: 1,
        callId: 'c1',
        tool: 'dump',
        arguments: '{"size":9000}',
        expiresAt: T + 60_000,
        kind: 'approval',
      },
    };
    const waiting = foldTurns([...events, request]);
    expect(waiting.activity.phase).toBe('waiting-for-approval');
    expect(waiting.activity.pendingApprovals).toEqual([
      {
        seq: 9,
        turn: 1,
        callId: 'c1',
        tool: 'dump',
        arguments: '{"size":9000}',
        expiresAt: T + 60_000,
        kind: 'approval',
      },
    ]);
    expect(waiting.turns[0]!.steps[0]!.toolCalls[0]!.approvalRequest).toMatchObject({ callId: 'c1' });

    const answer: StoredEvent = {
      seq: 10,
      type: 'tool/approval',
      time: T + 6,
      data: { turn: 1, step: 1, callId: 'c1', decision: 'deny', reason: 'too big' },
    };
    const answered = foldTurns([...events, request, answer]);
    expect(answered.activity).toMatchObject({ phase: 'running', pendingApprovals: [] });
    expect(answered.turns[0]!.steps[0]!.toolCalls[0]!.approval).toEqual({
      seq: 10,
      decision: 'deny',
      reason: 'too big',
    });
  });

  it('keeps only the newest turns when asked, with the activity of the whole log', () => {
    const echoTurn = (turn: number): NewEvent[] => [
      { type: 'turn/start', time: T, data: { turn } },
      { type: 'step/start', time: T, data: { turn, step: 1 } },
      { type: 'user/message', time: T, data: user(`u${turn}`, `hello ${turn}`), surfaceOp: 'append' },
      {
        type: 'assistant/message',
        time: T,
        data: {
          turn,
          step: 1,
          message: assistant(`a${turn}`, [{ type: 'text', text: `echo ${turn}` }]),
          usage: { inputTokens: 10 * turn, outputTokens: 1 },
        },
        surfaceOp: 'append',
      },
      { type: 'step/end', time: T, data: { turn, step: 1 } },
      { type: 'turn/end', time: T, data: { turn, reason: { kind: 'completed' } } },
    ];
    const events = log([...echoTurn(1), ...echoTurn(2), ...echoTurn(3)]);
    expect(foldTurns(events, 2).turns.map((t) => t.turn)).toEqual([2, 3]);
    const summary = foldTurns(events, 0);
    expect(summary.turns).toEqual([]);
    expect(summary.activity).toMatchObject({ turns: 3, events: 18, lastRequestTokens: 30 });
    expect(summary.requests).toHaveLength(3);
  });
});

describe('foldTurns over random valid logs', () => {
  it('counts every turn, every request in order, and folds every chunk of a turn into exactly one reply', () => {
    fc.assert(
      fc.property(programArb(80), (program) => {
        const { session } = buildLog(program, ANY_REPLACES);
        const events = session.events;
        const view = foldTurns(events);
        expect(view.activity.events).toBe(events.length);
        expect(view.activity.turns).toBe(events.filter((e) => e.type === 'turn/start').length);
        expect(view.turns.map((t) => t.startSeq)).toEqual(
          events.filter((e) => e.type === 'turn/start').map((e) => e.seq),
        );
        const replies = events.filter((e) => e.type === 'assistant/message');
        expect(view.requests.map((r) => r.seq)).toEqual(replies.map((e) => e.seq));
        expect(view.requests.map((r) => r.index)).toEqual(replies.map((_, i) => i + 1));
        const folded = view.turns.flatMap((t) => t.steps.flatMap((s) => s.reply?.chunkSeqs ?? []));
        expect(new Set(folded).size).toBe(folded.length);
        let inTurn = false;
        const chunksInTurns: number[] = [];
        for (const e of events) {
          if (e.type === 'turn/start') inTurn = true;
          else if (e.type === 'turn/end') inTurn = false;
          else if (e.type === 'assistant/chunk' && inTurn) chunksInTurns.push(e.seq);
        }
        expect([...folded].sort((a, b) => a - b)).toEqual(chunksInTurns);
        expect(view.activity.phase).toBe(view.turns.at(-1)?.outcome === null ? 'running' : 'idle');
        // The fold is a function of the log: the same log gives the same view.
        expect(foldTurns([...events])).toEqual(view);
      }),
      { numRuns: 150 },
    );
  });
});
