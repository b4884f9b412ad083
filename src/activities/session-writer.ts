/**
 * Log access for activities: a per-worker cache of validated `Session`s kept in step with the
 * store by reading only the tail, plus appends that are idempotent by op and refuse a log that
 * another writer has moved (DESIGN §1.4–1.5).
 */
import type { SessionStore } from '../persistence/store.js';
import { Session, SessionlogError, type StoredEvent, type NewEvent, type SessionEvent } from '../session/index.js';

type Entry = { session: Session; lock: Promise<unknown> };

export class SessionCache {
  private readonly entries = new Map<string, Entry>();

  constructor(
    readonly store: SessionStore,
    private readonly capacity = 256,
  ) {}

  /** Runs `fn` with the session brought up to date, serialised per session id. */
  async with<T>(sessionId: string, fn: (session: Session) => Promise<T>): Promise<T> {
    let entry = this.entries.get(sessionId);
    if (!entry) {
      const header = await this.store.header(sessionId);
      entry = { session: Session.create(header), lock: Promise.resolve() };
      this.entries.set(sessionId, entry);
      this.evict();
    } else {
      // Refresh recency.
      this.entries.delete(sessionId);
      this.entries.set(sessionId, entry);
    }
    const current = entry;
    const run = current.lock.then(async () => {
      await this.sync(current);
      return fn(current.session);
    });
    current.lock = run.catch(() => undefined);
    return run;
  }

  /** Drops a cached session (e.g. after a repair rewrote its tail). */
  forget(sessionId: string): void {
    this.entries.delete(sessionId);
  }

  private async sync(entry: Entry): Promise<void> {
    const tail = await this.store.readFrom(entry.session.id, entry.session.nextSeq);
    if (tail.length > 0) entry.session.commitPlanned(tail);
  }

  private evict(): void {
    while (this.entries.size > this.capacity) {
      const oldest = this.entries.keys().next().value as string;
      this.entries.delete(oldest);
    }
  }
}

/** Events of `session` written by batch `op`, searched from `fromSeq`. */
export function eventsWithOp(session: Session, op: string, fromSeq = 0): StoredEvent[] {
  const found: StoredEvent[] = [];
  const events = session.events;
  for (let i = Math.max(0, fromSeq); i < events.length; i++) if (events[i]!.op === op) found.push(events[i]!);
  return found;
}

/**
 * Checks that every event after `knownHead` was written by this run (ops start with
 * `<runId>/`). Anything else means a second writer: refuse rather than fork the log.
 */
export function assertOwnTail(session: Session, knownHead: number, runId: string): void {
  const events = session.events;
  for (let i = knownHead; i < events.length; i++) {
    const op = events[i]!.op ?? '';
    if (!op.startsWith(`${runId}/`)) {
      throw new SessionlogError(
        'SEQ_CONFLICT',
        `session ${session.id}: event ${i} (${events[i]!.type}, op ${op || 'none'}) was not written by run ${runId}; another writer is active`,
      );
    }
  }
}

const runFence = new WeakMap<Session, { scanned: number; runId: string | undefined }>();

/** The run id of the latest `session/run` in the log: the run that owns the session now. */
export function currentRunId(session: Session): string | undefined {
  const fence = runFence.get(session) ?? { scanned: 0, runId: undefined };
  const events = session.events;
  for (let i = fence.scanned; i < events.length; i++) {
    if (events[i]!.type === 'session/run') fence.runId = (events[i] as SessionEvent<'session/run'>).data.runId;
  }
  fence.scanned = events.length;
  runFence.set(session, fence);
  return fence.runId;
}

/**
 * Appends a batch validated against `session` and commits it to the cached session. An op
 * already stored is not written again; its events are returned as stored.
 *
 * `runId` fences out stale runs: once a newer run has logged its `session/run`, an activity
 * of an older run (e.g. one still streaming after its workflow was terminated) writes nothing.
 */
export async function appendBatch(store: SessionStore, session: Session, events: readonly NewEvent[], op: string, runId?: string): Promise<StoredEvent[]> {
  const existing = eventsWithOp(session, op);
  if (existing.length > 0) return existing;
  if (runId !== undefined) {
    const owner = currentRunId(session);
    if (owner !== undefined && owner !== runId) {
      throw new SessionlogError('SEQ_CONFLICT', `session ${session.id} is now owned by run ${owner}; run ${runId} may not append to it`);
    }
  }
  const planned = session.planBatch(events, op);
  const result = await store.append(session.id, events, { expectedSeq: session.nextSeq, op });
  if (result.replayed) {
    const stored = await store.readFrom(session.id, session.nextSeq);
    session.commitPlanned(stored);
    return eventsWithOp(session, op, result.firstSeq);
  }
  session.commitPlanned(planned);
  return planned;
}
