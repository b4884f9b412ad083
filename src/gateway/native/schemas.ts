/**
 * Wire schemas of the native API (`/v1`): request bodies, path params and query strings are parsed
 * with these at the boundary; the response schemas document the replies in the OpenAPI
 * document (they are not re-checked at run time).
 */
import { z } from 'zod';
import { DEFAULT_REPEATED_CALLS, MAX_BUDGET_WAIT_MS, SESSION_ID_PATTERN, TENANT_PATTERN } from '../../session/index.js';
import { SESSION_ID_RULE, wellFormedString } from '../wire.js';

/** A session id by the DESIGN §3 rule. */
export const sessionIdSchema = z.string().regex(SESSION_ID_PATTERN, `must be a session id: ${SESSION_ID_RULE}`);

/** A query-string integer: digits only, so `-1`, `1.5` and `1e3` are refused. */
const queryInteger = (name: string, min: number, max = Number.MAX_SAFE_INTEGER) =>
  z
    .string()
    .regex(/^\d{1,16}$/, `${name} must be a whole number >= ${min}`)
    .transform(Number)
    .refine((n) => n >= min && n <= max, `${name} must be between ${min} and ${max}`);

// ---------------------------------------------------------------------------------------------
// Requests

export const sessionParams = z.strictObject({ id: sessionIdSchema.describe(`the session id: ${SESSION_ID_RULE}`) });
/** Commands without arguments take no body or `{}`. */
export const emptyBody = z.strictObject({}).optional();

export const agentSchema = z.strictObject({
  model: wellFormedString().min(1).max(200).optional(),
  system: wellFormedString().optional(),
  tools: z.array(wellFormedString().min(1).max(200)).max(200).optional(),
});

const count = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);
const budgetLimits = z.strictObject({
  tokens: count.optional().describe('tokens billed (input, cached input, cache writes, output)'),
  costUsd: z.number().finite().min(0).optional().describe('USD at the catalogue prices'),
  modelCalls: count.optional().describe('model replies'),
  toolCalls: count.optional().describe('tool calls asked for'),
  wallMs: count.optional().describe('wall time (a turn from its start; the session: its turns summed)'),
});
/** Spend caps (src/session/budget.ts); the log's validator checks the same rules. */
export const budgetSchema = z.strictObject({
  turn: budgetLimits.optional().describe('limits of each turn'),
  total: budgetLimits.optional().describe('limits of the whole session'),
  repeatedCalls: z
    .number()
    .int()
    .min(2)
    .optional()
    .describe(`the same tool call this many times in one turn is a breach (default ${DEFAULT_REPEATED_CALLS})`),
  waitMs: z
    .number()
    .int()
    .min(0)
    .max(MAX_BUDGET_WAIT_MS)
    .optional()
    .describe('how long a paused turn waits for a raise before it ends with budget_exceeded (default 24 h)'),
});

export const createSessionBody = z
  .strictObject({
    id: sessionIdSchema.optional().describe('the new session id; a UUID when omitted'),
    agent: agentSchema.optional(),
    budget: budgetSchema.optional().describe('spend caps; a breach pauses the session (`paused: budget`)'),
  })
  .optional();

export const patchSessionBody = z.strictObject({
  budget: budgetSchema
    .nullable()
    .describe('new spend caps (null: none); a turn paused on its budget goes on if they leave room'),
  by: wellFormedString().max(256).optional().describe('who changed the budget (logged with it)'),
});

/**
 * A part of a message with media (issue 50; session/media.ts `UserPart`): its fields are checked
 * by the client's media checks, which name the part (`content[i]: …`).
 */
const messagePart = z
  .looseObject({
    type: z.enum(['text', 'image', 'file']),
    text: z.string().optional().describe('text part: the text'),
    data: z.string().optional().describe('image or file: the bytes, base64'),
    mediaType: z
      .string()
      .optional()
      .describe('with data: image/png, image/jpeg, image/gif, image/webp, application/pdf or text/plain'),
    url: z
      .string()
      .optional()
      .describe('image: an http(s) URL (kept as a URL unless SESSIONLOG_FETCH_IMAGE_URLS) or a base64 data: URL'),
    artifact: z
      .string()
      .optional()
      .describe('image or file: the locator of a medium this session stored (an upload, an earlier message)'),
    detail: z.enum(['auto', 'low', 'high']).optional().describe('image: the detail the model sees it at'),
    filename: z.string().optional().describe('file: its name'),
  })
  .describe(
    'a text, image or file part: {type: text, text} or an image/file with one of data+mediaType, url, artifact',
  );

export const postMessageBody = z
  .strictObject({
    text: wellFormedString()
      .optional()
      .describe("the user message; must not be blank unless content holds media (with content: '' or the parts' text)"),
    content: z
      .array(messagePart)
      .min(1)
      .max(100)
      .optional()
      .describe('the message as parts, with images and files; each medium is stored once in the session'),
    id: wellFormedString()
      .min(1)
      .max(128)
      .optional()
      .describe('idempotency key: re-posting the same id never produces a second answer'),
    toolChoice: z
      .union([
        z.enum(['auto', 'none', 'required']),
        z.strictObject({
          name: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'a tool name is 1-64 characters of A-Z a-z 0-9 _ -'),
        }),
      ])
      .optional()
      .describe(
        "the turn's tool choice, sent to the model: 'auto', 'none' (no call), 'required' or {name} (a call of that tool); a forced choice holds for the turn's first model step",
      ),
    parallelToolCalls: z.boolean().optional().describe("false: at most one tool call per reply in this message's turn"),
  })
  .refine((body) => body.text !== undefined || body.content !== undefined, {
    message: 'text (or content) is required',
    path: ['text'],
  });

export const mediaParams = z.strictObject({
  id: sessionIdSchema.describe('the session the medium belongs to (the one its locator names)'),
  name: z
    .string()
    .regex(
      /^(media-[0-9a-f]{64}\.(png|jpg|gif|webp|pdf|txt)|[0-9a-f]{64})$/,
      "must be a medium's name (media-<sha256>.<ext>, from its locator) or its sha-256",
    )
    .describe("the medium's name in its locator `artifact:<sessionId>/media-<sha256>.<ext>`, or its sha-256"),
});

/**
 * An upload's body: a JSON object here; a multipart form or raw bytes arrive as parsed by
 * native/media.ts (its own checks name what is wrong).
 */
export const mediaUploadBody = z.union([
  z.strictObject({
    data: z.string().describe('the bytes, base64'),
    mediaType: z.string().describe('image/png, image/jpeg, image/gif, image/webp, application/pdf or text/plain'),
    filename: z.string().max(255).optional(),
  }),
  z.custom<{ raw: Buffer; contentType: string }>(
    (value) => typeof value === 'object' && value !== null && Buffer.isBuffer((value as { raw?: unknown }).raw),
    'an upload is multipart/form-data, the raw bytes with their Content-Type, or JSON {data, mediaType, filename?}',
  ),
]);

const storedMediaSchema = z.looseObject({
  kind: z.literal('artifact'),
  locator: z.string().describe("artifact:<sessionId>/media-<sha256>.<ext>: send it again as a part's artifact"),
  mediaType: z.string(),
  bytes: z.number().int(),
  sha256: z.string(),
  width: z.number().int().optional().describe('images: pixels'),
  height: z.number().int().optional().describe('images: pixels'),
});
export const mediaUploadResponse = z.object({
  media: storedMediaSchema,
  url: z.string().describe('where GET serves its bytes'),
});

export const postMessageQuery = z.strictObject({
  wait: z.enum(['true', 'false']).optional().describe('true: answer with the reply once the turn ends'),
});

export const eventsQuery = z.strictObject({
  from: queryInteger('from', 0)
    .optional()
    .describe('first seq to return (default 0); with SSE, Last-Event-ID + 1 wins'),
  limit: queryInteger('limit', 1, 10_000)
    .optional()
    .describe('at most this many events (SSE: close the stream after this many)'),
  coalesce: z
    .enum(['true', 'false'])
    .optional()
    .describe(
      "SSE: send the stored part (what a reconnecting client missed) with each run of one model call's text or reasoning chunks as one assistant/chunk event (its seq the last one's, `coalesced`: how many), then the live tail event by event",
    ),
  streamToken: z
    .string()
    .max(200)
    .optional()
    .describe('SSE from a browser: a token from POST /v1/sessions/{id}/stream-token, in place of the bearer token'),
});

export const forkBody = z
  .strictObject({
    at: z.number().int().min(0).optional().describe('last parent seq to copy (inclusive); default the last event'),
    id: sessionIdSchema.optional().describe('the child session id; a UUID when omitted'),
  })
  .optional();

export const editBody = z.strictObject({
  seq: z.number().int().min(0).describe("the seq of the user's message to edit"),
  text: wellFormedString().min(1).describe('the new text'),
  id: sessionIdSchema.optional().describe('the branch session id; a UUID when omitted'),
});

export const branchBody = z
  .strictObject({ id: sessionIdSchema.optional().describe('the branch session id; a UUID when omitted') })
  .optional();

const branchSchema = z.object({
  sessionId: z.string(),
  forkedFrom: z.string(),
  forkedAt: z.number().int().describe('the last seq of the parent the branch holds (-1: none)'),
  messageId: z.string().describe("the message that starts the branch's turn"),
});
export const branchResponse = z.object({ branch: branchSchema });
export const branchesResponse = z.object({
  branches: z.array(z.object({ sessionId: z.string(), createdAt: z.number().int(), forkedAt: z.number().int() })),
});

export const salvageBody = z
  .strictObject({ into: sessionIdSchema.optional().describe('the new session id; a UUID when omitted') })
  .optional();

/** Parses the SSE `Last-Event-ID` header: the seq of the last event the client holds. */
export const lastEventIdSchema = queryInteger('Last-Event-ID', 0);

// ---------------------------------------------------------------------------------------------
// Responses (documentation)

export const errorResponseSchema = z.object({
  error: z.object({
    code: z.string().describe('stable machine-readable code'),
    message: z.string().describe('what went wrong and what to do'),
  }),
});

export const sessionHeaderSchema = z.looseObject({
  version: z.number().int(),
  id: z.string(),
  createdAt: z.number().describe('ms since the epoch'),
  parentSession: z.string().optional(),
  seedLength: z.number().int().optional(),
  agent: agentSchema.optional(),
});

const eventSchema = z.looseObject({
  seq: z.number().int(),
  type: z.string(),
  time: z.number(),
  data: z.unknown(),
  surfaceOp: z.unknown().optional(),
  sourceEventSeqs: z.array(z.number().int()).optional(),
  op: z.string().optional(),
});

const messageSchema = z.looseObject({ id: z.string(), role: z.string(), content: z.unknown() });

const statusSchema = z.looseObject({
  sessionId: z.string(),
  headSeq: z.number().int(),
  turn: z.number().int(),
  phase: z.string(),
  pending: z.number().int(),
  tokens: z.number().nullable(),
  contextWindow: z.number().nullable(),
  pressure: z.number().nullable(),
  lastError: z.string().optional(),
  paused: z
    .looseObject({
      reason: z.enum(['budget', 'rate_limit', 'tenant']),
      since: z.number(),
      until: z.number(),
      breach: z
        .looseObject({ cap: z.string(), scope: z.string(), used: z.number(), limit: z.number() })
        .optional()
        .describe('reason budget: the cap reached'),
    })
    .optional()
    .describe('set while the phase is `paused`: why, since and until when (epoch ms)'),
  runId: z.string(),
});

const budgetUse = z.object({
  tokens: z.number(),
  costUsd: z.number(),
  modelCalls: z.number().int(),
  toolCalls: z.number().int(),
  wallMs: z.number(),
});
export const budgetResponse = z.object({
  budget: budgetSchema.nullable(),
  used: z
    .object({ turn: budgetUse, total: budgetUse })
    .describe('what the current (or last) turn and the session used'),
});

export const patchSessionResponse = budgetResponse.extend({
  applies: z
    .enum(['now', 'turn-end'])
    .describe(
      'now: the change is logged and in force (a turn paused on its budget goes on); turn-end: a turn runs or waits for an approval, and the change is logged when it ends (`budget` is still the one before)',
    ),
});

export const sessionResponse = z.object({ session: sessionHeaderSchema });
export const sessionDetailResponse = z.object({
  session: sessionHeaderSchema,
  status: statusSchema.nullable().describe('null when no run of the workflow is open'),
});
export const sessionListResponse = z.object({ sessions: z.array(sessionHeaderSchema) });
export const acceptedMessageResponse = z.object({ id: z.string().describe('the message id (idempotency key)') });
export const replyResponse = z.object({
  turn: z.number().int(),
  replySeq: z.number().int().nullable(),
  outcome: z.enum(['completed', 'aborted', 'error', 'max-steps', 'max-tokens', 'interrupted']),
  text: z.string(),
  messageId: z.string(),
  error: z
    .object({ code: z.string(), message: z.string() })
    .optional()
    .describe("outcome error: why the turn failed (its turn/end's code and message, e.g. budget_exceeded)"),
});
export const messagesResponse = z.object({ messages: z.array(messageSchema) });
export const transcriptResponse = z.object({ events: z.array(eventSchema) });
export const eventsResponse = z.object({ events: z.array(eventSchema) });
export const compactResponse = z.object({
  compaction: z
    .object({
      compactionId: z.string(),
      shadowedSeqs: z.array(z.number().int()),
      tokensBefore: z.number(),
      tokensAfter: z.number(),
    })
    .nullable()
    .describe('null when there was nothing to compact'),
});
export const compactDeferredResponse = z.object({
  applies: z.literal('turn-end').describe('the compaction runs when the running turn ends'),
});
export const cancelResponse = z.object({
  cancelRequested: z.boolean().describe('false when no run of the workflow was open'),
});
export const resumeResponse = z.object({ runId: z.string(), started: z.boolean() });
export const healthResponse = z.object({ ok: z.literal(true) });
export const openApiResponse = z.looseObject({ openapi: z.string() });
const tokenCount = z.number().int().nonnegative();
export const contextResponse = z.object({
  context: z.object({
    sessionId: z.string(),
    asOfSeq: z.number().int().describe('the last seq measured (-1 for an empty log)'),
    model: z.string(),
    tokens: z
      .object({
        system: tokenCount,
        tools: tokenCount,
        user: tokenCount,
        assistant: tokenCount,
        toolResults: tokenCount,
        summaries: tokenCount,
        total: tokenCount,
      })
      .describe('the next request, by kind; total may be anchored on provider usage'),
    baseline: z.enum(['usage', 'estimated']),
    budget: tokenCount.describe('the budget pressure handling works against'),
    contextWindow: tokenCount,
    compactAt: tokenCount.describe('compaction runs before a request once tokens.total reaches this'),
    messages: z.array(
      z.object({
        seq: z.number().int(),
        kind: z.enum(['user', 'assistant', 'tool-result', 'summary']),
        tokens: tokenCount,
      }),
    ),
  }),
});
export const eraseResponse = z.object({
  receipt: z.object({
    sessionId: z.string(),
    store: z.looseObject({
      erased: z.boolean().describe('false when nothing was left to remove'),
      removed: z.object({
        header: z.number().int(),
        events: z.number().int(),
        artifacts: z.number().int(),
        media: z.number().int().describe('stored media (images and files), one per distinct content'),
        projectionCheckpoints: z.number().int(),
        inboxEntries: z.number().int(),
        sessionKey: z.number().int(),
        transcriptEntries: z
          .number()
          .int()
          .describe('transcript index entries (OpenAI-compatible callers) that named the session'),
      }),
      tombstoneUntil: z.number().describe('until when (epoch ms) the id is refused with SESSION_ERASED'),
    }),
    temporal: z.object({ terminated: z.boolean(), deletedRuns: z.number().int() }),
  }),
});

// ---- usage (issue 26) -----------------------------------------------------------------------

/** A time bound of a usage query: ISO 8601 or epoch milliseconds, as epoch ms. */
function timeBound(name: string) {
  return z
    .string()
    .max(40)
    .transform((value, ctx) => {
      const ms = /^\d{1,16}$/.test(value) ? Number(value) : Date.parse(value);
      if (!Number.isFinite(ms)) {
        ctx.addIssue({ code: 'custom', message: `${name} must be an ISO 8601 time or epoch milliseconds` });
        return z.NEVER;
      }
      return ms;
    });
}

export const usageQuery = z.strictObject({
  from: timeBound('from').optional().describe('count calls logged at or after this time (ISO 8601 or epoch ms)'),
  to: timeBound('to').optional().describe('count calls logged before this time (ISO 8601 or epoch ms)'),
});

export const usageAcrossQuery = usageQuery.extend({
  tenant: z
    .string()
    .regex(TENANT_PATTERN, 'must be a tenant name')
    .optional()
    .describe("the tenant to sum (only the token's own: its sessions are the only ones it sees)"),
});

const usageTotals = z.object({
  calls: z.number().int(),
  inputTokens: z.number().int(),
  cachedInputTokens: z.number().int(),
  cacheWriteTokens: z.number().int(),
  outputTokens: z.number().int(),
  reasoningTokens: z.number().int(),
  costUsd: z.number().describe('USD, each call at the prices its worker had when it answered'),
  unpricedCalls: z.number().int().describe('calls logged without a cost (no prices known): tokens counted, cost not'),
});

export const usageLedgerResponse = z.object({
  total: usageTotals,
  byModel: z.record(z.string(), usageTotals),
  byTurn: z.array(
    usageTotals.extend({
      turn: z.number().int().nullable().describe('null: compactions run between turns'),
      replies: z.number().int(),
      compactions: z.number().int(),
    }),
  ),
});

export const usageAcrossResponse = z.object({
  tenant: z
    .string()
    .nullable()
    .describe('the tenant whose sessions were summed (null: every tenant, a gateway without tokens)'),
  total: usageTotals,
  byModel: z.record(z.string(), usageTotals),
  sessions: z.number().int().describe('sessions with calls in the window'),
  unreadable: z.array(z.string()).describe('sessions whose log could not be read (left out)'),
  spend: z
    .object({
      spent: z.object({
        tokens: z.number().int(),
        costUsd: z.number(),
        modelCalls: z.number().int(),
        toolCalls: z.number().int(),
        sessions: z
          .number()
          .int()
          .describe('sessions that spent anything (an erased one counts in the sums, not here)'),
      }),
      caps: z
        .object({
          tokens: z.number().int().optional(),
          costUsd: z.number().optional(),
          modelCalls: z.number().int().optional(),
          toolCalls: z.number().int().optional(),
          wallMs: z.number().int().optional(),
          waitMs: z.number().int().optional(),
        })
        .nullable()
        .describe('SESSIONLOG_TENANT_CAPS for the tenant (null: none)'),
    })
    .nullable()
    .describe(
      "the tenant's spend since the store began keeping it, whatever the window, erased sessions included, as its caps are checked against (null: every tenant)",
    ),
});
