/**
 * Tenants enforced below HTTP (issue 26, DESIGN §5.3): two tenants' scoped tokens try every
 * route of every API the gateway serves (native, OpenAI, AI SDK, LangGraph) on each other's
 * sessions, conversations, responses, items, threads and runs, in an order fast-check picks,
 * on each backend (SQLite, JSONL, PostgreSQL), against a real Temporal server and worker.
 * Zero leaks: no attempt succeeds (2xx), no answer carries the other tenant's text, the other
 * tenant's logs do not change, every refusal of a session of the other tenant is counted, and
 * lists and usage show only a tenant's own. A token without a right gets 403; the owner's own
 * requests still work.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AI_SDK_TABLE } from '../../src/gateway/ai-sdk/index.js';
import { NATIVE_TABLE, OPENAI_TABLE, startGateway, type RunningGateway } from '../../src/gateway/index.js';
import { LANGGRAPH_TABLE } from '../../src/gateway/langgraph/index.js';
import type { RouteSpec } from '../../src/gateway/route-table.js';
import { openStore } from '../../src/persistence/open.js';
import { workflowIdFor } from '../../src/workflows/api.js';
import { startStack, type Stack } from '../support/stack.js';
import {
  dropPostgresTestSchemas,
  postgresTestSchema,
  postgresUrlWithSchema,
  tempDir,
} from '../support/store-fixtures.js';

const TOKEN = { acme: 'acme-token-0123456789abcdef', bravo: 'bravo-token-0123456789abcdef' } as const;
const READER = 'acme-reader-0123456789abcdef';
type Tenant = keyof typeof TOKEN;
const ROUTES: RouteSpec[] = [NATIVE_TABLE, OPENAI_TABLE, AI_SDK_TABLE, LANGGRAPH_TABLE].flatMap((t) => [...t.routes]);
/** Routes that create with a caller-chosen id: given the other tenant's, they must not reach its session. */
const CREATING = new Set([
  'POST /v1/sessions',
  'POST /openai/v1/responses',
  'POST /ai-sdk/chat',
  'POST /langgraph/threads',
]);
/** Every route that names a resource of a session: by a path id, or by the id a create takes. */
const TARGETED = ROUTES.filter(
  (r) =>
    !r.public && ((r.path.includes('/:') && !r.path.includes('/models/')) || CREATING.has(`${r.method} ${r.path}`)),
);

/** What one tenant owns: ids of each kind, and a text only its sessions hold. */
type Owned = { session: string; response: string; item: string; run: string; secret: string };

/** A body each route accepts in shape (so the refusal is the scope's, not the schema's). */
function bodyFor(route: RouteSpec, target: Owned): unknown {
  const p = route.path;
  if (route.method === 'GET' || route.method === 'DELETE') return undefined;
  if (p.endsWith('/messages')) return { text: 'let me in' };
  if (p.endsWith('/approvals/:callId')) return { decision: 'approve' };
  if (p.endsWith('/tool-results')) return { callId: 'call_x', output: 'o' };
  if (p.endsWith('/edit')) return { seq: 1, text: 'x' };
  if (p === '/v1/sessions/:id' && route.method === 'PATCH') return { budget: null };
  if (p === '/v1/sessions') return { id: `${target.session}` };
  if (p.endsWith('/openai/v1/responses')) return { conversation: target.session, input: 'let me in' };
  if (p.endsWith('/chat/completions')) return { model: 'fake', messages: [{ role: 'user', content: 'x' }] };
  if (p.endsWith('/conversations/:id/items')) return { items: [{ type: 'message', role: 'user', content: 'x' }] };
  if (p.endsWith('/conversations/:id')) return { metadata: { a: 'b' } };
  if (p.endsWith('/ai-sdk/chat'))
    return {
      id: target.session,
      trigger: 'submit-message',
      messages: [{ id: 'u', role: 'user', parts: [{ type: 'text', text: 'x' }] }],
    };
  if (p.includes('/langgraph/threads/:thread_id/runs') || p.endsWith('/langgraph/runs'))
    return { assistant_id: 'agent', input: { messages: [{ role: 'user', content: 'x' }] }, thread_id: target.session };
  if (p.includes('/langgraph/threads/:thread_id')) return { metadata: { a: 'b' } };
  if (p.endsWith('/langgraph/threads')) return { thread_id: target.session, if_exists: 'do_nothing' };
  return {};
}

/** The route's path with every id the other tenant's. */
function pathFor(route: RouteSpec, target: Owned): string {
  return route.path.replace(/:([A-Za-z_]+)/g, (_, name: string) => {
    if (name === 'item_id') return target.item;
    if (name === 'run_id') return target.run;
    if (name === 'callId') return 'call_x';
    if (name === 'name') return 'x.txt';
    if (route.path.includes('/responses/:id')) return target.response;
    if (route.path.includes('/models/:id')) return 'fake';
    return target.session;
  });
}

async function call(
  gateway: RunningGateway,
  token: string,
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; text: string }> {
  const response = await fetch(`${gateway.url}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
    },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    signal: AbortSignal.timeout(15_000),
  });
  return { status: response.status, text: await response.text() };
}

const backends = [
  { name: 'sqlite', url: (dir: string) => `sqlite:${dir}/sessions.db` },
  { name: 'jsonl', url: (dir: string) => `jsonl:${dir}/sessions` },
  { name: 'postgres', url: () => postgresUrlWithSchema(postgresTestSchema()) },
];

afterAll(() => dropPostgresTestSchemas());

describe.each(backends)('tenants on $name', (backend) => {
  let stack: Stack;
  let gateway: RunningGateway;
  const refusals: string[] = [];
  const owned = {} as Record<Tenant, Owned>;
  let cleanup: () => void;

  beforeAll(async () => {
    const dir = tempDir(`sessionlog-tenants-${backend.name}-`);
    cleanup = dir.cleanup;
    stack = await startStack({ store: await openStore(backend.url(dir.dir)) });
    gateway = await startGateway({
      client: stack.client,
      host: '127.0.0.1',
      port: 0,
      bodyLimitBytes: 1024 * 1024,
      defaultAgent: { model: 'fake' },
      tokens: [
        { token: TOKEN.acme, tenant: 'acme' },
        { token: TOKEN.bravo, tenant: 'bravo' },
        { token: READER, tenant: 'acme', rights: ['read'] },
      ],
      telemetry: {
        traceRequest: (_request, run) => run({ setTurn() {}, setStatus() {} }),
        exposition: async () => ({ contentType: 'text/plain', text: '' }),
        crossTenant: (tenant) => refusals.push(tenant),
      },
    });
    for (const tenant of ['acme', 'bravo'] as const) {
      const secret = `${tenant}-secret-${Math.random().toString(36).slice(2)}`;
      const session = `${tenant}-${backend.name}-${Date.now()}`;
      const token = TOKEN[tenant];
      expect((await call(gateway, token, 'POST', '/v1/sessions', { id: session })).status).toBe(201);
      expect(
        (await call(gateway, token, 'POST', `/v1/sessions/${session}/messages?wait=true`, { text: secret })).status,
      ).toBe(200);
      const response = JSON.parse(
        (
          await call(gateway, token, 'POST', '/openai/v1/responses', {
            conversation: session,
            input: `${secret} again`,
          })
        ).text,
      ) as { id: string };
      const items = JSON.parse(
        (await call(gateway, token, 'GET', `/openai/v1/conversations/${session}/items`)).text,
      ) as {
        data: Array<{ id: string }>;
      };
      const run = JSON.parse(
        (
          await call(gateway, token, 'POST', `/langgraph/threads/${session}/runs/wait`, {
            assistant_id: 'agent',
            input: { messages: [{ role: 'user', content: `${secret} thrice` }] },
          })
        ).text,
      ) as unknown;
      expect(run).toBeDefined();
      const runs = JSON.parse((await call(gateway, token, 'GET', `/langgraph/threads/${session}/runs`)).text) as Array<{
        run_id: string;
      }>;
      owned[tenant] = { session, secret, response: response.id, item: items.data[0]!.id, run: runs[0]!.run_id };
    }
  }, 120_000);

  afterAll(async () => {
    await gateway?.close();
    await stack?.close();
    cleanup?.();
  });

  it("every route tried with one tenant's token on the other's ids: nothing succeeds, nothing leaks, nothing changes", async () => {
    const before = {
      acme: (await stack.client.events(owned.acme.session)).length,
      bravo: (await stack.client.events(owned.bravo.session)).length,
    };
    const attempts = fc.array(fc.tuple(fc.constantFrom(...TARGETED), fc.boolean()), {
      minLength: TARGETED.length,
      maxLength: TARGETED.length,
    });
    await fc.assert(
      fc.asyncProperty(attempts, async (list) => {
        for (const [route, acmeAttacks] of list) {
          const [attacker, victim]: [Tenant, Tenant] = acmeAttacks ? ['acme', 'bravo'] : ['bravo', 'acme'];
          const target = owned[victim];
          const path = pathFor(route, target);
          const label = `${attacker} → ${route.method} ${path}`;
          const answer = await call(gateway, TOKEN[attacker], route.method, path, bodyFor(route, target));
          // Creating an id the other tenant holds is refused as taken (ids are global); nothing else may pass.
          // The AI SDK's resume answers a chat it does not have with 204 (its protocol), as for no chat at all.
          if (route.operationId === 'aiSdkResumeStream') expect([204, 404], label).toContain(answer.status);
          else expect(answer.status, `${label}: ${answer.text.slice(0, 300)}`).toBeGreaterThanOrEqual(400);
          expect(answer.text, label).not.toContain(target.secret);
        }
      }),
      { numRuns: 2 },
    );
    // Each route on the other's ids, once more, in table order: every session-naming refusal is a 404.
    for (const route of TARGETED.filter((r) => r.path.includes('/:') && r.operationId !== 'aiSdkResumeStream')) {
      const answer = await call(
        gateway,
        TOKEN.bravo,
        route.method,
        pathFor(route, owned.acme),
        bodyFor(route, owned.acme),
      );
      expect([400, 404, 422], `${route.method} ${route.path}: ${answer.status} ${answer.text.slice(0, 200)}`).toContain(
        answer.status,
      );
    }
    expect(refusals.length).toBeGreaterThan(TARGETED.length / 2);
    expect(new Set(refusals)).toEqual(new Set(['acme', 'bravo']));
    // The victims' logs are as they were.
    expect((await stack.client.events(owned.acme.session)).length).toBe(before.acme);
    expect((await stack.client.events(owned.bravo.session)).length).toBe(before.bravo);
    // And their workflows: no attempt (an erase above all) terminated or deleted one.
    for (const tenant of ['acme', 'bravo'] as const) {
      const { status } = await stack.temporal.workflow.getHandle(workflowIdFor(owned[tenant].session)).describe();
      expect(status.name, `${tenant}'s session workflow`).toBe('RUNNING');
    }
  }, 300_000);

  it("branching one's own session into the other tenant's id is refused as taken; the other's session and workflow are untouched", async () => {
    const before = (await stack.client.events(owned.bravo.session)).length;
    const own = owned.acme.session;
    const victim = owned.bravo.session;
    const userSeq = (await stack.client.events(own)).find((e) => e.type === 'user/message')!.seq;
    const attempts: Array<[string, unknown]> = [
      [`/v1/sessions/${own}/fork`, { id: victim }],
      [`/v1/sessions/${own}/edit`, { seq: userSeq, text: 'x', id: victim }],
      [`/v1/sessions/${own}/regenerate`, { id: victim }],
      [`/v1/sessions/${own}/salvage`, { into: victim }],
    ];
    for (const [path, body] of attempts) {
      const answer = await call(gateway, TOKEN.acme, 'POST', path, body);
      expect(answer.status, `${path}: ${answer.text.slice(0, 200)}`).toBe(409);
      expect(answer.text).not.toContain(owned.bravo.secret);
    }
    expect((await stack.client.events(victim)).length).toBe(before);
    const { status } = await stack.temporal.workflow.getHandle(workflowIdFor(victim)).describe();
    expect(status.name).toBe('RUNNING');
  });

  it("lists, searches and sums only the token's tenant; a read-only token cannot write; the owner still can", async () => {
    for (const [tenant, other] of [
      ['acme', 'bravo'],
      ['bravo', 'acme'],
    ] as const) {
      const token = TOKEN[tenant];
      const sessions = JSON.parse((await call(gateway, token, 'GET', '/v1/sessions')).text) as {
        sessions: Array<{ id: string; tenant?: string }>;
      };
      expect(sessions.sessions.map((s) => s.id)).toContain(owned[tenant].session);
      expect(sessions.sessions.map((s) => s.id)).not.toContain(owned[other].session);
      expect(sessions.sessions.every((s) => s.tenant === tenant)).toBe(true);
      const threads = await call(gateway, token, 'POST', '/langgraph/threads/search', {});
      expect(threads.text).toContain(owned[tenant].session);
      expect(threads.text).not.toContain(owned[other].session);
      const usage = JSON.parse((await call(gateway, token, 'GET', '/v1/usage')).text) as {
        tenant: string;
        sessions: number;
      };
      expect(usage).toMatchObject({ tenant, sessions: 1 });
      expect((await call(gateway, token, 'GET', `/v1/usage?tenant=${other}`)).status).toBe(403);
      const pending = await call(gateway, token, 'GET', '/v1/approvals?status=pending');
      expect(pending.status).toBe(200);
    }
    const read = await call(gateway, READER, 'GET', `/v1/sessions/${owned.acme.session}/messages`);
    expect(read.status).toBe(200);
    expect(read.text).toContain(owned.acme.secret);
    const write = await call(gateway, READER, 'POST', `/v1/sessions/${owned.acme.session}/messages`, { text: 'x' });
    expect(write.status).toBe(403);
    expect(JSON.parse(write.text)).toMatchObject({ error: { code: 'FORBIDDEN' } });
    expect((await call(gateway, READER, 'DELETE', `/v1/sessions/${owned.acme.session}`)).status).toBe(403);
    const own = await call(gateway, TOKEN.acme, 'POST', `/v1/sessions/${owned.acme.session}/messages?wait=true`, {
      text: 'still mine',
    });
    expect(own.status).toBe(200);
    // The tenant is in the header, and stays.
    expect((await stack.client.header(owned.acme.session)).tenant).toBe('acme');
  }, 120_000);
});
