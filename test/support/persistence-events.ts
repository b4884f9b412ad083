/**
 * Small event builders and helpers for persistence tests (backend-specific suites).
 */
import { SESSION_FORMAT_VERSION, type NewEvent, type SessionHeader } from '../../src/session/index.js';

export function testHeader(id: string, createdAt = 1_700_000_000_000): SessionHeader {
  return { version: SESSION_FORMAT_VERSION, id, createdAt };
}

export function userMessage(id: string, text: string, time = 1): NewEvent {
  return {
    type: 'user/message',
    time,
    data: { id, role: 'user', content: [{ type: 'text', text }], source: { kind: 'user' } },
    surfaceOp: 'append',
  };
}

export function assistantMessage(id: string, text: string, turn = 1, time = 1): NewEvent {
  return {
    type: 'assistant/message',
    time,
    data: {
      turn,
      step: 1,
      message: {
        id,
        role: 'assistant',
        content: [{ type: 'text', text }],
        source: { kind: 'model', provider: 'fake', model: 'm' },
      },
    },
    surfaceOp: 'append',
  };
}

/** A whole closed turn: turn/start, user message, step, assistant reply, step/end, turn/end. */
export function closedTurn(turn: number, time = 1): NewEvent[] {
  return [
    { type: 'turn/start', time, data: { turn } },
    userMessage(`u${turn}`, `question ${turn}`, time),
    { type: 'step/start', time, data: { turn, step: 1 } },
    assistantMessage(`a${turn}`, `answer ${turn}`, turn, time),
    { type: 'step/end', time, data: { turn, step: 1 } },
    { type: 'turn/end', time, data: { turn, reason: { kind: 'completed' } } },
  ];
}

/** An open turn (as a crash leaves it): turn/start, user message, step/start. */
export function openTurn(turn: number, time = 1): NewEvent[] {
  return [
    { type: 'turn/start', time, data: { turn } },
    userMessage(`u${turn}`, `question ${turn}`, time),
    { type: 'step/start', time, data: { turn, step: 1 } },
  ];
}
