/**
 * The decisions every backend takes the same way, under its write lock and against its synced
 * validated copy: the append plan (replay, OP_CONFLICT, SEQ_CONFLICT, the one validation of the
 * batch), the crash-repair plan, and the results reads and erasures return. The relational core
 * and the JSONL backend both run these; neither has a copy of its own.
 */
import {
  KNOWN_EVENT_TYPES,
  SessionlogError,
  interruptedTurnClosers,
  repairOp,
  type StoredEvent,
  type NewEvent,
  type SessionView,
} from '../session/index.js';
import type { LogScanner } from './scanner.js';
import type { AppendOptions, AppendResult, LoadedSession, StoreEraseReceipt } from './store.js';

export type AppendPlan = { kind: 'replayed'; result: AppendResult } | { kind: 'write'; events: StoredEvent[] };

function describeTypes(types: readonly unknown[]): string {
  return types.map((t) => String(t)).join(', ');
}

/**
 * Decides an append against the synced stored state: a stored op with the same event count and
 * types is replayed (nothing written) and with anything else is OP_CONFLICT; a wrong
 * `expectedSeq` is SEQ_CONFLICT; otherwise the batch is validated as a surface transition (the
 * one validation of the batch) and returned ready to write. Throws without side effects.
 */
export function planAppend(scanner: LogScanner, events: readonly NewEvent[], options: AppendOptions): AppendPlan {
  const id = scanner.session.id;
  const stored = scanner.ops.get(options.op);
  if (stored) {
    const storedTypes: string[] = [];
    for (let seq = stored.firstSeq; seq <= stored.lastSeq; seq++) storedTypes.push(scanner.session.storedAt(seq)!.type);
    const types = events.map((event) => (event as { type?: unknown } | null)?.type);
    if (types.length !== storedTypes.length || types.some((type, i) => type !== storedTypes[i])) {
      throw new SessionlogError(
        'OP_CONFLICT',
        `session ${id}: op ${JSON.stringify(options.op)} is already stored as seqs ${stored.firstSeq}..${stored.lastSeq} (${describeTypes(storedTypes)}), but this append has ${types.length} event(s) (${describeTypes(types)}); two different writes under one key is a bug in the writer — give each batch its own op`,
      );
    }
    return { kind: 'replayed', result: { ...stored, replayed: true } };
  }
  if (scanner.nextSeq !== options.expectedSeq) {
    throw new SessionlogError(
      'SEQ_CONFLICT',
      `session ${id}: append expected to start at seq ${options.expectedSeq} but the stored next seq is ${scanner.nextSeq}; another writer appended — reload the session and retry`,
    );
  }
  for (const event of events) {
    // The stored-log rule refuses unknown types on read, so this build must not write one.
    const type = (event as { type?: unknown } | null)?.type;
    if (typeof type !== 'string' || !KNOWN_EVENT_TYPES.has(type)) {
      throw new SessionlogError(
        'INVALID_EVENT',
        `session ${id}: event type ${JSON.stringify(type)} is unknown to this build and could not be read back; add it to EventDataMap first`,
      );
    }
  }
  return { kind: 'write', events: scanner.session.planBatch(events, options.op) };
}

export function appendResultOf(events: readonly StoredEvent[]): AppendResult {
  return { firstSeq: events[0]!.seq, lastSeq: events[events.length - 1]!.seq, replayed: false };
}

/** The closers for a cold interrupted turn (dsh-spec §8.5), planned as one batch with op `repairOp(lastSeq)`. */
export function planRepair(scanner: LogScanner): StoredEvent[] {
  const events = scanner.session.events;
  const closers = interruptedTurnClosers(events);
  if (closers.length === 0) return [];
  return scanner.session.planBatch(closers, repairOp(events[events.length - 1]!.seq));
}

/** `events[fromSeq .. fromSeq+limit)` of a session without copying the whole log. */
export function sliceEvents(
  session: Pick<SessionView, 'nextSeq' | 'storedAt'>,
  fromSeq: number,
  limit: number | undefined,
): StoredEvent[] {
  const end = limit === undefined ? session.nextSeq : Math.min(session.nextSeq, fromSeq + limit);
  const out: StoredEvent[] = [];
  for (let seq = fromSeq; seq < end; seq++) out.push(session.storedAt(seq)!);
  return out;
}

/** Builds the `load`/`inspect` result. */
export function loadedSession(scanner: LogScanner, closers: readonly StoredEvent[], truncated: number): LoadedSession {
  return {
    header: scanner.session.header,
    events: [...scanner.session.events, ...closers],
    repaired: closers.length,
    truncated,
  };
}

/** The receipt of an `erase` that found nothing left: the session was erased before (its tombstone lasts until `until`). */
export function alreadyErasedReceipt(id: string, until: number): StoreEraseReceipt {
  return {
    sessionId: id,
    erased: false,
    removed: {
      header: 0,
      events: 0,
      artifacts: 0,
      media: 0,
      projectionCheckpoints: 0,
      inboxEntries: 0,
      sessionKey: 0,
      transcriptEntries: 0,
    },
    places: [],
    tombstoneUntil: until,
    notes: [],
  };
}
