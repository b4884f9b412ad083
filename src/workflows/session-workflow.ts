/**
 * The session workflow (DESIGN §5): one per session, id `session/<sessionId>`. It holds only
 * orchestration state (queue of message ids and bounded texts, head seq, turn, flags); the
 * conversation lives in the log, written by activities.
 */
import {
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  allHandlersFinished,
  condition,
  continueAsNew,
  isCancellation,
  proxyActivities,
  proxyLocalActivities,
  setHandler,
  workflowInfo,
  log,
  patched,
} from '@temporalio/workflow';
import type { SessionActivities } from '../activities/session-activities.js';
import type { EndTurnInput, ModelStepResult, ToolRunRef } from '../activities/types.js';
import {
  DEFAULT_TUNABLES,
  cancelSignal,
  closeSignal,
  compactUpdate,
  sendUpdate,
  statusQuery,
  userMessageSignal,
  utf8Length,
  type CompactResult,
  type SendResult,
  type SessionPhase,
  type SessionTunables,
  type SessionWorkflowInput,
  type UserInput,
} from './api.js';

const MAX_RECENT_IDS = 256;
/** Patch id: continue-as-new no longer waits for `send`s that the finished turn already answered. */
const CAN_AFTER_ANSWERED_SENDS = 'continue-as-new-after-answered-sends';

export async function sessionWorkflow(input: SessionWorkflowInput): Promise<void> {
  const tunables: SessionTunables = { ...DEFAULT_TUNABLES, ...input.tunables };
  const info = workflowInfo();
  const runId = info.runId;

  const local = proxyLocalActivities<SessionActivities>({
    startToCloseTimeout: tunables.appendStartToCloseMs,
    retry: { maximumAttempts: 10, initialInterval: 200, maximumInterval: 5_000 },
  });
  const model = proxyActivities<SessionActivities>({
    startToCloseTimeout: tunables.modelStartToCloseMs,
    heartbeatTimeout: tunables.modelHeartbeatMs,
    cancellationType: 'WAIT_CANCELLATION_COMPLETED',
    retry: { maximumAttempts: tunables.modelMaxAttempts, initialInterval: 1_000, maximumInterval: 30_000, nonRetryableErrorTypes: ['SEQ_CONFLICT', 'INVALID_ARGUMENT'] },
  });
  const compactor = proxyActivities<SessionActivities>({
    startToCloseTimeout: tunables.modelStartToCloseMs,
    heartbeatTimeout: tunables.modelHeartbeatMs,
    retry: {
      maximumAttempts: tunables.compactionMaxAttempts,
      initialInterval: 1_000,
      maximumInterval: 30_000,
      nonRetryableErrorTypes: ['SEQ_CONFLICT', 'INVALID_ARGUMENT', 'NOT_CONFIGURED'],
    },
  });
  const tools = proxyActivities<SessionActivities>({
    startToCloseTimeout: tunables.toolStartToCloseMs,
    heartbeatTimeout: Math.max(tunables.modelHeartbeatMs, 5_000),
    cancellationType: 'WAIT_CANCELLATION_COMPLETED',
    retry: { maximumAttempts: tunables.toolMaxAttempts, initialInterval: 1_000, maximumInterval: 30_000 },
  });

  const queue: UserInput[] = [...(input.carry?.queue ?? [])];
  // Recently seen message ids and, once answered, their results (bounded, carried across runs).
  const results = new Map<string, SendResult | null>();
  for (const r of input.carry?.recent ?? []) results.set(r.id, r.result);
  let waiting = 0;
  /** Message ids that `send` handlers wait on, with how many handlers wait on each. */
  const waitingFor = new Map<string, number>();
  let headSeq = input.carry?.headSeq ?? 0;
  let turn = input.carry?.turn ?? 0;
  let phase: SessionPhase = 'starting';
  let closing = false;
  let cancelRequested = false;
  let lastError: string | undefined;
  let currentScope: CancellationScope | undefined;
  let compacting = false;
  let compactRequests = 0;
  let manualCompactions = 0;
  let pressure: { tokens: number; contextWindow: number; budget: number } | undefined;

  const known = (id: string): boolean => results.has(id) || queue.some((m) => m.id === id);
  const remember = (id: string, result: SendResult | null): void => {
    results.delete(id);
    results.set(id, result);
    while (results.size > MAX_RECENT_IDS) results.delete(results.keys().next().value as string);
  };
  const validate = (message: UserInput): void => {
    if (typeof message?.id !== 'string' || message.id.length === 0 || message.id.length > 128) {
      throw ApplicationFailure.nonRetryable('message id must be a string of 1-128 characters', 'INVALID_MESSAGE');
    }
    if (typeof message.text !== 'string' || message.text.trim().length === 0) {
      throw ApplicationFailure.nonRetryable('message text must not be empty', 'EMPTY_MESSAGE');
    }
    const bytes = utf8Length(message.text);
    if (bytes > tunables.maxMessageBytes) {
      throw ApplicationFailure.nonRetryable(`message is ${bytes} bytes; the limit is ${tunables.maxMessageBytes}`, 'MESSAGE_TOO_LARGE');
    }
    if (closing) throw ApplicationFailure.nonRetryable('session is closing and accepts no more messages', 'SESSION_CLOSED');
  };
  const enqueue = (message: UserInput): void => {
    if (known(message.id)) return;
    queue.push({ id: message.id, text: message.text });
  };

  setHandler(userMessageSignal, (message) => {
    try {
      validate(message);
    } catch (error) {
      // Signals cannot be refused; a bad one is dropped and reported in status.
      lastError = `dropped message: ${(error as Error).message}`;
      return;
    }
    enqueue(message);
  });
  setHandler(
    sendUpdate,
    async (message) => {
      enqueue(message);
      waiting += 1;
      waitingFor.set(message.id, (waitingFor.get(message.id) ?? 0) + 1);
      try {
        await condition(() => results.get(message.id) != null);
        return results.get(message.id)!;
      } finally {
        waiting -= 1;
        const left = (waitingFor.get(message.id) ?? 1) - 1;
        if (left > 0) waitingFor.set(message.id, left);
        else waitingFor.delete(message.id);
      }
    },
    { validator: validate },
  );
  setHandler(cancelSignal, () => {
    if (phase === 'model' || phase === 'tools') {
      cancelRequested = true;
      currentScope?.cancel();
    }
  });
  setHandler(closeSignal, () => {
    closing = true;
  });
  setHandler(statusQuery, () => ({
    sessionId: input.sessionId,
    headSeq,
    turn,
    phase,
    pending: queue.length,
    tokens: pressure?.tokens ?? null,
    contextWindow: pressure?.contextWindow ?? null,
    pressure: pressure ? Math.round((pressure.tokens / pressure.budget) * 1000) / 1000 : null,
    runId,
    ...(lastError !== undefined ? { lastError } : {}),
  }));

  const opened = await local.openRun({ sessionId: input.sessionId, workflowId: info.workflowId, runId });
  headSeq = opened.headSeq;
  turn = Math.max(turn, opened.lastTurn);
  for (const r of opened.recent) {
    if (!results.get(r.id)) remember(r.id, { turn: r.turn, replySeq: r.replySeq, outcome: r.outcome });
  }
  // A message carried over or re-sent that the log already holds was answered before.
  for (let i = queue.length - 1; i >= 0; i--) if (results.has(queue[i]!.id)) queue.splice(i, 1);
  phase = 'idle';

  const runInScope = async <T>(fn: () => Promise<T>): Promise<T> => {
    const scope = new CancellationScope();
    currentScope = scope;
    try {
      return await scope.run(fn);
    } finally {
      currentScope = undefined;
    }
  };

  /** Runs one compaction bracket with a deterministic id; failures are reported, never fatal. */
  const runCompaction = async (trigger: 'pressure' | 'context-overflow' | 'manual', turnOwner: number | null, compactionId: string): Promise<CompactResult | null> => {
    const previous = phase;
    phase = 'compacting';
    try {
      const done = await compactor.compact({
        sessionId: input.sessionId,
        runId,
        compactionId,
        trigger,
        turn: turnOwner,
        knownHead: headSeq,
        maxAttempts: tunables.compactionMaxAttempts,
      });
      headSeq = done.headSeq;
      if (done.error !== undefined) lastError = `compaction ${compactionId}: ${done.error}`;
      return done.result;
    } catch (error) {
      lastError = `compaction ${compactionId}: ${describeFailure(error)}`;
      // The activity gave up (timeouts, crashes): close its bracket so no lock outlives it.
      headSeq = (
        await local.abandonCompaction({ sessionId: input.sessionId, runId, compactionId, turn: turnOwner, knownHead: headSeq, error: lastError })
      ).headSeq;
      return null;
    } finally {
      phase = previous;
    }
  };

  /**
   * One model step, with pressure handling: compaction when the meter asks for it, and one
   * overflow compaction plus retry when the provider reports a context overflow.
   */
  const modelCall = async (turnNo: number, step: number, entering: UserInput[]): Promise<ModelStepResult> => {
    let overflowRetried = false;
    for (let pass = 0; ; pass++) {
      const result = await runInScope(() =>
        model.modelStep({ sessionId: input.sessionId, runId, turn: turnNo, step, knownHead: headSeq, entering, maxAttempts: tunables.modelMaxAttempts, pass }),
      );
      headSeq = result.headSeq;
      if (result.pressure) pressure = result.pressure;
      const compactionId = `${runId}.t${turnNo}.s${step}.p${pass}`;
      if (result.outcome === 'needs-compaction') {
        await runCompaction('pressure', turnNo, compactionId);
        continue;
      }
      if (result.outcome === 'context-overflow' && !overflowRetried) {
        overflowRetried = true;
        if ((await runCompaction('context-overflow', turnNo, compactionId)) !== null) continue;
      }
      return result;
    }
  };

  setHandler(compactUpdate, async () => {
    compactRequests += 1;
    try {
      await condition(() => phase === 'idle' && !compacting);
      compacting = true;
      try {
        return await runCompaction('manual', null, `${runId}.m${++manualCompactions}`);
      } finally {
        compacting = false;
      }
    } finally {
      compactRequests -= 1;
    }
  });

  /** Closes a turn that did not end by itself (the activity answers every open call first). */
  const closeTurn = async (turnNo: number, reason: EndTurnInput['reason']): Promise<void> => {
    headSeq = (await local.endTurn({ sessionId: input.sessionId, runId, turn: turnNo, knownHead: headSeq, reason })).headSeq;
  };

  /** Ends the turn after a failed (or cancelled) step: logged as aborted by the user, or as an error. */
  const failTurn = async (turnNo: number, error: unknown, code: string): Promise<'aborted' | 'error'> => {
    if (cancelRequested && isCancellation(error)) {
      await closeTurn(turnNo, { kind: 'aborted' });
      return 'aborted';
    }
    lastError = describeFailure(error);
    await closeTurn(turnNo, { kind: 'error', code, message: lastError });
    return 'error';
  };

  let turnsThisRun = 0;
  for (;;) {
    const idle = tunables.idleTimeoutMs > 0 ? tunables.idleTimeoutMs : undefined;
    const ready = () => (queue.length > 0 || closing) && !compacting;
    const woke = idle === undefined ? (await condition(ready), true) : await condition(ready, idle);
    if (queue.length === 0) {
      if (closing || !woke) break;
      continue;
    }
    turn += 1;
    turnsThisRun += 1;
    cancelRequested = false;
    const turnIds: string[] = [];
    let replySeq: number | null = null;
    let outcome: SendResult['outcome'] = 'completed';
    phase = 'turn';
    for (let step = 1; ; step++) {
      const entering = queue.splice(0, queue.length);
      for (const m of entering) {
        turnIds.push(m.id);
        remember(m.id, null);
      }
      phase = 'model';
      let result: ModelStepResult;
      try {
        result = await modelCall(turn, step, entering);
      } catch (error) {
        outcome = await failTurn(turn, error, 'MODEL_STEP_FAILED');
        break;
      }
      headSeq = result.headSeq;
      if (result.replySeq !== null) replySeq = result.replySeq;
      if (result.outcome !== 'tools') {
        if (result.outcome === 'context-overflow') {
          lastError = result.error?.message;
          await closeTurn(turn, { kind: 'error', code: 'context_overflow', message: result.error?.message ?? 'context overflow' });
          outcome = 'error';
        } else {
          outcome = result.outcome === 'max-tokens' ? 'max-tokens' : result.outcome === 'aborted' ? 'aborted' : result.outcome === 'error' ? 'error' : 'completed';
          if (result.error) lastError = result.error.message;
        }
        break;
      }
      phase = 'tools';
      let refs: ToolRunRef[];
      try {
        refs = await runInScope(() =>
          Promise.all(
            result.toolCalls.map((call) =>
              tools.runTool({ sessionId: input.sessionId, turn, step, callSeq: call.callSeq, maxAttempts: tunables.toolMaxAttempts }),
            ),
          ),
        );
      } catch (error) {
        outcome = await failTurn(turn, error, 'TOOL_FAILED');
        break;
      }
      const lastStep = step >= tunables.maxStepsPerTurn;
      headSeq = (
        await local.appendToolResults({
          sessionId: input.sessionId,
          runId,
          turn,
          step,
          knownHead: headSeq,
          results: refs,
          ...(lastStep ? { endTurnReason: 'max-steps' as const } : {}),
        })
      ).headSeq;
      if (lastStep) {
        outcome = 'max-steps';
        break;
      }
    }
    for (const id of turnIds) remember(id, { turn, replySeq, outcome });
    phase = 'idle';

    const suggested = workflowInfo().continueAsNewSuggested;
    // Queued signal messages are carried over; a waiting `send` keeps the run until it is answered.
    // A send this turn answered still counts in `waiting` here (its handler resumes later in this
    // activation), so only a send whose message is unanswered blocks; otherwise a session driven by
    // `send` would never continue as new.
    const wantsNewRun = suggested || turnsThisRun >= tunables.continueAsNewAfterTurns;
    const unanswered = (): boolean => [...waitingFor.keys()].some((id) => results.get(id) == null);
    // A close request ends this run soon anyway; a pending manual compaction runs here first.
    const canLeave = () => !closing && compactRequests === 0;
    if (wantsNewRun && canLeave() && (waiting === 0 || (!unanswered() && patched(CAN_AFTER_ANSWERED_SENDS)))) {
      phase = 'closing';
      // A `send` or `compact` arriving meanwhile must be served by this run (its handler would
      // otherwise wait forever for a turn this run never runs): go back to the loop instead.
      await condition(() => allHandlersFinished() || unanswered() || !canLeave());
      if (!allHandlersFinished()) {
        phase = 'idle';
        continue;
      }
      log.info('continuing as new', { sessionId: input.sessionId, turn, headSeq });
      await continueAsNew<typeof sessionWorkflow>({
        sessionId: input.sessionId,
        ...(input.tunables ? { tunables: input.tunables } : {}),
        carry: { headSeq, turn, queue: [...queue], recent: [...results].filter((e): e is [string, SendResult] => e[1] !== null).map(([id, result]) => ({ id, result })) },
      });
    }
  }
  phase = 'closed';
  await condition(allHandlersFinished);
}

function describeFailure(error: unknown): string {
  if (error instanceof ActivityFailure && error.cause) return error.cause.message;
  return error instanceof Error ? error.message : String(error);
}
