/**
 * The AI SDK UI message stream (issue 25) with the `ai` package's own client: `AbstractChat`
 * (what `@ai-sdk/react`'s `useChat` wraps; a framework gives it a state, here a plain array)
 * over `DefaultChatTransport` with only `api` set to the gateway, against the real gateway,
 * a Temporal dev server, a worker and the fake model. Server-side effects are read from the log.
 */
import {
  AbstractChat,
  DefaultChatTransport,
  lastAssistantMessageIsCompleteWithApprovalResponses,
  type ChatInit,
  type ChatState,
  type ChatStatus,
  type UIMessage,
} from 'ai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startGateway, type RunningGateway } from '../../src/gateway/index.js';
import { textOf, type StoredEvent } from '../../src/session/index.js';
import { BUILTIN_TOOLS } from '../../src/tools/builtin.js';
import { ToolRegistry, type Tool } from '../../src/tools/registry.js';
import { startStack, type Stack } from '../support/stack.js';

/** A chat state as a framework keeps it, in a plain array. */
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
  constructor(init: Omit<ChatInit<UIMessage>, 'state'> & { messages?: UIMessage[] }) {
    const state = new ArrayState(init.messages ?? []);
    super({ ...init, state });
  }
  override get messages(): UIMessage[] {
    return this.state.messages;
  }
  override get status(): ChatStatus {
    return this.state.status;
  }
}

const deployTool: Tool = {
  name: 'deploy',
  description: 'Deploys the service to a target.',
  parameters: { type: 'object', properties: { target: { type: 'string' } }, required: ['target'] },
  approval: 'always',
  run: (args) => Promise.resolve({ text: `deployed to ${(args as { target: string }).target}` }),
};

let stack: Stack;
let gateway: RunningGateway;
let api: string;

beforeAll(async () => {
  stack = await startStack({
    worker: {
      tools: new ToolRegistry([...BUILTIN_TOOLS, deployTool]),
      agent: { model: 'fake', system: 'You are a test assistant.', tools: ['calculator', 'deploy'] },
    },
  });
  gateway = await startGateway({
    client: stack.client,
    host: '127.0.0.1',
    port: 0,
    bodyLimitBytes: 1024 * 1024,
    defaultAgent: { model: 'fake' },
  });
  api = `${gateway.url}/ai-sdk/chat`;
});
afterAll(async () => {
  await gateway?.close();
  await stack?.close();
});
beforeEach(() => {
  stack.fake.reset();
  stack.fake.configure({ tokenDelayMs: 0, firstTokenDelayMs: 0 });
});

const chatId = (name: string) => `ui-${name}-${Date.now()}`;
const textParts = (message: UIMessage | undefined) =>
  (message?.parts ?? [])
    .filter((p) => p.type === 'text')
    .map((p) => (p as { text: string }).text)
    .join('');
const turnsOf = (events: StoredEvent[]) => events.filter((e) => e.type === 'turn/start').length;

describe('ai-sdk UI message stream (DefaultChatTransport)', () => {
  it('sends, streams and continues: one turn per message in the session named by the chat id, usage as message metadata', async () => {
    const chat = new NodeChat({ id: chatId('send'), transport: new DefaultChatTransport({ api }) });
    await chat.sendMessage({ text: 'Hello there' });
    expect(chat.status).toBe('ready');
    expect(chat.messages.map((m) => m.role)).toEqual(['user', 'assistant']);
    expect(textParts(chat.messages[1])).toBe('echo: Hello there');
    const metadata = chat.messages[1]!.metadata as { sessionId: string; usage?: { totalTokens: number } };
    expect(metadata.sessionId).toBe(chat.id);
    expect(metadata.usage?.totalTokens).toBeGreaterThan(0);

    await chat.sendMessage({ text: 'And again' });
    expect(textParts(chat.messages[3])).toBe('echo: And again');
    const events = await stack.client.events(chat.id);
    expect(turnsOf(events)).toBe(2);
    expect((await stack.client.history(chat.id)).map((m) => `${m.role}: ${textOf(m.content)}`)).toEqual([
      'user: Hello there',
      'assistant: echo: Hello there',
      'user: And again',
      'assistant: echo: And again',
    ]);
  });

  it('regenerates the last reply in a branch; the chat carries on there, the original keeps its history', async () => {
    const chat = new NodeChat({ id: chatId('regen'), transport: new DefaultChatTransport({ api }) });
    await chat.sendMessage({ text: 'Tell me a story' });
    let n = 0;
    stack.fake.setMatcher(({ lastUserText }) =>
      lastUserText === 'Tell me a story' ? { text: `story ${++n}` } : undefined,
    );
    await chat.regenerate();
    expect(textParts(chat.messages.at(-1))).toBe('story 1');
    // The original session still holds the first reply; a branch holds the new one.
    expect(turnsOf(await stack.client.events(chat.id))).toBe(1);
    const branches = await stack.client.branches(chat.id);
    expect(branches).toHaveLength(1);
    await chat.sendMessage({ text: 'Go on' });
    expect(textParts(chat.messages.at(-1))).toBe('echo: Go on');
    const branch = branches[0]!.sessionId;
    expect((await stack.client.history(branch)).map((m) => textOf(m.content))).toEqual([
      'Tell me a story',
      'story 1',
      'Go on',
      'echo: Go on',
    ]);
  });

  it('resumes a reply after a reload: what was missed comes coalesced, then the live tail, to the full reply', async () => {
    const words = Array.from({ length: 300 }, (_, i) => `w${i}`).join(' ');
    stack.fake.setMatcher(({ lastUserText }) => (lastUserText === 'long please' ? { text: words } : undefined));
    stack.fake.configure({ tokenDelayMs: 5 });
    const id = chatId('resume');
    const first = new NodeChat({ id, transport: new DefaultChatTransport({ api }) });
    const sent = first.sendMessage({ text: 'long please' });
    // Leave mid-reply (a reload): the turn goes on in the worker.
    for (let i = 0; i < 200 && textParts(first.messages[1]).length < 50; i++)
      await new Promise((resolve) => setTimeout(resolve, 20));
    await first.stop();
    await sent;
    expect(textParts(first.messages[1]).length).toBeLessThan(words.length);

    // The resume route sends what was missed as one delta (not word by word), then the live tail.
    const raw = await fetch(`${api}/${id}/stream`);
    expect(raw.status).toBe(200);
    expect(raw.headers.get('x-vercel-ai-ui-message-stream')).toBe('v1');
    const reader = raw.body!.getReader();
    let buffered = '';
    // Whole frames only (the last piece of the buffer may be cut mid-frame).
    const frames = () => buffered.split('\n\n').slice(0, -1);
    while (!frames().some((frame) => frame.includes('"text-delta"')))
      buffered += new TextDecoder().decode((await reader.read()).value);
    await reader.cancel();
    const firstDelta = frames()
      .filter((frame) => frame.startsWith('data: {'))
      .map((frame) => JSON.parse(frame.slice('data: '.length)) as { type: string; delta?: string })
      .find((chunk) => chunk.type === 'text-delta')!;
    expect(firstDelta.delta!.split(' ').length).toBeGreaterThan(5);

    const reloaded = new NodeChat({
      id,
      messages: first.messages.slice(0, 1),
      transport: new DefaultChatTransport({ api }),
    });
    await reloaded.resumeStream();
    expect(reloaded.messages.map((m) => m.role)).toEqual(['user', 'assistant']);
    expect(textParts(reloaded.messages[1])).toBe(words);
    // Nothing runs now: the resume route answers 204 and the chat stays as it is.
    const none = await fetch(`${api}/${id}/stream`);
    expect(none.status).toBe(204);
    expect(turnsOf(await stack.client.events(id))).toBe(1);
  });

  it('asks for a tool approval; the answer carries the turn on to the tool output and the reply', async () => {
    stack.fake.setMatcher(({ body, lastUserText }) => {
      const last = body.messages.at(-1)!;
      if (last.role === 'tool') return { text: `Done: ${String(last.content)}.` };
      if (lastUserText === 'deploy to prod')
        return { toolCalls: [{ id: 'call_ui_deploy', name: 'deploy', arguments: { target: 'prod' } }] };
      return undefined;
    });
    const chat = new NodeChat({
      id: chatId('approve'),
      transport: new DefaultChatTransport({ api }),
      sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
    });
    await chat.sendMessage({ text: 'deploy to prod' });
    const tool = chat.messages[1]!.parts.find((p) => p.type === 'tool-deploy') as {
      state: string;
      input: unknown;
      approval?: { id: string };
    };
    expect(tool.state).toBe('approval-requested');
    expect(tool.input).toEqual({ target: 'prod' });
    await chat.addToolApprovalResponse({ id: tool.approval!.id, approved: true });
    for (let i = 0; i < 200 && !(chat.status === 'ready' && textParts(chat.messages.at(-1)).startsWith('Done')); i++)
      await new Promise((resolve) => setTimeout(resolve, 25));
    const parts = chat.messages.at(-1)!.parts.filter((p) => p.type === 'tool-deploy') as Array<{
      state: string;
      output?: unknown;
    }>;
    expect(parts.at(-1)).toMatchObject({ state: 'output-available', output: 'deployed to prod' });
    expect(textParts(chat.messages.at(-1))).toBe('Done: deployed to prod.');
    const events = await stack.client.events(chat.id);
    expect(
      events.filter((e) => e.type === 'tool/approval').map((e) => (e.data as { decision: string }).decision),
    ).toEqual(['approve']);
    expect(turnsOf(events)).toBe(1);
    // The approval request sent again (a retry): the same continuation from the log, nothing answered twice.
    const again = await fetch(api, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        id: chat.id,
        trigger: 'submit-message',
        messages: [
          chat.messages[0],
          {
            id: 'a-retry',
            role: 'assistant',
            parts: [
              {
                type: 'tool-deploy',
                toolCallId: 'call_ui_deploy',
                state: 'approval-responded',
                input: { target: 'prod' },
                providerExecuted: true,
                approval: { id: 'call_ui_deploy', approved: true },
              },
            ],
          },
        ],
      }),
    });
    expect(again.status).toBe(200);
    const replay = await again.text();
    expect(replay).toContain('"tool-output-available"');
    expect(replay).toContain('Done: deployed to prod.');
    expect(replay.trim().endsWith('data: [DONE]')).toBe(true);
    expect((await stack.client.events(chat.id)).length).toBe(events.length);
  });

  it('ends a failed turn with an error part: the chat shows the error', async () => {
    stack.fake.configure({ tokenDelayMs: 0 });
    stack.fake.setMatcher(({ lastUserText }) => (lastUserText === 'fail please' ? { text: 'x' } : undefined));
    stack.fake.injectFault({ kind: 'server_error', status: 500, times: 20 });
    const errors: Error[] = [];
    const chat = new NodeChat({
      id: chatId('error'),
      transport: new DefaultChatTransport({ api }),
      onError: (error) => errors.push(error),
    });
    await chat.sendMessage({ text: 'fail please' });
    expect(chat.status).toBe('error');
    expect(errors.length).toBeGreaterThan(0);
  });
});
