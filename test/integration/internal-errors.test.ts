/**
 * A programming error inside the model step (here a TypeError thrown by the model port, as a bug
 * in request building would) is `internal`: one attempt, never retried as a network failure, the
 * turn ends with `internal_error` and the error's message, and the session takes the next message.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOpenAIProvider } from '../../src/model/provider.js';
import type { ModelPort } from '../../src/model/provider.js';
import type { StoredEvent } from '../../src/session/index.js';
import { startStack, type Stack } from '../support/stack.js';

let stack: Stack;
let calls = 0;
let failNext = false;

beforeAll(async () => {
  stack = await startStack();
  const real = createOpenAIProvider({
    baseURL: stack.fake.baseURL,
    apiKey: 'test-key',
    provider: 'fake',
    timeoutMs: 20_000,
  });
  const buggy: ModelPort = {
    provider: real.provider,
    model: (name) => real.model(name),
    async stream(request) {
      calls += 1;
      if (failNext) {
        failNext = false;
        const header = undefined as unknown as { model: string };
        // The bug of the field report: a property read on undefined.
        return { model: header.model } as never;
      }
      return real.stream(request);
    },
  };
  await stack.restartWorker({ model: buggy });
});
afterAll(async () => {
  await stack?.close();
});

describe('an internal error in the model step', () => {
  it('is tried once, ends the turn with internal_error and its message, and the next message is answered', async () => {
    const id = `internal-${Date.now()}`;
    expect((await stack.client.send(id, 'warm up')).outcome).toBe('completed');
    calls = 0;
    failNext = true;
    const failed = await stack.client.send(id, 'this one meets the bug');
    expect(failed.outcome).toBe('error');
    expect(calls).toBe(1);
    const events: StoredEvent[] = await stack.client.events(id);
    expect(events.filter((e) => e.type === 'llm/retry')).toEqual([]);
    const end = events.filter((e) => e.type === 'turn/end').at(-1)!;
    expect(end.data).toMatchObject({
      reason: { kind: 'error', error: { code: 'internal_error' } },
    });
    expect(JSON.stringify(end.data)).toContain("Cannot read properties of undefined (reading 'model')");
    const next = await stack.client.send(id, 'and after it?');
    expect(next.outcome).toBe('completed');
    expect(next.text).toBe('echo: and after it?');
  });
});
