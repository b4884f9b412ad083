/**
 * The list of tool calls waiting for an answer across sessions (DESIGN §5.1): `GET
 * /v1/approvals?status=pending` and `sessionlog approvals list --json` (the real CLI, a child
 * process on the same store) stay exact while 20 sessions request calls and have them
 * answered (over HTTP and with `sessionlog approvals approve|deny`). The stack has its own
 * store, so every listed call is one of this test's.
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SessionClient } from '../../src/client/session-client.js';
import { startGateway, type RunningGateway } from '../../src/gateway/index.js';
import { openSqliteStore } from '../../src/persistence/relational/sqlite/store.js';
import type { FakeReply } from '../../src/model/fake-server.js';
import { isEventOfType } from '../../src/session/index.js';
import { BUILTIN_TOOLS } from '../../src/tools/builtin.js';
import { ToolRegistry, type Tool } from '../../src/tools/registry.js';
import { waitForEvent } from '../support/log-wait.js';
import { TEST_TUNABLES, startStack, temporalAddress, type Stack } from '../support/stack.js';
import { request } from './http.js';

const ROOT = new URL('../..', import.meta.url).pathname;
const SESSIONS = 20;

const deployTool: Tool = {
  name: 'deploy',
  description: 'Deploys the service to a target.',
  parameters: { type: 'object', properties: { target: { type: 'string' } }, required: ['target'] },
  approval: 'always',
  run: (args) => Promise.resolve({ text: `deployed to ${(args as { target: string }).target}` }),
};

/** `deploy NAME` asks for deploy with call id `call-NAME`; after the tool result, a short text. */
function reply({
  body,
  lastUserText,
}: {
  body: { messages: Array<{ role: string }> };
  lastUserText: string;
}): FakeReply | undefined {
  if (body.messages.at(-1)?.role === 'tool') return { text: 'done' };
  const target = /^deploy (\S+)$/.exec(lastUserText)?.[1];
  return target
    ? { text: '', toolCalls: [{ id: `call-${target}`, name: 'deploy', arguments: { target } }] }
    : undefined;
}

type Listed = {
  sessionId: string;
  callId: string;
  tool: string;
  kind: string;
  arguments: string;
  turn: number;
  step: number;
  requestedAt: number;
  ageMs: number;
  expiresAt: number;
};

let stack: Stack;
let gateway: RunningGateway;
beforeAll(async () => {
  stack = await startStack({
    fake: { matcher: reply },
    worker: {
      tools: new ToolRegistry([...BUILTIN_TOOLS, deployTool]),
      agent: { model: 'fake', system: 'You are a test assistant.', tools: ['deploy'] },
    },
  });
  gateway = await startGateway({ client: stack.client, host: '127.0.0.1', port: 0, bodyLimitBytes: 64 * 1024 });
});
afterAll(async () => {
  await gateway?.close();
  await stack?.close();
});

/** Runs `sessionlog ARGS` on the stack's store, Temporal server and task queue. */
function cli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      TEMPORAL_ADDRESS: temporalAddress(),
      SESSIONLOG_STORE: `sqlite:${join(stack.dir, 'sessions.db')}`,
      SESSIONLOG_TASK_QUEUE: stack.taskQueue,
    };
    const child = spawn(process.execPath, [join(ROOT, 'bin/sessionlog.mjs'), ...args], {
      cwd: stack.dir,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

const key = (p: { sessionId: string; callId: string }) => `${p.sessionId} ${p.callId}`;

async function listedOverHttp(): Promise<Listed[]> {
  const res = await request(gateway.url, 'GET', '/v1/approvals?status=pending');
  expect(res.status).toBe(200);
  return (res.body as { approvals: Listed[] }).approvals;
}

async function listedByCli(): Promise<Listed[]> {
  const out = await cli(['--json', 'approvals', 'list']);
  expect(out.code, out.stderr).toBe(0);
  return JSON.parse(out.stdout) as Listed[];
}

/** Both lists hold exactly the expected calls, each described right. */
async function expectPending(expected: string[], label: string): Promise<Listed[]> {
  const want = expected.map((name) => `pend-${name} call-${name}`).sort();
  const lists: Array<{ listed: Listed[]; from: number; to: number }> = [];
  for (const [name, list] of [
    ['GET /v1/approvals', listedOverHttp],
    ['sessionlog approvals list --json', listedByCli],
  ] as const) {
    const from = Date.now();
    const listed = await list();
    lists.push({ listed, from, to: Date.now() });
    expect(listed.map(key).sort(), `${label}: ${name}`).toEqual(want);
  }
  for (const { listed, from, to } of lists) {
    for (const p of listed) {
      const name = p.callId.slice('call-'.length);
      expect(p).toMatchObject({
        sessionId: `pend-${name}`,
        tool: 'deploy',
        kind: 'approval',
        arguments: JSON.stringify({ target: name }),
        turn: 1,
        step: 1,
      });
      // The age is measured when the list was made: requested + age falls within the listing call.
      expect(p.requestedAt + p.ageMs).toBeGreaterThanOrEqual(from);
      expect(p.requestedAt + p.ageMs).toBeLessThanOrEqual(to);
      expect(p.expiresAt).toBeGreaterThan(p.requestedAt);
    }
  }
  return lists[0]!.listed;
}

describe('pending approvals across sessions', () => {
  it(
    `stay exact over HTTP and in the CLI while ${SESSIONS} sessions request calls and have them answered`,
    { timeout: 300_000 },
    async () => {
      const names = Array.from({ length: SESSIONS }, (_, i) => `s${i}-${Date.now()}`);
      for (const name of names) await stack.client.start({ sessionId: `pend-${name}` });
      await expectPending([], 'before any request');

      const requestCalls = async (batch: string[]) => {
        for (const name of batch) await stack.client.post(`pend-${name}`, `deploy ${name}`);
        await Promise.all(
          batch.map((name) =>
            waitForEvent(stack.client, `pend-${name}`, (e) => isEventOfType(e, 'tool/approval-request')),
          ),
        );
      };
      const answer = (name: string, decision: 'approve' | 'deny') =>
        request(gateway.url, 'POST', `/v1/sessions/pend-${name}/approvals/call-${name}`, { json: { decision } }).then(
          (res) => expect(res.status).toBe(200),
        );

      // Half the sessions ask.
      await requestCalls(names.slice(0, 10));
      await expectPending(names.slice(0, 10), 'ten requested');
      const one = await request(gateway.url, 'GET', `/v1/approvals?status=pending&session=pend-${names[3]!}`);
      expect((one.body as { approvals: Listed[] }).approvals.map(key)).toEqual([`pend-${names[3]!} call-${names[3]!}`]);

      // The other half ask while five of the first are answered.
      await Promise.all([
        requestCalls(names.slice(10)),
        ...names.slice(0, 5).map((name, i) => answer(name, i % 2 === 0 ? 'approve' : 'deny')),
      ]);
      await expectPending(names.slice(5), 'twenty requested, five answered');
      const human = await cli(['approvals', 'list']);
      expect(human.code, human.stderr).toBe(0);
      for (const name of names.slice(5)) expect(human.stdout).toContain(`call-${name}`);
      for (const name of names.slice(0, 5)) expect(human.stdout).not.toContain(`call-${name}`);

      // Two are answered with the CLI, everything else over HTTP; every turn ends.
      const approved = await cli([
        'approvals',
        'approve',
        `pend-${names[5]!}`,
        `call-${names[5]!}`,
        '--by',
        'cli-user',
      ]);
      expect(approved.code, approved.stderr).toBe(0);
      expect(approved.stdout.trim()).toBe(`call-${names[5]!}: approve`);
      const denied = await cli([
        '--json',
        'approvals',
        'deny',
        `pend-${names[6]!}`,
        `call-${names[6]!}`,
        '--reason',
        'not today',
      ]);
      expect(denied.code, denied.stderr).toBe(0);
      expect(JSON.parse(denied.stdout)).toEqual({ callId: `call-${names[6]!}`, decision: 'deny', reason: 'not today' });
      await expectPending(names.slice(7), 'two more answered with the CLI');
      const logged = (await stack.client.events(`pend-${names[6]!}`)).find((e) => isEventOfType(e, 'tool/approval'));
      expect(logged && isEventOfType(logged, 'tool/approval') ? logged.data : undefined).toMatchObject({
        decision: 'deny',
        reason: 'not today',
      });
      await Promise.all(names.slice(7).map((name) => answer(name, 'approve')));
      await expectPending([], 'all answered');
      await Promise.all(names.map((name) => waitForEvent(stack.client, `pend-${name}`, (e) => e.type === 'turn/end')));
      expect((await cli(['approvals', 'list'])).stdout.trim()).toBe('no tool calls are waiting for an answer');
    },
  );

  it(
    'a damaged session does not hide the calls of the others: it is left out of the list, which still answers',
    { timeout: 120_000 },
    async () => {
      const healthy = `pend-ok${Date.now()}`;
      const damaged = `pend-damaged-${Date.now()}`;
      await stack.client.send(damaged, 'hello');
      await stack.client.start({ sessionId: healthy });
      await stack.client.post(healthy, `deploy ok${healthy.slice('pend-ok'.length)}`);
      await waitForEvent(stack.client, healthy, (e) => isEventOfType(e, 'tool/approval-request'));
      // A garbage row past the damaged session's head: every reader of its log now refuses it (CORRUPT_LOG).
      const db = new Database(join(stack.dir, 'sessions.db'));
      try {
        const { key } = db.prepare('SELECT key FROM sessions WHERE id = ?').get(damaged) as { key: number };
        const { head } = db.prepare('SELECT MAX(seq) AS head FROM events WHERE session_key = ?').get(key) as {
          head: number;
        };
        db.prepare(
          "INSERT INTO events (id, session_key, seq, type, time, data) VALUES ((? << 32) + ?, ?, ?, 'user/message', 0, 'not json')",
        ).run(key, head + 1, key, head + 1);
      } finally {
        db.close();
      }
      // A gateway on a new store handle, as another server would be (the stack's own handle is warm).
      const store = openSqliteStore(join(stack.dir, 'sessions.db'));
      const fresh = await startGateway({
        client: new SessionClient({
          temporal: stack.temporal,
          store,
          taskQueue: stack.taskQueue,
          tunables: TEST_TUNABLES,
        }),
        host: '127.0.0.1',
        port: 0,
        bodyLimitBytes: 64 * 1024,
      });
      try {
        const one = await request(fresh.url, 'GET', `/v1/sessions/${damaged}/events`);
        expect((one.body as { error?: { code?: string } }).error?.code).toBe('CORRUPT_LOG');
        const listed = await request(fresh.url, 'GET', '/v1/approvals?status=pending');
        expect(listed.status, JSON.stringify(listed.body)).toBe(200);
        expect((listed.body as { approvals: Listed[] }).approvals.map((p) => p.sessionId)).toEqual([healthy]);
        const byCli = await cli(['--json', 'approvals', 'list']);
        expect(byCli.code, byCli.stderr).toBe(0);
        expect((JSON.parse(byCli.stdout) as Listed[]).map((p) => p.sessionId)).toEqual([healthy]);
        // Asked for by name, the damaged session's refusal is reported.
        const named = await request(fresh.url, 'GET', `/v1/approvals?status=pending&session=${damaged}`);
        expect((named.body as { error?: { code?: string } }).error?.code).toBe('CORRUPT_LOG');
      } finally {
        await fresh.close();
        await store.close();
      }
      await stack.client.approve(healthy, `call-ok${healthy.slice('pend-ok'.length)}`, { decision: 'deny' });
    },
  );
});
