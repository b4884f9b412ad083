/**
 * The work that holds the log between turns: manual compactions (`compact`) and callers' notes
 * (`note`), one at a time, with no turn starting meanwhile (a turn's or a compaction's
 * activities expect the head they left). A note that only changes the budget may also be logged
 * while a turn is paused on it, and is answered at once while a turn runs.
 */
import { condition, patched } from '@temporalio/workflow';
import type { NoteInput } from '../engine/types.js';
import type { AnswerOptions, CompactResult, Deferred, NoteAck, UserInput } from './api.js';
import { runCompaction } from './compaction.js';
import { describeFailure, guarded } from './failures.js';
import { ANSWERS_AT_ONCE_WHEN_ASKED, BUDGET_ANSWERS_AT_ONCE } from './patches.js';
import type { Pauses } from './pauses.js';
import type { RunContext } from './run-context.js';
import { checkAnswerOptions, checkNote } from './validation.js';

export class BetweenTurns {
  private compacting = false;
  /** Compact updates waiting or running: continue-as-new waits for them. */
  private compactRequests = 0;
  private manualCompactions = 0;
  /** A caller's note is being logged between turns (no turn or compaction may start meanwhile). */
  private noting = false;
  /** Note updates waiting to be logged: continue-as-new waits for them. */
  private noteRequests = 0;
  /** Notes and compactions answered (`turn-end`) and not done yet: no turn starts before they are. */
  private deferredWork = 0;
  /** The last of the answered notes and compactions, which are done one after another in the order they were answered. */
  private lastInTurn: Promise<void> = Promise.resolve();

  constructor(
    private readonly ctx: RunContext,
    private readonly pauses: Pauses,
    /** Checks a message of a note of a build before the inbox (message-queue.ts). */
    private readonly checkNoteMessage: (message: UserInput) => void,
  ) {}

  // ---- Messages (wired by session-workflow.ts) ----

  /** Refuses compact options that are not `{atOnce?: boolean}` (the update's validator). */
  validateCompact(options: AnswerOptions | undefined): void {
    checkAnswerOptions(options);
  }

  /**
   * Update `compact`: one manual compaction, between turns. Asked `atOnce` while a turn runs, it
   * is answered at once (`turn-end`) and runs once nothing runs, before the next turn.
   */
  async compact(options?: AnswerOptions): Promise<CompactResult | null | Deferred> {
    const state = this.ctx.state;
    if (
      options?.atOnce === true &&
      !this.mayWorkBetweenTurns(false) &&
      this.turnMayHoldIt &&
      !state.stopped &&
      patched(ANSWERS_AT_ONCE_WHEN_ASKED)
    ) {
      this.inTurn(this.deferred(), () => this.compactDeferred());
      return { applies: 'turn-end' };
    }
    return this.compactWhenFree();
  }

  /**
   * Refuses a note the session would not log (synchronously, as an update validator must): out
   * of bounds, or the session stopped.
   */
  validateNote(note: NoteInput, options?: AnswerOptions): void {
    checkNote(note, this.ctx.tunables, this.checkNoteMessage);
    checkAnswerOptions(options);
    this.ctx.state.throwIfStopped();
  }

  /**
   * Update `note`: logs a caller's note between turns only. A note that only changes the budget
   * may also be logged while a turn is paused on it. One that arrives while a turn runs (or waits
   * for an approval) and only changes the budget, or is sent `atOnce`, is answered at once
   * (`turn-end`) and logged as it was before, once nothing runs.
   */
  async note(note: NoteInput, options?: AnswerOptions): Promise<NoteAck> {
    const state = this.ctx.state;
    const budgetOnly = note.budget !== undefined && note.ref === undefined && !note.metadata && !note.messages;
    if (
      (budgetOnly || options?.atOnce === true) &&
      !(budgetOnly ? this.mayLogBudget() : this.mayWorkBetweenTurns(true)) &&
      this.turnMayHoldIt &&
      !state.stopped &&
      patched(budgetOnly ? BUDGET_ANSWERS_AT_ONCE : ANSWERS_AT_ONCE_WHEN_ASKED)
    ) {
      const done = this.deferred();
      // A budget change goes on its own: a turn paused on its budget waits for it.
      if (budgetOnly) void this.logDeferredNote(note, true).finally(done);
      else this.inTurn(done, () => this.logDeferredNote(note, false));
      return { headSeq: state.headSeq, applies: 'turn-end' };
    }
    return { headSeq: await this.logNoteWhenFree(note, budgetOnly), applies: 'now' };
  }

  // ---- What the turn loop asks ----

  /**
   * Whether a compaction or a note holds the log between turns, or an answered one waits to be
   * done (no turn may start meanwhile).
   */
  get busy(): boolean {
    return this.compacting || this.noting || this.deferredWork > 0;
  }

  /** Whether a compact or note update waits to be served by this run (continue-as-new waits for it). */
  get servesRequests(): boolean {
    return this.compactRequests > 0 || this.noteRequests > 0 || this.deferredWork > 0;
  }

  /** Whether answered notes or compactions wait to be done (the run does not end before they are). */
  get hasDeferredWork(): boolean {
    return this.deferredWork > 0;
  }

  /**
   * Whether what keeps a note or a compaction from running now may be a turn, so that it may
   * wait long: not while the run is still opening its log (a moment; answered `now` once it
   * has) nor once it is closed (the compaction's own refusal answers).
   */
  private get turnMayHoldIt(): boolean {
    const phase = this.ctx.state.phase;
    return phase !== 'starting' && phase !== 'closed';
  }

  /**
   * Whether a note that only sets the budget may be logged now: between turns, or while the
   * turn is paused on its budget (nothing runs then; the turn goes on once it is logged).
   */
  mayLogBudget(): boolean {
    return this.mayWorkBetweenTurns(true) || (this.ctx.state.phase === 'paused' && !this.compacting && !this.noting);
  }

  /** Whether a manual compaction or a note may run now: between turns, with nothing else holding the log. */
  mayWorkBetweenTurns(allowClosed: boolean): boolean {
    const phase = this.ctx.state.phase;
    return (phase === 'idle' || (allowClosed && phase === 'closed')) && !this.compacting && !this.noting;
  }

  // ---- Holding the log ----

  /** Counts a compact update until it is served; returns the function that uncounts it. */
  compactRequested(): () => void {
    this.compactRequests += 1;
    return () => {
      this.compactRequests -= 1;
    };
  }

  /** Starts a manual compaction; returns its number (the key of its bracket). */
  beginManualCompaction(): number {
    this.compacting = true;
    return ++this.manualCompactions;
  }

  endManualCompaction(): void {
    this.compacting = false;
  }

  /** Counts a note update until it is served; returns the function that uncounts it. */
  noteRequested(): () => void {
    this.noteRequests += 1;
    return () => {
      this.noteRequests -= 1;
    };
  }

  /** Counts a note or compaction answered before it is done; returns the function that uncounts it once done. */
  deferred(): () => void {
    this.deferredWork += 1;
    return () => {
      this.deferredWork -= 1;
    };
  }

  // ---- Logging a note ----

  /** Logs a note once nothing holds the log (a budget-only note also while a turn is paused); returns the head after it. */
  private async logNoteWhenFree(note: NoteInput, budgetOnly: boolean): Promise<number> {
    const { state, act, base } = this.ctx;
    const served = this.noteRequested();
    try {
      await condition(() => (budgetOnly ? this.mayLogBudget() : this.mayWorkBetweenTurns(true)) || state.stopped);
      state.throwIfStopped();
      this.noting = true;
      try {
        const logged = await act.local.logNote({ ...base, knownHead: state.headSeq, note });
        state.afterNote(logged);
        if (note.budget !== undefined) this.pauses.budgetLogged();
        return logged.headSeq;
      } finally {
        this.noting = false;
      }
    } finally {
      served();
    }
  }

  /**
   * Queues answered work (a note, a compaction) behind the work answered before it: each waits
   * for the log to be free only once the one before is done, so two never start together when a
   * turn ends. `done` uncounts it.
   */
  private inTurn(done: () => void, work: () => Promise<void>): void {
    const before = this.lastInTurn;
    this.lastInTurn = (async () => {
      await before;
      await work().finally(done);
    })();
  }

  /** Logs a note its caller was told applies at the end of the running turn; a failure is reported in status. */
  private async logDeferredNote(note: NoteInput, budgetOnly: boolean): Promise<void> {
    const state = this.ctx.state;
    try {
      await this.logNoteWhenFree(note, budgetOnly);
    } catch (error) {
      // Its caller was answered already: a stopped session says why in status; anything else is reported.
      if (!state.stopped)
        state.report(`${budgetOnly ? 'budget change' : 'note'} ${note.id} was not logged: ${describeFailure(error)}`);
    }
  }

  // ---- Running a compaction ----

  /**
   * Runs one manual compaction once nothing holds the log; what it compacted. `answered`: its
   * caller was answered already, and nobody waits for it once the run has closed.
   */
  private async compactWhenFree(answered = false): Promise<CompactResult | null> {
    const state = this.ctx.state;
    const served = this.compactRequested();
    try {
      const closed = () => answered && state.phase === 'closed';
      await condition(() => this.mayWorkBetweenTurns(false) || state.stopped || closed());
      state.throwIfStopped();
      if (closed()) {
        state.report('the compaction asked for during the last turn was not run: the session closed');
        return null;
      }
      const manual = this.beginManualCompaction();
      try {
        const result = await guarded(state, () => runCompaction(this.ctx, 'manual', null, { manual }));
        state.throwIfStopped();
        return result ?? null;
      } finally {
        this.endManualCompaction();
      }
    } finally {
      served();
    }
  }

  /** Runs a compaction its caller was told applies at the end of the running turn; a failure is reported in status. */
  private async compactDeferred(): Promise<void> {
    try {
      await this.compactWhenFree(true);
    } catch (error) {
      // Its caller was answered already: a stopped session says why in status (runCompaction reports its own failures).
      if (!this.ctx.state.stopped) this.ctx.state.report(`compaction was not run: ${describeFailure(error)}`);
    }
  }
}
