/**
 * Answers to the tool calls of a step that wait for one (DESIGN §5.1): an approval decision, or
 * the result of an external tool the caller ran. Handles the `approve` and `toolResult` updates:
 * the first answer to a call counts once it is logged (by the tool round, tool-round.ts), and
 * every later caller is told that one.
 */
import { ApplicationFailure, condition } from '@temporalio/workflow';
import type { CallAnswer, ToolCallRef, WaitingStep } from '../engine/types.js';
import type { ApprovalInput, ApprovalResult, SessionTunables, ToolResultAck, ToolResultInput } from './api.js';
import type { SessionState } from './session-state.js';
import { checkApproval, checkToolResult } from './validation.js';

const MAX_RECENT_IDS = 256;

export class CallAnswers {
  /** Calls of the current step waiting for an answer, by call id. */
  private readonly awaiting = new Map<string, ToolCallRef>();
  /** Answers received and not logged yet. */
  private readonly answers = new Map<string, CallAnswer>();
  /** Approval decisions logged, by call id (bounded): what a second answer is told. */
  private readonly decisions = new Map<string, ApprovalResult>();
  /** External calls whose result this run took (bounded): a second result is already answered. */
  private readonly delivered = new Set<string>();

  constructor(
    private readonly state: SessionState,
    private readonly tunables: SessionTunables,
  ) {}

  // ---- Messages (wired by session-workflow.ts) ----

  /** Refuses an approval answer the session cannot take (synchronously, as an update validator must). */
  validateApproval(input: ApprovalInput): void {
    checkApproval(input, this.tunables);
    this.state.throwIfStopped();
    // Until the run knows its waiting calls the handler decides (see SessionState.knowsWaitingCalls).
    if (!this.state.knowsWaitingCalls || this.decisions.has(input.callId)) return;
    const call = this.awaiting.get(input.callId);
    if (!call)
      throw ApplicationFailure.nonRetryable(
        `no tool call ${input.callId} is waiting for approval in session ${this.state.sessionId}`,
        'UNKNOWN_CALL',
      );
    if (call.gate !== 'approval')
      throw ApplicationFailure.nonRetryable(
        `tool call ${input.callId} is an external tool: post its result instead of approving it`,
        'INVALID_ARGUMENT',
      );
  }

  /** Update `approve`: the first answer to a call counts once it is logged; every caller is told that one. */
  async approve(answer: ApprovalInput): Promise<ApprovalResult> {
    const state = this.state;
    await condition(() => state.knowsWaitingCalls || state.stopped);
    state.throwIfStopped();
    if (!this.decisionOf(answer.callId)) {
      this.validateApproval(answer);
      this.offerApproval(answer);
    }
    await condition(() => this.decisionOf(answer.callId) !== undefined || state.stopped);
    state.throwIfStopped();
    return this.decisionOf(answer.callId)!;
  }

  /** Refuses an external result the session cannot take. */
  validateToolResult(input: ToolResultInput): void {
    checkToolResult(input, this.tunables);
    this.state.throwIfStopped();
    if (!this.state.knowsWaitingCalls) return;
    this.assertExternalWaiting(input.callId);
  }

  /** Update `toolResult`: an external call's result, accepted once it is logged. */
  async submitToolResult(result: ToolResultInput): Promise<ToolResultAck> {
    const state = this.state;
    await condition(() => state.knowsWaitingCalls || state.stopped);
    state.throwIfStopped();
    this.assertExternalWaiting(result.callId);
    this.offerResult(result);
    await condition(() => !this.awaits(result.callId) || state.stopped);
    state.throwIfStopped();
    return { callId: result.callId, accepted: true as const };
  }

  // ---- The calls of the step ----

  /** Takes in the answers the log holds for the step it shows waiting: what the step acts on and what a second answer is told. */
  opened(waiting: WaitingStep | undefined): void {
    for (const call of waiting?.calls ?? []) {
      if (call.answered)
        this.decisions.set(call.callId, {
          callId: call.callId,
          decision: call.answered,
          ...(call.reason !== undefined ? { reason: call.reason } : {}),
        });
    }
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
        `no tool call ${callId} is waiting for a result in session ${this.state.sessionId}`,
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
}
