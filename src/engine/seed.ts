/**
 * Seeding a new session from another (dsh-spec §8.7): a fork copies the parent's log up to a
 * seq; a salvage copies the longest valid prefix of a damaged log (closing a turn it leaves
 * open). Either way the child's header names its parent and the child's first batch is the
 * copied prefix plus `session/end-seed`, written by the child's own workflow run (its only
 * writer). The parent is read, never written.
 */
import {
  SessionlogError,
  planFork,
  planSalvage,
  seedEventOf,
  type NewEvent,
  type SessionHeader,
} from '../session/index.js';
import type { EngineDeps } from './deps.js';
import { seedOp } from './ops.js';
import type { SeedSpec } from './types.js';

/** Creates and seeds `sessionId` from `seed`; a no-op when the seed batch is already stored. */
export async function seedSession(deps: EngineDeps, sessionId: string, seed: SeedSpec): Promise<void> {
  // A retried run: the header is there; the seed batch is appended once (op replay).
  if ((await deps.store.exists(sessionId)) && (await deps.store.nextSeq(sessionId)) > 0) return;
  const planned =
    seed.kind === 'fork'
      ? await planForkOf(deps, sessionId, seed.parentId, seed.at)
      : await planSalvageOf(deps, sessionId, seed.parentId);
  if (!(await deps.store.exists(sessionId))) await deps.store.create(planned.header);
  await deps.store.append(sessionId, planned.seed, { expectedSeq: 0, op: seedOp(sessionId) });
}

async function planForkOf(
  deps: EngineDeps,
  childId: string,
  parentId: string,
  at: number | undefined,
): Promise<{ header: SessionHeader; seed: NewEvent[] }> {
  const parent = await deps.store.inspect(parentId);
  const events = parent.events.slice(0, parent.events.length - parent.repaired);
  const plan = planFork({ header: parent.header, events }, childId, deps.now(), at);
  return { header: plan.header, seed: [...plan.seed.map(seedEventOf), ...(plan.endSeed ? [plan.endSeed] : [])] };
}

async function planSalvageOf(
  deps: EngineDeps,
  childId: string,
  parentId: string,
): Promise<{ header: SessionHeader; seed: NewEvent[] }> {
  const scan = await deps.store.scan(parentId);
  if (!scan.header) {
    throw new SessionlogError(
      'CORRUPT_LOG',
      `session ${parentId} cannot be salvaged: its header is unreadable (${scan.headerProblem?.reason ?? 'unknown'}); restore it from a backup`,
    );
  }
  const problem = scan.problem ?? { seq: scan.events.length, reason: 'no damage found: the whole log is valid' };
  return planSalvage(scan.header, scan.events, problem, childId, deps.now());
}
