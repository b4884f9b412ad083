import { describe, expect, it } from 'vitest';
import { createOpenAIProvider } from '../../src/model/provider.js';
import type { StreamChunk } from '../../src/session/messages.js';
import { useFakeModel } from '../support/fake-model.js';
import { fakeHeader, userMessage } from '../support/model-fixtures.js';

const fake = useFakeModel();

function provider(coalesce = { maxDelayMs: 60_000, maxChars: 1_000_000 }) {
  return createOpenAIProvider({ baseURL: fake().baseURL, apiKey: 'k', coalesce });
}

describe('streamCompletion against the fake server', () => {
  it('streams a text reply into one text block with finish reason and usage', async () => {
    fake().enqueueReplies({ text: 'Hello there, how are you?' });
    const chunks: StreamChunk[] = [];
    const result = await provider().stream({
      messages: [userMessage('hi')],
      header: fakeHeader(),
      onChunks: (cs) => void chunks.push(...cs),
    });
    expect(result.aborted).toBe(false);
    expect(result.finishReason).toBe('stop');
    expect(result.content).toEqual([{ type: 'text', text: 'Hello there, how are you?' }]);
    expect(chunks).toEqual([{ kind: 'text-delta', text: 'Hello there, how are you?' }]);
    expect(result.usage?.outputTokens).toBeGreaterThan(0);
    expect(result.usage?.inputTokens).toBeGreaterThan(0);
  });

  it('turns reasoning_content into a reasoning block before the text block', async () => {
    fake().enqueueReplies({ reasoning: 'The user greets me. I greet back.', text: 'Hi!' });
    const result = await provider().stream({ messages: [userMessage('hello')], header: fakeHeader() });
    expect(result.content).toEqual([
      { type: 'reasoning', text: 'The user greets me. I greet back.' },
      { type: 'text', text: 'Hi!' },
    ]);
    expect(result.usage?.reasoningTokens).toBeGreaterThan(0);
  });

  it('assembles streamed tool calls into tool-call blocks with complete argument strings', async () => {
    fake().enqueueReplies({
      reasoning: 'Need two files.',
      toolCalls: [
        { id: 'call_a', name: 'read_file', arguments: { path: 'src/a-rather-long-file-name.ts', offset: 10 } },
        { id: 'call_b', name: 'read_file', arguments: { path: 'b.ts' } },
      ],
    });
    const chunks: StreamChunk[] = [];
    const result = await provider().stream({
      messages: [userMessage('read a and b')],
      header: fakeHeader(),
      onChunks: (cs) => void chunks.push(...cs),
    });
    expect(result.finishReason).toBe('tool_calls');
    expect(result.content).toEqual([
      { type: 'reasoning', text: 'Need two files.' },
      {
        type: 'tool-call',
        id: 'call_a',
        name: 'read_file',
        arguments: '{"path":"src/a-rather-long-file-name.ts","offset":10}',
      },
      { type: 'tool-call', id: 'call_b', name: 'read_file', arguments: '{"path":"b.ts"}' },
    ]);
    // Coalesced: one chunk per reasoning run and per tool call, ids and names kept.
    expect(chunks).toEqual([
      { kind: 'reasoning-delta', text: 'Need two files.' },
      {
        kind: 'tool-call-delta',
        index: 0,
        id: 'call_a',
        name: 'read_file',
        argumentsDelta: '{"path":"src/a-rather-long-file-name.ts","offset":10}',
      },
      { kind: 'tool-call-delta', index: 1, id: 'call_b', name: 'read_file', argumentsDelta: '{"path":"b.ts"}' },
    ]);
  });

  it('flushes a chunk whenever the buffered text reaches maxChars', async () => {
    fake().enqueueReplies({ text: 'one two three four' });
    // Pieces apart in time, so each comes in a read of its own (a read's pieces are pushed together,
    // and those pushed while a delivery is in flight go in the next batch: the test below).
    fake().configure({ tokenDelayMs: 20 });
    const chunks: StreamChunk[] = [];
    await provider({ maxDelayMs: 60_000, maxChars: 1 }).stream({
      messages: [userMessage('count')],
      header: fakeHeader(),
      onChunks: (cs) => void chunks.push(...cs),
    });
    expect(chunks).toEqual([
      { kind: 'text-delta', text: 'one' },
      { kind: 'text-delta', text: ' two' },
      { kind: 'text-delta', text: ' three' },
      { kind: 'text-delta', text: ' four' },
    ]);
  });

  it('pieces that come while a delivery is in flight go together in the next batch', async () => {
    fake().enqueueReplies({ text: 'one two three four' });
    const batches: StreamChunk[][] = [];
    await provider({ maxDelayMs: 60_000, maxChars: 1 }).stream({
      messages: [userMessage('count')],
      header: fakeHeader(),
      onChunks: async (cs) => {
        batches.push(cs);
        // The first delivery outlasts the stream (its pieces come at once), so the rest buffer meanwhile.
        if (batches.length === 1) await new Promise((resolve) => setTimeout(resolve, 500));
      },
    });
    expect(batches).toEqual([[{ kind: 'text-delta', text: 'one' }], [{ kind: 'text-delta', text: ' two three four' }]]);
  });

  it('with holdLastChunks, returns the chunks still buffered when the stream completes instead of delivering them', async () => {
    fake().enqueueReplies({ text: 'one two three four' });
    const delivered: StreamChunk[] = [];
    const result = await provider({ maxDelayMs: 60_000, maxChars: 8 }).stream({
      messages: [userMessage('count')],
      header: fakeHeader(),
      onChunks: (cs) => void delivered.push(...cs),
      holdLastChunks: true,
    });
    expect(delivered).toEqual([{ kind: 'text-delta', text: 'one two three' }]);
    expect(result.heldChunks).toEqual([{ kind: 'text-delta', text: ' four' }]);
    expect(result.content).toEqual([{ type: 'text', text: 'one two three four' }]);
  });

  it('echoes the last user message when nothing is scripted', async () => {
    const result = await provider().stream({ messages: [userMessage('ping')], header: fakeHeader() });
    expect(result.content).toEqual([{ type: 'text', text: 'echo: ping' }]);
  });

  it('uses a matcher reply when the script queue is empty', async () => {
    fake().setMatcher((req) => (req.lastUserText.includes('weather') ? { text: 'sunny' } : undefined));
    const p = provider();
    const weather = await p.stream({ messages: [userMessage('weather today?')], header: fakeHeader() });
    const other = await p.stream({ messages: [userMessage('other')], header: fakeHeader() });
    expect(weather.content).toEqual([{ type: 'text', text: 'sunny' }]);
    expect(other.content).toEqual([{ type: 'text', text: 'echo: other' }]);
  });

  it('returns the partial reply with aborted=true when the caller aborts mid-stream', async () => {
    fake().configure({ tokenDelayMs: 20 });
    fake().enqueueReplies({ text: Array.from({ length: 200 }, (_, i) => `w${i}`).join(' ') });
    const controller = new AbortController();
    const result = await provider({ maxDelayMs: 60_000, maxChars: 1 }).stream({
      messages: [userMessage('long please')],
      header: fakeHeader(),
      signal: controller.signal,
      onChunks: (cs) => {
        if (cs.some((c) => c.kind === 'text-delta' && c.text.includes('w2'))) controller.abort();
      },
    });
    expect(result.aborted).toBe(true);
    const text = result.content.find((b) => b.type === 'text');
    expect(text?.type === 'text' && text.text.startsWith('w0 w1 w2')).toBe(true);
    expect(text?.type === 'text' && text.text.includes('w199')).toBe(false);
  });

  it('reports cached prompt tokens as cacheReadTokens and only the uncached rest as inputTokens', async () => {
    const p = provider();
    const first = userMessage('first question');
    const one = await p.stream({ messages: [first], header: fakeHeader() });
    const firstPrompt = (one.usage?.inputTokens ?? 0) + (one.usage?.cacheReadTokens ?? 0);
    expect(one.usage?.cacheReadTokens).toBe(0);
    const reply = {
      id: 'a1',
      role: 'assistant' as const,
      content: one.content,
      source: { kind: 'model' as const, provider: 'fake', model: 'fake' },
    };
    const two = await p.stream({ messages: [first, reply, userMessage('second question')], header: fakeHeader() });
    expect(two.usage?.cacheReadTokens).toBe(firstPrompt);
    const recorded = fake()
      .requests()
      .map((r) => r.status);
    expect(recorded).toEqual([200, 200]);
  });
});
