/**
 * Spend caps read from the log (src/session/budget.ts): the session's BudgetFold counts tokens,
 * cost, model calls, tool calls and wall time per turn and in total as events are appended;
 * a breach names the first cap reached before a model call or a tool round (tool calls count
 * once asked for, so only more than the limit breaches); a repeated call is a runaway loop;
 * the log's validator refuses a malformed budget; the turns view shows a paused turn.
 */
import { describe, expect, it } from 'vitest';
import {
  DEFAULT_REPEATED_CALLS,
  Session,
  budgetProblem,
  foldTurns,
  isSessionlogError,
  type AssistantMessage,
  type NewEvent,
} from '../../src/session/index.js';
import { testHeader } from '../support/log-gen.js';

const T = 1_700_000_000_000;
const reply = (id: string, calls: Array<{ id: string; name: string; arguments: string }> = []): AssistantMessage => ({
  id,
  role: 'assistant',
  content: [{ type: 'text', text: 'ok' }, ...calls.map((c) => ({ type: 'tool-call' as const, ...c }))],
  source: { kind: 'model', provider: 'fake', model: 'fake' },
});

function session(budget: unknown): Session {
  const s = Session.create(testHeader(`budget-${Math.random().toString(36).slice(2)}`));
  s.append({ type: 'session/budget', time: T, data: { budget: budget as never } });
  return s;
}

const turn = (n: number, time: number): NewEvent[] => [
  { type: 'turn/start', time, data: { turn: n } },
  { type: 'step/start', time, data: { turn: n, step: 1 } },
  {
    type: 'user/message',
    time,
    data: { id: `u${n}`, role: 'user', content: [{ type: 'text', text: 'hi' }], source: { kind: 'user' } },
    surfaceOp: 'append',
  },
];

describe('BudgetFold', () => {
  it('counts tokens, cost and calls per turn and in total; a breach before a model call names the cap', () => {
    const s = session({ turn: { modelCalls: 5 }, total: { tokens: 1_000, costUsd: 0.01 } });
    for (const e of turn(1, T + 10)) s.append(e);
    expect(s.budget.breach(T + 11, 'model')).toBeUndefined();
    s.append({
      type: 'assistant/message',
      time: T + 20,
      data: {
        turn: 1,
        step: 1,
        message: reply('a1'),
        usage: { inputTokens: 300, cacheReadTokens: 100, outputTokens: 50 },
        cost: 0.004,
      },
      surfaceOp: 'append',
    });
    expect(s.budget.used(T + 30)).toEqual({
      turn: { tokens: 450, costUsd: 0.004, modelCalls: 1, toolCalls: 0, wallMs: 20 },
      total: { tokens: 450, costUsd: 0.004, modelCalls: 1, toolCalls: 0, wallMs: 20 },
    });
    expect(s.budget.breach(T + 30, 'model')).toBeUndefined();
    s.append({
      type: 'assistant/message',
      time: T + 40,
      data: {
        turn: 1,
        step: 1,
        message: reply('a2'),
        usage: { inputTokens: 500, outputTokens: 60 },
        cost: 0.007,
      },
      surfaceOp: 'append',
    });
    // 1,010 tokens billed: the total cap (1,000) is reached before the next call.
    expect(s.budget.breach(T + 50, 'model')).toEqual({ cap: 'tokens', scope: 'total', used: 1_010, limit: 1_000 });
    // Caps of model calls are not checked before a tool round.
    expect(s.budget.breach(T + 50, 'tools')).toBeUndefined();
  });

  it('counts a tool call once asked for, breaches past the limit, and catches a repeated call', () => {
    const s = session({ turn: { toolCalls: 2, wallMs: 1_000 }, repeatedCalls: 3 });
    for (const e of turn(1, T)) s.append(e);
    const call = (id: string, args: string): NewEvent => ({
      type: 'tool/call',
      time: T + 1,
      data: { turn: 1, step: 1, callId: id, name: 'calculator', arguments: args },
    });
    s.append(call('c1', '{"expression":"1+1"}'));
    s.append(call('c2', '{"expression":"1+1"}'));
    expect(s.budget.breach(T + 2, 'tools')).toBeUndefined();
    s.append(call('c3', '{"expression":"2+2"}'));
    expect(s.budget.breach(T + 3, 'tools')).toEqual({ cap: 'toolCalls', scope: 'turn', used: 3, limit: 2 });
    // Wall time: the turn's own clock.
    expect(s.budget.breach(T + 1_000, 'model')).toEqual({ cap: 'wallMs', scope: 'turn', used: 1_000, limit: 1_000 });

    const loop = session({ repeatedCalls: 3 });
    for (const e of turn(1, T)) loop.append(e);
    for (const id of ['c1', 'c2', 'c3'])
      loop.append({
        type: 'tool/call',
        time: T + 1,
        data: { turn: 1, step: 1, callId: id, name: 'search', arguments: '{"q":"same"}' },
      });
    expect(loop.budget.breach(T + 2, 'tools')).toEqual({
      cap: 'repeatedCalls',
      scope: 'turn',
      used: 3,
      limit: 3,
      tool: 'search',
    });
    // Another turn starts its counts afresh; `null` removes the budget.
    loop.append({ type: 'turn/end', time: T + 5, data: { turn: 1, reason: { kind: 'completed' } } });
    for (const e of turn(2, T + 10)) loop.append(e);
    expect(loop.budget.used(T + 12).turn.toolCalls).toBe(0);
    expect(loop.budget.used(T + 12).total).toMatchObject({ toolCalls: 3, wallMs: 7 });
    loop.append({ type: 'session/budget', time: T + 13, data: { budget: null } });
    expect(loop.budget.budget).toBeNull();
  });

  it(`catches a repeated call in a session with no budget, or whose budget was removed, at the default of ${DEFAULT_REPEATED_CALLS}`, () => {
    const repeat = (s: Session, turnNo: number, times: number) => {
      for (let i = 0; i < times; i++)
        s.append({
          type: 'tool/call',
          time: T + 1,
          data: { turn: turnNo, step: i + 1, callId: `t${turnNo}-c${i}`, name: 'search', arguments: '{"q":"same"}' },
        });
    };
    const guard = {
      cap: 'repeatedCalls',
      scope: 'turn',
      used: DEFAULT_REPEATED_CALLS,
      limit: DEFAULT_REPEATED_CALLS,
      tool: 'search',
    };

    const none = Session.create(testHeader(`budget-none-${Math.random().toString(36).slice(2)}`));
    for (const e of turn(1, T)) none.append(e);
    repeat(none, 1, DEFAULT_REPEATED_CALLS - 1);
    expect(none.budget.breach(T + 2, 'tools')).toBeUndefined();
    repeat(none, 1, 1);
    expect(none.budget.budget).toBeNull();
    expect(none.budget.breach(T + 2, 'tools')).toEqual(guard);
    // Only before a tool round: the model may still be asked (and a pause waits for a budget to raise it).
    expect(none.budget.breach(T + 2, 'model')).toBeUndefined();

    const removed = session({ total: { tokens: 1_000_000 } });
    removed.append({ type: 'session/budget', time: T, data: { budget: null } });
    for (const e of turn(1, T)) removed.append(e);
    repeat(removed, 1, DEFAULT_REPEATED_CALLS);
    expect(removed.budget.breach(T + 2, 'tools')).toEqual(guard);
  });

  it('refuses a malformed budget, at the client check and in the log', () => {
    expect(budgetProblem({ total: { tokens: -1 } })).toMatch(/budget.total.tokens/);
    expect(budgetProblem({ turn: { dollars: 1 } })).toMatch(/unknown limit budget.turn.dollars/);
    expect(budgetProblem({ turn: { modelCalls: 1.5 } })).toMatch(/whole number/);
    expect(budgetProblem({ repeatedCalls: 1 })).toMatch(/repeatedCalls/);
    expect(budgetProblem({ waitMs: -5 })).toMatch(/waitMs/);
    expect(budgetProblem({ spend: 1 })).toMatch(/unknown budget field/);
    expect(budgetProblem([])).toMatch(/object/);
    expect(budgetProblem({ turn: { costUsd: 0.25 }, waitMs: 0 })).toBeUndefined();
    const s = Session.create(testHeader('budget-refused'));
    let refused: unknown;
    try {
      s.append({ type: 'session/budget', time: T, data: { budget: { total: { tokens: -5 } } as never } });
    } catch (error) {
      refused = error;
    }
    expect(isSessionlogError(refused)).toBe(true);
    expect(s.events).toHaveLength(0);
  });

  it('shows a turn whose last event is a breach as paused in the turns view', () => {
    const s = session({ turn: { modelCalls: 0 } });
    for (const e of turn(1, T)) s.append(e);
    s.append({
      type: 'budget/breach',
      time: T + 1,
      data: { turn: 1, step: 1, before: 'model', cap: 'modelCalls', scope: 'turn', used: 0, limit: 0 },
    });
    const view = foldTurns([...s.events]);
    expect(view.activity.phase).toBe('paused');
    expect(view.activity.pausedOn).toMatchObject({ cap: 'modelCalls', scope: 'turn', before: 'model', seq: 4 });
    s.append({ type: 'session/budget', time: T + 2, data: { budget: null } });
    expect(foldTurns([...s.events]).activity.phase).toBe('running');
  });
});
