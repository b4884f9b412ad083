import { describe, expect, it } from 'vitest';
import {
  Session,
  SESSION_FORMAT_VERSION,
  interruptedTurnClosers,
  planFork,
  type NewEvent,
  type AssistantMessage,
  type UserMessage,
} from '../../src/session/index.js';

const header = { version: SESSION_FORMAT_VERSION, id: 's1', createdAt: 1 };
const user = (id: string, text: string): NewEvent => ({
  type: 'user/message',
  time: 1,
  data: { id, role: 'user', content: [{ type: 'text', text }], source: { kind: 'user' } } satisfies UserMessage,
  surfaceOp: 'append',
});
const assistant = (id: string, text: string, calls: string[] = []): NewEvent => ({
  type: 'assistant/message',
  time: 1,
  data: {
    turn: 1,
    step: 1,
    message: {
      id,
      role: 'assistant',
      content: [
        { type: 'text', text },
        ...calls.map((c) => ({ type: 'tool-call' as const, id: c, name: 'echo', arguments: '{}' })),
      ],
      source: { kind: 'model', provider: 'fake', model: 'm' },
    } satisfies AssistantMessage,
  },
  surfaceOp: 'append',
});

describe('Session', () => {
  it('assigns contiguous seqs and derives messages from surface events only', () => {
    const s = Session.create(header);
    s.append({ type: 'turn/start', time: 1, data: { turn: 1 } });
    s.append(user('u1', 'hi'));
    s.append({ type: 'step/start', time: 1, data: { turn: 1, step: 1 } });
    s.append({
      type: 'assistant/chunk',
      time: 1,
      data: { turn: 1, step: 1, chunk: { kind: 'text-delta', text: 'he' } },
    });
    s.append(assistant('a1', 'hello'));
    expect(s.events.map((e) => e.seq)).toEqual([0, 1, 2, 3, 4]);
    expect(s.deriveMessages().map((m) => m.id)).toEqual(['u1', 'a1']);
  });

  it('rejects a surface event without surfaceOp and leaves the log unchanged', () => {
    const s = Session.create(header);
    const bad = { ...user('u1', 'x') } as Record<string, unknown>;
    delete bad.surfaceOp;
    expect(() => s.append(bad as NewEvent)).toThrow(/surfaceOp/);
    expect(s.nextSeq).toBe(0);
  });

  it('replaces a positional span and bumps replaceGeneration once', () => {
    const s = Session.create(header);
    s.append(user('u1', 'a'));
    s.append(user('u2', 'b'));
    s.append(user('u3', 'c'));
    s.append({ ...user('c1', 'summary'), surfaceOp: { op: 'replace', start: 0, end: 1 }, sourceEventSeqs: [0, 1] });
    expect(s.surface.nodes).toEqual([3, 2]);
    expect(s.replaceGeneration).toBe(1);
    expect(s.deriveMessages().map((m) => m.id)).toEqual(['c1', 'u3']);
  });

  it('closes an interrupted turn with tool results, step/end and turn/end', () => {
    const s = Session.create(header);
    s.append({ type: 'turn/start', time: 5, data: { turn: 1 } });
    s.append({ type: 'step/start', time: 5, data: { turn: 1, step: 1 } });
    s.append(assistant('a1', 'calling', ['c1', 'c2']));
    s.append({ type: 'tool/call', time: 6, data: { turn: 1, step: 1, callId: 'c1', name: 'echo', arguments: '{}' } });
    const closers = interruptedTurnClosers(s.events);
    expect(closers.map((c) => c.type)).toEqual(['tool/result', 'tool/result', 'step/end', 'turn/end']);
    s.appendBatch(closers);
    expect(interruptedTurnClosers(s.events)).toEqual([]);
  });

  it('refuses to fork inside an open turn', () => {
    const s = Session.create(header);
    s.append({ type: 'turn/start', time: 5, data: { turn: 1 } });
    expect(() => planFork(s, 'child', 2)).toThrow(/OPEN_TURN|still open/);
  });
});
