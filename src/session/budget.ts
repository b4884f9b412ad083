/**
 * Spend caps (DESIGN §5.3, issue 26): a session's budget and what it has used, read from the log.
 *
 * The budget is the latest `session/budget` event (set at create, raised or lowered later; `null`
 * removes it). Its limits apply per turn and in total, to tokens (every token a model call was
 * billed for: input, cached input, cache writes and output, replies and summaries alike), cost
 * (USD, from the logged `cost` of each call), model calls (replies), tool calls and wall time.
 * `repeatedCalls` catches a runaway loop: the same tool with the same arguments asked for that
 * many times in one turn; it guards every session, one without a budget at its default. {@link BudgetFold} keeps the counts as events are committed, so a
 * check costs nothing per event read.
 *
 * A breach is checked before each model call and before each tool round; the workflow pauses
 * the session (`paused: budget`) until the budget is raised or `waitMs` passes, and the turn
 * then ends with `budget_exceeded`.
 */
import type { SessionEvent, StoredEvent } from './events.js';
import { isKnownEvent } from './events.js';
import type { TokenUsage } from './messages.js';

/** Limits of one scope; an absent limit does not apply. */
export type BudgetLimits = {
  tokens?: number;
  costUsd?: number;
  modelCalls?: number;
  toolCalls?: number;
  wallMs?: number;
};

export type Budget = {
  /** Limits of each turn. */
  turn?: BudgetLimits;
  /** Limits of the whole session. */
  total?: BudgetLimits;
  /** The same tool call (name and arguments) this many times in one turn is a breach (default {@link DEFAULT_REPEATED_CALLS}). */
  repeatedCalls?: number;
  /** How long a session paused on this budget waits to be raised before its turn ends with `budget_exceeded`. */
  waitMs?: number;
};

export type BudgetCap = keyof BudgetLimits | 'repeatedCalls';

/** What a breach logs (`budget/breach`): which cap, in which scope, what was used and the limit. */
export type BudgetBreach = {
  cap: BudgetCap;
  /** `tenant`: the total of every session of the session's tenant (SESSIONLOG_TENANT_CAPS). */
  scope: 'turn' | 'total' | 'tenant';
  used: number;
  limit: number;
  /** The repeated call's tool (cap `repeatedCalls`). */
  tool?: string;
};

/** A breach in words, for every API's answer: "the turn modelCalls cap of 0 was reached (0 used)". */
export function describeBreach(breach: BudgetBreach): string {
  const { scope, cap, limit, used, tool } = breach;
  return `the ${scope} ${cap} cap of ${limit} was reached (${used} used${tool !== undefined ? ` by repeated ${tool} calls` : ''})`;
}

export const DEFAULT_REPEATED_CALLS = 5;
/** The longest wait a budget may ask for (30 days). */
export const MAX_BUDGET_WAIT_MS = 30 * 24 * 60 * 60_000;

const LIMIT_KEYS: ReadonlyArray<keyof BudgetLimits> = ['tokens', 'costUsd', 'modelCalls', 'toolCalls', 'wallMs'];
/** The caps checked before a model call and before a tool round. */
const CAPS_BEFORE: Record<'model' | 'tools', ReadonlyArray<keyof BudgetLimits>> = {
  model: ['tokens', 'costUsd', 'modelCalls', 'wallMs'],
  tools: ['toolCalls', 'wallMs'],
};

/** Why `value` is not a budget (undefined when it is one). Numbers must be finite and not negative. */
export function budgetProblem(value: unknown): string | undefined {
  if (!isPlainObject(value)) return 'a budget must be an object';
  for (const key of Object.keys(value)) {
    if (!['turn', 'total', 'repeatedCalls', 'waitMs'].includes(key))
      return `unknown budget field ${JSON.stringify(key)} (expected turn, total, repeatedCalls, waitMs)`;
  }
  for (const scope of ['turn', 'total'] as const) {
    const limits = value[scope];
    if (limits === undefined) continue;
    if (!isPlainObject(limits)) return `budget.${scope} must be an object`;
    for (const [key, limit] of Object.entries(limits)) {
      if (!(LIMIT_KEYS as string[]).includes(key))
        return `unknown limit budget.${scope}.${key} (expected ${LIMIT_KEYS.join(', ')})`;
      if (typeof limit !== 'number' || !Number.isFinite(limit) || limit < 0)
        return `budget.${scope}.${key} must be a finite number, not negative`;
      if (key !== 'costUsd' && !Number.isInteger(limit)) return `budget.${scope}.${key} must be a whole number`;
    }
  }
  if (value.repeatedCalls !== undefined) {
    const n = value.repeatedCalls;
    if (typeof n !== 'number' || !Number.isInteger(n) || n < 2)
      return 'budget.repeatedCalls must be a whole number ≥ 2';
  }
  if (value.waitMs !== undefined) {
    const n = value.waitMs;
    if (typeof n !== 'number' || !Number.isInteger(n) || n < 0 || n > MAX_BUDGET_WAIT_MS)
      return `budget.waitMs must be a whole number of milliseconds from 0 to ${MAX_BUDGET_WAIT_MS}`;
  }
  return undefined;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** What one scope has used. */
export type BudgetUse = { tokens: number; costUsd: number; modelCalls: number; toolCalls: number; wallMs: number };

/** Every token a call was billed for. */
export function billedTokens(usage: TokenUsage | undefined): number {
  if (!usage) return 0;
  return usage.inputTokens + (usage.cacheReadTokens ?? 0) + (usage.cacheWriteTokens ?? 0) + usage.outputTokens;
}

/** What a session spent, as a store sums it across a tenant's sessions: the counts of a {@link BudgetUse}. */
export type SpendTotals = BudgetUse;

export function emptySpend(): SpendTotals {
  return { tokens: 0, costUsd: 0, modelCalls: 0, toolCalls: 0, wallMs: 0 };
}

export function addSpend(to: SpendTotals, spent: SpendTotals): void {
  to.tokens += spent.tokens;
  to.costUsd += spent.costUsd;
  to.modelCalls += spent.modelCalls;
  to.toolCalls += spent.toolCalls;
  to.wallMs += spent.wallMs;
}

/**
 * What one logged event spent (undefined: nothing): a model's reply its billed tokens, its cost
 * and one model call; a compaction summary its tokens and cost; a tool call one tool call. The
 * one rule behind a session's budget and the store's per-tenant totals. (Wall time is a turn's,
 * from its `turn/start` to its `turn/end`: {@link spendOfEvents}.)
 */
export function spendOf(event: StoredEvent): SpendTotals | undefined {
  if (!isKnownEvent(event)) return undefined;
  switch (event.type) {
    case 'assistant/message': {
      const { message, usage, cost, hides } = event.data;
      if (hides || message.source.kind !== 'model') return undefined;
      return { ...emptySpend(), tokens: billedTokens(usage), costUsd: cost ?? 0, modelCalls: 1 };
    }
    case 'compaction/summary':
      return { ...emptySpend(), tokens: billedTokens(event.data.usage), costUsd: event.data.cost ?? 0 };
    case 'tool/call':
      return { ...emptySpend(), toolCalls: 1 };
    default:
      return undefined;
  }
}

/**
 * What a batch of events spent (undefined: nothing), appended to a log whose open turn started
 * at `openTurnStartedAt`. A fork's or salvage's seed batch (the one that holds
 * `session/end-seed`) copies what another session logged and spent nothing itself.
 */
export function spendOfBatch(events: readonly StoredEvent[], openTurnStartedAt?: number): SpendTotals | undefined {
  if (events.some((event) => event.type === 'session/end-seed')) return undefined;
  return spendOfEvents(events, openTurnStartedAt);
}

/**
 * What `events` spent (undefined: nothing), each turn's wall time counted when it ends (from
 * its `turn/start`, or `openTurnStartedAt` for a turn open before the first event).
 */
export function spendOfEvents(events: readonly StoredEvent[], openTurnStartedAt?: number): SpendTotals | undefined {
  let total: SpendTotals | undefined;
  let startedAt = openTurnStartedAt;
  for (const event of events) {
    if (event.type === 'turn/start') startedAt = event.time;
    else if (event.type === 'turn/end' && startedAt !== undefined) {
      (total ??= emptySpend()).wallMs += Math.max(0, event.time - startedAt);
      startedAt = undefined;
    }
    const spent = spendOf(event);
    if (spent) addSpend((total ??= emptySpend()), spent);
  }
  return total;
}

/**
 * A tenant's caps (SESSIONLOG_TENANT_CAPS): limits on what all its sessions spent together,
 * checked before each model call and tool round like a session's total, and how long a turn
 * paused on them waits for the operator to raise them (default: the session's budget wait).
 */
export type TenantCaps = Partial<SpendTotals> & { waitMs?: number };

const SPEND_KEYS: ReadonlyArray<keyof SpendTotals> = ['tokens', 'costUsd', 'modelCalls', 'toolCalls', 'wallMs'];

/** Why `value` is not a tenant's caps (undefined when it is). */
export function tenantCapsProblem(value: unknown): string | undefined {
  if (!isPlainObject(value)) return "a tenant's caps must be an object";
  for (const [key, limit] of Object.entries(value)) {
    if (key === 'waitMs') {
      if (typeof limit !== 'number' || !Number.isInteger(limit) || limit < 0 || limit > MAX_BUDGET_WAIT_MS)
        return `waitMs must be a whole number of milliseconds from 0 to ${MAX_BUDGET_WAIT_MS}`;
      continue;
    }
    if (!(SPEND_KEYS as string[]).includes(key))
      return `unknown cap ${JSON.stringify(key)} (expected ${SPEND_KEYS.join(', ')}, waitMs)`;
    if (typeof limit !== 'number' || !Number.isFinite(limit) || limit < 0)
      return `${key} must be a finite number, not negative`;
    if (key !== 'costUsd' && !Number.isInteger(limit)) return `${key} must be a whole number`;
  }
  return undefined;
}

/**
 * The first of the tenant's caps its sessions' `spent` breaches before a model call (a cap
 * reached leaves no room for another call) or a tool round (the calls already asked for count:
 * only more than the limit).
 */
export function tenantBreach(
  caps: TenantCaps,
  spent: SpendTotals,
  before: 'model' | 'tools',
): BudgetBreach | undefined {
  const keys: ReadonlyArray<keyof SpendTotals> =
    before === 'model' ? ['tokens', 'costUsd', 'modelCalls', 'wallMs'] : ['toolCalls', 'wallMs'];
  for (const cap of keys) {
    const limit = caps[cap];
    if (limit === undefined) continue;
    const used = spent[cap];
    if (cap === 'toolCalls' ? used > limit : used >= limit) return { cap, scope: 'tenant', used, limit };
  }
  return undefined;
}

/** What a session's readers see of its {@link BudgetFold}. */
export type BudgetView = Pick<BudgetFold, 'budget' | 'budgetSince' | 'used' | 'breach' | 'openTurnStartedAt'>;

/** The budget and the counts it is checked against, kept as events are committed. */
export class BudgetFold {
  private current: Budget | null = null;
  private budgetSeq: number | null = null;
  private readonly total = emptySpend();
  private turnUse = emptySpend();
  private openTurn: number | null = null;
  private turnStartedAt = 0;
  /** Wall time of the turns that ended. */
  private endedWallMs = 0;
  /** How often each call (tool name and arguments) was asked for in the open turn. */
  private repeats = new Map<string, number>();

  apply(event: StoredEvent): void {
    if (!isKnownEvent(event)) return;
    switch (event.type) {
      case 'session/budget':
        this.current = (event as SessionEvent<'session/budget'>).data.budget;
        this.budgetSeq = event.seq;
        break;
      case 'turn/start':
        this.openTurn = event.data.turn;
        this.turnStartedAt = event.time;
        this.turnUse = emptySpend();
        this.repeats = new Map();
        break;
      case 'turn/end':
        if (this.openTurn !== null) this.endedWallMs += Math.max(0, event.time - this.turnStartedAt);
        this.openTurn = null;
        break;
      case 'tool/call': {
        const key = `${event.data.name}\u0000${event.data.arguments}`;
        this.repeats.set(key, (this.repeats.get(key) ?? 0) + 1);
        break;
      }
      default:
        break;
    }
    const spent = spendOf(event);
    if (spent) for (const use of [this.total, this.turnUse]) addSpend(use, spent);
  }

  /** The budget in force (null: none). */
  get budget(): Budget | null {
    return this.current;
  }

  /** When the open turn started (undefined between turns). */
  get openTurnStartedAt(): number | undefined {
    return this.openTurn === null ? undefined : this.turnStartedAt;
  }

  /** Seq of the `session/budget` event in force (null: never set). */
  get budgetSince(): number | null {
    return this.budgetSeq;
  }

  /** What the open turn (or the last one, between turns) and the whole session used, wall time at `now`. */
  used(now: number): { turn: BudgetUse; total: BudgetUse } {
    const running = this.openTurn === null ? 0 : Math.max(0, now - this.turnStartedAt);
    return {
      turn: { ...this.turnUse, wallMs: running },
      total: { ...this.total, wallMs: this.endedWallMs + running },
    };
  }

  /**
   * The first breach at `now`, before a model call (`model`: a cap reached leaves no room for
   * another call) or before running the open step's tool calls (`tools`: the calls already
   * asked for count, so a cap is breached only when exceeded, and a call repeated too often).
   * The runaway-loop guard (`repeatedCalls`, default {@link DEFAULT_REPEATED_CALLS}) holds for
   * every session, with a budget or without one.
   */
  breach(now: number, before: 'model' | 'tools'): BudgetBreach | undefined {
    const budget: Budget = this.current ?? {};
    const used = this.used(now);
    for (const scope of ['turn', 'total'] as const) {
      const limits = budget[scope];
      if (!limits) continue;
      for (const cap of CAPS_BEFORE[before]) {
        const limit = limits[cap];
        if (limit === undefined) continue;
        const value = used[scope][cap];
        // Tool calls are counted once asked for: only more than the limit is a breach.
        if (cap === 'toolCalls' ? value > limit : value >= limit) return { cap, scope, used: value, limit };
      }
    }
    if (before === 'tools') {
      const limit = budget.repeatedCalls ?? DEFAULT_REPEATED_CALLS;
      for (const [key, count] of this.repeats) {
        if (count >= limit)
          return { cap: 'repeatedCalls', scope: 'turn', used: count, limit, tool: key.split('\u0000')[0]! };
      }
    }
    return undefined;
  }
}
