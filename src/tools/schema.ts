/**
 * A tool's input schema as the worker uses it (DESIGN §5.4): the JSON Schema the model is shown
 * and a validator for the arguments the model wrote. A schema comes from a schema library that
 * implements Standard Schema (zod 4, valibot, arktype: the `~standard` property, standardschema.dev),
 * from the AI SDK's `jsonSchema()` wrapper, or is a plain JSON Schema object (validated with ajv).
 */
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { z } from 'zod';
import { SessionlogError, type JsonObject } from '../session/index.js';

/**
 * The Standard Schema V1 interface (standardschema.dev), copied as its authors ask, so a schema
 * of any library types `defineTool`'s arguments without a dependency on the spec package.
 */
export interface StandardSchemaV1<Input = unknown, Output = Input> {
  readonly '~standard': {
    readonly version: 1;
    readonly vendor: string;
    readonly validate: (value: unknown) => StandardResult<Output> | Promise<StandardResult<Output>>;
    readonly types?: { readonly input: Input; readonly output: Output } | undefined;
    /** Standard JSON Schema V1 (zod 4.2+, valibot, arktype): the JSON Schema of the input. */
    readonly jsonSchema?: { readonly input: (options: { readonly target: string }) => Record<string, unknown> };
  };
}

type StandardResult<Output> =
  | { readonly value: Output; readonly issues?: undefined }
  | {
      readonly issues: ReadonlyArray<{
        readonly message: string;
        readonly path?: ReadonlyArray<PropertyKey | { readonly key: PropertyKey }> | undefined;
      }>;
    };

/** The output type of a Standard Schema: what a tool's `execute` receives after validation. */
export type InferSchemaOutput<S> = S extends StandardSchemaV1<unknown, infer Output> ? Output : JsonObject;

/** The marker of the AI SDK's `jsonSchema()` / `zodSchema()` wrappers (`@ai-sdk/provider-utils`). */
const AI_SDK_SCHEMA = Symbol.for('vercel.ai.schema');

/** The AI SDK's schema wrapper: a JSON Schema and an optional validator (`ValidationResult`). */
type AISDKSchema = {
  readonly jsonSchema: unknown;
  readonly validate?: (
    value: unknown,
  ) => { success: true; value: unknown } | { success: false; error: Error } | PromiseLike<unknown>;
};

/** The outcome of checking a call's arguments: the (possibly transformed) value, or the issues, each naming its path. */
export type ArgumentsCheck = { ok: true; value: unknown } | { ok: false; issues: string[] };

/** A tool's input schema, ready: what the model is shown and how its arguments are checked. */
export type ToolInputSchema = {
  /** JSON Schema of the arguments object, as the model gets it (no `$schema`). */
  parameters: JsonObject;
  check(args: unknown): Promise<ArgumentsCheck>;
};

/** At most this many issues are named to the model; the rest are counted. */
const MAX_ISSUES = 5;

/**
 * Turns `schema` (Standard Schema, an AI SDK schema wrapper or a lazy one, or JSON Schema) into
 * what the worker needs; `tool` names the tool in the error a schema that cannot work raises
 * (at worker start, when the registry is built).
 */
export function toolInputSchema(tool: string, schema: unknown): ToolInputSchema {
  // Before the lazy case: an arktype schema is a function too.
  if ((typeof schema === 'object' || typeof schema === 'function') && schema !== null && '~standard' in schema)
    return fromStandardSchema(tool, schema as StandardSchemaV1);
  if (typeof schema === 'function') return toolInputSchema(tool, callLazySchema(tool, schema as () => unknown));
  if (schema === null || typeof schema !== 'object' || Array.isArray(schema))
    throw invalidSchema(tool, 'inputSchema must be a schema object (Standard Schema or JSON Schema)');
  if (AI_SDK_SCHEMA in schema) return fromAISDKSchema(tool, schema as unknown as AISDKSchema);
  return fromJsonSchema(tool, schema as Record<string, unknown>);
}

function callLazySchema(tool: string, lazy: () => unknown): unknown {
  try {
    return lazy();
  } catch (error) {
    throw invalidSchema(tool, `its lazy inputSchema threw: ${(error as Error).message}`);
  }
}

function fromStandardSchema(tool: string, schema: StandardSchemaV1): ToolInputSchema {
  const parameters = objectSchema(tool, standardJsonSchema(tool, schema));
  return {
    parameters,
    async check(args) {
      const result = await schema['~standard'].validate(args);
      if (result.issues === undefined) return { ok: true, value: result.value };
      return {
        ok: false,
        issues: result.issues.map((issue) => `${pathText(issue.path ?? [])}: ${issue.message}`),
      };
    },
  };
}

/** The input's JSON Schema from Standard JSON Schema, else zod 4's own converter, else a refusal. */
function standardJsonSchema(tool: string, schema: StandardSchemaV1): unknown {
  const standard = schema['~standard'];
  try {
    if (standard.jsonSchema) return standard.jsonSchema.input({ target: 'draft-07' });
    // zod 4 before 4.2 has no `~standard.jsonSchema`, but its converter reads any zod 4 schema.
    if ('_zod' in schema) return z.toJSONSchema(schema as unknown as z.ZodType, { target: 'draft-7', io: 'input' });
  } catch (error) {
    throw invalidSchema(tool, `${standard.vendor} could not convert it (${(error as Error).message})`);
  }
  throw invalidSchema(tool, `${standard.vendor} does not implement Standard JSON Schema`);
}

function fromAISDKSchema(tool: string, schema: AISDKSchema): ToolInputSchema {
  let json: unknown;
  try {
    json = schema.jsonSchema;
  } catch (error) {
    throw invalidSchema(tool, `its jsonSchema() threw: ${(error as Error).message}`);
  }
  if (json !== null && typeof json === 'object' && typeof (json as PromiseLike<unknown>).then === 'function')
    throw invalidSchema(tool, 'its jsonSchema() is a promise; pass the JSON Schema itself');
  const validate = schema.validate;
  if (!validate) return fromJsonSchema(tool, json);
  return {
    parameters: objectSchema(tool, json),
    async check(args) {
      const result = (await validate(args)) as { success: true; value: unknown } | { success: false; error: Error };
      return result.success ? { ok: true, value: result.value } : { ok: false, issues: [result.error.message] };
    },
  };
}

function fromJsonSchema(tool: string, json: unknown): ToolInputSchema {
  const parameters = objectSchema(tool, json);
  let validate: ValidateFunction;
  try {
    validate = validatorFor(json as Record<string, unknown>);
  } catch (error) {
    throw new SessionlogError(
      'INVALID_ARGUMENT',
      `tool "${tool}": inputSchema is not a JSON Schema that can be compiled (${(error as Error).message})`,
    );
  }
  return {
    parameters,
    async check(args) {
      if (validate(args)) return { ok: true, value: args };
      return { ok: false, issues: (validate.errors ?? []).map(ajvIssue) };
    },
  };
}

let draft07: Ajv | undefined;
let draft2020: Ajv2020 | undefined;

/** An ajv validator for the schema's draft (2020-12 when it says so, else draft-07). Formats are not checked. */
function validatorFor(json: Record<string, unknown>): ValidateFunction {
  const options = { strict: false, allErrors: true, validateFormats: false } as const;
  if (typeof json.$schema === 'string' && json.$schema.includes('2020-12')) {
    draft2020 ??= new Ajv2020(options);
    return draft2020.compile(json);
  }
  draft07 ??= new Ajv(options);
  return draft07.compile(json);
}

function ajvIssue(error: ErrorObject): string {
  const path = error.instancePath.split('/').filter((p) => p !== '');
  const params = error.params as { missingProperty?: string; additionalProperty?: string };
  if (error.keyword === 'required' && params.missingProperty !== undefined)
    return `${pathText([...path, params.missingProperty])}: is required`;
  if (error.keyword === 'additionalProperties' && params.additionalProperty !== undefined)
    return `${pathText([...path, params.additionalProperty])}: is not allowed`;
  return `${pathText(path)}: ${error.message ?? error.keyword}`;
}

/** `a.b.0.c`, or `(root)` for the arguments object itself. */
function pathText(path: ReadonlyArray<PropertyKey | { readonly key: PropertyKey }>): string {
  const keys = path.map((segment) => String(typeof segment === 'object' ? segment.key : segment));
  return keys.length > 0 ? keys.join('.') : '(root)';
}

/** The JSON Schema the model gets: an object schema (tool arguments are a JSON object), without `$schema`. */
function objectSchema(tool: string, json: unknown): JsonObject {
  if (json === null || typeof json !== 'object' || Array.isArray(json))
    throw invalidSchema(tool, 'it did not produce a JSON Schema object');
  const { $schema: _dialect, ...rest } = json as Record<string, unknown>;
  void _dialect;
  if (rest.type !== 'object')
    throw new SessionlogError(
      'INVALID_ARGUMENT',
      `tool "${tool}": inputSchema must describe an object (type "object"), since the model sends arguments as a JSON object; it has type ${JSON.stringify(rest.type ?? null)}`,
    );
  return rest as JsonObject;
}

function invalidSchema(tool: string, reason: string): SessionlogError {
  return new SessionlogError(
    'INVALID_ARGUMENT',
    `tool "${tool}": inputSchema cannot be turned into JSON Schema: ${reason}; pass a JSON Schema or a schema library that implements Standard JSON Schema`,
  );
}

/** The message a model sees for arguments that fail validation: every issue with its path. */
export function argumentsMismatch(tool: string, issues: readonly string[]): string {
  const shown = issues.slice(0, MAX_ISSUES).join('; ');
  const more = issues.length > MAX_ISSUES ? ` (and ${issues.length - MAX_ISSUES} more)` : '';
  return `arguments of tool '${tool}' do not match its input schema: ${shown}${more}`;
}
