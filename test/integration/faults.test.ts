import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { StoredEvent, SessionEvent } from '../../src/session/index.js';
import { startStack, type Stack } from '../support/stack.js';

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({ modelTimeoutMs: 2_000 });
});
afterAll(async () => {
  await stack?.close();
});
beforeEach(() => {
  stack.fake.reset();
});

let counter = 0;
const newSession = (name: string) => `fault-${name}-${Date.now()}-${counter++}`;
const ofType = <K extends StoredEvent['type']>(events: readonly StoredEvent[], type: K) =>
  events.filter((e) => e.type === type) as Array<Extract<StoredEvent, { type: K }>>;

async function expectHealthy(sessionId: string): Promise<void> {
  const reply = await stack.client.send(sessionId, 'are you still there?');
  expect(reply.outcome).toBe('completed');
  expect(reply.text).toBe('echo: are you still there?');
  const events = await stack.client.events(sessionId);
  expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i));
  expect(ofType(events, 'turn/start').length).toBe(ofType(events, 'turn/end').length);
}

describe('model faults end in a defined, logged outcome and the session keeps working', () => {
  it('retries a 429 after its retry-after and logs llm/retry', async () => {
    const id = newSession('429');
    stack.fake.injectFault({ kind: 'rate_limit', retryAfterSeconds: 1 });
    const reply = await stack.client.send(id, 'hello');
    expect(reply.text).toBe('echo: hello');
    const retries = ofType(await stack.client.events(id), 'llm/retry') as SessionEvent<'llm/retry'>[];
    expect(retries).toHaveLength(1);
    expect(retries[0]!.data.failure.code).toBe('rate_limit');
    expect(retries[0]!.data.delayMs).toBe(1000);
    expect(stack.fake.chatRequests()).toHaveLength(2);
    await expectHealthy(id);
  });

  it('retries a 500 and answers', async () => {
    const id = newSession('500');
    stack.fake.injectFault({ kind: 'server_error', times: 2 });
    const reply = await stack.client.send(id, 'hi');
    expect(reply.text).toBe('echo: hi');
    const retries = ofType(await stack.client.events(id), 'llm/retry') as SessionEvent<'llm/retry'>[];
    expect(retries.map((r) => r.data.failure.code)).toEqual(['server', 'server']);
    await expectHealthy(id);
  });

  it('times out a hanging request and retries it', async () => {
    const id = newSession('hang');
    stack.fake.injectFault({ kind: 'hang' });
    const reply = await stack.client.send(id, 'wake up');
    expect(reply.text).toBe('echo: wake up');
    const retries = ofType(await stack.client.events(id), 'llm/retry') as SessionEvent<'llm/retry'>[];
    expect(retries.map((r) => r.data.failure.code)).toEqual(['timeout']);
    await expectHealthy(id);
  });

  it('retries a stream dropped midway; the reply cites only the successful attempt', async () => {
    const id = newSession('drop');
    stack.fake.enqueueReplies(
      { text: 'a fairly long reply that streams in many small pieces so the drop lands midway' },
      { text: 'a fairly long reply that streams in many small pieces so the drop lands midway' },
    );
    stack.fake.configure({ tokenDelayMs: 5 });
    stack.fake.injectFault({ kind: 'drop_stream', afterChunks: 3 });
    const reply = await stack.client.send(id, 'stream please');
    expect(reply.text).toBe('a fairly long reply that streams in many small pieces so the drop lands midway');
    const events = await stack.client.events(id);
    const retries = ofType(events, 'llm/retry') as SessionEvent<'llm/retry'>[];
    expect(retries.map((r) => r.data.failure.code)).toEqual(['network']);
    const message = ofType(events, 'assistant/message')[0]!;
    const cited = message.sourceEventSeqs!;
    // Every cited chunk comes after the retry record, so the partial attempt is not part of the reply.
    expect(cited.length).toBeGreaterThan(0);
    expect(Math.min(...cited)).toBeGreaterThan(retries[0]!.seq);
    await expectHealthy(id);
  });

  it('reports malformed tool-call JSON to the model as an error result and continues', async () => {
    const id = newSession('badjson');
    stack.fake.enqueueReplies(
      { text: 'calculating', toolCalls: [{ name: 'calculator', arguments: { expression: '1+1' } }] },
      { text: 'sorry, let me fix that' },
    );
    stack.fake.injectFault({ kind: 'malformed_tool_json' });
    const reply = await stack.client.send(id, 'add 1 and 1');
    expect(reply.text).toBe('sorry, let me fix that');
    const results = ofType(await stack.client.events(id), 'tool/result') as SessionEvent<'tool/result'>[];
    expect(results).toHaveLength(1);
    expect(results[0]!.data.error?.code).toBe('INVALID_TOOL_ARGUMENTS');
    expect(results[0]!.data.message.content[0].isError).toBe(true);
    await expectHealthy(id);
  });

  it('ends the turn with a logged error when retries are exhausted, then answers the next message', async () => {
    const id = newSession('exhausted');
    stack.fake.injectFault({ kind: 'server_error', times: 4 });
    const reply = await stack.client.send(id, 'this will fail');
    expect(reply.outcome).toBe('error');
    const events = await stack.client.events(id);
    const end = ofType(events, 'turn/end')[0] as SessionEvent<'turn/end'>;
    expect(end.data.reason).toMatchObject({ kind: 'error', error: { code: 'server' } });
    await expectHealthy(id);
  });

  it('refuses an empty or oversized message before it reaches history', async () => {
    const id = newSession('validate');
    await expect(stack.client.send(id, '   ')).rejects.toThrow(/must not be empty/);
    await expect(stack.client.send(id, 'x'.repeat(stack.client.maxMessageBytes + 1))).rejects.toThrow(/limit is/);
    await expectHealthy(id);
    const users = ofType(await stack.client.events(id), 'user/message');
    expect(users).toHaveLength(1);
  });
});
