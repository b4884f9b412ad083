/**
 * The scenarios of the official `openai` SDK, shared by both majors (openai-v7.test.ts runs
 * them with 7.x, openai-v6.test.ts with 6.x): the client is constructed as its README shows,
 * with only `baseURL` and `apiKey` changed, and used as its README and API reference show.
 *
 * What it sends (recorded through the stack's proxy; 6.x and 7.x send byte-identical bodies).
 * Headers: `authorization: Bearer <key>`, `accept: application/json`, `content-type:
 * application/json`, `user-agent: OpenAI/JS <version>`, `x-stainless-{lang, package-version,
 * os, arch, runtime, runtime-version, retry-count}`; `x-stainless-helper-method: stream` from
 * `responses.stream()`; no idempotency key. The body is the params as passed, JSON-encoded:
 *
 * - `GET /models`, `GET /models/{id}`.
 * - `POST /chat/completions` `{model, messages, stream?, stream_options?: {include_usage},
 *   tools?: [{type: 'function', function: {name, description, parameters}}], n?}`. A
 *   transcript resends `completion.choices[0].message` verbatim (whatever the gateway returned:
 *   `{role: 'assistant', content, …}`; with tool calls `content: null, tool_calls: [{id, type:
 *   'function', function: {name, arguments}}]`), then `{role: 'tool', tool_call_id, content}`.
 * - `POST /responses` `{model, input, instructions?, conversation?, previous_response_id?,
 *   tools?: [{type: 'function', strict, name, description, parameters}], stream?, background?}`.
 *   A transcript resends `response.output` items verbatim: `{id: 'msg_…', type: 'message', role:
 *   'assistant', status: 'completed', content: [{type: 'output_text', text, annotations: [],
 *   logprobs: []}]}`, `{id: 'fc_…', type: 'function_call', status, call_id, name, arguments}`,
 *   then `{type: 'function_call_output', call_id, output}`. (The gateway's item ids are
 *   `msg_1_1_0`-style today: the same ids in every conversation.)
 * - `GET /responses/{id}?stream=true&starting_after=N` (rejoin a stream).
 * - `POST /conversations {}` (also `{items, metadata}`), `POST /conversations/{id}/items
 *   {items}`, `GET /conversations/{id}/items?order=asc`.
 *
 * Response headers are read with `.withResponse()`; a call names its session with the request
 * option `headers: {'x-session-id': …}`. The SDK's stream iterator ends quietly when its
 * AbortSignal fires (no error is thrown).
 */
import type OpenAIv7 from 'openai-v7';
import type { ChatCompletionMessageParam } from 'openai-v7/resources/chat/completions';
import type { ResponseInputItem, ResponseStreamEvent } from 'openai-v7/resources/responses/responses';
import type { zodResponseFormat, zodTextFormat } from 'openai-v7/helpers/zod';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { eventually } from '../support/log-wait.js';
import {
  DEFAULT_MODEL,
  DEFAULT_SYSTEM,
  WEATHER_QUESTION,
  WEATHER_TOOL,
  historyLines,
  lastModelPrompt,
  scriptLongReply,
  scriptWeatherTool,
  startCompatStack,
  turnCount,
  waitForTurnEnd,
  weatherAnswer,
  type CompatStack,
} from './stack.js';

/** The SDK's client class; both majors share this shape at runtime. */
export type OpenAIClass = typeof OpenAIv7;
/** The SDK's zod helpers (`openai/helpers/zod`) of the same major. */
export type ZodHelpers = { zodResponseFormat: typeof zodResponseFormat; zodTextFormat: typeof zodTextFormat };

const SESSION_HEADER = 'x-session-id';
const FORKED_FROM_HEADER = 'x-sessionlog-forked-from';

/** Registers every scenario for one major of the SDK. */
export function describeOpenAISdk(label: string, OpenAI: OpenAIClass, helpers: ZodHelpers): void {
  let compat: CompatStack;
  let client: OpenAIv7;

  beforeAll(async () => {
    compat = await startCompatStack(label);
    client = new OpenAI({ baseURL: compat.baseURL, apiKey: compat.apiKey });
  });
  afterAll(async () => {
    await compat?.close();
  });
  beforeEach(() => {
    compat.resetFake();
  });

  /** A chat completion with the session that answered it (from the response headers). */
  async function chat(
    messages: ChatCompletionMessageParam[],
    extra: Partial<OpenAIv7.Chat.ChatCompletionCreateParamsNonStreaming> = {},
    headers: Record<string, string> = {},
  ) {
    const { data, response } = await client.chat.completions
      .create({ model: DEFAULT_MODEL, messages, ...extra }, { headers })
      .withResponse();
    return {
      completion: data,
      message: data.choices[0]!.message,
      text: data.choices[0]!.message.content,
      session: response.headers.get(SESSION_HEADER),
      forkedFrom: response.headers.get(FORKED_FROM_HEADER),
    };
  }

  describe(`${label}: models`, () => {
    it('lists the default model and retrieves it; an unknown id is NotFoundError', async () => {
      const ids: string[] = [];
      for await (const model of client.models.list()) {
        expect(model.object).toBe('model');
        ids.push(model.id);
      }
      expect(ids).toContain(DEFAULT_MODEL);
      expect(await client.models.retrieve(DEFAULT_MODEL)).toMatchObject({ id: DEFAULT_MODEL, object: 'model' });
      await expect(client.models.retrieve('no-such-model-anywhere')).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    });
  });

  describe(`${label}: chat completions`, () => {
    it('answers a plain call from the fake model, in a new session holding one turn', async () => {
      const { completion, text, session } = await chat([{ role: 'user', content: 'Hello there' }]);
      expect(completion.object).toBe('chat.completion');
      expect(completion.model).toBe(DEFAULT_MODEL);
      expect(completion.choices[0]!.finish_reason).toBe('stop');
      expect(text).toBe('echo: Hello there');
      expect(completion.usage?.prompt_tokens).toBeGreaterThan(0);
      expect(session).toBeTruthy();
      expect(await turnCount(compat, session!)).toBe(1);
      expect(await historyLines(compat, session!)).toEqual(['user: Hello there', 'assistant: echo: Hello there']);
    });

    it('streams chunks whose deltas join to the logged reply, then a usage chunk', async () => {
      const { data: stream, response } = await client.chat.completions
        .create({
          model: DEFAULT_MODEL,
          messages: [{ role: 'user', content: 'stream this reply please' }],
          stream: true,
          stream_options: { include_usage: true },
        })
        .withResponse();
      const chunks: OpenAIv7.Chat.ChatCompletionChunk[] = [];
      for await (const chunk of stream) chunks.push(chunk);
      expect(chunks.every((c) => c.object === 'chat.completion.chunk')).toBe(true);
      expect(new Set(chunks.map((c) => c.id)).size).toBe(1);
      const text = chunks.map((c) => c.choices[0]?.delta.content ?? '').join('');
      expect(text).toBe('echo: stream this reply please');
      expect(chunks.flatMap((c) => c.choices.map((choice) => choice.finish_reason)).filter(Boolean)).toEqual(['stop']);
      expect(chunks.at(-1)!.choices).toEqual([]);
      expect(chunks.at(-1)!.usage?.completion_tokens).toBeGreaterThan(0);
      const session = response.headers.get(SESSION_HEADER)!;
      expect(await historyLines(compat, session)).toEqual([
        'user: stream this reply please',
        'assistant: echo: stream this reply please',
      ]);
    });

    it('continues a session from the resent transcript: one turn per new user message, none for a repeated request', async () => {
      const messages: ChatCompletionMessageParam[] = [{ role: 'user', content: 'My name is Ada.' }];
      const first = await chat(messages);
      messages.push(first.message, { role: 'user', content: 'What is my name?' });
      const second = await chat(messages);
      expect(second.text).toBe('echo: What is my name?');
      expect(second.session).toBe(first.session);
      expect(lastModelPrompt(compat)).toEqual([
        `system: ${DEFAULT_SYSTEM}`,
        'user: My name is Ada.',
        'assistant: echo: My name is Ada.',
        'user: What is my name?',
      ]);
      expect(await turnCount(compat, first.session!)).toBe(2);

      // The same request again as the SDK retries it (it counts attempts in x-stainless-retry-count):
      // the same reply from the same session, no new turn.
      const repeated = await chat(messages, {}, { 'x-stainless-retry-count': '1' });
      expect(repeated.text).toBe(second.text);
      expect(repeated.session).toBe(first.session);
      expect(await turnCount(compat, first.session!)).toBe(2);
      // Sent anew (a first attempt), it asks for a new reply: a branch of the session answers it.
      const anew = await chat(messages);
      expect(anew.text).toBe(second.text);
      expect(anew.session).not.toBe(first.session);
      expect((await compat.stack.client.header(anew.session!)).parentSession).toBe(first.session);
      expect(await turnCount(compat, first.session!)).toBe(2);
    });

    it('takes system and developer messages as the instructions', async () => {
      await chat([
        { role: 'system', content: 'Answer in French.' },
        { role: 'user', content: 'Good morning' },
      ]);
      expect(lastModelPrompt(compat)).toEqual(['system: Answer in French.', 'user: Good morning']);
      await chat([
        { role: 'developer', content: 'Answer in one word.' },
        { role: 'user', content: 'Good evening' },
      ]);
      expect(lastModelPrompt(compat)).toEqual(['system: Answer in one word.', 'user: Good evening']);
    });

    it('runs a function-tool loop: tool_calls come back, the client sends the tool result, the turn ends with the answer', async () => {
      scriptWeatherTool(compat);
      const tools: OpenAIv7.Chat.ChatCompletionTool[] = [{ type: 'function', function: { ...WEATHER_TOOL } }];
      const messages: ChatCompletionMessageParam[] = [{ role: 'user', content: WEATHER_QUESTION }];
      const first = await chat(messages, { tools });
      expect(first.completion.choices[0]!.finish_reason).toBe('tool_calls');
      expect(first.message.tool_calls).toEqual([
        { id: 'call_weather_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } },
      ]);
      // The model was offered the client's tool.
      expect(
        compat.stack.fake
          .chatRequests()
          .at(-1)!
          .tools?.map((t) => t.function.name),
      ).toContain('get_weather');

      messages.push(first.message, { role: 'tool', tool_call_id: 'call_weather_1', content: 'sunny' });
      const second = await chat(messages, { tools });
      expect(second.text).toBe(weatherAnswer('sunny'));
      expect(second.completion.choices[0]!.finish_reason).toBe('stop');
      expect(second.session).toBe(first.session);
      expect(await turnCount(compat, first.session!)).toBe(1);
      expect(await historyLines(compat, first.session!)).toEqual([
        `user: ${WEATHER_QUESTION}`,
        'assistant: call get_weather {"city":"Oslo"}',
        'tool: sunny',
        `assistant: ${weatherAnswer('sunny')}`,
      ]);
    });

    it('keeps answering after the client aborts a stream: the next call in the same session is answered', async () => {
      const story = scriptLongReply(compat, 'Tell me a long story.');
      const controller = new AbortController();
      const { data: stream, response } = await client.chat.completions
        .create(
          { model: DEFAULT_MODEL, messages: [{ role: 'user', content: 'Tell me a long story.' }], stream: true },
          { signal: controller.signal },
        )
        .withResponse();
      const session = response.headers.get(SESSION_HEADER)!;
      expect(session).toBeTruthy();
      let received = '';
      let deltas = 0;
      // The SDK ends the iteration quietly when its signal aborts.
      for await (const chunk of stream) {
        received += chunk.choices[0]?.delta.content ?? '';
        if (++deltas === 3) controller.abort();
      }
      expect(story.startsWith(received)).toBe(true);
      expect(received.length).toBeLessThan(story.length);

      await waitForTurnEnd(compat, session);
      // The aborted reply is in the log (the part streamed so far, or all of it).
      const lines = await historyLines(compat, session);
      expect(lines[0]).toBe('user: Tell me a long story.');
      expect(lines[1]).toMatch(/^assistant: w0 w1/);

      const next = await chat(
        [
          { role: 'user', content: 'Tell me a long story.' },
          { role: 'assistant', content: received },
          { role: 'user', content: 'Are you still there?' },
        ],
        {},
        { [SESSION_HEADER]: session },
      );
      expect(next.text).toBe('echo: Are you still there?');
      // The same session answers, or a fork of it when the resent partial reply differs from the logged one.
      expect([next.session, next.forkedFrom]).toContain(session);
      expect((await historyLines(compat, next.session!)).slice(-2)).toEqual([
        'user: Are you still there?',
        'assistant: echo: Are you still there?',
      ]);
    });

    it("answers an app's own model name with the default model and reports the model that ran", async () => {
      const { completion, text } = await chat([{ role: 'user', content: 'Which model?' }], { model: 'gpt-4o-mini' });
      expect(text).toBe('echo: Which model?');
      expect(completion.model).toBe(DEFAULT_MODEL);
    });

    it('forks on an edited earlier message: a new session answers, the original keeps its history', async () => {
      const u1: ChatCompletionMessageParam = { role: 'user', content: 'My name is Ada.' };
      const first = await chat([u1]);
      const second = await chat([u1, first.message, { role: 'user', content: 'I live in Oslo.' }]);
      expect(second.session).toBe(first.session);
      const original = first.session!;
      const before = await historyLines(compat, original);

      const edited = await chat([u1, first.message, { role: 'user', content: 'I live in Bergen.' }]);
      expect(edited.text).toBe('echo: I live in Bergen.');
      expect(edited.session).toBeTruthy();
      expect(edited.session).not.toBe(original);
      expect(edited.forkedFrom).toBe(original);
      expect(await historyLines(compat, edited.session!)).toEqual([
        'user: My name is Ada.',
        'assistant: echo: My name is Ada.',
        'user: I live in Bergen.',
        'assistant: echo: I live in Bergen.',
      ]);
      expect(await historyLines(compat, original)).toEqual(before);
      expect(before.at(-2)).toBe('user: I live in Oslo.');
      expect(await turnCount(compat, original)).toBe(2);
    });

    it('refuses n > 1 with BadRequestError naming the field', async () => {
      const error = await chat([{ role: 'user', content: 'two please' }], { n: 2 }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(OpenAI.BadRequestError);
      expect((error as InstanceType<typeof OpenAI.BadRequestError>).param).toBe('n');
    });

    it('parses structured output with chat.completions.parse and zodResponseFormat; the hints a provider takes reach it', async () => {
      const Weather = z.object({ city: z.string(), sunny: z.boolean() });
      const completion = await client.chat.completions.parse({
        model: DEFAULT_MODEL,
        messages: [{ role: 'user', content: 'Oslo' }],
        response_format: helpers.zodResponseFormat(Weather, 'weather'),
        temperature: 0.3,
        seed: 1,
      });
      expect(completion.choices[0]!.message.parsed).toEqual({ city: 'Oslo', sunny: false });
      expect(compat.stack.fake.chatRequests().at(-1)).toMatchObject({
        temperature: 0.3,
        seed: 1,
        response_format: { type: 'json_schema', json_schema: { name: 'weather', strict: true } },
      });
    });
  });

  describe(`${label}: responses`, () => {
    it('answers a plain responses.create with model fake', async () => {
      const response = await client.responses.create({ model: DEFAULT_MODEL, input: 'Hello there' });
      expect(response.status).toBe('completed');
      expect(response.output_text).toBe('echo: Hello there');
      expect(response.model).toBe(DEFAULT_MODEL);
      expect(await turnCount(compat, response.conversation!.id)).toBe(1);
    });

    it('streams with responses.stream: deltas, then response.completed with the logged reply', async () => {
      const stream = client.responses.stream({ model: DEFAULT_MODEL, input: 'stream this reply please' });
      const types: string[] = [];
      let text = '';
      for await (const event of stream) {
        types.push(event.type);
        if (event.type === 'response.output_text.delta') text += event.delta;
      }
      const final = await stream.finalResponse();
      expect(types.at(-1)).toBe('response.completed');
      expect(text).toBe('echo: stream this reply please');
      expect(final.output_text).toBe(text);
      expect((await historyLines(compat, final.conversation!.id)).at(-1)).toBe(`assistant: ${text}`);
    });

    it('continues a conversation by id', async () => {
      const conversation = await client.conversations.create();
      await client.responses.create({ model: DEFAULT_MODEL, conversation: conversation.id, input: 'My name is Ada.' });
      const second = await client.responses.create({ conversation: conversation.id, input: 'What is my name?' });
      expect(second.output_text).toBe('echo: What is my name?');
      expect(lastModelPrompt(compat)).toEqual([
        `system: ${DEFAULT_SYSTEM}`,
        'user: My name is Ada.',
        'assistant: echo: My name is Ada.',
        'user: What is my name?',
      ]);
      expect(await turnCount(compat, conversation.id)).toBe(2);
    });

    it('ends a response incomplete (budget_exceeded) when its turn pauses on a spend cap; raising it finishes the turn', async () => {
      const conversation = await client.conversations.create();
      await compat.stack.client.setBudget(conversation.id, { turn: { modelCalls: 0 } });
      const paused = await client.responses.create({
        model: DEFAULT_MODEL,
        conversation: conversation.id,
        input: 'Hi?',
      });
      expect(paused.status).toBe('incomplete');
      expect(paused.incomplete_details).toEqual({ reason: 'budget_exceeded' });
      expect(paused.output_text).toBe('');
      expect((await client.responses.retrieve(paused.id)).status).toBe('incomplete');
      // The response ends when the breach is logged; the workflow's phase follows once the step returns.
      await eventually(async () =>
        (await compat.stack.client.status(conversation.id)).phase === 'paused' ? true : undefined,
      );
      // The same from a stream: its terminal event.
      await compat.stack.client.setBudget(conversation.id, null);
      await waitForTurnEnd(compat, conversation.id);
      expect((await historyLines(compat, conversation.id)).at(-1)).toBe('assistant: echo: Hi?');
      await compat.stack.client.setBudget(conversation.id, { total: { modelCalls: 1 } });
      const types: string[] = [];
      for await (const event of await client.responses.create({
        conversation: conversation.id,
        input: 'Again?',
        stream: true,
      }))
        types.push(event.type);
      expect(types.at(-1)).toBe('response.incomplete');
      await compat.stack.client.cancel(conversation.id);
    });

    it('continues with previous_response_id, which the response echoes', async () => {
      const first = await client.responses.create({ model: DEFAULT_MODEL, input: 'My name is Ada.' });
      const second = await client.responses.create({
        model: DEFAULT_MODEL,
        previous_response_id: first.id,
        input: 'What is my name?',
      });
      expect(second.output_text).toBe('echo: What is my name?');
      expect(second.conversation?.id).toBe(first.conversation?.id);
      expect(lastModelPrompt(compat).slice(1)).toEqual([
        'user: My name is Ada.',
        'assistant: echo: My name is Ada.',
        'user: What is my name?',
      ]);
      expect(second.previous_response_id).toBe(first.id);
    });

    it('continues from a resent input list (transcript with the previous output items): same session, one more turn', async () => {
      const history: ResponseInputItem[] = [{ role: 'user', content: 'My name is Ada.' }];
      const first = await client.responses.create({ model: DEFAULT_MODEL, input: history });
      history.push(...(first.output as ResponseInputItem[]), { role: 'user', content: 'What is my name?' });
      const second = await client.responses.create({ model: DEFAULT_MODEL, input: history });
      expect(second.output_text).toBe('echo: What is my name?');
      expect(second.conversation?.id).toBe(first.conversation?.id);
      expect(await turnCount(compat, first.conversation!.id)).toBe(2);
    });

    it('takes instructions as the system prompt', async () => {
      const response = await client.responses.create({
        model: DEFAULT_MODEL,
        instructions: 'Answer in French.',
        input: 'Good morning',
      });
      expect(response.output_text).toBe('echo: Good morning');
      expect(lastModelPrompt(compat)).toEqual(['system: Answer in French.', 'user: Good morning']);
    });

    it('runs a function-tool loop with previous_response_id and function_call_output', async () => {
      scriptWeatherTool(compat);
      const tools: OpenAIv7.Responses.FunctionTool[] = [{ type: 'function', strict: true, ...WEATHER_TOOL }];
      const first = await client.responses.create({ model: DEFAULT_MODEL, input: WEATHER_QUESTION, tools });
      const call = first.output.find((item) => item.type === 'function_call');
      expect(call).toMatchObject({ call_id: 'call_weather_1', name: 'get_weather', arguments: '{"city":"Oslo"}' });
      const second = await client.responses.create({
        model: DEFAULT_MODEL,
        previous_response_id: first.id,
        input: [{ type: 'function_call_output', call_id: 'call_weather_1', output: 'sunny' }],
        tools,
      });
      expect(second.output_text).toBe(weatherAnswer('sunny'));
      expect(await turnCount(compat, first.conversation!.id)).toBe(1);
    });

    it('runs a function-tool loop from a resent input list (function_call + function_call_output items)', async () => {
      scriptWeatherTool(compat);
      const tools: OpenAIv7.Responses.FunctionTool[] = [{ type: 'function', strict: true, ...WEATHER_TOOL }];
      const input: ResponseInputItem[] = [{ role: 'user', content: WEATHER_QUESTION }];
      const first = await client.responses.create({ model: DEFAULT_MODEL, input, tools });
      const call = first.output.find((item) => item.type === 'function_call');
      expect(call).toMatchObject({ call_id: 'call_weather_1', name: 'get_weather' });
      input.push(...(first.output as ResponseInputItem[]), {
        type: 'function_call_output',
        call_id: 'call_weather_1',
        output: 'sunny',
      });
      const second = await client.responses.create({ model: DEFAULT_MODEL, input, tools });
      expect(second.output_text).toBe(weatherAnswer('sunny'));
      expect(second.conversation?.id).toBe(first.conversation?.id);
      expect(await turnCount(compat, first.conversation!.id)).toBe(1);
    });

    it('resumes a background stream the client aborted with retrieve(id, {stream, starting_after}), then answers the next call', async () => {
      const story = scriptLongReply(compat, 'Tell me a long story.');
      const controller = new AbortController();
      const stream = await client.responses.create(
        { model: DEFAULT_MODEL, input: 'Tell me a long story.', stream: true, background: true },
        { signal: controller.signal },
      );
      const before: ResponseStreamEvent[] = [];
      // The SDK ends the iteration quietly when its signal aborts.
      for await (const event of stream) {
        before.push(event);
        if (before.filter((e) => e.type === 'response.output_text.delta').length === 3) controller.abort();
      }
      expect(before.map((e) => e.type)).not.toContain('response.completed');
      const responseId = (before[0] as OpenAIv7.Responses.ResponseCreatedEvent).response.id;
      const last = before.at(-1)!.sequence_number;

      const rest: ResponseStreamEvent[] = [];
      for await (const event of await client.responses.retrieve(responseId, { stream: true, starting_after: last }))
        rest.push(event);
      expect(rest[0]!.sequence_number).toBeGreaterThan(last);
      expect(rest.at(-1)!.type).toBe('response.completed');
      const text = [...before, ...rest]
        .filter((e) => e.type === 'response.output_text.delta')
        .map((e) => (e as OpenAIv7.Responses.ResponseTextDeltaEvent).delta)
        .join('');
      expect(text).toBe(story);

      const next = await client.responses.create({ previous_response_id: responseId, input: 'Are you still there?' });
      expect(next.output_text).toBe('echo: Are you still there?');
    });

    it('keeps answering after the client aborts a plain stream: the conversation takes the next call', async () => {
      scriptLongReply(compat, 'Tell me a long story.');
      const controller = new AbortController();
      const stream = await client.responses.create(
        { model: DEFAULT_MODEL, input: 'Tell me a long story.', stream: true },
        { signal: controller.signal },
      );
      let conversationId = '';
      const types: string[] = [];
      // The SDK ends the iteration quietly when its signal aborts.
      for await (const event of stream) {
        types.push(event.type);
        if (event.type === 'response.created') conversationId = event.response.conversation!.id;
        if (types.filter((t) => t === 'response.output_text.delta').length === 3) controller.abort();
      }
      expect(types).not.toContain('response.completed');
      await waitForTurnEnd(compat, conversationId);
      const next = await client.responses.create({ conversation: conversationId, input: 'Are you still there?' });
      expect(next.output_text).toBe('echo: Are you still there?');
      expect(await turnCount(compat, conversationId)).toBe(2);
      expect((await historyLines(compat, conversationId))[1]).toMatch(/^assistant: w0 w1/);
    });

    it("answers an app's own model name with the default model, also when a conversation switches models", async () => {
      const response = await client.responses.create({ model: 'my-app-model', input: 'Which model?' });
      expect({ status: response.status, model: response.model }).toEqual({ status: 'completed', model: DEFAULT_MODEL });
      expect(response.output_text).toBe('echo: Which model?');
      const switched = await client.responses.create({
        model: 'gpt-4o-mini',
        previous_response_id: response.id,
        input: 'And now?',
      });
      expect(switched.output_text).toBe('echo: And now?');
      expect(switched.model).toBe(DEFAULT_MODEL);
    });

    it('forks on an edited earlier message in a resent input list; the original keeps its history', async () => {
      const u1: ResponseInputItem = { role: 'user', content: 'My name is Ada.' };
      const first = await client.responses.create({ model: DEFAULT_MODEL, input: [u1] });
      const original = first.conversation!.id;
      const outputs = first.output as ResponseInputItem[];
      await client.responses.create({
        model: DEFAULT_MODEL,
        input: [u1, ...outputs, { role: 'user', content: 'I live in Oslo.' }],
      });
      const before = await historyLines(compat, original);
      expect(before).toHaveLength(4);

      const { data: edited, response } = await client.responses
        .create({ model: DEFAULT_MODEL, input: [u1, ...outputs, { role: 'user', content: 'I live in Bergen.' }] })
        .withResponse();
      expect(edited.output_text).toBe('echo: I live in Bergen.');
      expect(edited.conversation?.id).not.toBe(original);
      expect(response.headers.get(FORKED_FROM_HEADER)).toBe(original);
      expect((await historyLines(compat, edited.conversation!.id)).slice(-2)).toEqual([
        'user: I live in Bergen.',
        'assistant: echo: I live in Bergen.',
      ]);
      expect(await historyLines(compat, original)).toEqual(before);
    });

    it('accepts the tolerant request fields and refuses hosted tools naming the field', async () => {
      const response = await client.responses.create({
        model: DEFAULT_MODEL,
        input: 'tolerant',
        temperature: 0.2,
        top_p: 1,
        text: { verbosity: 'low' },
        reasoning: { effort: 'low' },
        parallel_tool_calls: true,
        store: true,
        metadata: { app: 'compat' },
        truncation: 'auto',
        service_tier: 'auto',
        user: 'user-1',
        safety_identifier: 'safety-1',
        prompt_cache_key: 'cache-1',
        max_output_tokens: 500,
      });
      expect(response.output_text).toBe('echo: tolerant');
      const error = await client.responses
        .create({ model: DEFAULT_MODEL, input: 'search', tools: [{ type: 'web_search' }] })
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(OpenAI.BadRequestError);
      expect((error as InstanceType<typeof OpenAI.BadRequestError>).param).toMatch(/^tools/);
    });
  });

  describe(`${label}: conversation items`, () => {
    it('appends user and assistant items to a conversation; the next response is sent them', async () => {
      const conversation = await client.conversations.create();
      const added = await client.conversations.items.create(conversation.id, {
        items: [
          { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'My name is Ada.' }] },
          { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'Hello Ada.' }] } as never,
        ],
      });
      expect(added.data).toHaveLength(2);
      const response = await client.responses.create({ conversation: conversation.id, input: 'What is my name?' });
      expect(response.output_text).toBe('echo: What is my name?');
      expect(lastModelPrompt(compat).slice(1)).toEqual([
        'user: My name is Ada.',
        'assistant: Hello Ada.',
        'user: What is my name?',
      ]);
    });

    it('deletes an item: gone from the list and from what the next response is sent, kept in the log', async () => {
      const conversation = await client.conversations.create({
        items: [
          { type: 'message', role: 'user', content: 'My password is hunter2.' },
          { type: 'message', role: 'user', content: 'I like tea.' },
        ],
      });
      const items = await client.conversations.items.list(conversation.id, { order: 'asc' });
      const deleted = await client.conversations.items.delete(items.data[0]!.id!, { conversation_id: conversation.id });
      expect(deleted.id).toBe(conversation.id);
      const left = await client.conversations.items.list(conversation.id, { order: 'asc' });
      expect(left.data.map((item) => item.id)).toEqual([items.data[1]!.id]);
      await client.responses.create({ conversation: conversation.id, input: 'What do I like?' });
      expect(lastModelPrompt(compat).slice(1)).toEqual(['user: I like tea.', 'user: What do I like?']);
      const events = await compat.stack.client.events(conversation.id);
      expect(events.some((e) => e.type === 'user/message' && JSON.stringify(e.data).includes('hunter2'))).toBe(true);
    });
  });

  describe(`${label}: structured output (responses)`, () => {
    it('parses structured output with responses.parse and zodTextFormat', async () => {
      const Weather = z.object({ city: z.string(), sunny: z.boolean() });
      const response = await client.responses.parse({
        model: DEFAULT_MODEL,
        input: 'Bergen',
        text: { format: helpers.zodTextFormat(Weather, 'weather') },
      });
      expect(response.output_parsed).toEqual({ city: 'Bergen', sunny: false });
    });
  });
}
