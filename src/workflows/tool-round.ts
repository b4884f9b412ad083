/**
 * The tool half of a step: calls that wait for answers (approval, an external result) are
 * answered first, each answer logged as it arrives; then the calls that may run run in
 * parallel. What it hands back the turn loop logs in one append, in call order.
 */
import { condition } from '@temporalio/workflow';
import type { DeniedCall, ToolCallRef, ToolRunRef } from '../engine/types.js';
import type { CallAnswers } from './call-answers.js';
import type { RunContext } from './run-context.js';

/** What the tool half of a step hands back: the results to log and the calls denied, or that the turn was cancelled. */
export type ToolRoundResult = { refs: ToolRunRef[]; denied: DeniedCall[] } | 'cancelled';

export class ToolRound {
  constructor(
    private readonly ctx: RunContext,
    private readonly calls: CallAnswers,
  ) {}

  /**
   * Runs the tool half of step `step`: calls that wait for answers are answered first; then the
   * calls that may run run in parallel.
   */
  async run(turn: number, step: number, calls: ToolCallRef[]): Promise<ToolRoundResult> {
    const { state, act, tunables, work } = this.ctx;
    const external = calls.some((c) => c.gate) ? await this.awaitAnswers(turn, step, calls) : [];
    if (external === 'cancelled') return external;
    const denied: DeniedCall[] = [];
    const runnable: ToolCallRef[] = [];
    for (const call of calls) {
      const decision = call.gate ? (this.calls.decisionOf(call.callId)?.decision ?? call.answered) : undefined;
      if (decision === 'deny' || decision === 'expire') {
        const reason = this.calls.decisionOf(call.callId)?.reason ?? call.reason;
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
    const scope = work.enter();
    let ran: ToolRunRef[];
    try {
      ran = await scope.run(() =>
        Promise.all(
          runnable.map((call) =>
            act.tools.runTool({
              sessionId: this.ctx.input.sessionId,
              turn,
              step,
              callSeq: call.callSeq,
              maxAttempts: tunables.toolMaxAttempts,
            }),
          ),
        ),
      );
    } finally {
      work.leave(scope);
    }
    return { refs: [...ran, ...external], denied };
  }

  /**
   * Waits until every gated call of the step is answered (or expired), logging answers as they
   * arrive. Returns the stored outputs of external calls, or 'cancelled'.
   */
  private async awaitAnswers(turn: number, step: number, calls: ToolCallRef[]): Promise<ToolRunRef[] | 'cancelled'> {
    const { state, act, base } = this.ctx;
    const answers = this.calls;
    state.enter('waiting');
    answers.awaitCalls(calls);
    // External results the log already holds (a run resuming the step): they are not asked for again.
    const external: ToolRunRef[] = calls.flatMap((c) =>
      c.gate === 'external' && c.result
        ? [{ callId: c.callId, callSeq: c.callSeq, ...c.result, external: true as const }]
        : [],
    );
    try {
      while (answers.awaitsAnswers) {
        const unanswered = answers.unansweredCalls();
        const ready = () => answers.hasAnswers || state.cancelRequested || state.stopped;
        if (!ready() && unanswered.length > 0) {
          const wait = Math.min(...unanswered.map((c) => c.expiresAt ?? Number.POSITIVE_INFINITY)) - Date.now();
          if (!(wait > 0 && (await condition(ready, wait)))) answers.expire(unanswered, Date.now());
        }
        if (state.cancelRequested) return 'cancelled';
        state.throwIfStopped();
        const arrived = answers.answersToLog();
        if (arrived.length === 0) continue;
        const recorded = await act.local.recordAnswers({
          ...base,
          turn,
          step,
          knownHead: state.headSeq,
          answers: arrived,
        });
        state.atHead(recorded.headSeq);
        external.push(...recorded.external);
        for (const answer of arrived) answers.answered(answer);
      }
      return external;
    } finally {
      answers.stopAwaiting();
    }
  }
}
