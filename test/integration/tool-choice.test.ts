/**
 * Forced tool choice through the workflow (issue 51): a turn's `toolChoice` and
 * `parallelToolCalls` are logged on its `turn/start`, copied into each step's request header
 * and sent to the model; a forced choice (`required`, a named tool) at the turn's first model
 * step only, so the model can answer once its tool has run. A retried step sends what its
 * header says, and the workflow's history replays without a determinism error. A choice the
 * turn cannot honour ends the turn as a bad request before any model call.
 */
import { randomUUID } from 'node:crypto';
import { Worker } from '@temporalio/worker';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { SESSION_FAILURE_CONVERTER_PATH, SessionPayloadCodec } from '../../src/client/session-codec.js';
import type { RequestHeader, StoredEvent, TurnHints } from '../../src/session/index.js';
import { workflowIdFor } from '../../src/workflows/api.js';
import { workflowBundle } from '../../src/worker.js';
import { startStack, type Stack } from '../support/stack.js';

let stack: Stack;

beforeAll(async () => {
  stack = await startStack({ worker: { agent: { model: 'fake', tools: ['calculator'] } } });
}, 120_000);
afterAll(async () => {
  await stack?.close();
});
beforeEach(() => {
  stack.fake.reset();
});

const headersOf = (events: readonly StoredEvent[]) =>
  events
    .filter((event) => event.type === 'request/header')
    .map((event) => (event.data as { header: RequestHeader; reason: string }).header);

describe('a forced tool choice in the workflow', () => {
  it("is sent at the turn's first model step only (retried or not), logged in each step's request header, and the history replays", async () => {
    const id = `tc_${randomUUID()}`;
    await stack.client.create({ sessionId: id });
    // The first attempt of the first step fails: its retry must send the same forced choice.
    stack.fake.injectFault({ kind: 'server_error' });
    const hints: TurnHints = { toolChoice: 'required', parallelToolCalls: false };
    const reply = await stack.client.send(id, '6*7', { hints });

    // The script would answer in text; forced, the model called a tool, then answered.
    expect(reply.outcome).toBe('completed');
    const requests = stack.fake.chatRequests();
    expect(requests).toHaveLength(3);
    for (const first of requests.slice(0, 2)) {
      expect(first.tool_choice).toBe('required');
      expect(first.parallel_tool_calls).toBe(false);
    }
    expect(requests[2]!.tool_choice).toBeUndefined();
    expect(requests[2]!.parallel_tool_calls).toBe(false);
    // The step-1 reply called one of the turn's tools (one call: parallel_tool_calls false); step 2 got its result.
    const called = requests[2]!.messages.at(-2)!;
    expect(called.role).toBe('assistant');
    expect(called.tool_calls).toHaveLength(1);
    expect(requests[0]!.tools!.map((tool) => tool.function.name)).toContain(called.tool_calls![0]!.function.name);
    expect(requests[2]!.messages.at(-1)).toMatchObject({ role: 'tool', tool_call_id: called.tool_calls![0]!.id });
    expect(reply.text).toBe('echo: 6*7');

    const events = await stack.client.events(id);
    const start = events.find((event) => event.type === 'turn/start')!;
    expect((start.data as { hints?: TurnHints }).hints).toEqual(hints);
    const [stepOne, stepTwo, ...more] = headersOf(events);
    expect(more).toEqual([]);
    expect(stepOne!.hints).toEqual(hints);
    expect(stepTwo!.hints).toEqual({ parallelToolCalls: false });

    // The workflow replays from its history with the hints where they were (payloads sealed with the session's key).
    const history = await stack.temporal.workflow.getHandle(workflowIdFor(id)).fetchHistory();
    await expect(
      Worker.runReplayHistory(
        {
          workflowBundle: await workflowBundle(),
          dataConverter: {
            payloadCodecs: [new SessionPayloadCodec(stack.store.sessionKeys)],
            failureConverterPath: SESSION_FAILURE_CONVERTER_PATH,
          },
        },
        history,
        id,
      ),
    ).resolves.toBeUndefined();
  });

  it('calls the named tool, and with none calls no tool although the tools are sent', async () => {
    const id = `tc_${randomUUID()}`;
    await stack.client.create({ sessionId: id });
    const named = await stack.client.send(id, '1+1', { hints: { toolChoice: { name: 'calculator' } } });
    expect(named.outcome).toBe('completed');
    const [forced, after] = stack.fake.chatRequests();
    expect(forced!.tool_choice).toEqual({ type: 'function', function: { name: 'calculator' } });
    expect(after!.messages.at(-1)).toMatchObject({ role: 'tool', content: '2' });

    stack.fake.reset();
    stack.fake.enqueueReplies({ toolCalls: [{ name: 'calculator', arguments: { expression: '2+2' } }] });
    const none = await stack.client.send(id, 'no tools please', { hints: { toolChoice: 'none' } });
    expect(none.text).toBe('echo: no tools please');
    const [only, ...rest] = stack.fake.chatRequests();
    expect(rest).toEqual([]);
    expect(only!.tool_choice).toBe('none');
    expect(only!.tools?.map((tool) => tool.function.name)).toContain('calculator');
  });

  it('ends the turn as a bad request, before any model call, for a named tool the turn does not have', async () => {
    const id = `tc_${randomUUID()}`;
    await stack.client.create({ sessionId: id });
    const reply = await stack.client.send(id, 'hi', { hints: { toolChoice: { name: 'get_weather' } } });
    expect(reply.outcome).toBe('error');
    expect(reply.error).toMatchObject({ code: 'bad_request', message: expect.stringContaining('"get_weather"') });
    expect(stack.fake.chatRequests()).toEqual([]);
  });

  it('refuses request options that are not a tool choice before the message is queued', async () => {
    const id = `tc_${randomUUID()}`;
    await stack.client.create({ sessionId: id });
    await expect(stack.client.send(id, 'hi', { hints: { toolChoice: 'always' as never } })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: expect.stringContaining('hints.toolChoice'),
    });
    await expect(stack.client.send(id, 'hi', { hints: { parallelToolCalls: 'no' as never } })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: expect.stringContaining('hints.parallelToolCalls'),
    });
  });
});
