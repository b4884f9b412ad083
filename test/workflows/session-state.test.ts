/**
 * The workflow run's bookkeeping (src/workflows/session-state.ts), through its intent-named
 * methods: what a cancel does in each phase, how turn numbers are given and given back, how
 * answers to waiting calls are taken, expired and logged, and what continue-as-new carries.
 * The run itself is tested against a real Temporal server (test/integration) and by replaying
 * recorded histories (replay.test.ts).
 */
import { describe, expect, it } from 'vitest';
import type { ToolCallRef } from '../../src/engine/types.js';
import { DEFAULT_TUNABLES } from '../../src/workflows/api.js';
import { SessionState } from '../../src/workflows/session-state.js';

function openedState(): SessionState {
  const state = new SessionState('s-1', 'run-1', DEFAULT_TUNABLES, {
    headSeq: 4,
    turn: 1,
    queue: [{ id: 'm-2', text: 'second' }],
    recent: [],
  });
  state.opened({ headSeq: 7, lastTurn: 2, recent: [] });
  return state;
}

const call = (callId: string, extra: Partial<ToolCallRef> = {}): ToolCallRef => ({
  callId,
  name: 'calculator',
  callSeq: 10,
  ...extra,
});

describe('SessionState', () => {
  it('takes the log head and the later turn number when the run opens, and carries them with the queue', () => {
    const state = openedState();
    expect(state.phase).toBe('idle');
    expect(state.headSeq).toBe(7);
    expect(state.turn).toBe(2);
    expect(state.hasQueued).toBe(true);
    expect(state.carry()).toEqual({ headSeq: 7, turn: 2, queue: [{ id: 'm-2', text: 'second' }], recent: [] });
  });

  it('cancels only a running turn: a waiting step sees the request, a model step or tool round also has its activities cancelled', () => {
    const state = openedState();
    expect(state.requestCancel()).toBe(false);
    expect(state.cancelRequested).toBe(false);

    expect(state.beginTurn()).toBe(3);
    state.enter('waiting');
    expect(state.requestCancel()).toBe(false);
    expect(state.cancelRequested).toBe(true);

    state.enter('model');
    expect(state.requestCancel()).toBe(true);
    state.enter('tools');
    expect(state.requestCancel()).toBe(true);

    // The next turn starts uncancelled.
    state.enter('idle');
    expect(state.beginTurn()).toBe(4);
    expect(state.cancelRequested).toBe(false);
    expect(state.turnsThisRun).toBe(2);
  });

  it('gives back the number of a turn the log never took', () => {
    const state = openedState();
    expect(state.beginTurn()).toBe(3);
    state.giveTurnBack();
    expect(state.turn).toBe(2);
    expect(state.beginTurn()).toBe(3);
  });

  it('awaits only gated, unanswered calls; the first approval counts; overdue calls expire; a logged answer stops the wait', () => {
    const state = openedState();
    state.beginTurn();
    state.enter('waiting');
    state.awaitCalls([
      call('c-approve', { gate: 'approval', expiresAt: 1_000 }),
      call('c-late', { gate: 'approval', expiresAt: 5_000 }),
      call('c-free'),
      call('c-done', { gate: 'approval', answered: 'approve' }),
    ]);
    expect(state.awaits('c-approve')).toBe(true);
    expect(state.awaits('c-late')).toBe(true);
    expect(state.awaits('c-free')).toBe(false);
    expect(state.awaits('c-done')).toBe(false);

    state.offerApproval({ callId: 'c-approve', decision: 'approve' });
    state.offerApproval({ callId: 'c-approve', decision: 'deny' });
    expect(state.answersToLog()).toEqual([{ kind: 'approval', callId: 'c-approve', decision: 'approve' }]);
    expect(state.unansweredCalls().map((c) => c.callId)).toEqual(['c-late']);

    state.expire(state.unansweredCalls(), 4_999);
    expect(state.answersToLog()).toHaveLength(1);
    state.expire(state.unansweredCalls(), 5_000);
    expect(state.answersToLog().map((a) => [a.callId, a.kind === 'approval' ? a.decision : a.kind])).toEqual([
      ['c-approve', 'approve'],
      ['c-late', 'expire'],
    ]);

    for (const answer of state.answersToLog()) state.answered(answer);
    expect(state.awaitsAnswers).toBe(false);
    expect(state.hasAnswers).toBe(false);
    expect(state.decisionOf('c-approve')).toEqual({ callId: 'c-approve', decision: 'approve' });
    expect(state.decisionOf('c-late')).toEqual({ callId: 'c-late', decision: 'expire', reason: 'expired' });
  });

  it('lets a compaction or a note hold the log between turns, one at a time, and counts waiting requests', () => {
    const state = openedState();
    expect(state.mayWorkBetweenTurns(false)).toBe(true);
    const served = state.compactRequested();
    expect(state.servesRequests).toBe(true);
    expect(state.beginManualCompaction()).toBe(1);
    expect(state.busyBetweenTurns).toBe(true);
    expect(state.mayWorkBetweenTurns(true)).toBe(false);
    state.endManualCompaction();
    served();
    expect(state.servesRequests).toBe(false);
    expect(state.beginManualCompaction()).toBe(2);
    state.endManualCompaction();

    state.enter('closed');
    expect(state.mayWorkBetweenTurns(false)).toBe(false);
    expect(state.mayWorkBetweenTurns(true)).toBe(true);
  });

  it('refuses new messages once closing or stopped, with the stop reason', () => {
    const state = openedState();
    state.requestClose();
    expect(() => state.validate({ id: 'm-3', text: 'hi' })).toThrow(/closing/);
    const stopped = openedState();
    stopped.stop({ code: 'LOG_AHEAD', message: 'another writer' });
    expect(stopped.stopped).toBe(true);
    expect(() => stopped.validate({ id: 'm-3', text: 'hi' })).toThrow(/another writer/);
    expect(stopped.status().lastError).toBe('LOG_AHEAD: another writer');
  });
});
