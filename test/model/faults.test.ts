import { AuthenticationError, BadRequestError } from 'openai';
import { describe, expect, it } from 'vitest';
import { ModelCallError, classifyModelError, retryAfterFromHeaders } from '../../src/model/errors.js';
import { startFakeModelServer } from '../../src/model/fake-server.js';
import { createOpenAIProvider } from '../../src/model/provider.js';
import type { OpenAIProviderConfig } from '../../src/model/provider.js';
import { parseToolCallArguments } from '../../src/model/tool-arguments.js';
import { FakeModelRemote, fakeModelClient, useFakeModel } from '../support/fake-model.js';
import { fakeHeader, userMessage } from '../support/model-fixtures.js';

const fake = useFakeModel();

function provider(extra: Partial<OpenAIProviderConfig> = {}) {
  return createOpenAIProvider({ baseURL: fake().baseURL, apiKey: 'k', ...extra });
}

async function failureOf(promise: Promise<unknown>): Promise<ModelCallError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ModelCallError);
  return error as ModelCallError;
}

const ask = (p = provider(), text = 'hello') => p.stream({ messages: [userMessage(text)], header: fakeHeader() });

describe('injected faults are classified', () => {
  it('429 with retry-after is a retryable rate_limit carrying retryAfterMs', async () => {
    fake().injectFault({ kind: 'rate_limit', retryAfterSeconds: 7 });
    const error = await failureOf(ask());
    expect(error.code).toBe('rate_limit');
    expect(error.failure).toMatchObject({ code: 'rate_limit', retryable: true, status: 429, retryAfterMs: 7000 });
  });

  it('a fault set for N requests fails exactly the next N, then the server answers again', async () => {
    fake().injectFault({ kind: 'server_error', times: 2 });
    expect((await failureOf(ask())).failure).toMatchObject({ code: 'server', retryable: true, status: 500 });
    expect((await failureOf(ask())).failure.code).toBe('server');
    expect((await ask()).content).toEqual([{ type: 'text', text: 'echo: hello' }]);
  });

  it('a hanging server becomes a retryable timeout through the client timeout', async () => {
    fake().injectFault({ kind: 'hang' });
    const error = await failureOf(ask(provider({ timeoutMs: 300 })));
    expect(error.failure).toMatchObject({ code: 'timeout', retryable: true });
  });

  it('a stream that goes quiet mid-reply becomes a timeout with the partial output', async () => {
    fake().enqueueReplies({ text: 'alpha beta gamma delta' });
    fake().configure({ tokenDelayMs: 5_000 });
    const error = await failureOf(ask(provider({ idleTimeoutMs: 200 })));
    expect(error.failure).toMatchObject({ code: 'timeout', retryable: true });
  });

  it('a stream slower in all than the idle limit, but never quiet that long, is not a timeout', async () => {
    // Twelve pieces 100 ms apart: ~1.2 s in all, against an idle limit of 1 s (gaps may stretch
    // under load without reaching it).
    const text = 'one two three four five six seven eight nine ten eleven twelve';
    fake().enqueueReplies({ text });
    fake().configure({ tokenDelayMs: 100 });
    const started = performance.now();
    const result = await ask(provider({ idleTimeoutMs: 1_000 }));
    expect(performance.now() - started).toBeGreaterThan(1_000);
    expect(result.content).toEqual([{ type: 'text', text }]);
  });

  it('a hang ended by the caller aborting resolves as aborted, not as a failure', async () => {
    fake().injectFault({ kind: 'hang' });
    const controller = new AbortController();
    const pending = provider().stream({
      messages: [userMessage('x')],
      header: fakeHeader(),
      signal: controller.signal,
    });
    setTimeout(() => controller.abort(), 50);
    const result = await pending;
    expect(result).toMatchObject({ aborted: true, content: [] });
  });

  it('a stream dropped midway is a retryable network failure that keeps the partial text', async () => {
    fake().enqueueReplies({ text: 'one two three four five six' });
    fake().injectFault({ kind: 'drop_stream', afterChunks: 3 });
    const error = await failureOf(ask(provider({ coalesce: { maxChars: 1 } })));
    expect(error.failure).toMatchObject({ code: 'network', retryable: true });
    expect(error.partial.content).toEqual([{ type: 'text', text: 'one two' }]);
  });

  it('malformed tool-call JSON arrives intact as a tool-call block and fails argument parsing', async () => {
    fake().enqueueReplies({ toolCalls: [{ id: 'c1', name: 'read_file', arguments: { path: 'a.ts' } }] });
    fake().injectFault({ kind: 'malformed_tool_json' });
    const result = await ask();
    const call = result.content[0];
    expect(call?.type).toBe('tool-call');
    if (call?.type !== 'tool-call') return;
    expect(call.id).toBe('c1');
    expect(() => JSON.parse(call.arguments)).toThrow();
    expect(parseToolCallArguments(call.name, call.arguments)).toMatchObject({
      ok: false,
      code: 'INVALID_TOOL_ARGUMENTS',
    });
  });

  it('a prompt above the context limit is a non-retryable context_overflow', async () => {
    fake().configure({ contextLimitTokens: 20 });
    const error = await failureOf(ask(provider(), 'word '.repeat(100)));
    expect(error.failure).toMatchObject({
      code: 'context_overflow',
      retryable: false,
      status: 400,
      providerCode: 'context_length_exceeded',
    });
    expect(error.message).toMatch(/maximum context length is 20 tokens/);
    expect((await ask(provider(), 'short')).content).toEqual([{ type: 'text', text: 'echo: short' }]);
  });

  it('DeepSeek-style overflow without the code is still detected from the message', () => {
    const message = "This model's maximum context length is 131072 tokens. Please reduce the length of the messages.";
    const failure = classifyModelError(
      new BadRequestError(400, { message, code: 'invalid_request_error' }, message, new Headers()),
    );
    expect(failure).toMatchObject({ code: 'context_overflow', retryable: false });
  });

  it('a malformed request body is a non-retryable bad_request', async () => {
    const client = fakeModelClient(fake());
    const error = await client.chat.completions.create({ model: 'fake', messages: [] }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(classifyModelError(error)).toMatchObject({ code: 'bad_request', retryable: false, status: 400 });
    const recorded = fake().requests();
    expect(recorded[0]?.status).toBe(400);
  });

  it('a wrong API key is a non-retryable auth failure', async () => {
    fake().configure({ apiKey: 'the-right-key' });
    const error = await failureOf(ask(provider({ apiKey: 'wrong' })));
    expect(error.failure).toMatchObject({ code: 'auth', retryable: false, status: 401 });
    expect((await ask(provider({ apiKey: 'the-right-key' }))).aborted).toBe(false);
  });

  it('a refused connection is a retryable network failure', async () => {
    const closed = await startFakeModelServer();
    const baseURL = closed.baseURL;
    await closed.close();
    const error = await failureOf(ask(createOpenAIProvider({ baseURL, apiKey: 'k' })));
    expect(error.failure).toMatchObject({ code: 'network', retryable: true });
  });

  it('faults can be set over the control endpoint, as a test in another process would', async () => {
    const remote = new FakeModelRemote(fake().url);
    await remote.injectFaults({ kind: 'rate_limit', retryAfterSeconds: 2 });
    expect((await failureOf(ask())).failure).toMatchObject({ code: 'rate_limit', retryAfterMs: 2000 });
    const recorded = await remote.requests();
    expect(recorded).toHaveLength(1);
    expect(recorded[0]).toMatchObject({ method: 'POST', path: '/v1/chat/completions', status: 429 });
    await remote.reset();
    expect(await remote.requests()).toEqual([]);
  });

  it('the control endpoint refuses an unknown fault kind with a 400', async () => {
    const response = await fetch(`${fake().url}/_control/faults`, {
      method: 'POST',
      body: JSON.stringify({ kind: 'gremlins' }),
    });
    expect(response.status).toBe(400);
  });
});

describe('classification details', () => {
  it('retry-after is read as seconds, as an HTTP date, and retry-after-ms wins', () => {
    const now = Date.parse('2026-01-01T00:00:00Z');
    expect(retryAfterFromHeaders(new Headers({ 'retry-after': '3' }), now)).toBe(3000);
    expect(retryAfterFromHeaders(new Headers({ 'retry-after': 'Thu, 01 Jan 2026 00:00:05 GMT' }), now)).toBe(5000);
    expect(retryAfterFromHeaders(new Headers({ 'retry-after': '3', 'retry-after-ms': '250' }), now)).toBe(250);
    expect(retryAfterFromHeaders(new Headers(), now)).toBeUndefined();
  });

  it('an AuthenticationError is auth and not retryable', () => {
    const error = new AuthenticationError(401, { message: 'bad key' }, 'bad key', new Headers());
    expect(classifyModelError(error)).toMatchObject({ code: 'auth', retryable: false });
  });
});
