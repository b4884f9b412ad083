/**
 * The session workflow (DESIGN §5): one per session, id `session/<sessionId>`. It wires the
 * messages of api.ts to its state (session-state.ts) and runs the loop: wait for messages,
 * run a turn as model steps and tool rounds, compact when asked, continue as new when the
 * history grows. The conversation lives in the log, written by activities.
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
  setHandler,
  sleep,
  workflowInfo,
} from '@temporalio/workflow';
import type { SessionActivities } from '../activities/activities.js';
// The one error table: pure data, the only value workflow code takes from outside its folder.
import { FATAL_CODES, isSessionErrorCode } from '../session/errors.js';
import type {
  CompactInput,
  DeniedCall,
  EndTurnInput,
  ModelStepResult,
  ToolCallRef,
  ToolRunRef,
  TurnEndRef,
  WaitingStep,
} from '../engine/types.js';
import {
  DEFAULT_TUNABLES,
  cancelSignal,
  closeSignal,
  approveUpdate,
  compactUpdate,
  noteUpdate,
  openedUpdate,
  sendUpdate,
  statusQuery,
  toolResultUpdate,
  userMessageSignal,
  type CompactResult,
  type SendResult,
  type SessionTunables,
  type SessionWorkflowInput,
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
/** Backoff between tries of a turn the store could not log (doubling up to the cap). */
const NOT_LOGGED_FIRST_DELAY_MS = 1_000;
const NOT_LOGGED_MAX_DELAY_MS = 60_000;

/** A turn of which nothing reached the log: why, whether to try it again, and its messages. */
type NotLogged = { reason: Fatal; retry: boolean; messages: UserInput[] };

function activities(tunables: SessionTunables) {
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

export async function sessionWorkflow(input: SessionWorkflowInput): Promise<void> {
  const tunables: SessionTunables = { ...DEFAULT_TUNABLES, ...input.tunables };
  const info = workflowInfo();
  const runId = info.runId;
  const state = new SessionState(input.sessionId, runId, tunables, input.carry);
  const act = activities(tunables);
  const base = { sessionId: input.sessionId, runId };
  let currentScope: CancellationScope | undefined;

  setHandler(userMessageSignal, (message) => {
    try {
      state.validate(message);
    } catch (error) {
      // Signals cannot be refused; a bad one is dropped and reported in status.
      state.lastError = `dropped message: ${(error as Error).message}`;
      return;
    }
    state.enqueue(message);
  });
  setHandler(
    sendUpdate,
    async (message) => {
      state.enqueue(message);
      const done = state.wait(message.id);
      try {
        await condition(
          () =>
            state.resultOf(message.id) != null ||
            state.refusalOf(message.id) !== undefined ||
            state.fatal !== undefined,
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
    },
    { validator: (message) => state.validate(message) },
  );
  setHandler(
    approveUpdate,
    async (answer) => {
      await condition(() => state.knowsWaitingCalls || state.fatal !== undefined);
      state.throwIfStopped();
      if (!state.decisionOf(answer.callId)) {
        state.validateApproval(answer);
        if (!state.answers.has(answer.callId)) state.answers.set(answer.callId, { kind: 'approval', ...answer });
      }
      // The answer counts once it is logged; whichever came first is what every caller is told.
      await condition(() => state.decisionOf(answer.callId) !== undefined || state.fatal !== undefined);
      state.throwIfStopped();
      return state.decisionOf(answer.callId)!;
    },
    { validator: (answer) => state.validateApproval(answer) },
  );
  setHandler(
    toolResultUpdate,
    async (result) => {
      await condition(() => state.knowsWaitingCalls || state.fatal !== undefined);
      state.throwIfStopped();
      state.assertExternalWaiting(result.callId);
      state.answers.set(result.callId, {
        kind: 'external',
        callId: result.callId,
        output: result.output,
        isError: result.isError === true,
        ...(result.by !== undefined ? { by: result.by } : {}),
      });
      await condition(() => !state.awaiting.has(result.callId) || state.fatal !== undefined);
      state.throwIfStopped();
      return { callId: result.callId, accepted: true as const };
    },
    { validator: (result) => state.validateToolResult(result) },
  );
  setHandler(cancelSignal, () => {
    if (state.phase === 'waiting') {
      state.cancelRequested = true;
    } else if (state.phase === 'model' || state.phase === 'tools') {
      state.cancelRequested = true;
      currentScope?.cancel();
    }
  });
  setHandler(closeSignal, () => {
    state.closing = true;
  });
  setHandler(statusQuery, () => state.status());

  /** Runs an operation whose failure may stop the session; returns undefined once it has. */
  const guarded = async <T>(operation: () => Promise<T>, anyRefusal = false): Promise<T | undefined> => {
    try {
      return await operation();
    } catch (error) {
      const fatal = fatalOf(error, anyRefusal);
      if (!fatal) throw error;
      state.stop(fatal);
      log.error('session stopped', { sessionId: input.sessionId, code: fatal.code, message: fatal.message });
      return undefined;
    }
  };

  const runInScope = async <T>(fn: () => Promise<T>): Promise<T> => {
    const scope = new CancellationScope();
    currentScope = scope;
    try {
      return await scope.run(fn);
    } finally {
      currentScope = undefined;
    }
  };

  /** Runs one compaction bracket; failures are reported, never fatal to the turn. */
  const runCompaction = async (
    trigger: CompactInput['trigger'],
    owner: number | null,
    key: CompactInput['key'],
  ): Promise<CompactResult | null> => {
    const previous = state.phase;
    state.phase = 'compacting';
    try {
      const done = await act.compactor.compact({
        ...base,
        key,
        trigger,
        turn: owner,
        knownHead: state.headSeq,
        maxAttempts: tunables.compactionMaxAttempts,
      });
      state.headSeq = done.headSeq;
      if (done.error !== undefined) state.lastError = `compaction ${done.result?.compactionId ?? ''}: ${done.error}`;
      return done.result;
    } catch (error) {
      if (fatalOf(error)) throw error;
      state.lastError = `compaction: ${describeFailure(error)}`;
      // The activity gave up (timeouts, crashes): close its bracket so no lock outlives it.
      state.headSeq = (
        await act.local.abandonCompaction({
          ...base,
          key,
          turn: owner,
          knownHead: state.headSeq,
          error: state.lastError,
        })
      ).headSeq;
      return null;
    } finally {
      state.phase = previous;
    }
  };

  /**
   * One model step. The step owns context pressure itself (the engine's pressure ladder, and one
   * more climb and call after a provider's overflow refusal). Workers of earlier versions handed
   * it back instead (`needs-compaction`, `context-overflow`): those outcomes, still found in the
   * histories of workflows they ran, are served here as they were then, so replay is unchanged.
   */
  const modelCall = async (turn: number, step: number, entering: UserInput[]): Promise<ModelStepResult> => {
    let overflowRetried = false;
    for (let pass = 0; ; pass++) {
      const result = await runInScope(() =>
        act.model.modelStep({
          ...base,
          turn,
          step,
          knownHead: state.headSeq,
          entering,
          maxAttempts: tunables.modelMaxAttempts,
          pass,
          approvalTimeoutMs: tunables.approvalTimeoutMs,
        }),
      );
      state.headSeq = result.headSeq;
      if (result.pressure) state.pressure = result.pressure;
      if (result.outcome === 'needs-compaction') {
        await runCompaction('pressure', turn, { turn, step, pass });
        continue;
      }
      if (result.outcome === 'context-overflow' && !overflowRetried) {
        overflowRetried = true;
        if ((await runCompaction('context-overflow', turn, { turn, step, pass })) !== null) continue;
      }
      return result;
    }
  };

  setHandler(compactUpdate, async () => {
    state.compactRequests += 1;
    try {
      await condition(
        () => (state.phase === 'idle' && !state.compacting && !state.noting) || state.fatal !== undefined,
      );
      state.throwIfStopped();
      state.compacting = true;
      try {
        const result = await guarded(() => runCompaction('manual', null, { manual: ++state.manualCompactions }));
        state.throwIfStopped();
        return result ?? null;
      } finally {
        state.compacting = false;
      }
    } finally {
      state.compactRequests -= 1;
    }
  });

  setHandler(
    noteUpdate,
    async (note) => {
      state.noteRequests += 1;
      try {
        // Between turns only: a turn's or a compaction's activities expect the head they left.
        await condition(
          () =>
            ((state.phase === 'idle' || state.phase === 'closed') && !state.compacting && !state.noting) ||
            state.fatal !== undefined,
        );
        state.throwIfStopped();
        state.noting = true;
        try {
          const logged = await act.local.logNote({ ...base, knownHead: state.headSeq, note });
          state.headSeq = logged.headSeq;
          return { headSeq: logged.headSeq };
        } finally {
          state.noting = false;
        }
      } finally {
        state.noteRequests -= 1;
      }
    },
    { validator: (note) => state.validateNote(note) },
  );

  /** Closes a turn that did not end by itself (the activity answers every open call first); how the log says it ended. */
  const closeTurn = async (turn: number, reason: EndTurnInput['reason']): Promise<TurnEndRef | undefined> => {
    const closed = await act.local.endTurn({ ...base, turn, knownHead: state.headSeq, reason });
    state.headSeq = closed.headSeq;
    return closed.turnEnd;
  };

  /** Ends the turn after a failed (or cancelled) step: logged as aborted by the user, or as an error. */
  const failTurn = async (turn: number, error: unknown, code: string): Promise<TurnEndRef | undefined> => {
    if (fatalOf(error)) throw error;
    if (state.cancelRequested && isCancellation(error)) return closeTurn(turn, { kind: 'aborted' });
    state.lastError = describeFailure(error);
    return closeTurn(turn, { kind: 'error', code, message: state.lastError });
  };

  /**
   * Waits until every gated call of the step is answered (or expired), logging answers as they
   * arrive. Returns the stored outputs of external calls, or 'cancelled'.
   */
  const awaitAnswers = async (
    turn: number,
    step: number,
    calls: ToolCallRef[],
  ): Promise<ToolRunRef[] | 'cancelled'> => {
    state.phase = 'waiting';
    for (const call of calls) if (call.gate && call.answered === undefined) state.awaiting.set(call.callId, call);
    // External results the log already holds (a run resuming the step): they are not asked for again.
    const external: ToolRunRef[] = calls.flatMap((c) =>
      c.gate === 'external' && c.result
        ? [{ callId: c.callId, callSeq: c.callSeq, ...c.result, external: true as const }]
        : [],
    );
    try {
      while (state.awaiting.size > 0) {
        const unanswered = [...state.awaiting.values()].filter((c) => !state.answers.has(c.callId));
        const ready = () => state.answers.size > 0 || state.cancelRequested || state.fatal !== undefined;
        if (!ready() && unanswered.length > 0) {
          const wait = Math.min(...unanswered.map((c) => c.expiresAt ?? Number.POSITIVE_INFINITY)) - Date.now();
          if (!(wait > 0 && (await condition(ready, wait)))) {
            for (const c of unanswered)
              if ((c.expiresAt ?? Number.POSITIVE_INFINITY) <= Date.now())
                state.answers.set(c.callId, {
                  kind: 'approval',
                  callId: c.callId,
                  decision: 'expire',
                  reason: 'expired',
                });
          }
        }
        if (state.cancelRequested) return 'cancelled';
        state.throwIfStopped();
        const answers = [...state.answers.values()];
        if (answers.length === 0) continue;
        const recorded = await act.local.recordAnswers({ ...base, turn, step, knownHead: state.headSeq, answers });
        state.headSeq = recorded.headSeq;
        external.push(...recorded.external);
        for (const answer of answers) {
          state.answers.delete(answer.callId);
          state.answered(answer);
        }
      }
      return external;
    } finally {
      state.awaiting.clear();
      state.answers.clear();
    }
  };

  /**
   * The tool half of a step: calls that wait for answers are answered first; then the calls
   * that may run run in parallel, and one append logs every result in call order.
   */
  const runTools = async (
    turn: number,
    step: number,
    calls: ToolCallRef[],
  ): Promise<{ refs: ToolRunRef[]; denied: DeniedCall[] } | 'cancelled'> => {
    const external = calls.some((c) => c.gate) ? await awaitAnswers(turn, step, calls) : [];
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
    state.phase = 'tools';
    const ran = await runInScope(() =>
      Promise.all(
        runnable.map((call) =>
          act.tools.runTool({
            sessionId: input.sessionId,
            turn,
            step,
            callSeq: call.callSeq,
            maxAttempts: tunables.toolMaxAttempts,
          }),
        ),
      ),
    );
    return { refs: [...ran, ...external], denied };
  };

  /** Runs one turn over the queued messages (or resumes one waiting for answers); returns how the log says it ended. */
  const runTurn = async (
    turn: number,
    turnIds: string[],
    resume?: WaitingStep,
  ): Promise<SendResult | { notLogged: NotLogged }> => {
    let replySeq: number | null = null;
    let outcome: SendResult['outcome'] = 'completed';
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
        state.phase = 'model';
        try {
          result = await modelCall(turn, step, entering);
        } catch (error) {
          const end = await failTurn(turn, error, 'MODEL_STEP_FAILED');
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
      state.headSeq = result.headSeq;
      if (result.replySeq !== null) replySeq = result.replySeq;
      if (result.outcome !== 'tools') {
        if (result.outcome === 'context-overflow') {
          state.lastError = result.error?.message;
          return ended(
            await closeTurn(turn, {
              kind: 'error',
              code: 'context_overflow',
              message: result.error?.message ?? 'context overflow',
            }),
            'error',
          );
        }
        outcome =
          result.outcome === 'max-tokens' || result.outcome === 'aborted' || result.outcome === 'error'
            ? result.outcome
            : 'completed';
        if (result.error) state.lastError = result.error.message;
        return ended(result.turnEnd, outcome);
      }
      state.phase = 'tools';
      let tools: Awaited<ReturnType<typeof runTools>>;
      try {
        tools = await runTools(turn, step, result.toolCalls);
      } catch (error) {
        return ended(
          await failTurn(turn, error, 'TOOL_FAILED'),
          state.cancelRequested && isCancellation(error) ? 'aborted' : 'error',
        );
      }
      if (tools === 'cancelled') return ended(await closeTurn(turn, { kind: 'aborted' }), 'aborted');
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
      state.headSeq = appended.headSeq;
      if (lastStep) return ended(appended.turnEnd, 'max-steps');
    }
  };

  setHandler(openedUpdate, async () => {
    await condition(() => state.phase !== 'starting' || state.fatal !== undefined);
    state.throwIfStopped();
    return { headSeq: state.headSeq };
  });

  // A run that cannot open its session (refused log, bad seed) stops with the reason.
  const opened = await guarded(
    () =>
      act.local.openRun({
        sessionId: input.sessionId,
        workflowId: info.workflowId,
        runId,
        ...(input.seed ? { seed: input.seed } : {}),
      }),
    true,
  );
  if (opened) state.opened(opened);

  if (state.resume && !state.fatal) {
    const resumed = state.resume;
    state.resume = undefined;
    state.turn = resumed.turn;
    state.phase = 'turn';
    const result = await guarded(() => runTurn(resumed.turn, [], resumed));
    if (result && !('notLogged' in result)) state.answerTurn(resumed.turn, result);
    state.phase = 'idle';
  }

  let notLoggedDelayMs = NOT_LOGGED_FIRST_DELAY_MS;
  while (!state.fatal) {
    const idle = tunables.idleTimeoutMs > 0 ? tunables.idleTimeoutMs : undefined;
    const ready = () => (state.queue.length > 0 || state.closing) && !state.compacting && !state.noting;
    const woke = idle === undefined ? (await condition(ready), true) : await condition(ready, idle);
    if (state.queue.length === 0) {
      if (state.closing || !woke) break;
      continue;
    }
    state.turn += 1;
    state.turnsThisRun += 1;
    state.cancelRequested = false;
    state.phase = 'turn';
    const turn = state.turn;
    const turnIds: string[] = [];
    const result = await guarded(() => runTurn(turn, turnIds));
    if (!result) break;
    state.phase = 'idle';
    if ('notLogged' in result) {
      // Nothing of this turn is in the log: the number is free again.
      state.turn -= 1;
      const { reason, retry, messages } = result.notLogged;
      if (retry) {
        // The store refused every attempt: the messages wait (their sends too) and the turn is tried again later.
        state.requeue(messages);
        state.lastError = `turn ${turn} could not be logged, trying again in ${notLoggedDelayMs} ms: ${reason.message}`;
        await sleep(notLoggedDelayMs);
        notLoggedDelayMs = Math.min(notLoggedDelayMs * 2, NOT_LOGGED_MAX_DELAY_MS);
      } else {
        state.refuse(turnIds, { code: reason.code, message: `the message was not logged: ${reason.message}` });
      }
      continue;
    }
    notLoggedDelayMs = NOT_LOGGED_FIRST_DELAY_MS;
    for (const id of turnIds) state.remember(id, result);

    const suggested = workflowInfo().continueAsNewSuggested;
    // Queued signal messages are carried over; a waiting `send` keeps the run until it is answered.
    // A send this turn answered still counts as waiting here (its handler resumes later in this
    // activation), so only a send whose message is unanswered blocks; otherwise a session driven by
    // `send` would never continue as new.
    const wantsNewRun = suggested || state.turnsThisRun >= tunables.continueAsNewAfterTurns;
    // A close request ends this run soon anyway; a pending manual compaction runs here first.
    const canLeave = () => !state.closing && state.compactRequests === 0 && state.noteRequests === 0;
    if (
      wantsNewRun &&
      canLeave() &&
      (state.waiting === 0 || (!state.unanswered() && patched(CAN_AFTER_ANSWERED_SENDS)))
    ) {
      state.phase = 'closing';
      // A `send` or `compact` arriving meanwhile must be served by this run (its handler would
      // otherwise wait forever for a turn this run never runs): go back to the loop instead.
      await condition(() => allHandlersFinished() || state.unanswered() || !canLeave());
      if (!allHandlersFinished()) {
        state.phase = 'idle';
        continue;
      }
      log.info('continuing as new', { sessionId: input.sessionId, turn: state.turn, headSeq: state.headSeq });
      await continueAsNew<typeof sessionWorkflow>({
        sessionId: input.sessionId,
        ...(input.tunables ? { tunables: input.tunables } : {}),
        carry: state.carry(),
      });
    }
  }
  state.phase = 'closed';
  await condition(allHandlersFinished);
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
