/**
 * Wire schemas of the OpenAI-compatible API. Requests are parsed with these (one source with
 * the OpenAPI document); whatever sessionlog cannot honour and would change a reply's meaning is
 * refused with a 400 naming the field and why: unknown fields, hosted tools, input it cannot
 * log (audio; images and files are stored as media, issue 50). Hints a provider may or may not honour are accepted (gateway/openai/hints.ts).
 */
import { z } from 'zod';
import { SESSION_ID_PATTERN } from '../../session/index.js';
import { SESSION_ID_RULE, wellFormedString } from '../wire.js';
import { invalidRequest } from '../openai-errors.js';
import {
  chatResponseFormat,
  chatSamplingFields,
  responseSamplingFields,
  responseTextFormat,
  toolChoiceField,
} from './hints.js';

// ---------------------------------------------------------------------------------------------
// Shared pieces

export const conversationIdSchema = z
  .string()
  .regex(SESSION_ID_PATTERN, `must be a conversation id (${SESSION_ID_RULE})`);

/** OpenAI's metadata: up to 16 string pairs, keys up to 64 and values up to 512 characters. */
export const metadataSchema = z
  .record(
    wellFormedString().max(64, 'metadata keys are at most 64 characters'),
    wellFormedString().max(512, 'metadata values are at most 512 characters'),
  )
  .refine((value) => Object.keys(value).length <= 16, 'metadata holds at most 16 keys')
  .describe('up to 16 string key/value pairs, kept in the log');

const inputTextPart = z.looseObject({ type: z.literal('input_text'), text: wellFormedString() });
const outputTextPart = z.looseObject({ type: z.literal('output_text'), text: wellFormedString() });
const refusalPart = z.looseObject({ type: z.literal('refusal'), refusal: wellFormedString() });
const mediaReference = z
  .string()
  .min(1)
  .max(400)
  .nullish()
  .describe(
    "a stored medium's locator (artifact:<sessionId>/media-<sha256>.<ext>), as an upload or a conversation item gives it",
  );
/** An image of a user message (issue 50): a base64 data: URL or an http(s) URL (kept as a URL), or a stored medium. */
const inputImagePart = z.looseObject({
  type: z.literal('input_image'),
  image_url: z.string().min(1).nullish().describe('data:<image type>;base64,<data>, or an http(s) URL'),
  file_id: mediaReference,
  detail: z.enum(['auto', 'low', 'high']).nullish(),
});
/** A file of a user message (PDF or plain text): a base64 data: URL, or a stored medium. */
const inputFilePart = z.looseObject({
  type: z.literal('input_file'),
  file_data: z.string().min(1).nullish().describe('data:<media type>;base64,<data>'),
  file_id: mediaReference,
  filename: z.string().min(1).max(255).nullish(),
  file_url: z.null({ error: 'file URLs are not fetched: send file_data or a file_id' }).optional(),
});
/** A part of an input message's content: text, an image or a file. */
export const inputContentPart = z.discriminatedUnion('type', [inputTextPart, inputImagePart, inputFilePart]);
export type InputContentPart = z.output<typeof inputContentPart>;

/** A user, system or developer message of an input list (system/developer: the instructions). */
export const inputMessageSchema = z.looseObject({
  type: z.literal('message').optional(),
  role: z.enum(['user', 'system', 'developer']),
  content: z.union([wellFormedString(), z.array(inputContentPart).min(1, 'content must hold at least one part')]),
  id: z.string().max(300).optional(),
  status: z.enum(['in_progress', 'completed', 'incomplete']).optional(),
});

/** An assistant message a client sends back (an earlier output item, or a transcript's reply). */
export const assistantMessageSchema = z.looseObject({
  type: z.literal('message').optional(),
  role: z.literal('assistant'),
  content: z.union([wellFormedString(), z.array(z.union([outputTextPart, refusalPart, inputTextPart]))]),
  id: z.string().max(300).optional(),
  status: z.enum(['in_progress', 'completed', 'incomplete']).optional(),
});

export const functionCallSchema = z.looseObject({
  type: z.literal('function_call'),
  call_id: wellFormedString().min(1).max(200),
  name: wellFormedString().min(1).max(200),
  arguments: z.string(),
  id: z.string().max(300).optional(),
  status: z.enum(['in_progress', 'completed', 'incomplete']).optional(),
});

export const functionCallOutputSchema = z.looseObject({
  type: z.literal('function_call_output'),
  call_id: wellFormedString().min(1).max(200),
  output: z.union([wellFormedString(), z.array(inputTextPart)]),
  id: z.string().max(300).nullish(),
  status: z.enum(['in_progress', 'completed', 'incomplete']).nullish(),
});

export const itemReferenceSchema = z.looseObject({
  type: z.literal('item_reference'),
  id: z.string().min(1).max(300),
});

/** Reasoning an earlier response returned: accepted and left out (the log holds the model's own). */
export const reasoningItemSchema = z.looseObject({ type: z.literal('reasoning') });

export const inputItemSchema = z.union([
  inputMessageSchema,
  assistantMessageSchema,
  functionCallSchema,
  functionCallOutputSchema,
  itemReferenceSchema,
  reasoningItemSchema,
]);
export type InputItem = z.output<typeof inputItemSchema>;

/** The text of an input message or tool output (parts are joined: sessionlog logs a message as one text). */
export function contentText(content: string | Array<{ text?: string; refusal?: string }>): string {
  return typeof content === 'string' ? content : content.map((p) => p.text ?? p.refusal ?? '').join('');
}

const SUPPORTED_ITEM_TYPES = new Set([
  'message',
  'function_call',
  'function_call_output',
  'item_reference',
  'reasoning',
]);

const SUPPORTED_PART_TYPES = new Set(['input_text', 'output_text', 'refusal', 'input_image', 'input_file']);

/**
 * Refuses, with a reason, input items sessionlog cannot log: item types of hosted tools and
 * content it does not store (audio). Runs before the schema so the reason is precise.
 */
export function refuseUnloggableItems(items: unknown, param: string): void {
  if (!Array.isArray(items)) return;
  items.forEach((item: unknown, i) => {
    if (typeof item !== 'object' || item === null) return;
    const { type, content } = item as { type?: unknown; content?: unknown };
    const at = `${param}[${i}]`;
    if (type !== undefined && !SUPPORTED_ITEM_TYPES.has(type as string)) {
      throw invalidRequest(
        `${at}.type`,
        `input items of type ${JSON.stringify(type)} are not supported by sessionlog (no hosted tools); send messages, function calls and their outputs`,
        'unsupported_value',
      );
    }
    if (Array.isArray(content)) {
      content.forEach((part: unknown, j) => {
        const partType = typeof part === 'object' && part !== null ? (part as { type?: unknown }).type : undefined;
        if (!SUPPORTED_PART_TYPES.has(partType as string)) {
          throw invalidRequest(
            `${at}.content[${j}].type`,
            `content parts of type ${JSON.stringify(partType)} are not supported by sessionlog; send text, input_image and input_file parts`,
            'unsupported_value',
          );
        }
      });
    }
  });
}

// ---------------------------------------------------------------------------------------------
// Conversations

export const conversationParams = z.strictObject({
  id: conversationIdSchema.describe('the conversation (session) id'),
});
export const itemParams = z.strictObject({
  id: conversationIdSchema.describe('the conversation (session) id'),
  item_id: z.string().min(1).max(300).describe('the item id'),
});

export const conversationCreateBody = z
  .strictObject({
    items: z
      .array(inputItemSchema)
      .max(20, 'at most 20 items')
      .nullable()
      .optional()
      .describe("initial user messages (a system or developer message first sets the conversation's instructions)"),
    metadata: metadataSchema.nullable().optional(),
  })
  .nullable()
  .optional();

export const conversationUpdateBody = z.strictObject({ metadata: metadataSchema.nullable() });

export const conversationItemsBody = z.strictObject({
  items: z
    .array(inputItemSchema)
    .min(1, 'items must hold at least one item')
    .max(1000, 'at most 1000 items at once')
    .describe('user messages; assistant messages, function calls and outputs as caller-supplied history'),
});

const queryInteger = (name: string, min: number, max: number) =>
  z
    .string()
    .regex(/^\d{1,9}$/, `${name} must be a whole number`)
    .transform(Number)
    .refine((n) => n >= min && n <= max, `${name} must be between ${min} and ${max}`);

export const itemsListQuery = z.strictObject({
  after: z.string().min(1).max(300).optional().describe('an item id: list the items after it'),
  limit: queryInteger('limit', 1, 100).optional().describe('1-100, default 20'),
  order: z.enum(['asc', 'desc']).optional().describe('default desc (newest first), as OpenAI'),
});

// ---------------------------------------------------------------------------------------------
// Responses

const functionToolSchema = z.strictObject({
  type: z.literal('function'),
  name: wellFormedString().regex(/^[A-Za-z0-9_-]{1,64}$/, 'a function name is 1-64 characters of A-Z a-z 0-9 _ -'),
  description: wellFormedString().max(4096).nullable().optional(),
  parameters: z.record(z.string(), z.unknown()).nullable().optional(),
  strict: z.boolean().nullable().optional(),
});
export type FunctionTool = z.output<typeof functionToolSchema>;

const nullOnly = (reason: string) => z.null({ error: reason }).optional();

/**
 * Hints sessionlog does not pass to the provider (issue 24): accepted, and named in the turn's
 * request header as ignored. (`temperature`, `top_p`, `max_output_tokens` and `text.format` are
 * passed on: gateway/openai/hints.ts.)
 */
export const RESPONSE_IGNORED_HINTS = [
  'top_logprobs',
  'max_tool_calls',
  'reasoning',
  'prompt_cache_key',
  'prompt_cache_retention',
  'prompt_cache_options',
  'safety_identifier',
  'user',
  'service_tier',
  'context_management',
  'store',
  'truncation',
  'include',
] as const;

/** Fields that would change what a response means and cannot be honoured: refused, naming why. */
const RESPONSE_REFUSALS: Readonly<Record<string, string>> = {
  prompt: 'stored prompt templates do not exist in sessionlog; send instructions',
  moderation: 'sessionlog has no moderation step',
};

export const responseCreateBody = z.strictObject({
  conversation: z
    .union([conversationIdSchema, z.strictObject({ id: conversationIdSchema })])
    .nullable()
    .optional()
    .describe('the conversation (session) to continue; omitted with no previous_response_id: a new conversation'),
  previous_response_id: z
    .string()
    .min(1)
    .max(1024)
    .nullable()
    .optional()
    .describe("continue that response's conversation"),
  input: z
    .union([wellFormedString(), z.array(inputItemSchema).min(1, 'input must hold at least one item')])
    .describe('a user message, or a list of one user message and/or function_call_output items'),
  instructions: wellFormedString()
    .nullable()
    .optional()
    .describe("the conversation's system prompt: set by its first response, repeated (or omitted) afterwards"),
  model: wellFormedString()
    .min(1)
    .max(200)
    .optional()
    .describe("the conversation's model: set by its first response, repeated (or omitted) afterwards"),
  tools: z
    .array(functionToolSchema)
    .max(128)
    .nullable()
    .optional()
    .describe('function tools the caller runs (external tools of this turn)'),
  tool_choice: toolChoiceField,
  parallel_tool_calls: z.boolean().nullish().describe('false: at most one tool call per reply'),
  stream: z.boolean().nullable().optional(),
  stream_options: z
    .strictObject({
      include_obfuscation: z
        .literal(false, { error: 'stream obfuscation is not supported; set include_obfuscation: false' })
        .optional(),
    })
    .nullable()
    .optional(),
  background: z.boolean().nullable().optional().describe('answer at once with status queued or in_progress'),
  metadata: metadataSchema.nullable().optional(),
  text: z
    .looseObject({
      format: responseTextFormat.optional(),
      verbosity: z.string().nullable().optional(),
    })
    .nullable()
    .optional(),
  ...responseSamplingFields,
  ...Object.fromEntries(RESPONSE_IGNORED_HINTS.map((name) => [name, z.unknown().optional()])),
  ...Object.fromEntries(
    Object.entries(RESPONSE_REFUSALS).map(([name, reason]) => [
      name,
      nullOnly(`'${name}' is not supported by sessionlog: ${reason}`),
    ]),
  ),
});

export const responseParams = z.strictObject({ id: z.string().min(1).max(1024).describe('the response id') });

export const responseRetrieveQuery = z.strictObject({
  stream: z
    .enum(['true', 'false'])
    .optional()
    .describe("true: the response's stream events (SSE), replayed from the log and then live"),
  starting_after: queryInteger('starting_after', 0, 1_000_000_000)
    .optional()
    .describe('with stream=true: send only the events whose sequence_number is greater'),
  include_obfuscation: z.literal('false', { error: 'stream obfuscation is not supported' }).optional(),
});

// ---------------------------------------------------------------------------------------------
// Responses (documentation)

export const conversationObject = z.looseObject({
  id: z.string(),
  object: z.literal('conversation'),
  created_at: z.number().int(),
  metadata: z.record(z.string(), z.string()),
});
export const conversationDeletedObject = z.object({
  id: z.string(),
  object: z.literal('conversation.deleted'),
  deleted: z.boolean(),
});
const itemObject = z.looseObject({ id: z.string(), type: z.string() });
export const itemListObject = z.object({
  object: z.literal('list'),
  data: z.array(itemObject),
  first_id: z.string().nullable(),
  last_id: z.string().nullable(),
  has_more: z.boolean(),
});
export const itemObjectSchema = itemObject;
export const responseObject = z.looseObject({
  id: z.string(),
  object: z.literal('response'),
  created_at: z.number().int(),
  status: z.enum(['queued', 'in_progress', 'completed', 'failed', 'cancelled', 'incomplete']),
  output: z.array(itemObject),
  output_text: z.string(),
  usage: z.unknown().optional(),
});

export const chatCompletionObject = z.looseObject({
  id: z.string(),
  object: z.literal('chat.completion'),
  created: z.number().int(),
  model: z.string(),
  choices: z.array(
    z.looseObject({
      index: z.number().int(),
      message: z.looseObject({ role: z.literal('assistant'), content: z.string().nullable() }),
      finish_reason: z.enum(['stop', 'length', 'tool_calls']),
    }),
  ),
  usage: z.unknown().optional(),
});
export const modelObjectSchema = z.object({
  id: z.string(),
  object: z.literal('model'),
  created: z.number().int(),
  owned_by: z.string(),
});
export const modelListObject = z.object({ object: z.literal('list'), data: z.array(modelObjectSchema) });

// ---------------------------------------------------------------------------------------------
// Chat Completions

const textPart = z.looseObject({ type: z.literal('text'), text: z.string() });
const textContent = z.union([z.string(), z.array(textPart)]);
/** An image of a user message (issue 50): a base64 data: URL or an http(s) URL (kept as a URL, never fetched). */
const imageUrlPart = z.looseObject({
  type: z.literal('image_url'),
  image_url: z.looseObject({
    url: z.string().min(1).describe('data:<image type>;base64,<data>, or an http(s) URL'),
    detail: z.enum(['auto', 'low', 'high']).nullish(),
  }),
});
/** A file of a user message (PDF or plain text): inline as a data URL, or a medium this gateway stored (its locator). */
const filePart = z.looseObject({
  type: z.literal('file'),
  file: z.looseObject({
    file_data: z.string().min(1).nullish().describe('data:<media type>;base64,<data>'),
    file_id: z
      .string()
      .min(1)
      .max(400)
      .nullish()
      .describe("a stored medium's locator (artifact:<sessionId>/media-<sha256>.<ext>), as an upload returns it"),
    filename: z.string().min(1).max(255).nullish(),
  }),
});
const userContent = z.union([
  z.string(),
  z.array(z.discriminatedUnion('type', [textPart, imageUrlPart, filePart])).min(1, 'content must hold a part'),
]);

const systemMessage = z.looseObject({
  role: z.enum(['system', 'developer']),
  content: textContent,
  name: z.string().optional(),
});
const userMessage = z.looseObject({ role: z.literal('user'), content: userContent, name: z.string().optional() });
const toolCallSchema = z.looseObject({
  id: z.string().min(1).max(200),
  type: z.literal('function').optional(),
  function: z.looseObject({ name: z.string().min(1).max(200), arguments: z.string() }),
});
const assistantMessage = z.looseObject({
  role: z.literal('assistant'),
  content: z.union([z.string(), z.array(z.looseObject({ type: z.string(), text: z.string().optional() }))]).nullish(),
  tool_calls: z.array(toolCallSchema).nullish(),
  refusal: z.string().nullish(),
  name: z.string().optional(),
});
const toolMessage = z.looseObject({
  role: z.literal('tool'),
  content: textContent,
  tool_call_id: z.string().min(1).max(200),
});
const chatMessage = z.union([systemMessage, userMessage, assistantMessage, toolMessage]);

const functionTool = z.looseObject({
  type: z.literal('function'),
  function: z.looseObject({
    name: wellFormedString().regex(/^[A-Za-z0-9_-]{1,64}$/, 'a function name is 1-64 characters of A-Z a-z 0-9 _ -'),
    description: z.string().max(4096).nullish(),
    parameters: z.record(z.string(), z.unknown()).nullish(),
    strict: z.boolean().nullish(),
  }),
});

/** Chat Completions hints sessionlog does not pass to the provider: accepted, and named in the turn's request header as ignored. */
export const CHAT_IGNORED_HINTS = [
  'logit_bias',
  'top_logprobs',
  'user',
  'store',
  'service_tier',
  'prompt_cache_key',
  'prompt_cache_retention',
  'safety_identifier',
  'reasoning_effort',
  'verbosity',
  'prediction',
] as const;

export const chatCompletionBody = z.looseObject({
  model: z.string().min(1).max(200).optional().describe('any name: one the gateway cannot run maps to its default'),
  messages: z.array(chatMessage).min(1, 'messages must hold at least one message').max(100_000),
  stream: z.boolean().nullish(),
  stream_options: z.looseObject({ include_usage: z.boolean().optional() }).nullish(),
  tools: z.array(functionTool).max(128).nullish(),
  tool_choice: toolChoiceField,
  parallel_tool_calls: z.boolean().nullish().describe('false: at most one tool call per reply'),
  response_format: chatResponseFormat.nullish(),
  n: z.literal(1, { error: 'n > 1 is not supported: a session has one reply per turn (send n: 1)' }).nullish(),
  logprobs: z.literal(false, { error: 'log probabilities are not logged (send logprobs: false)' }).nullish(),
  metadata: metadataSchema.nullish(),
  modalities: z.array(z.literal('text', { error: 'only text output is supported (no audio)' })).nullish(),
  audio: z.null({ error: 'audio output is not supported' }).optional(),
  web_search_options: z.null({ error: 'hosted web search is not supported: give a function tool instead' }).optional(),
  ...chatSamplingFields,
  ...Object.fromEntries(CHAT_IGNORED_HINTS.map((name) => [name, z.unknown().optional()])),
});
export type ChatBody = z.output<typeof chatCompletionBody>;
