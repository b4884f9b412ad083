/**
 * Schema-typed tools (DESIGN §5.4, issue 51): `defineTool` with zod, arktype or JSON Schema, and
 * AI SDK and LangChain `tool()` objects as they are, through the registry. The model's JSON
 * Schema, argument validation naming the path, and refusals at registration naming the tool.
 */
import { tool as langChainTool } from '@langchain/core/tools';
import { jsonSchema, tool as aiTool } from 'ai';
import { type } from 'arktype';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { z as z3 } from 'zod/v3';
import { BUILTIN_TOOLS, calculatorTool } from '../../src/tools/builtin.js';
import { defineTool } from '../../src/tools/define.js';
import { ToolInputError, ToolRegistry, type RunnableTool, type ToolContext } from '../../src/tools/registry.js';
import { createWorker } from '../../src/worker.js';

function context(callId = 'call-1'): ToolContext {
  return {
    sessionId: 's-1',
    callId,
    artifacts: undefined as never,
    history: undefined as never,
    signal: new AbortController().signal,
  };
}

function runnable(registry: ToolRegistry, name: string): RunnableTool {
  const found = registry.get(name);
  if (!found || found.external) throw new Error(`${name} is not runnable`);
  return found;
}

async function inputError(promise: Promise<unknown>): Promise<ToolInputError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ToolInputError);
  return error as ToolInputError;
}

describe('defineTool', () => {
  const weather = defineTool({
    name: 'weather',
    description: 'The weather in a city',
    inputSchema: z.object({ city: z.string().describe('City name'), days: z.number().int().min(1).default(1) }),
    execute: async ({ city, days }, ctx) => ({ city, days, callId: ctx.callId }),
  });

  it('shows the model the zod schema as JSON Schema (input side: a defaulted field is optional), without $schema', () => {
    const [schema] = new ToolRegistry([weather]).schemas();
    expect(schema).toEqual({
      name: 'weather',
      description: 'The weather in a city',
      parameters: {
        type: 'object',
        properties: {
          city: { type: 'string', description: 'City name' },
          days: { type: 'integer', minimum: 1, maximum: 9007199254740991, default: 1 },
        },
        required: ['city'],
      },
    });
  });

  it('runs execute with the validated value (defaults filled) and returns JSON as text', async () => {
    const output = await runnable(new ToolRegistry([weather]), 'weather').run({ city: 'Oslo' }, context('c-7'));
    expect(JSON.parse(output.text)).toEqual({ city: 'Oslo', days: 1, callId: 'c-7' });
  });

  it('refuses arguments that do not match before execute runs, naming each path', async () => {
    let ran = false;
    const guarded = defineTool({
      name: 'guarded',
      description: 'd',
      inputSchema: z.object({ city: z.string(), trip: z.object({ days: z.number() }) }),
      execute: () => {
        ran = true;
        return 'ran';
      },
    });
    const error = await inputError(
      runnable(new ToolRegistry([guarded]), 'guarded').run({ city: 42, trip: { days: 'x' } }, context()),
    );
    expect(error.code).toBe('TOOL_INPUT_INVALID');
    expect(error.message).toBe(
      "arguments of tool 'guarded' do not match its input schema: city: Invalid input: expected string, received number; trip.days: Invalid input: expected number, received string",
    );
    expect(ran).toBe(false);
  });

  it('takes an arktype schema: its own JSON Schema, its validation messages', async () => {
    const itinerary = defineTool({
      name: 'itinerary',
      description: 'd',
      inputSchema: type({ city: 'string', days: 'number.integer > 0' }),
      execute: ({ city, days }) => `${days} days in ${city}`,
    });
    const registry = new ToolRegistry([itinerary]);
    expect(registry.schemas()[0]!.parameters).toEqual({
      type: 'object',
      properties: { city: { type: 'string' }, days: { type: 'integer', exclusiveMinimum: 0 } },
      required: ['city', 'days'],
    });
    expect((await runnable(registry, 'itinerary').run({ city: 'Rome', days: 3 }, context())).text).toBe(
      '3 days in Rome',
    );
    const error = await inputError(runnable(registry, 'itinerary').run({ city: 'Rome', days: 0 }, context()));
    expect(error.message).toMatch(/days: days must be positive \(was 0\)$/);
  });

  it('takes a JSON Schema and validates with ajv, naming a missing or extra property', async () => {
    const echo = defineTool({
      name: 'echo',
      description: 'd',
      inputSchema: {
        type: 'object',
        properties: { text: { type: 'string' }, times: { type: 'integer', minimum: 1 } },
        required: ['text'],
        additionalProperties: false,
      },
      execute: (args) => ({ text: String(args.text), isError: false }),
    });
    const tool = runnable(new ToolRegistry([echo]), 'echo');
    expect(await tool.run({ text: 'hi' }, context())).toEqual({ text: 'hi', isError: false });
    const error = await inputError(tool.run({ times: 0, extra: true }, context()));
    expect(error.message).toContain('text: is required');
    expect(error.message).toContain('times: must be >= 1');
    expect(error.message).toContain('extra: is not allowed');
  });
});

describe('AI SDK tool() objects as they are', () => {
  it('runs a zod tool from a record keyed by name, with the AI SDK execute options', async () => {
    let seen: { toolCallId?: string; aborted?: boolean } = {};
    const tools = {
      getWeather: aiTool({
        description: 'Get the weather',
        inputSchema: z.object({ city: z.string(), unit: z.enum(['celsius', 'fahrenheit']).default('celsius') }),
        execute: async ({ city, unit }, { toolCallId, abortSignal }) => {
          seen = { toolCallId, aborted: abortSignal?.aborted };
          return { city, unit, temperature: 21 };
        },
      }),
    };
    const registry = new ToolRegistry(tools);
    expect(registry.schemas()[0]).toMatchObject({
      name: 'getWeather',
      description: 'Get the weather',
      parameters: { type: 'object', required: ['city'] },
    });
    const output = await runnable(registry, 'getWeather').run({ city: 'Oslo' }, context('call-9'));
    expect(JSON.parse(output.text)).toEqual({ city: 'Oslo', unit: 'celsius', temperature: 21 });
    expect(seen).toEqual({ toolCallId: 'call-9', aborted: false });
    await inputError(runnable(registry, 'getWeather').run({ city: 'Oslo', unit: 'kelvin' }, context()));
  });

  it('validates a jsonSchema() tool without a validator of its own with ajv, and one with its own validator by it', async () => {
    const registry = new ToolRegistry({
      pack: aiTool({
        description: 'Packing list',
        inputSchema: jsonSchema<{ days: number }>({
          type: 'object',
          properties: { days: { type: 'integer', minimum: 1 } },
          required: ['days'],
        }),
        execute: async ({ days }) => `pack for ${days} days`,
      }),
      checked: aiTool({
        description: 'Own validator',
        inputSchema: jsonSchema<{ n: number }>(
          { type: 'object', properties: { n: { type: 'number' } } },
          {
            validate: (value) =>
              (value as { n?: unknown }).n === 7
                ? { success: true, value: value as { n: number } }
                : { success: false, error: new Error('n: must be 7') },
          },
        ),
        execute: async ({ n }) => n,
      }),
    });
    expect((await runnable(registry, 'pack').run({ days: 2 }, context())).text).toBe('pack for 2 days');
    expect((await inputError(runnable(registry, 'pack').run({ days: 0 }, context()))).message).toContain(
      'days: must be >= 1',
    );
    expect((await runnable(registry, 'checked').run({ n: 7 }, context())).text).toBe('7');
    expect((await inputError(runnable(registry, 'checked').run({ n: 8 }, context()))).message).toContain(
      'n: must be 7',
    );
  });

  it('takes the final result of a streaming execute, and toModelOutput when the tool has one', async () => {
    const registry = new ToolRegistry({
      progress: aiTool({
        description: 'Streams',
        inputSchema: z.object({}),
        async *execute() {
          yield { status: 'working' };
          yield { status: 'done' };
        },
      }),
      shaped: aiTool({
        description: 'Shaped',
        inputSchema: z.object({ q: z.string() }),
        execute: async ({ q }) => ({ hits: [q] }),
        toModelOutput: ({ output }) => ({ type: 'text', value: `hits: ${output.hits.join(',')}` }),
      }),
    });
    expect((await runnable(registry, 'progress').run({}, context())).text).toBe('{"status":"done"}');
    expect((await runnable(registry, 'shaped').run({ q: 'x' }, context())).text).toBe('hits: x');
  });

  it('makes a tool without execute an external tool the caller runs, and maps needsApproval', () => {
    const registry = new ToolRegistry({
      askUser: aiTool({ description: 'Ask the user', inputSchema: z.object({ question: z.string() }) }),
      deleteFile: aiTool({
        description: 'Delete',
        inputSchema: z.object({ path: z.string() }),
        needsApproval: true,
        execute: async () => 'deleted',
      }),
    });
    expect(registry.get('askUser')).toMatchObject({ external: true, parameters: { type: 'object' } });
    expect(registry.get('deleteFile')?.approval).toBe('always');
  });
});

describe('LangChain tool() objects as they are', () => {
  it('runs a zod LangChain tool through invoke with validated arguments', async () => {
    const convert = langChainTool(async ({ celsius }) => `${(celsius * 9) / 5 + 32}°F`, {
      name: 'convert_temperature',
      description: 'Celsius to Fahrenheit',
      schema: z.object({ celsius: z.number() }),
    });
    const registry = new ToolRegistry([convert]);
    expect(registry.schemas()[0]).toMatchObject({
      name: 'convert_temperature',
      parameters: { type: 'object', properties: { celsius: { type: 'number' } }, required: ['celsius'] },
    });
    expect((await runnable(registry, 'convert_temperature').run({ celsius: 100 }, context())).text).toBe('212°F');
    const error = await inputError(runnable(registry, 'convert_temperature').run({ celsius: 'hot' }, context()));
    expect(error.message).toContain('celsius: Invalid input: expected number, received string');
  });

  it('runs a JSON Schema LangChain tool, its object result as JSON', async () => {
    const double = langChainTool(async (args: Record<string, unknown>) => ({ n: (args.n as number) * 2 }), {
      name: 'double',
      description: 'Doubles',
      schema: { type: 'object', properties: { n: { type: 'number' } }, required: ['n'] },
    });
    const tool = runnable(new ToolRegistry([double]), 'double');
    expect((await tool.run({ n: 4 }, context())).text).toBe('{"n":8}');
    expect((await inputError(tool.run({}, context()))).message).toContain('n: is required');
  });
});

describe('bad tools are refused when the registry is built, naming the tool', () => {
  const zodTool = (name: string) =>
    defineTool({ name, description: 'd', inputSchema: z.object({}), execute: () => '' });

  it('keeps hand-written tools as they are', () => {
    const registry = new ToolRegistry(BUILTIN_TOOLS);
    expect(registry.get('calculator')).toBe(calculatorTool);
  });

  it('refuses a name given twice, across a list and an AI SDK record too', () => {
    expect(() => new ToolRegistry([zodTool('calculator')], BUILTIN_TOOLS)).toThrow(
      'tool "calculator" is registered twice',
    );
    const record = { lookup: aiTool({ description: 'd', inputSchema: z.object({}), execute: async () => '' }) };
    expect(() => new ToolRegistry([zodTool('lookup')], record)).toThrow('tool "lookup" is registered twice');
  });

  it('refuses a name outside [A-Za-z0-9_-]{1,64}', () => {
    expect(() => new ToolRegistry([zodTool('get weather')])).toThrow(
      'tool name "get weather" must be 1-64 characters of A-Z a-z 0-9 _ -',
    );
    expect(() => new ToolRegistry({ ['x'.repeat(65)]: zodTool('x'.repeat(65)) })).toThrow(/must be 1-64 characters/);
  });

  it('refuses a schema that cannot become JSON Schema', () => {
    const dated = defineTool({
      name: 'dated',
      description: 'd',
      inputSchema: z.object({ when: z.date() }),
      execute: () => '',
    });
    expect(() => new ToolRegistry([dated])).toThrow(
      /^tool "dated": inputSchema cannot be turned into JSON Schema: zod could not convert it \(Date cannot be represented in JSON Schema\); pass a JSON Schema or a schema library that implements Standard JSON Schema$/,
    );
    // zod 3 implements Standard Schema but not Standard JSON Schema.
    const old = { legacy: { description: 'd', inputSchema: z3.object({ a: z3.string() }), execute: async () => '' } };
    expect(() => new ToolRegistry(old)).toThrow(
      'tool "legacy": inputSchema cannot be turned into JSON Schema: zod does not implement Standard JSON Schema',
    );
  });

  it('refuses a schema of something other than an object', () => {
    const scalar = defineTool({ name: 'scalar', description: 'd', inputSchema: z.string(), execute: () => '' });
    expect(() => new ToolRegistry([scalar])).toThrow(/tool "scalar": inputSchema must describe an object/);
  });

  it('refuses an AI SDK tool outside a record, a key that is not the name, and a provider tool', () => {
    const unnamed = aiTool({ description: 'd', inputSchema: z.object({}), execute: async () => '' });
    expect(() => new ToolRegistry([unnamed])).toThrow(/must be given in a record keyed by its name/);
    expect(() => new ToolRegistry({ other: zodTool('mine') })).toThrow('tool "mine" is given under the key "other"');
    const provider = { web: { type: 'provider', id: 'openai.web_search', args: {}, inputSchema: z.object({}) } };
    expect(() => new ToolRegistry(provider)).toThrow(/tool "web" is a provider tool/);
  });

  it('fails createWorker before it connects, naming the tool', async () => {
    const dated = {
      when: aiTool({ description: 'd', inputSchema: z.object({ at: z.date() }), execute: async () => '' }),
    };
    await expect(
      createWorker({
        address: '127.0.0.1:1',
        store: undefined as never,
        model: undefined as never,
        agent: { model: 'fake', tools: ['when'] },
        tools: dated,
      }),
    ).rejects.toThrow(/^tool "when": inputSchema cannot be turned into JSON Schema/);
  });
});
