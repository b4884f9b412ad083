/**
 * Pauses of a turn with nothing running (phase `paused`): on a spend cap until the budget is
 * raised, on a provider's long retry-after or a taken tenant share until a timer ends. Each wait
 * says whether the step goes on or how the turn ends; the run ends it.
 */
import { condition } from '@temporalio/workflow';
import type { EndTurnInput, StepBreach } from '../engine/types.js';
import type { SessionPause, SessionTunables } from './api.js';
import type { SessionState } from './session-state.js';

/** The longest interval between a tenant-capped pause's checks of the tenant's spend. */
const MAX_TENANT_RECHECK_MS = 10 * 60_000;

/** What a pause ends in: the step goes on (it calls again), or the turn ends for `reason`. */
export type PauseEnd = 'go-on' | { endTurn: EndTurnInput['reason'] };

export class Pauses {
  /** Why and until when the turn is paused (phase `paused`). */
  private pausedOn: SessionPause | undefined;
  /** Budgets logged by this run: a paused turn goes on when this grows. */
  private budgetsLogged = 0;
  /** When a turn paused on its tenant's cap ends with `budget_exceeded` (kept across its re-checks). */
  private tenantCapDeadline: number | undefined;

  constructor(
    private readonly state: SessionState,
    private readonly tunables: SessionTunables,
  ) {}

  /** The pause in force, for status. */
  get current(): SessionPause | undefined {
    return this.pausedOn;
  }

  /** A budget was logged: a turn paused on its budget checks again. */
  budgetLogged(): void {
    this.budgetsLogged += 1;
  }

  /** A step ended other than on a spend cap: a later tenant-capped pause has its whole wait again. */
  stepNotCapped(): void {
    this.tenantCapDeadline = undefined;
  }

  /**
   * A spend cap was reached before a model call or a tool round: the turn pauses with nothing
   * running until the budget is raised (the step checks again), the caller cancels (the turn
   * ends aborted) or the wait passes (the turn ends with `budget_exceeded`). A tenant's cap is
   * raised in the workers' config, which tells the workflow nothing: its pause checks the
   * tenant's spend again every so often (`tenantRecheckMs`, doubling), within the same wait.
   */
  async forBudget(turn: number, breach: StepBreach, pauses: number): Promise<PauseEnd> {
    const state = this.state;
    const logged = this.budgetsLogged;
    const waitMs = breach.waitMs ?? this.tunables.budgetWaitMs;
    const since = Date.now();
    const tenant = breach.scope === 'tenant';
    const until = tenant ? (this.tenantCapDeadline ??= since + waitMs) : since + waitMs;
    const recheckMs = Math.min(MAX_TENANT_RECHECK_MS, this.tunables.tenantRecheckMs * 2 ** Math.min(pauses, 10));
    const waitNow = Math.max(0, tenant ? Math.min(until - since, recheckMs) : until - since);
    this.pause({ reason: 'budget', since, until, breach });
    let raised: boolean;
    try {
      const ready = () => this.budgetsLogged > logged || state.cancelRequested || state.stopped;
      raised = (waitNow > 0 ? await condition(ready, waitNow) : ready()) && !state.cancelRequested;
    } finally {
      this.endPause();
    }
    state.throwIfStopped();
    if (raised) return 'go-on';
    if (state.cancelRequested) return { endTurn: { kind: 'aborted' } };
    // The tenant's cap may have been raised meanwhile: the step checks again.
    if (tenant && Date.now() < until) return 'go-on';
    this.tenantCapDeadline = undefined;
    state.report(`turn ${turn}: budget_exceeded (${breach.scope} ${breach.cap})`);
    return {
      endTurn: {
        kind: 'error',
        code: 'budget_exceeded',
        message: `the ${breach.scope} ${breach.cap} cap of ${breach.limit} was reached (${breach.used} used${breach.tool ? ` by repeated ${breach.tool} calls` : ''}) and the ${tenant ? "tenant's cap" : 'budget'} was not raised within ${waitMs} ms`,
      },
    };
  }

  /**
   * The provider asked to wait longer than an activity should sleep (a reset minutes away, a
   * daily quota): the turn pauses on a durable timer with nothing running, then the step calls
   * again; a cancel ends the turn meanwhile. The same for a step that found its tenant's share
   * of the worker taken (`tenant`), for a moment.
   */
  async forRateLimit(retryAfterMs: number, reason: 'rate_limit' | 'tenant'): Promise<PauseEnd> {
    const state = this.state;
    const since = Date.now();
    this.pause({ reason, since, until: since + retryAfterMs });
    try {
      await condition(() => state.cancelRequested || state.stopped, retryAfterMs);
    } finally {
      this.endPause();
    }
    state.throwIfStopped();
    return state.cancelRequested ? { endTurn: { kind: 'aborted' } } : 'go-on';
  }

  private pause(pause: SessionPause): void {
    this.pausedOn = pause;
    this.state.enter('paused');
  }

  /** The pause is over: the model step goes on. */
  private endPause(): void {
    this.pausedOn = undefined;
    this.state.enter('model');
  }
}
