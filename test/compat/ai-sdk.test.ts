/**
 * The Vercel AI SDK (`ai` 7.x with `@ai-sdk/openai` 4.x) against /openai/v1, with the provider
 * made by `createOpenAI({baseURL, apiKey})` and used as the AI SDK docs show. Both of its OpenAI
 * model APIs run every scenario they can express. What it sends (recorded through the proxy;
 * headers `authorization: Bearer <key>`, `content-type: application/json`, `accept: *\/*`,
 * `user-agent: ai/<version> ai-sdk-provider-utils/<version> node.js/<version>`):
 *
 * - `openai(id)` = `openai.responses(id)` (the default since AI SDK 5): `POST /responses`
 *   `{model, input: [...], stream?: true, tools?, tool_choice?: 'auto', previous_response_id?,
 *   conversation?}`; never `instructions`: the system prompt is an input item `{role: 'system',
 *   content: '…'}` (`developer` for models it knows as reasoning models). User items: `{role:
 *   'user', content: [{type: 'input_text', text}]}`. Resent history: `store` defaults to true,
 *   so an earlier assistant reply (which carries its output item id) is resent as `{type:
 *   'item_reference', id: 'msg_…'}`, not as text; a plain assistant message (no id, e.g. after
 *   an abort) as `{role: 'assistant', content: '…'}`; a client-run function call in full as
 *   `{type: 'function_call', call_id, name, arguments}` (no id, no status), its result as
 *   `{type: 'function_call_output', call_id, output: 'sunny'}` (string results as they are,
 *   others as JSON). Tools: `{type: 'function', name, description, parameters (JSON schema with
 *   `$schema` draft-07), strict: false}`. With `conversation` it leaves out assistant items
 *   that carry an id but still sends every user message it is given.
 * - `openai.chat(id)`: `POST /chat/completions` `{model, messages, tools?: [{type: 'function',
 *   function: {name, description, parameters}}], tool_choice?: 'auto', stream?, stream_options:
 *   {include_usage: true} when streaming}`; messages `{role: 'system'|'user'|'assistant',
 *   content: '…'}`, an assistant tool call `{role: 'assistant', content: null, tool_calls: [{id,
 *   type: 'function', function: {name, arguments}}]}`, results `{role: 'tool', tool_call_id,
 *   content}`.
 *
 * Response headers are `finalStep.response.headers` (not for an aborted stream); a call names
 * its session with the call option `headers: {'x-session-id': …}`. A failed Responses answer
 * must carry `error: {message, type, code}` or the AI SDK cannot parse it. The AI SDK has no
 * Conversations API: the conversation scenario creates it over HTTP, as the provider docs say.
 */
import { createOpenAI } from '@ai-sdk/openai';
import {
  Output,
  generateText,
  isStepCount,
  streamText,
  tool,
  type LanguageModel,
  type ModelMessage,
  type ProviderMetadata,
} from 'ai';
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
let openai: ReturnType<typeof createOpenAI>;
let openaiChat: ReturnType<typeof createOpenAI>;

beforeAll(async () => {
  compat = await startCompatStack('ai-sdk');
  openai = createOpenAI({ baseURL: compat.baseURL, apiKey: compat.apiKey });
  // The two APIs as two applications (two keys): the scenarios send the same transcripts, and one
  // caller's identical transcript is the same conversation whichever API carries it.
  openaiChat = createOpenAI({ baseURL: compat.baseURL, apiKey: `${compat.apiKey}-chat` });
});
afterAll(async () => {
  await compat?.close();
});
beforeEach(() => {
  compat.resetFake();
});

type Api = 'responses' | 'chat';
const APIS: Api[] = ['responses', 'chat'];
const modelFor = (api: Api, id: string): LanguageModel => (api === 'chat' ? openaiChat.chat(id) : openai(id));
/**
 * The session that answered a step: its `x-session-id` header, else (a Responses answer
 * without the header) the conversation of the response it names, read back from the gateway.
 */
async function sessionOf(step: {
  response: { headers?: Record<string, string> };
  providerMetadata?: ProviderMetadata | undefined;
}): Promise<string | undefined> {
  const header = step.response.headers?.['x-session-id'];
  if (header) return header;
  const responseId = step.providerMetadata?.openai?.responseId;
  if (typeof responseId !== 'string') return undefined;
  const answer = await fetch(`${compat.baseURL}/responses/${responseId}`, {
    headers: { authorization: `Bearer ${compat.apiKey}` },
  });
  return ((await answer.json()) as { conversation?: { id?: string } }).conversation?.id;
}
const forkedFromOf = (step: { response: { headers?: Record<string, string> } }) =>
  step.response.headers?.['x-sessionlog-forked-from'];

describe.each(APIS)('ai-sdk %s model', (api) => {
  it('answers generateText from the fake model and reports the model that ran', async () => {
    const result = await generateText({ model: modelFor(api, DEFAULT_MODEL), prompt: 'Hello there' });
    expect(result.text).toBe('echo: Hello there');
    expect(result.finalStep.response.modelId).toBe(DEFAULT_MODEL);
    const session = await sessionOf(result.finalStep);
    expect(session).toBeTruthy();
    expect(await historyLines(compat, session!)).toEqual(['user: Hello there', 'assistant: echo: Hello there']);
  });

  it('streams streamText: the text stream joins to the logged reply', async () => {
    const before = await sessionIds(compat);
    const errors: unknown[] = [];
    const result = streamText({
      model: modelFor(api, DEFAULT_MODEL),
      prompt: 'stream this reply please',
      onError: ({ error }) => {
        errors.push(error);
      },
    });
    let text = '';
    for await (const delta of result.textStream) text += delta;
    expect(errors).toEqual([]);
    expect(text).toBe('echo: stream this reply please');
    const [session, ...others] = await newSessions(compat, before);
    expect(others).toEqual([]);
    expect(await historyLines(compat, session!)).toEqual([
      'user: stream this reply please',
      'assistant: echo: stream this reply please',
    ]);
  });

  it('continues a session from resent messages (history + responseMessages): one turn per new user message', async () => {
    const model = modelFor(api, DEFAULT_MODEL);
    const messages: ModelMessage[] = [{ role: 'user', content: 'My name is Ada.' }];
    const first = await generateText({ model, messages });
    messages.push(...first.responseMessages, { role: 'user', content: 'What is my name?' });
    const second = await generateText({ model, messages });
    expect(second.text).toBe('echo: What is my name?');
    const session = await sessionOf(first.finalStep);
    expect(await sessionOf(second.finalStep)).toBe(session);
    expect(lastModelPrompt(compat)).toEqual([
      `system: ${DEFAULT_SYSTEM}`,
      'user: My name is Ada.',
      'assistant: echo: My name is Ada.',
      'user: What is my name?',
    ]);
    expect(await turnCount(compat, session!)).toBe(2);
  });

  it('takes the instructions (system prompt) as the instructions', async () => {
    // Each API its own text: the same transcript from the same caller within the retry window is answered from the log.
    const result = await generateText({
      model: modelFor(api, DEFAULT_MODEL),
      instructions: 'Answer in French.',
      prompt: `Good morning (${api})`,
    });
    expect(result.text).toBe(`echo: Good morning (${api})`);
    expect(lastModelPrompt(compat)).toEqual(['system: Answer in French.', `user: Good morning (${api})`]);
  });

  it('runs a tool loop: the model calls the client tool, the AI SDK runs it and sends the result, one turn', async () => {
    scriptWeatherTool(compat);
    const calls: string[] = [];
    const result = await generateText({
      model: modelFor(api, DEFAULT_MODEL),
      prompt: WEATHER_QUESTION,
      tools: {
        get_weather: tool({
          description: 'The weather in a city.',
          inputSchema: z.object({ city: z.string() }),
          execute: ({ city }) => {
            calls.push(city);
            return Promise.resolve('sunny');
          },
        }),
      },
      stopWhen: isStepCount(3),
    });
    expect(calls).toEqual(['Oslo']);
    expect(result.steps).toHaveLength(2);
    // A string result is sent as it is (other values as JSON).
    expect(result.text).toBe(weatherAnswer('sunny'));
    const session = await sessionOf(result.steps[0]!);
    expect(await sessionOf(result.steps[1]!)).toBe(session);
    expect(await turnCount(compat, session!)).toBe(1);
    expect(await historyLines(compat, session!)).toEqual([
      `user: ${WEATHER_QUESTION}`,
      'assistant: call get_weather {"city":"Oslo"}',
      'tool: sunny',
      `assistant: ${weatherAnswer('sunny')}`,
    ]);
  });

  it('keeps answering after streamText is aborted: the next call naming the session is answered', async () => {
    const story = scriptLongReply(compat, 'Tell me a long story.');
    const before = await sessionIds(compat);
    const controller = new AbortController();
    const errors: unknown[] = [];
    const result = streamText({
      model: modelFor(api, DEFAULT_MODEL),
      prompt: 'Tell me a long story.',
      abortSignal: controller.signal,
      onError: ({ error }) => {
        errors.push(error);
      },
    });
    let received = '';
    let deltas = 0;
    const ended = await (async () => {
      for await (const delta of result.textStream) {
        received += delta;
        if (++deltas === 3) controller.abort();
      }
    })().then(
      () => 'ended',
      () => 'threw',
    );
    expect(['ended', 'threw']).toContain(ended);
    // Only the abort itself may be reported.
    expect(errors.filter((e) => !(e instanceof Error && e.name === 'AbortError'))).toEqual([]);
    expect(deltas).toBeGreaterThanOrEqual(3);
    expect(received.length).toBeLessThan(story.length);
    // The AI SDK does not surface the headers of an aborted call: find the session on the server.
    const [session, ...others] = await newSessions(compat, before);
    expect(session).toBeTruthy();
    expect(others).toEqual([]);
    await waitForTurnEnd(compat, session!);

    const next = await generateText({
      model: modelFor(api, DEFAULT_MODEL),
      messages: [
        { role: 'user', content: 'Tell me a long story.' },
        { role: 'assistant', content: received },
        { role: 'user', content: 'Are you still there?' },
      ],
      headers: { 'x-session-id': session! },
    });
    expect(next.text).toBe('echo: Are you still there?');
    expect([await sessionOf(next.finalStep), forkedFromOf(next.finalStep)]).toContain(session);
  });

  it('generates a structured output (Output.object with a zod schema): the schema reaches the provider', async () => {
    const result = await generateText({
      model: modelFor(api, DEFAULT_MODEL),
      prompt: 'Tromso',
      output: Output.object({ schema: z.object({ city: z.string(), sunny: z.boolean() }) }),
      temperature: 0.4,
    });
    expect(result.output).toEqual({ city: 'Tromso', sunny: false });
    expect(compat.stack.fake.chatRequests().at(-1)).toMatchObject({
      temperature: 0.4,
      response_format: { type: 'json_schema' },
    });
  });

  it("answers an app's own model name (gpt-4o-mini) and reports the model that ran", async () => {
    const result = await generateText({ model: modelFor(api, 'gpt-4o-mini'), prompt: 'Which model?' });
    expect(result.finalStep.response.modelId).toBe(DEFAULT_MODEL);
    expect(result.text).toBe('echo: Which model?');
  });

  it('forks on an edited earlier message: a new session answers, the original keeps its history', async () => {
    const model = modelFor(api, DEFAULT_MODEL);
    const u1: ModelMessage = { role: 'user', content: 'My name is Ada.' };
    const first = await generateText({ model, messages: [u1] });
    const original = (await sessionOf(first.finalStep))!;
    await generateText({
      model,
      messages: [u1, ...first.responseMessages, { role: 'user', content: 'I live in Oslo.' }],
    });
    const before = await historyLines(compat, original);
    expect(before).toHaveLength(4);

    const edited = await generateText({
      model,
      messages: [u1, ...first.responseMessages, { role: 'user', content: 'I live in Bergen.' }],
    });
    expect(edited.text).toBe('echo: I live in Bergen.');
    const forked = await sessionOf(edited.finalStep);
    expect(forked).toBeTruthy();
    expect(forked).not.toBe(original);
    expect(forkedFromOf(edited.finalStep)).toBe(original);
    expect(await historyLines(compat, forked!)).toEqual([
      'user: My name is Ada.',
      'assistant: echo: My name is Ada.',
      'user: I live in Bergen.',
      'assistant: echo: I live in Bergen.',
    ]);
    expect(await historyLines(compat, original)).toEqual(before);
  });
});

describe('ai-sdk responses model, server-side state', () => {
  it('continues with providerOptions.openai.previousResponseId', async () => {
    const model = openai(DEFAULT_MODEL);
    const first = await generateText({ model, prompt: 'My name is Ada.' });
    const responseId = first.finalStep.providerMetadata?.openai?.responseId as string;
    expect(responseId).toMatch(/^resp_/);
    const second = await generateText({
      model,
      prompt: 'What is my name?',
      providerOptions: { openai: { previousResponseId: responseId } },
    });
    expect(second.text).toBe('echo: What is my name?');
    expect(await sessionOf(second.finalStep)).toBe(await sessionOf(first.finalStep));
    expect(lastModelPrompt(compat).slice(1)).toEqual([
      'user: My name is Ada.',
      'assistant: echo: My name is Ada.',
      'user: What is my name?',
    ]);
  });

  it('continues a conversation with providerOptions.openai.conversation', async () => {
    const created = await fetch(`${compat.baseURL}/conversations`, {
      method: 'POST',
      headers: { authorization: `Bearer ${compat.apiKey}`, 'content-type': 'application/json' },
      body: '{}',
    });
    const conversation = ((await created.json()) as { id: string }).id;
    const model = openai(DEFAULT_MODEL);
    // The conversation holds the history (as with OpenAI, resent user messages would be appended again): send the new message only.
    await generateText({ model, prompt: 'My name is Ada.', providerOptions: { openai: { conversation } } });
    const second = await generateText({
      model,
      prompt: 'What is my name?',
      providerOptions: { openai: { conversation } },
    });
    expect(second.text).toBe('echo: What is my name?');
    expect(await turnCount(compat, conversation)).toBe(2);
    expect(await historyLines(compat, conversation)).toEqual([
      'user: My name is Ada.',
      'assistant: echo: My name is Ada.',
      'user: What is my name?',
      'assistant: echo: What is my name?',
    ]);
  });
});
