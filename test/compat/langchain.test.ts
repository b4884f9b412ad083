/**
 * LangChain's `ChatOpenAI` (`@langchain/openai`) against /openai/v1, constructed as its docs
 * show for another endpoint: `new ChatOpenAI({model, apiKey, configuration: {baseURL}})`.
 *
 * What it sends (recorded through the proxy; its own openai 7.x client's headers with
 * `user-agent: langchainjs-openai/1.0.0 (…)`):
 *
 * - Chat Completions (the default): `POST /chat/completions` `{model, stream: false, messages}`
 *   (`stream: true, stream_options: {include_usage: true}` from `.stream()`); with `bindTools`:
 *   `tools: [{type: 'function', function: {name, description, parameters (2020-12
 *   `$schema`)}}]`. Messages `{role: 'system'|'user'|'assistant', content: '…'}`; an AIMessage
 *   with tool calls `{role: 'assistant', content: '', tool_calls: [{id, type: 'function',
 *   function: {name, arguments}}]}`; a ToolMessage `{role: 'tool', content, name,
 *   tool_call_id}`. Undefined settings (temperature, n, …) drop out of the JSON.
 * - Responses (`useResponsesApi: true`): `POST /responses` `{model, input, stream, text: {},
 *   tools?: [{type: 'function', name, parameters, description, strict: null}],
 *   previous_response_id?}`. Input items: `{type: 'message', role: 'user'|'system', content:
 *   '…'}`; a resent AIMessage from a response is its output item again (`{id: 'msg_…', type:
 *   'message', role: 'assistant', status: 'completed', content: [{type: 'output_text', text,
 *   annotations: [], logprobs: []}]}` / `{id: 'fc_…', type: 'function_call', status, call_id,
 *   name, arguments}`), a hand-made AIMessage `{type: 'message', role: 'assistant', content:
 *   '…'}`, a ToolMessage `{type: 'function_call_output', call_id, output}`.
 *   `previous_response_id` comes from `invoke(input, {previous_response_id:
 *   aiMessage.response_metadata.id})`.
 *
 * LangChain hides response headers and has no per-call header option in its docs, so sessions
 * are found on the server: the sessions a scenario created, and a fork's parent session. After
 * an aborted stream the transcript is resent (nothing names the session).
 */
import { AIMessage, HumanMessage, SystemMessage, type BaseMessage } from '@langchain/core/messages';
import { tool } from '@langchain/core/tools';
import { ChatOpenAI } from '@langchain/openai';
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

beforeAll(async () => {
  compat = await startCompatStack('langchain');
});
afterAll(async () => {
  await compat?.close();
});
beforeEach(() => {
  compat.resetFake();
});

type Api = 'chat completions' | 'responses';
const APIS: Api[] = ['chat completions', 'responses'];

function chatModel(api: Api, model = DEFAULT_MODEL): ChatOpenAI {
  return new ChatOpenAI({
    model,
    apiKey: compat.apiKey,
    configuration: { baseURL: compat.baseURL },
    ...(api === 'responses' ? { useResponsesApi: true } : {}),
  });
}

const getWeather = tool(({ city }: { city: string }) => Promise.resolve(city === 'Oslo' ? 'sunny' : 'unknown'), {
  name: 'get_weather',
  description: 'The weather in a city.',
  schema: z.object({ city: z.string() }),
});

/** The one session a scenario created since `before`. */
async function onlyNewSession(before: ReadonlySet<string>): Promise<string> {
  const created = await newSessions(compat, before);
  expect(created).toHaveLength(1);
  return created[0]!;
}

describe.each(APIS)('langchain ChatOpenAI (%s)', (api) => {
  it('answers invoke from the fake model and reports the model that ran', async () => {
    const before = await sessionIds(compat);
    const reply = await chatModel(api).invoke('Hello there');
    expect(reply.text).toBe('echo: Hello there');
    expect(reply.response_metadata.model_name ?? reply.response_metadata.model).toBe(DEFAULT_MODEL);
    const session = await onlyNewSession(before);
    expect(await historyLines(compat, session)).toEqual(['user: Hello there', 'assistant: echo: Hello there']);
  });

  it('streams: the chunks join to the logged reply', async () => {
    const before = await sessionIds(compat);
    let text = '';
    for await (const chunk of await chatModel(api).stream('stream this reply please')) text += chunk.text;
    expect(text).toBe('echo: stream this reply please');
    expect((await historyLines(compat, await onlyNewSession(before))).at(-1)).toBe(`assistant: ${text}`);
  });

  it('continues a session from the resent messages: same session, one more turn', async () => {
    const before = await sessionIds(compat);
    const model = chatModel(api);
    const messages: BaseMessage[] = [new HumanMessage('My name is Ada.')];
    messages.push(await model.invoke(messages), new HumanMessage('What is my name?'));
    const second = await model.invoke(messages);
    expect(second.text).toBe('echo: What is my name?');
    expect(lastModelPrompt(compat)).toEqual([
      `system: ${DEFAULT_SYSTEM}`,
      'user: My name is Ada.',
      'assistant: echo: My name is Ada.',
      'user: What is my name?',
    ]);
    expect(await turnCount(compat, await onlyNewSession(before))).toBe(2);
  });

  it('takes a SystemMessage as the instructions', async () => {
    const reply = await chatModel(api).invoke([
      new SystemMessage('Answer in French.'),
      new HumanMessage('Good morning'),
    ]);
    expect(reply.text).toBe('echo: Good morning');
    expect(lastModelPrompt(compat)).toEqual(['system: Answer in French.', 'user: Good morning']);
  });

  it('runs a function-tool loop with bindTools: tool_calls, ToolMessage, answer, in one turn', async () => {
    scriptWeatherTool(compat);
    const before = await sessionIds(compat);
    const model = chatModel(api).bindTools([getWeather]);
    const messages: BaseMessage[] = [new HumanMessage(WEATHER_QUESTION)];
    const call = await model.invoke(messages);
    expect(call.tool_calls).toEqual([expect.objectContaining({ name: 'get_weather', args: { city: 'Oslo' } })]);
    messages.push(call);
    for (const toolCall of call.tool_calls ?? []) messages.push(await getWeather.invoke(toolCall));
    const answer = await model.invoke(messages);
    expect(answer.text).toBe(weatherAnswer('sunny'));
    const session = await onlyNewSession(before);
    expect(await turnCount(compat, session)).toBe(1);
    expect(await historyLines(compat, session)).toEqual([
      `user: ${WEATHER_QUESTION}`,
      'assistant: call get_weather {"city":"Oslo"}',
      'tool: sunny',
      `assistant: ${weatherAnswer('sunny')}`,
    ]);
  });

  it('keeps answering after a stream is aborted: the resent transcript is answered by that session or a fork of it', async () => {
    const story = scriptLongReply(compat, 'Tell me a long story.');
    const before = await sessionIds(compat);
    const model = chatModel(api);
    const controller = new AbortController();
    let received = '';
    let chunks = 0;
    const failure = await (async () => {
      for await (const chunk of await model.stream('Tell me a long story.', { signal: controller.signal })) {
        received += chunk.text;
        if (++chunks === 3) controller.abort();
      }
    })().then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(chunks, String(failure)).toBeGreaterThanOrEqual(3);
    expect(received.length).toBeLessThan(story.length);
    const session = await onlyNewSession(before);
    await waitForTurnEnd(compat, session);

    const afterAbort = await sessionIds(compat);
    const next = await model.invoke([
      new HumanMessage('Tell me a long story.'),
      new AIMessage(received),
      new HumanMessage('Are you still there?'),
    ]);
    expect(next.text).toBe('echo: Are you still there?');
    const created = await newSessions(compat, afterAbort);
    const answering = created[0] ?? session;
    expect(created.length).toBeLessThanOrEqual(1);
    if (created.length === 1) expect((await compat.stack.client.header(answering)).parentSession).toBe(session);
    expect((await historyLines(compat, answering)).slice(-2)).toEqual([
      'user: Are you still there?',
      'assistant: echo: Are you still there?',
    ]);
  });

  it('returns structured output with withStructuredOutput (a zod schema, as JSON Schema)', async () => {
    const structured = chatModel(api).withStructuredOutput(z.object({ city: z.string(), sunny: z.boolean() }), {
      name: 'weather',
      method: 'jsonSchema',
    });
    expect(await structured.invoke('Narvik')).toEqual({ city: 'Narvik', sunny: false });
    expect(compat.stack.fake.chatRequests().at(-1)!.response_format).toMatchObject({
      type: 'json_schema',
      json_schema: { name: 'weather' },
    });
  });

  it("answers an app's own model name (gpt-4o-mini) and reports the model that ran", async () => {
    const reply = await chatModel(api, 'gpt-4o-mini').invoke('Which model?');
    expect(reply.response_metadata.model_name ?? reply.response_metadata.model).toBe(DEFAULT_MODEL);
    expect(reply.text).toBe('echo: Which model?');
  });

  it('forks on an edited earlier message: a new session answers, the original keeps its history', async () => {
    const model = chatModel(api);
    const before = await sessionIds(compat);
    const u1 = new HumanMessage('My name is Ada.');
    const a1 = await model.invoke([u1]);
    await model.invoke([u1, a1, new HumanMessage('I live in Oslo.')]);
    const original = await onlyNewSession(before);
    const history = await historyLines(compat, original);
    expect(history).toHaveLength(4);

    const beforeEdit = await sessionIds(compat);
    const edited = await model.invoke([u1, a1, new HumanMessage('I live in Bergen.')]);
    expect(edited.text).toBe('echo: I live in Bergen.');
    const forked = await onlyNewSession(beforeEdit);
    expect((await compat.stack.client.header(forked)).parentSession).toBe(original);
    expect(await historyLines(compat, forked)).toEqual([
      'user: My name is Ada.',
      'assistant: echo: My name is Ada.',
      'user: I live in Bergen.',
      'assistant: echo: I live in Bergen.',
    ]);
    expect(await historyLines(compat, original)).toEqual(history);
  });
});

describe('langchain ChatOpenAI (responses), server-side state', () => {
  it('continues with previous_response_id from response_metadata.id', async () => {
    const model = chatModel('responses');
    const first = await model.invoke('My name is Ada.');
    expect(String(first.response_metadata.id)).toMatch(/^resp_/);
    const second = await model.invoke('What is my name?', {
      previous_response_id: first.response_metadata.id as string,
    });
    expect(second.text).toBe('echo: What is my name?');
    expect(lastModelPrompt(compat).slice(1)).toEqual([
      'user: My name is Ada.',
      'assistant: echo: My name is Ada.',
      'user: What is my name?',
    ]);
  });
});
