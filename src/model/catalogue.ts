/**
 * The model catalogue (DESIGN §7): what sessionlog knows about each model, as data. Context
 * windows drive the token budget, the tokenizer family drives the token meter, and the
 * request flags decide which provider-specific fields a request may carry. Config can
 * override or extend any entry through `resolveModelCatalogue`.
 */

/** Which offline tokenizer approximates the model's vocabulary. */
export type TokenizerFamily = 'deepseek' | 'o200k';

/** Which wire dialect of the OpenAI-compatible API the model speaks. */
export type ProviderKind = 'deepseek' | 'openai' | 'fake';

/** USD per million tokens. */
export type ModelPrices = { input: number; cachedInput: number; output: number };

export type ModelSpec = {
  /** Canonical catalogue name, also the name sent to the API. */
  id: string;
  provider: ProviderKind;
  contextWindow: number;
  maxOutput: number;
  tokenizer: TokenizerFamily;
  /** The model accepts DeepSeek's `thinking: {type}` body field. */
  thinkingParam: boolean;
  /** Thinking default when the request header does not say (undefined: send nothing). */
  thinkingDefault?: boolean;
  /**
   * The model returns DeepSeek's `reasoning_content`, and must get it back on assistant
   * messages that made tool calls (and only on those).
   */
  reasoningContent: boolean;
  prices?: ModelPrices;
  /**
   * The media the model takes in a request (issue 50): images (`image_url` parts) and files
   * (`file` parts: PDF; plain text goes as text). A config entry that does not say takes neither.
   */
  input: ModelInputs;
};

/** Which media a model accepts in its input. */
export type ModelInputs = { image: boolean; file: boolean };

/** The inputs of a model whose entry does not say: text only. */
export const TEXT_ONLY_INPUT: ModelInputs = Object.freeze({ image: false, file: false });

/** An old or alternative name: resolves to `model`, optionally with thinking forced. */
export type ModelAlias = { model: string; thinking?: boolean };

export type ModelCatalogue = {
  readonly models: Readonly<Record<string, ModelSpec>>;
  readonly aliases: Readonly<Record<string, ModelAlias>>;
};

/** A catalogue entry resolved from a requested name (canonical or alias). */
export type ResolvedModel = ModelSpec & { requestedName: string; forcedThinking?: boolean };

const DEEPSEEK_CONTEXT = 1_000_000;
const DEEPSEEK_MAX_OUTPUT = 384 * 1024;

export const DEFAULT_MODEL_CATALOGUE: ModelCatalogue = {
  models: {
    'deepseek-flash': {
      id: 'deepseek-flash',
      provider: 'deepseek',
      contextWindow: DEEPSEEK_CONTEXT,
      maxOutput: DEEPSEEK_MAX_OUTPUT,
      tokenizer: 'deepseek',
      thinkingParam: true,
      reasoningContent: true,
      input: { image: false, file: false },
    },
    'deepseek-v4-pro': {
      id: 'deepseek-v4-pro',
      provider: 'deepseek',
      contextWindow: DEEPSEEK_CONTEXT,
      maxOutput: DEEPSEEK_MAX_OUTPUT,
      tokenizer: 'deepseek',
      thinkingParam: true,
      reasoningContent: true,
      input: { image: false, file: false },
    },
    'gpt-4o': {
      id: 'gpt-4o',
      provider: 'openai',
      contextWindow: 128_000,
      maxOutput: 16_384,
      tokenizer: 'o200k',
      thinkingParam: false,
      reasoningContent: false,
      prices: { input: 2.5, cachedInput: 1.25, output: 10 },
      input: { image: true, file: true },
    },
    'gpt-4.1': {
      id: 'gpt-4.1',
      provider: 'openai',
      contextWindow: 1_047_576,
      maxOutput: 32_768,
      tokenizer: 'o200k',
      thinkingParam: false,
      reasoningContent: false,
      prices: { input: 2, cachedInput: 0.5, output: 8 },
      input: { image: true, file: true },
    },
    fake: {
      id: 'fake',
      provider: 'fake',
      contextWindow: 128_000,
      maxOutput: 8_192,
      tokenizer: 'deepseek',
      thinkingParam: true,
      reasoningContent: true,
      prices: { input: 0, cachedInput: 0, output: 0 },
      input: { image: true, file: true },
    },
  },
  aliases: {
    // Retired DeepSeek names (2026): chat was the non-thinking mode, reasoner the thinking one.
    'deepseek-chat': { model: 'deepseek-flash', thinking: false },
    'deepseek-reasoner': { model: 'deepseek-v4-pro', thinking: true },
  },
};

/**
 * The structured output formats a model's wire dialect takes (DeepSeek: any JSON object only;
 * OpenAI and the fake: JSON objects and JSON Schema).
 */
export function responseFormatsOf(spec: Pick<ModelSpec, 'provider'>): ReadonlyArray<'json_object' | 'json_schema'> {
  return spec.provider === 'deepseek' ? ['json_object'] : ['json_object', 'json_schema'];
}

/** Thrown for a model name the catalogue does not know, or an invalid override. */
export class ModelCatalogueError extends Error {
  constructor(
    readonly code: 'UNKNOWN_MODEL' | 'INVALID_MODEL_SPEC',
    message: string,
  ) {
    super(message);
    this.name = 'ModelCatalogueError';
  }
}

/** Config overrides: partial fields for known models, full specs for new ones. */
export type ModelCatalogueOverrides = {
  models?: Record<string, Partial<Omit<ModelSpec, 'id'>>>;
  aliases?: Record<string, ModelAlias>;
};

/**
 * Merges config overrides over the defaults and validates the result: a new model must give
 * every required field, limits must be positive integers, and aliases must point at models.
 */
export function resolveModelCatalogue(
  overrides: ModelCatalogueOverrides = {},
  base: ModelCatalogue = DEFAULT_MODEL_CATALOGUE,
): ModelCatalogue {
  const models: Record<string, ModelSpec> = { ...base.models };
  for (const [id, patch] of Object.entries(overrides.models ?? {})) {
    const merged = { ...models[id], ...patch, id } as Partial<ModelSpec>;
    models[id] = checkSpec(id, merged);
  }
  const aliases: Record<string, ModelAlias> = { ...base.aliases, ...overrides.aliases };
  for (const [name, alias] of Object.entries(aliases)) {
    if (!models[alias.model]) {
      throw new ModelCatalogueError(
        'INVALID_MODEL_SPEC',
        `model alias '${name}' points at unknown model '${alias.model}'; add that model to the catalogue or fix the alias`,
      );
    }
  }
  return { models, aliases };
}

function checkSpec(id: string, spec: Partial<ModelSpec>): ModelSpec {
  const problems: string[] = [];
  for (const field of ['contextWindow', 'maxOutput'] as const) {
    const value = spec[field];
    if (typeof value !== 'number' || !Number.isInteger(value) || value <= 0)
      problems.push(`${field} must be a positive integer`);
  }
  if (spec.tokenizer !== 'deepseek' && spec.tokenizer !== 'o200k')
    problems.push(`tokenizer must be 'deepseek' or 'o200k'`);
  if (spec.provider !== 'deepseek' && spec.provider !== 'openai' && spec.provider !== 'fake') {
    problems.push(`provider must be 'deepseek', 'openai' or 'fake'`);
  }
  if (typeof spec.thinkingParam !== 'boolean') problems.push('thinkingParam must be a boolean');
  if (typeof spec.reasoningContent !== 'boolean') problems.push('reasoningContent must be a boolean');
  const input = spec.input ?? TEXT_ONLY_INPUT;
  if (typeof input !== 'object' || typeof input.image !== 'boolean' || typeof input.file !== 'boolean')
    problems.push('input must be {image: boolean, file: boolean}');
  if (problems.length > 0) {
    throw new ModelCatalogueError('INVALID_MODEL_SPEC', `model catalogue entry '${id}': ${problems.join('; ')}`);
  }
  return { ...spec, input } as ModelSpec;
}

/** Looks a model up by canonical name or alias; throws `UNKNOWN_MODEL` naming the known ones. */
export function lookupModel(catalogue: ModelCatalogue, name: string): ResolvedModel {
  const direct = catalogue.models[name];
  if (direct) return { ...direct, requestedName: name };
  const alias = catalogue.aliases[name];
  const target = alias ? catalogue.models[alias.model] : undefined;
  if (alias && target) {
    return alias.thinking === undefined
      ? { ...target, requestedName: name }
      : { ...target, requestedName: name, forcedThinking: alias.thinking };
  }
  const known = [...Object.keys(catalogue.models), ...Object.keys(catalogue.aliases)].sort().join(', ');
  throw new ModelCatalogueError(
    'UNKNOWN_MODEL',
    `unknown model '${name}'; known models: ${known}. Add it to the model catalogue in config to use it.`,
  );
}
