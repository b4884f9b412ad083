/**
 * The LangGraph Agent Server subset (issue 25) with `@langchain/langgraph-sdk`'s own `Client`,
 * as its docs show with only `apiUrl` changed, against the real gateway, a Temporal dev server,
 * a worker and the fake model. Server-side effects are read from the log.
 */
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client } from '@langchain/langgraph-sdk';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startGateway, type RunningGateway } from '../../src/gateway/index.js';
import { signWebhook } from '../../src/gateway/langgraph/webhooks.js';
import type { StoredEvent } from '../../src/session/index.js';
import { BUILTIN_TOOLS } from '../../src/tools/builtin.js';
import { ToolRegistry, type Tool } from '../../src/tools/registry.js';
import { eventually } from '../support/log-wait.js';
import { startStack, type Stack } from '../support/stack.js';

const deployTool: Tool = {
  name: 'deploy',
  description: 'Deploys the service to a target.',
  parameters: { type: 'object', properties: { target: { type: 'string' } }, required: ['target'] },
  approval: 'always',
  run: (args) => Promise.resolve({ text: `deployed to ${(args as { target: string }).target}` }),
};

const WEBHOOK_SECRET = 'langgraph-webhook-test-secret';

let stack: Stack;
let gateway: RunningGateway;
let client: Client;

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
    webhookSecret: WEBHOOK_SECRET,
  });
  client = new Client({ apiUrl: `${gateway.url}/langgraph` });
});

afterAll(async () => {
  await gateway?.close();
  await stack?.close();
});

beforeEach(() => {
  stack.fake.reset();
  stack.fake.configure({ tokenDelayMs: 0, firstTokenDelayMs: 0 });
});

type Values = {
  messages: Array<{ type: string; content: string; id: string; tool_calls?: unknown[] }>;
  __interrupt__?: unknown[];
};
const human = (content: string) => ({ messages: [{ role: 'user', content }] });
const typesOf = (values: Values) => values.messages.map((m) => m.type);
const events = (id: string): Promise<StoredEvent[]> => stack.client.events(id, 0);

function deployMatcher(): void {
  stack.fake.setMatcher(({ body, lastUserText }) => {
    const last = body.messages.at(-1)!;
    if (last.role === 'tool') return { text: `Done: ${String(last.content)}.` };
    if (lastUserText === 'deploy to prod')
      return { toolCalls: [{ id: `call_lg_${Date.now()}`, name: 'deploy', arguments: { target: 'prod' } }] };
    return undefined;
  });
}

describe('langgraph-sdk Client against /langgraph', () => {
  it('finds the assistant; creates, gets, searches, patches and deletes (erases) threads', async () => {
    expect(await client.assistants.get('agent')).toMatchObject({ assistant_id: 'agent', graph_id: 'agent' });
    expect((await client.assistants.search({ graphId: 'agent' })).map((a) => a.assistant_id)).toEqual(['agent']);
    await expect(client.assistants.get('other')).rejects.toThrow(/404/);

    const tag = `t${Date.now()}`;
    const thread = await client.threads.create({ metadata: { user: 'ada', tag, n: 3 } });
    expect(thread).toMatchObject({ status: 'idle', metadata: { user: 'ada', tag, n: 3 }, values: { messages: [] } });
    expect(await stack.client.exists(thread.thread_id)).toBe(true);
    await expect(client.threads.create({ threadId: thread.thread_id })).rejects.toThrow(/409/);
    expect((await client.threads.create({ threadId: thread.thread_id, ifExists: 'do_nothing' })).thread_id).toBe(
      thread.thread_id,
    );
    await client.threads.create({ metadata: { user: 'bob', tag } });

    const found = await client.threads.search({ metadata: { tag, user: 'ada' } });
    expect(found.map((t) => t.thread_id)).toEqual([thread.thread_id]);
    expect((await client.threads.search({ metadata: { tag }, limit: 10 })).length).toBe(2);

    const patched = await client.threads.update(thread.thread_id, { metadata: { user: 'ada l.' } });
    expect(patched.metadata).toMatchObject({ user: 'ada l.', tag, n: 3 });
    expect((await client.threads.get(thread.thread_id)).metadata).toMatchObject({ user: 'ada l.' });

    await client.threads.delete(thread.thread_id);
    expect(await stack.client.exists(thread.thread_id)).toBe(false);
    await expect(client.threads.get(thread.thread_id)).rejects.toThrow(/404/);
  });

  it('streams a run (values, updates, messages-tuple): the state is the derived history in LangChain format', async () => {
    const thread = await client.threads.create();
    const seen: Array<{ event: string; data: unknown; id?: string }> = [];
    let created: { run_id: string } | undefined;
    for await (const part of client.runs.stream(thread.thread_id, 'agent', {
      input: human('hello there'),
      streamMode: ['values', 'updates', 'messages-tuple'],
      onRunCreated: (meta) => (created = meta),
    }))
      seen.push(part as never);
    expect(seen[0]).toMatchObject({ event: 'metadata' });
    const runId = (seen[0]!.data as { run_id: string }).run_id;
    expect(created?.run_id).toBe(runId);
    const values = seen.filter((p) => p.event === 'values').map((p) => p.data as Values);
    expect(typesOf(values[0]!)).toEqual(['human']);
    const final = values.at(-1)!;
    expect(typesOf(final)).toEqual(['human', 'ai']);
    expect(final.messages[1]!.content).toBe('echo: hello there');
    const chunks = seen
      .filter((p) => p.event === 'messages')
      .map((p) => p.data as [{ id: string; content: string }, { langgraph_node: string }]);
    expect(chunks.map(([c]) => c.content).join('')).toBe('echo: hello there');
    expect(new Set(chunks.map(([c]) => c.id))).toEqual(new Set([final.messages[1]!.id]));
    expect(chunks[0]![1].langgraph_node).toBe('agent');
    expect(seen.some((p) => p.event === 'updates' && 'agent' in (p.data as object))).toBe(true);
    // Every frame after metadata carries an id for Last-Event-ID.
    expect(seen.slice(1).every((p) => typeof p.id === 'string' && /^\d+-\d+$/.test(p.id))).toBe(true);

    // The run and the thread, as the API reports them; the state and history.
    expect(await client.runs.get(thread.thread_id, runId)).toMatchObject({
      run_id: runId,
      status: 'success',
      thread_id: thread.thread_id,
    });
    expect((await client.runs.list(thread.thread_id)).map((r) => r.run_id)).toEqual([runId]);
    const state = await client.threads.getState<Values>(thread.thread_id);
    expect(typesOf(state.values)).toEqual(['human', 'ai']);
    expect(state.next).toEqual([]);
    const second = await client.runs.wait(thread.thread_id, 'agent', { input: human('and again') });
    expect(typesOf(second as Values)).toEqual(['human', 'ai', 'human', 'ai']);
    const history = await client.threads.getHistory<Values>(thread.thread_id);
    expect(history.map((s) => s.values.messages.length)).toEqual([4, 2]);
    const older = await client.threads.getState<Values>(thread.thread_id, history[1]!.checkpoint.checkpoint_id!);
    expect(typesOf(older.values)).toEqual(['human', 'ai']);
    // One turn per run, logged in the session named by the thread; the inspector's timeline
    // shows them like any other turn, and the OpenAPI document lists the routes.
    expect((await events(thread.thread_id)).filter((e) => e.type === 'turn/start')).toHaveLength(2);
    const timeline = (await (await fetch(`${gateway.url}/v1/sessions/${thread.thread_id}/turns`)).json()) as {
      turns: Array<{ turn: number; outcome: unknown }>;
    };
    expect(timeline.turns.map((t) => t.turn)).toEqual([1, 2]);
    const openapi = (await (await fetch(`${gateway.url}/v1/openapi.json`)).json()) as {
      paths: Record<string, unknown>;
    };
    expect(Object.keys(openapi.paths)).toEqual(
      expect.arrayContaining([
        '/langgraph/threads/{thread_id}/runs/stream',
        '/langgraph/threads/{thread_id}/runs/{run_id}/stream',
      ]),
    );
  });

  it('runs.create then join; a copy is a fork with the same state that goes its own way', async () => {
    const thread = await client.threads.create();
    const run = await client.runs.create(thread.thread_id, 'agent', { input: human('background work') });
    expect(['pending', 'running', 'success']).toContain(run.status);
    const joined = (await client.runs.join(thread.thread_id, run.run_id)) as Values;
    expect(joined.messages.at(-1)!.content).toBe('echo: background work');
    expect((await client.runs.get(thread.thread_id, run.run_id)).status).toBe('success');

    const copy = await client.threads.copy(thread.thread_id);
    expect(copy.thread_id).not.toBe(thread.thread_id);
    expect((await stack.client.header(copy.thread_id)).parentSession).toBe(thread.thread_id);
    expect(typesOf(copy.values as Values)).toEqual(['human', 'ai']);
    await client.runs.wait(copy.thread_id, 'agent', { input: human('only in the copy') });
    expect(((await client.threads.get(copy.thread_id)).values as Values).messages).toHaveLength(4);
    expect(((await client.threads.get(thread.thread_id)).values as Values).messages).toHaveLength(2);
  });

  it('interrupts for a tool approval and resumes with command.resume (the LangChain HITL decision shape)', async () => {
    deployMatcher();
    const thread = await client.threads.create();
    const interrupted = (await client.runs.wait(thread.thread_id, 'agent', {
      input: human('deploy to prod'),
    })) as Values;
    const interrupt = interrupted.__interrupt__![0] as {
      id: string;
      value: { action_requests: Array<{ name: string; args: unknown }> };
    };
    expect(interrupt.value.action_requests[0]).toMatchObject({ name: 'deploy', args: { target: 'prod' } });
    const waiting = await client.threads.get(thread.thread_id);
    expect(waiting.status).toBe('interrupted');
    expect(Object.values(waiting.interrupts).flat()).toHaveLength(1);
    const state = await client.threads.getState(thread.thread_id);
    expect(state.next).toEqual(['tools']);
    expect(state.tasks[0]!.interrupts[0]!.id).toBe(interrupt.id);
    // A new input while it waits is refused (multitask reject).
    await expect(client.runs.create(thread.thread_id, 'agent', { input: human('something else') })).rejects.toThrow(
      /409/,
    );

    const parts: Array<{ event: string; data: unknown }> = [];
    for await (const part of client.runs.stream(thread.thread_id, 'agent', {
      command: { resume: { decisions: [{ type: 'approve' }] } },
      streamMode: ['values', 'updates'],
    }))
      parts.push(part as never);
    const final = parts.filter((p) => p.event === 'values').at(-1)!.data as Values;
    expect(typesOf(final)).toEqual(['human', 'ai', 'tool', 'ai']);
    expect(final.messages.at(-1)!.content).toBe('Done: deployed to prod.');
    expect(parts.some((p) => p.event === 'updates' && 'tools' in (p.data as object))).toBe(true);
    const approval = (await events(thread.thread_id)).find((e) => e.type === 'tool/approval');
    expect(approval?.data).toMatchObject({ decision: 'approve' });
    expect((approval?.data as { by: string }).by).toMatch(/^langgraph:run:/);
    const runs = await client.runs.list(thread.thread_id);
    expect(runs.map((r) => r.status)).toEqual(['success', 'interrupted']);
    expect((await client.threads.get(thread.thread_id)).status).toBe('idle');

    // A rejection with a message: the model sees the reason.
    const denied = (await client.runs.wait(thread.thread_id, 'agent', { input: human('deploy to prod') })) as Values;
    expect(denied.__interrupt__).toHaveLength(1);
    const after = (await client.runs.wait(thread.thread_id, 'agent', {
      command: { resume: { decisions: [{ type: 'reject', message: 'not today' }] } },
    })) as Values;
    expect(after.messages.at(-2)).toMatchObject({ type: 'tool' });
    expect(after.messages.at(-2)!.content).toContain('not today');
  });

  it('a spend cap the turn reaches is an interrupt; resuming with a new budget finishes the run', async () => {
    stack.fake.setMatcher(({ body, lastUserText }) => {
      const last = body.messages.at(-1)!;
      if (last.role === 'tool') return { text: `The answer is ${String(last.content)}.` };
      if (lastUserText === 'compute please')
        return { toolCalls: [{ name: 'calculator', arguments: { expression: '6*7' } }] };
      return undefined;
    });
    const thread = await client.threads.create();
    await stack.client.setBudget(thread.thread_id, { turn: { modelCalls: 1 } });
    const interrupted = (await client.runs.wait(thread.thread_id, 'agent', {
      input: human('compute please'),
    })) as Values;
    const interrupt = interrupted.__interrupt__![0] as { id: string; value: Record<string, unknown> };
    expect(interrupt.value).toMatchObject({ type: 'budget', cap: 'modelCalls', scope: 'turn', used: 1, limit: 1 });
    expect(interrupt.id).toMatch(/^budget-\d+$/);
    const waiting = await client.threads.get(thread.thread_id);
    expect(waiting.status).toBe('interrupted');
    expect(Object.keys(waiting.interrupts)).toEqual([interrupt.id]);
    // A resume that is not a budget is refused, naming what to send.
    await expect(
      client.runs.wait(thread.thread_id, 'agent', { command: { resume: { decisions: [{ type: 'approve' }] } } }),
    ).rejects.toThrow(/422/);
    await expect(
      client.runs.wait(thread.thread_id, 'agent', { command: { resume: { budget: { turn: { calls: 3 } } } } }),
    ).rejects.toThrow(/422.*unknown limit budget.turn.calls/);
    const after = (await client.runs.wait(thread.thread_id, 'agent', {
      command: { resume: { budget: { turn: { modelCalls: 3 } } } },
    })) as Values;
    expect(after.__interrupt__).toBeUndefined();
    expect(typesOf(after)).toEqual(['human', 'ai', 'tool', 'ai']);
    expect(after.messages.at(-1)!.content).toBe('The answer is 42.');
    const budget = (await events(thread.thread_id)).filter((e) => e.type === 'session/budget').at(-1);
    expect((budget?.data as { by: string }).by).toMatch(/^langgraph:run:/);
    expect((await client.runs.list(thread.thread_id)).map((r) => r.status)).toEqual(['success', 'interrupted']);
    expect((await client.threads.get(thread.thread_id)).status).toBe('idle');
  });

  it('rejoins a run mid-reply with Last-Event-ID: what was missed comes coalesced, then the live tail', async () => {
    const words = Array.from({ length: 300 }, (_, i) => `w${i}`).join(' ');
    stack.fake.setMatcher(({ lastUserText }) => (lastUserText === 'long please' ? { text: words } : undefined));
    stack.fake.configure({ tokenDelayMs: 5 });
    const thread = await client.threads.create();
    const abort = new AbortController();
    let runId = '';
    let lastId: string | undefined;
    let text = '';
    try {
      for await (const part of client.runs.stream(thread.thread_id, 'agent', {
        input: human('long please'),
        streamMode: 'messages-tuple',
        signal: abort.signal,
      })) {
        if (part.event === 'metadata') runId = (part.data as { run_id: string }).run_id;
        if (part.event === 'messages') {
          text += (part.data as unknown as [{ content: string }])[0].content;
          lastId = (part as unknown as { id?: string }).id;
        }
        if (text.length > 60) abort.abort();
      }
    } catch (error) {
      if (!abort.signal.aborted) throw error;
    }
    expect(text.length).toBeLessThan(words.length);
    // The reply goes on in the worker while no one listens.
    await new Promise((resolve) => setTimeout(resolve, 300));
    const frames: Array<{ event: string; data: unknown }> = [];
    for await (const part of client.runs.joinStream(thread.thread_id, runId, {
      lastEventId: lastId,
      streamMode: 'messages-tuple',
    }))
      frames.push(part as never);
    const chunks = frames
      .filter((f) => f.event === 'messages')
      .map((f) => (f.data as [{ content: string }])[0].content);
    // The first frame carries everything missed at once (many words), the rest is the live tail.
    expect(chunks[0]!.split(' ').length).toBeGreaterThan(5);
    expect(text + chunks.join('')).toBe(words);
    expect((await client.runs.get(thread.thread_id, runId)).status).toBe('success');
  });

  it('cancels a running run; enqueue runs the next input as its own turn after it', async () => {
    stack.fake.setMatcher(({ lastUserText }) =>
      lastUserText === 'slow one' ? { text: Array.from({ length: 400 }, (_, i) => `s${i}`).join(' ') } : undefined,
    );
    stack.fake.configure({ tokenDelayMs: 10 });
    const thread = await client.threads.create();
    const slow = await client.runs.create(thread.thread_id, 'agent', { input: human('slow one') });
    await eventually(async () =>
      (await client.runs.get(thread.thread_id, slow.run_id)).status === 'running' ? true : undefined,
    );
    const queued = await client.runs.create(thread.thread_id, 'agent', {
      input: human('queued'),
      multitaskStrategy: 'enqueue',
    });
    await client.runs.cancel(thread.thread_id, slow.run_id, true);
    expect((await client.runs.get(thread.thread_id, slow.run_id)).status).toBe('interrupted');
    const joined = (await client.runs.join(thread.thread_id, queued.run_id)) as Values;
    expect(joined.messages.at(-1)!.content).toBe('echo: queued');
    const turns = (await events(thread.thread_id))
      .filter((e) => e.type === 'turn/end')
      .map((e) => (e.data as { reason: { kind: string } }).reason.kind);
    expect(turns).toEqual(['aborted', 'completed']);
  });

  it("on_disconnect 'cancel': a client that leaves cancels the run; a gateway that closes does not", async () => {
    const words = Array.from({ length: 300 }, (_, i) => `d${i}`).join(' ');
    stack.fake.setMatcher(({ lastUserText }) => (lastUserText.startsWith('leave') ? { text: words } : undefined));
    stack.fake.configure({ tokenDelayMs: 5 });
    const readSome = async (api: Client, threadId: string, input: string, abort: AbortController) => {
      let runId = '';
      let text = '';
      try {
        for await (const part of api.runs.stream(threadId, 'agent', {
          input: human(input),
          streamMode: 'messages-tuple',
          onDisconnect: 'cancel',
          signal: abort.signal,
        })) {
          if (part.event === 'metadata') runId = (part.data as { run_id: string }).run_id;
          if (part.event === 'messages') text += (part.data as unknown as [{ content: string }])[0].content;
          if (text.length > 40 && !abort.signal.aborted) abort.abort();
        }
      } catch (error) {
        if (!abort.signal.aborted) throw error;
      }
      return runId;
    };
    // The client leaves: the turn is cancelled (its partial reply logged as interrupted).
    const left = await client.threads.create();
    const leftRun = await readSome(client, left.thread_id, 'leave now', new AbortController());
    await eventually(async () =>
      (await client.runs.get(left.thread_id, leftRun)).status === 'interrupted' ? true : undefined,
    );
    expect((await events(left.thread_id)).find((e) => e.type === 'turn/end')?.data).toMatchObject({
      reason: { kind: 'aborted' },
    });

    // The gateway closes under the stream: the run goes on and completes.
    const other = await startGateway({ client: stack.client, host: '127.0.0.1', port: 0, bodyLimitBytes: 1024 * 1024 });
    const api = new Client({ apiUrl: `${other.url}/langgraph`, callerOptions: { maxRetries: 0 } });
    const thread = await api.threads.create();
    const stream = api.runs.stream(thread.thread_id, 'agent', {
      input: human('leave the gateway'),
      streamMode: 'messages-tuple',
      onDisconnect: 'cancel',
    });
    let runId = '';
    for await (const part of stream) {
      if (part.event === 'metadata') runId = (part.data as { run_id: string }).run_id;
      if (part.event === 'messages') break;
    }
    await other.close();
    const values = (await client.runs.join(thread.thread_id, runId)) as Values;
    expect(values.messages.at(-1)!.content).toBe(words);
    expect((await client.runs.get(thread.thread_id, runId)).status).toBe('success');
  });

  it('creates the thread with if_not_exists and answers graph-specific fields with a 422 naming them', async () => {
    const id = `lg-new-${Date.now()}`;
    const values = (await client.runs.wait(id, 'agent', { input: human('hi'), ifNotExists: 'create' })) as Values;
    expect(typesOf(values)).toEqual(['human', 'ai']);
    await expect(client.runs.wait(`lg-missing-${Date.now()}`, 'agent', { input: human('hi') })).rejects.toThrow(/404/);
    await expect(client.runs.wait(id, 'agent', { input: human('hi'), interruptBefore: ['tools'] })).rejects.toThrow(
      /422.*interrupt_before/,
    );
    await expect(client.runs.wait(id, 'agent', { input: human('hi'), checkpointId: '1ef-foreign' })).rejects.toThrow(
      /422.*checkpoint_id/,
    );
    await expect(client.runs.wait(id, 'agent', { input: { messages: [], plan: 'x' } })).rejects.toThrow(
      /422.*input\.plan/,
    );
    await expect(
      client.runs.wait(id, 'agent', { input: { messages: [{ role: 'assistant', content: 'x' }] } }),
    ).rejects.toThrow(/422.*input\.messages\[0\]/);
    await expect(client.runs.create(id, 'agent', { input: human('x'), streamMode: 'debug' })).rejects.toThrow(
      /422.*stream_mode/,
    );
    await expect(client.threads.updateState(id, { values: { messages: [] } })).rejects.toThrow(/422/);
    expect((await events(id)).filter((e) => e.type === 'turn/start')).toHaveLength(1);
  });

  it("authenticates the SDK's apiKey (x-api-key) against the gateway token", async () => {
    const token = 'langgraph-sdk-gateway-token';
    const guarded = await startGateway({
      client: stack.client,
      host: '127.0.0.1',
      port: 0,
      bodyLimitBytes: 1024 * 1024,
      token,
    });
    try {
      const withKey = new Client({ apiUrl: `${guarded.url}/langgraph`, apiKey: token });
      const thread = await withKey.threads.create();
      expect((await withKey.threads.get(thread.thread_id)).thread_id).toBe(thread.thread_id);
      const without = new Client({
        apiUrl: `${guarded.url}/langgraph`,
        apiKey: null,
        callerOptions: { maxRetries: 0 },
      });
      await expect(without.threads.get(thread.thread_id)).rejects.toThrow(/401/);
      const wrong = new Client({
        apiUrl: `${guarded.url}/langgraph`,
        apiKey: 'not-the-token-at-all',
        callerOptions: { maxRetries: 0 },
      });
      await expect(wrong.threads.get(thread.thread_id)).rejects.toThrow(/401/);
    } finally {
      await guarded.close();
    }
  });

  it('posts a signed webhook when a run ends, retrying a receiver that fails first', async () => {
    const received: Array<{ body: string; signature: string }> = [];
    let failures = 1;
    const server = createServer((req: IncomingMessage, res) => {
      let body = '';
      req.on('data', (d: Buffer) => (body += d.toString()));
      req.on('end', () => {
        if (failures-- > 0) {
          res.writeHead(503).end();
          return;
        }
        received.push({ body, signature: String(req.headers['x-sessionlog-signature']) });
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
      const thread = await client.threads.create();
      const run = await client.runs.create(thread.thread_id, 'agent', { input: human('notify me'), webhook: url });
      await eventually(async () => (received.length > 0 ? true : undefined), 20_000);
      const payload = JSON.parse(received[0]!.body) as { run_id: string; status: string; values: Values };
      expect(payload).toMatchObject({ run_id: run.run_id, thread_id: thread.thread_id, status: 'success' });
      expect(payload.values.messages.at(-1)!.content).toBe('echo: notify me');
      const t = Number(/t=(\d+)/.exec(received[0]!.signature)![1]);
      expect(received[0]!.signature).toBe(signWebhook(WEBHOOK_SECRET, t, received[0]!.body));
    } finally {
      server.close();
    }
  });
});
