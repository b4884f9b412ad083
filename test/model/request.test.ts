import { describe, expect, it } from 'vitest';
import { DEFAULT_MODEL_CATALOGUE, lookupModel, resolveModelCatalogue } from '../../src/model/catalogue.js';
import { createOpenAIProvider } from '../../src/model/provider.js';
import { buildChatRequest } from '../../src/model/request.js';
import type { WireAssistantMessage } from '../../src/model/request.js';
import type { Message } from '../../src/session/messages.js';
import { useFakeModel } from '../support/fake-model.js';
import { assistantMessage, fakeHeader, toolResultMessage, userMessage } from '../support/model-fixtures.js';

const fake = useFakeModel();

describe('buildChatRequest', () => {
  const model = lookupModel(DEFAULT_MODEL_CATALOGUE, 'deepseek-flash');

  it('maps system prompt, user text, assistant tool calls and tool results to the wire shape', () => {
    const body = buildChatRequest({
      model,
      header: {
        provider: 'deepseek',
        model: 'deepseek-flash',
        system: 'Be brief.',
        tools: [{ name: 'read_file', description: 'Read a file', parameters: { type: 'object', properties: {} } }],
        maxTokens: 1000,
        thinking: true,
        reasoningEffort: 'high',
      },
      messages: [
        userMessage('read a.ts'),
        assistantMessage([
          { type: 'reasoning', text: 'I should read it.' },
          { type: 'tool-call', id: 'c1', name: 'read_file', arguments: '{"path":"a.ts"}' },
        ]),
        toolResultMessage('c1', 'export {}'),
      ],
    });
    expect(body).toEqual({
      model: 'deepseek-flash',
      stream: true,
      stream_options: { include_usage: true },
      max_tokens: 1000,
      thinking: { type: 'enabled' },
      reasoning_effort: 'high',
      tools: [
        {
          type: 'function',
          function: { name: 'read_file', description: 'Read a file', parameters: { type: 'object', properties: {} } },
        },
      ],
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'read a.ts' },
        {
          role: 'assistant',
          content: null,
          reasoning_content: 'I should read it.',
          tool_calls: [{ id: 'c1', type: 'function', function: { name: 'read_file', arguments: '{"path":"a.ts"}' } }],
        },
        { role: 'tool', tool_call_id: 'c1', content: 'export {}' },
      ],
    });
  });

  it('drops reasoning from assistant messages without tool calls', () => {
    const body = buildChatRequest({
      model,
      header: { provider: 'deepseek', model: 'deepseek-flash' },
      messages: [
        userMessage('hi'),
        assistantMessage([
          { type: 'reasoning', text: 'greet' },
          { type: 'text', text: 'Hello' },
        ]),
      ],
    });
    expect(body.messages[1]).toEqual({ role: 'assistant', content: 'Hello' });
  });

  it('never sends reasoning_content or thinking to an OpenAI model', () => {
    const body = buildChatRequest({
      model: lookupModel(DEFAULT_MODEL_CATALOGUE, 'gpt-4o'),
      header: { provider: 'openai', model: 'gpt-4o', thinking: true },
      messages: [
        assistantMessage([
          { type: 'reasoning', text: 'r' },
          { type: 'tool-call', id: 'c', name: 't', arguments: '{}' },
        ]),
      ],
    });
    expect(body.thinking).toBeUndefined();
    expect((body.messages[0] as WireAssistantMessage).reasoning_content).toBeUndefined();
  });

  it('resolves the retired DeepSeek names as aliases with their thinking mode', () => {
    const chat = lookupModel(DEFAULT_MODEL_CATALOGUE, 'deepseek-chat');
    expect(chat).toMatchObject({ id: 'deepseek-flash', contextWindow: 1_000_000, forcedThinking: false });
    const body = buildChatRequest({
      model: chat,
      header: { provider: 'deepseek', model: 'deepseek-chat', thinking: true },
      messages: [userMessage('x')],
    });
    expect(body.model).toBe('deepseek-flash');
    expect(body.thinking).toEqual({ type: 'disabled' });
    expect(lookupModel(DEFAULT_MODEL_CATALOGUE, 'deepseek-reasoner').id).toBe('deepseek-v4-pro');
  });

  it('lets config override a model and refuses an unknown model with UNKNOWN_MODEL', () => {
    const catalogue = resolveModelCatalogue({ models: { 'deepseek-flash': { contextWindow: 200_000 } } });
    expect(lookupModel(catalogue, 'deepseek-flash').contextWindow).toBe(200_000);
    expect(() => lookupModel(catalogue, 'nope')).toThrow(expect.objectContaining({ code: 'UNKNOWN_MODEL' }));
    expect(() => resolveModelCatalogue({ models: { brandnew: { contextWindow: 10 } } })).toThrow(
      expect.objectContaining({ code: 'INVALID_MODEL_SPEC' }),
    );
  });
});

describe('reasoning_content round trip through the fake server', () => {
  it('resends reasoning only for the assistant message that made tool calls', async () => {
    const provider = createOpenAIProvider({ baseURL: fake().baseURL, apiKey: 'k' });
    fake().enqueueReplies(
      { reasoning: 'plain-thoughts', text: 'Hello!' },
      { reasoning: 'tool-thoughts', toolCalls: [{ id: 'call_1', name: 'read_file', arguments: { path: 'a.ts' } }] },
      { text: 'done' },
    );
    const header = fakeHeader({
      tools: [{ name: 'read_file', description: 'Read a file', parameters: { type: 'object' } }],
    });
    const history: Message[] = [userMessage('hi')];
    const first = await provider.stream({ messages: history, header });
    history.push(assistantMessage(first.content), userMessage('read a.ts'));
    const second = await provider.stream({ messages: history, header });
    expect(second.content.map((b) => b.type)).toEqual(['reasoning', 'tool-call']);
    history.push(assistantMessage(second.content), toolResultMessage('call_1', 'file body'));
    await provider.stream({ messages: history, header });

    const third = fake().chatRequests()[2];
    const assistants = third?.messages.filter((m) => m.role === 'assistant') ?? [];
    expect(assistants).toHaveLength(2);
    expect(assistants[0]?.reasoning_content).toBeUndefined();
    expect(assistants[0]?.content).toBe('Hello!');
    expect(assistants[1]?.reasoning_content).toBe('tool-thoughts');
    expect(assistants[1]?.tool_calls?.[0]).toMatchObject({
      id: 'call_1',
      function: { name: 'read_file', arguments: '{"path":"a.ts"}' },
    });
    expect(third?.messages.at(-1)).toMatchObject({ role: 'tool', tool_call_id: 'call_1', content: 'file body' });
  });
});
