/**
 * Request options of one turn (issue 24): what a caller's request asked of the model beyond its
 * messages. Those the provider takes (sampling, a token cap, a stop list, a structured output
 * format) are sent with every request of the turn; the names of those nothing here can pass on
 * (`service_tier`, `text.verbosity`, …) are kept in `ignored`, so the log says what was asked and
 * not done. They are logged on the turn's `turn/start` and copied into its `request/header`, so a
 * retried or resumed turn sends exactly the same request.
 *
 * A forced tool choice (`required`, or a named tool) holds for the turn's first model step only
 * (`hintsForStep`): forced at every step, the model could never answer after its tool call. The
 * later steps' request headers leave it out, so the log says what each request was sent. (OpenAI's
 * Agents SDK resets a forced choice after a tool call the same way, `resetToolChoice`.) `none` and
 * `auto`, and `parallelToolCalls`, hold for every step of the turn.
 *
 * The check is plain code (no schema library), shared by the client, the engine and the log's
 * validation.
 */
import type { JsonValue } from './json.js';

/** A structured output format: any JSON object, or JSON that follows `schema`. */
export type ResponseFormat =
  | { type: 'json_object' }
  | { type: 'json_schema'; name: string; schema: { [key: string]: JsonValue }; strict?: boolean; description?: string };

/**
 * Which tool the model may or must call: `auto` (its choice), `none` (no call; the tools are still
 * sent), `required` (at least one call), or the tool named (a call of it).
 */
export type ToolChoice = 'auto' | 'none' | 'required' | { name: string };

export type TurnHints = {
  temperature?: number;
  topP?: number;
  /** A cap on the reply's tokens (the lower of this and the worker's own cap is sent). */
  maxTokens?: number;
  seed?: number;
  stop?: string[];
  presencePenalty?: number;
  frequencyPenalty?: number;
  responseFormat?: ResponseFormat;
  /** Sent as `tool_choice`; a forced choice (`required`, a named tool) at the turn's first step only. */
  toolChoice?: ToolChoice;
  /** Sent as `parallel_tool_calls`: false asks for at most one tool call per reply. */
  parallelToolCalls?: boolean;
  /** Fields the request gave that the provider is not sent (their wire names). */
  ignored?: string[];
};

/** A response format's JSON Schema as JSON text, in characters. */
export const MAX_RESPONSE_SCHEMA = 64 * 1024;

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

const RANGES: ReadonlyArray<readonly [keyof TurnHints, number, number]> = [
  ['temperature', 0, 2],
  ['topP', 0, 1],
  ['presencePenalty', -2, 2],
  ['frequencyPenalty', -2, 2],
];

/** What is wrong with `value` as a turn's hints, or undefined when they are valid. */
export function turnHintsProblem(value: unknown): string | undefined {
  if (!isPlainObject(value)) return 'hints must be an object';
  const known = new Set([
    ...RANGES.map(([name]) => name),
    'maxTokens',
    'seed',
    'stop',
    'responseFormat',
    'toolChoice',
    'parallelToolCalls',
    'ignored',
  ]);
  const extra = Object.keys(value).find((key) => !known.has(key));
  if (extra !== undefined) return `hints has unknown field ${JSON.stringify(extra)}`;
  for (const [name, min, max] of RANGES) {
    const n = value[name];
    if (n !== undefined && (typeof n !== 'number' || !Number.isFinite(n) || n < min || n > max))
      return `hints.${name} must be a number from ${min} to ${max}`;
  }
  if (value.maxTokens !== undefined && (!Number.isSafeInteger(value.maxTokens) || (value.maxTokens as number) < 1))
    return 'hints.maxTokens must be a whole number of at least 1';
  if (value.seed !== undefined && !Number.isSafeInteger(value.seed)) return 'hints.seed must be a whole number';
  const { stop, ignored, responseFormat } = value;
  if (
    stop !== undefined &&
    (!Array.isArray(stop) ||
      stop.length < 1 ||
      stop.length > 4 ||
      !stop.every((s) => typeof s === 'string' && s.length > 0 && s.length <= 256))
  )
    return 'hints.stop must be a list of 1-4 strings of 1-256 characters';
  if (
    ignored !== undefined &&
    (!Array.isArray(ignored) ||
      ignored.length > 64 ||
      !ignored.every((s) => typeof s === 'string' && s.length > 0 && s.length <= 64))
  )
    return 'hints.ignored must be a list of at most 64 field names';
  if (value.parallelToolCalls !== undefined && typeof value.parallelToolCalls !== 'boolean')
    return 'hints.parallelToolCalls must be true or false';
  const choiceProblem = value.toolChoice === undefined ? undefined : toolChoiceProblem(value.toolChoice);
  if (choiceProblem) return choiceProblem;
  return responseFormat === undefined ? undefined : responseFormatProblem(responseFormat);
}

const TOOL_NAME = /^[A-Za-z0-9_-]{1,64}$/;

function toolChoiceProblem(choice: unknown): string | undefined {
  if (choice === 'auto' || choice === 'none' || choice === 'required') return undefined;
  if (!isPlainObject(choice))
    return "hints.toolChoice must be 'auto', 'none', 'required' or {name} (a tool of the turn)";
  const extra = Object.keys(choice).find((key) => key !== 'name');
  if (extra !== undefined) return `hints.toolChoice has unknown field ${JSON.stringify(extra)}`;
  if (typeof choice.name !== 'string' || !TOOL_NAME.test(choice.name))
    return 'hints.toolChoice.name must be a tool name: 1-64 characters of A-Z a-z 0-9 _ -';
  return undefined;
}

/** Whether `choice` makes the model call a tool (`required`, or a named tool). */
export function forcesToolCall(choice: ToolChoice | undefined): choice is 'required' | { name: string } {
  return choice === 'required' || (typeof choice === 'object' && choice !== null);
}

/**
 * The hints a step of the turn is sent: all of them at step 1; from step 2 on, without a forced
 * tool choice (it has had its call), so the model can answer with what the tool returned.
 */
export function hintsForStep(hints: TurnHints | undefined, step: number): TurnHints | undefined {
  if (!hints || step <= 1 || !forcesToolCall(hints.toolChoice)) return hints;
  const { toolChoice: _forced, ...rest } = hints;
  return Object.keys(rest).length > 0 ? rest : undefined;
}

/**
 * What is wrong with a turn's tool choice given the names of the tools its request carries, or
 * undefined: a named tool must be one of them, and a forced choice needs at least one tool.
 */
export function toolChoiceToolsProblem(
  choice: ToolChoice | undefined,
  toolNames: readonly string[],
): string | undefined {
  if (!forcesToolCall(choice)) return undefined;
  if (choice === 'required')
    return toolNames.length > 0 ? undefined : "tool_choice 'required' needs tools, and this turn has none";
  return toolNames.includes(choice.name)
    ? undefined
    : `tool_choice names the tool ${JSON.stringify(choice.name)}, which this turn does not have (its tools: ${toolNames.map((n) => JSON.stringify(n)).join(', ') || 'none'})`;
}

function responseFormatProblem(format: unknown): string | undefined {
  if (!isPlainObject(format)) return 'hints.responseFormat must be an object';
  if (format.type === 'json_object')
    return Object.keys(format).length === 1 ? undefined : 'a json_object response format has only a type';
  if (format.type !== 'json_schema') return "hints.responseFormat.type must be 'json_object' or 'json_schema'";
  const extra = Object.keys(format).find((key) => !['type', 'name', 'schema', 'strict', 'description'].includes(key));
  if (extra !== undefined) return `hints.responseFormat has unknown field ${JSON.stringify(extra)}`;
  if (typeof format.name !== 'string' || !/^[A-Za-z0-9_-]{1,64}$/.test(format.name))
    return 'hints.responseFormat.name must be 1-64 characters of A-Z a-z 0-9 _ -';
  if (!isPlainObject(format.schema)) return 'hints.responseFormat.schema must be a JSON Schema object';
  if (JSON.stringify(format.schema).length > MAX_RESPONSE_SCHEMA)
    return `hints.responseFormat.schema is more than ${MAX_RESPONSE_SCHEMA} characters of JSON`;
  if (format.strict !== undefined && typeof format.strict !== 'boolean')
    return 'hints.responseFormat.strict must be true or false';
  if (format.description !== undefined && (typeof format.description !== 'string' || format.description.length > 4096))
    return 'hints.responseFormat.description must be a string of at most 4096 characters';
  return undefined;
}
