/**
 * The README's promises at the edges, against the real `sessionlog serve` and `sessionlog
 * worker` processes (DESIGN §5.3):
 *
 * - a route's right follows what it does, not its method: a token with only `read` reaches
 *   every route that only reads (the LangGraph API's searches and history by POST, minting a
 *   stream token) and is refused 403 on every other, over the whole route table of every API;
 * - only `/healthz` and `/readyz` answer without a token;
 * - a failed turn's answer names its code and message on every API, in that API's own shape.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AI_SDK_TABLE } from '../../src/gateway/ai-sdk/index.js';
import { NATIVE_TABLE, OPENAI_TABLE } from '../../src/gateway/index.js';
import { LANGGRAPH_TABLE } from '../../src/gateway/langgraph/index.js';
import type { RouteSpec } from '../../src/gateway/route-table.js';
import { startFakeModelServer, type FakeModelServer } from '../../src/model/fake-server.js';
import { startCli, type CliProcess } from '../support/cli-process.js';

const OWNER = 'edges-owner-0123456789abcdef';
const READER = 'edges-reader-0123456789abcdef';
const ROUTES: RouteSpec[] = [NATIVE_TABLE, OPENAI_TABLE, AI_SDK_TABLE, LANGGRAPH_TABLE].flatMap((t) => [...t.routes]);

const dir = mkdtempSync(join(tmpdir(), 'sessionlog-edges-'));
const common = {
  SESSIONLOG_STORE: `sqlite:${join(dir, 'sessions.db')}`,
  SESSIONLOG_TASK_QUEUE: `edges-${randomUUID()}`,
  SESSIONLOG_MODEL: 'fake',
  OPENAI_API_KEY: 'edges-test-key',
  SESSIONLOG_GATEWAY_TOKENS: JSON.stringify({
    [OWNER]: { tenant: 'acme' },
    [READER]: { tenant: 'acme', rights: ['read'] },
  }),
};

let fake: FakeModelServer;
let worker: CliProcess;
let serve: CliProcess;
let base: string;
/** A session of the owner with one answered turn, which the read-only token's requests name. */
const sessionId = `edges-${Date.now()}`;
let responseId: string;
let runId: string;

type Answer = { status: number; text: string; headers: Headers };

async function call(token: string | undefined, method: string, path: string, body?: unknown): Promise<Answer> {
  const headers: Record<string, string> = {};
  if (token) headers.authorization = `Bearer ${token}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const response = await fetch(`${base}${path}`, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(30_000),
  });
  return { status: response.status, text: await response.text(), headers: response.headers };
}

const json = (answer: Answer) => JSON.parse(answer.text) as Record<string, unknown>;

beforeAll(async () => {
  fake = await startFakeModelServer({ model: 'fake' });
  const model = { OPENAI_BASE_URL: fake.baseURL };
  worker = startCli('worker', dir, { ...common, ...model });
  serve = startCli('serve', dir, { ...common, ...model, SESSIONLOG_PORT: '0' });
  base = await serve.waitFor(/gateway: (http:\/\/[^/\s]+)\/v1/);
  await worker.waitFor(/(worker on )/);
  expect((await call(OWNER, 'POST', '/v1/sessions', { id: sessionId })).status).toBe(201);
  expect((await call(OWNER, 'POST', `/v1/sessions/${sessionId}/messages?wait=true`, { text: 'hello' })).status).toBe(
    200,
  );
  const response = await call(OWNER, 'POST', '/openai/v1/responses', { conversation: sessionId, input: 'again' });
  expect(response.status).toBe(200);
  responseId = json(response).id as string;
  const runs = await call(OWNER, 'GET', `/langgraph/threads/${sessionId}/runs`);
  expect(runs.status).toBe(200);
  runId = (JSON.parse(runs.text) as Array<{ run_id: string }>)[0]?.run_id ?? 'run-none';
}, 180_000);

afterAll(async () => {
  const codes = await Promise.all([serve?.stop(), worker?.stop()]);
  await fake?.close();
  expect(codes).toEqual([0, 0]);
}, 60_000);

/** The route's path with the owner's ids. */
function pathOf(route: RouteSpec): string {
  return route.path.replace(/:([A-Za-z_]+)/g, (_, name: string) => {
    if (name === 'run_id') return runId;
    if (name === 'callId') return 'call_none';
    if (name === 'name') return 'none.txt';
    if (name === 'item_id') return 'msg_none';
    if (name === 'assistant_id') return 'agent';
    if (name === 'checkpoint_id') return 'checkpoint-none';
    if (route.path.includes('/responses/')) return responseId;
    return sessionId;
  });
}

describe('a route needs the right of what it does, whatever its method', () => {
  it('a read-only token reaches every route that only reads and is refused 403 on every other', async () => {
    const reached: string[] = [];
    const refused: string[] = [];
    for (const route of ROUTES) {
      if (route.public) continue;
      // Bodies the read routes accept; the refused ones are refused before their body is read.
      const body = route.method === 'GET' || route.method === 'DELETE' ? undefined : {};
      const answer = await call(READER, route.method, pathOf(route), body);
      const label = `${route.method} ${route.path} (${route.right})`;
      if (answer.status === 403) {
        // In each API's own error shape; the words are the gateway's.
        expect(answer.text, label).toContain(`lacks the ${route.right} right`);
        refused.push(label);
      } else reached.push(label);
      expect(answer.status === 403, `${label} answered ${answer.status}: ${answer.text.slice(0, 200)}`).toBe(
        route.right !== 'read',
      );
    }
    expect(reached.length + refused.length).toBe(ROUTES.filter((r) => !r.public).length);
  });

  it('the reads the LangGraph API and the stream token make by POST answer the read-only token with their content', async () => {
    const threads = await call(READER, 'POST', '/langgraph/threads/search', {});
    expect(threads.status).toBe(200);
    expect(threads.text).toContain(sessionId);
    const history = await call(READER, 'POST', `/langgraph/threads/${sessionId}/history`, {});
    expect(history.status).toBe(200);
    expect(history.text).toContain('hello');
    const assistants = await call(READER, 'POST', '/langgraph/assistants/search', {});
    expect(assistants.status).toBe(200);
    expect(JSON.parse(assistants.text)).toEqual([expect.objectContaining({ assistant_id: 'agent' })]);
    const minted = await call(READER, 'POST', `/v1/sessions/${sessionId}/stream-token`);
    expect(minted.status).toBe(200);
    const { token } = json(minted) as { token: string };
    // The token it got opens the session's event stream: the first event arrives.
    const controller = new AbortController();
    const stream = await fetch(`${base}/v1/sessions/${sessionId}/events?streamToken=${encodeURIComponent(token)}`, {
      headers: { accept: 'text/event-stream' },
      signal: controller.signal,
    });
    expect(stream.status).toBe(200);
    const reader = stream.body!.getReader();
    const first = new TextDecoder().decode((await reader.read()).value);
    controller.abort();
    expect(first).toContain('session/');
  });

  it('only /healthz and /readyz answer without a token; every other route wants one', async () => {
    const open = ROUTES.filter((r) => r.public).map((r) => `${r.method} ${r.path}`);
    expect(open.sort()).toEqual(['GET /healthz', 'GET /readyz']);
    expect((await call(undefined, 'GET', '/healthz')).status).toBe(200);
    expect((await call(undefined, 'GET', '/readyz')).status).toBe(200);
    for (const route of ROUTES.filter((r) => !r.public)) {
      const answer = await call(undefined, route.method, pathOf(route), route.method === 'GET' ? undefined : {});
      expect(answer.status, `${route.method} ${route.path}`).toBe(401);
    }
    expect((await call(undefined, 'GET', '/metrics')).status).toBe(401);
  });
});

describe("a failed turn's answer names its code and message on every API", () => {
  /** A new session of the owner whose budget stops every model call, without waiting for a raise. */
  async function exhaustedSession(): Promise<string> {
    const id = `edges-budget-${randomUUID().slice(0, 8)}`;
    const created = await call(OWNER, 'POST', '/v1/sessions', { id, budget: { turn: { modelCalls: 0 }, waitMs: 0 } });
    expect(created.status, created.text).toBe(201);
    return id;
  }

  it('native: POST …/messages?wait=true answers the outcome with {error: {code, message}}', async () => {
    const id = await exhaustedSession();
    const answer = await call(OWNER, 'POST', `/v1/sessions/${id}/messages?wait=true`, { text: 'spend' });
    expect(answer.status).toBe(200);
    expect(json(answer)).toMatchObject({
      outcome: 'error',
      error: { code: 'budget_exceeded', message: expect.stringContaining('modelCalls') },
    });
  });

  it('OpenAI Responses: the response ends naming budget_exceeded, as it does streamed', async () => {
    const id = await exhaustedSession();
    const answer = await call(OWNER, 'POST', '/openai/v1/responses', { conversation: id, input: 'spend' });
    expect(answer.status).toBe(200);
    const body = json(answer);
    expect(body.status).not.toBe('completed');
    expect(JSON.stringify([body.error, body.incomplete_details])).toContain('budget_exceeded');
    // A session of its own: the first one's turn may still be closing after its breach.
    const streamed = await call(OWNER, 'POST', '/openai/v1/responses', {
      conversation: await exhaustedSession(),
      input: 'more',
      stream: true,
    });
    expect(streamed.status, streamed.text).toBe(200);
    const terminal = streamed.text
      .split('\n')
      .filter((l) => l.startsWith('data: '))
      .map((l) => JSON.parse(l.slice(6)) as { type: string; response?: Record<string, unknown> })
      .at(-1);
    expect(terminal, streamed.text).toBeDefined();
    expect(terminal!.type).not.toBe('response.completed');
    expect(JSON.stringify([terminal!.response?.error, terminal!.response?.incomplete_details])).toContain(
      'budget_exceeded',
    );
  });

  it('OpenAI Chat Completions: an error answer with the code and message, not a reply', async () => {
    const id = await exhaustedSession();
    const headers = { 'x-session-id': id };
    const response = await fetch(`${base}/openai/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${OWNER}`, 'content-type': 'application/json', ...headers },
      body: JSON.stringify({ model: 'fake', messages: [{ role: 'user', content: 'spend' }] }),
    });
    const body = (await response.json()) as { error?: { code?: string; message?: string } };
    expect(response.status, JSON.stringify(body)).toBeGreaterThanOrEqual(400);
    expect(body.error).toMatchObject({ code: 'budget_exceeded', message: expect.stringContaining('modelCalls') });
  });

  it("LangGraph: runs/wait ends at the breach with the budget interrupt naming the cap (LangGraph's pause)", async () => {
    const id = await exhaustedSession();
    const answer = await call(OWNER, 'POST', `/langgraph/threads/${id}/runs/wait`, {
      assistant_id: 'agent',
      input: { messages: [{ role: 'user', content: 'spend' }] },
    });
    expect(answer.status).toBe(200);
    expect(json(answer).__interrupt__).toEqual([
      expect.objectContaining({
        value: expect.objectContaining({ type: 'budget', cap: 'modelCalls', description: expect.any(String) }),
      }),
    ]);
  });

  it('AI SDK: the message ends at the breach with a data-budget part naming the code and the cap', async () => {
    const id = await exhaustedSession();
    const answer = await call(OWNER, 'POST', '/ai-sdk/chat', {
      id,
      trigger: 'submit-message',
      messages: [{ id: 'u1', role: 'user', parts: [{ type: 'text', text: 'spend' }] }],
    });
    expect(answer.status).toBe(200);
    const budget = answer.text
      .split('\n')
      .filter((l) => l.startsWith('data: {'))
      .map((l) => JSON.parse(l.slice(6)) as { type: string; data?: Record<string, unknown> })
      .find((p) => p.type === 'data-budget');
    expect(budget?.data, answer.text).toMatchObject({
      paused: 'budget',
      code: 'budget_exceeded',
      cap: 'modelCalls',
      message: expect.stringContaining('modelCalls'),
    });
  });
});

describe("a turn the model fails names the model's code and message on every API", () => {
  /** The next model call is refused by the provider with a 400, which is not retried. */
  const refuseNextCall = () => fake.injectFault({ kind: 'server_error', status: 400, times: 1 });
  const newSession = async () => {
    const id = `edges-fail-${randomUUID().slice(0, 8)}`;
    expect((await call(OWNER, 'POST', '/v1/sessions', { id })).status).toBe(201);
    return id;
  };

  it('native: the outcome error with {error: {code, message}}', async () => {
    const id = await newSession();
    refuseNextCall();
    const answer = await call(OWNER, 'POST', `/v1/sessions/${id}/messages?wait=true`, { text: 'fail' });
    expect(answer.status).toBe(200);
    expect(json(answer)).toMatchObject({
      outcome: 'error',
      error: { code: 'bad_request', message: expect.any(String) },
    });
  });

  it('OpenAI Responses: status failed with the code in error.code', async () => {
    const id = await newSession();
    refuseNextCall();
    const answer = await call(OWNER, 'POST', '/openai/v1/responses', { conversation: id, input: 'fail' });
    expect(json(answer)).toMatchObject({
      status: 'failed',
      error: { code: 'bad_request', message: expect.any(String) },
    });
  });

  it('OpenAI Chat Completions: a 502 error answer with the code', async () => {
    const id = await newSession();
    refuseNextCall();
    const response = await fetch(`${base}/openai/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${OWNER}`, 'content-type': 'application/json', 'x-session-id': id },
      body: JSON.stringify({ model: 'fake', messages: [{ role: 'user', content: 'fail' }] }),
    });
    expect(response.status).toBe(502);
    expect(await response.json()).toMatchObject({ error: { code: 'bad_request', message: expect.any(String) } });
  });

  it('LangGraph: runs/wait answers __error__ with the code', async () => {
    const id = await newSession();
    refuseNextCall();
    const answer = await call(OWNER, 'POST', `/langgraph/threads/${id}/runs/wait`, {
      assistant_id: 'agent',
      input: { messages: [{ role: 'user', content: 'fail' }] },
    });
    expect(json(answer).__error__).toMatchObject({ error: 'bad_request', message: expect.any(String) });
  });

  it('AI SDK: an error part whose text leads with the code', async () => {
    const id = await newSession();
    refuseNextCall();
    const answer = await call(OWNER, 'POST', '/ai-sdk/chat', {
      id,
      trigger: 'submit-message',
      messages: [{ id: 'u1', role: 'user', parts: [{ type: 'text', text: 'fail' }] }],
    });
    const error = answer.text
      .split('\n')
      .filter((l) => l.startsWith('data: {'))
      .map((l) => JSON.parse(l.slice(6)) as { type: string; errorText?: string })
      .find((p) => p.type === 'error');
    expect(error?.errorText).toMatch(/^bad_request: /);
  });
});
