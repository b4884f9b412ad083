/**
 * When a run of the session workflow continues as new (DESIGN §5): after a turn, when Temporal
 * suggests it or the run has had its turns, once nothing keeps it. What it carries is small: the
 * head, the turn, the queued messages and the recent results; no conversation.
 */
import { allHandlersFinished, condition, continueAsNew, log, patched, workflowInfo } from '@temporalio/workflow';
import type { SessionWorkflowInput } from './api.js';
import type { BetweenTurns } from './between-turns.js';
import type { MessageQueue } from './message-queue.js';
import { CAN_AFTER_ANSWERED_SENDS } from './patches.js';
import type { RunContext } from './run-context.js';
import type { SessionState } from './session-state.js';

export class ContinueAsNew {
  private readonly state: SessionState;

  constructor(
    private readonly ctx: RunContext,
    private readonly messages: MessageQueue,
    private readonly betweenTurns: BetweenTurns,
  ) {
    this.state = ctx.state;
  }

  /**
   * Whether the run should continue as new after this turn: Temporal suggests it or the run has
   * had its turns, and nothing keeps it. Synchronous, so the turns that do not leave (nearly all)
   * make no promise for it.
   */
  due(): boolean {
    const { state, messages } = this;
    const suggested = workflowInfo().continueAsNewSuggested;
    // Queued signal messages are carried over; a waiting `send` keeps the run until it is answered.
    // A send this turn answered still counts as waiting here (its handler resumes later in this
    // activation), so only a send whose message is unanswered blocks; otherwise a session driven by
    // `send` would never continue as new.
    const wantsNewRun = suggested || state.turnsThisRun >= this.ctx.tunables.continueAsNewAfterTurns;
    return (
      wantsNewRun &&
      this.canLeave() &&
      (messages.waiting === 0 || (!messages.unanswered() && patched(CAN_AFTER_ANSWERED_SENDS)))
    );
  }

  /** Whether nothing keeps the run: a close request ends it soon anyway, and a pending manual compaction runs here first. */
  private canLeave(): boolean {
    return !this.state.closing && !this.betweenTurns.servesRequests;
  }

  /**
   * Continues as new, once every handler has finished ({@link due} said it is due).
   * Returns true when a message arrived meanwhile that this run must serve: the loop goes on instead.
   */
  async whenFree(): Promise<boolean> {
    const { state, messages } = this;
    state.enter('closing');
    // A `send` or `compact` arriving meanwhile must be served by this run (its handler would
    // otherwise wait forever for a turn this run never runs): go back to the loop instead.
    await condition(() => allHandlersFinished() || messages.unanswered() || !this.canLeave());
    if (!allHandlersFinished()) {
      state.enter('idle');
      return true;
    }
    log.info('continuing as new', { sessionId: this.ctx.input.sessionId, turn: state.turn, headSeq: state.headSeq });
    return continueAsNew<(input: SessionWorkflowInput) => Promise<void>>({
      sessionId: this.ctx.input.sessionId,
      ...(this.ctx.input.tunables ? { tunables: this.ctx.input.tunables } : {}),
      carry: { headSeq: state.headSeq, turn: state.turn, ...messages.carry() },
    });
  }
}
