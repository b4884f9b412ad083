/**
 * A turn's tool choice (issue 51), without Temporal: its check with the other hints, the step
 * rule (a forced choice at the first step only), the request that carries it, the envelope's
 * refusals (a named tool the turn lacks, `required` without tools, a forced choice DeepSeek's
 * thinking mode refuses), and how the offline model obeys it.
 */
import { describe, expect, it } from 'vitest';
import { modelRouting } from '../../src/compose.js';
import { resolveConfig } from '../../src/config.js';
import { requestHeaderFor } from '../../src/engine/agent.js';
import { DEFAULT_MODEL_CATALOGUE, lookupModel } from '../../src/model/catalogue.js';
import { checkToolOptions, honourToolOptions } from '../../src/model/fake-server/tool-choice.js';
import type { FakeChatBody } from '../../src/model/fake-server.js';
import { buildChatRequest } from '../../src/model/request.js';
import { takesForcedToolChoice } from '../../src/model/tool-choice.js';
import { hintsForStep, turnHintsProblem, type ToolSchema, type TurnHints } from '../../src/session/index.js';

const weather: ToolSchema = {
  name: 'get_weather',
  description: 'The weather in a city.',
  parameters: { type: 'object', properties: { city: { type: 'string' } } },
};

describe('the hints check', () => {
  it('takes auto, none, required and {name}, and parallelToolCalls as a boolean', () => {
    for (const toolChoice of ['auto', 'none', 'required', { name: 'get_weather' }] as const)
      expect(turnHintsProblem({ toolChoice, parallelToolCalls: false })).toBeUndefined();
  });

  it('names what is wrong with a tool choice or parallelToolCalls', () => {
    expect(turnHintsProblem({ toolChoice: 'any' })).toMatch(/hints\.toolChoice must be/);
    expect(turnHintsProblem({ toolChoice: { name: 'a b' } })).toMatch(/hints\.toolChoice\.name/);
    expect(turnHintsProblem({ toolChoice: { name: 'x', type: 'function' } })).toMatch(/unknown field "type"/);
    expect(turnHintsProblem({ parallelToolCalls: 'no' })).toMatch(/hints\.parallelToolCalls/);
  });
});

describe('the step rule', () => {
  it('keeps a forced choice at step 1 only; none, auto and parallelToolCalls hold at every step', () => {
    const forced: TurnHints = { toolChoice: 'required', parallelToolCalls: false, temperature: 0.5 };
    expect(hintsForStep(forced, 1)).toEqual(forced);
    expect(hintsForStep(forced, 2)).toEqual({ parallelToolCalls: false, temperature: 0.5 });
    expect(hintsForStep({ toolChoice: { name: 'get_weather' } }, 3)).toBeUndefined();
    expect(hintsForStep({ toolChoice: 'none' }, 2)).toEqual({ toolChoice: 'none' });
    expect(hintsForStep({ toolChoice: 'auto' }, 2)).toEqual({ toolChoice: 'auto' });
  });
});

describe('the request', () => {
  const model = lookupModel(DEFAULT_MODEL_CATALOGUE, 'gpt-4o');
  const header = { provider: 'openai', model: 'gpt-4o' };

  it('sends tool_choice (a named tool as a function) and parallel_tool_calls with the tools', () => {
    const body = buildChatRequest({
      model,
      messages: [],
      header: { ...header, tools: [weather], hints: { toolChoice: { name: 'get_weather' }, parallelToolCalls: false } },
    });
    expect(body.tool_choice).toEqual({ type: 'function', function: { name: 'get_weather' } });
    expect(body.parallel_tool_calls).toBe(false);
  });

  it('sends neither without tools (a provider refuses them there)', () => {
    const body = buildChatRequest({
      model,
      messages: [],
      header: { ...header, hints: { toolChoice: 'none', parallelToolCalls: true } },
    });
    expect(body).not.toHaveProperty('tool_choice');
    expect(body).not.toHaveProperty('parallel_tool_calls');
  });
});

describe('the envelope', () => {
  const depsFor = (model: string, tools: ToolSchema[], thinking?: boolean) => ({
    model: { provider: 'any', model: (name: string) => lookupModel(DEFAULT_MODEL_CATALOGUE, name) } as never,
    tools: { schemas: () => tools.slice(), get: () => undefined } as never,
    agent: { model, tools: tools.map((t) => t.name), ...(thinking !== undefined ? { thinking } : {}) },
  });

  it('refuses a named tool the turn does not have, naming it, and a forced choice without tools', () => {
    expect(() =>
      requestHeaderFor(depsFor('gpt-4o', [weather]), undefined, undefined, {}, { toolChoice: { name: 'nope' } }),
    ).toThrow(/"nope", which this turn does not have \(its tools: "get_weather"\)/);
    expect(() => requestHeaderFor(depsFor('gpt-4o', []), undefined, undefined, {}, { toolChoice: 'required' })).toThrow(
      /'required' needs tools/,
    );
    // A turn's own tools count.
    const header = requestHeaderFor(
      depsFor('gpt-4o', []),
      undefined,
      [weather],
      {},
      { toolChoice: { name: 'get_weather' } },
    );
    expect(header.hints?.toolChoice).toEqual({ name: 'get_weather' });
  });

  it("refuses a forced choice on a DeepSeek model in thinking mode, and takes it with thinking off or 'auto'", () => {
    expect(() =>
      requestHeaderFor(depsFor('deepseek-reasoner', [weather]), undefined, undefined, {}, { toolChoice: 'required' }),
    ).toThrow(/cannot be forced to call a tool while it thinks/);
    expect(() =>
      requestHeaderFor(depsFor('deepseek-flash', [weather]), undefined, undefined, {}, { toolChoice: 'required' }),
    ).toThrow(/while it thinks/);
    expect(
      requestHeaderFor(
        depsFor('deepseek-flash', [weather], false),
        undefined,
        undefined,
        {},
        { toolChoice: 'required' },
      ).hints,
    ).toEqual({ toolChoice: 'required' });
    expect(
      requestHeaderFor(depsFor('deepseek-reasoner', [weather]), undefined, undefined, {}, { toolChoice: 'auto' }).hints,
    ).toEqual({ toolChoice: 'auto' });
    // The alias forces thinking on whatever the worker says.
    expect(takesForcedToolChoice(lookupModel(DEFAULT_MODEL_CATALOGUE, 'deepseek-reasoner'), false)).toBe(false);
    expect(takesForcedToolChoice(lookupModel(DEFAULT_MODEL_CATALOGUE, 'deepseek-chat'), undefined)).toBe(true);
  });
});

describe("the gateway's routing", () => {
  it("lists the models that refuse a forced choice: DeepSeek's while the workers' thinking is on (its default)", () => {
    const thinking = modelRouting(resolveConfig({ DEEPSEEK_API_KEY: 'sk-test-routing' }));
    expect([...(thinking.unforcedToolChoice ?? [])].sort()).toEqual(['deepseek-flash', 'deepseek-v4-pro']);
    const off = modelRouting(resolveConfig({ DEEPSEEK_API_KEY: 'sk-test-routing', SESSIONLOG_THINKING: 'disabled' }));
    expect(off.unforcedToolChoice).toBeUndefined();
    expect(modelRouting(resolveConfig({})).unforcedToolChoice).toBeUndefined();
  });
});

describe('the offline model', () => {
  const body = (extra: Partial<FakeChatBody>): FakeChatBody => ({
    model: 'fake',
    messages: [{ role: 'user', content: 'Oslo' }],
    tools: [
      { type: 'function', function: { name: 'calculator', parameters: { type: 'object' } } },
      {
        type: 'function',
        function: { name: 'get_weather', parameters: weather.parameters as Record<string, unknown> },
      },
    ],
    ...extra,
  });
  let ids = 0;
  const ctx = { nextCallId: () => `call_${++ids}`, textReply: () => 'echo: Oslo', lastUserText: 'Oslo' };
  const text = { reasoning: '', text: 'plain', toolCalls: [], finishReason: 'stop' };
  const twoCalls = {
    reasoning: '',
    text: '',
    toolCalls: [
      { id: 'a', name: 'calculator', arguments: '{}' },
      { id: 'b', name: 'get_weather', arguments: '{"city":"Oslo"}' },
    ],
    finishReason: 'tool_calls',
  };

  it("calls a tool when 'required' (the last listed, arguments of its shape) and the named one when named", () => {
    expect(honourToolOptions(text, body({ tool_choice: 'required' }), ctx)).toMatchObject({
      text: '',
      toolCalls: [{ name: 'get_weather', arguments: '{"city":"Oslo"}' }],
      finishReason: 'tool_calls',
    });
    const named = body({ tool_choice: { type: 'function', function: { name: 'calculator' } } });
    expect(honourToolOptions(text, named, ctx).toolCalls.map((c) => c.name)).toEqual(['calculator']);
    expect(honourToolOptions(twoCalls, named, ctx).toolCalls).toEqual([twoCalls.toolCalls[0]]);
  });

  it("calls none with 'none', and one per reply with parallel_tool_calls false", () => {
    expect(honourToolOptions(twoCalls, body({ tool_choice: 'none' }), ctx)).toMatchObject({
      text: 'echo: Oslo',
      toolCalls: [],
      finishReason: 'stop',
    });
    expect(honourToolOptions(twoCalls, body({ parallel_tool_calls: false }), ctx).toolCalls).toEqual([
      twoCalls.toolCalls[0],
    ]);
    expect(honourToolOptions(twoCalls, body({}), ctx)).toBe(twoCalls);
  });

  it('refuses a tool choice without tools or naming a tool it was not given, as OpenAI does', () => {
    expect(() => checkToolOptions(body({ tools: undefined, tool_choice: 'auto' }))).toThrow(/only allowed when tools/);
    expect(() => checkToolOptions(body({ tool_choice: { type: 'function', function: { name: 'nope' } } }))).toThrow(
      /no function named "nope"/,
    );
  });
});
