/**
 * Wire schemas of the read routes the inspector draws from (`/turns`, `/surface`,
 * `/artifacts/:name`, `/stream-token`). Requests are parsed with them; the response schemas
 * document `src/session/turns-view.ts` and `surface-view.ts` in the OpenAPI document.
 */
import { z } from 'zod';
import { sessionIdSchema } from './schemas.js';

/** A query-string integer: digits only. */
const queryInteger = (name: string, min: number, max: number) =>
  z
    .string()
    .regex(/^\d{1,16}$/, `${name} must be a whole number >= ${min}`)
    .transform(Number)
    .refine((n) => n >= min && n <= max, `${name} must be between ${min} and ${max}`);

/** Largest page of an artifact one request returns, in characters. */
export const ARTIFACT_PAGE_MAX_CHARS = 200_000;
export const ARTIFACT_PAGE_DEFAULT_CHARS = 20_000;

// ---------------------------------------------------------------------------------------------
// Requests

export const turnsQuery = z.strictObject({
  last: queryInteger('last', 0, 1_000_000)
    .optional()
    .describe('only the newest N turns (0: the activity summary alone); default all'),
});

export const artifactParams = z.strictObject({
  id: sessionIdSchema.describe('the session the artifact belongs to (the one its locator names)'),
  name: z
    .string()
    .regex(
      /^(?!\.)[A-Za-z0-9._-]{1,160}$/,
      'must be an artifact name: the part of an artifact:<sessionId>/<name> locator after the slash',
    )
    .describe('the artifact name: the part of its locator `artifact:<sessionId>/<name>` after the slash'),
});

export const artifactQuery = z.strictObject({
  offset: queryInteger('offset', 0, Number.MAX_SAFE_INTEGER)
    .optional()
    .describe('first character to return (UTF-16 units, as read_artifact counts); default 0'),
  limit: queryInteger('limit', 1, ARTIFACT_PAGE_MAX_CHARS)
    .optional()
    .describe(`at most this many characters; default ${ARTIFACT_PAGE_DEFAULT_CHARS}`),
});

// ---------------------------------------------------------------------------------------------
// Responses (documentation)

const usageSchema = z.looseObject({
  inputTokens: z.number(),
  outputTokens: z.number(),
  cacheReadTokens: z.number().optional(),
  cacheWriteTokens: z.number().optional(),
  reasoningTokens: z.number().optional(),
});

const approvalRequestSchema = z.object({
  seq: z.number().int(),
  turn: z.number().int().nullable(),
  callId: z.string(),
  tool: z.string(),
  arguments: z.unknown(),
  expiresAt: z.number().nullable(),
});

const toolCallSchema = z.object({
  seq: z.number().int(),
  callId: z.string(),
  name: z.string(),
  arguments: z.string().describe('the arguments as the model wrote them (JSON text)'),
  approvalRequest: approvalRequestSchema.nullable(),
  approval: z.object({ seq: z.number().int(), decision: z.string(), reason: z.string().nullable() }).nullable(),
  result: z
    .object({
      seq: z.number().int(),
      text: z
        .string()
        .describe('the logged inline text (a spill preview when spilled); beyond 4,000 characters its middle is cut'),
      chars: z.number().int().describe('length of the logged inline text'),
      isError: z.boolean(),
      errorCode: z.string().nullable(),
      artifact: z
        .object({ locator: z.string(), sessionId: z.string(), name: z.string(), bytes: z.number().int() })
        .nullable()
        .describe('the stored full output: page it with GET /v1/sessions/{sessionId}/artifacts/{name}'),
      spilled: z.boolean().describe('the logged text is a preview shorter than the stored output'),
    })
    .nullable(),
});

const turnSchema = z.object({
  turn: z.number().int(),
  startSeq: z.number().int(),
  endSeq: z.number().int().nullable(),
  startedAt: z.number(),
  endedAt: z.number().nullable(),
  outcome: z
    .enum(['completed', 'aborted', 'error', 'max-tokens', 'max-steps', 'interrupted'])
    .nullable()
    .describe('null while the turn is open'),
  error: z.object({ code: z.string(), message: z.string() }).nullable(),
  userMessages: z.array(
    z.object({ seq: z.number().int(), id: z.string(), step: z.number().int(), text: z.string(), source: z.string() }),
  ),
  steps: z.array(
    z.object({
      step: z.number().int(),
      startSeq: z.number().int(),
      endSeq: z.number().int().nullable(),
      reply: z
        .object({
          seq: z.number().int().nullable().describe('the assistant/message; null while streaming'),
          text: z.string().describe('the final text, or the streamed chunks so far'),
          reasoning: z.string(),
          chunkSeqs: z.array(z.number().int()).describe('the assistant/chunk events folded into this reply'),
          streaming: z.boolean(),
          interrupted: z.boolean(),
          finishReason: z.string().nullable(),
          usage: usageSchema.nullable(),
        })
        .nullable(),
      toolCalls: z.array(toolCallSchema),
      retries: z.array(
        z.object({
          seq: z.number().int(),
          attempt: z.number().int(),
          delayMs: z.number(),
          failure: z.looseObject({ code: z.string(), message: z.string() }),
        }),
      ),
    }),
  ),
});

const compactionSchema = z.object({
  kind: z.literal('compaction'),
  compactionId: z.string(),
  trigger: z.enum(['pressure', 'context-overflow', 'manual']),
  turn: z.number().int().nullable(),
  startSeq: z.number().int(),
  summarySeq: z.number().int().nullable(),
  replacementSeq: z.number().int().nullable(),
  endSeq: z.number().int().nullable(),
  shadowedSeqs: z.array(z.number().int()),
  shadowedTokens: z.number().nullable(),
  summaryTokens: z.number().nullable(),
  error: z.string().nullable(),
  afterRequest: z.number().int().describe('requests before the bracket'),
  tokensBefore: z.number().nullable().describe('prompt tokens of the last request before the bracket'),
  tokensAfter: z.number().nullable().describe('prompt tokens of the first request after it'),
});

const pruneSchema = z.object({
  kind: z.literal('prune'),
  seq: z.number().int(),
  shadowedSeq: z.number().int(),
  replacementSeq: z.number().int().nullable(),
  shadowedTokens: z.number(),
  turn: z.number().int().nullable(),
  afterRequest: z.number().int(),
});

export const turnsResponse = z.object({
  activity: z.object({
    events: z.number().int(),
    turns: z.number().int(),
    lastActivity: z.number().nullable(),
    phase: z
      .enum(['idle', 'running', 'waiting-for-approval', 'paused'])
      .describe('from the log: a turn is open, waits for a tool approval, or waits for its budget to be raised'),
    openTurn: z.number().int().nullable(),
    lastRequestTokens: z.number().nullable(),
    pendingApprovals: z.array(approvalRequestSchema),
    pausedOn: z
      .looseObject({
        seq: z.number().int(),
        before: z.enum(['model', 'tools']),
        cap: z.string(),
        scope: z.enum(['turn', 'total', 'tenant']),
        used: z.number(),
        limit: z.number(),
        tool: z.string().optional(),
      })
      .nullable()
      .describe('phase paused: the spend cap the open turn reached (its budget/breach event)'),
  }),
  turns: z.array(turnSchema),
  requests: z
    .array(
      z.object({
        index: z.number().int(),
        seq: z.number().int(),
        turn: z.number().int(),
        step: z.number().int(),
        time: z.number(),
        promptTokens: z.number().nullable(),
        outputTokens: z.number().nullable(),
      }),
    )
    .describe('every model request of an agent step, with the usage its reply logged'),
  contextActions: z
    .array(z.discriminatedUnion('kind', [compactionSchema, pruneSchema]))
    .describe('compaction brackets and prunes, in log order'),
});

export const surfaceResponse = z.object({
  nodes: z
    .array(z.object({ seq: z.number().int(), type: z.string(), messageId: z.string().nullable() }))
    .describe('the surface in surface order: what the next request carries'),
  shadowed: z
    .array(
      z.object({
        seq: z.number().int(),
        by: z.number().int(),
        kind: z.enum(['summary', 'prune', 'replace']),
        compactionId: z.string().nullable(),
      }),
    )
    .describe('surface events no longer carried, with the replacement that shadowed each'),
  replaceGeneration: z.number().int(),
});

export const artifactResponse = z.object({
  locator: z.string(),
  offset: z.number().int(),
  text: z.string(),
  total: z.number().int().describe('length of the whole artifact, in characters'),
});

export const streamTokenResponse = z.object({
  token: z
    .string()
    .describe('pass as ?streamToken= to GET /v1/sessions/{id}/events (that route only, this session only)'),
  expiresAt: z.number().describe('ms since the epoch; open the stream before then (an open stream is not cut)'),
});
