/**
 * The user messages of a session's run: queued until a turn takes them, and their results once a
 * turn answered them (bounded, carried across runs), for the `send`s that wait on them. Handles
 * the `userMessage` signal and the `send` update.
 */
import { ApplicationFailure, condition } from '@temporalio/workflow';
import type { RecentMessage, WaitingStep } from '../engine/types.js';
import type { SendResult, SessionTunables, SessionWorkflowInput, UserInput } from './api.js';
import type { Fatal } from './failures.js';
import type { SessionState } from './session-state.js';
import { checkMessage } from './validation.js';

const MAX_RECENT_IDS = 256;

export class MessageQueue {
  private readonly queue: UserInput[];
  /** Recently seen message ids and, once answered, their results (bounded, carried across runs). */
  private readonly results = new Map<string, SendResult | null>();
  /** The turn of each message taken in from the log's open turn (answered by `answerTurn`). */
  private readonly turnOf = new Map<string, number>();
  /**
   * Messages the log never took (their turn could not be begun): each `send` waiting on one fails
   * with the reason, and the same id may be sent again.
   */
  private readonly refused = new Map<string, Fatal>();
  /** Message ids that `send` handlers wait on, with how many handlers wait on each. */
  private readonly waitingFor = new Map<string, number>();

  constructor(
    private readonly state: SessionState,
    private readonly tunables: SessionTunables,
    carry: SessionWorkflowInput['carry'],
  ) {
    this.queue = [...(carry?.queue ?? [])];
    for (const r of carry?.recent ?? []) this.results.set(r.id, r.result);
  }

  // ---- Messages (wired by session-workflow.ts) ----

  /** Signal `userMessage`: queues the message. Signals cannot be refused; a bad one is dropped and reported in status. */
  receive(message: UserInput): void {
    try {
      this.validate(message);
    } catch (error) {
      this.state.report(`dropped message: ${(error as Error).message}`);
      return;
    }
    this.enqueue(message);
  }

  /** Refuses a message (synchronously, as an update validator must): out of bounds, or the session stopped or is closing. */
  validate(message: UserInput): void {
    checkMessage(message, this.tunables);
    this.state.throwIfClosed();
  }

  /** Update `send`: queues the message and waits for the turn that answers it. */
  async send(message: UserInput): Promise<SendResult> {
    const state = this.state;
    this.enqueue(message);
    const done = this.wait(message.id);
    try {
      await condition(
        () => this.resultOf(message.id) != null || this.refusalOf(message.id) !== undefined || state.stopped,
      );
      const result = this.resultOf(message.id);
      if (result) return result;
      const refusal = this.refusalOf(message.id);
      if (refusal) throw ApplicationFailure.nonRetryable(refusal.message, refusal.code);
      state.throwIfStopped();
      throw ApplicationFailure.nonRetryable(`message ${message.id} was not answered`, 'INTERNAL');
    } finally {
      done();
    }
  }

  // ---- The queue ----

  /** Whether messages wait for a turn. */
  get hasQueued(): boolean {
    return this.queue.length > 0;
  }

  /** How many messages wait for a turn. */
  get pending(): number {
    return this.queue.length;
  }

  /** Queues a message unless its id is already queued or answered. */
  enqueue(message: UserInput): void {
    if (this.results.has(message.id) || this.queue.some((m) => m.id === message.id)) return;
    this.refused.delete(message.id);
    this.queue.push(
      message.ref !== undefined
        ? { id: message.id, ref: message.ref, ...(message.withTools ? { withTools: true as const } : {}) }
        : {
            id: message.id,
            ...(message.text !== undefined ? { text: message.text } : {}),
            ...(message.tools !== undefined ? { tools: message.tools } : {}),
          },
    );
  }

  /**
   * Takes the queued messages that enter step `step` of a turn, in order. A message that brings
   * tools for its turn only starts a turn: step 1 takes messages up to the second one with tools,
   * a later step those before the first one.
   */
  takeEntering(step: number): UserInput[] {
    let withTools = step === 1 ? 0 : 1;
    let count = 0;
    for (const message of this.queue) {
      if ((message.withTools || message.tools !== undefined) && ++withTools > 1) break;
      count += 1;
    }
    return this.queue.splice(0, count);
  }

  /** Puts back, first in the queue, the messages of a turn the log never took (they run again). */
  requeue(messages: readonly UserInput[]): void {
    for (const message of messages) this.results.delete(message.id);
    this.queue.unshift(...messages.filter((message) => !this.queue.some((m) => m.id === message.id)));
  }

  // ---- Results ----

  /** Takes in the messages the log answered (or holds in the turn the run resumes), when the run opens. */
  opened(recent: readonly RecentMessage[], waiting: WaitingStep | undefined): void {
    for (const r of recent) {
      // Messages of a turn this run resumes are answered when it ends.
      if (r.turn === waiting?.turn) {
        this.remember(r.id, null);
        this.turnOf.set(r.id, r.turn);
      } else if (!this.results.get(r.id))
        this.remember(r.id, { turn: r.turn, replySeq: r.replySeq, outcome: r.outcome });
    }
    // A message carried over or re-sent that the log already holds was answered before.
    for (let i = this.queue.length - 1; i >= 0; i--) if (this.results.has(this.queue[i]!.id)) this.queue.splice(i, 1);
  }

  /** Records a message's result (null: taken into a turn, not answered yet). */
  remember(id: string, result: SendResult | null): void {
    this.results.delete(id);
    this.results.set(id, result);
    while (this.results.size > MAX_RECENT_IDS) this.results.delete(this.results.keys().next().value as string);
  }

  /** Answers every message of a resumed turn (taken in by an earlier run) with its result. */
  answerTurn(turn: number, result: SendResult): void {
    for (const [id, known] of this.results)
      if (known === null && this.turnOf.get(id) === turn) this.remember(id, result);
  }

  /** Forgets messages whose turn was never logged; their waiting sends fail with `reason`. */
  refuse(ids: readonly string[], reason: Fatal): void {
    for (const id of ids) {
      this.results.delete(id);
      this.refused.set(id, reason);
    }
    while (this.refused.size > MAX_RECENT_IDS) this.refused.delete(this.refused.keys().next().value as string);
  }

  /** Why the log never took message `id`, if it did not. */
  refusalOf(id: string): Fatal | undefined {
    return this.refused.get(id);
  }

  resultOf(id: string): SendResult | null | undefined {
    return this.results.get(id);
  }

  // ---- Waiting sends ----

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
    return [...this.waitingFor.keys()].some((id) => this.results.get(id) == null && !this.refused.has(id));
  }

  /** What continue-as-new carries of the messages: the queued ones, and the answered ones' results. */
  carry(): Pick<NonNullable<SessionWorkflowInput['carry']>, 'queue' | 'recent'> {
    return {
      queue: [...this.queue],
      recent: [...this.results]
        .filter((e): e is [string, SendResult] => e[1] !== null)
        .map(([id, result]) => ({ id, result })),
    };
  }
}
