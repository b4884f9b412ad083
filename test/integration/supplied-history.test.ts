/**
 * Caller-supplied history and asked-for agents (issue 24), through the real workflow: a note's
 * history is logged in caller turns the model then sees as its context (never as its own
 * replies), and a message that asks for other instructions changes the request from its turn on.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isSessionlogError, type StoredEvent } from '../../src/session/index.js';
import { startStack, type Stack } from '../support/stack.js';

let stack: Stack;
beforeAll(async () => {
  stack = await startStack();
});
afterAll(async () => {
  await stack?.close();
});

const ofType = (events: StoredEvent[], type: string) => events.filter((e) => e.type === type);

describe('caller-supplied history', () => {
  it('logs a transcript in a caller turn, and the next turn sends it to the model as it was', async () => {
    const { header } = await stack.client.start({ sessionId: `supplied-${Date.now()}` });
    const id = header.id;
    await stack.client.note(id, {
      id: 'import',
      history: [
        { role: 'user', id: 'h-u1', text: 'what is 6 times 7?' },
        {
          role: 'assistant',
          id: 'h-a1',
          toolCalls: [{ callId: 'call_x1', name: 'calculator', arguments: '{"expression":"6*7"}' }],
        },
        { role: 'tool', id: 'h-t1', callId: 'call_x1', output: '42' },
        { role: 'assistant', id: 'h-a2', text: 'It is 42.' },
      ],
    });
    const log = await stack.client.events(id);
    const starts = ofType(log, 'turn/start');
    expect(starts.map((e) => e.data)).toEqual([{ turn: 1, origin: 'caller' }]);
    const replies = ofType(log, 'assistant/message').map((e) => (e.data as { message: { source: unknown } }).message);
    expect(replies.map((m) => m.source)).toEqual([{ kind: 'caller' }, { kind: 'caller' }]);
    expect((ofType(log, 'tool/result')[0]!.data as { origin?: string }).origin).toBe('caller');

    const reply = await stack.client.send(id, 'and times 2?');
    expect(reply.turn).toBe(2);
    expect(reply.outcome).toBe('completed');
    const sent = stack.fake.chatRequests().at(-1)!.messages;
    const tail = sent.slice(-5).map((m) => ({ role: m.role, content: m.content ?? null }));
    expect(tail.map((m) => m.role)).toEqual(['user', 'assistant', 'tool', 'assistant', 'user']);
    expect(tail[2]!.content).toBe('42');
    expect(tail[3]!.content).toBe('It is 42.');
    expect(tail[4]!.content).toBe('and times 2?');
    const history = await stack.client.history(id);
    expect(history.map((m) => m.role)).toEqual(['user', 'assistant', 'user', 'assistant', 'user', 'assistant']);
  });

  it('refuses a history whose tool messages answer no call, before the workflow sees it', async () => {
    const { header } = await stack.client.start({ sessionId: `supplied-bad-${Date.now()}` });
    const refused = await stack.client
      .note(header.id, { history: [{ role: 'tool', id: 't1', callId: 'nope', output: 'x' }] })
      .catch((e: unknown) => e);
    expect(isSessionlogError(refused, 'INVALID_ARGUMENT')).toBe(true);
    expect((refused as Error).message).toContain('which no assistant message before it left waiting');
    const unanswered = await stack.client
      .note(header.id, {
        history: [{ role: 'assistant', id: 'a1', toolCalls: [{ callId: 'c1', name: 'f', arguments: '{}' }] }],
      })
      .catch((e: unknown) => e);
    expect(isSessionlogError(unanswered, 'INVALID_ARGUMENT')).toBe(true);
    expect(await stack.client.events(header.id)).toHaveLength(0);
  });
});

describe('asked-for agent', () => {
  it('changes the instructions from the turn that asks, keeps them after, and logs the change once', async () => {
    const { header } = await stack.client.start({ sessionId: `asked-${Date.now()}` });
    const id = header.id;
    await stack.client.send(id, 'first');
    const before = stack.fake.chatRequests().at(-1)!.messages[0]!;
    await stack.client.send(id, 'second', { agent: { system: 'Answer in French.' } });
    expect(stack.fake.chatRequests().at(-1)!.messages[0]).toMatchObject({
      role: 'system',
      content: 'Answer in French.',
    });
    await stack.client.send(id, 'third', { agent: { system: 'Answer in French.' } });
    await stack.client.send(id, 'fourth');
    expect(stack.fake.chatRequests().at(-1)!.messages[0]).toMatchObject({
      role: 'system',
      content: 'Answer in French.',
    });
    const log = await stack.client.events(id);
    expect(ofType(log, 'turn/start').map((e) => (e.data as { agent?: unknown }).agent)).toEqual([
      undefined,
      { system: 'Answer in French.' },
      undefined,
      undefined,
    ]);
    const headers = ofType(log, 'request/header').map((e) => e.data as { reason: string; header: { system?: string } });
    expect(headers.map((h) => h.reason)).toEqual(['initial', 'change']);
    expect(headers[1]!.header.system).toBe('Answer in French.');
    expect(before.content).not.toBe('Answer in French.');
  });

  it('refuses a model the worker cannot run before anything is logged, and the next turn runs as before', async () => {
    const { header } = await stack.client.start({ sessionId: `asked-bad-${Date.now()}` });
    const refused = await stack.client
      .send(header.id, 'hi', { agent: { model: 'no-such-model' } })
      .catch((e: unknown) => e);
    expect(isSessionlogError(refused, 'INVALID_ARGUMENT')).toBe(true);
    expect((refused as Error).message).toContain('no-such-model');
    expect(ofType(await stack.client.events(header.id), 'user/message')).toHaveLength(0);
    // Nothing of it holds: the next message runs turn 1 with the session's own model.
    const next = await stack.client.send(header.id, 'and now?');
    expect(next).toMatchObject({ turn: 1, outcome: 'completed', text: 'echo: and now?' });
  });
});
