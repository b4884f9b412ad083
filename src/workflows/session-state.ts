/**
 * The session workflow's orchestration state (DESIGN §5): the queue of message ids and their
 * inbox references, the results of recent messages, the head seq and turn, the phase and flags, the calls
 * waiting for answers. Nothing of the conversation: that lives in the log. Deterministic, no
 * I/O. Its fields are private: the run (session-run.ts) changes them only through the
 * intent-named methods below, and the update validators call its `validate…` methods.
 */
import { ApplicationFailure } from '@temporalio/workflow';
import type { CallAnswer, NoteInput, PressureRef, RecentMessage, ToolCallRef, WaitingStep } from '../engine/types.js';
import {
  MAX_TOOLS_JSON,
  NOTE_LIMITS,
  utf8Length,
  type ApprovalInput,
  type ApprovalResult,
  type SendResult,
  type SessionPhase,
  type SessionStatus,
  type SessionTunables,
  type SessionPause,
  type SessionWorkflowInput,
  type ToolResultInput,
  type UserInput,
} from './api.js';

const MAX_RECENT_IDS = 256;

/** A failure that stops the session: its log cannot be written safely by this run. */
export type Fatal = { code: string; message: string };

export class SessionState {
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
  private head: number;
  private lastTurn: number;
  private currentPhase: SessionPhase = 'starting';
  private closeRequested = false;
  private cancelled = false;
  private compacting = false;
  /** Compact updates waiting or running: continue-as-new waits for them. */
  private compactRequests = 0;
  /** A caller's note is being logged between turns (no turn or compaction may start meanwhile). */
  private noting = false;
  /** Note updates waiting to be logged: continue-as-new waits for them. */
  private noteRequests = 0;
  /** Budget changes answered (`turn-end`) and not logged yet: no turn starts before they are. */
  private budgetsDeferred = 0;
  private manualCompactions = 0;
  /** Why and until when the turn is paused (phase `paused`). */
  private pausedOn: SessionPause | undefined;
  /** Budgets logged by this run: a paused turn goes on when this grows. */
  private budgetsLogged = 0;
  private turns = 0;
  private lastError: string | undefined;
  private pressure: PressureRef | undefined;
  private fatal: Fatal | undefined;
  /** A step the log shows waiting for answers when this run opened: the run continues that turn first. */
  private resume: WaitingStep | undefined;
  /** Calls of the current step waiting for an answer, by call id. */
  private readonly awaiting = new Map<string, ToolCallRef>();
  /** Answers received and not logged yet. */
  private readonly answers = new Map<string, CallAnswer>();
  /** Approval decisions logged, by call id (bounded): what a second answer is told. */
  private readonly decisions = new Map<string, ApprovalResult>();
  /** External calls whose result this run took (bounded): a second result is already answered. */
  private readonly delivered = new Set<string>();

  constructor(
    readonly sessionId: string,
    readonly runId: string,
    readonly tunables: SessionTunables,
    carry: SessionWorkflowInput['carry'],
  ) {
    this.queue = [...(carry?.queue ?? [])];
    for (const r of carry?.recent ?? []) this.results.set(r.id, r.result);
    this.head = carry?.headSeq ?? 0;
    this.lastTurn = carry?.turn ?? 0;
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

  /** Whether messages wait for a turn. */
  get hasQueued(): boolean {
    return this.queue.length > 0;
  }

  /**
   * Whether a compaction or a note holds the log between turns, or an answered budget change
   * waits to be logged (no turn may start meanwhile).
   */
  get busyBetweenTurns(): boolean {
    return this.compacting || this.noting || this.budgetsDeferred > 0;
  }

  /** Whether a compact or note update waits to be served by this run (continue-as-new waits for it). */
  get servesRequests(): boolean {
    return this.compactRequests > 0 || this.noteRequests > 0;
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

  /** Counts a compact update until it is served; returns the function that uncounts it. */
  compactRequested(): () => void {
    this.compactRequests += 1;
    return () => {
      this.compactRequests -= 1;
    };
  }

  /** Counts a note update until it is served; returns the function that uncounts it. */
  noteRequested(): () => void {
    this.noteRequests += 1;
    return () => {
      this.noteRequests -= 1;
    };
  }

  /** Counts a budget change answered before it is logged; returns the function that uncounts it once logged. */
  budgetDeferred(): () => void {
    this.budgetsDeferred += 1;
    return () => {
      this.budgetsDeferred -= 1;
    };
  }

  /** Whether answered budget changes wait to be logged (the run does not end before they are). */
  get hasDeferredBudgets(): boolean {
    return this.budgetsDeferred > 0;
  }

  /** Pauses the turn (phase `paused`); {@link endPause} ends the pause. */
  pause(pause: SessionPause): void {
    this.pausedOn = pause;
    this.currentPhase = 'paused';
  }

  endPause(phase: SessionPhase): void {
    this.pausedOn = undefined;
    this.currentPhase = phase;
  }

  /** How many budgets this run logged (a paused turn waits for this to grow). */
  get budgetChanges(): number {
    return this.budgetsLogged;
  }

  budgetLogged(): void {
    this.budgetsLogged += 1;
  }

  /**
   * Whether a note that only sets the budget may be logged now: between turns, or while the
   * turn is paused on its budget (nothing runs then; the turn goes on once it is logged).
   */
  mayLogBudget(): boolean {
    return this.mayWorkBetweenTurns(true) || (this.currentPhase === 'paused' && !this.compacting && !this.noting);
  }

  /** Whether a manual compaction or a note may run now: between turns, with nothing else holding the log. */
  mayWorkBetweenTurns(allowClosed: boolean): boolean {
    return (
      (this.currentPhase === 'idle' || (allowClosed && this.currentPhase === 'closed')) &&
      !this.compacting &&
      !this.noting
    );
  }

  /** Starts a manual compaction; returns its number (the key of its bracket). */
  beginManualCompaction(): number {
    this.compacting = true;
    return ++this.manualCompactions;
  }

  endManualCompaction(): void {
    this.compacting = false;
  }

  beginNote(): void {
    this.noting = true;
  }

  endNote(): void {
    this.noting = false;
  }

  /** The step's calls that wait for an answer (approval or an external result) become the ones this run awaits. */
  awaitCalls(calls: readonly ToolCallRef[]): void {
    for (const call of calls) if (call.gate && call.answered === undefined) this.awaiting.set(call.callId, call);
  }

  /** Whether any call of the step still waits for its answer to be logged. */
  get awaitsAnswers(): boolean {
    return this.awaiting.size > 0;
  }

  /** Whether call `callId` still waits for its answer to be logged. */
  awaits(callId: string): boolean {
    return this.awaiting.has(callId);
  }

  /** Awaited calls no answer arrived for yet. */
  unansweredCalls(): ToolCallRef[] {
    return [...this.awaiting.values()].filter((c) => !this.answers.has(c.callId));
  }

  /** Whether answers arrived that are not logged yet. */
  get hasAnswers(): boolean {
    return this.answers.size > 0;
  }

  /** Answers that arrived and are not logged yet, in arrival order. */
  answersToLog(): CallAnswer[] {
    return [...this.answers.values()];
  }

  /** Takes an approval answer; the first answer to a call counts. */
  offerApproval(answer: ApprovalInput): void {
    if (!this.answers.has(answer.callId)) this.answers.set(answer.callId, { kind: 'approval', ...answer });
  }

  /** Takes an external call's result (the handler checked it is the first). */
  offerResult(result: ToolResultInput): void {
    this.answers.set(result.callId, {
      kind: 'external',
      callId: result.callId,
      isError: result.isError === true,
      ...(result.ref !== undefined ? { ref: result.ref } : {}),
      ...(result.output !== undefined ? { output: result.output } : {}),
      ...(result.by !== undefined ? { by: result.by } : {}),
    });
  }

  /** Answers the calls whose approval time ran out as expired. */
  expire(calls: readonly ToolCallRef[], now: number): void {
    for (const c of calls)
      if ((c.expiresAt ?? Number.POSITIVE_INFINITY) <= now)
        this.answers.set(c.callId, { kind: 'approval', callId: c.callId, decision: 'expire', reason: 'expired' });
  }

  /** The step's wait for answers is over: nothing is awaited any more. */
  stopAwaiting(): void {
    this.awaiting.clear();
    this.answers.clear();
  }

  /** Takes in what the run's opening read from the log: its head, last turn and answered messages. */
  opened(opened: { headSeq: number; lastTurn: number; recent: RecentMessage[]; waiting?: WaitingStep }): void {
    this.head = opened.headSeq;
    this.lastTurn = Math.max(this.lastTurn, opened.lastTurn);
    this.resume = opened.waiting;
    // Answers the log holds for the waiting step: what the step acts on and what a second answer is told.
    for (const call of opened.waiting?.calls ?? []) {
      if (call.answered)
        this.decisions.set(call.callId, {
          callId: call.callId,
          decision: call.answered,
          ...(call.reason !== undefined ? { reason: call.reason } : {}),
        });
    }
    for (const r of opened.recent) {
      // Messages of a turn this run resumes are answered when it ends.
      if (r.turn === opened.waiting?.turn) {
        this.remember(r.id, null);
        this.turnOf.set(r.id, r.turn);
      } else if (!this.results.get(r.id))
        this.remember(r.id, { turn: r.turn, replySeq: r.replySeq, outcome: r.outcome });
    }
    // A message carried over or re-sent that the log already holds was answered before.
    for (let i = this.queue.length - 1; i >= 0; i--) if (this.results.has(this.queue[i]!.id)) this.queue.splice(i, 1);
    this.currentPhase = 'idle';
  }

  /**
   * Refuses a message (synchronously, as an update validator must). Its text waits in the
   * inbox: the bounds are checked on its reference (the engine checks the text against it).
   * A message of a build before the inbox carries its text inline and is checked as it was.
   */
  validate(message: UserInput): void {
    if (typeof message?.id !== 'string' || message.id.length === 0 || message.id.length > 128) {
      throw ApplicationFailure.nonRetryable('message id must be a string of 1-128 characters', 'INVALID_MESSAGE');
    }
    if (message.ref !== undefined || message.text === undefined) this.validateRef(message.ref, 'message');
    else this.validateInline(message);
    this.throwIfStopped();
    if (this.closeRequested)
      throw ApplicationFailure.nonRetryable('session is closing and accepts no more messages', 'SESSION_CLOSED');
  }

  /** Checks an inbox reference's shape and size (the largest message, `maxMessageBytes`, times `scale`). */
  private validateRef(ref: UserInput['ref'], what: string, scale = 1): void {
    if (
      typeof ref !== 'object' ||
      ref === null ||
      typeof ref.key !== 'string' ||
      ref.key.length === 0 ||
      ref.key.length > 300 ||
      typeof ref.digest !== 'string' ||
      !/^[0-9a-f]{64}$/.test(ref.digest) ||
      !Number.isSafeInteger(ref.bytes) ||
      ref.bytes <= 0
    ) {
      throw ApplicationFailure.nonRetryable(
        `a ${what} names its inbox entry: {key, bytes, digest} (SessionClient writes it)`,
        'INVALID_MESSAGE',
      );
    }
    const limit = this.tunables.maxMessageBytes * scale + MAX_TOOLS_JSON;
    if (ref.bytes > limit) {
      throw ApplicationFailure.nonRetryable(
        `${what} is ${ref.bytes} bytes; the limit is ${this.tunables.maxMessageBytes * scale}`,
        'MESSAGE_TOO_LARGE',
      );
    }
  }

  /** The checks of a message whose text came inline (queued by a build before the inbox). */
  private validateInline(message: UserInput): void {
    if (typeof message.text !== 'string' || message.text.trim().length === 0) {
      throw ApplicationFailure.nonRetryable('message text must not be empty', 'EMPTY_MESSAGE');
    }
    const bytes = utf8Length(message.text);
    if (bytes > this.tunables.maxMessageBytes) {
      throw ApplicationFailure.nonRetryable(
        `message is ${bytes} bytes; the limit is ${this.tunables.maxMessageBytes}`,
        'MESSAGE_TOO_LARGE',
      );
    }
    // Bounds only (the history holds them); the engine checks each tool before the turn is logged.
    if (
      message.tools !== undefined &&
      (!Array.isArray(message.tools) ||
        message.tools.length === 0 ||
        JSON.stringify(message.tools).length > MAX_TOOLS_JSON)
    ) {
      throw ApplicationFailure.nonRetryable(
        `tools must be a non-empty list of at most ${MAX_TOOLS_JSON} characters of JSON`,
        'INVALID_ARGUMENT',
      );
    }
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

  /** Puts back, first in the queue, the messages of a turn the log never took (they run again). */
  requeue(messages: readonly UserInput[]): void {
    for (const message of messages) this.results.delete(message.id);
    this.queue.unshift(...messages.filter((message) => !this.queue.some((m) => m.id === message.id)));
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

  /** Stops the session: waiting sends are answered with the failure, new ones refused. */
  stop(fatal: Fatal): void {
    this.fatal = fatal;
    this.lastError = `${fatal.code}: ${fatal.message}`;
  }

  /** Refuses an approval answer the session cannot take (synchronously, as an update validator must). */
  validateApproval(input: ApprovalInput): void {
    if (
      typeof input?.callId !== 'string' ||
      input.callId.length === 0 ||
      (input.decision !== 'approve' && input.decision !== 'deny')
    ) {
      throw ApplicationFailure.nonRetryable(
        'an approval needs a callId and a decision of approve or deny',
        'INVALID_ARGUMENT',
      );
    }
    if (input.ref !== undefined) this.validateRef(input.ref, 'approval');
    if (input.arguments !== undefined && !isJsonObjectText(input.arguments)) {
      throw ApplicationFailure.nonRetryable('edited arguments must be the text of a JSON object', 'INVALID_ARGUMENT');
    }
    this.throwIfStopped();
    // Until the run knows its waiting calls the handler decides (see knowsWaitingCalls).
    if (!this.knowsWaitingCalls || this.decisions.has(input.callId)) return;
    const call = this.awaiting.get(input.callId);
    if (!call)
      throw ApplicationFailure.nonRetryable(
        `no tool call ${input.callId} is waiting for approval in session ${this.sessionId}`,
        'UNKNOWN_CALL',
      );
    if (call.gate !== 'approval')
      throw ApplicationFailure.nonRetryable(
        `tool call ${input.callId} is an external tool: post its result instead of approving it`,
        'INVALID_ARGUMENT',
      );
  }

  /** Refuses an external result the session cannot take. */
  validateToolResult(input: ToolResultInput): void {
    if (typeof input?.callId !== 'string' || input.callId.length === 0) {
      throw ApplicationFailure.nonRetryable('a tool result needs a callId', 'INVALID_ARGUMENT');
    }
    if (input.ref !== undefined || typeof input.output !== 'string') this.validateRef(input.ref, 'tool result');
    else {
      const bytes = utf8Length(input.output);
      if (bytes > this.tunables.maxMessageBytes) {
        throw ApplicationFailure.nonRetryable(
          `tool output is ${bytes} bytes; the limit is ${this.tunables.maxMessageBytes}`,
          'MESSAGE_TOO_LARGE',
        );
      }
    }
    this.throwIfStopped();
    if (!this.knowsWaitingCalls) return;
    this.assertExternalWaiting(input.callId);
  }

  /** Throws unless `callId` is an external call waiting for its result (and none arrived yet). */
  assertExternalWaiting(callId: string): void {
    const call = this.awaiting.get(callId);
    if (!call && (this.delivered.has(callId) || this.decisions.has(callId))) {
      throw ApplicationFailure.nonRetryable(
        `tool call ${callId} was already answered; the first answer counts`,
        'ALREADY_ANSWERED',
      );
    }
    if (!call)
      throw ApplicationFailure.nonRetryable(
        `no tool call ${callId} is waiting for a result in session ${this.sessionId}`,
        'UNKNOWN_CALL',
      );
    if (call.gate !== 'external')
      throw ApplicationFailure.nonRetryable(
        `tool call ${callId} waits for approval, not for a result`,
        'INVALID_ARGUMENT',
      );
    if (this.answers.has(callId))
      throw ApplicationFailure.nonRetryable(`tool call ${callId} already has a result`, 'ALREADY_ANSWERED');
  }

  /**
   * Whether `awaiting` holds every call that waits: not before the run has read its log, nor
   * while a model step runs (the step logs its approval requests before its activity returns,
   * so a caller following the log can answer a call this run has not heard of yet).
   */
  get knowsWaitingCalls(): boolean {
    return this.currentPhase !== 'starting' && this.currentPhase !== 'model';
  }

  decisionOf(callId: string): ApprovalResult | undefined {
    return this.decisions.get(callId);
  }

  /** Records a logged answer: the call stops waiting; an approval decision is what later answers are told. */
  answered(answer: CallAnswer): void {
    this.answers.delete(answer.callId);
    this.awaiting.delete(answer.callId);
    if (answer.kind !== 'approval') {
      this.delivered.add(answer.callId);
      while (this.delivered.size > MAX_RECENT_IDS)
        this.delivered.delete(this.delivered.values().next().value as string);
      return;
    }
    this.decisions.set(answer.callId, {
      callId: answer.callId,
      decision: answer.decision,
      ...(answer.reason !== undefined ? { reason: answer.reason } : {}),
    });
    while (this.decisions.size > MAX_RECENT_IDS) this.decisions.delete(this.decisions.keys().next().value as string);
  }

  /**
   * Refuses a note the session would not log: its content waits in the inbox (the client
   * checked its metadata and messages), so its reference is checked here; a note of a build
   * before the inbox carries them inline and is checked as it was.
   */
  validateNote(note: NoteInput): void {
    if (typeof note?.id !== 'string' || note.id.length === 0 || note.id.length > 128) {
      throw ApplicationFailure.nonRetryable('a note id must be a string of 1-128 characters', 'INVALID_ARGUMENT');
    }
    if (note.ref !== undefined) this.validateRef(note.ref, 'note', NOTE_LIMITS.messages);
    else this.validateInlineNote(note);
    // Its limits are checked by the client and again by the log's validator (session/budget.ts).
    const budget = note.budget as unknown;
    if (budget !== undefined && budget !== null && (typeof budget !== 'object' || Array.isArray(budget)))
      throw ApplicationFailure.nonRetryable("a note's budget must be an object or null", 'INVALID_ARGUMENT');
    if (note.by !== undefined && (typeof note.by !== 'string' || note.by.length > 256))
      throw ApplicationFailure.nonRetryable(
        "a note's `by` must be a string of at most 256 characters",
        'INVALID_ARGUMENT',
      );
    this.throwIfStopped();
  }

  private validateInlineNote(note: NoteInput): void {
    const values = note.metadata?.values;
    if (
      note.metadata &&
      (typeof values !== 'object' || values === null || Object.keys(values).length > NOTE_LIMITS.metadataKeys)
    ) {
      throw ApplicationFailure.nonRetryable(
        `metadata holds at most ${NOTE_LIMITS.metadataKeys} string pairs`,
        'INVALID_ARGUMENT',
      );
    }
    for (const [key, value] of Object.entries(values ?? {})) {
      if (typeof value !== 'string' || key.length > NOTE_LIMITS.keyChars || value.length > NOTE_LIMITS.valueChars) {
        throw ApplicationFailure.nonRetryable(
          `metadata keys are at most ${NOTE_LIMITS.keyChars} and values at most ${NOTE_LIMITS.valueChars} characters of text`,
          'INVALID_ARGUMENT',
        );
      }
    }
    if ((note.messages?.length ?? 0) > NOTE_LIMITS.messages)
      throw ApplicationFailure.nonRetryable(
        `a note carries at most ${NOTE_LIMITS.messages} messages`,
        'INVALID_ARGUMENT',
      );
    for (const message of note.messages ?? []) {
      this.validate(message);
      if (message.tools !== undefined)
        throw ApplicationFailure.nonRetryable(
          'a note logs messages without starting a turn: its messages take no tools',
          'INVALID_ARGUMENT',
        );
    }
  }

  /** Throws the stopping failure to a handler waiting on this run, if the session stopped. */
  throwIfStopped(): void {
    if (this.fatal) throw ApplicationFailure.nonRetryable(this.fatal.message, this.fatal.code);
  }

  /** What continue-as-new carries: no conversation, only ids, counters and queued texts. */
  carry(): NonNullable<SessionWorkflowInput['carry']> {
    return {
      headSeq: this.head,
      turn: this.lastTurn,
      queue: [...this.queue],
      recent: [...this.results]
        .filter((e): e is [string, SendResult] => e[1] !== null)
        .map(([id, result]) => ({ id, result })),
    };
  }

  status(): SessionStatus {
    const p = this.pressure;
    return {
      sessionId: this.sessionId,
      headSeq: this.head,
      turn: this.lastTurn,
      phase: this.currentPhase,
      pending: this.queue.length,
      tokens: p?.tokens ?? null,
      contextWindow: p?.contextWindow ?? null,
      pressure: p ? Math.round((p.tokens / p.budget) * 1000) / 1000 : null,
      runId: this.runId,
      ...(this.lastError !== undefined ? { lastError: this.lastError } : {}),
      ...(this.pausedOn ? { paused: this.pausedOn } : {}),
    };
  }
}

function isJsonObjectText(text: string): boolean {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === 'object' && value !== null && !Array.isArray(value);
  } catch {
    // Not JSON at all: refused by the caller.
    return false;
  }
}
