import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_MODEL_CATALOGUE, lookupModel } from '../../src/model/catalogue.js';
import { buildChatRequest } from '../../src/model/request.js';
import type { StoredEvent, SessionEvent } from '../../src/session/index.js';
import { startStack, type Stack } from '../support/stack.js';

let stack: Stack;
beforeAll(async () => {
  stack = await startStack();
});
afterAll(async () => {
  await stack?.close();
});

function types(events: readonly StoredEvent[]): string[] {
  return events.map((e) => e.type);
}

describe('a session workflow on a real Temporal server', () => {
  it('answers a message and logs the turn in order', async () => {
    const { sessionId } = await stack.client.start({ sessionId: `conv-${Date.now()}` });
    const reply = await stack.client.send(sessionId, 'hello there');
    expect(reply.text).toBe('echo: hello there');
    expect(reply.outcome).toBe('completed');
    const events = await stack.client.events(sessionId);
    const seqs = events.map((e) => e.seq);
    expect(seqs).toEqual(seqs.map((_, i) => i));
    const turnEvents = types(events).filter((t) => t !== 'assistant/chunk');
    expect(turnEvents).toEqual([
      'session/run',
      'turn/start',
      'step/start',
      'user/message',
      'request/header',
      'assistant/message',
      'step/end',
      'turn/end',
    ]);
  });

  it("logs the last streamed chunks in the reply's own append, and the reply cites every chunk", async () => {
    const sessionId = `held-${Date.now()}`;
    const reply = await stack.client.send(sessionId, 'stream this back');
    const events = await stack.client.events(sessionId);
    const chunks = events.filter((e): e is SessionEvent<'assistant/chunk'> => e.type === 'assistant/chunk');
    const message = events.find((e): e is SessionEvent<'assistant/message'> => e.type === 'assistant/message')!;
    expect(chunks.length).toBeGreaterThan(0);
    expect(chunks.at(-1)!.op).toBe(message.op);
    expect(message.sourceEventSeqs).toEqual(chunks.map((c) => c.seq));
    expect(chunks.map((c) => (c.data.chunk.kind === 'text-delta' ? c.data.chunk.text : '')).join('')).toBe(reply.text);
  });

  it('runs tool calls and sends the model exactly the derived history', async () => {
    const sessionId = `tools-${Date.now()}`;
    stack.fake.reset();
    stack.fake.enqueueReplies(
      {
        text: 'Let me compute.',
        toolCalls: [
          { name: 'calculator', arguments: { expression: '6*7' } },
          { name: 'word_count', arguments: { text: 'a b c' } },
        ],
      },
      { text: 'The answer is 42.' },
      { text: 'Second turn reply.' },
    );
    const first = await stack.client.send(sessionId, 'what is 6*7?');
    expect(first.text).toBe('The answer is 42.');
    const second = await stack.client.send(sessionId, 'thanks');
    expect(second.text).toBe('Second turn reply.');

    const events = await stack.client.events(sessionId);
    const results = events.filter((e): e is SessionEvent<'tool/result'> => e.type === 'tool/result');
    expect(results.map((r) => r.data.message.content[0].content)).toEqual([
      [{ type: 'text', text: '42' }],
      [{ type: 'text', text: '{"words":3,"lines":1,"characters":5}' }],
    ]);
    // Results follow their calls in call order.
    const calls = events.filter((e): e is SessionEvent<'tool/call'> => e.type === 'tool/call');
    expect(results.map((r) => r.data.message.source.callId)).toEqual(calls.map((c) => c.data.callId));
    expect(results.map((r) => r.sourceEventSeqs)).toEqual(calls.map((c) => [c.seq]));

    const history = await stack.client.history(sessionId);
    expect(history.map((m) => m.role)).toEqual(['user', 'assistant', 'user', 'user', 'assistant', 'user', 'assistant']);
    const header = events.filter((e): e is SessionEvent<'request/header'> => e.type === 'request/header').at(-1)!.data
      .header;
    const sent = stack.fake.chatRequests();
    expect(sent).toHaveLength(3);
    // Each request carried exactly the derived history logged before its reply.
    const replies = events.filter((e): e is SessionEvent<'assistant/message'> => e.type === 'assistant/message');
    for (const [i, request] of sent.entries()) {
      const before = history.slice(
        0,
        history.findIndex((m) => m.id === replies[i]!.data.message.id),
      );
      const expected = buildChatRequest({
        messages: before,
        header,
        model: lookupModel(DEFAULT_MODEL_CATALOGUE, 'fake'),
      });
      expect(request.messages).toEqual(JSON.parse(JSON.stringify(expected.messages)));
    }
    expect(sent[2]!.messages[0]).toMatchObject({ role: 'system', content: 'You are a test assistant.' });
  });
});
