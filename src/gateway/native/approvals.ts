/**
 * Native approvals: a tool call waiting for approval approved or denied, an external tool's
 * result posted, and the calls waiting for an answer listed across sessions.
 */
import type { z } from 'zod';
import type { RouteContext } from '../route-table.js';
import type { approvalBody, approvalsQuery, toolResultBody } from './approval-schemas.js';
import { requireSession } from './sessions.js';

/** The decision that counts for the call (a second answer returns the first). */
export async function answerApproval(
  ctx: RouteContext,
  id: string,
  callId: string,
  body: z.infer<typeof approvalBody>,
) {
  await requireSession(ctx, id);
  return ctx.client.approve(id, callId, body);
}

export async function postToolResult(ctx: RouteContext, id: string, body: z.infer<typeof toolResultBody>) {
  await requireSession(ctx, id);
  return ctx.client.submitToolResult(id, body.callId, body.output, {
    ...(body.isError !== undefined ? { isError: body.isError } : {}),
    ...(body.by !== undefined ? { by: body.by } : {}),
  });
}

/** Pending calls, oldest session first, of one session or all. */
export async function listApprovals(ctx: RouteContext, query: z.infer<typeof approvalsQuery>) {
  return {
    approvals: await ctx.client.pendingApprovals(query.session !== undefined ? { sessionId: query.session } : {}),
  };
}
