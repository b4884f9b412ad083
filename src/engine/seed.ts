/**
 * Seeding a new session from another (dsh-spec §8.7): a fork copies the parent's log up to a
 * seq; a salvage copies the longest valid prefix of a damaged log. Either way the child's
 * header names its parent and the child's first batch is the copied prefix plus
 * `session/end-seed`, written by the child's own workflow run (its only writer).
 */
import { planFork, type NewEvent, type StoredEvent } from '../session/index.js';
import type { EngineDeps } from './deps.js';
import { seedOp } from './ops.js';
import type { SeedSpec } from './types.js';

/** Creates and seeds `sessionId` from `seed`; a no-op when the seed batch is already stored. */
export async function seedSession(deps: EngineDeps, sessionId: string, seed: SeedSpec): Promise<void> {
  if (await deps.store.exists(sessionId)) {
    // A retried run: the header is there; the seed batch is appended once (op replay).
    if ((await deps.store.nextSeq(sessionId)) > 0) return;
  }
  const parent = await deps.store.inspect(seed.parentId);
  const events = parent.events.slice(0, parent.events.length - parent.repaired);
  const plan = planFork({ header: parent.header, events }, sessionId, deps.now(), seed.kind === 'fork' ? seed.at : undefined);
  const batch: NewEvent[] = plan.seed.map(seedEvent);
  if (plan.endSeed) batch.push(plan.endSeed);
  if (!(await deps.store.exists(sessionId))) await deps.store.create(plan.header);
  await deps.store.append(sessionId, batch, { expectedSeq: 0, op: seedOp(sessionId) });
}

/** A stored parent event as a child's seed event: the store re-stamps seq and op. */
function seedEvent(event: StoredEvent): NewEvent {
  const { seq: _seq, op: _op, ...rest } = event;
  return rest as NewEvent;
}
