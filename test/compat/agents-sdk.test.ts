/**
 * The OpenAI Agents SDK (`@openai/agents`) against /openai/v1, configured as its docs show for
 * another endpoint: `setDefaultOpenAIClient(new OpenAI({baseURL, apiKey}))` (and tracing off,
 * which the docs ask of non-OpenAI endpoints; vitest's NODE_ENV=test turns it off as well).
 *
 * What it sends (recorded through the proxy; the openai 7.x SDK's headers with `user-agent:
 * Agents/JavaScript <version>`):
 *
 * - `POST /responses` `{model, instructions, input: [...], include: [], tools: [], stream:
 *   false|true}` every time, plus `conversation` or `previous_response_id` when set. With no
 *   model on the Agent: `model: 'gpt-5.6-luna', reasoning: {effort: 'none'}, text: {verbosity:
 *   'low'}`. A string input becomes `[{role: 'user', content: '…'}]`; `user('…')` items are
 *   `{role: 'user', content: [{type: 'input_text', text}]}`. Tools: `{type: 'function', name,
 *   description, parameters (draft-07 `$schema`), strict: true}`.
 * - Stateless runs (no conversationId/previousResponseId) resend the whole history at every
 *   model call, also inside a run's tool loop: earlier outputs as they came back (`{type:
 *   'message', id: 'msg_…', role: 'assistant', content: [{type: 'output_text', text,
 *   annotations: [], logprobs: []}], status: 'completed'}`, `{id: 'fc_…', type: 'function_call',
 *   name, call_id, arguments, status: 'completed'}`) and `{type: 'function_call_output',
 *   call_id, output: 'sunny', status: 'completed'}`.
 * - `run(agent, input, {conversationId})`: `conversation: id` and only the new items;
 *   `{previousResponseId}`: `previous_response_id` and only the new items. The Agent's
 *   `instructions` are sent every time, also into a conversation created without them.
 * - `OpenAIConversationsSession` is client-side memory kept in a conversation: `POST
 *   /conversations {items: []}` once, `GET /conversations/{id}/items?order=asc` before each run,
 *   then a stateless `POST /responses` with the whole history and no `conversation` field, then
 *   `POST /conversations/{id}/items {items: [{role: 'user', content: '…'}, {type: 'message',
 *   role: 'assistant', content: [{type: 'output_text', text, annotations: [], logprobs: []}],
 *   status: 'completed'}]}` (no item ids).
 * - `OpenAIChatCompletionsModel`: `POST /chat/completions` `{model, messages: [{content, role:
 *   'system'}, …], tools?: [{type: 'function', function: {name, description, parameters,
 *   strict: true}}], stream, stream_options: {include_usage: true} when streaming}`; resent
 *   history: `{role: 'assistant', content: null, tool_calls: [...]}`, `{role: 'tool',
 *   tool_call_id, content}`, and earlier replies and new user input as content-part arrays:
 *   `{role: 'assistant', content: [{type: 'text', text, role: 'assistant'}]}`, `{role: 'user',
 *   content: [{type: 'text', text}]}`.
 *
 * The Agents SDK hides headers: the session that answered is read back from the gateway
 * (`responses.retrieve(result.lastResponseId)`), a fork's parent from the session header.
 */
import {
  Agent,
  OpenAIChatCompletionsModel,
  OpenAIConversationsSession,
  run,
  setDefaultOpenAIClient,
  setTracingDisabled,
  tool,
  user,
  type AgentInputItem,
} from '@openai/agents';
import OpenAI from 'openai-v7';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  DEFAULT_MODEL,
  DEFAULT_SYSTEM,
  WEATHER_QUESTION,
  historyLines,
  lastModelPrompt,
  newSessions,
  scriptLongReply,
  scriptWeatherTool,
  sessionIds,
  startCompatStack,
  turnCount,
  waitForTurnEnd,
  weatherAnswer,
  type CompatStack,
} from './stack.js';

let compat: CompatStack;
let client: OpenAI;

let chatClient: OpenAI;

beforeAll(async () => {
  compat = await startCompatStack('agents-sdk');
  client = new OpenAI({ baseURL: compat.baseURL, apiKey: compat.apiKey });
  // The chat model as another application (its own key): its scenarios resend the transcripts
  // the Responses scenarios sent, and one caller's identical transcript is one conversation.
  chatClient = new OpenAI({ baseURL: compat.baseURL, apiKey: `${compat.apiKey}-chat` });
  setDefaultOpenAIClient(client as never);
  setTracingDisabled(true);
});
afterAll(async () => {
  await compat?.close();
});
beforeEach(() => {
  compat.resetFake();
});

const INSTRUCTIONS = 'You are a helpful assistant.';
const assistantAgent = (model?: string) =>
  new Agent({ name: 'Assistant', instructions: INSTRUCTIONS, ...(model ? { model } : {}) });

const getWeather = tool({
  name: 'get_weather',
  description: 'The weather in a city.',
  parameters: z.object({ city: z.string() }),
  execute: ({ city }) => Promise.resolve(city === 'Oslo' ? 'sunny' : 'unknown'),
});

/** The session (conversation) that answered a run's last model call, read back from the gateway. */
async function sessionOfRun(result: { lastResponseId: string | undefined }): Promise<string> {
  expect(result.lastResponseId).toBeTruthy();
  const response = await client.responses.retrieve(result.lastResponseId!);
  return response.conversation!.id;
}

describe('agents-sdk: responses model', () => {
  it('answers a plain run with model fake', async () => {
    const result = await run(assistantAgent(DEFAULT_MODEL), 'Hello there');
    expect(result.finalOutput).toBe('echo: Hello there');
    const session = await sessionOfRun(result);
    expect(await historyLines(compat, session)).toEqual(['user: Hello there', 'assistant: echo: Hello there']);
  });

  it('answers a run with the SDK default model (gpt-5.6-luna and its reasoning/verbosity settings) by the default model', async () => {
    const result = await run(assistantAgent(), 'Which model?');
    expect(compat.callsTo('/responses').at(-1)!.body).toMatchObject({ model: 'gpt-5.6-luna' });
    expect(result.finalOutput).toBe('echo: Which model?');
    expect((await client.responses.retrieve(result.lastResponseId!)).model).toBe(DEFAULT_MODEL);
    // What the fake (an OpenAI-compatible chat provider) is not sent is named in the turn's request header.
    const events = await compat.stack.client.events(await sessionOfRun(result));
    const header = events.findLast((e) => e.type === 'request/header')!.data as {
      header: { hints?: { ignored?: string[] } };
    };
    expect(header.header.hints?.ignored).toEqual(expect.arrayContaining(['reasoning', 'text.verbosity']));
  });

  it('returns a structured final output for an agent with an outputType (a zod schema)', async () => {
    const agent = new Agent({
      name: 'Forecaster',
      instructions: INSTRUCTIONS,
      model: DEFAULT_MODEL,
      outputType: z.object({ city: z.string(), sunny: z.boolean() }),
    });
    const result = await run(agent, 'Lofoten');
    expect(result.finalOutput).toEqual({ city: 'Lofoten', sunny: false });
    expect(compat.stack.fake.chatRequests().at(-1)!.response_format).toMatchObject({ type: 'json_schema' });
  });

  it("answers an app's own model name (gpt-4o-mini) with the default model", async () => {
    const result = await run(assistantAgent('gpt-4o-mini'), 'Which model?');
    expect(result.finalOutput).toBe('echo: Which model?');
    expect((await client.responses.retrieve(result.lastResponseId!)).model).toBe(DEFAULT_MODEL);
  });

  it('streams a run: the text stream joins to the logged reply', async () => {
    const result = await run(assistantAgent(DEFAULT_MODEL), 'stream this reply please', { stream: true });
    let text = '';
    for await (const delta of result.toTextStream()) text += delta;
    await result.completed;
    expect(text).toBe('echo: stream this reply please');
    expect(result.finalOutput).toBe(text);
    expect((await historyLines(compat, await sessionOfRun(result))).at(-1)).toBe(`assistant: ${text}`);
  });

  it('takes the agent instructions as the system prompt', async () => {
    const agent = new Agent({ name: 'French', instructions: 'Answer in French.', model: DEFAULT_MODEL });
    const result = await run(agent, 'Good morning');
    expect(result.finalOutput).toBe('echo: Good morning');
    expect(lastModelPrompt(compat)).toEqual(['system: Answer in French.', 'user: Good morning']);
  });

  it('continues from result.history resent as input: same session, one more turn', async () => {
    const agent = assistantAgent(DEFAULT_MODEL);
    const first = await run(agent, 'My name is Ada.');
    const second = await run(agent, [...first.history, user('What is my name?')]);
    expect(second.finalOutput).toBe('echo: What is my name?');
    expect(lastModelPrompt(compat)).toEqual([
      `system: ${INSTRUCTIONS}`,
      'user: My name is Ada.',
      'assistant: echo: My name is Ada.',
      'user: What is my name?',
    ]);
    const session = await sessionOfRun(first);
    expect(await sessionOfRun(second)).toBe(session);
    expect(await turnCount(compat, session)).toBe(2);
  });

  it('continues a conversation with run(..., {conversationId})', async () => {
    const conversation = await client.conversations.create({});
    const agent = assistantAgent(DEFAULT_MODEL);
    await run(agent, 'My name is Ada.', { conversationId: conversation.id });
    const second = await run(agent, 'What is my name?', { conversationId: conversation.id });
    expect(second.finalOutput).toBe('echo: What is my name?');
    expect(await turnCount(compat, conversation.id)).toBe(2);
    expect(lastModelPrompt(compat).slice(1)).toEqual([
      'user: My name is Ada.',
      'assistant: echo: My name is Ada.',
      'user: What is my name?',
    ]);
  });

  it('continues with run(..., {previousResponseId: result.lastResponseId})', async () => {
    const agent = assistantAgent(DEFAULT_MODEL);
    const first = await run(agent, 'My name is Ada.');
    const second = await run(agent, 'What is my name?', { previousResponseId: first.lastResponseId });
    expect(second.finalOutput).toBe('echo: What is my name?');
    expect(await sessionOfRun(second)).toBe(await sessionOfRun(first));
    expect(lastModelPrompt(compat).slice(1)).toEqual([
      'user: My name is Ada.',
      'assistant: echo: My name is Ada.',
      'user: What is my name?',
    ]);
  });

  it('keeps memory in an OpenAIConversationsSession: the second run is sent the first exchange, the conversation holds all four items', async () => {
    const agent = assistantAgent(DEFAULT_MODEL);
    const memory = new OpenAIConversationsSession();
    await run(agent, 'My name is Ada.', { session: memory });
    const second = await run(agent, 'What is my name?', { session: memory });
    expect(second.finalOutput).toBe('echo: What is my name?');
    expect(lastModelPrompt(compat).slice(1)).toEqual([
      'user: My name is Ada.',
      'assistant: echo: My name is Ada.',
      'user: What is my name?',
    ]);
    const conversation = (await memory.getSessionId())!;
    const items = await memory.getItems();
    expect(items.map((item) => ('role' in item ? item.role : item.type))).toEqual([
      'user',
      'assistant',
      'user',
      'assistant',
    ]);
    expect(await historyLines(compat, conversation)).toEqual([
      'user: My name is Ada.',
      'assistant: echo: My name is Ada.',
      'user: What is my name?',
      'assistant: echo: What is my name?',
    ]);
  });

  it('runs a function-tool loop: the agent runs the tool and the model answers with its result, in one turn', async () => {
    scriptWeatherTool(compat);
    const agent = new Agent({ name: 'Weather', instructions: INSTRUCTIONS, model: DEFAULT_MODEL, tools: [getWeather] });
    const result = await run(agent, WEATHER_QUESTION);
    expect(result.finalOutput).toBe(weatherAnswer('sunny'));
    const session = await sessionOfRun(result);
    expect(await turnCount(compat, session)).toBe(1);
    expect(await historyLines(compat, session)).toEqual([
      `user: ${WEATHER_QUESTION}`,
      'assistant: call get_weather {"city":"Oslo"}',
      'tool: sunny',
      `assistant: ${weatherAnswer('sunny')}`,
    ]);
  });

  it('keeps answering after a streamed run is aborted: the conversation takes the next run', async () => {
    const story = scriptLongReply(compat, 'Tell me a long story.');
    const conversation = await client.conversations.create({});
    // The conversation's own instructions, so this scenario does not hang on how instructions that differ are taken.
    const agent = new Agent({ name: 'Assistant', instructions: DEFAULT_SYSTEM, model: DEFAULT_MODEL });
    const controller = new AbortController();
    const streamed = await run(agent, 'Tell me a long story.', {
      stream: true,
      signal: controller.signal,
      conversationId: conversation.id,
    });
    let received = '';
    let deltas = 0;
    const failure = await (async () => {
      for await (const delta of streamed.toTextStream()) {
        received += delta;
        if (++deltas === 3) controller.abort();
      }
      await streamed.completed;
    })().then(
      () => undefined,
      (error: unknown) => error,
    );
    // The run ends (quietly or with the abort) once the text had started.
    expect(deltas, String(failure)).toBeGreaterThanOrEqual(3);
    expect(received.length).toBeLessThan(story.length);
    await waitForTurnEnd(compat, conversation.id);

    const next = await run(agent, 'Are you still there?', { conversationId: conversation.id });
    expect(next.finalOutput).toBe('echo: Are you still there?');
    expect(await turnCount(compat, conversation.id)).toBe(2);
  });

  it('forks on an edited earlier message in a resent history: a new session answers, the original keeps its history', async () => {
    const agent = assistantAgent(DEFAULT_MODEL);
    const first = await run(agent, 'My name is Ada.');
    const original = await sessionOfRun(first);
    await run(agent, [...first.history, user('I live in Oslo.')]);
    const before = await historyLines(compat, original);
    expect(before).toHaveLength(4);

    const edited = await run(agent, [...first.history, user('I live in Bergen.')]);
    expect(edited.finalOutput).toBe('echo: I live in Bergen.');
    const forked = await sessionOfRun(edited);
    expect(forked).not.toBe(original);
    expect((await compat.stack.client.header(forked)).parentSession).toBe(original);
    expect((await historyLines(compat, forked)).slice(-2)).toEqual([
      'user: I live in Bergen.',
      'assistant: echo: I live in Bergen.',
    ]);
    expect(await historyLines(compat, original)).toEqual(before);
  });
});

describe('agents-sdk: chat completions model', () => {
  const chatAgent = (tools: Array<typeof getWeather> = []) =>
    new Agent({
      name: 'Assistant',
      instructions: INSTRUCTIONS,
      model: new OpenAIChatCompletionsModel(chatClient as never, 'gpt-4o-mini'),
      tools,
    });

  it('answers a run through /chat/completions', async () => {
    const before = await sessionIds(compat);
    const result = await run(chatAgent(), 'Hello there');
    expect(result.finalOutput).toBe('echo: Hello there');
    const [session, ...others] = await newSessions(compat, before);
    expect(others).toEqual([]);
    expect(await historyLines(compat, session!)).toEqual(['user: Hello there', 'assistant: echo: Hello there']);
  });

  it('streams a run through /chat/completions', async () => {
    const result = await run(chatAgent(), 'stream this reply please', { stream: true });
    let text = '';
    for await (const delta of result.toTextStream()) text += delta;
    await result.completed;
    expect(text).toBe('echo: stream this reply please');
  });

  it('continues from result.history resent as input: same session, one more turn', async () => {
    const before = await sessionIds(compat);
    const agent = chatAgent();
    const first = await run(agent, 'My name is Ada.');
    const history: AgentInputItem[] = [...first.history, user('What is my name?')];
    const second = await run(agent, history);
    expect(second.finalOutput).toBe('echo: What is my name?');
    const [session, ...others] = await newSessions(compat, before);
    expect(others).toEqual([]);
    expect(await turnCount(compat, session!)).toBe(2);
  });

  it('runs a function-tool loop through /chat/completions in one turn', async () => {
    scriptWeatherTool(compat);
    const before = await sessionIds(compat);
    const result = await run(chatAgent([getWeather]), WEATHER_QUESTION);
    expect(result.finalOutput).toBe(weatherAnswer('sunny'));
    const [session, ...others] = await newSessions(compat, before);
    expect(others).toEqual([]);
    expect(await turnCount(compat, session!)).toBe(1);
  });
});
