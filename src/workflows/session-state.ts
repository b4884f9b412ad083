/**
 * The session workflow's run state (DESIGN §5): the head seq and turn, the phase, the close and
 * cancel requests, the step the log shows waiting, and why the session stopped. Nothing of the
 * conversation: that lives in the log. Deterministic, no I/O. The other concerns keep their own
 * state beside it: the queued messages (message-queue.ts), the calls waiting for answers
 * (call-answers.ts), pauses (pauses.ts), and the work between turns (between-turns.ts).
 */
import { ApplicationFailure } from '@temporalio/workflow';
import type { PressureRef, WaitingStep } from '../engine/types.js';
import type { SessionPause, SessionPhase, SessionStatus } from './api.js';
import type { Fatal } from './failures.js';

export class SessionState {
  private head: number;
  private lastTurn: number;
  private currentPhase: SessionPhase = 'starting';
  private closeRequested = false;
  private cancelled = false;
  private turns = 0;
  private lastError: string | undefined;
  private pressure: PressureRef | undefined;
  private fatal: Fatal | undefined;
  /** A step the log shows waiting for answers when this run opened: the run continues that turn first. */
  private resume: WaitingStep | undefined;

  constructor(
    readonly sessionId: string,
    readonly runId: string,
    carried: { headSeq: number; turn: number } | undefined,
  ) {
    this.head = carried?.headSeq ?? 0;
    this.lastTurn = carried?.turn ?? 0;
  }

  /** The seq of the log's last event, as this run last saw it. */
  get headSeq(): number {
    return this.head;
  }

  /** The number of the current (or last) turn. */
  get turn(): number {
    return this.lastTurn;
  }

  get phase(): SessionPhase {
    return this.currentPhase;
  }

  /** Whether a close was asked for: the run ends after the current turn and takes no more messages. */
  get closing(): boolean {
    return this.closeRequested;
  }

  /** Whether the caller cancelled the current turn. */
  get cancelRequested(): boolean {
    return this.cancelled;
  }

  /** Whether the session stopped: its log cannot be written safely by this run. */
  get stopped(): boolean {
    return this.fatal !== undefined;
  }

  /** Turns this run began (continue-as-new counts them). */
  get turnsThisRun(): number {
    return this.turns;
  }

  /** The log now ends at `headSeq` (an activity appended or read it). */
  atHead(headSeq: number): void {
    this.head = headSeq;
  }

  /** A note logged turns of caller-supplied history: the next turn follows the log's last one. */
  afterNote(logged: { headSeq: number; lastTurn?: number }): void {
    this.head = logged.headSeq;
    // Results of activities from before notes logged turns carry no lastTurn.
    if (logged.lastTurn !== undefined) this.lastTurn = Math.max(this.lastTurn, logged.lastTurn);
  }

  enter(phase: SessionPhase): void {
    this.currentPhase = phase;
  }

  /** Reports a problem in status (`lastError`); `undefined` clears it. */
  report(error: string | undefined): void {
    this.lastError = error;
  }

  /** Keeps the context pressure the last model step measured, for status. */
  observePressure(pressure: PressureRef | undefined): void {
    if (pressure) this.pressure = pressure;
  }

  requestClose(): void {
    this.closeRequested = true;
  }

  /**
   * Cancels the current turn: a turn waiting for answers sees the request; a running model step
   * or tool round must also have its activities cancelled (returns true). Idle: nothing to cancel.
   */
  requestCancel(): boolean {
    if (this.currentPhase === 'waiting' || this.currentPhase === 'paused') {
      this.cancelled = true;
      return false;
    }
    if (this.currentPhase === 'model' || this.currentPhase === 'tools') {
      this.cancelled = true;
      return true;
    }
    return false;
  }

  /** Begins the next turn; returns its number. */
  beginTurn(): number {
    this.lastTurn += 1;
    this.turns += 1;
    this.cancelled = false;
    this.currentPhase = 'turn';
    return this.lastTurn;
  }

  /** Gives the number of a turn the log never took back: the next turn takes it again. */
  giveTurnBack(): void {
    this.lastTurn -= 1;
  }

  /** Takes the step the log showed waiting when the run opened, and makes its turn current. */
  takeResume(): WaitingStep | undefined {
    const resumed = this.resume;
    if (!resumed || this.fatal) return undefined;
    this.resume = undefined;
    this.lastTurn = resumed.turn;
    this.currentPhase = 'turn';
    return resumed;
  }

  /** Takes in what the run's opening read from the log: its head, last turn and waiting step (the run is idle then). */
  opened(opened: { headSeq: number; lastTurn: number; waiting?: WaitingStep }): void {
    this.head = opened.headSeq;
    this.lastTurn = Math.max(this.lastTurn, opened.lastTurn);
    this.resume = opened.waiting;
    this.currentPhase = 'idle';
  }

  /**
   * Whether the run knows every call that waits for an answer: not before it has read its log,
   * nor while a model step runs (the step logs its approval requests before its activity
   * returns, so a caller following the log can answer a call this run has not heard of yet).
   */
  get knowsWaitingCalls(): boolean {
    return this.currentPhase !== 'starting' && this.currentPhase !== 'model';
  }

  /** Stops the session: waiting handlers are answered with the failure, new ones refused. */
  stop(fatal: Fatal): void {
    this.fatal = fatal;
    this.lastError = `${fatal.code}: ${fatal.message}`;
  }

  /** Throws the stopping failure to a handler waiting on this run, if the session stopped. */
  throwIfStopped(): void {
    if (this.fatal) throw ApplicationFailure.nonRetryable(this.fatal.message, this.fatal.code);
  }

  /** Refuses a message once the session stopped or is closing. */
  throwIfClosed(): void {
    this.throwIfStopped();
    if (this.closeRequested)
      throw ApplicationFailure.nonRetryable('session is closing and accepts no more messages', 'SESSION_CLOSED');
  }

  /** The run's status, with the messages waiting for a turn and the pause in force. */
  status(pending: number, paused: SessionPause | undefined): SessionStatus {
    const p = this.pressure;
    return {
      sessionId: this.sessionId,
      headSeq: this.head,
      turn: this.lastTurn,
      phase: this.currentPhase,
      pending,
      tokens: p?.tokens ?? null,
      contextWindow: p?.contextWindow ?? null,
      pressure: p ? Math.round((p.tokens / p.budget) * 1000) / 1000 : null,
      runId: this.runId,
      ...(this.lastError !== undefined ? { lastError: this.lastError } : {}),
      ...(paused ? { paused } : {}),
    };
  }
}
