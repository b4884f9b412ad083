/**
 * The workflow run's bookkeeping, through the intent-named methods of its parts: the run state
 * (src/workflows/session-state.ts: what a cancel does in each phase, how turn numbers are given
 * and given back), the calls' answers (call-answers.ts: how answers to waiting calls are taken,
 * expired and logged), the work between turns (between-turns.ts), and the queue
 * (message-queue.ts: what continue-as-new carries, which messages are refused). The run itself
 * is tested against a real Temporal server (test/integration) and by replaying recorded
 * histories (replay.test.ts).
 */
import { describe, expect, it } from 'vitest';
import type { ToolCallRef } from '../../src/engine/types.js';
import { DEFAULT_TUNABLES, type SessionWorkflowInput } from '../../src/workflows/api.js';
import { BetweenTurns } from '../../src/workflows/between-turns.js';
import { CallAnswers } from '../../src/workflows/call-answers.js';
import { MessageQueue } from '../../src/workflows/message-queue.js';
import { Pauses } from '../../src/workflows/pauses.js';
import { RunningWork, activityProxies } from '../../src/workflows/run-context.js';
import { SessionState } from '../../src/workflows/session-state.js';

const carry: NonNullable<SessionWorkflowInput['carry']> = {
  headSeq: 4,
  turn: 1,
  queue: [{ id: 'm-2', text: 'second' }],
  recent: [],
};

/** A run's parts after its opening read a log at head 7 with 2 turns (no activity is called). */
function openedRun() {
  const state = new SessionState('s-1', 'run-1', carry);
  const messages = new MessageQueue(state, DEFAULT_TUNABLES, carry);
  const calls = new CallAnswers(state, DEFAULT_TUNABLES);
  const ctx = {
    input: { sessionId: 's-1' },
    tunables: DEFAULT_TUNABLES,
    state,
    act: activityProxies(DEFAULT_TUNABLES),
    base: { sessionId: 's-1', runId: 'run-1' },
    work: new RunningWork(),
  };
  const betweenTurns = new BetweenTurns(ctx, new Pauses(state, DEFAULT_TUNABLES), (m) => messages.validate(m));
  const opened = { headSeq: 7, lastTurn: 2, recent: [] };
  calls.opened(undefined);
  messages.opened(opened.recent, undefined);
  state.opened(opened);
  return { state, messages, calls, betweenTurns };
}

const call = (callId: string, extra: Partial<ToolCallRef> = {}): ToolCallRef => ({
  callId,
  name: 'calculator',
  callSeq: 10,
  ...extra,
});

describe('the session run state', () => {
  it('takes the log head and the later turn number when the run opens, and carries them with the queue', () => {
    const { state, messages } = openedRun();
    expect(state.phase).toBe('idle');
    expect(state.headSeq).toBe(7);
    expect(state.turn).toBe(2);
    expect(messages.hasQueued).toBe(true);
    expect({ headSeq: state.headSeq, turn: state.turn, ...messages.carry() }).toEqual({
      headSeq: 7,
      turn: 2,
      queue: [{ id: 'm-2', text: 'second' }],
      recent: [],
    });
  });

  it('cancels only a running turn: a waiting step sees the request, a model step or tool round also has its activities cancelled', () => {
    const { state } = openedRun();
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
    const { state } = openedRun();
    expect(state.beginTurn()).toBe(3);
    state.giveTurnBack();
    expect(state.turn).toBe(2);
    expect(state.beginTurn()).toBe(3);
  });

  it('awaits only gated, unanswered calls; the first approval counts; overdue calls expire; a logged answer stops the wait', () => {
    const { state, calls } = openedRun();
    state.beginTurn();
    state.enter('waiting');
    calls.awaitCalls([
      call('c-approve', { gate: 'approval', expiresAt: 1_000 }),
      call('c-late', { gate: 'approval', expiresAt: 5_000 }),
      call('c-free'),
      call('c-done', { gate: 'approval', answered: 'approve' }),
    ]);
    expect(calls.awaits('c-approve')).toBe(true);
    expect(calls.awaits('c-late')).toBe(true);
    expect(calls.awaits('c-free')).toBe(false);
    expect(calls.awaits('c-done')).toBe(false);

    calls.offerApproval({ callId: 'c-approve', decision: 'approve' });
    calls.offerApproval({ callId: 'c-approve', decision: 'deny' });
    expect(calls.answersToLog()).toEqual([{ kind: 'approval', callId: 'c-approve', decision: 'approve' }]);
    expect(calls.unansweredCalls().map((c) => c.callId)).toEqual(['c-late']);

    calls.expire(calls.unansweredCalls(), 4_999);
    expect(calls.answersToLog()).toHaveLength(1);
    calls.expire(calls.unansweredCalls(), 5_000);
    expect(calls.answersToLog().map((a) => [a.callId, a.kind === 'approval' ? a.decision : a.kind])).toEqual([
      ['c-approve', 'approve'],
      ['c-late', 'expire'],
    ]);

    for (const answer of calls.answersToLog()) calls.answered(answer);
    expect(calls.awaitsAnswers).toBe(false);
    expect(calls.hasAnswers).toBe(false);
    expect(calls.decisionOf('c-approve')).toEqual({ callId: 'c-approve', decision: 'approve' });
    expect(calls.decisionOf('c-late')).toEqual({ callId: 'c-late', decision: 'expire', reason: 'expired' });
  });

  it('lets a compaction or a note hold the log between turns, one at a time, and counts waiting requests', () => {
    const { state, betweenTurns } = openedRun();
    expect(betweenTurns.mayWorkBetweenTurns(false)).toBe(true);
    const served = betweenTurns.compactRequested();
    expect(betweenTurns.servesRequests).toBe(true);
    expect(betweenTurns.beginManualCompaction()).toBe(1);
    expect(betweenTurns.busy).toBe(true);
    expect(betweenTurns.mayWorkBetweenTurns(true)).toBe(false);
    betweenTurns.endManualCompaction();
    served();
    expect(betweenTurns.servesRequests).toBe(false);
    expect(betweenTurns.beginManualCompaction()).toBe(2);
    betweenTurns.endManualCompaction();

    state.enter('closed');
    expect(betweenTurns.mayWorkBetweenTurns(false)).toBe(false);
    expect(betweenTurns.mayWorkBetweenTurns(true)).toBe(true);
  });

  it('holds the next turn while a budget change answered before it was logged waits, and lets it be logged in a budget pause', () => {
    const { state, betweenTurns } = openedRun();
    state.beginTurn();
    state.enter('model');
    expect(betweenTurns.mayLogBudget()).toBe(false);
    const logged = betweenTurns.deferred();
    expect(betweenTurns.busy).toBe(true);
    expect(betweenTurns.hasDeferredWork).toBe(true);
    state.enter('paused');
    expect(betweenTurns.mayLogBudget()).toBe(true);
    logged();
    expect(betweenTurns.busy).toBe(false);
    expect(betweenTurns.hasDeferredWork).toBe(false);
  });

  it('refuses new messages once closing or stopped, with the stop reason', () => {
    const { state, messages } = openedRun();
    state.requestClose();
    expect(() => messages.validate({ id: 'm-3', text: 'hi' })).toThrow(/closing/);
    const stopped = openedRun();
    stopped.state.stop({ code: 'LOG_AHEAD', message: 'another writer' });
    expect(stopped.state.stopped).toBe(true);
    expect(() => stopped.messages.validate({ id: 'm-3', text: 'hi' })).toThrow(/another writer/);
    expect(stopped.state.status(stopped.messages.pending, undefined).lastError).toBe('LOG_AHEAD: another writer');
  });
});
