/**
 * Notes logged between turns (SessionClient.note, the workflow's `note` update): a note sent
 * while a turn runs waits for the turn to end and is logged after it, once per note id; its
 * messages reach the model with the next turn without a turn of their own.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isSessionlogError } from '../../src/session/index.js';
import { startStack, type Stack } from '../support/stack.js';

let stack: Stack;
beforeAll(async () => {
  stack = await startStack();
});
afterAll(async () => {
  await stack?.close();
});

describe('SessionClient.note', () => {
  it('waits for the running turn, logs metadata and messages once after it, and the next turn sends the messages', async () => {
    const { header } = await stack.client.start({ sessionId: `note-${Date.now()}` });
    const id = header.id;
    stack.fake.configure({ firstTokenDelayMs: 400 });
    try {
      await stack.client.post(id, 'a slow question', { id: 'm1' });
      await expect
        .poll(async () => (await stack.client.events(id)).some((e) => e.type === 'turn/start'), { timeout: 20_000 })
        .toBe(true);
      const note = {
        id: 'n1',
        metadata: { values: { tag: 'x' } },
        messages: [{ id: 'm2', text: 'context for later' }],
      };
      const [first, second] = await Promise.all([stack.client.note(id, note), stack.client.note(id, note)]);
      expect(second.headSeq).toBe(first.headSeq);
      const log = await stack.client.events(id);
      const turnEnd = log.find((e) => e.type === 'turn/end')!.seq;
      const noted = log.filter((e) => e.op?.endsWith('/note/n1'));
      expect(noted.map((e) => e.type)).toEqual(['session/metadata', 'user/message']);
      expect(noted[0]!.seq).toBeGreaterThan(turnEnd);
      expect(log.filter((e) => e.type === 'turn/start')).toHaveLength(1);
    } finally {
      stack.fake.configure({ firstTokenDelayMs: 0 });
    }
    const reply = await stack.client.send(id, 'and now?');
    expect(reply.outcome).toBe('completed');
    expect(
      stack.fake
        .chatRequests()
        .at(-1)!
        .messages.slice(-2)
        .map((m) => m.content),
    ).toEqual(['context for later', 'and now?']);
  });

  it('refuses what a session would not log, before the workflow sees it', async () => {
    const { header } = await stack.client.start({ sessionId: `note-bad-${Date.now()}` });
    const refused = await stack.client.note(header.id, { messages: [{ text: '   ' }] }).catch((e: unknown) => e);
    expect(isSessionlogError(refused, 'EMPTY_MESSAGE')).toBe(true);
    const tooMany = await stack.client
      .note(header.id, {
        metadata: { values: Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, 'v'])) },
      })
      .catch((e: unknown) => e);
    expect(isSessionlogError(tooMany, 'INVALID_ARGUMENT')).toBe(true);
    expect((await stack.client.events(header.id)).some((e) => e.type === 'session/metadata')).toBe(false);
  });
});
