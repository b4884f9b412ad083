/**
 * The work that holds the log between turns: manual compactions (`compact`) and callers' notes
 * (`note`), one at a time, with no turn starting meanwhile (a turn's or a compaction's
 * activities expect the head they left). A note that only changes the budget may also be logged
 * while a turn is paused on it, and is answered at once while a turn runs.
 */
import { condition, patched } from '@temporalio/workflow';
import type { NoteInput } from '../engine/types.js';
import type { CompactResult, NoteAck, UserInput } from './api.js';
import { runCompaction } from './compaction.js';
import { describeFailure, guarded } from './failures.js';
import { BUDGET_ANSWERS_AT_ONCE } from './patches.js';
import type { Pauses } from './pauses.js';
import type { RunContext } from './run-context.js';
import { checkNote } from './validation.js';

export class BetweenTurns {
  private compacting = false;
  /** Compact updates waiting or running: continue-as-new waits for them. */
  private compactRequests = 0;
  private manualCompactions = 0;
  /** A caller's note is being logged between turns (no turn or compaction may start meanwhile). */
  private noting = false;
  /** Note updates waiting to be logged: continue-as-new waits for them. */
  private noteRequests = 0;
  /** Budget changes answered (`turn-end`) and not logged yet: no turn starts before they are. */
  private budgetsDeferred = 0;

  constructor(
    private readonly ctx: RunContext,
    private readonly pauses: Pauses,
    /** Checks a message of a note of a build before the inbox (message-queue.ts). */
    private readonly checkNoteMessage: (message: UserInput) => void,
  ) {}

  // ---- Messages (wired by session-workflow.ts) ----

  /** Update `compact`: one manual compaction, between turns. */
  async compact(): Promise<CompactResult | null> {
    const state = this.ctx.state;
    const served = this.compactRequested();
    try {
      await condition(() => this.mayWorkBetweenTurns(false) || state.stopped);
      state.throwIfStopped();
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

  /**
   * Refuses a note the session would not log (synchronously, as an update validator must): out
   * of bounds, or the session stopped.
   */
  validateNote(note: NoteInput): void {
    checkNote(note, this.ctx.tunables, this.checkNoteMessage);
    this.ctx.state.throwIfStopped();
  }

  /**
   * Update `note`: logs a caller's note between turns only. A note that only changes the budget
   * may also be logged while a turn is paused on it; one that arrives while a turn runs (or
   * waits for an approval) is answered at once (`turn-end`) and logged as it was before, once
   * nothing runs.
   */
  async note(note: NoteInput): Promise<NoteAck> {
    const state = this.ctx.state;
    const budgetOnly = note.budget !== undefined && note.ref === undefined && !note.metadata && !note.messages;
    if (budgetOnly && !this.mayLogBudget() && !state.stopped && patched(BUDGET_ANSWERS_AT_ONCE)) {
      void this.logDeferredBudget(note, this.budgetDeferred());
      return { headSeq: state.headSeq, applies: 'turn-end' };
    }
    return { headSeq: await this.logNoteWhenFree(note, budgetOnly), applies: 'now' };
  }

  // ---- What the turn loop asks ----

  /**
   * Whether a compaction or a note holds the log between turns, or an answered budget change
   * waits to be logged (no turn may start meanwhile).
   */
  get busy(): boolean {
    return this.compacting || this.noting || this.budgetsDeferred > 0;
  }

  /** Whether a compact or note update waits to be served by this run (continue-as-new waits for it). */
  get servesRequests(): boolean {
    return this.compactRequests > 0 || this.noteRequests > 0;
  }

  /** Whether answered budget changes wait to be logged (the run does not end before they are). */
  get hasDeferredBudgets(): boolean {
    return this.budgetsDeferred > 0;
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

  /** Counts a budget change answered before it is logged; returns the function that uncounts it once logged. */
  budgetDeferred(): () => void {
    this.budgetsDeferred += 1;
    return () => {
      this.budgetsDeferred -= 1;
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

  /** Logs a budget change its caller was told applies at the end of the running turn; a failure is reported in status. */
  private async logDeferredBudget(note: NoteInput, logged: () => void): Promise<void> {
    const state = this.ctx.state;
    try {
      await this.logNoteWhenFree(note, true);
    } catch (error) {
      // Its caller was answered already: a stopped session says why in status; anything else is reported.
      if (!state.stopped) state.report(`budget change ${note.id} was not logged: ${describeFailure(error)}`);
    } finally {
      logged();
    }
  }
}
