/**
 * One run of the session workflow (DESIGN §5): the turn loop. It opens the session, finishes a
 * turn the log shows waiting, then runs a turn per batch of queued messages (model steps and tool
 * rounds) until the session closes, idles out, stops, or continues as new (continue-as-new.ts).
 * The concerns beside it keep their own state and handle their own messages: the queue
 * (message-queue.ts), the calls' answers (call-answers.ts), pauses (pauses.ts), the tool round
 * (tool-round.ts) and the work between turns (between-turns.ts); session-workflow.ts wires the
 * messages of api.ts to them. The conversation lives in the log, written by activities; the run
 * holds only ids, counters and the phase.
 *
 * Determinism: the order of activities, timers and conditions here is what recorded histories
 * hold (test/workflows/replay.test.ts). A change to that order goes behind `patched()` with a
 * note (patches.ts). Paths kept only for histories of earlier versions are in replay-only.ts.
 */
import { allHandlersFinished, condition, isCancellation, patched, sleep, workflowInfo } from '@temporalio/workflow';
import type { EndTurnInput, ModelStepResult, TurnEndRef, WaitingStep } from '../engine/types.js';
import {
  DEFAULT_TUNABLES,
  type SendResult,
  type SessionStatus,
  type SessionWorkflowInput,
  type UserInput,
} from './api.js';
import { BetweenTurns } from './between-turns.js';
import { CallAnswers } from './call-answers.js';
import { ContinueAsNew } from './continue-as-new.js';
import { describeFailure, failureCode, fatalOf, guarded, stopOn, type Fatal } from './failures.js';
import { MessageQueue } from './message-queue.js';
import { TURN_NOT_LOGGED } from './patches.js';
import { Pauses } from './pauses.js';
import { compactForReplayOnlyOutcome, isReplayOnlyOutcome, overflowEndReason } from './replay-only.js';
import { RunningWork, activityProxies, type RunContext } from './run-context.js';
import { SessionState } from './session-state.js';
import { ToolRound, type ToolRoundResult } from './tool-round.js';

/** Backoff between tries of a turn the store could not log (doubling up to the cap). */
const NOT_LOGGED_FIRST_DELAY_MS = 1_000;
const NOT_LOGGED_MAX_DELAY_MS = 60_000;

/** A turn of which nothing reached the log: why, whether to try it again, and its messages. */
type NotLogged = { reason: Fatal; retry: boolean; messages: UserInput[] };

/** The session workflow's run: `run()` is the loop; its parts handle the messages. */
export class SessionRun {
  readonly messages: MessageQueue;
  readonly calls: CallAnswers;
  readonly betweenTurns: BetweenTurns;
  private readonly ctx: RunContext;
  private readonly state: SessionState;
  private readonly pauses: Pauses;
  private readonly tools: ToolRound;
  private readonly newRun: ContinueAsNew;

  constructor(private readonly input: SessionWorkflowInput) {
    const tunables = { ...DEFAULT_TUNABLES, ...input.tunables };
    const { runId } = workflowInfo();
    this.state = new SessionState(input.sessionId, runId, input.carry);
    this.ctx = {
      input,
      tunables,
      state: this.state,
      act: activityProxies(tunables),
      base: { sessionId: input.sessionId, runId },
      work: new RunningWork(),
    };
    this.messages = new MessageQueue(this.state, tunables, input.carry);
    this.calls = new CallAnswers(this.state, tunables);
    this.pauses = new Pauses(this.state, tunables);
    this.betweenTurns = new BetweenTurns(this.ctx, this.pauses, (message) => this.messages.validate(message));
    this.tools = new ToolRound(this.ctx, this.calls);
    this.newRun = new ContinueAsNew(this.ctx, this.messages, this.betweenTurns);
  }

  // ---- Messages (wired by session-workflow.ts) ----

  /** Signal `cancel`: aborts the running turn (its running activities are cancelled). */
  cancel(): void {
    if (this.state.requestCancel()) this.ctx.work.cancel();
  }

  /** Signal `close`: the run ends after the current turn. */
  close(): void {
    this.state.requestClose();
  }

  status(): SessionStatus {
    return this.state.status(this.messages.pending, this.pauses.current);
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
    const { state, messages, betweenTurns } = this;
    const { tunables, act } = this.ctx;
    const info = workflowInfo();
    // A run that cannot open its session (refused log, bad seed) stops with the reason.
    const opened = await guarded(
      state,
      () =>
        act.local.openRun({
          sessionId: this.input.sessionId,
          workflowId: info.workflowId,
          runId: info.runId,
          ...(this.input.seed ? { seed: this.input.seed } : {}),
        }),
      true,
    );
    if (opened) {
      this.calls.opened(opened.waiting);
      messages.opened(opened.recent, opened.waiting);
      state.opened(opened);
    }

    const resumed = state.takeResume();
    if (resumed) {
      const result = await guarded(state, () => this.runTurn(resumed.turn, [], resumed));
      if (result && !('notLogged' in result)) messages.answerTurn(resumed.turn, result);
      state.enter('idle');
    }

    let notLoggedDelayMs = NOT_LOGGED_FIRST_DELAY_MS;
    while (!state.stopped) {
      const idle = tunables.idleTimeoutMs > 0 ? tunables.idleTimeoutMs : undefined;
      const ready = () => (messages.hasQueued || state.closing) && !betweenTurns.busy;
      const woke = idle === undefined ? (await condition(ready), true) : await condition(ready, idle);
      if (!messages.hasQueued) {
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
        stopOn(state, error);
        break;
      }
      state.enter('idle');
      if ('notLogged' in result) {
        // Nothing of this turn is in the log: the number is free again.
        state.giveTurnBack();
        const { reason, retry, messages: notTaken } = result.notLogged;
        if (retry) {
          // The store refused every attempt: the messages wait (their sends too) and the turn is tried again later.
          messages.requeue(notTaken);
          state.report(`turn ${turn} could not be logged, trying again in ${notLoggedDelayMs} ms: ${reason.message}`);
          await sleep(notLoggedDelayMs);
          notLoggedDelayMs = Math.min(notLoggedDelayMs * 2, NOT_LOGGED_MAX_DELAY_MS);
        } else {
          messages.refuse(turnIds, { code: reason.code, message: `the message was not logged: ${reason.message}` });
        }
        continue;
      }
      notLoggedDelayMs = NOT_LOGGED_FIRST_DELAY_MS;
      for (const id of turnIds) messages.remember(id, result);
      if (this.newRun.due() && (await this.newRun.whenFree())) continue;
    }
    state.enter('closed');
    await condition(() => allHandlersFinished() && !betweenTurns.hasDeferredWork);
  }

  /** Runs one turn over the queued messages (or resumes one waiting for answers); returns how the log says it ended. */
  private async runTurn(
    turn: number,
    turnIds: string[],
    resume?: WaitingStep,
  ): Promise<SendResult | { notLogged: NotLogged }> {
    const { state, messages } = this;
    const { act, base, tunables } = this.ctx;
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
        const entering = messages.takeEntering(step);
        for (const m of entering) {
          turnIds.push(m.id);
          messages.remember(m.id, null);
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
          // REPLAY-ONLY (replay-only.ts): a step of an earlier engine still overflowed after its compaction.
          state.report(result.error?.message);
          return ended(await this.closeTurn(turn, overflowEndReason(result)), 'error');
        }
        const outcome =
          result.outcome === 'max-tokens' || result.outcome === 'aborted' || result.outcome === 'error'
            ? result.outcome
            : 'completed';
        if (result.error) state.report(result.error.message);
        return ended(result.turnEnd, outcome);
      }
      state.enter('tools');
      let tools: ToolRoundResult;
      try {
        tools = await this.tools.run(turn, step, result.toolCalls);
      } catch (error) {
        return ended(
          await this.failTurn(turn, error, 'TOOL_FAILED'),
          state.cancelRequested && isCancellation(error) ? 'aborted' : 'error',
        );
      }
      if (tools === 'cancelled') return ended(await this.closeTurn(turn, { kind: 'aborted' }), 'aborted');
      const lastStep = step >= tunables.maxStepsPerTurn;
      const appended = await act.local.appendToolResults({
        ...base,
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
   * more climb and call after a provider's overflow refusal); a spend cap or a long retry-after
   * pauses the turn (pauses.ts) and the same pass goes on after it.
   */
  private async modelStep(turn: number, step: number, entering: UserInput[]): Promise<ModelStepResult> {
    const { state, pauses } = this;
    const { act, base, tunables, work } = this.ctx;
    let overflowRetried = false;
    let paused = 0;
    for (let pass = 0; ; pass++) {
      const scope = work.enter();
      let result: ModelStepResult;
      try {
        result = await scope.run(() =>
          act.model.modelStep({
            ...base,
            turn,
            step,
            knownHead: state.headSeq,
            entering,
            maxAttempts: tunables.modelMaxAttempts,
            pass,
            approvalTimeoutMs: tunables.approvalTimeoutMs,
            ...(paused > 0 ? { pauses: paused } : {}),
            ...(tunables.rateLimitPauseMs > 0 ? { pauseAfterMs: tunables.rateLimitPauseMs } : {}),
          }),
        );
      } finally {
        work.leave(scope);
      }
      state.atHead(result.headSeq);
      state.observePressure(result.pressure);
      if (result.outcome !== 'budget') pauses.stepNotCapped();
      if (result.outcome === 'budget' || result.outcome === 'rate-limited') {
        const end =
          result.outcome === 'budget'
            ? await pauses.forBudget(turn, result.breach!, paused)
            : await pauses.forRateLimit(result.retryAfterMs!, result.waitingFor ?? 'rate_limit');
        if (end !== 'go-on') return this.endPausedTurn(turn, end.endTurn);
        // The same pass goes on (its op keys hold what it logged before the pause).
        paused += 1;
        pass -= 1;
        continue;
      }
      if (isReplayOnlyOutcome(result.outcome)) {
        // REPLAY-ONLY (replay-only.ts): a step of an earlier engine asked for a compaction.
        const again = await compactForReplayOnlyOutcome(this.ctx, result.outcome, overflowRetried, {
          turn,
          step,
          pass,
        });
        if (result.outcome === 'context-overflow') overflowRetried = true;
        if (again) continue;
      }
      return result;
    }
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

  /** Closes a turn that did not end by itself (the activity answers every open call first); how the log says it ended. */
  private async closeTurn(turn: number, reason: EndTurnInput['reason']): Promise<TurnEndRef | undefined> {
    const closed = await this.ctx.act.local.endTurn({ ...this.ctx.base, turn, knownHead: this.state.headSeq, reason });
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
}
