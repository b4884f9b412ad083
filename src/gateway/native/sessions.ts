/**
 * Native sessions (`/v1/sessions`): created, listed, read, their caps changed, compacted,
 * forked, salvaged, resumed and erased, each through `SessionClient`. A route that names a
 * session answers SESSION_NOT_FOUND for one that does not exist (`requireSession`).
 */
import type { z } from 'zod';
import { SessionlogError, type SessionHeader } from '../../session/index.js';
import type { RouteContext, RouteResult } from '../route-table.js';
import type { createSessionBody, forkBody, patchSessionBody, salvageBody } from './schemas.js';

/** The session's header, or SESSION_NOT_FOUND naming how to create or find one. */
export async function requireSession(ctx: RouteContext, id: string): Promise<SessionHeader> {
  if (!(await ctx.client.exists(id))) {
    throw new SessionlogError(
      'SESSION_NOT_FOUND',
      `session ${id} does not exist; create it with POST /v1/sessions or list sessions with GET /v1/sessions`,
    );
  }
  return ctx.client.header(id);
}

export async function createSession(ctx: RouteContext, body: z.infer<typeof createSessionBody>) {
  const session = await ctx.client.create({
    ...(body?.id !== undefined ? { sessionId: body.id } : {}),
    ...(body?.agent ? { agent: body.agent } : {}),
    ...(body?.budget ? { budget: body.budget } : {}),
  });
  return { session };
}

/** Every stored session's header, without its event count. */
export async function listSessions(ctx: RouteContext) {
  return { sessions: (await ctx.client.list()).map(({ events: _events, ...header }) => header) };
}

/** The header and, when its workflow runs, the live status. */
export async function getSession(ctx: RouteContext, id: string) {
  await requireSession(ctx, id);
  const shown = await ctx.client.show(id);
  return { session: shown.header, status: shown.status };
}

/** New spend caps: when they apply, the budget now in force and the use. */
export async function patchSession(ctx: RouteContext, id: string, body: z.infer<typeof patchSessionBody>) {
  await requireSession(ctx, id);
  const { applies } = await ctx.client.setBudget(id, body.budget, body.by !== undefined ? { by: body.by } : {});
  return { applies, ...(await ctx.client.budget(id)) };
}

/** A manual compaction: 200 with what it shadowed when it ran at once, 202 when it runs at the turn's end. */
export async function compactSession(ctx: RouteContext, id: string): Promise<RouteResult> {
  await requireSession(ctx, id);
  const compaction = await ctx.client.compact(id, { atOnce: true });
  if (compaction !== null && 'applies' in compaction) return { status: 202, body: compaction };
  return { status: 200, body: { compaction } };
}

export async function forkSession(ctx: RouteContext, id: string, body: z.infer<typeof forkBody>) {
  await requireSession(ctx, id);
  const forked = await ctx.client.fork(id, {
    ...(body?.id !== undefined ? { childId: body.id } : {}),
    ...(body?.at !== undefined ? { at: body.at } : {}),
  });
  return { session: forked.header };
}

export async function salvageSession(ctx: RouteContext, id: string, body: z.infer<typeof salvageBody>) {
  await requireSession(ctx, id);
  const salvaged = await ctx.client.salvage(id, body?.into !== undefined ? { into: body.into } : {});
  return { session: salvaged.header };
}

/** Erasing needs no stored session: erasing twice is harmless. */
export async function eraseSession(ctx: RouteContext, id: string) {
  return { receipt: await ctx.client.erase(id) };
}

export async function resumeSession(ctx: RouteContext, id: string) {
  await requireSession(ctx, id);
  return ctx.client.resume(id);
}
