/**
 * One run of the session workflow (DESIGN §5): the class that owns the run's state, its
 * activity proxies and the turn, step, tool, approval and compaction methods. The workflow
 * function (session-workflow.ts) only wires the messages of api.ts to it, as the Temporal
 * samples wire handlers to an entity class. The conversation lives in the log, written by
 * activities; this class holds only ids, counters and the phase.
 *
 * Determinism: the order of activities, timers and conditions here is what recorded histories
 * hold (test/workflows/replay.test.ts). A change to that order goes behind `patched()` with a
 * note, as the two patches below do.
 */
import {
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  allHandlersFinished,
  condition,
  continueAsNew,
  isCancellation,
  log,
  patched,
  proxyActivities,
  proxyLocalActivities,
  sleep,
  workflowInfo,
} from '@temporalio/workflow';
import type { SessionActivities } from '../activities/activities.js';
import type {
  CompactInput,
  DeniedCall,
  EndTurnInput,
  ModelStepResult,
  NoteInput,
  StepBreach,
  ToolCallRef,
  ToolRunRef,
  TurnEndRef,
  WaitingStep,
} from '../engine/types.js';
// The one error table: pure data, the only value workflow code takes from outside its folder.
import { FATAL_CODES, isSessionErrorCode } from '../session/errors.js';
import {
  DEFAULT_TUNABLES,
  type ApprovalInput,
  type ApprovalResult,
  type CompactResult,
  type NoteAck,
  type SendResult,
  type SessionStatus,
  type SessionTunables,
  type SessionWorkflowInput,
  type ToolResultAck,
  type ToolResultInput,
  type UserInput,
} from './api.js';
import { SessionState, type Fatal } from './session-state.js';

/** Patch id: continue-as-new no longer waits for `send`s that the finished turn already answered. */
const CAN_AFTER_ANSWERED_SENDS = 'continue-as-new-after-answered-sends';
/**
 * Patch id: a turn whose first step failed before the log took anything of it gives its number
 * back; its messages wait in the queue while the store is unavailable, and are refused otherwise.
 */
const TURN_NOT_LOGGED = 'turn-not-logged-gives-number-back';
/**
 * Patch id: a note that only changes the budget, arriving while a turn runs or waits for an
 * approval, is answered at once (`turn-end`) and logged once nothing runs, as before; builds
 * before it answered only once it was logged.
 */
const BUDGET_ANSWERS_AT_ONCE = 'budget-change-answers-at-once';
/** Backoff between tries of a turn the store could not log (doubling up to the cap). */
const NOT_LOGGED_FIRST_DELAY_MS = 1_000;
const NOT_LOGGED_MAX_DELAY_MS = 60_000;
/** The longest interval between a tenant-capped pause's checks of the tenant's spend. */
const MAX_TENANT_RECHECK_MS = 10 * 60_000;

/** A turn of which nothing reached the log: why, whether to try it again, and its messages. */
type NotLogged = { reason: Fatal; retry: boolean; messages: UserInput[] };

/** What the tool half of a step hands back: the results to log and the calls denied, or that the turn was cancelled. */
type ToolRound = { refs: ToolRunRef[]; denied: DeniedCall[] } | 'cancelled';

function activityProxies(tunables: SessionTunables) {
  const local = proxyLocalActivities<SessionActivities>({
    startToCloseTimeout: tunables.appendStartToCloseMs,
    // No attempt limit: these appends open, close and continue turns, and a store that refuses
    // writes for a while (UNAVAILABLE) must not fail the workflow and every waiting `send` with it.
    // A refusal that retrying cannot fix is non-retryable and fails at once.
    retry: { initialInterval: 200, maximumInterval: 5_000 },
  });
  // Which failures are retried is decided once, by the activities from the error table
  // (activities/failures.ts): every session error code but a retryable one fails its activity as
  // non-retryable. These policies therefore name no error types. Versioning note: they used to
  // list a few (`nonRetryableErrorTypes`); a retry policy is an option of the schedule command,
  // not compared on replay, so histories recorded with those lists replay unchanged
  // (test/workflows/replay.test.ts).
  const model = proxyActivities<SessionActivities>({
    startToCloseTimeout: tunables.modelStartToCloseMs,
    heartbeatTimeout: tunables.modelHeartbeatMs,
    cancellationType: 'WAIT_CANCELLATION_COMPLETED',
    retry: {
      maximumAttempts: tunables.modelMaxAttempts,
      initialInterval: tunables.modelRetryInitialMs,
      maximumInterval: 30_000,
    },
  });
  const compactor = proxyActivities<SessionActivities>({
    startToCloseTimeout: tunables.modelStartToCloseMs,
    heartbeatTimeout: tunables.modelHeartbeatMs,
    retry: {
      maximumAttempts: tunables.compactionMaxAttempts,
      initialInterval: 1_000,
      maximumInterval: 30_000,
    },
  });
  const tools = proxyActivities<SessionActivities>({
    startToCloseTimeout: tunables.toolStartToCloseMs,
    heartbeatTimeout: Math.max(tunables.modelHeartbeatMs, 5_000),
    cancellationType: 'WAIT_CANCELLATION_COMPLETED',
    retry: { maximumAttempts: tunables.toolMaxAttempts, initialInterval: 1_000, maximumInterval: 30_000 },
  });
  return { local, model, compactor, tools };
}

/** The session workflow's run: handlers call its public methods; `run()` is the loop. */
export class SessionRun {
  private readonly tunables: SessionTunables;
  private readonly state: SessionState;
  private readonly act: ReturnType<typeof activityProxies>;
  /** What every activity input starts with. */
  private readonly base: { sessionId: string; runId: string };
  /** The scope of the running model step or tool round: `cancel` cancels it. */
  private currentScope: CancellationScope | undefined;
  /** When a turn paused on its tenant's cap ends with `budget_exceeded` (kept across its re-checks). */
  private tenantCapDeadline: number | undefined;

  constructor(private readonly input: SessionWorkflowInput) {
    this.tunables = { ...DEFAULT_TUNABLES, ...input.tunables };
    const { runId } = workflowInfo();
    this.state = new SessionState(input.sessionId, runId, this.tunables, input.carry);
    this.act = activityProxies(this.tunables);
    this.base = { sessionId: input.sessionId, runId };
  }

  // ---- Messages (wired by session-workflow.ts) ----

  /** Signal `userMessage`: queues the message. Signals cannot be refused; a bad one is dropped and reported in status. */
  receiveMessage(message: UserInput): void {
    try {
      this.state.validate(message);
    } catch (error) {
      this.state.report(`dropped message: ${(error as Error).message}`);
      return;
    }
    this.state.enqueue(message);
  }

  /** Update validator of `send` (synchronous: rejected input never reaches history). */
  validateMessage(message: UserInput): void {
    this.state.validate(message);
  }

  /** Update `send`: queues the message and waits for the turn that answers it. */
  async send(message: UserInput): Promise<SendResult> {
    const state = this.state;
    state.enqueue(message);
    const done = state.wait(message.id);
    try {
      await condition(
        () => state.resultOf(message.id) != null || state.refusalOf(message.id) !== undefined || state.stopped,
      );
      const result = state.resultOf(message.id);
      if (result) return result;
      const refusal = state.refusalOf(message.id);
      if (refusal) throw ApplicationFailure.nonRetryable(refusal.message, refusal.code);
      state.throwIfStopped();
      throw ApplicationFailure.nonRetryable(`message ${message.id} was not answered`, 'INTERNAL');
    } finally {
      done();
    }
  }

  validateApproval(answer: ApprovalInput): void {
    this.state.validateApproval(answer);
  }

  /** Update `approve`: the first answer to a call counts once it is logged; every caller is told that one. */
  async approve(answer: ApprovalInput): Promise<ApprovalResult> {
    const state = this.state;
    await condition(() => state.knowsWaitingCalls || state.stopped);
    state.throwIfStopped();
    if (!state.decisionOf(answer.callId)) {
      state.validateApproval(answer);
      state.offerApproval(answer);
    }
    await condition(() => state.decisionOf(answer.callId) !== undefined || state.stopped);
    state.throwIfStopped();
    return state.decisionOf(answer.callId)!;
  }

  validateToolResult(result: ToolResultInput): void {
    this.state.validateToolResult(result);
  }

  /** Update `toolResult`: an external call's result, accepted once it is logged. */
  async submitToolResult(result: ToolResultInput): Promise<ToolResultAck> {
    const state = this.state;
    await condition(() => state.knowsWaitingCalls || state.stopped);
    state.throwIfStopped();
    state.assertExternalWaiting(result.callId);
    state.offerResult(result);
    await condition(() => !state.awaits(result.callId) || state.stopped);
    state.throwIfStopped();
    return { callId: result.callId, accepted: true as const };
  }

  /** Signal `cancel`: aborts the running turn (its running activities are cancelled). */
  cancel(): void {
    if (this.state.requestCancel()) this.currentScope?.cancel();
  }

  /** Signal `close`: the run ends after the current turn. */
  close(): void {
    this.state.requestClose();
  }

  status(): SessionStatus {
    return this.state.status();
  }

  /** Update `compact`: one manual compaction, between turns. */
  async compact(): Promise<CompactResult | null> {
    const state = this.state;
    const served = state.compactRequested();
    try {
      await condition(() => state.mayWorkBetweenTurns(false) || state.stopped);
      state.throwIfStopped();
      const manual = state.beginManualCompaction();
      try {
        const result = await this.guarded(() => this.runCompaction('manual', null, { manual }));
        state.throwIfStopped();
        return result ?? null;
      } finally {
        state.endManualCompaction();
      }
    } finally {
      served();
    }
  }

  validateNote(note: NoteInput): void {
    this.state.validateNote(note);
  }

  /**
   * Update `note`: logs a caller's note between turns only (a turn's or a compaction's
   * activities expect the head they left). A note that only changes the budget may also be
   * logged while a turn is paused on it; one that arrives while a turn runs (or waits for an
   * approval) is answered at once (`turn-end`) and logged as it was before, once nothing runs.
   */
  async note(note: NoteInput): Promise<NoteAck> {
    const state = this.state;
    const budgetOnly = note.budget !== undefined && note.ref === undefined && !note.metadata && !note.messages;
    if (budgetOnly && !state.mayLogBudget() && !state.stopped && patched(BUDGET_ANSWERS_AT_ONCE)) {
      void this.logDeferredBudget(note, state.budgetDeferred());
      return { headSeq: state.headSeq, applies: 'turn-end' };
    }
    return { headSeq: await this.logNoteWhenFree(note, budgetOnly), applies: 'now' };
  }

  /** Logs a note once nothing holds the log (a budget-only note also while a turn is paused); returns the head after it. */
  private async logNoteWhenFree(note: NoteInput, budgetOnly: boolean): Promise<number> {
    const state = this.state;
    const served = state.noteRequested();
    try {
      await condition(() => (budgetOnly ? state.mayLogBudget() : state.mayWorkBetweenTurns(true)) || state.stopped);
      state.throwIfStopped();
      state.beginNote();
      try {
        const logged = await this.act.local.logNote({ ...this.base, knownHead: state.headSeq, note });
        state.afterNote(logged);
        if (note.budget !== undefined) state.budgetLogged();
        return logged.headSeq;
      } finally {
        state.endNote();
      }
    } finally {
      served();
    }
  }

  /** Logs a budget change its caller was told applies at the end of the running turn; a failure is reported in status. */
  private async logDeferredBudget(note: NoteInput, logged: () => void): Promise<void> {
    try {
      await this.logNoteWhenFree(note, true);
    } catch (error) {
      // Its caller was answered already: a stopped session says why in status; anything else is reported.
      if (!this.state.stopped) this.state.report(`budget change ${note.id} was not logged: ${describeFailure(error)}`);
    } finally {
      logged();
    }
  }

  /** Update `opened`: answers once the run has opened its session (or stopped trying). */
  async opened(): Promise<{ headSeq: number }> {
    await condition(() => this.state.phase !== 'starting' || this.state.stopped);
    this.state.throwIfStopped();
    return { headSeq: this.state.headSeq };
  }

  // ---- The run ----

  /**
   * Opens the session, finishes a turn the log shows waiting, then runs a turn per batch of
   * queued messages until the session closes, idles out, stops, or continues as new.
   */
  async run(): Promise<void> {
    const state = this.state;
    const info = workflowInfo();
    // A run that cannot open its session (refused log, bad seed) stops with the reason.
    const opened = await this.guarded(
      () =>
        this.act.local.openRun({
          sessionId: this.input.sessionId,
          workflowId: info.workflowId,
          runId: info.runId,
          ...(this.input.seed ? { seed: this.input.seed } : {}),
        }),
      true,
    );
    if (opened) state.opened(opened);

    const resumed = state.takeResume();
    if (resumed) {
      const result = await this.guarded(() => this.runTurn(resumed.turn, [], resumed));
      if (result && !('notLogged' in result)) state.answerTurn(resumed.turn, result);
      state.enter('idle');
    }

    let notLoggedDelayMs = NOT_LOGGED_FIRST_DELAY_MS;
    while (!state.stopped) {
      const idle = this.tunables.idleTimeoutMs > 0 ? this.tunables.idleTimeoutMs : undefined;
      const ready = () => (state.hasQueued || state.closing) && !state.busyBetweenTurns;
      const woke = idle === undefined ? (await condition(ready), true) : await condition(ready, idle);
      if (!state.hasQueued) {
        if (state.closing || !woke) break;
        continue;
      }
      const turn = state.beginTurn();
      const turnIds: string[] = [];
      // Not through `guarded`: every async layer costs each turn promises, which the SDK's
      // stack-trace hook makes dear (BENCHMARKS.md, "The SDK's stack-trace hook").
      let result: SendResult | { notLogged: NotLogged };
      try {
        result = await this.runTurn(turn, turnIds);
      } catch (error) {
        this.stopOn(error);
        break;
      }
      state.enter('idle');
      if ('notLogged' in result) {
        // Nothing of this turn is in the log: the number is free again.
        state.giveTurnBack();
        const { reason, retry, messages } = result.notLogged;
        if (retry) {
          // The store refused every attempt: the messages wait (their sends too) and the turn is tried again later.
          state.requeue(messages);
          state.report(`turn ${turn} could not be logged, trying again in ${notLoggedDelayMs} ms: ${reason.message}`);
          await sleep(notLoggedDelayMs);
          notLoggedDelayMs = Math.min(notLoggedDelayMs * 2, NOT_LOGGED_MAX_DELAY_MS);
        } else {
          state.refuse(turnIds, { code: reason.code, message: `the message was not logged: ${reason.message}` });
        }
        continue;
      }
      notLoggedDelayMs = NOT_LOGGED_FIRST_DELAY_MS;
      for (const id of turnIds) state.remember(id, result);
      if (this.continueAsNewDue() && (await this.continueAsNewWhenFree())) continue;
    }
    state.enter('closed');
    await condition(() => allHandlersFinished() && !state.hasDeferredBudgets);
  }

  /**
   * Whether the run should continue as new after this turn: Temporal suggests it or the run has
   * had its turns, and nothing keeps it. Synchronous, so the turns that do not leave (nearly all)
   * make no promise for it.
   */
  private continueAsNewDue(): boolean {
    const state = this.state;
    const suggested = workflowInfo().continueAsNewSuggested;
    // Queued signal messages are carried over; a waiting `send` keeps the run until it is answered.
    // A send this turn answered still counts as waiting here (its handler resumes later in this
    // activation), so only a send whose message is unanswered blocks; otherwise a session driven by
    // `send` would never continue as new.
    const wantsNewRun = suggested || state.turnsThisRun >= this.tunables.continueAsNewAfterTurns;
    return (
      wantsNewRun &&
      this.canLeave() &&
      (state.waiting === 0 || (!state.unanswered() && patched(CAN_AFTER_ANSWERED_SENDS)))
    );
  }

  /** Whether nothing keeps the run: a close request ends it soon anyway, and a pending manual compaction runs here first. */
  private canLeave(): boolean {
    return !this.state.closing && !this.state.servesRequests;
  }

  /**
   * Continues as new, once every handler has finished ({@link continueAsNewDue} said it is due).
   * Returns true when a message arrived meanwhile that this run must serve: the loop goes on instead.
   */
  private async continueAsNewWhenFree(): Promise<boolean> {
    const state = this.state;
    state.enter('closing');
    // A `send` or `compact` arriving meanwhile must be served by this run (its handler would
    // otherwise wait forever for a turn this run never runs): go back to the loop instead.
    await condition(() => allHandlersFinished() || state.unanswered() || !this.canLeave());
    if (!allHandlersFinished()) {
      state.enter('idle');
      return true;
    }
    log.info('continuing as new', { sessionId: this.input.sessionId, turn: state.turn, headSeq: state.headSeq });
    return continueAsNew<(input: SessionWorkflowInput) => Promise<void>>({
      sessionId: this.input.sessionId,
      ...(this.input.tunables ? { tunables: this.input.tunables } : {}),
      carry: state.carry(),
    });
  }

  /** Runs one turn over the queued messages (or resumes one waiting for answers); returns how the log says it ended. */
  private async runTurn(
    turn: number,
    turnIds: string[],
    resume?: WaitingStep,
  ): Promise<SendResult | { notLogged: NotLogged }> {
    const state = this.state;
    let replySeq: number | null = null;
    const ended = (end: TurnEndRef | undefined, fallback: SendResult['outcome']): SendResult => ({
      turn,
      replySeq: end?.replySeq ?? replySeq,
      outcome: end?.outcome ?? fallback,
    });
    for (let step = resume?.step ?? 1; ; step++) {
      let result: ModelStepResult;
      if (resume && step === resume.step) {
        // The log shows this step's calls waiting for answers: continue from its tool half.
        result = { headSeq: state.headSeq, replySeq: null, toolCalls: resume.calls, outcome: 'tools', replayed: true };
      } else {
        const entering = state.takeEntering(step);
        for (const m of entering) {
          turnIds.push(m.id);
          state.remember(m.id, null);
        }
        state.enter('model');
        try {
          result = await this.modelStep(turn, step, entering);
        } catch (error) {
          const end = await this.failTurn(turn, error, 'MODEL_STEP_FAILED');
          // Nothing of the turn is in the log (its first batch was refused): its messages were never taken.
          if (end === undefined && step === 1 && !resume && patched(TURN_NOT_LOGGED)) {
            const cancelled = state.cancelRequested && isCancellation(error);
            const invalid = failureCode(error) === 'INVALID_ARGUMENT';
            const reason = {
              code: invalid ? 'INVALID_ARGUMENT' : 'UNAVAILABLE',
              message: cancelled ? 'the turn was cancelled before it was logged' : describeFailure(error),
            };
            return { notLogged: { reason, retry: !cancelled && !invalid, messages: entering } };
          }
          return ended(end, state.cancelRequested && isCancellation(error) ? 'aborted' : 'error');
        }
      }
      state.atHead(result.headSeq);
      if (result.replySeq !== null) replySeq = result.replySeq;
      if (result.outcome !== 'tools') {
        if (result.outcome === 'context-overflow') {
          state.report(result.error?.message);
          return ended(
            await this.closeTurn(turn, {
              kind: 'error',
              code: 'context_overflow',
              message: result.error?.message ?? 'context overflow',
            }),
            'error',
          );
        }
        const outcome =
          result.outcome === 'max-tokens' || result.outcome === 'aborted' || result.outcome === 'error'
            ? result.outcome
            : 'completed';
        if (result.error) state.report(result.error.message);
        return ended(result.turnEnd, outcome);
      }
      state.enter('tools');
      let tools: ToolRound;
      try {
        tools = await this.runTools(turn, step, result.toolCalls);
      } catch (error) {
        return ended(
          await this.failTurn(turn, error, 'TOOL_FAILED'),
          state.cancelRequested && isCancellation(error) ? 'aborted' : 'error',
        );
      }
      if (tools === 'cancelled') return ended(await this.closeTurn(turn, { kind: 'aborted' }), 'aborted');
      const lastStep = step >= this.tunables.maxStepsPerTurn;
      const appended = await this.act.local.appendToolResults({
        ...this.base,
        turn,
        step,
        knownHead: state.headSeq,
        results: tools.refs,
        ...(tools.denied.length > 0 ? { denied: tools.denied } : {}),
        ...(lastStep ? { endTurnReason: 'max-steps' as const } : {}),
      });
      state.atHead(appended.headSeq);
      if (lastStep) return ended(appended.turnEnd, 'max-steps');
    }
  }

  /**
   * One model step. The step owns context pressure itself (the engine's pressure ladder, and one
   * more climb and call after a provider's overflow refusal). Workers of earlier versions handed
   * it back instead (`needs-compaction`, `context-overflow`): those outcomes, still found in the
   * histories of workflows they ran, are served here as they were then, so replay is unchanged.
   */
  private async modelStep(turn: number, step: number, entering: UserInput[]): Promise<ModelStepResult> {
    const state = this.state;
    let overflowRetried = false;
    let pauses = 0;
    for (let pass = 0; ; pass++) {
      const scope = this.enterScope();
      let result: ModelStepResult;
      try {
        result = await scope.run(() =>
          this.act.model.modelStep({
            ...this.base,
            turn,
            step,
            knownHead: state.headSeq,
            entering,
            maxAttempts: this.tunables.modelMaxAttempts,
            pass,
            approvalTimeoutMs: this.tunables.approvalTimeoutMs,
            ...(pauses > 0 ? { pauses } : {}),
            ...(this.tunables.rateLimitPauseMs > 0 ? { pauseAfterMs: this.tunables.rateLimitPauseMs } : {}),
          }),
        );
      } finally {
        this.leaveScope(scope);
      }
      state.atHead(result.headSeq);
      state.observePressure(result.pressure);
      if (result.outcome !== 'budget') this.tenantCapDeadline = undefined;
      if (result.outcome === 'budget' || result.outcome === 'rate-limited') {
        const ended =
          result.outcome === 'budget'
            ? await this.pauseForBudget(turn, result.breach!, pauses)
            : await this.pauseForRateLimit(turn, result.retryAfterMs!, result.waitingFor ?? 'rate_limit');
        if (ended) return ended;
        // The same pass goes on (its op keys hold what it logged before the pause).
        pauses += 1;
        pass -= 1;
        continue;
      }
      if (result.outcome === 'needs-compaction') {
        await this.runCompaction('pressure', turn, { turn, step, pass });
        continue;
      }
      if (result.outcome === 'context-overflow' && !overflowRetried) {
        overflowRetried = true;
        if ((await this.runCompaction('context-overflow', turn, { turn, step, pass })) !== null) continue;
      }
      return result;
    }
  }

  /**
   * A spend cap was reached before a model call or a tool round: the turn pauses with nothing
   * running until the budget is raised (returns undefined: check again), the caller cancels
   * (the turn ends aborted) or the wait passes (the turn ends with `budget_exceeded`). A tenant's
   * cap is raised in the workers' config, which tells the workflow nothing: its pause checks the
   * tenant's spend again every so often (`tenantRecheckMs`, doubling), within the same wait.
   */
  private async pauseForBudget(turn: number, breach: StepBreach, pauses: number): Promise<ModelStepResult | undefined> {
    const state = this.state;
    const logged = state.budgetChanges;
    const waitMs = breach.waitMs ?? this.tunables.budgetWaitMs;
    const since = Date.now();
    const tenant = breach.scope === 'tenant';
    const until = tenant ? (this.tenantCapDeadline ??= since + waitMs) : since + waitMs;
    const recheckMs = Math.min(MAX_TENANT_RECHECK_MS, this.tunables.tenantRecheckMs * 2 ** Math.min(pauses, 10));
    const waitNow = Math.max(0, tenant ? Math.min(until - since, recheckMs) : until - since);
    state.pause({ reason: 'budget', since, until, breach });
    let raised: boolean;
    try {
      const ready = () => state.budgetChanges > logged || state.cancelRequested || state.stopped;
      raised = (waitNow > 0 ? await condition(ready, waitNow) : ready()) && !state.cancelRequested;
    } finally {
      state.endPause('model');
    }
    state.throwIfStopped();
    if (raised) return undefined;
    if (state.cancelRequested) return this.endPausedTurn(turn, { kind: 'aborted' });
    // The tenant's cap may have been raised meanwhile: the step checks again.
    if (tenant && Date.now() < until) return undefined;
    this.tenantCapDeadline = undefined;
    state.report(`turn ${turn}: budget_exceeded (${breach.scope} ${breach.cap})`);
    return this.endPausedTurn(turn, {
      kind: 'error',
      code: 'budget_exceeded',
      message: `the ${breach.scope} ${breach.cap} cap of ${breach.limit} was reached (${breach.used} used${breach.tool ? ` by repeated ${breach.tool} calls` : ''}) and the ${tenant ? "tenant's cap" : 'budget'} was not raised within ${waitMs} ms`,
    });
  }

  /**
   * The provider asked to wait longer than an activity should sleep (a reset minutes away, a
   * daily quota): the turn pauses on a durable timer with nothing running, then the step calls
   * again (returns undefined); a cancel ends the turn meanwhile. The same for a step that found
   * its tenant's share of the worker taken (`tenant`), for a moment.
   */
  private async pauseForRateLimit(
    turn: number,
    retryAfterMs: number,
    reason: 'rate_limit' | 'tenant',
  ): Promise<ModelStepResult | undefined> {
    const state = this.state;
    const since = Date.now();
    state.pause({ reason, since, until: since + retryAfterMs });
    try {
      await condition(() => state.cancelRequested || state.stopped, retryAfterMs);
    } finally {
      state.endPause('model');
    }
    state.throwIfStopped();
    return state.cancelRequested ? this.endPausedTurn(turn, { kind: 'aborted' }) : undefined;
  }

  /** Closes a paused turn; the step result that says how it ended. */
  private async endPausedTurn(turn: number, reason: EndTurnInput['reason']): Promise<ModelStepResult> {
    const end = await this.closeTurn(turn, reason);
    return {
      headSeq: this.state.headSeq,
      replySeq: end?.replySeq ?? null,
      toolCalls: [],
      outcome: reason.kind === 'aborted' ? 'aborted' : 'error',
      replayed: false,
      ...(end ? { turnEnd: end } : {}),
    };
  }

  /**
   * The tool half of a step: calls that wait for answers are answered first; then the calls
   * that may run run in parallel, and one append logs every result in call order.
   */
  private async runTools(turn: number, step: number, calls: ToolCallRef[]): Promise<ToolRound> {
    const state = this.state;
    const external = calls.some((c) => c.gate) ? await this.awaitAnswers(turn, step, calls) : [];
    if (external === 'cancelled') return external;
    const denied: DeniedCall[] = [];
    const runnable: ToolCallRef[] = [];
    for (const call of calls) {
      const decision = call.gate ? (state.decisionOf(call.callId)?.decision ?? call.answered) : undefined;
      if (decision === 'deny' || decision === 'expire') {
        const reason = state.decisionOf(call.callId)?.reason ?? call.reason;
        denied.push({
          callId: call.callId,
          callSeq: call.callSeq,
          decision,
          ...(reason !== undefined ? { reason } : {}),
          ...(call.gate === 'external' ? { external: true as const } : {}),
        });
      } else if (call.gate !== 'external') runnable.push(call);
    }
    state.enter('tools');
    const scope = this.enterScope();
    let ran: ToolRunRef[];
    try {
      ran = await scope.run(() =>
        Promise.all(
          runnable.map((call) =>
            this.act.tools.runTool({
              sessionId: this.input.sessionId,
              turn,
              step,
              callSeq: call.callSeq,
              maxAttempts: this.tunables.toolMaxAttempts,
            }),
          ),
        ),
      );
    } finally {
      this.leaveScope(scope);
    }
    return { refs: [...ran, ...external], denied };
  }

  /**
   * Waits until every gated call of the step is answered (or expired), logging answers as they
   * arrive. Returns the stored outputs of external calls, or 'cancelled'.
   */
  private async awaitAnswers(turn: number, step: number, calls: ToolCallRef[]): Promise<ToolRunRef[] | 'cancelled'> {
    const state = this.state;
    state.enter('waiting');
    state.awaitCalls(calls);
    // External results the log already holds (a run resuming the step): they are not asked for again.
    const external: ToolRunRef[] = calls.flatMap((c) =>
      c.gate === 'external' && c.result
        ? [{ callId: c.callId, callSeq: c.callSeq, ...c.result, external: true as const }]
        : [],
    );
    try {
      while (state.awaitsAnswers) {
        const unanswered = state.unansweredCalls();
        const ready = () => state.hasAnswers || state.cancelRequested || state.stopped;
        if (!ready() && unanswered.length > 0) {
          const wait = Math.min(...unanswered.map((c) => c.expiresAt ?? Number.POSITIVE_INFINITY)) - Date.now();
          if (!(wait > 0 && (await condition(ready, wait)))) state.expire(unanswered, Date.now());
        }
        if (state.cancelRequested) return 'cancelled';
        state.throwIfStopped();
        const answers = state.answersToLog();
        if (answers.length === 0) continue;
        const recorded = await this.act.local.recordAnswers({
          ...this.base,
          turn,
          step,
          knownHead: state.headSeq,
          answers,
        });
        state.atHead(recorded.headSeq);
        external.push(...recorded.external);
        for (const answer of answers) state.answered(answer);
      }
      return external;
    } finally {
      state.stopAwaiting();
    }
  }

  /** Runs one compaction bracket; failures are reported, never fatal to the turn. */
  private async runCompaction(
    trigger: CompactInput['trigger'],
    owner: number | null,
    key: CompactInput['key'],
  ): Promise<CompactResult | null> {
    const state = this.state;
    const previous = state.phase;
    state.enter('compacting');
    try {
      const done = await this.act.compactor.compact({
        ...this.base,
        key,
        trigger,
        turn: owner,
        knownHead: state.headSeq,
        maxAttempts: this.tunables.compactionMaxAttempts,
        ...(this.tunables.rateLimitPauseMs > 0 ? { pauseAfterMs: this.tunables.rateLimitPauseMs } : {}),
      });
      state.atHead(done.headSeq);
      if (done.error !== undefined) state.report(`compaction ${done.result?.compactionId ?? ''}: ${done.error}`);
      return done.result;
    } catch (error) {
      if (fatalOf(error)) throw error;
      const reported = `compaction: ${describeFailure(error)}`;
      state.report(reported);
      // The activity gave up (timeouts, crashes): close its bracket so no lock outlives it.
      const abandoned = await this.act.local.abandonCompaction({
        ...this.base,
        key,
        turn: owner,
        knownHead: state.headSeq,
        error: reported,
      });
      state.atHead(abandoned.headSeq);
      return null;
    } finally {
      state.enter(previous);
    }
  }

  /** Closes a turn that did not end by itself (the activity answers every open call first); how the log says it ended. */
  private async closeTurn(turn: number, reason: EndTurnInput['reason']): Promise<TurnEndRef | undefined> {
    const closed = await this.act.local.endTurn({ ...this.base, turn, knownHead: this.state.headSeq, reason });
    this.state.atHead(closed.headSeq);
    return closed.turnEnd;
  }

  /** Ends the turn after a failed (or cancelled) step: logged as aborted by the user, or as an error. */
  private async failTurn(turn: number, error: unknown, code: string): Promise<TurnEndRef | undefined> {
    if (fatalOf(error)) throw error;
    if (this.state.cancelRequested && isCancellation(error)) return this.closeTurn(turn, { kind: 'aborted' });
    const message = describeFailure(error);
    this.state.report(message);
    return this.closeTurn(turn, { kind: 'error', code, message });
  }

  /** Runs an operation whose failure may stop the session; returns undefined once it has. */
  private async guarded<T>(operation: () => Promise<T>, anyRefusal = false): Promise<T | undefined> {
    try {
      return await operation();
    } catch (error) {
      this.stopOn(error, anyRefusal);
      return undefined;
    }
  }

  /** Stops the session when `error` is a failure that stops it; rethrows any other. */
  private stopOn(error: unknown, anyRefusal = false): void {
    const fatal = fatalOf(error, anyRefusal);
    if (!fatal) throw error;
    this.state.stop(fatal);
    log.error('session stopped', { sessionId: this.input.sessionId, code: fatal.code, message: fatal.message });
  }

  /**
   * The scope a model step or a tool round runs in, which `cancel` cancels until
   * {@link leaveScope}. Its callers run it inline, not through an async wrapper (a wrapper's
   * promises are paid every step under the SDK's stack-trace hook).
   */
  private enterScope(): CancellationScope {
    this.currentScope = new CancellationScope();
    return this.currentScope;
  }

  private leaveScope(scope: CancellationScope): void {
    if (this.currentScope === scope) this.currentScope = undefined;
  }
}

/** The failure that stops the session, if `error` is one (an activity refused by the log; with `anyRefusal`, any non-retryable refusal). */
function fatalOf(error: unknown, anyRefusal = false): Fatal | undefined {
  const cause = error instanceof ActivityFailure ? error.cause : error;
  if (!(cause instanceof ApplicationFailure) || !cause.type) return undefined;
  if ((isSessionErrorCode(cause.type) && FATAL_CODES.has(cause.type)) || (anyRefusal && cause.nonRetryable))
    return { code: cause.type, message: cause.message };
  return undefined;
}

/** The code of an activity's application failure, if it has one. */
function failureCode(error: unknown): string | undefined {
  const cause = error instanceof ActivityFailure ? error.cause : error;
  return cause instanceof ApplicationFailure && cause.type ? cause.type : undefined;
}

function describeFailure(error: unknown): string {
  if (error instanceof ActivityFailure && error.cause) return error.cause.message;
  return error instanceof Error ? error.message : String(error);
}
