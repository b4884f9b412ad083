/**
 * The AI SDK UI message stream's pure parts: UI messages read as a stateless transcript
 * (src/gateway/ai-sdk/ui-messages.ts) and a reconnect's catch-up coalesced (ui-fold.ts).
 */
import { describe, expect, it } from 'vitest';
import { UiMessageFold, coalesceChunks } from '../../src/gateway/ai-sdk/ui-fold.js';
import { readUiMessages } from '../../src/gateway/ai-sdk/ui-messages.js';
import type { StoredEvent } from '../../src/session/index.js';

const MAX_MEDIA = 1024 * 1024;

describe('readUiMessages', () => {
  it("reads texts, the caller's tool calls and outputs; the server's tools and reasoning are not the transcript's", () => {
    const { transcript, approvals } = readUiMessages(
      [
        { id: 's', role: 'system', parts: [{ type: 'text', text: 'Be brief.' }] },
        { id: 'u1', role: 'user', parts: [{ type: 'text', text: 'Weather in Oslo?' }] },
        {
          id: 'a1',
          role: 'assistant',
          parts: [
            { type: 'step-start' },
            { type: 'reasoning', text: 'thinking' },
            { type: 'text', text: 'Let me check. ' },
            {
              type: 'tool-calculator',
              toolCallId: 'c0',
              state: 'output-available',
              input: { expression: '1+1' },
              output: '2',
              providerExecuted: true,
            },
            {
              type: 'tool-weather',
              toolCallId: 'c1',
              state: 'output-available',
              input: { city: 'Oslo' },
              output: 'sunny',
            },
            { type: 'text', text: 'It is sunny.' },
          ],
        },
        { id: 'u2', role: 'user', parts: [{ type: 'text', text: 'Thanks' }] },
      ],
      MAX_MEDIA,
    );
    expect(transcript).toEqual({
      system: 'Be brief.',
      messages: [
        { role: 'user', text: 'Weather in Oslo?' },
        {
          role: 'assistant',
          text: 'Let me check. ',
          toolCalls: [{ callId: 'c1', name: 'weather', arguments: '{"city":"Oslo"}' }],
        },
        { role: 'tool', callId: 'c1', output: 'sunny' },
        { role: 'assistant', text: 'It is sunny.', toolCalls: [] },
        { role: 'user', text: 'Thanks' },
      ],
    });
    expect(approvals).toEqual([]);
  });

  it("takes the last assistant message's approval answers, and refuses a file part that is not base64, naming it", () => {
    const { approvals } = readUiMessages(
      [
        { id: 'u1', role: 'user', parts: [{ type: 'text', text: 'deploy' }] },
        {
          id: 'a1',
          role: 'assistant',
          parts: [
            {
              type: 'tool-deploy',
              toolCallId: 'c9',
              state: 'approval-responded',
              input: {},
              providerExecuted: true,
              approval: { id: 'c9', approved: false, reason: 'not today' },
            },
          ],
        },
      ],
      MAX_MEDIA,
    );
    expect(approvals).toEqual([{ callId: 'c9', approved: false, reason: 'not today' }]);
    expect(() =>
      readUiMessages([{ role: 'user', parts: [{ type: 'file', mediaType: 'image/png', url: 'data:,' }] }], MAX_MEDIA),
    ).toThrow(/messages\[0\]\.parts\[0\].*not base64/);
  });
});

describe('coalesceChunks', () => {
  it('joins the deltas of each text and reasoning part, keeping every other chunk in order', () => {
    expect(
      coalesceChunks([
        { type: 'start' },
        { type: 'reasoning-delta', id: 'r', delta: 'a' },
        { type: 'reasoning-delta', id: 'r', delta: 'b' },
        { type: 'text-start', id: 't' },
        { type: 'text-delta', id: 't', delta: 'Hel' },
        { type: 'text-delta', id: 't', delta: 'lo' },
        { type: 'text-end', id: 't' },
        { type: 'text-delta', id: 'u', delta: 'x' },
      ]),
    ).toEqual([
      { type: 'start' },
      { type: 'reasoning-delta', id: 'r', delta: 'ab' },
      { type: 'text-start', id: 't' },
      { type: 'text-delta', id: 't', delta: 'Hello' },
      { type: 'text-end', id: 't' },
      { type: 'text-delta', id: 'u', delta: 'x' },
    ]);
  });
});

describe('UiMessageFold', () => {
  const T = 1_700_000_000_000;
  const log = (events: Array<Omit<StoredEvent, 'seq' | 'time'>>): StoredEvent[] =>
    events.map((event, seq) => ({ ...event, seq, time: T }) as StoredEvent);
  const turn = log([
    { type: 'turn/start', data: { turn: 1 } },
    { type: 'step/start', data: { turn: 1, step: 1 } },
    {
      type: 'user/message',
      data: { id: 'm1', role: 'user', content: [{ type: 'text', text: 'hi' }], source: { kind: 'user' } },
      surfaceOp: 'append',
    },
    {
      type: 'assistant/message',
      data: {
        turn: 1,
        step: 1,
        message: {
          id: 'a1',
          role: 'assistant',
          content: [{ type: 'text', text: 'hello' }],
          source: { kind: 'model', provider: 'fake', model: 'fake' },
        },
        usage: { inputTokens: 10, outputTokens: 2 },
      },
      surfaceOp: 'append',
    },
    { type: 'step/end', data: { turn: 1, step: 1 } },
    { type: 'turn/end', data: { turn: 1, reason: { kind: 'completed' } } },
  ]);

  const ONE_STEP_REPLY = ['start', 'start-step', 'text-start', 'text-delta', 'text-end', 'finish-step', 'finish'];

  it('streams a turn begun by its message as one message: start, its step, the text, finish with usage', () => {
    const fold = new UiMessageFold({ sessionId: 's1', anchor: { kind: 'message', messageId: 'm1' } });
    const chunks = turn.flatMap((event) => fold.push(event));
    expect(chunks.map((c) => c.type)).toEqual(ONE_STEP_REPLY);
    expect(chunks.find((c) => c.type === 'text-delta')!.delta).toBe('hello');
    expect(chunks.at(-1)).toMatchObject({
      finishReason: 'stop',
      messageMetadata: { sessionId: 's1', turn: 1, usage: { inputTokens: 10, outputTokens: 2, totalTokens: 12 } },
    });
    expect(fold.state()).toBe('done');
  });

  it('ends the message at a spend cap the turn reached: the breach as a data part, finish reason other', () => {
    const paused = log([
      ...turn.slice(0, 3).map(({ seq: _seq, time: _time, ...event }) => event),
      {
        type: 'budget/breach',
        data: { turn: 1, step: 1, before: 'model', cap: 'tokens', scope: 'total', used: 2_010, limit: 2_000 },
      },
    ]);
    const fold = new UiMessageFold({ sessionId: 's1', anchor: { kind: 'message', messageId: 'm1' } });
    const chunks = paused.flatMap((event) => fold.push(event));
    expect(chunks.map((c) => c.type)).toEqual(['start', 'start-step', 'finish-step', 'data-budget', 'finish']);
    expect(chunks[3]).toEqual({
      type: 'data-budget',
      id: 'budget-3',
      data: {
        paused: 'budget',
        code: 'budget_exceeded',
        message: 'the total tokens cap of 2000 was reached (2010 used)',
        before: 'model',
        cap: 'tokens',
        scope: 'total',
        used: 2_010,
        limit: 2_000,
      },
    });
    expect(chunks.at(-1)).toMatchObject({ finishReason: 'other' });
    expect(fold.state()).toBe('done');
  });

  it('resumes a turn from its start with the same parts, and waits for nothing before its anchor', () => {
    const resumed = new UiMessageFold({ sessionId: 's1', anchor: { kind: 'turn', turn: 1 } });
    expect(turn.flatMap((event) => resumed.push(event)).map((c) => c.type)).toEqual(ONE_STEP_REPLY);
    const other = new UiMessageFold({ sessionId: 's1', anchor: { kind: 'message', messageId: 'nope' } });
    expect(turn.flatMap((event) => other.push(event))).toEqual([]);
    expect(other.state()).toBe('queued');
  });
});
