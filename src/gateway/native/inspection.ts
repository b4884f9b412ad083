/**
 * Native inspection, folded from a session's log: what its next request costs (context) and
 * carries (surface), its turns, its cost ledger and budget, a page of a stored artifact, and
 * usage summed across a tenant's sessions.
 */
import type { z } from 'zod';
import { GatewayError } from '../errors.js';
import type { RouteContext } from '../route-table.js';
import { ARTIFACT_PAGE_DEFAULT_CHARS, type artifactQuery, type turnsQuery } from './inspector-schemas.js';
import type { usageAcrossQuery, usageQuery } from './schemas.js';
import { requireSession } from './sessions.js';

/** A usage query's time bounds as the client takes them. */
function window(query: z.infer<typeof usageQuery>): { from?: number; to?: number } {
  return {
    ...(query.from !== undefined ? { from: query.from } : {}),
    ...(query.to !== undefined ? { to: query.to } : {}),
  };
}

export async function getContext(ctx: RouteContext, id: string) {
  await requireSession(ctx, id);
  return { context: await ctx.client.context(id) };
}

export async function getTurns(ctx: RouteContext, id: string, query: z.infer<typeof turnsQuery>) {
  await requireSession(ctx, id);
  return ctx.client.turns(id, query.last);
}

export async function getSessionUsage(ctx: RouteContext, id: string, query: z.infer<typeof usageQuery>) {
  await requireSession(ctx, id);
  return ctx.client.usage(id, window(query));
}

export async function getSessionBudget(ctx: RouteContext, id: string) {
  await requireSession(ctx, id);
  return ctx.client.budget(id);
}

/**
 * Tokens and cost across the token's tenant's sessions. Without tokens (loopback) the gateway
 * sees every tenant: `tenant` picks one; a token may name only its own.
 */
export async function getUsage(ctx: RouteContext, query: z.infer<typeof usageAcrossQuery>) {
  const own = ctx.client.tenant;
  if (own !== undefined && query.tenant !== undefined && query.tenant !== own)
    throw new GatewayError('FORBIDDEN', `this token sums tenant ${own}'s usage, not ${query.tenant}'s`);
  const client = own === undefined && query.tenant !== undefined ? ctx.client.forTenant(query.tenant) : ctx.client;
  return {
    tenant: client.tenant ?? null,
    ...(await client.usageAcross(window(query))),
    spend: await client.tenantSpend(),
  };
}

export async function getSurface(ctx: RouteContext, id: string) {
  await requireSession(ctx, id);
  return ctx.client.surface(id);
}

/** The characters [offset, offset + limit) of the artifact and its total length. */
export async function readArtifact(ctx: RouteContext, id: string, name: string, query: z.infer<typeof artifactQuery>) {
  await requireSession(ctx, id);
  return ctx.client.readArtifact(id, name, query.offset ?? 0, query.limit ?? ARTIFACT_PAGE_DEFAULT_CHARS);
}
