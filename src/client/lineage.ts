/**
 * New sessions made from existing ones, as `SessionClient` makes them (session-client.ts
 * documents each): forks (DESIGN §3), edits and regenerations as branches (issue 24), the
 * branches of a session, and salvage of a damaged one (DESIGN §4.1).
 */
import { randomUUID } from 'node:crypto';
import { SessionlogError, isEventOfType, textOf, type SessionHeader, type StoredEvent } from '../session/index.js';
import { openedUpdate, type SeedSpec } from '../workflows/api.js';
import { create, post } from './commands.js';
import type { ClientCore } from './core.js';
import { assertMessageText, assertSessionId } from './inputs.js';
import { events as readEvents } from './reads.js';
import type { BranchResult } from './session-client.js';

export async function fork(
  core: ClientCore,
  sessionId: string,
  options: { childId?: string; at?: number } = {},
): Promise<{ sessionId: string; header: SessionHeader }> {
  await core.requireSession(sessionId);
  return seedSession(core, options.childId ?? randomUUID(), {
    kind: 'fork',
    parentId: sessionId,
    ...(options.at !== undefined ? { at: options.at } : {}),
  });
}

export async function edit(
  core: ClientCore,
  sessionId: string,
  seq: number,
  text: string,
  options: { childId?: string } = {},
): Promise<BranchResult> {
  await core.requireSession(sessionId);
  assertMessageText(text, core.maxMessageBytes);
  const events = await readEvents(core, sessionId, 0);
  const event = events[seq];
  if (!event || !isEventOfType(event, 'user/message') || event.data.source.kind !== 'user')
    throw new SessionlogError('INVALID_ARGUMENT', `seq ${seq} of session ${sessionId} is not a message the user sent`);
  const start = turnStartBefore(events, seq);
  return branchWith(core, sessionId, start - 1, text, options.childId, start === seq ? undefined : events[start]);
}

export async function regenerate(
  core: ClientCore,
  sessionId: string,
  options: { childId?: string } = {},
): Promise<BranchResult> {
  await core.requireSession(sessionId);
  const events = await readEvents(core, sessionId, 0);
  for (let i = events.length - 1; i >= 0; i--) {
    const event = events[i]!;
    if (!isEventOfType(event, 'user/message') || event.data.source.kind !== 'user') continue;
    const start = turnStartBefore(events, i);
    if (start === i) continue;
    return branchWith(core, sessionId, start - 1, textOf(event.data.content), options.childId, events[start]);
  }
  throw new SessionlogError('INVALID_ARGUMENT', `session ${sessionId} has no turn started by a user's message`);
}

export async function branches(
  core: ClientCore,
  sessionId: string,
): Promise<Array<{ sessionId: string; createdAt: number; forkedAt: number }>> {
  await core.requireSession(sessionId);
  return (await core.store.list(core.scope))
    .filter((header) => header.parentSession === sessionId)
    .sort((a, b) => a.createdAt - b.createdAt)
    .map((header) => ({ sessionId: header.id, createdAt: header.createdAt, forkedAt: (header.seedLength ?? 1) - 1 }));
}

export async function salvage(
  core: ClientCore,
  sessionId: string,
  options: { into?: string } = {},
): Promise<{ sessionId: string; header: SessionHeader }> {
  await core.requireSession(sessionId);
  return seedSession(core, options.into ?? randomUUID(), { kind: 'salvage', parentId: sessionId });
}

/**
 * A branch of `parentId`: forked after `at` (a new empty session when `at` is before the first
 * event), where `text` (with the tools of `turnStart`, the turn it replaces) starts a turn.
 */
async function branchWith(
  core: ClientCore,
  parentId: string,
  at: number,
  text: string,
  childId: string | undefined,
  turnStart: StoredEvent | undefined,
): Promise<BranchResult> {
  const id = childId ?? randomUUID();
  const child =
    at >= 0
      ? await fork(core, parentId, { childId: id, at })
      : await create(core, { sessionId: id }).then((header) => ({ sessionId: id, header }));
  const tools =
    turnStart && isEventOfType(turnStart, 'turn/start') && turnStart.data.tools ? turnStart.data.tools : undefined;
  const posted = await post(core, child.sessionId, text, tools ? { tools } : {});
  return { sessionId: child.sessionId, forkedFrom: parentId, forkedAt: at, messageId: posted.id };
}

/** Starts the workflow of new session `childId`, which writes its log from `seed`. */
async function seedSession(
  core: ClientCore,
  childId: string,
  seed: SeedSpec,
): Promise<{ sessionId: string; header: SessionHeader }> {
  assertSessionId(childId);
  // Any tenant's session takes the id (ids are global): the workflow of another tenant's is never reached.
  if (await core.options.store.exists(childId)) {
    throw new SessionlogError(
      'SESSION_ALREADY_EXISTS',
      `session ${childId} already exists; pick another id for the new session`,
    );
  }
  await core.updateWithStart(openedUpdate, childId, { args: [], seed });
  return { sessionId: childId, header: await core.store.header(childId) };
}

/** The seq of the `turn/start` of the turn `seq` is logged in, or `seq` itself when it is outside a turn. */
function turnStartBefore(events: readonly StoredEvent[], seq: number): number {
  for (let i = seq - 1; i >= 0; i--) {
    const type = events[i]!.type;
    if (type === 'turn/end') return seq;
    if (type === 'turn/start') return i;
  }
  return seq;
}
