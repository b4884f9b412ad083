/**
 * The HTTP gateway over a real stack (Temporal dev server, worker, fake model): every route
 * answers over loopback HTTP with the documented shapes, and the OpenAPI document lists every
 * route fastify registered.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createGateway, listRegisteredRoutes, startGateway, type RunningGateway } from '../../src/gateway/index.js';
import { openApiPath } from '../../src/gateway/route-table.js';
import type { SessionHeader } from '../../src/session/index.js';
import { workflowIdFor } from '../../src/workflows/api.js';
import { startStack, type Stack } from '../support/stack.js';
import { request } from './http.js';

let stack: Stack;
let gateway: RunningGateway;
beforeAll(async () => {
  stack = await startStack();
  gateway = await startGateway({ client: stack.client, host: '127.0.0.1', port: 0, bodyLimitBytes: 64 * 1024 });
});
afterAll(async () => {
  await gateway?.close();
  await stack?.close();
});
beforeEach(() => {
  stack.fake.reset();
  stack.fake.configure({ tokenDelayMs: 0, firstTokenDelayMs: 0 });
});

let counter = 0;
const newId = (name: string) => `gw-${name}-${Date.now()}-${counter++}`;
const call = (method: string, path: string, init?: Parameters<typeof request>[3]) =>
  request(gateway.url, method, path, init);

describe('gateway routes', () => {
  it('creates a session with POST /v1/sessions and lists and shows it', async () => {
    const id = newId('create');
    const created = await call('POST', '/v1/sessions', { json: { id, agent: { model: 'fake' } } });
    expect(created.status).toBe(201);
    const session = (created.body as { session: SessionHeader }).session;
    expect(session).toMatchObject({ id, agent: { model: 'fake' } });
    expect(typeof session.createdAt).toBe('number');

    const list = await call('GET', '/v1/sessions');
    expect(list.status).toBe(200);
    expect((list.body as { sessions: SessionHeader[] }).sessions.map((s) => s.id)).toContain(id);

    const shown = await call('GET', `/v1/sessions/${id}`);
    expect(shown.status).toBe(200);
    const detail = shown.body as { session: SessionHeader; status: { sessionId: string; phase: string } | null };
    expect(detail.session.id).toBe(id);
    // start() launched the workflow, so a live status is reported.
    expect(detail.status?.sessionId).toBe(id);
  });

  it('creates a session with a generated id when the body is empty', async () => {
    const created = await call('POST', '/v1/sessions');
    expect(created.status).toBe(201);
    expect((created.body as { session: SessionHeader }).session.id).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('answers POST messages?wait=true with the reply, then serves history, transcript and events', async () => {
    const id = newId('wait');
    expect((await call('POST', '/v1/sessions', { json: { id } })).status).toBe(201);
    const sent = await call('POST', `/v1/sessions/${id}/messages?wait=true`, {
      json: { text: 'hello gateway', id: 'msg-1' },
    });
    expect(sent.status).toBe(200);
    expect(sent.body).toMatchObject({ turn: 1, outcome: 'completed', text: 'echo: hello gateway' });
    const reply = sent.body as { replySeq: number; messageId: string };
    expect(typeof reply.replySeq).toBe('number');

    // The same message id again: the same answer, no second turn.
    const again = await call('POST', `/v1/sessions/${id}/messages?wait=true`, {
      json: { text: 'hello gateway', id: 'msg-1' },
    });
    expect(again.body).toEqual(sent.body);

    const history = await call('GET', `/v1/sessions/${id}/messages`);
    expect(history.status).toBe(200);
    const messages = (history.body as { messages: Array<{ role: string; id: string }> }).messages;
    expect(messages.map((m) => m.role)).toEqual(['user', 'assistant']);
    expect(messages[1]!.id).toBe(reply.messageId);
    expect(messages).toEqual(JSON.parse(JSON.stringify(await stack.client.history(id))));

    const transcript = await call('GET', `/v1/sessions/${id}/transcript`);
    expect(transcript.status).toBe(200);
    const lines = (transcript.body as { events: Array<{ type: string }> }).events;
    expect(lines.map((e) => e.type)).toEqual(['user/message', 'assistant/message']);

    const events = await call('GET', `/v1/sessions/${id}/events`);
    expect(events.status).toBe(200);
    const stored = await stack.store.readFrom(id, 0);
    expect((events.body as { events: unknown[] }).events).toEqual(JSON.parse(JSON.stringify(stored)));
    const page = await call('GET', `/v1/sessions/${id}/events?from=2&limit=3`);
    expect((page.body as { events: Array<{ seq: number }> }).events.map((e) => e.seq)).toEqual([2, 3, 4]);
  });

  it('queues a message with 202 and the turn then appears in the log', async () => {
    const id = newId('post');
    await call('POST', '/v1/sessions', { json: { id } });
    const posted = await call('POST', `/v1/sessions/${id}/messages`, { json: { text: 'queued hello' } });
    expect(posted.status).toBe(202);
    const messageId = (posted.body as { id: string }).id;
    expect(messageId.length).toBeGreaterThan(0);
    await expect
      .poll(async () => (await stack.store.readFrom(id, 0)).some((e) => e.type === 'turn/end'), { timeout: 20_000 })
      .toBe(true);
    const history = (await call('GET', `/v1/sessions/${id}/messages`)).body as {
      messages: Array<{ id: string; role: string }>;
    };
    expect(history.messages[0]).toMatchObject({ id: messageId, role: 'user' });
  });

  it('forks a session at a seq: the child header names its parent and the child log is the seeded prefix', async () => {
    const id = newId('parent');
    await call('POST', '/v1/sessions', { json: { id } });
    await call('POST', `/v1/sessions/${id}/messages?wait=true`, { json: { text: 'first' } });
    await call('POST', `/v1/sessions/${id}/messages?wait=true`, { json: { text: 'second' } });
    const parent = await stack.store.readFrom(id, 0);
    const firstEnd = parent.find((e) => e.type === 'turn/end')!.seq;

    const childId = `${id}-child`;
    const forked = await call('POST', `/v1/sessions/${id}/fork`, { json: { at: firstEnd, id: childId } });
    expect(forked.status).toBe(201);
    expect((forked.body as { session: SessionHeader }).session).toMatchObject({
      id: childId,
      parentSession: id,
      seedLength: firstEnd + 1,
    });
    const child = await stack.store.readFrom(childId, 0);
    expect(child.slice(0, firstEnd + 1).map(({ op: _op, ...e }) => e)).toEqual(
      parent.slice(0, firstEnd + 1).map(({ op: _op, ...e }) => e),
    );
    // The seed is the child's first batch (written by the child's own workflow run, which then logs its run marker).
    const seed = child.filter((e) => e.op === `seed:${childId}`);
    expect(seed.map((e) => e.seq)).toEqual([...Array(firstEnd + 2).keys()]);
    expect(seed.at(-1)!.type).toBe('session/end-seed');

    // The child carries on from the fork point: its history holds only the first exchange.
    const reply = await call('POST', `/v1/sessions/${childId}/messages?wait=true`, { json: { text: 'in the child' } });
    expect(reply.body).toMatchObject({ text: 'echo: in the child' });
    const history = (await call('GET', `/v1/sessions/${childId}/messages`)).body as {
      messages: Array<{ role: string }>;
    };
    expect(history.messages).toHaveLength(4);
    // Forking again onto the same child id is a conflict.
    const conflict = await call('POST', `/v1/sessions/${id}/fork`, { json: { id: childId } });
    expect(conflict.status).toBe(409);
    expect((conflict.body as { error: { code: string } }).error.code).toBe('SESSION_ALREADY_EXISTS');
    // A fork with no body takes the whole log and a generated id.
    const whole = await call('POST', `/v1/sessions/${id}/fork`);
    expect(whole.status).toBe(201);
    expect((whole.body as { session: SessionHeader }).session.seedLength).toBe(parent.length);
  });

  it('compacts, cancels and resumes through POST commands', async () => {
    const id = newId('cmd');
    await call('POST', '/v1/sessions', { json: { id } });
    await call('POST', `/v1/sessions/${id}/messages?wait=true`, { json: { text: 'something to compact' } });
    const compacted = await call('POST', `/v1/sessions/${id}/compact`, { json: {} });
    expect(compacted.status).toBe(200);
    expect(compacted.body).toHaveProperty('compaction');

    const cancelled = await call('POST', `/v1/sessions/${id}/cancel`);
    expect(cancelled.status).toBe(200);
    expect(cancelled.body).toEqual({ cancelRequested: true });

    // The workflow is running: resume starts nothing and names the open run.
    const running = await call('POST', `/v1/sessions/${id}/resume`, {
      headers: { 'content-type': 'application/json' },
    });
    expect(running.status).toBe(200);
    expect(running.body).toMatchObject({ started: false });
    const openRun = (running.body as { runId: string }).runId;
    expect(openRun).toBe((await stack.client.status(id)).runId);

    // Once the workflow is gone, resume starts a new run from the log.
    await stack.temporal.workflow.getHandle(workflowIdFor(id)).terminate('test: workflow lost');
    const resumed = await call('POST', `/v1/sessions/${id}/resume`, {
      headers: { 'content-type': 'application/json' },
    });
    expect(resumed.status).toBe(200);
    expect(resumed.body).toMatchObject({ started: true });
    expect((resumed.body as { runId: string }).runId).not.toBe(openRun);
  });

  it('reports status null for a session whose workflow is not running', async () => {
    const id = newId('idle');
    await stack.store.create({ version: 1, id, createdAt: Date.now() });
    const shown = await call('GET', `/v1/sessions/${id}`);
    expect(shown.status).toBe(200);
    expect(shown.body).toMatchObject({ session: { id }, status: null });
    expect((await call('POST', `/v1/sessions/${id}/cancel`)).body).toEqual({ cancelRequested: false });
  });

  it('refuses a lone-surrogate message id with a 400 naming the field, also with ?wait=true (Temporal would fail it as invalid UTF-8)', async () => {
    const id = newId('utf16');
    await call('POST', '/v1/sessions', { json: { id } });
    await call('POST', `/v1/sessions/${id}/messages?wait=true`, { json: { text: 'settle' } });
    const before = await stack.store.readFrom(id, 0);
    for (const path of [`/v1/sessions/${id}/messages?wait=true`, `/v1/sessions/${id}/messages`]) {
      const refused = await call('POST', path, { json: { text: 'hi', id: 'm\ud800id' } });
      expect(refused.status, path).toBe(400);
      expect(refused.body, path).toMatchObject({ error: { code: 'INVALID_REQUEST' } });
      expect((refused.body as { error: { message: string } }).error.message).toMatch(/body\.id: .*lone surrogate/);
    }
    const text = await call('POST', `/v1/sessions/${id}/messages?wait=true`, {
      json: { text: 'half an emoji \ud83d' },
    });
    expect(text.status).toBe(400);
    expect((text.body as { error: { message: string } }).error.message).toMatch(/body\.text: .*lone surrogate/);
    expect(await stack.store.readFrom(id, 0)).toEqual(before);
    // A whole astral character (a surrogate pair) is fine.
    const emoji = await call('POST', `/v1/sessions/${id}/messages?wait=true`, {
      json: { text: 'a whole emoji 😀', id: 'm😀id' },
    });
    expect(emoji.status).toBe(200);
    expect(emoji.body).toMatchObject({ text: 'echo: a whole emoji 😀' });
  });

  it('answers GET /healthz', async () => {
    const health = await call('GET', '/healthz');
    expect(health).toMatchObject({ status: 200, body: { ok: true } });
  });
});

describe('the OpenAPI document', () => {
  it('is OpenAPI 3.1 and describes every route fastify registered (and nothing else)', async () => {
    const doc = (await call('GET', '/v1/openapi.json')).body as {
      openapi: string;
      paths: Record<
        string,
        Record<string, { responses: Record<string, unknown>; parameters?: Array<{ in: string; name: string }> }>
      >;
    };
    expect(doc.openapi).toBe('3.1.0');
    const app = createGateway({ client: stack.client, host: '127.0.0.1', bodyLimitBytes: 1024 });
    await app.ready();
    const registered = listRegisteredRoutes(app)
      // The inspector's static page (/ui) is not part of the API.
      .filter((r) => r.method !== 'HEAD' && !r.url.startsWith('/ui'))
      .map((r) => `${r.method.toLowerCase()} ${openApiPath(r.url)}`)
      .sort();
    await app.close();
    const documented = Object.entries(doc.paths)
      .flatMap(([path, operations]) => Object.keys(operations).map((method) => `${method} ${path}`))
      .sort();
    expect(registered.length).toBeGreaterThanOrEqual(13);
    expect(documented).toEqual(registered);
    for (const [path, operations] of Object.entries(doc.paths)) {
      for (const operation of Object.values(operations)) {
        expect(Object.keys(operation.responses)).toContain('500');
        const pathParams = (operation.parameters ?? []).filter((p) => p.in === 'path').map((p) => p.name);
        expect(pathParams, path).toEqual([...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]));
      }
    }
  });
});
