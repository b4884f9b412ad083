/**
 * Tools of one turn (DESIGN §5.1; the OpenAI API's per-response `tools`): a message brings
 * function tools the caller runs; the model gets them beside the worker's tools in that turn
 * only, each call waits for the caller's result, and they are logged on `turn/start`. Against a
 * real Temporal dev server, SQLite store and the fake model over HTTP.
 */
import { WorkflowUpdateFailedError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  verifyLog,
  type KnownEventType,
  type SessionEvent,
  type StoredEvent,
  type ToolSchema,
} from '../../src/session/index.js';
import { sendUpdate, workflowIdFor } from '../../src/workflows/api.js';
import { eventually, waitForEvent } from '../support/log-wait.js';
import { startStack, type Stack } from '../support/stack.js';

const ofType = <K extends KnownEventType>(events: readonly StoredEvent[], type: K) =>
  events.filter((e) => e.type === type) as Array<SessionEvent<K>>;

const getWeather: ToolSchema = {
  name: 'get_weather',
  description: 'The weather in a city.',
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
};

let stack: Stack;
beforeAll(async () => {
  stack = await startStack();
});
afterAll(async () => {
  await stack?.close();
});
beforeEach(() => {
  stack.fake.reset();
  stack.fake.configure({ tokenDelayMs: 0, firstTokenDelayMs: 0 });
});

const toolNames = (body: { tools?: Array<{ function: { name: string } }> }) =>
  (body.tools ?? []).map((t) => t.function.name);

describe('tools a message brings for its turn', () => {
  it('are offered in that turn only, logged on turn/start, and their calls wait for the caller', async () => {
    const id = `turn-tools-${Date.now()}`;
    stack.fake.setMatcher(({ body, lastUserText }) => {
      const last = body.messages.at(-1)!;
      if (last.role === 'tool') return { text: `It is ${String(last.content)}.` };
      if (lastUserText === 'weather in Oslo?')
        return { text: '', toolCalls: [{ id: 'call_w1', name: 'get_weather', arguments: { city: 'Oslo' } }] };
      return undefined;
    });
    await stack.client.post(id, 'weather in Oslo?', { id: 'm1', tools: [getWeather] });
    const pending = await eventually(async () =>
      (await stack.client.pendingApprovals({ sessionId: id })).find((p) => p.callId === 'call_w1'),
    );
    expect(pending).toMatchObject({ kind: 'external', tool: 'get_weather', arguments: '{"city":"Oslo"}' });
    const first = stack.fake.chatRequests()[0]!;
    // The worker's tools first, then the turn's.
    expect(toolNames(first)).toEqual([
      ...toolNames({ tools: first.tools?.filter((t) => t.function.name !== 'get_weather') }),
      'get_weather',
    ]);
    expect(toolNames(first).length).toBeGreaterThan(1);

    await stack.client.submitToolResult(id, 'call_w1', 'sunny, 21°C');
    await waitForEvent(stack.client, id, (e) => e.type === 'turn/end');
    const reply = await stack.client.send(id, 'and tomorrow?');
    expect(reply.turn).toBe(2);
    expect(reply.text).toBe('echo: and tomorrow?');

    const requests = stack.fake.chatRequests();
    expect(requests).toHaveLength(3);
    expect(toolNames(requests[1]!)).toContain('get_weather');
    expect(toolNames(requests[2]!)).not.toContain('get_weather');

    const events = await stack.client.events(id);
    const starts = ofType(events, 'turn/start');
    expect(starts[0]!.data.tools).toEqual([getWeather]);
    expect(starts[1]!.data.tools).toBeUndefined();
    expect(ofType(events, 'tool/result')[0]!.data).toMatchObject({ origin: 'external' });
    expect(ofType(events, 'assistant/message').at(-2)!.data.message.content).toEqual([
      { type: 'text', text: 'It is sunny, 21°C.' },
    ]);
    // The header the model was called with is in the log for each change: with the tool, then without.
    const headers = ofType(events, 'request/header').map((e) =>
      (e.data.header.tools ?? []).map((t) => t.name).includes('get_weather'),
    );
    expect(headers).toEqual([true, false]);
    expect(verifyLog(await stack.client.header(id), events)).toEqual([]);
  }, 60_000);

  it('a message with tools never joins a running turn: it starts its own', async () => {
    const id = `turn-tools-order-${Date.now()}`;
    stack.fake.enqueueReplies({ text: Array.from({ length: 40 }, (_, i) => `w${i}`).join(' ') });
    stack.fake.configure({ tokenDelayMs: 30 });
    await stack.client.post(id, 'long one', { id: 'a' });
    await waitForEvent(stack.client, id, (e) => e.type === 'assistant/chunk');
    await stack.client.post(id, 'with tools', { id: 'b', tools: [getWeather] });
    await eventually(
      async () => (ofType(await stack.client.events(id), 'turn/end').length === 2 ? true : undefined),
      60_000,
    );
    const events = await stack.client.events(id);
    const starts = ofType(events, 'turn/start');
    const messages = ofType(events, 'user/message');
    expect(messages.map((m) => m.data.id)).toEqual(['a', 'b']);
    // b is logged after turn 2's start, with its tools; turn 1 had none.
    expect(starts[0]!.data.tools).toBeUndefined();
    expect(starts[1]!.data.tools).toEqual([getWeather]);
    expect(messages[1]!.seq).toBeGreaterThan(starts[1]!.seq);
  }, 60_000);

  it("ends the turn with a clear error when a turn tool is named like one of the worker's; the message is logged", async () => {
    const id = `turn-tools-clash-${Date.now()}`;
    const clash: ToolSchema = {
      name: 'calculator',
      description: 'mine',
      parameters: { type: 'object', properties: {} },
    };
    const reply = await stack.client.send(id, 'compute', { tools: [clash] });
    expect(reply.outcome).toBe('error');
    const events = await stack.client.events(id);
    expect(ofType(events, 'user/message').map((m) => m.data.content)).toEqual([[{ type: 'text', text: 'compute' }]]);
    const end = ofType(events, 'turn/end')[0]!;
    expect(end.data.reason).toMatchObject({
      kind: 'error',
      error: { code: 'bad_request', message: expect.stringContaining('"calculator", which the worker already has') },
    });
    expect(stack.fake.chatRequests()).toHaveLength(0);
    expect((await stack.client.send(id, 'again')).outcome).toBe('completed');
  }, 60_000);

  it('refuses bad tools at the client, and from a raw workflow update without logging anything; the turn number is given back', async () => {
    const id = `turn-tools-bad-${Date.now()}`;
    expect((await stack.client.send(id, 'first')).turn).toBe(1);
    const bad = [{ name: 'has spaces', description: 'x', parameters: { type: 'object' } }];
    await expect(stack.client.send(id, 'second', { tools: bad })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    const before = await stack.client.events(id);

    // Past the client (a service talking to Temporal directly): the engine refuses before the turn is logged.
    const raw = await stack.temporal.workflow
      .getHandle(workflowIdFor(id))
      .executeUpdate(sendUpdate, { args: [{ id: 'raw-1', text: 'second', tools: bad as ToolSchema[] }] })
      .catch((error: unknown) => error);
    expect(raw).toBeInstanceOf(WorkflowUpdateFailedError);
    const cause = (raw as WorkflowUpdateFailedError).cause;
    expect(cause).toBeInstanceOf(ApplicationFailure);
    expect((cause as ApplicationFailure).type).toBe('INVALID_ARGUMENT');
    expect((cause as ApplicationFailure).message).toMatch(/not logged.*tools\[0\]\.name/);
    const after = await stack.client.events(id);
    expect(after.map((e) => e.type)).toEqual(before.map((e) => e.type));

    // The next message is turn 2, not 3: the log and the workflow agree.
    const next = await stack.client.send(id, 'third');
    expect(next).toMatchObject({ turn: 2, outcome: 'completed', text: 'echo: third' });
    expect(verifyLog(await stack.client.header(id), await stack.client.events(id))).toEqual([]);
  }, 60_000);
});

describe('an accepted external result', () => {
  it('is logged with its answer, so a run lost before the results batch does not ask for it again', async () => {
    const id = `turn-tools-lost-${Date.now()}`;
    stack.fake.setMatcher(({ body, lastUserText }) => {
      const tools = body.messages.filter((m) => m.role === 'tool');
      if (tools.length === 2)
        return { text: `Oslo: ${String(tools[0]!.content)}; Bergen: ${String(tools[1]!.content)}` };
      if (lastUserText === 'weather in Oslo and Bergen?') {
        return {
          text: '',
          toolCalls: [
            { id: 'call_o', name: 'get_weather', arguments: { city: 'Oslo' } },
            { id: 'call_b', name: 'get_weather', arguments: { city: 'Bergen' } },
          ],
        };
      }
      return undefined;
    });
    await stack.client.post(id, 'weather in Oslo and Bergen?', { tools: [getWeather] });
    await eventually(async () =>
      (await stack.client.pendingApprovals({ sessionId: id })).length === 2 ? true : undefined,
    );
    expect(await stack.client.submitToolResult(id, 'call_o', 'sunny')).toMatchObject({ callId: 'call_o' });
    // The answer is in the log the moment it is acknowledged, result and all.
    const answer = ofType(await stack.client.events(id), 'tool/approval').find((e) => e.data.callId === 'call_o');
    expect(answer?.data).toMatchObject({ decision: 'approve', result: { isError: false, bytes: 5 } });
    expect(await stack.store.artifacts.get(id, answer!.data.result!.locator)).toBe('sunny');

    await stack.temporal.workflow.getHandle(workflowIdFor(id)).terminate('test: the run is lost between two results');
    // Only the unanswered call still waits; the new run (started by the answer) takes the logged result.
    expect((await stack.client.pendingApprovals({ sessionId: id })).map((p) => p.callId)).toEqual(['call_b']);
    await stack.client.submitToolResult(id, 'call_b', 'rain');
    const end = (await waitForEvent(stack.client, id, (e) => e.type === 'turn/end')) as SessionEvent<'turn/end'>;
    expect(end.data.reason).toEqual({ kind: 'completed' });

    const events = await stack.client.events(id);
    expect(ofType(events, 'tool/result').map((e) => [e.data.message.source.callId, e.data.origin])).toEqual([
      ['call_o', 'external'],
      ['call_b', 'external'],
    ]);
    expect(ofType(events, 'tool/approval').map((e) => e.data.callId)).toEqual(['call_o', 'call_b']);
    expect(ofType(events, 'assistant/message').at(-1)!.data.message.content).toEqual([
      { type: 'text', text: 'Oslo: sunny; Bergen: rain' },
    ]);
    expect(verifyLog(await stack.client.header(id), events)).toEqual([]);
  }, 60_000);
});
