/**
 * Forced tool choice from the client libraries (issue 51), each used as its docs show against
 * the real gateway: what the provider receives (the offline model's recorded request bodies)
 * when the `openai` client, the AI SDK, LangChain and the Agents SDK force a tool call or name
 * one, and when they ask for one call per reply; the native and LangGraph APIs' own spelling;
 * the refusals of a choice the request cannot honour (400/422 naming the field).
 *
 * The offline model obeys the choice as a provider does: forced, it calls a tool although its
 * script would answer in text (the last tool listed: the caller's, after the worker's).
 */
import { createOpenAI } from '@ai-sdk/openai';
import { Client as LangGraphClient } from '@langchain/langgraph-sdk';
import { HumanMessage } from '@langchain/core/messages';
import { tool as langchainTool } from '@langchain/core/tools';
import { ChatOpenAI } from '@langchain/openai';
import { Agent, run, setDefaultOpenAIClient, setTracingDisabled, tool as agentTool } from '@openai/agents';
import {
  AbstractChat,
  DefaultChatTransport,
  generateText,
  jsonSchema,
  tool as aiTool,
  type ChatInit,
  type ChatState,
  type ChatStatus,
  type UIMessage,
} from 'ai';
import OpenAI from 'openai';
import OpenAIv7 from 'openai-v7';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { startGateway } from '../../src/gateway/index.js';
import type { FakeChatBody } from '../../src/model/fake-server.js';
import { DEFAULT_MODEL, WEATHER_TOOL, startCompatStack, type CompatStack } from './stack.js';

let compat: CompatStack;
let client: OpenAI;

beforeAll(async () => {
  compat = await startCompatStack('tool-choice');
  client = new OpenAI({ baseURL: compat.baseURL, apiKey: compat.apiKey });
  setDefaultOpenAIClient(new OpenAIv7({ baseURL: compat.baseURL, apiKey: compat.apiKey }) as never);
  setTracingDisabled(true);
});
afterAll(async () => {
  await compat?.close();
});
beforeEach(() => {
  compat.resetFake();
});

const weatherTool = { type: 'function' as const, function: { ...WEATHER_TOOL } };
const requests = (): FakeChatBody[] => compat.stack.fake.chatRequests();
/** A question no script answers: the fake would echo it, unless the request forces a tool. */
const unique = (text: string) => `${text} ${Math.random().toString(36).slice(2)}`;

describe('openai client', () => {
  it("chat.completions: tool_choice 'required' reaches the provider, which calls the tool instead of answering in text", async () => {
    const completion = await client.chat.completions.create({
      model: DEFAULT_MODEL,
      messages: [{ role: 'user', content: unique('Oslo') }],
      tools: [weatherTool],
      tool_choice: 'required',
    });
    expect(requests().at(-1)!.tool_choice).toBe('required');
    expect(completion.choices[0]!.finish_reason).toBe('tool_calls');
    expect(
      completion.choices[0]!.message.tool_calls?.map((call) => call.type === 'function' && call.function.name),
    ).toEqual(['get_weather']);
  });

  it('chat.completions: a named tool and parallel_tool_calls false reach the provider: one call of that tool', async () => {
    // The script calls the tool twice; one call per reply was asked for.
    compat.stack.fake.enqueueReplies({
      toolCalls: [
        { name: 'get_weather', arguments: { city: 'Oslo' } },
        { name: 'get_weather', arguments: { city: 'Bergen' } },
      ],
    });
    const completion = await client.chat.completions.create({
      model: DEFAULT_MODEL,
      messages: [{ role: 'user', content: unique('two cities') }],
      tools: [weatherTool],
      tool_choice: { type: 'function', function: { name: 'get_weather' } },
      parallel_tool_calls: false,
    });
    const sent = requests().at(-1)!;
    expect(sent.tool_choice).toEqual({ type: 'function', function: { name: 'get_weather' } });
    expect(sent.parallel_tool_calls).toBe(false);
    const [call, ...others] = completion.choices[0]!.message.tool_calls ?? [];
    expect(others).toEqual([]);
    expect(call?.type === 'function' && JSON.parse(call.function.arguments)).toEqual({ city: 'Oslo' });
  });

  it("chat.completions: tool_choice 'none' sends the tools and 'none'; the model answers in text", async () => {
    compat.stack.fake.enqueueReplies({ toolCalls: [{ name: 'get_weather', arguments: { city: 'Oslo' } }] });
    const text = unique('no tools');
    const completion = await client.chat.completions.create({
      model: DEFAULT_MODEL,
      messages: [{ role: 'user', content: text }],
      tools: [weatherTool],
      tool_choice: 'none',
    });
    const sent = requests().at(-1)!;
    expect(sent.tool_choice).toBe('none');
    expect(sent.tools?.map((t) => t.function.name)).toContain('get_weather');
    expect(completion.choices[0]!.message.content).toBe(`echo: ${text}`);
  });

  it("responses.create: tool_choice 'required' and a named function reach the provider", async () => {
    const tools = [{ type: 'function' as const, strict: false, ...WEATHER_TOOL }];
    const forced = await client.responses.create({
      model: DEFAULT_MODEL,
      input: unique('Oslo'),
      tools,
      tool_choice: 'required',
    });
    expect(requests().at(-1)!.tool_choice).toBe('required');
    expect(forced.output.filter((item) => item.type === 'function_call').map((item) => item.name)).toEqual([
      'get_weather',
    ]);
    const named = await client.responses.create({
      model: DEFAULT_MODEL,
      input: unique('Bergen'),
      tools,
      tool_choice: { type: 'function', name: 'get_weather' },
      parallel_tool_calls: false,
    });
    expect(requests().at(-1)).toMatchObject({
      tool_choice: { type: 'function', function: { name: 'get_weather' } },
      parallel_tool_calls: false,
    });
    expect(named.output.some((item) => item.type === 'function_call' && item.name === 'get_weather')).toBe(true);
  });

  it('refuses a choice the request cannot honour with BadRequestError naming tool_choice, before any model call', async () => {
    const cases: Array<[string, Record<string, unknown>]> = [
      [
        'a named tool the request lacks',
        { tools: [weatherTool], tool_choice: { type: 'function', function: { name: 'nope' } } },
      ],
      ["'required' without tools", { tool_choice: 'required' }],
      ['a hosted tool', { tools: [weatherTool], tool_choice: { type: 'file_search' } }],
    ];
    for (const [label, patch] of cases) {
      const error = await client.chat.completions
        .create({ model: DEFAULT_MODEL, messages: [{ role: 'user', content: unique(label) }], ...patch } as never)
        .catch((e: unknown) => e);
      expect(error, label).toBeInstanceOf(OpenAI.BadRequestError);
      expect((error as InstanceType<typeof OpenAI.BadRequestError>).param, label).toBe('tool_choice');
    }
    const responses = await client.responses
      .create({
        model: DEFAULT_MODEL,
        input: unique('named'),
        tools: [{ type: 'function', strict: false, ...WEATHER_TOOL }],
        tool_choice: { type: 'function', name: 'nope' },
      })
      .catch((e: unknown) => e);
    expect(responses).toBeInstanceOf(OpenAI.BadRequestError);
    expect((responses as InstanceType<typeof OpenAI.BadRequestError>).message).toContain('"nope"');
    expect(requests()).toEqual([]);
  });
});

describe('a model that cannot be forced', () => {
  it('is refused at the boundary with a 400 naming tool_choice (the routing lists it: DeepSeek in thinking mode)', async () => {
    // A gateway whose routing says the model refuses a forced choice (as modelRouting says of DeepSeek's models in thinking mode).
    const gateway = await startGateway({
      client: compat.stack.client,
      host: '127.0.0.1',
      port: 0,
      bodyLimitBytes: 1024 * 1024,
      defaultAgent: { model: DEFAULT_MODEL },
      models: {
        names: { [DEFAULT_MODEL]: DEFAULT_MODEL, thinker: DEFAULT_MODEL },
        unknown: 'default',
        unforcedToolChoice: [DEFAULT_MODEL],
      },
    });
    try {
      const direct = new OpenAI({ baseURL: `${gateway.url}/openai/v1`, apiKey: compat.apiKey });
      for (const tool_choice of ['required', { type: 'function', function: { name: 'get_weather' } }] as const) {
        const error = await direct.chat.completions
          .create({
            model: 'thinker',
            messages: [{ role: 'user', content: unique('think') }],
            tools: [weatherTool],
            tool_choice,
          })
          .catch((e: unknown) => e);
        expect(error).toBeInstanceOf(OpenAI.BadRequestError);
        expect((error as InstanceType<typeof OpenAI.BadRequestError>).param).toBe('tool_choice');
        expect((error as InstanceType<typeof OpenAI.BadRequestError>).message).toContain(`"${DEFAULT_MODEL}"`);
      }
      const responses = await direct.responses
        .create({
          model: 'thinker',
          input: unique('think'),
          tools: [{ type: 'function', strict: false, ...WEATHER_TOOL }],
          tool_choice: 'required',
        })
        .catch((e: unknown) => e);
      expect((responses as InstanceType<typeof OpenAI.BadRequestError>).param).toBe('tool_choice');
      expect(requests()).toEqual([]);
      // 'auto' is taken.
      const auto = await direct.chat.completions.create({
        model: 'thinker',
        messages: [{ role: 'user', content: unique('think') }],
        tools: [weatherTool],
        tool_choice: 'auto',
      });
      expect(auto.choices[0]!.finish_reason).toBe('stop');
      expect(requests().at(-1)!.tool_choice).toBe('auto');
    } finally {
      await gateway.close();
    }
  });
});

describe('ai sdk', () => {
  const weather = aiTool({
    description: WEATHER_TOOL.description,
    inputSchema: jsonSchema<{ city: string }>(WEATHER_TOOL.parameters as never),
  });

  it.each(['chat', 'responses'] as const)(
    "generateText (%s model): toolChoice 'required' and {type: 'tool', toolName} reach the provider",
    async (api) => {
      const openai = createOpenAI({ baseURL: compat.baseURL, apiKey: `${compat.apiKey}-ai-${api}` });
      const model = api === 'chat' ? openai.chat(DEFAULT_MODEL) : openai(DEFAULT_MODEL);
      const forced = await generateText({
        model,
        prompt: unique('Oslo'),
        tools: { get_weather: weather },
        toolChoice: 'required',
      });
      expect(requests().at(-1)!.tool_choice).toBe('required');
      expect(forced.toolCalls.map((call) => call.toolName)).toEqual(['get_weather']);

      const named = await generateText({
        model,
        prompt: unique('Bergen'),
        tools: { get_weather: weather },
        toolChoice: { type: 'tool', toolName: 'get_weather' },
      });
      expect(requests().at(-1)!.tool_choice).toEqual({ type: 'function', function: { name: 'get_weather' } });
      expect(named.toolCalls.map((call) => call.toolName)).toEqual(['get_weather']);
    },
  );
});

/** A chat state as a framework keeps it, in a plain array (as ai-sdk-ui.test.ts drives useChat's core). */
class ArrayState implements ChatState<UIMessage> {
  status: ChatStatus = 'ready';
  error: Error | undefined = undefined;
  constructor(public messages: UIMessage[] = []) {}
  pushMessage = (message: UIMessage) => {
    this.messages = [...this.messages, message];
  };
  popMessage = () => {
    this.messages = this.messages.slice(0, -1);
  };
  replaceMessage = (index: number, message: UIMessage) => {
    this.messages = [...this.messages.slice(0, index), message, ...this.messages.slice(index + 1)];
  };
  snapshot = <T>(thing: T): T => structuredClone(thing);
}

class NodeChat extends AbstractChat<UIMessage> {
  constructor(init: Omit<ChatInit<UIMessage>, 'state'>) {
    super({ ...init, state: new ArrayState() });
  }
  override get messages(): UIMessage[] {
    return this.state.messages;
  }
}

describe('ai sdk useChat (the UI message stream route)', () => {
  it("takes the AI SDK's toolChoice from the request body: the worker's tool is forced at the turn's first step", async () => {
    const chat = new NodeChat({
      id: `tc-ui-${Date.now()}`,
      transport: new DefaultChatTransport({ api: `${compat.gateway.url}/ai-sdk/chat` }),
    });
    await chat.sendMessage(
      { text: '4*4' },
      { body: { toolChoice: { type: 'tool', toolName: 'calculator' }, parallelToolCalls: false } },
    );
    const [forced, after, ...more] = requests();
    expect(more).toEqual([]);
    expect(forced).toMatchObject({
      tool_choice: { type: 'function', function: { name: 'calculator' } },
      parallel_tool_calls: false,
    });
    expect(after!.tool_choice).toBeUndefined();
    expect(after!.messages.at(-1)).toMatchObject({ role: 'tool', content: '16' });
    expect(chat.messages.at(-1)!.parts.some((part) => part.type.startsWith('tool-'))).toBe(true);
  });
});

describe('langchain', () => {
  const getWeather = langchainTool(() => Promise.resolve('sunny'), {
    name: 'get_weather',
    description: WEATHER_TOOL.description,
    schema: z.object({ city: z.string() }),
  });
  const chatModel = () =>
    new ChatOpenAI({ model: DEFAULT_MODEL, apiKey: `${compat.apiKey}-lc`, configuration: { baseURL: compat.baseURL } });

  it("bindTools(tools, {tool_choice: 'required'}) reaches the provider, which calls the tool", async () => {
    const call = await chatModel()
      .bindTools([getWeather], { tool_choice: 'required' })
      .invoke([new HumanMessage(unique('Oslo'))]);
    expect(requests().at(-1)!.tool_choice).toBe('required');
    expect(call.tool_calls?.map((c) => c.name)).toEqual(['get_weather']);
  });

  it("withStructuredOutput with method 'functionCalling' forces its tool by name; the arguments are the output", async () => {
    const structured = chatModel().withStructuredOutput(z.object({ city: z.string(), sunny: z.boolean() }), {
      name: 'weather',
      method: 'functionCalling',
    });
    const text = unique('Narvik');
    expect(await structured.invoke(text)).toEqual({ city: text, sunny: false });
    const sent = requests().at(-1)!;
    expect(sent.tool_choice).toEqual({ type: 'function', function: { name: 'weather' } });
    expect(sent.tools?.map((t) => t.function.name)).toContain('weather');
  });
});

describe('agents sdk', () => {
  it("modelSettings {toolChoice: 'required'} forces the first call; the SDK's reset and the turn's first-step rule let it answer", async () => {
    const getWeather = agentTool({
      name: 'get_weather',
      description: WEATHER_TOOL.description,
      parameters: z.object({ city: z.string() }),
      execute: () => Promise.resolve('sunny'),
    });
    const agent = new Agent({
      name: 'Forecaster',
      instructions: 'Answer with the weather.',
      model: DEFAULT_MODEL,
      tools: [getWeather],
      modelSettings: { toolChoice: 'required' },
    });
    const question = unique('Oslo');
    const result = await run(agent, question);
    const [forced, answered, ...more] = requests();
    expect(more).toEqual([]);
    expect(forced!.tool_choice).toBe('required');
    expect(answered!.tool_choice).toBeUndefined();
    expect(answered!.messages.at(-1)).toMatchObject({ role: 'tool', content: 'sunny' });
    expect(result.finalOutput).toBe(`echo: ${question}`);
  });
});

describe('native and LangGraph APIs', () => {
  it('a native message takes toolChoice and parallelToolCalls; a bad value is a 400 naming it', async () => {
    const base = compat.gateway.url;
    const created = await fetch(`${base}/v1/sessions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({}),
    });
    const { id } = ((await created.json()) as { session: { id: string } }).session;
    const answer = await fetch(`${base}/v1/sessions/${id}/messages?wait=true`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ text: '3*3', toolChoice: { name: 'calculator' }, parallelToolCalls: false }),
    });
    expect(answer.status).toBe(200);
    const [forced, after] = requests();
    expect(forced).toMatchObject({
      tool_choice: { type: 'function', function: { name: 'calculator' } },
      parallel_tool_calls: false,
    });
    expect(after!.tool_choice).toBeUndefined();
    expect(after!.messages.at(-1)).toMatchObject({ role: 'tool', content: '9' });

    const bad = await fetch(`${base}/v1/sessions/${id}/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ text: 'hi', toolChoice: 'always' }),
    });
    expect(bad.status).toBe(400);
    expect(JSON.stringify(await bad.json())).toContain('toolChoice');
  });

  it('a LangGraph run takes tool_choice in config.configurable; a bad value is a 422 naming it', async () => {
    const langgraph = new LangGraphClient({ apiUrl: `${compat.gateway.url}/langgraph` });
    const thread = await langgraph.threads.create();
    await langgraph.runs.wait(thread.thread_id, 'agent', {
      input: { messages: [{ role: 'user', content: '5+5' }] },
      config: { configurable: { tool_choice: 'any', parallel_tool_calls: false } },
    });
    const [forced, after] = requests();
    expect(forced).toMatchObject({ tool_choice: 'required', parallel_tool_calls: false });
    expect(after!.tool_choice).toBeUndefined();
    await expect(
      langgraph.runs.wait(thread.thread_id, 'agent', {
        input: { messages: [{ role: 'user', content: 'again' }] },
        config: { configurable: { tool_choice: 42 } },
      }),
    ).rejects.toThrow(/config\.configurable\.tool_choice/);
  });
});
