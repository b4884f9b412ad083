/** What the fake model accepts: a chat request's body, and the `/_control/*` bodies. */
import { z } from 'zod';
import type { JsonValue } from '../../session/json.js';

const contentSchema = z.union([
  z.string(),
  z.null(),
  z.array(z.looseObject({ type: z.string(), text: z.string().optional() })),
]);
const toolCallSchema = z.looseObject({
  id: z.string(),
  type: z.string().optional(),
  function: z.object({ name: z.string(), arguments: z.string() }),
});
const messageSchema = z.looseObject({
  role: z.enum(['system', 'developer', 'user', 'assistant', 'tool']),
  content: contentSchema.optional(),
  reasoning_content: z.string().nullable().optional(),
  tool_calls: z.array(toolCallSchema).optional(),
  tool_call_id: z.string().optional(),
});
export const chatBodySchema = z.looseObject({
  model: z.string().min(1, 'model must be a non-empty string'),
  messages: z.array(messageSchema).min(1, 'messages must be a non-empty array'),
  stream: z.boolean().optional(),
  stream_options: z.looseObject({ include_usage: z.boolean().optional() }).nullable().optional(),
  tools: z
    .array(
      z.looseObject({
        type: z.string(),
        function: z.looseObject({ name: z.string(), parameters: z.record(z.string(), z.unknown()).optional() }),
      }),
    )
    .optional(),
  tool_choice: z
    .union([
      z.enum(['auto', 'none', 'required']),
      z.looseObject({ type: z.literal('function'), function: z.looseObject({ name: z.string() }) }),
    ])
    .optional(),
  parallel_tool_calls: z.boolean().optional(),
  max_tokens: z.number().int().positive().optional(),
  response_format: z
    .discriminatedUnion('type', [
      z.looseObject({ type: z.literal('text') }),
      z.looseObject({ type: z.literal('json_object') }),
      z.looseObject({
        type: z.literal('json_schema'),
        json_schema: z.looseObject({ name: z.string().min(1), schema: z.record(z.string(), z.unknown()).optional() }),
      }),
    ])
    .optional(),
});
export type FakeChatBody = z.infer<typeof chatBodySchema>;

const jsonValueSchema: z.ZodType<JsonValue> = z.lazy(() =>
  z.union([
    z.string(),
    z.number(),
    z.boolean(),
    z.null(),
    z.array(jsonValueSchema),
    z.record(z.string(), jsonValueSchema),
  ]),
);
export const replySchema = z.object({
  text: z.string().optional(),
  reasoning: z.string().optional(),
  toolCalls: z
    .array(z.object({ id: z.string().optional(), name: z.string(), arguments: z.union([z.string(), jsonValueSchema]) }))
    .optional(),
  finishReason: z.enum(['stop', 'length', 'tool_calls', 'content_filter']).optional(),
});
const times = z.number().int().positive().optional();
export const faultSchema = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('rate_limit'), retryAfterSeconds: z.number().nonnegative().optional(), times }),
  z.object({ kind: z.literal('server_error'), status: z.number().int().min(500).max(599).optional(), times }),
  z.object({ kind: z.literal('auth_echo'), times }),
  z.object({ kind: z.literal('hang'), times }),
  z.object({ kind: z.literal('drop_stream'), afterChunks: z.number().int().nonnegative().optional(), times }),
  z.object({ kind: z.literal('malformed_tool_json'), times }),
]);
export const configSchema = z
  .object({
    firstTokenDelayMs: z.number().nonnegative(),
    tokenDelayMs: z.number().nonnegative(),
    contextLimitTokens: z.number().int().positive().nullable(),
    model: z.string().min(1),
    echoPrefix: z.string(),
    apiKey: z.string().min(1).nullable(),
    rateLimit: z
      .strictObject({
        requestsPerMinute: z.number().positive(),
        tokensPerMinute: z.number().positive().optional(),
        burstMs: z.number().positive().optional(),
        stateLimits: z.boolean().optional(),
      })
      .nullable(),
  })
  .partial();
