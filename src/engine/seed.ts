/**
 * Seeding a new session from another (dsh-spec §8.7): a fork copies the parent's log up to a
 * seq; a salvage copies the longest valid prefix of a damaged log (closing a turn it leaves
 * open). Either way the child's header names its parent and the child's first batch is the
 * copied prefix plus `session/end-seed`, written by the child's own workflow run (its only
 * writer). The parent is read, never written.
 */
import {
  SessionlogError,
  eventMedia,
  isSessionlogError,
  parseMediaLocator,
  withEventMediaOf,
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
  const events = await withOwnMedia(deps, sessionId, planned.seed);
  await deps.store.append(sessionId, events, { expectedSeq: 0, op: seedOp(sessionId) });
}

/**
 * The seed with its media stored in the new session (issue 50): each medium a copied message
 * holds is read from the session that stored it and stored again under the new session's id,
 * and the copied blocks name that copy. Media are never shared across sessions, so erasing the
 * parent leaves the child's whole (DESIGN §4.2: forks keep their own copy). A medium the parent
 * no longer has is left as the parent's reference.
 */
async function withOwnMedia(deps: EngineDeps, sessionId: string, seed: readonly NewEvent[]): Promise<NewEvent[]> {
  const copied = new Set<string>();
  const out: NewEvent[] = [];
  for (const event of seed) {
    const media = eventMedia(event);
    if (media.length === 0) {
      out.push(event);
      continue;
    }
    let whole = true;
    for (const source of media) {
      const owner = parseMediaLocator(source.locator)?.sessionId;
      if (owner === undefined || owner === sessionId || copied.has(source.locator)) continue;
      let bytes: Uint8Array;
      try {
        bytes = await deps.store.artifacts.readMedia(owner, source.locator);
      } catch (error) {
        if (!isSessionlogError(error, 'ARTIFACT_NOT_FOUND')) throw error;
        whole = false;
        continue;
      }
      await deps.store.artifacts.putMedia({
        sessionId,
        bytes,
        mediaType: source.mediaType,
        ...(source.width !== undefined ? { width: source.width, height: source.height! } : {}),
      });
      copied.add(source.locator);
    }
    out.push(whole ? withEventMediaOf(event, sessionId) : event);
  }
  return out;
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
