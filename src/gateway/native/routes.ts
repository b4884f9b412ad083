/**
 * The native API's route table (DESIGN §8): `/v1` and the gateway's probes, sessions only
 * through `SessionClient`. Errors leave as `{error: {code, message}}` (errors.ts).
 */
import { SessionlogError, type SessionHeader } from '../../session/index.js';
import {
  approvalBody,
  approvalResponse,
  approvalsQuery,
  approvalsResponse,
  callParams,
  toolResultBody,
  toolResultResponse,
} from './approval-schemas.js';
import { GatewayError } from '../errors.js';
import {
  ARTIFACT_PAGE_DEFAULT_CHARS,
  artifactParams,
  artifactQuery,
  artifactResponse,
  streamTokenResponse,
  surfaceResponse,
  turnsQuery,
  turnsResponse,
} from './inspector-schemas.js';
import {
  budgetResponse,
  patchSessionBody,
  patchSessionResponse,
  acceptedMessageResponse,
  cancelResponse,
  compactDeferredResponse,
  compactResponse,
  contextResponse,
  eraseResponse,
  createSessionBody,
  emptyBody,
  eventsQuery,
  eventsResponse,
  forkBody,
  branchBody,
  branchResponse,
  branchesResponse,
  editBody,
  healthResponse,
  lastEventIdSchema,
  messagesResponse,
  openApiResponse,
  postMessageBody,
  postMessageQuery,
  replyResponse,
  resumeResponse,
  sessionDetailResponse,
  sessionListResponse,
  salvageBody,
  sessionParams,
  sessionResponse,
  transcriptResponse,
  usageAcrossQuery,
  usageAcrossResponse,
  usageLedgerResponse,
  usageQuery,
} from './schemas.js';
import { checkReadiness, probeStore, probeTemporal, readinessResponse } from '../readiness.js';
import {
  STREAMED,
  defineRoute,
  noParams,
  noQuery,
  type RouteContext,
  type RouteResult,
  type RouteSpec,
} from '../route-table.js';
import { streamEvents, wantsEventStream } from '../sse.js';

const AUTH_ERRORS = [401];

/** A usage query's time bounds as the client takes them. */
function window(query: { from?: number | undefined; to?: number | undefined }): { from?: number; to?: number } {
  return {
    ...(query.from !== undefined ? { from: query.from } : {}),
    ...(query.to !== undefined ? { to: query.to } : {}),
  };
}
const SESSION_ERRORS = [400, 401, 404];

async function requireSession(ctx: RouteContext, id: string): Promise<SessionHeader> {
  if (!(await ctx.client.exists(id))) {
    throw new SessionlogError(
      'SESSION_NOT_FOUND',
      `session ${id} does not exist; create it with POST /v1/sessions or list sessions with GET /v1/sessions`,
    );
  }
  return ctx.client.header(id);
}

const ok = (body: unknown): RouteResult => ({ status: 200, body });

/** Every route of the native API, the gateway's probes included. */
export const NATIVE_ROUTES: readonly RouteSpec[] = [
  defineRoute({
    method: 'GET',
    path: '/healthz',
    operationId: 'health',
    right: 'read',
    summary: 'Liveness probe (no token needed)',
    public: true,
    params: noParams,
    query: noQuery,
    responses: { 200: { description: 'the gateway is up', schema: healthResponse } },
    errors: [400],
    handler: async () => ok({ ok: true }),
  }),
  defineRoute({
    method: 'GET',
    path: '/readyz',
    operationId: 'ready',
    right: 'read',
    summary: 'Readiness probe: the store and Temporal answer (no token needed)',
    public: true,
    params: noParams,
    query: noQuery,
    responses: {
      200: { description: 'the store and the Temporal frontend answer', schema: readinessResponse },
      503: { description: 'a dependency does not answer; `reason` names it', schema: readinessResponse },
    },
    errors: [400],
    handler: async (ctx) => {
      const report = await checkReadiness({
        store: () => probeStore(ctx.client.store),
        temporal: () => probeTemporal(ctx.client.temporal.connection),
      });
      return { status: report.ready ? 200 : 503, body: report };
    },
  }),
  defineRoute({
    method: 'GET',
    path: '/v1/openapi.json',
    operationId: 'openapi',
    right: 'read',
    summary: 'This OpenAPI 3.1 document',
    params: noParams,
    query: noQuery,
    responses: { 200: { description: 'the OpenAPI document', schema: openApiResponse } },
    errors: [400, ...AUTH_ERRORS],
    handler: async (ctx) => ok(ctx.openapi()),
  }),
  defineRoute({
    method: 'POST',
    path: '/v1/sessions',
    operationId: 'createSession',
    right: 'write',
    summary: 'Create a session and start its workflow',
    params: noParams,
    query: noQuery,
    body: createSessionBody,
    responses: { 201: { description: 'the new session', schema: sessionResponse } },
    errors: [400, 401, 409, 413, 415],
    handler: async (ctx, { body }) => {
      const session = await ctx.client.create({
        ...(body?.id !== undefined ? { sessionId: body.id } : {}),
        ...(body?.agent ? { agent: body.agent } : {}),
        ...(body?.budget ? { budget: body.budget } : {}),
      });
      return { status: 201, body: { session } };
    },
  }),
  defineRoute({
    method: 'GET',
    path: '/v1/sessions',
    operationId: 'listSessions',
    right: 'read',
    summary: 'List the headers of every stored session',
    params: noParams,
    query: noQuery,
    responses: { 200: { description: 'session headers', schema: sessionListResponse } },
    errors: [400, ...AUTH_ERRORS],
    handler: async (ctx) => ok({ sessions: (await ctx.client.list()).map(({ events: _events, ...header }) => header) }),
  }),
  defineRoute({
    method: 'GET',
    path: '/v1/sessions/:id',
    operationId: 'getSession',
    right: 'read',
    summary: "A session's header and, when its workflow runs, its live status",
    params: sessionParams,
    query: noQuery,
    responses: { 200: { description: 'header and status', schema: sessionDetailResponse } },
    errors: SESSION_ERRORS,
    handler: async (ctx, { params }) => {
      await requireSession(ctx, params.id);
      const shown = await ctx.client.show(params.id);
      return ok({ session: shown.header, status: shown.status });
    },
  }),
  defineRoute({
    method: 'POST',
    path: '/v1/sessions/:id/messages',
    operationId: 'postMessage',
    right: 'write',
    summary: 'Send a user message (queued at once, or with ?wait=true answered with the reply)',
    params: sessionParams,
    query: postMessageQuery,
    body: postMessageBody,
    responses: {
      200: { description: 'with ?wait=true: the turn that answered and its reply', schema: replyResponse },
      202: { description: 'the message is queued', schema: acceptedMessageResponse },
    },
    errors: [...SESSION_ERRORS, 409, 413, 415, 422],
    handler: async (ctx, { params, query, body }) => {
      await requireSession(ctx, params.id);
      const options = body.id !== undefined ? { id: body.id } : {};
      if (query.wait === 'true') return ok(await ctx.client.send(params.id, body.text, options));
      return { status: 202, body: await ctx.client.post(params.id, body.text, options) };
    },
  }),
  defineRoute({
    method: 'GET',
    path: '/v1/sessions/:id/messages',
    operationId: 'getHistory',
    right: 'read',
    summary: 'The derived model history (what the model would be sent next)',
    params: sessionParams,
    query: noQuery,
    responses: { 200: { description: 'derived messages', schema: messagesResponse } },
    errors: SESSION_ERRORS,
    handler: async (ctx, { params }) => {
      await requireSession(ctx, params.id);
      return ok({ messages: await ctx.client.history(params.id) });
    },
  }),
  defineRoute({
    method: 'GET',
    path: '/v1/sessions/:id/transcript',
    operationId: 'getTranscript',
    right: 'read',
    summary: 'The human transcript: every user, assistant and tool message as appended',
    params: sessionParams,
    query: noQuery,
    responses: { 200: { description: 'message events in log order', schema: transcriptResponse } },
    errors: SESSION_ERRORS,
    handler: async (ctx, { params }) => {
      await requireSession(ctx, params.id);
      return ok({ events: await ctx.client.transcript(params.id) });
    },
  }),
  defineRoute({
    method: 'GET',
    path: '/v1/sessions/:id/events',
    operationId: 'getEvents',
    right: 'read',
    summary: 'Stored events from a seq (JSON), or a live SSE tail with Accept: text/event-stream',
    params: sessionParams,
    query: eventsQuery,
    headers: [
      {
        name: 'Last-Event-ID',
        description: 'SSE reconnect: the seq of the last event received; the stream resumes after it',
        schema: lastEventIdSchema,
      },
    ],
    responses: {
      200: {
        description: 'events',
        schema: eventsResponse,
        eventStream:
          'one SSE event per log event: `id: <seq>`, `event: <type>`, `data: <event JSON>`; `: heartbeat` comments every 15 s',
      },
    },
    errors: SESSION_ERRORS,
    handler: async (ctx, { params, query, request, reply }) => {
      await requireSession(ctx, params.id);
      if (!wantsEventStream(request))
        return ok({ events: await ctx.client.events(params.id, query.from ?? 0, query.limit) });
      const lastEventId = request.headers['last-event-id'];
      let fromSeq = query.from ?? 0;
      if (lastEventId !== undefined) {
        const parsed = lastEventIdSchema.safeParse(lastEventId);
        if (!parsed.success)
          throw new GatewayError(
            'INVALID_REQUEST',
            'Last-Event-ID must be the seq (a whole number) of the last event received',
          );
        fromSeq = parsed.data + 1;
      }
      await streamEvents(request, reply, {
        client: ctx.client,
        sessionId: params.id,
        fromSeq,
        limit: query.limit,
        coalesce: query.coalesce === 'true',
        heartbeatMs: ctx.sseHeartbeatMs,
        streams: ctx.streams,
      });
      return STREAMED;
    },
  }),
  defineRoute({
    method: 'GET',
    path: '/v1/sessions/:id/context',
    operationId: 'getContext',
    right: 'read',
    summary: "What the session's next request costs, by kind, against its budget and window",
    params: sessionParams,
    query: noQuery,
    responses: { 200: { description: 'the context breakdown', schema: contextResponse } },
    errors: SESSION_ERRORS,
    handler: async (ctx, { params }) => {
      await requireSession(ctx, params.id);
      return ok({ context: await ctx.client.context(params.id) });
    },
  }),
  defineRoute({
    method: 'GET',
    path: '/v1/sessions/:id/turns',
    operationId: 'getTurns',
    right: 'read',
    summary:
      "One summary per turn (messages, streamed replies, tool calls, retries, outcome), every request's token usage and every compaction and prune, folded from the log",
    params: sessionParams,
    query: turnsQuery,
    responses: { 200: { description: 'the turns view (src/session/turns-view.ts)', schema: turnsResponse } },
    errors: SESSION_ERRORS,
    handler: async (ctx, { params, query }) => {
      await requireSession(ctx, params.id);
      return ok(await ctx.client.turns(params.id, query.last));
    },
  }),
  defineRoute({
    method: 'GET',
    path: '/v1/sessions/:id/usage',
    operationId: 'getSessionUsage',
    right: 'read',
    summary:
      "The session's cost ledger: tokens and cost of every model reply and compaction summary, per turn, per model and in total (from the log)",
    params: sessionParams,
    query: usageQuery,
    responses: { 200: { description: 'the ledger (src/session/usage.ts)', schema: usageLedgerResponse } },
    errors: SESSION_ERRORS,
    handler: async (ctx, { params, query }) => {
      await requireSession(ctx, params.id);
      return ok(await ctx.client.usage(params.id, window(query)));
    },
  }),
  defineRoute({
    method: 'GET',
    path: '/v1/sessions/:id/budget',
    operationId: 'getSessionBudget',
    right: 'read',
    summary: "The session's spend caps and what its current turn and the whole session used (from the log)",
    params: sessionParams,
    query: noQuery,
    responses: { 200: { description: 'the budget and use (src/session/budget.ts)', schema: budgetResponse } },
    errors: SESSION_ERRORS,
    handler: async (ctx, { params }) => {
      await requireSession(ctx, params.id);
      return ok(await ctx.client.budget(params.id));
    },
  }),
  defineRoute({
    method: 'PATCH',
    path: '/v1/sessions/:id',
    operationId: 'patchSession',
    right: 'admin',
    summary:
      "Change a session's spend caps (logged as session/budget); a turn paused on its budget goes on at once if the new caps leave room. Answers at once: while a turn runs, the change applies when it ends",
    params: sessionParams,
    query: noQuery,
    body: patchSessionBody,
    responses: {
      200: {
        description: 'when the change applies, the budget now in force and the use',
        schema: patchSessionResponse,
      },
    },
    errors: [...SESSION_ERRORS, 413, 415, 422],
    handler: async (ctx, { params, body }) => {
      await requireSession(ctx, params.id);
      const { applies } = await ctx.client.setBudget(
        params.id,
        body.budget,
        body.by !== undefined ? { by: body.by } : {},
      );
      return ok({ applies, ...(await ctx.client.budget(params.id)) });
    },
  }),
  defineRoute({
    method: 'GET',
    path: '/v1/usage',
    operationId: 'getUsage',
    right: 'read',
    summary: 'Tokens and cost summed across sessions, per model and in total, for calls logged between from and to',
    params: noParams,
    query: usageAcrossQuery,
    responses: { 200: { description: "the sums over the token's tenant's sessions", schema: usageAcrossResponse } },
    errors: [400, 401, 403, 500, 503],
    handler: async (ctx, { query }) => {
      const own = ctx.client.tenant;
      if (own !== undefined && query.tenant !== undefined && query.tenant !== own)
        throw new GatewayError('FORBIDDEN', `this token sums tenant ${own}'s usage, not ${query.tenant}'s`);
      // Without tokens (loopback) the gateway sees every tenant: `tenant` picks one.
      const client = own === undefined && query.tenant !== undefined ? ctx.client.forTenant(query.tenant) : ctx.client;
      return ok({
        tenant: client.tenant ?? null,
        ...(await client.usageAcross(window(query))),
        spend: await client.tenantSpend(),
      });
    },
  }),
  defineRoute({
    method: 'GET',
    path: '/v1/sessions/:id/surface',
    operationId: 'getSurface',
    right: 'read',
    summary:
      'Which logged events the next request carries (the surface, in order) and what shadowed the others (summary, prune)',
    params: sessionParams,
    query: noQuery,
    responses: { 200: { description: 'the surface view (src/session/surface-view.ts)', schema: surfaceResponse } },
    errors: SESSION_ERRORS,
    handler: async (ctx, { params }) => {
      await requireSession(ctx, params.id);
      return ok(await ctx.client.surface(params.id));
    },
  }),
  defineRoute({
    method: 'GET',
    path: '/v1/sessions/:id/artifacts/:name',
    operationId: 'readArtifact',
    right: 'read',
    summary: 'A page of a stored artifact (full tool output, spilled text) by the name in its locator',
    params: artifactParams,
    query: artifactQuery,
    responses: {
      200: { description: 'the characters [offset, offset + limit) and the total length', schema: artifactResponse },
    },
    errors: SESSION_ERRORS,
    handler: async (ctx, { params, query }) => {
      await requireSession(ctx, params.id);
      const offset = query.offset ?? 0;
      return ok(
        await ctx.client.readArtifact(params.id, params.name, offset, query.limit ?? ARTIFACT_PAGE_DEFAULT_CHARS),
      );
    },
  }),
  defineRoute({
    method: 'POST',
    path: '/v1/sessions/:id/stream-token',
    operationId: 'mintStreamToken',
    right: 'read',
    summary:
      "A short-lived token that opens this session's SSE events stream without an Authorization header (for a browser EventSource)",
    params: sessionParams,
    query: noQuery,
    body: emptyBody,
    responses: { 200: { description: 'the token and when it stops opening streams', schema: streamTokenResponse } },
    errors: [...SESSION_ERRORS, 415],
    handler: async (ctx, { params }) => {
      await requireSession(ctx, params.id);
      return ok(ctx.streamTokens.mint(params.id));
    },
  }),
  defineRoute({
    method: 'POST',
    path: '/v1/sessions/:id/compact',
    operationId: 'compactSession',
    right: 'write',
    summary:
      'Run a manual compaction: at once when the session is idle (200), else when its running turn ends (202, answered at once)',
    params: sessionParams,
    query: noQuery,
    body: emptyBody,
    responses: {
      200: { description: 'what the compaction shadowed, or null', schema: compactResponse },
      202: {
        description: 'a turn runs (or waits for an approval): the compaction runs when it ends',
        schema: compactDeferredResponse,
      },
    },
    errors: [...SESSION_ERRORS, 409, 415],
    handler: async (ctx, { params }) => {
      await requireSession(ctx, params.id);
      const compaction = await ctx.client.compact(params.id, { atOnce: true });
      if (compaction !== null && 'applies' in compaction) return { status: 202, body: compaction };
      return ok({ compaction });
    },
  }),
  defineRoute({
    method: 'POST',
    path: '/v1/sessions/:id/fork',
    operationId: 'forkSession',
    right: 'write',
    summary: "Fork a session: a new session seeded with the parent's log up to a seq",
    params: sessionParams,
    query: noQuery,
    body: forkBody,
    responses: { 201: { description: 'the child session; its header names the parent', schema: sessionResponse } },
    errors: [...SESSION_ERRORS, 409, 413, 415],
    handler: async (ctx, { params, body }) => {
      await requireSession(ctx, params.id);
      const forked = await ctx.client.fork(params.id, {
        ...(body?.id !== undefined ? { childId: body.id } : {}),
        ...(body?.at !== undefined ? { at: body.at } : {}),
      });
      return { status: 201, body: { session: forked.header } };
    },
  }),
  defineRoute({
    method: 'POST',
    path: '/v1/sessions/:id/edit',
    operationId: 'editMessage',
    right: 'write',
    summary:
      'Edit an earlier user message as a branch: a new session forked just before it, where the new text starts a turn (the session itself is never rewritten)',
    params: sessionParams,
    query: noQuery,
    body: editBody,
    responses: { 201: { description: 'the branch', schema: branchResponse } },
    errors: [...SESSION_ERRORS, 409, 413, 415],
    handler: async (ctx, { params, body }) => {
      await requireSession(ctx, params.id);
      const branch = await ctx.client.edit(params.id, body.seq, body.text, body.id ? { childId: body.id } : {});
      return { status: 201, body: { branch } };
    },
  }),
  defineRoute({
    method: 'POST',
    path: '/v1/sessions/:id/regenerate',
    operationId: 'regenerateReply',
    right: 'write',
    summary:
      "Regenerate the last turn's reply as a branch: a new session forked just before that turn, where its user message starts the turn again",
    params: sessionParams,
    query: noQuery,
    body: branchBody,
    responses: { 201: { description: 'the branch', schema: branchResponse } },
    errors: [...SESSION_ERRORS, 409, 413, 415],
    handler: async (ctx, { params, body }) => {
      await requireSession(ctx, params.id);
      const branch = await ctx.client.regenerate(params.id, body?.id ? { childId: body.id } : {});
      return { status: 201, body: { branch } };
    },
  }),
  defineRoute({
    method: 'GET',
    path: '/v1/sessions/:id/branches',
    operationId: 'listBranches',
    right: 'read',
    summary: 'The sessions forked from this one (edits, regenerations, forks), with the seq each left it at',
    params: sessionParams,
    query: noQuery,
    responses: { 200: { description: 'the branches, oldest first', schema: branchesResponse } },
    errors: SESSION_ERRORS,
    handler: async (ctx, { params }) => {
      await requireSession(ctx, params.id);
      return { status: 200, body: { branches: await ctx.client.branches(params.id) } };
    },
  }),
  defineRoute({
    method: 'POST',
    path: '/v1/sessions/:id/approvals/:callId',
    right: 'approve',
    operationId: 'answerApproval',
    summary: 'Approve or deny a tool call waiting for approval; a second answer returns the first decision',
    params: callParams,
    query: noQuery,
    body: approvalBody,
    responses: { 200: { description: 'the decision that counts for the call', schema: approvalResponse } },
    errors: [...SESSION_ERRORS, 413, 415],
    handler: async (ctx, { params, body }) => {
      await requireSession(ctx, params.id);
      return ok(await ctx.client.approve(params.id, params.callId, body));
    },
  }),
  defineRoute({
    method: 'POST',
    path: '/v1/sessions/:id/tool-results',
    right: 'approve',
    operationId: 'postToolResult',
    summary: 'Post the result of an external tool the caller ran; the turn waiting for it carries on',
    params: sessionParams,
    query: noQuery,
    body: toolResultBody,
    responses: { 200: { description: 'the result was accepted and logged with the step', schema: toolResultResponse } },
    errors: [...SESSION_ERRORS, 409, 413, 415, 422],
    handler: async (ctx, { params, body }) => {
      await requireSession(ctx, params.id);
      return ok(
        await ctx.client.submitToolResult(params.id, body.callId, body.output, {
          ...(body.isError !== undefined ? { isError: body.isError } : {}),
          ...(body.by !== undefined ? { by: body.by } : {}),
        }),
      );
    },
  }),
  defineRoute({
    method: 'GET',
    path: '/v1/approvals',
    operationId: 'listApprovals',
    right: 'read',
    summary:
      'Tool calls waiting for an answer (approval or external result) across sessions, with tool, arguments, age and expiry',
    params: noParams,
    query: approvalsQuery,
    responses: { 200: { description: 'pending calls, oldest session first', schema: approvalsResponse } },
    errors: [400, ...AUTH_ERRORS],
    handler: async (ctx, { query }) =>
      ok({
        approvals: await ctx.client.pendingApprovals(query.session !== undefined ? { sessionId: query.session } : {}),
      }),
  }),
  defineRoute({
    method: 'POST',
    path: '/v1/sessions/:id/salvage',
    right: 'admin',
    operationId: 'salvageSession',
    summary:
      'A new session seeded with the longest valid prefix of a damaged one (the damaged session is left untouched)',
    params: sessionParams,
    query: noQuery,
    body: salvageBody,
    responses: {
      201: {
        description: 'the new session; its header names the parent and the first bad seq',
        schema: sessionResponse,
      },
    },
    errors: [...SESSION_ERRORS, 409, 413, 415],
    handler: async (ctx, { params, body }) => {
      await requireSession(ctx, params.id);
      const salvaged = await ctx.client.salvage(params.id, body?.into !== undefined ? { into: body.into } : {});
      return { status: 201, body: { session: salvaged.header } };
    },
  }),
  defineRoute({
    method: 'DELETE',
    path: '/v1/sessions/:id',
    operationId: 'eraseSession',
    right: 'admin',
    summary:
      'Erase a session: its log, artifacts, checkpoints and workflow histories; the id is refused for the tombstone period',
    params: sessionParams,
    query: noQuery,
    responses: {
      200: {
        description: 'what was removed, from the store and from Temporal (erasing twice is harmless)',
        schema: eraseResponse,
      },
    },
    errors: [400, 401],
    handler: async (ctx, { params }) => ok({ receipt: await ctx.client.erase(params.id) }),
  }),
  defineRoute({
    method: 'POST',
    path: '/v1/sessions/:id/cancel',
    operationId: 'cancelTurn',
    right: 'write',
    summary: 'Abort the running turn (its partial reply is logged as interrupted)',
    params: sessionParams,
    query: noQuery,
    body: emptyBody,
    responses: { 200: { description: 'whether a cancel was sent to a running workflow', schema: cancelResponse } },
    errors: [...SESSION_ERRORS, 415],
    handler: async (ctx, { params }) => {
      await requireSession(ctx, params.id);
      return ok({ cancelRequested: await ctx.client.cancel(params.id) });
    },
  }),
  defineRoute({
    method: 'POST',
    path: '/v1/sessions/:id/resume',
    right: 'admin',
    operationId: 'resumeSession',
    summary: 'Start a run for a session whose workflow is gone (no-op when one runs)',
    params: sessionParams,
    query: noQuery,
    body: emptyBody,
    responses: { 200: { description: 'the run', schema: resumeResponse } },
    errors: [...SESSION_ERRORS, 415],
    handler: async (ctx, { params }) => {
      await requireSession(ctx, params.id);
      return ok(await ctx.client.resume(params.id));
    },
  }),
];
