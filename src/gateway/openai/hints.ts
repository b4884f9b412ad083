/**
 * Request options as OpenAI clients send them (issue 24), turned into a turn's hints
 * (session/turn-hints.ts): sampling, a token cap, stop sequences, a seed and a structured
 * output format are passed to the provider; every other option the request gave (a hint the
 * provider behind sessionlog is not sent) is named in `ignored`, so the turn's request header
 * says what was asked and not done. `tool_choice` and `parallel_tool_calls` are passed on too
 * (issue 51): `none` keeps the request's tools in the turn and sends `none` (the model sees them
 * and calls none, the worker's tools included), and a forced choice (`required`, a named tool)
 * holds for the turn's first model step (session/turn-hints.ts). A forced choice the request
 * cannot honour is refused here with a 400 naming `tool_choice` (`toolChoiceOf`): a named tool the
 * request does not carry, `required` without tools, a hosted tool; and so is a forced choice on a
 * model that cannot take one (`refuseUnforcedToolChoice`). What else cannot be honoured
 * and would change meaning (n > 1, audio, hosted tools) is refused by the body schemas.
 */
import { z } from 'zod';
import {
  forcesToolCall,
  toolChoiceToolsProblem,
  type ResponseFormat,
  type ToolChoice,
  type TurnHints,
} from '../../session/index.js';
import { invalidRequest } from '../openai-errors.js';
import type { RouteContext } from '../route-table.js';

const jsonSchemaObject = z.record(z.string(), z.unknown());
const formatName = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'a format name is 1-64 characters of A-Z a-z 0-9 _ -');

/** Chat Completions' `response_format`. */
export const chatResponseFormat = z.discriminatedUnion('type', [
  z.looseObject({ type: z.literal('text') }),
  z.looseObject({ type: z.literal('json_object') }),
  z.looseObject({
    type: z.literal('json_schema'),
    json_schema: z.looseObject({
      name: formatName,
      schema: jsonSchemaObject.optional(),
      strict: z.boolean().nullish(),
      description: z.string().max(4096).optional(),
    }),
  }),
]);

/** The Responses API's `text.format`. */
export const responseTextFormat = z.discriminatedUnion('type', [
  z.looseObject({ type: z.literal('text') }),
  z.looseObject({ type: z.literal('json_object') }),
  z.looseObject({
    type: z.literal('json_schema'),
    name: formatName,
    schema: jsonSchemaObject,
    strict: z.boolean().nullish(),
    description: z.string().max(4096).optional(),
  }),
]);

/** Options both APIs send by the same name, typed so a bad value is a 400 naming it. */
export const samplingFields = {
  temperature: z.number().min(0).max(2).nullish(),
  top_p: z.number().min(0).max(1).nullish(),
};
export const chatSamplingFields = {
  ...samplingFields,
  max_tokens: z.number().int().min(1).nullish(),
  max_completion_tokens: z.number().int().min(1).nullish(),
  seed: z.number().int().nullish(),
  stop: z.union([z.string().min(1).max(256), z.array(z.string().min(1).max(256)).min(1).max(4)]).nullish(),
  presence_penalty: z.number().min(-2).max(2).nullish(),
  frequency_penalty: z.number().min(-2).max(2).nullish(),
};
export const responseSamplingFields = {
  ...samplingFields,
  max_output_tokens: z.number().int().min(1).nullish(),
};

type JsonSchema = { [key: string]: import('../../session/index.js').JsonValue };

function formatOf(
  format: { type: string; name?: string; schema?: unknown; strict?: boolean | null; description?: string } | undefined,
): ResponseFormat | undefined {
  if (!format || format.type === 'text') return undefined;
  if (format.type === 'json_object') return { type: 'json_object' };
  return {
    type: 'json_schema',
    name: format.name!,
    schema: (format.schema ?? {}) as JsonSchema,
    ...(format.strict != null ? { strict: format.strict } : {}),
    ...(format.description !== undefined ? { description: format.description } : {}),
  };
}

/** The names of `fields` the body gives a value (not null). */
function given(body: Record<string, unknown>, fields: readonly string[]): string[] {
  return fields.filter((name) => body[name] !== undefined && body[name] !== null);
}

function hintsOf(hints: TurnHints): TurnHints | undefined {
  const present = Object.fromEntries(
    Object.entries(hints).filter(([, value]) => value !== undefined && !(Array.isArray(value) && value.length === 0)),
  );
  return Object.keys(present).length > 0 ? (present as TurnHints) : undefined;
}

const defined = <T>(value: T | null | undefined): T | undefined => (value === null ? undefined : value);

/** A Chat Completions body's hints; `ignoredFields`: the hint fields nothing passes on. */
export function chatHints(
  body: Record<string, unknown> & {
    temperature?: number | null;
    top_p?: number | null;
    max_tokens?: number | null;
    max_completion_tokens?: number | null;
    seed?: number | null;
    stop?: string | string[] | null;
    presence_penalty?: number | null;
    frequency_penalty?: number | null;
    response_format?: z.output<typeof chatResponseFormat> | null;
    tool_choice?: unknown;
    parallel_tool_calls?: unknown;
  },
  ignoredFields: readonly string[],
  toolNames: readonly string[],
): TurnHints | undefined {
  const format = body.response_format?.type === 'json_schema' ? body.response_format.json_schema : undefined;
  const stop = defined(body.stop);
  return hintsOf({
    temperature: defined(body.temperature),
    topP: defined(body.top_p),
    maxTokens: defined(body.max_completion_tokens) ?? defined(body.max_tokens),
    seed: defined(body.seed),
    stop: typeof stop === 'string' ? [stop] : stop,
    presencePenalty: defined(body.presence_penalty),
    frequencyPenalty: defined(body.frequency_penalty),
    responseFormat: formatOf(format ? { type: 'json_schema', ...format } : (body.response_format ?? undefined)),
    ...toolOptionsOf(body, toolNames),
    ignored: given(body, ignoredFields),
  });
}

/** A Responses body's hints; `ignoredFields`: the hint fields nothing passes on. */
export function responseHints(
  body: Record<string, unknown> & {
    temperature?: unknown;
    top_p?: unknown;
    max_output_tokens?: unknown;
    text?: { format?: z.output<typeof responseTextFormat>; verbosity?: string | null } | null;
    tool_choice?: unknown;
    parallel_tool_calls?: unknown;
  },
  ignoredFields: readonly string[],
  toolNames: readonly string[],
): TurnHints | undefined {
  return hintsOf({
    temperature: defined(body.temperature as number | null | undefined),
    topP: defined(body.top_p as number | null | undefined),
    maxTokens: defined(body.max_output_tokens as number | null | undefined),
    responseFormat: formatOf(body.text?.format),
    ...toolOptionsOf(body, toolNames),
    ignored: [...given(body, ignoredFields), ...(body.text?.verbosity != null ? ['text.verbosity'] : [])],
  });
}

/** Both APIs' `tool_choice` (Chat Completions names a function in `function.name`, Responses in `name`). */
export const toolChoiceField = z
  .union([
    z.enum(['none', 'auto', 'required']),
    z.looseObject({
      type: z.string().min(1).max(64),
      name: z.string().max(200).optional(),
      function: z.looseObject({ name: z.string().max(200) }).optional(),
    }),
  ])
  .nullish()
  .describe(
    "sent to the model: 'auto', 'none' (the tools stay, none is called), 'required' or a named function (a forced choice holds for the turn's first model step)",
  );

/**
 * The request's `tool_choice` as a turn's, checked against the names of its tools: a 400 naming
 * `tool_choice` for a hosted or allowed-tools choice, a function the request does not carry, or a
 * forced choice without tools. Undefined when the request gives none.
 */
export function toolChoiceOf(choice: unknown, toolNames: readonly string[]): ToolChoice | undefined {
  if (choice === undefined || choice === null) return undefined;
  let parsed: ToolChoice;
  if (choice === 'auto' || choice === 'none' || choice === 'required') parsed = choice;
  else {
    const named = choice as { type?: unknown; name?: unknown; function?: { name?: unknown } };
    const name = named.function?.name ?? named.name;
    if (named.type !== 'function' || typeof name !== 'string')
      throw invalidRequest(
        'tool_choice',
        `tool_choice ${JSON.stringify(choice)} is not supported: send 'auto', 'none', 'required' or a function tool by name`,
        'unsupported_value',
      );
    parsed = { name };
  }
  const problem = toolChoiceToolsProblem(parsed, toolNames);
  if (problem) throw invalidRequest('tool_choice', problem, 'invalid_value');
  return parsed;
}

/** The request's tool options as hints: its checked `tool_choice` and `parallel_tool_calls`. */
function toolOptionsOf(
  body: { tool_choice?: unknown; parallel_tool_calls?: unknown },
  toolNames: readonly string[],
): Pick<TurnHints, 'toolChoice' | 'parallelToolCalls'> {
  const toolChoice = toolChoiceOf(body.tool_choice, toolNames);
  const parallel = body.parallel_tool_calls;
  return {
    ...(toolChoice !== undefined ? { toolChoice } : {}),
    ...(typeof parallel === 'boolean' ? { parallelToolCalls: parallel } : {}),
  };
}

/**
 * Refuses (a 400 naming `tool_choice`) a forced tool choice for a model that cannot take one
 * (the routing's `unforcedToolChoice`: DeepSeek in thinking mode), before anything is created.
 * `model`: the model the request's name runs (undefined: the default model).
 */
export function refuseUnforcedToolChoice(
  ctx: RouteContext,
  model: string | undefined,
  hints: TurnHints | undefined,
): void {
  const name = model ?? ctx.defaults.model;
  if (!forcesToolCall(hints?.toolChoice) || name === undefined || !ctx.models.unforcedToolChoice?.includes(name))
    return;
  throw invalidRequest(
    'tool_choice',
    `model ${JSON.stringify(name)} cannot be forced to call a tool: in thinking mode it refuses tool_choice 'required' and named tools; send 'auto' (or none), or use a model without thinking`,
    'unsupported_value',
  );
}
