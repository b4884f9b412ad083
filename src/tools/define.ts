/**
 * `defineTool`: a tool written as the agent frameworks write one (DESIGN §5.4), with an input
 * schema from a schema library (zod 4, valibot, arktype: any Standard Schema) or JSON Schema.
 * The model gets the schema as JSON Schema; its arguments are validated before `execute` runs,
 * and `execute` receives them typed. A mismatch is an error result the model sees, naming the path.
 */
import type { JsonObject, JsonValue } from '../session/index.js';
import type { ApprovalRule, RunnableTool, ToolContext, ToolOutput } from './registry.js';
import { argumentsMismatch, toolInputSchema, type InferSchemaOutput, type StandardSchemaV1 } from './schema.js';
import { ToolInputError } from './tool-input-error.js';

/** What `execute` may return: text, a {@link ToolOutput}, or any JSON value (shown to the model as JSON). */
export type ToolResultValue = string | ToolOutput | JsonValue | undefined;

/** A tool's definition for {@link defineTool}; `Schema` is a Standard Schema or a JSON Schema object. */
export type ToolDefinition<Schema extends StandardSchemaV1 | JsonObject> = {
  /** 1-64 characters of A-Z a-z 0-9 _ - (what every provider accepts). */
  name: string;
  description: string;
  /** A Standard Schema (zod 4, valibot, arktype) or a JSON Schema of the arguments object. */
  inputSchema: Schema;
  /** Runs with the validated arguments (the schema's output type) and the calling session's context. */
  execute(args: InferSchemaOutput<Schema>, context: ToolContext): Promise<ToolResultValue> | ToolResultValue;
  approval?: ApprovalRule;
};

const DEFINED_TOOL = Symbol.for('sessionlog.defineTool');

/** A tool made by {@link defineTool}: the registry turns it into a runnable tool when the worker starts. */
export type SchemaTool<Schema extends StandardSchemaV1 | JsonObject = StandardSchemaV1 | JsonObject> =
  ToolDefinition<Schema> & { readonly [DEFINED_TOOL]: true };

/**
 * Defines a tool whose arguments are validated against `inputSchema` before `execute` runs.
 * Give it to `createWorker({ tools })` or a `ToolRegistry`; a schema that cannot become JSON
 * Schema is refused there, at worker start.
 *
 * @example
 * const weather = defineTool({
 *   name: 'weather',
 *   description: 'The weather in a city',
 *   inputSchema: z.object({ city: z.string() }),
 *   execute: async ({ city }) => ({ city, forecast: 'sunny' }),
 * });
 */
export function defineTool<Schema extends StandardSchemaV1 | JsonObject>(
  definition: ToolDefinition<Schema>,
): SchemaTool<Schema> {
  return { ...definition, [DEFINED_TOOL]: true };
}

/** Whether `value` was made by {@link defineTool}. */
export function isSchemaTool(value: object): value is SchemaTool {
  return DEFINED_TOOL in value;
}

/** The runnable tool of a {@link defineTool} definition (its schema converted now: at worker start). */
export function runnableSchemaTool(tool: SchemaTool, name: string = tool.name): RunnableTool {
  return validatedTool({
    name,
    description: tool.description,
    inputSchema: tool.inputSchema,
    ...(tool.approval !== undefined ? { approval: tool.approval } : {}),
    execute: async (args, context) => toolOutputOf(await tool.execute(args as never, context)),
  });
}

/**
 * A runnable tool that checks the model's arguments against `inputSchema` (any schema
 * `toolInputSchema` takes) and runs `execute` with the validated value; what the adapters for
 * other frameworks' tools share.
 */
export function validatedTool(spec: {
  name: string;
  description: string;
  inputSchema: unknown;
  approval?: ApprovalRule;
  execute(args: unknown, context: ToolContext): Promise<ToolOutput>;
}): RunnableTool {
  const schema = toolInputSchema(spec.name, spec.inputSchema);
  return {
    name: spec.name,
    description: spec.description,
    parameters: schema.parameters,
    ...(spec.approval !== undefined ? { approval: spec.approval } : {}),
    async run(args, context) {
      const checked = await schema.check(args);
      if (!checked.ok) throw new ToolInputError(argumentsMismatch(spec.name, checked.issues));
      return spec.execute(checked.value, context);
    },
  };
}

/** Text as it is; an object with a string `text` and no keys but ToolOutput's as a ToolOutput; anything else as JSON. */
export function toolOutputOf(value: unknown): ToolOutput {
  if (typeof value === 'string') return { text: value };
  if (value === undefined) return { text: '' };
  if (isToolOutput(value)) return value;
  return { text: JSON.stringify(value) ?? '' };
}

const TOOL_OUTPUT_KEYS = new Set<string>(['text', 'isError', 'errorCode', 'content'] satisfies Array<keyof ToolOutput>);

function isToolOutput(value: unknown): value is ToolOutput {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  const record = value as Record<string, unknown>;
  return typeof record.text === 'string' && Object.keys(record).every((key) => TOOL_OUTPUT_KEYS.has(key));
}
