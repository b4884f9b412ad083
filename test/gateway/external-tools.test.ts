/**
 * External tools over HTTP (DESIGN §5.1): a tool registered as `external` is run by the caller.
 * The caller learns of the call from the gateway's live event stream (a
 * `tool/approval-request` of kind `external`), posts the output to a second gateway instance
 * (its own Temporal connection and its own handle on the store, as another server would),
 * and the turn completes with a `tool/result` of origin `external` that the model receives. A
 * result for an unknown call, or one already answered, is refused with a clear 4xx.
 */
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { SessionClient } from '../../src/client/session-client.js';
import { startGateway, type RunningGateway } from '../../src/gateway/index.js';
import { openSqliteStore } from '../../src/persistence/relational/sqlite/store.js';
import type { SessionStore } from '../../src/persistence/store.js';
import type { SessionEvent, StoredEvent } from '../../src/session/index.js';
import { BUILTIN_TOOLS } from '../../src/tools/builtin.js';
import { ToolRegistry, type Tool } from '../../src/tools/registry.js';
import { TEST_TUNABLES, startStack, temporalAddress, type Stack } from '../support/stack.js';
import { openSse, request, type SseConnection } from './http.js';

const clickTool: Tool = {
  name: 'browser_click',
  description: "Clicks an element in the user's browser (run by the caller).",
  parameters: { type: 'object', properties: { selector: { type: 'string' } }, required: ['selector'] },
  external: true,
};

let stack: Stack;
/** The gateway of the stack's own client: where the caller sends messages and follows events. */
let gatewayA: RunningGateway;
/** Another gateway instance: its own Temporal connection, its own store handle. */
let gatewayB: RunningGateway;
let connectionB: Connection;
let storeB: SessionStore;
beforeAll(async () => {
  stack = await startStack({
    worker: {
      tools: new ToolRegistry([...BUILTIN_TOOLS, clickTool]),
      agent: { model: 'fake', system: 'You are a test assistant.', tools: ['calculator', 'browser_click'] },
    },
  });
  gatewayA = await startGateway({
    client: stack.client,
    host: '127.0.0.1',
    port: 0,
    bodyLimitBytes: 64 * 1024,
    sseHeartbeatMs: 500,
  });
  connectionB = await Connection.connect({ address: temporalAddress() });
  storeB = openSqliteStore(join(stack.dir, 'sessions.db'));
  const clientB = new SessionClient({
    temporal: new Client({ connection: connectionB, namespace: 'default' }),
    store: storeB,
    taskQueue: stack.taskQueue,
    tunables: TEST_TUNABLES,
  });
  gatewayB = await startGateway({ client: clientB, host: '127.0.0.1', port: 0, bodyLimitBytes: 64 * 1024 });
});
afterAll(async () => {
  await gatewayB?.close();
  await gatewayA?.close();
  await connectionB?.close();
  await storeB?.close();
  await stack?.close();
});
beforeEach(() => {
  stack.fake.reset();
});

let counter = 0;
const newId = (name: string) => `ext-${name}-${Date.now()}-${counter++}`;
const ofType = <K extends StoredEvent['type']>(events: readonly StoredEvent[], type: K) =>
  events.filter((e): e is Extract<StoredEvent, { type: K }> => e.type === type);

/** Reads whole events off an SSE stream until `stop` accepts one (the stream ends the read otherwise). */
async function readUntil(sse: SseConnection, stop: (event: StoredEvent) => boolean): Promise<StoredEvent[]> {
  const events: StoredEvent[] = [];
  for (;;) {
    const frame = await sse.next();
    if (frame === undefined) return events;
    if (frame.data === undefined) continue;
    const event = JSON.parse(frame.data) as StoredEvent;
    events.push(event);
    if (stop(event)) return events;
  }
}

function errorCode(body: unknown): string | undefined {
  return (body as { error?: { code?: string } }).error?.code;
}

/** Creates a session through gateway A, follows it, and asks for one external click. */
async function askForClick(
  id: string,
  callId: string,
): Promise<{ sse: SseConnection; requested: SessionEvent<'tool/approval-request'> }> {
  expect((await request(gatewayA.url, 'POST', '/v1/sessions', { json: { id } })).status).toBe(201);
  const sse = await openSse(`${gatewayA.url}/v1/sessions/${id}/events`);
  expect(sse.status).toBe(200);
  stack.fake.enqueueReplies(
    { text: 'Clicking.', toolCalls: [{ id: callId, name: 'browser_click', arguments: { selector: '#buy' } }] },
    { text: 'bought it' },
  );
  expect(
    (await request(gatewayA.url, 'POST', `/v1/sessions/${id}/messages`, { json: { text: 'buy it for me' } })).status,
  ).toBe(202);
  const seen = await readUntil(sse, (e) => e.type === 'tool/approval-request');
  const requested = seen.at(-1) as SessionEvent<'tool/approval-request'>;
  expect(requested.type).toBe('tool/approval-request');
  return { sse, requested };
}

describe('an external tool', () => {
  it('reaches the caller over SSE; its result posted to another gateway instance completes the turn as a tool/result of origin external', async () => {
    const id = newId('roundtrip');
    const { sse, requested } = await askForClick(id, 'click-1');
    expect(requested.data).toMatchObject({
      callId: 'click-1',
      tool: 'browser_click',
      arguments: '{"selector":"#buy"}',
      kind: 'external',
      turn: 1,
      step: 1,
    });
    // Listed as pending on either instance.
    const pending = await request(gatewayB.url, 'GET', `/v1/approvals?status=pending&session=${id}`);
    expect(pending.status).toBe(200);
    expect(
      (pending.body as { approvals: Array<{ callId: string; kind: string }> }).approvals.map((p) => [p.callId, p.kind]),
    ).toEqual([['click-1', 'external']]);

    // Posted as soon as the caller sees the request, to the other instance.
    const posted = await request(gatewayB.url, 'POST', `/v1/sessions/${id}/tool-results`, {
      json: { callId: 'click-1', output: 'clicked #buy: order 77 placed', by: 'browser' },
    });
    expect(posted.status, JSON.stringify(posted.body)).toBe(200);
    expect(posted.body).toEqual({ callId: 'click-1', accepted: true });

    const rest = await readUntil(sse, (e) => e.type === 'turn/end');
    sse.close();
    const result = rest.find((e): e is SessionEvent<'tool/result'> => e.type === 'tool/result');
    expect(result?.data.origin).toBe('external');
    expect(result?.data.message.content[0]).toMatchObject({
      type: 'tool-result',
      toolCallId: 'click-1',
      content: [{ type: 'text', text: 'clicked #buy: order 77 placed' }],
    });
    expect(result?.data.message.content[0]).not.toHaveProperty('isError');
    const end = rest.at(-1) as SessionEvent<'turn/end'>;
    expect(end.data.reason).toEqual({ kind: 'completed' });

    const requests = stack.fake.chatRequests();
    expect(requests).toHaveLength(2);
    expect(requests[1]!.messages.find((m) => m.role === 'tool' && m.tool_call_id === 'click-1')?.content).toBe(
      'clicked #buy: order 77 placed',
    );
    const messages = await request(gatewayA.url, 'GET', `/v1/sessions/${id}/messages`);
    expect(JSON.stringify(messages.body)).toContain('bought it');
    expect(await stack.client.pendingApprovals({ sessionId: id })).toEqual([]);
  });

  it('refuses a result for an unknown call (404 UNKNOWN_CALL) and a second result for an answered call (409 ALREADY_ANSWERED)', async () => {
    const id = newId('refusals');
    const { sse } = await askForClick(id, 'click-2');
    const unknown = await request(gatewayB.url, 'POST', `/v1/sessions/${id}/tool-results`, {
      json: { callId: 'no-such-call', output: 'x' },
    });
    expect(unknown.status).toBe(404);
    expect(errorCode(unknown.body)).toBe('UNKNOWN_CALL');
    // An external call is answered with its result, not an approval.
    const approved = await request(gatewayA.url, 'POST', `/v1/sessions/${id}/approvals/click-2`, {
      json: { decision: 'approve' },
    });
    expect(approved.status).toBe(400);
    expect(errorCode(approved.body)).toBe('INVALID_ARGUMENT');

    const first = await request(gatewayB.url, 'POST', `/v1/sessions/${id}/tool-results`, {
      json: { callId: 'click-2', output: 'first' },
    });
    expect(first.status).toBe(200);
    const second = await request(gatewayA.url, 'POST', `/v1/sessions/${id}/tool-results`, {
      json: { callId: 'click-2', output: 'second' },
    });
    expect(second.status, JSON.stringify(second.body)).toBe(409);
    expect(errorCode(second.body)).toBe('ALREADY_ANSWERED');
    await readUntil(sse, (e) => e.type === 'turn/end');
    sse.close();

    const results = ofType(await stack.client.events(id), 'tool/result');
    expect(results).toHaveLength(1);
    expect(results[0]!.data.message.content[0]).toMatchObject({ content: [{ type: 'text', text: 'first' }] });
  });

  it('two results posted at once to two instances: one is taken, the other refused with 409', async () => {
    const id = newId('race');
    const { sse } = await askForClick(id, 'click-3');
    const [a, b] = await Promise.all([
      request(gatewayA.url, 'POST', `/v1/sessions/${id}/tool-results`, {
        json: { callId: 'click-3', output: 'from A' },
      }),
      request(gatewayB.url, 'POST', `/v1/sessions/${id}/tool-results`, {
        json: { callId: 'click-3', output: 'from B' },
      }),
    ]);
    expect([a.status, b.status].sort()).toEqual([200, 409]);
    expect(errorCode((a.status === 409 ? a : b).body)).toBe('ALREADY_ANSWERED');
    await readUntil(sse, (e) => e.type === 'turn/end');
    sse.close();
    const results = ofType(await stack.client.events(id), 'tool/result');
    expect(results).toHaveLength(1);
    expect(results[0]!.data.message.content[0]).toMatchObject({
      content: [{ type: 'text', text: a.status === 200 ? 'from A' : 'from B' }],
    });
  });

  it('an external result marked isError reaches the model as an error result', async () => {
    const id = newId('error');
    const { sse } = await askForClick(id, 'click-4');
    const posted = await request(gatewayB.url, 'POST', `/v1/sessions/${id}/tool-results`, {
      json: { callId: 'click-4', output: 'element #buy not found', isError: true },
    });
    expect(posted.status).toBe(200);
    const rest = await readUntil(sse, (e) => e.type === 'turn/end');
    sse.close();
    const result = rest.find((e): e is SessionEvent<'tool/result'> => e.type === 'tool/result');
    expect(result?.data.origin).toBe('external');
    expect(result?.data.message.content[0]).toMatchObject({
      isError: true,
      content: [{ type: 'text', text: 'element #buy not found' }],
    });
  });

  it('a result that never comes: the wait expires and the model is told the result did not arrive', async () => {
    const id = newId('expire');
    // Tunables are the workflow's input: this session's run is started with a short wait.
    const shortWait = new SessionClient({
      temporal: stack.temporal,
      store: stack.store,
      taskQueue: stack.taskQueue,
      tunables: { ...TEST_TUNABLES, approvalTimeoutMs: 1_500 },
    });
    await shortWait.start({ sessionId: id });
    stack.fake.enqueueReplies(
      { text: 'Clicking.', toolCalls: [{ id: 'click-5', name: 'browser_click', arguments: { selector: '#buy' } }] },
      { text: 'the click did not happen' },
    );
    expect((await shortWait.send(id, 'buy it for me')).text).toBe('the click did not happen');
    const events = await stack.client.events(id);
    expect(ofType(events, 'tool/approval').map((e) => [e.data.callId, e.data.decision, e.data.reason])).toEqual([
      ['click-5', 'expire', 'expired'],
    ]);
    const [result] = ofType(events, 'tool/result');
    expect(result!.data.error?.code).toBe('TOOL_APPROVAL_EXPIRED');
    const sent = stack.fake
      .chatRequests()[1]!
      .messages.find((m) => m.role === 'tool' && m.tool_call_id === 'click-5')?.content;
    expect(sent).toEqual(expect.stringContaining('result'));
    expect(sent).toEqual(expect.stringContaining('expired'));
    // Nobody was asked to approve an external call: the model must not be told so.
    expect(sent).not.toEqual(expect.stringContaining('approv'));
    const late = await request(gatewayB.url, 'POST', `/v1/sessions/${id}/tool-results`, {
      json: { callId: 'click-5', output: 'too late' },
    });
    expect(late.status).toBe(409);
    expect(errorCode(late.body)).toBe('ALREADY_ANSWERED');
  });
});
