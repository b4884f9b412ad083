/**
 * Fork and seed (dsh-spec §8.7): a child session starts from a copy of the parent's prefix
 * followed by one `session/end-seed`, and its header records the lineage.
 */
import { SessionlogError } from './errors.js';
import { newSessionHeader, type NewEvent, type SessionHeader, type StoredEvent } from './events.js';
import { assertSessionId } from './ids.js';
import { interruptedTurnClosers } from './repair.js';

export type ForkPlan = {
  header: SessionHeader;
  seed: StoredEvent[];
  endSeed: NewEvent<'session/end-seed'> | undefined;
};

/**
 * Plans a fork of `source` at inclusive `boundary` (default: the last event). Fails with
 * INVALID_BOUNDARY for a seq outside the log, OPEN_TURN when the boundary is inside a turn.
 */
export function planFork(
  source: { header: SessionHeader; events: readonly StoredEvent[] },
  childId: string,
  createdAt: number,
  boundary?: number,
): ForkPlan {
  assertSessionId(childId);
  const events = source.events;
  const at = boundary ?? events.length - 1;
  if (boundary !== undefined && (!Number.isSafeInteger(boundary) || boundary < 0 || boundary >= events.length)) {
    throw new SessionlogError(
      'INVALID_BOUNDARY',
      `fork boundary ${String(boundary)} is not a seq of session ${source.header.id} (0..${events.length - 1})`,
    );
  }
  for (let i = at; i >= 0; i--) {
    const type = events[i]!.type;
    if (type === 'turn/end') break;
    if (type === 'turn/start') {
      throw new SessionlogError(
        'OPEN_TURN',
        `cannot fork session ${source.header.id} at seq ${at}: turn started at seq ${i} is still open there; pick a seq after its turn/end`,
      );
    }
  }
  const seed = events.slice(0, at + 1);
  const lastIsEndSeed = seed.length > 0 && seed[seed.length - 1]!.type === 'session/end-seed';
  const time = seed.length > 0 ? seed[seed.length - 1]!.time : createdAt;
  const header = newSessionHeader({
    id: childId,
    createdAt,
    parentSession: source.header.id,
    seedLength: seed.length,
    ...(source.header.agent ? { agent: source.header.agent } : {}),
  });
  return { header, seed, endSeed: lastIsEndSeed ? undefined : { type: 'session/end-seed', time, data: {} } };
}

/**
 * Plans a salvage of a damaged session (DESIGN §4.1): the child is seeded with `prefix` (the
 * longest valid prefix of the parent), the closers of a turn that prefix leaves open, and
 * `session/end-seed`; its header names the parent and the first bad seq.
 */
export function planSalvage(
  parent: SessionHeader,
  prefix: readonly StoredEvent[],
  problem: { seq: number; reason: string },
  childId: string,
  createdAt: number,
): { header: SessionHeader; seed: NewEvent[] } {
  assertSessionId(childId);
  const time = prefix.length > 0 ? prefix[prefix.length - 1]!.time : createdAt;
  const header = newSessionHeader({
    id: childId,
    createdAt,
    parentSession: parent.id,
    seedLength: prefix.length,
    salvagedAt: { firstBadSeq: problem.seq, reason: problem.reason.slice(0, 1000) },
    ...(parent.agent ? { agent: parent.agent } : {}),
  });
  const seed: NewEvent[] = [
    ...prefix.map(seedEventOf),
    ...interruptedTurnClosers(prefix),
    { type: 'session/end-seed', time, data: {} },
  ];
  return { header, seed };
}

/** A stored event as a child's seed event: the store re-stamps seq and op. */
export function seedEventOf(event: StoredEvent): NewEvent {
  const { seq: _seq, op: _op, ...rest } = event;
  return rest as NewEvent;
}
