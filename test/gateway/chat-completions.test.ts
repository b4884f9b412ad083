/**
 * Chat Completions and stateless transcripts (issue 24) through the official `openai` client,
 * against the real gateway, a Temporal dev server, a worker and the fake model: each request
 * carries its whole transcript; the gateway finds the session, logs only what is new, runs one
 * turn, and forks on a diverging transcript. Server-side effects are read from the log.
 */
import OpenAI from 'openai';
import type { ChatCompletionMessageParam, ChatCompletionTool } from 'openai/resources/chat/completions';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startGateway, type RunningGateway } from '../../src/gateway/index.js';
import type { StoredEvent } from '../../src/session/index.js';
import { startStack, type Stack } from '../support/stack.js';

let stack: Stack;
let gateway: RunningGateway;
let client: OpenAI;

beforeAll(async () => {
  stack = await startStack();
  gateway = await startGateway({
    client: stack.client,
    host: '127.0.0.1',
    port: 0,
    bodyLimitBytes: 1024 * 1024,
    defaultAgent: { model: 'fake' },
  });
  client = new OpenAI({ baseURL: `${gateway.url}/openai/v1`, apiKey: `app-${Date.now()}`, maxRetries: 0 });
});
afterAll(async () => {
  await gateway?.close();
  await stack?.close();
});
beforeEach(() => {
  stack.fake.reset();
});

const turnsOf = (events: StoredEvent[]) => events.filter((e) => e.type === 'turn/start');

/** A chat completion and the session that answered it. */
async function chat(
  messages: ChatCompletionMessageParam[],
  extra: Partial<OpenAI.ChatCompletionCreateParamsNonStreaming> = {},
) {
  const { data, response } = await client.chat.completions
    .create({ model: 'gpt-4o-mini', messages, ...extra })
    .withResponse();
  return {
    completion: data,
    sessionId: response.headers.get('x-session-id')!,
    forkedFrom: response.headers.get('x-sessionlog-forked-from'),
  };
}

describe('chat completions', () => {
  it('answers a transcript, reports the model that ran, and continues the same session by transcript, one turn per request', async () => {
    const system = { role: 'system' as const, content: 'You are terse.' };
    const first = await chat([system, { role: 'user', content: 'hello there' }]);
    expect(first.completion.object).toBe('chat.completion');
    expect(first.completion.model).toBe('fake');
    expect(first.completion.choices[0]!.message.content).toBe('echo: hello there');
    expect(first.completion.choices[0]!.finish_reason).toBe('stop');
    expect(first.completion.usage?.total_tokens).toBeGreaterThan(0);
    expect(first.sessionId).toMatch(/^chat_/);
    // The system message became the session's instructions.
    expect(stack.fake.chatRequests().at(-1)!.messages[0]).toMatchObject({ role: 'system', content: 'You are terse.' });

    const second = await chat([
      system,
      { role: 'user', content: 'hello there' },
      { role: 'assistant', content: 'echo: hello there' },
      { role: 'user', content: 'and again' },
    ]);
    expect(second.sessionId).toBe(first.sessionId);
    expect(second.completion.choices[0]!.message.content).toBe('echo: and again');
    const events = await stack.client.events(first.sessionId);
    expect(turnsOf(events)).toHaveLength(2);
    // Nothing was logged twice: two user messages, two replies.
    expect((await stack.client.history(first.sessionId)).map((m) => m.role)).toEqual([
      'user',
      'assistant',
      'user',
      'assistant',
    ]);
  });

  it('answers a retried request from the log without a new turn; the same request sent anew gets a new reply in a branch', async () => {
    const messages: ChatCompletionMessageParam[] = [{ role: 'user', content: `retry me ${Date.now()}` }];
    const first = await chat(messages);
    // The SDK counts its attempts: a retry says so (x-stainless-retry-count > 0).
    const { data: retried, response } = await client.chat.completions
      .create({ model: 'fake', messages }, { headers: { 'x-stainless-retry-count': '1' } })
      .withResponse();
    expect(response.headers.get('x-session-id')).toBe(first.sessionId);
    expect(retried.choices[0]!.message.content).toBe(first.completion.choices[0]!.message.content);
    expect(turnsOf(await stack.client.events(first.sessionId))).toHaveLength(1);
    expect(stack.fake.chatRequests()).toHaveLength(1);
    // A first attempt of the same transcript asks for a new reply: a branch answers it.
    const anew = await chat(messages);
    expect(anew.forkedFrom).toBe(first.sessionId);
    expect(anew.sessionId).not.toBe(first.sessionId);
    expect(stack.fake.chatRequests()).toHaveLength(2);
    expect(turnsOf(await stack.client.events(first.sessionId))).toHaveLength(1);
  });

  it('forks at the divergence when an earlier user message is edited; the original keeps its history', async () => {
    const tag = Date.now();
    const base: ChatCompletionMessageParam[] = [{ role: 'user', content: `first ${tag}` }];
    const a = await chat(base);
    const b = await chat([
      ...base,
      { role: 'assistant', content: `echo: first ${tag}` },
      { role: 'user', content: 'second' },
    ]);
    expect(b.sessionId).toBe(a.sessionId);
    const edited = await chat([
      ...base,
      { role: 'assistant', content: `echo: first ${tag}` },
      { role: 'user', content: 'second, edited' },
    ]);
    expect(edited.completion.choices[0]!.message.content).toBe('echo: second, edited');
    expect(edited.sessionId).not.toBe(a.sessionId);
    expect(edited.forkedFrom).toBe(a.sessionId);
    const original = (await stack.client.history(a.sessionId)).map((m) => m.role + ':' + JSON.stringify(m.content));
    expect(original).toHaveLength(4);
    expect(original[2]).toContain('second');
    expect(original[2]).not.toContain('edited');
    const branch = await stack.client.history(edited.sessionId);
    expect(branch).toHaveLength(4);
    expect(JSON.stringify(branch[2]!.content)).toContain('second, edited');
    // The branch continues by its own transcript.
    const next = await chat([
      ...base,
      { role: 'assistant', content: `echo: first ${tag}` },
      { role: 'user', content: 'second, edited' },
      { role: 'assistant', content: 'echo: second, edited' },
      { role: 'user', content: 'third' },
    ]);
    expect(next.sessionId).toBe(edited.sessionId);
    expect(next.forkedFrom).toBeNull();
  });

  it('logs a migrated transcript as caller-supplied history and answers its last message', async () => {
    const messages: ChatCompletionMessageParam[] = [
      { role: 'user', content: `from another system ${Date.now()}` },
      { role: 'assistant', content: 'an answer the other system gave' },
      { role: 'user', content: 'continue here' },
    ];
    const { completion, sessionId } = await chat(messages);
    expect(completion.choices[0]!.message.content).toBe('echo: continue here');
    const sent = stack.fake
      .chatRequests()
      .at(-1)!
      .messages.filter((m) => m.role !== 'system');
    expect(sent.map((m) => m.content)).toEqual([
      messages[0]!.content,
      'an answer the other system gave',
      'continue here',
    ]);
    const replies = (await stack.client.events(sessionId)).filter((e) => e.type === 'assistant/message');
    expect(replies.map((e) => (e.data as { message: { source: { kind: string } } }).message.source.kind)).toEqual([
      'caller',
      'model',
    ]);
  });

  it('streams chunks with a final usage chunk and [DONE]', async () => {
    const stream = await client.chat.completions.create({
      model: 'fake',
      messages: [{ role: 'user', content: `stream this ${Date.now()}` }],
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = '';
    let finish: string | null = null;
    let usage: OpenAI.CompletionUsage | null | undefined;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? '';
      finish = chunk.choices[0]?.finish_reason ?? finish;
      if (chunk.usage) usage = chunk.usage;
    }
    expect(text).toMatch(/^echo: stream this /);
    expect(finish).toBe('stop');
    expect(usage?.total_tokens).toBeGreaterThan(0);
  });

  it('runs a function-tool loop: tool_calls come back, the results continue the same turn', async () => {
    const weather: ChatCompletionTool = {
      type: 'function',
      function: {
        name: 'get_weather',
        description: 'The weather in a city.',
        parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
      },
    };
    stack.fake.setMatcher(({ body, lastUserText }) => {
      const last = body.messages.at(-1)!;
      if (last.role === 'tool') return { text: `Oslo: ${String(last.content)}.` };
      if (lastUserText.startsWith('weather in Oslo'))
        return { text: '', toolCalls: [{ id: 'call_W9', name: 'get_weather', arguments: { city: 'Oslo' } }] };
      return undefined;
    });
    const messages: ChatCompletionMessageParam[] = [{ role: 'user', content: `weather in Oslo ${Date.now()}?` }];
    const first = await chat(messages, { tools: [weather] });
    const choice = first.completion.choices[0]!;
    expect(choice.finish_reason).toBe('tool_calls');
    expect(choice.message.tool_calls).toEqual([
      { id: 'call_W9', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } },
    ]);
    const second = await chat(
      [...messages, choice.message, { role: 'tool', tool_call_id: 'call_W9', content: 'sunny' }],
      { tools: [weather] },
    );
    expect(second.sessionId).toBe(first.sessionId);
    expect(second.completion.choices[0]!.message.content).toBe('Oslo: sunny.');
    expect(turnsOf(await stack.client.events(first.sessionId))).toHaveLength(1);
    // The results request retried (its answer lost on the way): answered from the log, nothing logged again.
    const before = (await stack.client.events(first.sessionId)).length;
    const calls = stack.fake.chatRequests().length;
    const retried = await client.chat.completions
      .create(
        {
          model: 'gpt-4o-mini',
          messages: [...messages, choice.message, { role: 'tool', tool_call_id: 'call_W9', content: 'sunny' }],
          tools: [weather],
        },
        { headers: { 'x-stainless-retry-count': '1' } },
      )
      .withResponse();
    expect(retried.response.headers.get('x-session-id')).toBe(first.sessionId);
    expect(retried.data.choices[0]!.message.content).toBe('Oslo: sunny.');
    expect((await stack.client.events(first.sessionId)).length).toBe(before);
    expect(stack.fake.chatRequests()).toHaveLength(calls);
  });

  it('lists models and refuses what would change the meaning (n > 1, audio) in the OpenAI error shape', async () => {
    const models = await client.models.list();
    expect(models.data.map((m) => m.id)).toContain('fake');
    expect((await client.models.retrieve('fake')).id).toBe('fake');
    const refused = await client.chat.completions
      .create({ model: 'fake', messages: [{ role: 'user', content: 'x' }], n: 2 })
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(OpenAI.BadRequestError);
    expect((refused as InstanceType<typeof OpenAI.BadRequestError>).param).toBe('n');
  });

  it("passes the hints a provider takes (sampling, token cap, stop, seed) and names the rest as ignored in the turn's request header", async () => {
    const hinted = await chat([{ role: 'user', content: `hinted ${Date.now()}` }], {
      temperature: 0.2,
      top_p: 0.9,
      max_tokens: 50,
      seed: 7,
      stop: 'STOP',
      presence_penalty: 0.5,
      user: 'u-1',
      parallel_tool_calls: true,
      store: false,
      service_tier: 'flex',
      metadata: { app: 'support-bot' },
    });
    expect(hinted.completion.choices[0]!.message.content).toMatch(/^echo: hinted/);
    const sent = stack.fake.chatRequests().at(-1)! as Record<string, unknown>;
    expect(sent).toMatchObject({
      temperature: 0.2,
      top_p: 0.9,
      max_tokens: 50,
      seed: 7,
      stop: ['STOP'],
      presence_penalty: 0.5,
    });
    // parallel_tool_calls reaches the provider too (issue 51), with the worker's tools.
    expect(sent.parallel_tool_calls).toBe(true);
    for (const field of ['user', 'store', 'service_tier']) expect(sent[field]).toBeUndefined();
    const events = await stack.client.events(hinted.sessionId);
    const header = events.findLast((e) => e.type === 'request/header')!.data as { header: { hints?: unknown } };
    expect(header.header.hints).toEqual({
      temperature: 0.2,
      topP: 0.9,
      maxTokens: 50,
      seed: 7,
      stop: ['STOP'],
      presencePenalty: 0.5,
      parallelToolCalls: true,
      ignored: ['user', 'store', 'service_tier'],
    });
    // The metadata is logged with the turn it came with.
    const metadata = events.find((e) => e.type === 'session/metadata')!.data as {
      metadata: unknown;
      messageId?: string;
    };
    expect(metadata.metadata).toEqual({ app: 'support-bot' });
    expect(metadata.messageId).toBeTruthy();
    // The hints held for that turn only: the next one runs without them.
    const next = await chat([
      { role: 'user', content: hinted.completion.choices[0]!.message.content!.slice(6) },
      { role: 'assistant', content: hinted.completion.choices[0]!.message.content! },
      { role: 'user', content: 'plain again' },
    ]);
    expect(next.sessionId).toBe(hinted.sessionId);
    const plain = stack.fake.chatRequests().at(-1)! as Record<string, unknown>;
    expect(plain.temperature).toBeUndefined();
    expect(plain.max_tokens).toBeUndefined();
    // A value out of range is refused, naming it.
    const bad = await client.chat.completions
      .create({ model: 'fake', messages: [{ role: 'user', content: 'x' }], temperature: 7 })
      .catch((e: unknown) => e);
    expect(bad).toBeInstanceOf(OpenAI.BadRequestError);
    expect((bad as InstanceType<typeof OpenAI.BadRequestError>).param).toBe('temperature');
  });

  it('answers in a structured output format (json_schema, json_object) the provider is sent', async () => {
    const schema = {
      type: 'object',
      properties: { echo: { type: 'string' }, count: { type: 'integer' } },
      required: ['echo', 'count'],
      additionalProperties: false,
    };
    const structured = await chat([{ role: 'user', content: `structured ${Date.now()}` }], {
      response_format: { type: 'json_schema', json_schema: { name: 'reply', schema, strict: true } },
    });
    const parsed = JSON.parse(structured.completion.choices[0]!.message.content!) as { echo: string; count: number };
    expect(parsed.echo).toMatch(/^structured /);
    expect(parsed.count).toBe(0);
    expect(stack.fake.chatRequests().at(-1)!.response_format).toEqual({
      type: 'json_schema',
      json_schema: { name: 'reply', schema, strict: true },
    });
    const object = await chat([{ role: 'user', content: 'any json' }], { response_format: { type: 'json_object' } });
    expect(JSON.parse(object.completion.choices[0]!.message.content!)).toEqual({ echo: 'any json' });
  });
});
