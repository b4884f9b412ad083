/**
 * Hiding messages (src/session/hide.ts) and a turn's request options (src/session/turn-hints.ts,
 * src/model/request.ts): a hide is an ordinary logged surface replacement that the session
 * validates, derivation leaves out and the stateless transcript forgets, while the log keeps
 * the hidden event; hints reach the wire as the provider spells them.
 */
import { describe, expect, it } from 'vitest';
import { loggedTranscript } from '../../src/gateway/transcripts.js';
import { DEFAULT_MODEL_CATALOGUE, lookupModel } from '../../src/model/catalogue.js';
import { buildChatRequest } from '../../src/model/request.js';
import { requestHeaderFor } from '../../src/engine/agent.js';
import {
  Session,
  hideEvents,
  hiddenSeqs,
  turnHintsProblem,
  unhideableReason,
  type NewEvent,
} from '../../src/session/index.js';
import { testHeader } from '../support/log-gen.js';

const T = 1_700_000_000_000;
const user = (id: string, text: string): NewEvent => ({
  type: 'user/message',
  time: T,
  data: { id, role: 'user', content: [{ type: 'text', text }], source: { kind: 'user' } },
  surfaceOp: 'append',
});
const reply = (id: string, text: string, calls = false): NewEvent => ({
  type: 'assistant/message',
  time: T,
  data: {
    turn: 1,
    step: 1,
    message: {
      id,
      role: 'assistant',
      content: [
        { type: 'text', text },
        ...(calls ? [{ type: 'tool-call' as const, id: 'c1', name: 'dump', arguments: '{}' }] : []),
      ],
      source: { kind: 'model', provider: 'fake', model: 'fake' },
    },
  },
  surfaceOp: 'append',
});

function conversation(): Session {
  const session = Session.create(testHeader('hide'));
  session.append({ type: 'turn/start', time: T, data: { turn: 1 } });
  session.append({ type: 'step/start', time: T, data: { turn: 1, step: 1 } });
  session.append(user('u1', 'my secret'));
  session.append(reply('a1', 'noted'));
  session.append({ type: 'step/end', time: T, data: { turn: 1, step: 1 } });
  session.append({ type: 'turn/end', time: T, data: { turn: 1, reason: { kind: 'completed' } } });
  return session;
}

describe('hiding a message', () => {
  it('replaces the node by an empty message: derivation, the transcript and a second hide all leave it out; the log keeps it', () => {
    const session = conversation();
    const events = hideEvents([2], session.surfaceNodes, (seq) => session.events[seq], session.turns.lastTurn, T);
    expect(events).toHaveLength(1);
    for (const event of events) session.append(event);
    expect(session.deriveMessages().map((m) => m.id)).toEqual(['a1']);
    expect(hiddenSeqs(session.events)).toEqual(new Set([2]));
    expect(loggedTranscript(session.events).messages.map((m) => m.message)).toEqual([
      { role: 'assistant', text: 'noted', toolCalls: [] },
    ]);
    expect(JSON.stringify(session.events[2]!.data)).toContain('my secret');
    // Off the surface already: nothing more to log.
    expect(hideEvents([2], session.surfaceNodes, (seq) => session.events[seq], 1, T)).toEqual([]);
  });

  it('leaves a tool call and a tool result alone, and the session refuses a hide with content', () => {
    const session = Session.create(testHeader('hide-calls'));
    session.append({ type: 'turn/start', time: T, data: { turn: 1 } });
    session.append({ type: 'step/start', time: T, data: { turn: 1, step: 1 } });
    session.append(user('u1', 'dump it'));
    session.append(reply('a1', 'dumping', true));
    expect(unhideableReason(session.events[3]!)).toMatch(/tool calls/);
    expect(hideEvents([3], session.surfaceNodes, (seq) => session.events[seq], 1, T)).toEqual([]);
    const [hide] = hideEvents([2], session.surfaceNodes, (seq) => session.events[seq], 1, T);
    const withContent = structuredClone(hide!) as NewEvent<'assistant/message'>;
    withContent.data.message.content = [{ type: 'text', text: 'sneaky' }];
    expect(() => session.append(withContent)).toThrow(/hides a node has no content/);
  });
});

describe('turn hints', () => {
  it('checks hints as the workflow and the engine do', () => {
    expect(turnHintsProblem({ temperature: 1, stop: ['x'], ignored: ['user'] })).toBeUndefined();
    expect(turnHintsProblem({ temperature: 3 })).toMatch(/temperature/);
    expect(turnHintsProblem({ maxTokens: 0 })).toMatch(/maxTokens/);
    expect(turnHintsProblem({ bogus: 1 })).toMatch(/unknown field "bogus"/);
    expect(turnHintsProblem({ responseFormat: { type: 'json_schema', name: 'x' } })).toMatch(/schema/);
  });

  it('sends sampling, stop, seed and a response format as the wire spells them, and the lower token cap', () => {
    const model = lookupModel(DEFAULT_MODEL_CATALOGUE, 'gpt-4o');
    const body = buildChatRequest({
      model,
      messages: [],
      header: {
        provider: 'openai',
        model: 'gpt-4o',
        maxTokens: 1000,
        hints: {
          temperature: 0.1,
          topP: 0.5,
          maxTokens: 2000,
          seed: 3,
          stop: ['END'],
          frequencyPenalty: 1,
          responseFormat: { type: 'json_schema', name: 'r', schema: { type: 'object' }, strict: true },
          ignored: ['user'],
        },
      },
    });
    expect(body).toMatchObject({
      max_tokens: 1000,
      temperature: 0.1,
      top_p: 0.5,
      seed: 3,
      stop: ['END'],
      frequency_penalty: 1,
      response_format: { type: 'json_schema', json_schema: { name: 'r', schema: { type: 'object' }, strict: true } },
    });
    expect(body).not.toHaveProperty('user');
  });

  it('refuses a response format the model cannot honour before any call', () => {
    const catalogue = DEFAULT_MODEL_CATALOGUE;
    const deps = {
      model: { provider: 'deepseek', model: (name: string) => lookupModel(catalogue, name) } as never,
      tools: { schemas: () => [], get: () => undefined } as never,
      agent: { model: 'deepseek-flash', tools: [] },
    };
    const schema = { type: 'json_schema' as const, name: 'r', schema: {} };
    expect(() => requestHeaderFor(deps, undefined, undefined, {}, { responseFormat: schema })).toThrow(
      /cannot honour a json_schema response format/,
    );
    expect(requestHeaderFor(deps, undefined, undefined, {}, { responseFormat: { type: 'json_object' } }).hints).toEqual(
      {
        responseFormat: { type: 'json_object' },
      },
    );
  });
});
