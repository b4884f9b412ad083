/**
 * The session workflow's orchestration state (DESIGN §5): the queue of message ids and bounded
 * texts, the results of recent messages, the head seq and turn, the phase and flags. Nothing
 * of the conversation: that lives in the log. Deterministic, no I/O; the workflow function
 * wires handlers to it.
 */
import { ApplicationFailure } from '@temporalio/workflow';
import type { PressureRef, RecentMessage } from '../engine/types.js';
import { utf8Length, type SendResult, type SessionPhase, type SessionStatus, type SessionTunables, type SessionWorkflowInput, type UserInput } from './api.js';

const MAX_RECENT_IDS = 256;

/** A failure that stops the session: its log cannot be written safely by this run. */
export type Fatal = { code: string; message: string };

export class SessionState {
  readonly queue: UserInput[];
  /** Recently seen message ids and, once answered, their results (bounded, carried across runs). */
  private readonly results = new Map<string, SendResult | null>();
  /** Message ids that `send` handlers wait on, with how many handlers wait on each. */
  private readonly waitingFor = new Map<string, number>();
  headSeq: number;
  turn: number;
  phase: SessionPhase = 'starting';
  closing = false;
  cancelRequested = false;
  compacting = false;
  compactRequests = 0;
  manualCompactions = 0;
  turnsThisRun = 0;
  lastError: string | undefined;
  pressure: PressureRef | undefined;
  fatal: Fatal | undefined;

  constructor(
    readonly sessionId: string,
    readonly runId: string,
    readonly tunables: SessionTunables,
    carry: SessionWorkflowInput['carry'],
  ) {
    this.queue = [...(carry?.queue ?? [])];
    for (const r of carry?.recent ?? []) this.results.set(r.id, r.result);
    this.headSeq = carry?.headSeq ?? 0;
    this.turn = carry?.turn ?? 0;
  }

  /** Takes in what the run's opening read from the log: its head, last turn and answered messages. */
  opened(opened: { headSeq: number; lastTurn: number; recent: RecentMessage[] }): void {
    this.headSeq = opened.headSeq;
    this.turn = Math.max(this.turn, opened.lastTurn);
    for (const r of opened.recent) {
      if (!this.results.get(r.id)) this.remember(r.id, { turn: r.turn, replySeq: r.replySeq, outcome: r.outcome });
    }
    // A message carried over or re-sent that the log already holds was answered before.
    for (let i = this.queue.length - 1; i >= 0; i--) if (this.results.has(this.queue[i]!.id)) this.queue.splice(i, 1);
    this.phase = 'idle';
  }

  /** Refuses a message (synchronously, as an update validator must). */
  validate(message: UserInput): void {
    if (typeof message?.id !== 'string' || message.id.length === 0 || message.id.length > 128) {
      throw ApplicationFailure.nonRetryable('message id must be a string of 1-128 characters', 'INVALID_MESSAGE');
    }
    if (typeof message.text !== 'string' || message.text.trim().length === 0) {
      throw ApplicationFailure.nonRetryable('message text must not be empty', 'EMPTY_MESSAGE');
    }
    const bytes = utf8Length(message.text);
    if (bytes > this.tunables.maxMessageBytes) {
      throw ApplicationFailure.nonRetryable(`message is ${bytes} bytes; the limit is ${this.tunables.maxMessageBytes}`, 'MESSAGE_TOO_LARGE');
    }
    this.throwIfStopped();
    if (this.closing) throw ApplicationFailure.nonRetryable('session is closing and accepts no more messages', 'SESSION_CLOSED');
  }

  /** Queues a message unless its id is already queued or answered. */
  enqueue(message: UserInput): void {
    if (this.results.has(message.id) || this.queue.some((m) => m.id === message.id)) return;
    this.queue.push({ id: message.id, text: message.text });
  }

  /** Records a message's result (null: taken into a turn, not answered yet). */
  remember(id: string, result: SendResult | null): void {
    this.results.delete(id);
    this.results.set(id, result);
    while (this.results.size > MAX_RECENT_IDS) this.results.delete(this.results.keys().next().value as string);
  }

  resultOf(id: string): SendResult | null | undefined {
    return this.results.get(id);
  }

  /** Marks a `send` handler as waiting on `id`; returns the function that unmarks it. */
  wait(id: string): () => void {
    this.waitingFor.set(id, (this.waitingFor.get(id) ?? 0) + 1);
    return () => {
      const left = (this.waitingFor.get(id) ?? 1) - 1;
      if (left > 0) this.waitingFor.set(id, left);
      else this.waitingFor.delete(id);
    };
  }

  get waiting(): number {
    let n = 0;
    for (const count of this.waitingFor.values()) n += count;
    return n;
  }

  /** Whether a `send` waits for a message this run has not answered. */
  unanswered(): boolean {
    return [...this.waitingFor.keys()].some((id) => this.results.get(id) == null);
  }

  /** Stops the session: waiting sends are answered with the failure, new ones refused. */
  stop(fatal: Fatal): void {
    this.fatal = fatal;
    this.lastError = `${fatal.code}: ${fatal.message}`;
  }

  /** Throws the stopping failure to a handler waiting on this run, if the session stopped. */
  throwIfStopped(): void {
    if (this.fatal) throw ApplicationFailure.nonRetryable(this.fatal.message, this.fatal.code);
  }

  /** What continue-as-new carries: no conversation, only ids, counters and queued texts. */
  carry(): NonNullable<SessionWorkflowInput['carry']> {
    return {
      headSeq: this.headSeq,
      turn: this.turn,
      queue: [...this.queue],
      recent: [...this.results].filter((e): e is [string, SendResult] => e[1] !== null).map(([id, result]) => ({ id, result })),
    };
  }

  status(): SessionStatus {
    const p = this.pressure;
    return {
      sessionId: this.sessionId,
      headSeq: this.headSeq,
      turn: this.turn,
      phase: this.phase,
      pending: this.queue.length,
      tokens: p?.tokens ?? null,
      contextWindow: p?.contextWindow ?? null,
      pressure: p ? Math.round((p.tokens / p.budget) * 1000) / 1000 : null,
      runId: this.runId,
      ...(this.lastError !== undefined ? { lastError: this.lastError } : {}),
    };
  }
}
