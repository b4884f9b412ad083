/**
 * Native messages (`/v1/sessions/:id/…`): a user message posted (queued, or waited for), the
 * derived history and the transcript read, the running turn cancelled, and an earlier message
 * edited or the last reply regenerated as a branch (a new session; the session itself is never
 * rewritten), and the branches listed.
 */
import type { z } from 'zod';
import type { RouteContext, RouteResult } from '../route-table.js';
import type { branchBody, editBody, postMessageBody, postMessageQuery } from './schemas.js';
import type { UserPart } from '../../session/index.js';
import { eventWithMediaLinks, messageWithMediaLinks } from './media.js';
import { requireSession } from './sessions.js';

/** Queued at once (202), or with `?wait=true` answered with the turn and its reply (200). */
export async function postMessage(
  ctx: RouteContext,
  id: string,
  query: z.infer<typeof postMessageQuery>,
  body: z.infer<typeof postMessageBody>,
): Promise<RouteResult> {
  await requireSession(ctx, id);
  // The tool options are the request options (hints) of the turn this message starts (issue 51).
  const hints = {
    ...(body.toolChoice !== undefined ? { toolChoice: body.toolChoice } : {}),
    ...(body.parallelToolCalls !== undefined ? { parallelToolCalls: body.parallelToolCalls } : {}),
  };
  const options = {
    ...(body.id !== undefined ? { id: body.id } : {}),
    ...(Object.keys(hints).length > 0 ? { hints } : {}),
    // Media parts are checked by the client, whose errors name the part (`content[i]: …`).
    ...(body.content !== undefined ? { content: body.content as UserPart[] } : {}),
  };
  const text = body.text ?? '';
  if (query.wait === 'true') return { status: 200, body: await ctx.client.send(id, text, options) };
  return { status: 202, body: await ctx.client.post(id, text, options) };
}

/** What the model would be sent next; each stored medium with the `url` of its bytes. */
export async function getHistory(ctx: RouteContext, id: string) {
  await requireSession(ctx, id);
  return { messages: (await ctx.client.history(id)).map(messageWithMediaLinks) };
}

/** Every user, assistant and tool message as appended; each stored medium with the `url` of its bytes. */
export async function getTranscript(ctx: RouteContext, id: string) {
  await requireSession(ctx, id);
  return { events: (await ctx.client.transcript(id)).map(eventWithMediaLinks) };
}

export async function cancelTurn(ctx: RouteContext, id: string) {
  await requireSession(ctx, id);
  return { cancelRequested: await ctx.client.cancel(id) };
}

export async function editMessage(ctx: RouteContext, id: string, body: z.infer<typeof editBody>) {
  await requireSession(ctx, id);
  const branch = await ctx.client.edit(id, body.seq, body.text, body.id ? { childId: body.id } : {});
  return { branch };
}

export async function regenerateReply(ctx: RouteContext, id: string, body: z.infer<typeof branchBody>) {
  await requireSession(ctx, id);
  const branch = await ctx.client.regenerate(id, body?.id ? { childId: body.id } : {});
  return { branch };
}

/** The sessions forked from this one, oldest first. */
export async function listBranches(ctx: RouteContext, id: string) {
  await requireSession(ctx, id);
  return { branches: await ctx.client.branches(id) };
}
