/**
 * A native session's events (`/v1/sessions/:id/events`): stored events from a seq as JSON, or
 * with `Accept: text/event-stream` a live SSE tail that resumes after `Last-Event-ID`; and the
 * short-lived token a browser EventSource opens that stream with.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { z } from 'zod';
import { GatewayError } from '../errors.js';
import { STREAMED, type RouteContext, type RouteResult } from '../route-table.js';
import { streamEvents, wantsEventStream } from '../sse.js';
import { lastEventIdSchema, type eventsQuery } from './schemas.js';
import { requireSession } from './sessions.js';

export async function getEvents(
  ctx: RouteContext,
  id: string,
  query: z.infer<typeof eventsQuery>,
  request: FastifyRequest,
  reply: FastifyReply,
): Promise<RouteResult> {
  await requireSession(ctx, id);
  if (!wantsEventStream(request))
    return { status: 200, body: { events: await ctx.client.events(id, query.from ?? 0, query.limit) } };
  await streamEvents(request, reply, {
    client: ctx.client,
    sessionId: id,
    fromSeq: streamStart(request, query.from ?? 0),
    limit: query.limit,
    coalesce: query.coalesce === 'true',
    heartbeatMs: ctx.sseHeartbeatMs,
    streams: ctx.streams,
  });
  return STREAMED;
}

/** The first seq a stream sends: after `Last-Event-ID` when the client reconnects, else `from`. */
function streamStart(request: FastifyRequest, from: number): number {
  const lastEventId = request.headers['last-event-id'];
  if (lastEventId === undefined) return from;
  const parsed = lastEventIdSchema.safeParse(lastEventId);
  if (!parsed.success)
    throw new GatewayError(
      'INVALID_REQUEST',
      'Last-Event-ID must be the seq (a whole number) of the last event received',
    );
  return parsed.data + 1;
}

export async function mintStreamToken(ctx: RouteContext, id: string) {
  await requireSession(ctx, id);
  return ctx.streamTokens.mint(id);
}
