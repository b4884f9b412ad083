/**
 * `Session`: an in-memory, validated, append-only event log with its surface fold and an
 * incrementally cached `deriveMessages()` (dsh-spec §1.5, §2). Pure: time comes from the
 * caller, nothing here does I/O.
 */
import { SessionlogError } from './errors.js';
import {
  isEventOfType,
  isKnownEvent,
  isSurfaceType,
  type NewEvent,
  type RequestHeader,
  type SessionEvent,
  type SessionHeader,
  type StoredEvent,
} from './events.js';
import { deepFreeze, toFrozenLosslessJson } from './json.js';
import type { Message } from './messages.js';
import { BudgetFold, type BudgetView } from './budget.js';
import { SurfaceFold, type SurfaceSnapshot } from './surface.js';
import { TurnFold, type TurnState } from './turns.js';
import { assertEventData, assertStoredEvent, parseHeader } from './validate.js';

/** The message an event contributes to the model's history, or null (dsh-spec §2.5). */
export function deriveEventMessage(event: StoredEvent): Message | null {
  if (!isKnownEvent(event)) return null;
  switch (event.type) {
    case 'user/message':
      return event.data;
    case 'assistant/message':
      return event.data.message.content.length === 0 ? null : event.data.message;
    case 'tool/result':
      return event.data.message;
    default:
      return null;
  }
}

export function isAppendSurfaceEvent(event: StoredEvent): boolean {
  return isSurfaceType(event.type) && event.surfaceOp === 'append';
}

/**
 * Validates the candidate envelope and payload and returns a frozen event at `seq`. Throws
 * NON_JSON_VALUE (TypeError) or INVALID_EVENT without side effects.
 */
export function buildEvent(input: NewEvent, seq: number, op: string | undefined): StoredEvent {
  if (typeof input.time !== 'number' || !Number.isSafeInteger(input.time)) {
    throw new SessionlogError(
      'INVALID_EVENT',
      `event time must be a safe integer (epoch ms), got ${String(input.time)}`,
    );
  }
  const data = toFrozenLosslessJson(input.data, `${input.type}.data`);
  assertEventData(input.type, data, `new ${input.type} at seq ${seq}`);
  const event: Record<string, unknown> = { seq, type: input.type, time: input.time, data };
  if (input.surfaceOp !== undefined) event.surfaceOp = toFrozenLosslessJson(input.surfaceOp, 'surfaceOp');
  if (input.sourceEventSeqs !== undefined)
    event.sourceEventSeqs = toFrozenLosslessJson(input.sourceEventSeqs, 'sourceEventSeqs');
  if (op !== undefined) event.op = op;
  // Every value in it is frozen already (the copies above are frozen as they are built).
  return Object.freeze(event) as StoredEvent;
}

/**
 * The last climb of the pressure ladder that ended above its target (`compaction/stalled`):
 * the budget it climbed against and the tokens it left. The ladder reads it as a breaker.
 */
export type CompactionStall = { seq: number; budget: number; tokensAfter: number; reason: string };

/**
 * One session's log in memory: validated, append-only, with its surface fold and the derived
 * history (`deriveMessages()`) cached incrementally. Pure: time comes from the caller, nothing here
 * does I/O.
 */
export class Session {
  readonly header: SessionHeader;
  private readonly log: StoredEvent[] = [];
  private fold = new SurfaceFold();
  /** The last batch {@link planBatch} returned, with the surface fold it left: committing it adopts that fold. */
  private planned: { events: readonly StoredEvent[]; base: number; fold: SurfaceFold } | undefined;
  private eventsSnapshot: readonly StoredEvent[] | undefined;
  private derived: Message[] = [];
  private derivedNodes = 0;
  private derivedGeneration = 0;
  private readonly turnFold = new TurnFold();
  private readonly budgetFold = new BudgetFold();
  private latestHeader: RequestHeader | undefined;
  private owner: string | undefined;
  private readonly allowed = new Set<string>();
  private readonly learned = new Map<string, number>();
  private stalled: CompactionStall | undefined;
  private readonly manualCompactions = new Set<string>();

  private constructor(header: SessionHeader) {
    this.header = deepFreeze({ ...header });
  }

  /** A new, empty session. */
  static create(header: SessionHeader): Session {
    return new Session(parseHeader(header, `session ${String(header?.id)}`));
  }

  /**
   * Rebuilds a session from stored events, validating every envelope, payload and surface
   * transition exactly as a live append would. Throws on the first bad event.
   */
  static fromEvents(header: SessionHeader, events: readonly unknown[]): Session {
    const session = Session.create(header);
    for (let i = 0; i < events.length; i++) {
      const raw = events[i];
      assertStoredEvent(raw, i, session.header.id);
      session.commit(deepFreeze(raw));
    }
    return session;
  }

  get id(): string {
    return this.header.id;
  }

  /** The seq the next appended event gets (= number of events). */
  get nextSeq(): number {
    return this.log.length;
  }

  /** A frozen snapshot of the log; a returned array never grows. */
  get events(): readonly StoredEvent[] {
    this.eventsSnapshot ??= Object.freeze([...this.log]);
    return this.eventsSnapshot;
  }

  /** The stored event at `seq`, of a known type or not; undefined past the head. */
  storedAt(seq: number): StoredEvent | undefined {
    return this.log[seq];
  }

  /** The known event at `seq`; undefined past the head and for an unknown (ignorable) type. */
  eventAt(seq: number): SessionEvent | undefined {
    const event = this.log[seq];
    return event !== undefined && isKnownEvent(event) ? event : undefined;
  }

  get surface(): SurfaceSnapshot {
    return this.fold.snapshot();
  }

  /** Live read-only view of the surface nodes (do not hold across appends). */
  get surfaceNodes(): readonly number[] {
    return this.fold.nodeList;
  }

  get replaceGeneration(): number {
    return this.fold.replaceGeneration;
  }

  /** Appends one event. See {@link appendBatch}. */
  append(input: NewEvent, op?: string): StoredEvent {
    return this.appendBatch([input], op)[0]!;
  }

  /**
   * Validates and appends `inputs` atomically: if any candidate is rejected, nothing is
   * appended and the surface is untouched.
   */
  appendBatch(inputs: readonly NewEvent[], op?: string): StoredEvent[] {
    const built = this.planBatch(inputs, op);
    this.commitPlanned(built);
    return built;
  }

  /** Validates a batch against the current state without changing it; returns the events it would append. */
  planBatch(inputs: readonly NewEvent[], op?: string): StoredEvent[] {
    const scratch = this.fold.clone();
    const built: StoredEvent[] = [];
    const lookup = (seq: number): StoredEvent | undefined => this.log[seq] ?? built[seq - this.log.length];
    for (const input of inputs) {
      const event = buildEvent(input, this.log.length + built.length, op);
      scratch.apply(event, lookup);
      built.push(event);
    }
    this.planned = { events: built, base: this.log.length, fold: scratch };
    return built;
  }

  /**
   * Commits events in seq order, each checked as a surface transition as it is folded: stored
   * events read back, or a batch {@link planBatch} returned (after its durable write). The batch
   * planned last, committed onto the log it was planned against, is not checked again: the fold
   * its plan left is the one folding it would give, and is adopted.
   */
  commitPlanned(events: readonly StoredEvent[]): void {
    const planned = this.planned;
    this.planned = undefined;
    if (planned !== undefined && planned.events === events && planned.base === this.log.length) {
      this.fold = planned.fold;
      for (const event of events) this.commit(event, 'folded');
      return;
    }
    for (const event of events) {
      if (event.seq !== this.log.length) {
        throw new SessionlogError(
          'SEQ_CONFLICT',
          `planned event seq ${event.seq} does not follow ${this.log.length - 1}`,
        );
      }
      this.commit(event);
    }
  }

  /** `surface: 'folded'` when the batch's planned fold was adopted instead of folding it here. */
  private commit(event: StoredEvent, surface: 'fold' | 'folded' = 'fold'): void {
    // An ignorable event of a type this build does not know is kept verbatim but never folded.
    if (surface === 'fold' && isKnownEvent(event)) this.fold.apply(event, (seq) => this.log[seq]);
    this.log.push(event);
    this.eventsSnapshot = undefined;
    this.turnFold.apply(event);
    this.budgetFold.apply(event);
    if (isEventOfType(event, 'request/header')) this.latestHeader = event.data.header;
    else if (isEventOfType(event, 'session/run')) this.owner = event.data.runId;
    else if (isEventOfType(event, 'tool/allow')) this.allowed.add(event.data.tool);
    else if (isEventOfType(event, 'model/limit')) this.learned.set(event.data.model, event.data.contextWindow);
    else if (isEventOfType(event, 'compaction/stalled'))
      this.stalled = {
        seq: event.seq,
        budget: event.data.budget,
        tokensAfter: event.data.tokensAfter,
        reason: event.data.reason,
      };
    else if (isEventOfType(event, 'compaction/start') && event.data.trigger === 'manual')
      this.manualCompactions.add(event.data.compactionId);
    // A manual compaction that succeeds resets the breaker: the person chose to compact.
    else if (
      isEventOfType(event, 'compaction/end') &&
      event.data.error === undefined &&
      this.manualCompactions.has(event.data.compactionId)
    )
      this.stalled = undefined;
  }

  /** The context window the provider stated for `model` in this session (a learned limit), if any. */
  learnedWindow(model: string): number | undefined {
    return this.learned.get(model);
  }

  /** The compaction circuit breaker: set by `compaction/stalled`, reset by a successful manual compaction. */
  get compactionStall(): CompactionStall | undefined {
    return this.stalled;
  }

  /** Tools allowed without approval for the rest of the session (`tool/allow`). */
  get allowedTools(): ReadonlySet<string> {
    return this.allowed;
  }

  /** The turn and step fold at the head: open turn and step, pending calls, turn records. */
  get turns(): TurnState {
    return this.turnFold;
  }

  /** The spend caps in force and what the session used (session/budget.ts). */
  get budget(): BudgetView {
    return this.budgetFold;
  }

  /** The request envelope of the latest `request/header`, or undefined. */
  get requestHeader(): RequestHeader | undefined {
    return this.latestHeader;
  }

  /** The run id of the latest `session/run`: the workflow run that owns the session now. */
  get owningRun(): string | undefined {
    return this.owner;
  }

  /** The events of batch `op` at or after `fromSeq` (the caller bounds the scan). */
  eventsOfOp(op: string, fromSeq: number): StoredEvent[] {
    const found: StoredEvent[] = [];
    for (let i = Math.max(0, fromSeq); i < this.log.length; i++) if (this.log[i]!.op === op) found.push(this.log[i]!);
    return found;
  }

  /**
   * The model-visible history: the projection of every surface node, in surface order.
   * Incremental: only new nodes are projected unless a replacement happened.
   */
  deriveMessages(): Message[] {
    const nodes = this.fold.nodeList;
    if (this.derivedGeneration !== this.fold.replaceGeneration) {
      this.derived = [];
      this.derivedNodes = 0;
      this.derivedGeneration = this.fold.replaceGeneration;
    }
    for (let i = this.derivedNodes; i < nodes.length; i++) {
      const message = deriveEventMessage(this.log[nodes[i]!]!);
      if (message) this.derived.push(message);
    }
    this.derivedNodes = nodes.length;
    return [...this.derived];
  }

  /** The human transcript: append-origin surface events, including ones shadowed by compaction. */
  transcript(): StoredEvent[] {
    return this.log.filter(isAppendSurfaceEvent);
  }
}

/**
 * A read-only view of a validated session, as a store hands out its one in-memory copy: reads
 * and planning only. Appends go through the store, which commits them into the same copy.
 */
export type SessionView = Pick<
  Session,
  | 'header'
  | 'id'
  | 'nextSeq'
  | 'events'
  | 'eventAt'
  | 'storedAt'
  | 'surface'
  | 'surfaceNodes'
  | 'replaceGeneration'
  | 'deriveMessages'
  | 'transcript'
  | 'planBatch'
  | 'turns'
  | 'requestHeader'
  | 'owningRun'
  | 'allowedTools'
  | 'learnedWindow'
  | 'compactionStall'
  | 'budget'
  | 'eventsOfOp'
>;

/** Random access to a log by seq: what a fold over part of a log needs. */
export type EventLookup = Pick<SessionView, 'nextSeq' | 'eventAt'>;

/** An {@link EventLookup} over a contiguous array of stored events (seq = index). */
export function lookupOf(events: readonly StoredEvent[]): EventLookup {
  return {
    nextSeq: events.length,
    eventAt: (seq) => {
      const event = events[seq];
      return event !== undefined && isKnownEvent(event) ? event : undefined;
    },
  };
}
