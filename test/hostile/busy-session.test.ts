/**
 * Every mutating route answers within its timeout whatever the session is doing (DESIGN §5.3),
 * against the real `sessionlog serve` and `sessionlog worker` processes: each route of every
 * API that is not a read is sent to a session whose turn is running (a model call that takes
 * far longer than the deadline), one paused on its budget (waiting minutes for a raise) and one
 * waiting for a tool approval (which never comes). Each route gets a session of its own in each
 * state, so an erase or a cancel does not change what the next route meets.
 *
 * A route "answers" when its status line and headers arrive: a stream that then follows the
 * turn has answered. Routes whose whole point is to wait for a turn's end (`?wait=true`,
 * LangGraph `runs/wait`, a Responses call that is neither streamed nor in the background, a
 * non-streamed chat completion) are sent in their answering-at-once form where the API has one
 * and are otherwise listed in WAITS_BY_DESIGN, each with its reason.
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
import { eventually } from '../support/log-wait.js';

/** How long a route may take to answer; every state below lasts far longer. */
const DEADLINE_MS = 5_000;
/** How long a running turn's model call takes in the `running` state. */
const SLOW_MODEL_MS = 60_000;

/** Routes that exist to wait for a turn's end, and have no answering-at-once form in their API. */
const WAITS_BY_DESIGN: Record<string, string> = {
  'POST /langgraph/threads/:thread_id/runs/wait':
    'LangGraph: "wait for the run to finish"; the same run without waiting is POST …/runs',
};

const MUTATING: RouteSpec[] = [NATIVE_TABLE, OPENAI_TABLE, AI_SDK_TABLE, LANGGRAPH_TABLE]
  .flatMap((t) => [...t.routes])
  .filter((r) => r.right !== 'read' && !(`${r.method} ${r.path}` in WAITS_BY_DESIGN));

const dir = mkdtempSync(join(tmpdir(), 'sessionlog-busy-'));
const common = {
  SESSIONLOG_STORE: `sqlite:${join(dir, 'sessions.db')}`,
  SESSIONLOG_TASK_QUEUE: `busy-${randomUUID()}`,
  SESSIONLOG_MODEL: 'fake',
  OPENAI_API_KEY: 'busy-test-key',
  // Every tool call waits for an approval.
  SESSIONLOG_APPROVAL: 'always',
};

let fake: FakeModelServer;
let worker: CliProcess;
let serve: CliProcess;
let base: string;

type State = 'running' | 'paused' | 'approval';

/** What a route's request names: the busy session, and the pending call where there is one. */
type Target = { session: string; callId: string };

async function call(method: string, path: string, body?: unknown): Promise<{ status: number; text: string }> {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: response.status, text: await response.text() };
}

/** The status of `status` for a session, as the native API shows it. */
async function phaseOf(session: string): Promise<{ phase?: string; pending?: unknown[]; paused?: unknown }> {
  const shown = await call('GET', `/v1/sessions/${session}`);
  return (
    (JSON.parse(shown.text) as { status?: { phase?: string; pending?: unknown[]; paused?: unknown } }).status ?? {}
  );
}

/** A new session in `state`, once it is there. */
async function busySession(state: State): Promise<Target> {
  const session = `busy-${state}-${randomUUID().slice(0, 8)}`;
  const budget = state === 'paused' ? { turn: { modelCalls: 0 }, waitMs: 600_000 } : undefined;
  expect((await call('POST', '/v1/sessions', { id: session, ...(budget ? { budget } : {}) })).status).toBe(201);
  const text = state === 'approval' ? 'use a tool' : 'take your time';
  expect((await call('POST', `/v1/sessions/${session}/messages`, { text })).status).toBe(202);
  let callId = 'call_none';
  await eventually(async () => {
    if (state === 'approval') {
      const pending = JSON.parse((await call('GET', '/v1/approvals?status=pending')).text) as {
        approvals: Array<{ sessionId: string; callId: string }>;
      };
      const mine = pending.approvals.find((a) => a.sessionId === session);
      if (mine) callId = mine.callId;
      return mine ? true : undefined;
    }
    const status = await phaseOf(session);
    if (state === 'paused') return status.phase === 'paused' ? true : undefined;
    // Running: the turn is open (its model call is held by the slow fake model).
    return status.phase === 'turn' || status.phase === 'model' ? true : undefined;
  }, 30_000);
  return { session, callId };
}

/** A body each route takes, in its answering-at-once form. */
function requestFor(route: RouteSpec, target: Target): { path: string; body?: unknown } {
  const path = route.path.replace(/:([A-Za-z_]+)/g, (_, name: string) => {
    if (name === 'callId') return target.callId;
    if (name === 'run_id') return 'run-none';
    if (name === 'item_id') return 'msg_none';
    if (route.path.includes('/responses/')) return 'resp_none';
    return target.session;
  });
  const p = route.path;
  const fresh = `${target.session}-new`;
  const body = ((): unknown => {
    if (route.method === 'DELETE') return undefined;
    if (p === '/v1/sessions/:id' && route.method === 'PATCH') return { budget: { turn: { modelCalls: 5 } } };
    if (p === '/v1/sessions') return { id: fresh };
    if (p.endsWith('/messages')) return { text: 'and another thing' };
    if (p.endsWith('/approvals/:callId')) return { decision: 'approve' };
    if (p.endsWith('/tool-results')) return { callId: target.callId, output: 'done' };
    // The session's first user message is seq 2 (session/run, turn/start, then it).
    if (p.endsWith('/edit')) return { seq: 2, text: 'edited' };
    if (p.endsWith('/regenerate')) return {};
    if (p.endsWith('/fork')) return { id: fresh };
    if (p.endsWith('/salvage')) return { into: fresh };
    if (p.endsWith('/chat/completions'))
      return { model: 'fake', stream: true, messages: [{ role: 'user', content: 'and another thing' }] };
    if (p.endsWith('/openai/v1/responses'))
      return { conversation: target.session, input: 'and another thing', background: true };
    if (p.endsWith('/conversations')) return {};
    if (p.endsWith('/conversations/:id/items'))
      return { items: [{ type: 'message', role: 'user', content: 'an item' }] };
    if (p.endsWith('/conversations/:id')) return { metadata: { topic: 'busy' } };
    if (p.endsWith('/ai-sdk/chat'))
      return {
        id: target.session,
        trigger: 'submit-message',
        messages: [{ id: 'u-busy', role: 'user', parts: [{ type: 'text', text: 'and another thing' }] }],
      };
    if (p.endsWith('/runs') || p.endsWith('/runs/stream'))
      return {
        assistant_id: 'agent',
        input: { messages: [{ role: 'user', content: 'and another thing' }] },
        multitask_strategy: 'enqueue',
      };
    if (p.endsWith('/state')) return { values: { messages: [{ role: 'user', content: 'a state update' }] } };
    if (p.endsWith('/copy')) return {};
    if (p.endsWith('/langgraph/threads')) return { thread_id: target.session, if_exists: 'do_nothing' };
    if (p.includes('/langgraph/threads/:thread_id')) return { metadata: { topic: 'busy' } };
    return {};
  })();
  return { path, body };
}

/** Sends the route's request; resolves with its status once the status line arrives, or 'timeout'. */
async function answerOf(route: RouteSpec, target: Target): Promise<number | 'timeout'> {
  const { path, body } = requestFor(route, target);
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), DEADLINE_MS);
  try {
    const headers: Record<string, string> = body === undefined ? {} : { 'content-type': 'application/json' };
    if (path.endsWith('/chat/completions')) headers['x-session-id'] = target.session;
    const response = await fetch(`${base}${path}`, {
      method: route.method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: controller.signal,
    });
    // Answered: a stream that follows the turn is not read further.
    controller.abort();
    return response.status;
  } catch (error) {
    if (controller.signal.aborted) return 'timeout';
    throw error;
  } finally {
    clearTimeout(timer);
  }
}

beforeAll(async () => {
  fake = await startFakeModelServer({
    model: 'fake',
    matcher: ({ lastUserText }) =>
      lastUserText === 'use a tool'
        ? {
            toolCalls: [{ id: `call_${randomUUID().slice(0, 8)}`, name: 'search_history', arguments: '{"query":"x"}' }],
          }
        : undefined,
  });
  const model = { OPENAI_BASE_URL: fake.baseURL };
  worker = startCli('worker', dir, { ...common, ...model });
  serve = startCli('serve', dir, { ...common, ...model, SESSIONLOG_PORT: '0' });
  base = await serve.waitFor(/gateway: (http:\/\/[^/\s]+)\/v1/);
  await worker.waitFor(/(worker on )/);
}, 180_000);

afterAll(async () => {
  await Promise.all([serve?.stop(), worker?.stop()]);
  await fake?.close();
}, 60_000);

describe('every mutating route answers within its deadline whatever the session is doing', () => {
  // Running last: its held model calls take the worker's activity slots until they are cancelled.
  for (const state of ['paused', 'approval', 'running'] as const) {
    it(`while the session ${state === 'running' ? 'runs a turn' : state === 'paused' ? 'is paused on its budget' : 'waits for an approval'}`, async () => {
      if (state === 'running') fake.configure({ firstTokenDelayMs: SLOW_MODEL_MS });
      try {
        const targets = await Promise.all(MUTATING.map(() => busySession(state)));
        const answers = await Promise.all(MUTATING.map((route, i) => answerOf(route, targets[i]!)));
        const table = MUTATING.map((r, i) => `${r.method} ${r.path} → ${answers[i]}`).join('\n');
        const late = MUTATING.filter((_, i) => answers[i] === 'timeout').map((r) => `${r.method} ${r.path}`);
        expect(late, `no answer within ${DEADLINE_MS} ms while ${state}:\n${table}`).toEqual([]);
        // Answers, not failures of the gateway itself.
        const faults = MUTATING.map((r, i) => [`${r.method} ${r.path}`, answers[i]] as const).filter(
          ([, status]) => typeof status === 'number' && status >= 500,
        );
        expect(faults).toEqual([]);
        if (state === 'running')
          await Promise.all(targets.map((t) => call('POST', `/v1/sessions/${t.session}/cancel`)));
      } finally {
        fake.configure({ firstTokenDelayMs: 0 });
      }
    }, 180_000);
  }
});
