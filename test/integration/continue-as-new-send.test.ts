/**
 * Regression: a session driven only by `send` (update) must still continue as new. The sends the
 * finished turn answered are still counted as waiting when the workflow decides, and used to keep
 * the run open forever, so its history grew without bound.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStack, type Stack } from '../support/stack.js';

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({ tunables: { continueAsNewAfterTurns: 2 } });
});
afterAll(async () => {
  await stack?.close();
});

describe('continue-as-new with send', () => {
  it('a session driven by sequential sends continues as new and answers every message once', async () => {
    const id = `can-send-${Date.now()}`;
    for (let i = 0; i < 6; i++) {
      const reply = await stack.client.send(id, `message ${i}`, { id: `m${i}` });
      expect(reply.text).toBe(`echo: message ${i}`);
    }
    const events = await stack.client.events(id);
    expect(events.filter((e) => e.type === 'session/run').length).toBeGreaterThanOrEqual(3);
    expect(events.filter((e) => e.type === 'user/message').length).toBe(6);
    expect(events.filter((e) => e.type === 'assistant/message').length).toBe(6);
  });
});
