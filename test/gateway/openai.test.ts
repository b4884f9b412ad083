/**
 * The OpenAI-compatible API (`/openai/v1`) through the official `openai` npm client, unchanged,
 * against the real gateway, a Temporal dev server, a worker and the fake model: conversations
 * and responses map to sessions and turns, streams are the SDK's own events numbered from the
 * log, and every refusal raises the SDK's own error class.
 */
import OpenAI from 'openai';
import type { ResponseStreamEvent } from 'openai/resources/responses/responses';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startGateway, type RunningGateway } from '../../src/gateway/index.js';
import { textOf } from '../../src/session/index.js';
import { workflowIdFor } from '../../src/workflows/api.js';
import { BUILTIN_TOOLS } from '../../src/tools/builtin.js';
import { ToolRegistry, type Tool } from '../../src/tools/registry.js';
import { startStack, type Stack } from '../support/stack.js';

let stack: Stack;
let gateway: RunningGateway;
let client: OpenAI;
const DEFAULT_AGENT = { model: 'fake', system: 'You are a test assistant.' };

/** A tool the caller runs: the turn waits for its result (DESIGN §5.1). */
const lookupOrder: Tool = {
  name: 'lookup_order',
  description: 'Looks up an order by its id.',
  parameters: { type: 'object', properties: { id: { type: 'string' } }, required: ['id'], additionalProperties: false },
  external: true,
};

beforeAll(async () => {
  stack = await startStack({
    worker: {
      tools: new ToolRegistry([...BUILTIN_TOOLS, lookupOrder]),
      agent: {
        model: 'fake',
        system: 'You are a test assistant.',
        tools: ['read_artifact', 'calculator', 'lookup_order'],
      },
    },
  });
  gateway = await startGateway({
    client: stack.client,
    host: '127.0.0.1',
    port: 0,
    bodyLimitBytes: 256 * 1024,
    defaultAgent: DEFAULT_AGENT,
  });
  client = new OpenAI({ baseURL: `${gateway.url}/openai/v1`, apiKey: 'not-checked-on-loopback', maxRetries: 0 });
});
afterAll(async () => {
  await gateway?.close();
  await stack?.close();
});
beforeEach(() => {
  stack.fake.reset();
  stack.fake.configure({ tokenDelayMs: 0, firstTokenDelayMs: 0 });
});

/** The text of every message item: `role: text`. */
function describeItems(
  items: Array<{ type: string; role?: string; content?: Array<{ type: string; text?: string }> }>,
): string[] {
  return items.map(
    (item) =>
      `${item.type}/${item.role ?? ''}: ${(item.content ?? []).map((part) => `${part.type}=${part.text ?? ''}`).join('|')}`,
  );
}

/** Sequence numbers only grow (a rejoin's coalesced deltas skip some). */
const isIncreasing = (numbers: number[]) => numbers.every((n, i) => i === 0 || n > numbers[i - 1]!);

describe('conversations and responses', () => {
  it('runs two responses in a conversation; the second request carries the first exchange and items list all four in order', async () => {
    const conversation = await client.conversations.create();
    expect(conversation.object).toBe('conversation');
    expect(await stack.client.exists(conversation.id)).toBe(true);

    const first = await client.responses.create({ conversation: conversation.id, input: 'hello there', model: 'fake' });
    expect(first.status).toBe('completed');
    expect(first.output_text).toBe('echo: hello there');
    expect(first.conversation?.id).toBe(conversation.id);
    expect(first.usage?.input_tokens).toBeGreaterThan(0);

    const second = await client.responses.create({ conversation: conversation.id, input: 'and again' });
    expect(second.output_text).toBe('echo: and again');
    expect(second.id).not.toBe(first.id);
    // The model was sent the first exchange before the new message.
    const request = stack.fake.chatRequests().at(-1)!;
    expect(
      request.messages.map(
        (m) => `${m.role}: ${typeof m.content === 'string' ? m.content : JSON.stringify(m.content)}`,
      ),
    ).toEqual([
      'system: You are a test assistant.',
      'user: hello there',
      'assistant: echo: hello there',
      'user: and again',
    ]);
    // The second request extends the first byte for byte, and the fake provider reports that prefix as cached.
    expect(second.usage?.input_tokens_details.cached_tokens).toBeGreaterThan(0);

    const items = await client.conversations.items.list(conversation.id, { order: 'asc' });
    expect(describeItems(items.data as never)).toEqual([
      'message/user: input_text=hello there',
      'message/assistant: output_text=echo: hello there',
      'message/user: input_text=and again',
      'message/assistant: output_text=echo: and again',
    ]);
    // The assistant items are the responses' output items, by id.
    expect(items.data[1]!.id).toBe(first.output[0]!.id);
    expect(items.data[3]!.id).toBe(second.output[0]!.id);
    // Newest first by default, as OpenAI; pages follow `after`.
    const newest = await client.conversations.items.list(conversation.id, { limit: 1 });
    expect(newest.data.map((i) => i.id)).toEqual([items.data[3]!.id]);
    expect(newest.has_more).toBe(true);
    const all: string[] = [];
    for await (const item of client.conversations.items.list(conversation.id, { limit: 3, order: 'asc' }))
      all.push(String(item.id));
    expect(all).toEqual(items.data.map((i) => i.id));

    // Retrieving either response later gives what the log says.
    const again = await client.responses.retrieve(first.id);
    expect(again).toMatchObject({ id: first.id, status: 'completed', output_text: 'echo: hello there' });
    const fetched = await client.conversations.retrieve(conversation.id);
    expect(fetched).toMatchObject({ id: conversation.id, object: 'conversation' });
  });

  it('streams a response with the SDK helper: text deltas come before response.completed and the final text is the logged reply', async () => {
    const words = Array.from({ length: 30 }, (_, i) => `w${i}`).join(' ');
    stack.fake.setMatcher(({ lastUserText }) => (lastUserText === 'stream please' ? { text: words } : undefined));
    stack.fake.configure({ tokenDelayMs: 5 });
    try {
      const stream = client.responses.stream({ input: 'stream please', model: 'fake', instructions: 'Be brief.' });
      const seen: ResponseStreamEvent[] = [];
      for await (const event of stream) seen.push(event);
      const final = await stream.finalResponse();
      const types = seen.map((e) => e.type);
      expect(types[0]).toBe('response.created');
      expect(types[1]).toBe('response.in_progress');
      expect(types.at(-1)).toBe('response.completed');
      const deltas = seen.filter((e) => e.type === 'response.output_text.delta');
      expect(deltas.length).toBeGreaterThan(1);
      expect(types.indexOf('response.output_text.delta')).toBeLessThan(types.indexOf('response.completed'));
      expect(seen.map((e) => e.sequence_number)).toEqual(seen.map((_, i) => i));
      expect(deltas.map((e) => (e as { delta: string }).delta).join('')).toBe(words);
      expect(final.output_text).toBe(words);

      // The final text equals the assistant message in the log; a new conversation was made with the instructions.
      const sessionId = final.conversation!.id;
      const logged = (await stack.client.events(sessionId, 0)).filter((e) => e.type === 'assistant/message');
      expect(logged).toHaveLength(1);
      expect(textOf((logged[0]!.data as { message: { content: never } }).message.content)).toBe(final.output_text);
      expect((await stack.client.header(sessionId)).agent).toEqual({ model: 'fake', system: 'Be brief.' });
      expect(stack.fake.chatRequests().at(-1)!.messages[0]).toMatchObject({ role: 'system', content: 'Be brief.' });

      // A retrieve of the finished response's stream replays it whole at once: the same events,
      // its text as one delta (coalesced), sequence numbers still increasing.
      const replay = await client.responses.retrieve(final.id, { stream: true });
      const replayed: ResponseStreamEvent[] = [];
      for await (const event of replay) replayed.push(event);
      const isDelta = (e: ResponseStreamEvent) => e.type === 'response.output_text.delta';
      expect(replayed.filter((e) => !isDelta(e))).toEqual(seen.filter((e) => !isDelta(e)));
      expect(replayed.filter(isDelta).map((e) => (e as { delta: string }).delta)).toEqual([words]);
      expect(isIncreasing(replayed.map((e) => e.sequence_number))).toBe(true);
    } finally {
      stack.fake.setMatcher(undefined);
    }
  });

  it('rejoins a dropped stream with retrieve(id, {stream, starting_after}): what was missed coalesced, then the live tail, no gap and no repeat', async () => {
    const words = Array.from({ length: 40 }, (_, i) => `r${i}`).join(' ');
    stack.fake.setMatcher(({ lastUserText }) => (lastUserText === 'drop me' ? { text: words } : undefined));
    // Slow enough that the client drops the stream while the reply is still being written.
    stack.fake.configure({ tokenDelayMs: 40 });
    try {
      const stream = await client.responses.create({ model: 'fake', input: 'drop me', stream: true });
      const before: ResponseStreamEvent[] = [];
      for await (const event of stream) {
        before.push(event);
        if (before.filter((e) => e.type === 'response.output_text.delta').length === 3) break;
      }
      const responseId = (before[0] as { response: { id: string } }).response.id;
      const n = before.at(-1)!.sequence_number;
      const rejoined = await client.responses.retrieve(responseId, { stream: true, starting_after: n });
      const after: ResponseStreamEvent[] = [];
      for await (const event of rejoined) after.push(event);

      // What was missed comes first, coalesced (one delta for the text so far), then the live tail.
      expect(after[0]!.sequence_number).toBeGreaterThan(n);
      const all = [...before, ...after];
      expect(isIncreasing(all.map((e) => e.sequence_number))).toBe(true);
      expect(all.at(-1)!.type).toBe('response.completed');
      const text = all
        .filter((e) => e.type === 'response.output_text.delta')
        .map((e) => (e as { delta: string }).delta)
        .join('');
      expect(text).toBe(words);
      // The reply was still streaming when the client left: some deltas came only on the rejoined stream.
      expect(after.some((e) => e.type === 'response.output_text.delta')).toBe(true);
      // A client starting from scratch gets the finished response whole at once: one text delta, the same end.
      const full: ResponseStreamEvent[] = [];
      for await (const event of await client.responses.retrieve(responseId, { stream: true })) full.push(event);
      expect(
        full.filter((e) => e.type === 'response.output_text.delta').map((e) => (e as { delta: string }).delta),
      ).toEqual([words]);
      expect(full.at(-1)).toEqual(all.at(-1));
      // The SDK's stream helper rejoins the same way and ends with the whole response.
      const helper = client.responses.stream({ response_id: responseId, starting_after: n });
      const helped: ResponseStreamEvent[] = [];
      for await (const event of helper) helped.push(event);
      expect(helped.every((e) => e.sequence_number > n)).toBe(true);
      expect(helped.at(-1)).toEqual(all.at(-1));
      expect((await helper.finalResponse()).output_text).toBe(words);
    } finally {
      stack.fake.setMatcher(undefined);
    }
  });

  it('continues a conversation with previous_response_id', async () => {
    const first = await client.responses.create({ model: 'fake', input: 'first message' });
    const second = await client.responses.create({
      model: 'fake',
      previous_response_id: first.id,
      input: 'second message',
    });
    expect(second.conversation?.id).toBe(first.conversation?.id);
    const request = stack.fake.chatRequests().at(-1)!;
    expect(request.messages.map((m) => m.role)).toEqual(['system', 'user', 'assistant', 'user']);
  });

  it('answers background: true at once with queued or in_progress, and the response completes', async () => {
    stack.fake.configure({ firstTokenDelayMs: 300 });
    const started = await client.responses.create({ model: 'fake', input: 'in the background', background: true });
    expect(['queued', 'in_progress']).toContain(started.status);
    let current = started;
    for (let i = 0; i < 200 && current.status !== 'completed'; i++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      current = await client.responses.retrieve(started.id);
    }
    expect(current.status).toBe('completed');
    expect(current.output_text).toBe('echo: in the background');
  });
});

/** Polls a response until `done` says so (bounded). */
async function waitForResponse(
  id: string,
  done: (response: OpenAI.Responses.Response) => boolean,
): Promise<OpenAI.Responses.Response> {
  let current = await client.responses.retrieve(id);
  for (let i = 0; i < 300 && !done(current); i++) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    current = await client.responses.retrieve(id);
  }
  return current;
}

describe('running responses', () => {
  it('cancels a running response: status cancelled, the partial reply logged as interrupted, the stream ends with response.incomplete', async () => {
    stack.fake.configure({ tokenDelayMs: 100 });
    stack.fake.setMatcher(() => ({ text: Array.from({ length: 60 }, (_, i) => `c${i}`).join(' ') }));
    try {
      const started = await client.responses.create({ model: 'fake', input: 'a long one', background: true });
      const running = await waitForResponse(started.id, (r) => r.output_text.length > 0);
      expect(running.status).toBe('in_progress');
      const cancelled = await client.responses.cancel(started.id);
      expect(cancelled.status).toBe('cancelled');
      expect(cancelled.output).toEqual([expect.objectContaining({ type: 'message', status: 'incomplete' })]);
      const events: ResponseStreamEvent[] = [];
      for await (const event of await client.responses.retrieve(started.id, { stream: true })) events.push(event);
      expect(events.at(-1)).toMatchObject({ type: 'response.incomplete', response: { status: 'cancelled' } });
      const log = await stack.client.events(cancelled.conversation!.id, 0);
      expect(log.find((e) => e.type === 'assistant/message')?.data).toMatchObject({ interrupted: true });
      // Cancelling again answers the cancelled response; a completed one cannot be cancelled.
      expect((await client.responses.cancel(started.id)).status).toBe('cancelled');
    } finally {
      stack.fake.setMatcher(undefined);
    }
    const done = await client.responses.create({ model: 'fake', input: 'quick' });
    await expect(client.responses.cancel(done.id)).rejects.toBeInstanceOf(OpenAI.BadRequestError);
  });

  it("ends a stream with an error event when the session's workflow is gone, and the response fails once a new run repairs the turn", async () => {
    stack.fake.configure({ tokenDelayMs: 200 });
    stack.fake.setMatcher(() => ({ text: Array.from({ length: 100 }, (_, i) => `t${i}`).join(' ') }));
    try {
      const started = await client.responses.create({ model: 'fake', input: 'never finished', background: true });
      await waitForResponse(started.id, (r) => r.output_text.length > 0);
      const sessionId = started.conversation!.id;
      await stack.temporal.workflow.getHandle(workflowIdFor(sessionId)).terminate('test: the workflow is lost');
      const events: ResponseStreamEvent[] = [];
      for await (const event of await client.responses.retrieve(started.id, { stream: true })) events.push(event);
      expect(events.at(-1)).toMatchObject({ type: 'error', code: 'session_not_running' });
      // A new run closes the interrupted turn from the log; the response then reads as failed.
      await stack.client.resume(sessionId);
      const failed = await waitForResponse(started.id, (r) => r.status !== 'in_progress');
      expect(failed.status).toBe('failed');
      expect(failed.error?.message).toMatch(/interrupted/);
    } finally {
      stack.fake.setMatcher(undefined);
    }
  });

  it('refuses a second response while the conversation is answering one (409 conversation_locked)', async () => {
    stack.fake.configure({ tokenDelayMs: 50 });
    stack.fake.setMatcher(() => ({ text: Array.from({ length: 30 }, (_, i) => `l${i}`).join(' ') }));
    try {
      const first = await client.responses.create({ model: 'fake', input: 'take your time', background: true });
      await waitForResponse(first.id, (r) => r.status === 'in_progress');
      const error = await client.responses
        .create({ previous_response_id: first.id, input: 'me too' })
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(OpenAI.ConflictError);
      expect((error as InstanceType<typeof OpenAI.ConflictError>).code).toBe('conversation_locked');
      expect((await waitForResponse(first.id, (r) => r.status !== 'in_progress')).status).toBe('completed');
      // Once it has finished the conversation takes the next response.
      const next = await client.responses.create({ previous_response_id: first.id, input: 'me too' });
      expect(next.status).toBe('completed');
    } finally {
      stack.fake.setMatcher(undefined);
    }
  });
});

describe('tools the caller runs', () => {
  it('ends the response with the function_call; a function_call_output input carries the turn on to its reply', async () => {
    stack.fake.setMatcher(({ body, lastUserText }) => {
      const last = body.messages.at(-1)!;
      if (last.role === 'tool') return { text: `The order is ${String(last.content)}.` };
      if (lastUserText === 'where is order A-7?')
        return { text: 'Let me look.', toolCalls: [{ id: 'call_A7', name: 'lookup_order', arguments: { id: 'A-7' } }] };
      return undefined;
    });
    try {
      const conversation = await client.conversations.create();
      const first = await client.responses.create({ conversation: conversation.id, input: 'where is order A-7?' });
      expect(first.status).toBe('completed');
      const calls = first.output.filter((item) => item.type === 'function_call');
      expect(calls).toEqual([
        expect.objectContaining({
          type: 'function_call',
          call_id: 'call_A7',
          name: 'lookup_order',
          arguments: '{"id":"A-7"}',
          status: 'completed',
        }),
      ]);
      expect(first.output_text).toBe('Let me look.');
      // The turn is still open, waiting for the caller: another plain response is refused.
      await expect(client.responses.create({ conversation: conversation.id, input: 'hello?' })).rejects.toBeInstanceOf(
        OpenAI.ConflictError,
      );
      // A result for a call nothing waits for is refused, naming the item.
      const wrong = await client.responses
        .create({
          previous_response_id: first.id,
          input: [{ type: 'function_call_output', call_id: 'call_nope', output: 'x' }],
        })
        .catch((e: unknown) => e);
      expect(wrong).toBeInstanceOf(OpenAI.BadRequestError);
      expect((wrong as InstanceType<typeof OpenAI.BadRequestError>).param).toBe('input[0].call_id');

      // The client runs the tool and answers with the next response (streamed this time).
      const events: ResponseStreamEvent[] = [];
      const stream = client.responses.stream({
        previous_response_id: first.id,
        input: [{ type: 'function_call_output', call_id: 'call_A7', output: 'shipped on Monday' }],
      });
      for await (const event of stream) events.push(event);
      const second = await stream.finalResponse();
      expect(second.status).toBe('completed');
      expect(second.output_text).toBe('The order is shipped on Monday.');
      expect(events.map((e) => e.type)).toContain('response.output_text.delta');
      expect(second.id).not.toBe(first.id);

      // One turn: the call, its external result and the reply; the conversation's items show all of it.
      const log = await stack.client.events(conversation.id, 0);
      expect(log.filter((e) => e.type === 'turn/start')).toHaveLength(1);
      expect(log.find((e) => e.type === 'tool/result')?.data).toMatchObject({ origin: 'external' });
      const items = await client.conversations.items.list(conversation.id, { order: 'asc' });
      expect(items.data.map((i) => i.type)).toEqual([
        'message',
        'message',
        'function_call',
        'function_call_output',
        'message',
      ]);
      expect(items.data[2]!.id).toBe(calls[0]!.id);
      // Both responses read back the same from the log.
      expect(await client.responses.retrieve(first.id)).toMatchObject({ status: 'completed', output: first.output });
      expect(await client.responses.retrieve(second.id)).toMatchObject({
        status: 'completed',
        output_text: 'The order is shipped on Monday.',
      });
      const replay: ResponseStreamEvent[] = [];
      for await (const event of await client.responses.retrieve(first.id, { stream: true })) replay.push(event);
      expect(replay.filter((e) => e.type === 'response.function_call_arguments.done')).toEqual([
        expect.objectContaining({ name: 'lookup_order', arguments: '{"id":"A-7"}' }),
      ]);
      expect(replay.at(-1)!.type).toBe('response.completed');
    } finally {
      stack.fake.setMatcher(undefined);
    }
  });
  it("takes a response's own function tools for its turn: the model gets them, the caller answers, a different set is refused", async () => {
    const weather = {
      type: 'function' as const,
      name: 'get_weather',
      description: 'The weather in a city.',
      parameters: {
        type: 'object',
        properties: { city: { type: 'string' } },
        required: ['city'],
        additionalProperties: false,
      },
      strict: true,
    };
    stack.fake.setMatcher(({ body, lastUserText }) => {
      const last = body.messages.at(-1)!;
      if (last.role === 'tool') return { text: `Oslo: ${String(last.content)}.` };
      if (lastUserText === 'weather in Oslo?')
        return { text: '', toolCalls: [{ id: 'call_W1', name: 'get_weather', arguments: { city: 'Oslo' } }] };
      return undefined;
    });
    try {
      const conversation = await client.conversations.create();
      const first = await client.responses.create({
        conversation: conversation.id,
        input: 'weather in Oslo?',
        tools: [weather],
      });
      expect(first.status).toBe('completed');
      expect(first.tools).toEqual([weather]);
      expect(first.output.filter((item) => item.type === 'function_call')).toEqual([
        expect.objectContaining({ call_id: 'call_W1', name: 'get_weather', arguments: '{"city":"Oslo"}' }),
      ]);
      // The model was offered the worker's tools and this response's, with its strict flag.
      const offered = stack.fake
        .chatRequests()
        .at(-1)!
        .tools!.map((t) => t.function);
      expect(offered.map((f) => f.name)).toEqual([
        ...stack.fake
          .chatRequests()[0]!
          .tools!.map((t) => t.function.name)
          .filter((n) => n !== 'get_weather'),
        'get_weather',
      ]);
      expect(offered.map((f) => f.name)).toEqual(
        expect.arrayContaining(['read_artifact', 'calculator', 'lookup_order']),
      );
      expect(offered.at(-1)).toMatchObject({ name: 'get_weather', strict: true, parameters: weather.parameters });

      // Answering with other tools is refused; with the same ones (as SDK programs resend them) it carries the turn on.
      const other = await client.responses
        .create({
          previous_response_id: first.id,
          input: [{ type: 'function_call_output', call_id: 'call_W1', output: 'x' }],
          tools: [{ ...weather, name: 'get_forecast' }],
        })
        .catch((e: unknown) => e);
      expect(other).toBeInstanceOf(OpenAI.BadRequestError);
      expect((other as InstanceType<typeof OpenAI.BadRequestError>).param).toBe('tools');
      const second = await client.responses.create({
        previous_response_id: first.id,
        input: [{ type: 'function_call_output', call_id: 'call_W1', output: 'sunny' }],
        tools: [weather],
      });
      expect(second.output_text).toBe('Oslo: sunny.');
      expect(second.tools).toEqual([weather]);

      // The next response has no tools of its own: the model is not offered get_weather any more.
      const third = await client.responses.create({ conversation: conversation.id, input: 'thanks' });
      expect(third.output_text).toBe('echo: thanks');
      expect(third.tools).toEqual([]);
      expect(
        stack.fake
          .chatRequests()
          .at(-1)!
          .tools!.map((t) => t.function.name),
      ).not.toContain('get_weather');

      // A tool named like one of the worker's: the response fails and says why.
      const clash = await client.responses.create({
        conversation: conversation.id,
        input: 'compute',
        tools: [{ ...weather, name: 'calculator' }],
      });
      expect(clash.status).toBe('failed');
      expect(clash.error?.message).toContain('"calculator", which the worker already has');
    } finally {
      stack.fake.setMatcher(undefined);
    }
  });
});

describe('conversation items, metadata and erasure', () => {
  it('logs initial items without calling the model; the first response sends them, with a leading system item as the instructions', async () => {
    const before = stack.fake.chatRequests().length;
    const conversation = await client.conversations.create({
      items: [
        { role: 'developer', content: 'Answer in one word.' },
        { role: 'user', content: 'My name is Ada.' },
        { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'I live in London.' }] },
      ],
      metadata: { tenant: 'acme' },
    });
    expect(conversation.metadata).toEqual({ tenant: 'acme' });
    expect(stack.fake.chatRequests()).toHaveLength(before);
    const initial = await client.conversations.items.list(conversation.id, { order: 'asc' });
    expect(describeItems(initial.data as never)).toEqual([
      'message/user: input_text=My name is Ada.',
      'message/user: input_text=I live in London.',
    ]);

    const response = await client.responses.create({
      conversation: conversation.id,
      input: 'Where do I live?',
      instructions: 'Answer in one word.',
    });
    expect(response.output_text).toBe('echo: Where do I live?');
    expect(
      stack.fake
        .chatRequests()
        .at(-1)!
        .messages.map((m) => `${m.role}: ${String(m.content)}`),
    ).toEqual([
      'system: Answer in one word.',
      'user: My name is Ada.',
      'user: I live in London.',
      'user: Where do I live?',
    ]);
    // The items are the derived history: the initial messages, the input and the reply.
    const items = await client.conversations.items.list(conversation.id, { order: 'asc' });
    expect(items.data).toHaveLength(4);
    const item = await client.conversations.items.retrieve(items.data[3]!.id!, { conversation_id: conversation.id });
    expect(item).toEqual(items.data[3]);
  });

  it('deletes a message item: hidden from the items, the model and the transcript by a logged replacement, kept in the log', async () => {
    const conversation = await client.conversations.create({
      items: [
        { role: 'user', content: 'My card number is 4111.' },
        { role: 'user', content: 'I like tea.' },
      ],
    });
    const first = await client.responses.create({ conversation: conversation.id, input: 'What do I like?' });
    const items = await client.conversations.items.list(conversation.id, { order: 'asc' });
    expect(items.data).toHaveLength(4);
    const card = items.data[0]!;
    const deleted = await client.conversations.items.delete(card.id!, { conversation_id: conversation.id });
    expect(deleted).toMatchObject({ id: conversation.id, object: 'conversation' });
    const after = await client.conversations.items.list(conversation.id, { order: 'asc' });
    expect(describeItems(after.data as never)).toEqual([
      'message/user: input_text=I like tea.',
      'message/user: input_text=What do I like?',
      `message/assistant: output_text=${first.output_text}`,
    ]);
    await expect(
      client.conversations.items.retrieve(card.id!, { conversation_id: conversation.id }),
    ).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    // The assistant's reply goes the same way; the next request sends neither.
    await client.conversations.items.delete(after.data[2]!.id!, { conversation_id: conversation.id });
    await client.responses.create({ conversation: conversation.id, input: 'And now?' });
    expect(
      stack.fake
        .chatRequests()
        .at(-1)!
        .messages.filter((m) => m.role !== 'system')
        .map((m) => `${m.role}: ${String(m.content)}`),
    ).toEqual(['user: I like tea.', 'user: What do I like?', 'user: And now?']);
    // The log keeps what was hidden, replaced on the surface by an empty message.
    const events = await stack.client.events(conversation.id);
    const hidden = events.filter((e) => e.type === 'assistant/message' && (e.data as { hides?: true }).hides);
    const cardSeq = events.findIndex((e) => e.type === 'user/message' && JSON.stringify(e.data).includes('4111'));
    expect(cardSeq).toBeGreaterThanOrEqual(0);
    expect(hidden).toHaveLength(2);
    expect(hidden[0]!.sourceEventSeqs).toEqual([cardSeq]);
    // Deleting it again, or an unknown item: 404.
    await expect(
      client.conversations.items.delete(card.id!, { conversation_id: conversation.id }),
    ).rejects.toBeInstanceOf(OpenAI.NotFoundError);
  });

  it('refuses to delete a function call or its output (a call and its result go together) with BadRequestError', async () => {
    const conversation = await client.conversations.create();
    stack.fake.setMatcher(({ body, lastUserText }) => {
      if (body.messages.at(-1)!.role === 'tool') return { text: 'It shipped.' };
      if (lastUserText === 'Where is order A1?')
        return { toolCalls: [{ id: 'call_del', name: 'lookup_order', arguments: { id: 'A1' } }] };
      return undefined;
    });
    await client.responses.create({ conversation: conversation.id, input: 'Where is order A1?' });
    // The turn waits for the caller's result: deleting now is refused as the conversation is busy.
    const items = await client.conversations.items.list(conversation.id, { order: 'asc' });
    const call = items.data.find((item) => item.type === 'function_call')!;
    const busy = await client.conversations.items
      .delete(items.data[0]!.id!, { conversation_id: conversation.id })
      .catch((e: unknown) => e);
    expect(busy).toBeInstanceOf(OpenAI.ConflictError);
    await client.responses.create({
      conversation: conversation.id,
      input: [{ type: 'function_call_output', call_id: 'call_del', output: 'shipped' }],
    });
    const refused = await client.conversations.items
      .delete(call.id!, { conversation_id: conversation.id })
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(OpenAI.BadRequestError);
    expect((refused as InstanceType<typeof OpenAI.BadRequestError>).message).toMatch(/tool calls/);
    expect((await client.conversations.items.list(conversation.id)).data).toHaveLength(items.data.length + 2);
    stack.fake.setMatcher(undefined);
  });

  it('keeps conversation metadata in the log: updated, cleared and read back by another gateway', async () => {
    const conversation = await client.conversations.create({ metadata: { a: '1' } });
    const updated = await client.conversations.update(conversation.id, { metadata: { a: '2', b: 'x' } });
    expect(updated.metadata).toEqual({ a: '2', b: 'x' });
    const log = await stack.client.events(conversation.id, 0);
    expect(log.filter((e) => e.type === 'session/metadata').map((e) => e.data)).toEqual([
      { metadata: { a: '1' } },
      { metadata: { a: '2', b: 'x' } },
    ]);
    const other = await startGateway({
      client: stack.client,
      host: '127.0.0.1',
      port: 0,
      bodyLimitBytes: 64 * 1024,
      defaultAgent: DEFAULT_AGENT,
    });
    try {
      const elsewhere = new OpenAI({ baseURL: `${other.url}/openai/v1`, apiKey: 'unused', maxRetries: 0 });
      expect((await elsewhere.conversations.retrieve(conversation.id)).metadata).toEqual({ a: '2', b: 'x' });
      const cleared = await elsewhere.conversations.update(conversation.id, { metadata: null });
      expect(cleared.metadata).toEqual({});
    } finally {
      await other.close();
    }
    expect((await client.conversations.retrieve(conversation.id)).metadata).toEqual({});
  });

  it("keeps a response's metadata and takes several user messages in one input", async () => {
    const conversation = await client.conversations.create();
    const response = await client.responses.create({
      conversation: conversation.id,
      metadata: { request: 'r-17' },
      input: [
        { role: 'user', content: 'first part' },
        { role: 'user', content: 'second part' },
      ],
    });
    expect(response.metadata).toEqual({ request: 'r-17' });
    expect(response.output_text).toBe('echo: second part');
    expect((await client.responses.retrieve(response.id)).metadata).toEqual({ request: 'r-17' });
    expect(
      stack.fake
        .chatRequests()
        .at(-1)!
        .messages.slice(1)
        .map((m) => m.content),
    ).toEqual(['first part', 'second part']);
    // The conversation's own metadata is untouched by a response's.
    expect((await client.conversations.retrieve(conversation.id)).metadata).toEqual({});
  });

  it('erases a conversation: its session, log and responses are gone', async () => {
    const response = await client.responses.create({ model: 'fake', input: 'forget me' });
    const id = response.conversation!.id;
    const deleted = await client.conversations.delete(id);
    expect(deleted).toEqual({ id, object: 'conversation.deleted', deleted: true });
    expect(await stack.client.exists(id)).toBe(false);
    await expect(client.conversations.retrieve(id)).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    await expect(client.responses.retrieve(response.id)).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    await expect(client.conversations.delete(id)).rejects.toBeInstanceOf(OpenAI.NotFoundError);
  });
});

describe('refusals raise the SDK error classes', () => {
  it('refuses what would change the meaning with BadRequestError naming the field, and accepts hints', async () => {
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ tools: [{ type: 'web_search' }] }, 'tools[0].type'],
      [{ made_up_field: 1 }, 'made_up_field'],
      [
        { input: [{ role: 'user', content: [{ type: 'input_audio', input_audio: { data: 'AA==', format: 'wav' } }] }] },
        'input[0].content[0].type',
      ],
      // Images are stored as media (issue 50), but only from data: and http(s) URLs.
      [
        { input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'ftp://example.com/x.png' }] }] },
        'input[0].content[0]',
      ],
      [{ input: [{ type: 'web_search_call', id: 'ws_1' }] }, 'input[0].type'],
      [{ prompt: { id: 'pmpt_1' } }, 'prompt'],
      // A forced tool choice needs tools (issue 51): refused, never dropped.
      [{ tool_choice: 'required' }, 'tool_choice'],
    ];
    for (const [patch, param] of cases) {
      const error = await client.responses
        .create({ model: 'fake', input: 'hi', ...patch } as never)
        .catch((e: unknown) => e);
      expect(error, JSON.stringify(patch)).toBeInstanceOf(OpenAI.BadRequestError);
      expect((error as InstanceType<typeof OpenAI.BadRequestError>).param, JSON.stringify(patch)).toBe(param);
      expect((error as InstanceType<typeof OpenAI.BadRequestError>).error, JSON.stringify(patch)).toMatchObject({
        type: 'invalid_request_error',
      });
    }
    // Hints a provider may or may not honour are accepted.
    const hinted = await client.responses.create({
      model: 'fake',
      input: 'hints',
      store: false,
      temperature: 0.2,
      top_p: 1,
      reasoning: { effort: 'low' },
      text: { verbosity: 'low' },
      max_output_tokens: 100,
      truncation: 'disabled',
      service_tier: 'auto',
      user: 'u-1',
      safety_identifier: 's-1',
      prompt_cache_key: 'k-1',
      parallel_tool_calls: false,
      include: [],
    });
    expect(hinted.status).toBe('completed');
    expect(hinted.output_text).toBe('echo: hints');
    // Sampling and the token cap reach the provider; the rest is named in the turn's request header.
    expect(stack.fake.chatRequests().at(-1)).toMatchObject({ temperature: 0.2, top_p: 1, max_tokens: 100 });
    const events = await stack.client.events(hinted.conversation!.id);
    const header = events.findLast((e) => e.type === 'request/header')!.data as { header: { hints?: unknown } };
    expect(header.header.hints).toEqual({
      temperature: 0.2,
      topP: 1,
      maxTokens: 100,
      parallelToolCalls: false,
      ignored: [
        'reasoning',
        'prompt_cache_key',
        'safety_identifier',
        'user',
        'service_tier',
        'store',
        'truncation',
        'include',
        'text.verbosity',
      ],
    });
  });

  it('answers in the structured output format text.format asks for (json_schema passed to the provider)', async () => {
    const schema = {
      type: 'object',
      properties: { city: { type: 'string' }, sunny: { type: 'boolean' } },
      required: ['city', 'sunny'],
      additionalProperties: false,
    };
    const response = await client.responses.create({
      model: 'fake',
      input: 'Paris',
      text: { format: { type: 'json_schema', name: 'weather', schema, strict: true } },
    });
    expect(JSON.parse(response.output_text)).toEqual({ city: 'Paris', sunny: false });
    expect(stack.fake.chatRequests().at(-1)!.response_format).toEqual({
      type: 'json_schema',
      json_schema: { name: 'weather', schema, strict: true },
    });
  });

  it("switches a conversation's model and instructions when a response asks, and runs the default for a name it cannot run", async () => {
    const first = await client.responses.create({ model: 'fake', instructions: 'Be terse.', input: 'hi' });
    const both = await client.responses
      .create({ previous_response_id: first.id, conversation: first.conversation!.id, input: 'again' } as never)
      .catch((e: unknown) => e);
    expect(both).toBeInstanceOf(OpenAI.BadRequestError);
    expect((both as InstanceType<typeof OpenAI.BadRequestError>).param).toBe('previous_response_id');
    const verbose = await client.responses.create({
      previous_response_id: first.id,
      instructions: 'Be verbose.',
      input: 'again',
    });
    expect(verbose.status).toBe('completed');
    expect(verbose.previous_response_id).toBe(first.id);
    expect(verbose.instructions).toBe('Be verbose.');
    expect(stack.fake.chatRequests().at(-1)!.messages[0]).toMatchObject({ role: 'system', content: 'Be verbose.' });
    // Later responses keep what was asked for last.
    const later = await client.responses.create({ previous_response_id: verbose.id, input: 'and again' });
    expect(stack.fake.chatRequests().at(-1)!.messages[0]).toMatchObject({ role: 'system', content: 'Be verbose.' });
    expect(later.conversation?.id).toBe(first.conversation!.id);
    // A model name this gateway cannot run runs its default model, and the response says so.
    const conversation = await client.conversations.create();
    const other = await client.responses.create({ conversation: conversation.id, model: 'gpt-4o-mini', input: 'hi' });
    expect(other.status).toBe('completed');
    expect(other.model).toBe('fake');
  });

  it('answers unknown routes and methods under /openai/v1 in the OpenAI error shape', async () => {
    const unknown = await fetch(`${gateway.url}/openai/v1/assistants`);
    expect(unknown.status).toBe(404);
    expect(Object.keys(((await unknown.json()) as { error: object }).error).sort()).toEqual([
      'code',
      'message',
      'param',
      'type',
    ]);
    const method = await fetch(`${gateway.url}/openai/v1/responses`, { method: 'GET' });
    expect(method.status).toBe(405);
    expect(((await method.json()) as { error: { type: string } }).error.type).toBe('invalid_request_error');
    const badJson = await fetch(`${gateway.url}/openai/v1/responses`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"input": ',
    });
    expect(badJson.status).toBe(400);
    expect(((await badJson.json()) as { error: { code: string } }).error.code).toBe('invalid_json');
  });

  it('answers unknown ids with NotFoundError', async () => {
    await expect(client.conversations.retrieve('conv_does_not_exist')).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    await expect(client.responses.retrieve('resp_bm9wZS9ub3Bl')).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    await expect(client.responses.retrieve('not-a-response-id')).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    await expect(client.responses.create({ conversation: 'conv_does_not_exist', input: 'hi' })).rejects.toBeInstanceOf(
      OpenAI.NotFoundError,
    );
    await expect(client.conversations.items.list('conv_does_not_exist')).rejects.toBeInstanceOf(OpenAI.NotFoundError);
  });

  it('answers a wrong or missing token with AuthenticationError when the gateway has one', async () => {
    const token = 'openai-token-0123456789abcdef';
    const guarded = await startGateway({
      client: stack.client,
      token,
      host: '127.0.0.1',
      port: 0,
      bodyLimitBytes: 64 * 1024,
      defaultAgent: DEFAULT_AGENT,
    });
    try {
      const wrong = new OpenAI({ baseURL: `${guarded.url}/openai/v1`, apiKey: 'wrong-token', maxRetries: 0 });
      const error = await wrong.conversations.create().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(OpenAI.AuthenticationError);
      expect((error as InstanceType<typeof OpenAI.AuthenticationError>).error).toMatchObject({
        type: 'invalid_request_error',
        code: 'invalid_api_key',
      });
      const right = new OpenAI({ baseURL: `${guarded.url}/openai/v1`, apiKey: token, maxRetries: 0 });
      const conversation = await right.conversations.create();
      expect(conversation.object).toBe('conversation');
    } finally {
      await guarded.close();
    }
  });
});
