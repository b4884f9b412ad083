/**
 * Edit, regenerate and branch as log operations (issue 24), over the native HTTP API against
 * the real gateway, workflow and fake model: each makes a new session forked before the turn it
 * changes; the original session's log is never rewritten; `branches` lists what was forked.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type RunningGateway } from '../../src/gateway/index.js';
import { textOf, type StoredEvent } from '../../src/session/index.js';
import { startStack, type Stack } from '../support/stack.js';
import { request } from './http.js';

let stack: Stack;
let gateway: RunningGateway;
beforeAll(async () => {
  stack = await startStack();
  gateway = await startGateway({ client: stack.client, host: '127.0.0.1', port: 0, bodyLimitBytes: 256 * 1024 });
});
afterAll(async () => {
  await gateway?.close();
  await stack?.close();
});

const texts = async (id: string) => (await stack.client.history(id)).map((m) => `${m.role}:${textOf(m.content)}`);

/** Waits for the session's turn count to reach `turns` and every turn to end. */
async function settled(id: string, turns: number): Promise<void> {
  await expect
    .poll(
      async () => {
        const events: StoredEvent[] = await stack.client.events(id);
        return `${events.filter((e) => e.type === 'turn/start').length}/${events.filter((e) => e.type === 'turn/end').length}`;
      },
      { timeout: 20_000 },
    )
    .toBe(`${turns}/${turns}`);
}

describe('edit, regenerate and branches', () => {
  it('edits an earlier message into a branch, regenerates the last reply into another, and lists both', async () => {
    const id = `branchy-${Date.now()}`;
    await stack.client.start({ sessionId: id });
    await stack.client.send(id, 'one');
    await stack.client.send(id, 'two');
    const before = await stack.client.events(id);
    const secondMessage = before.filter((e) => e.type === 'user/message')[1]!.seq;

    const edited = await request(gateway.url, 'POST', `/v1/sessions/${id}/edit`, {
      json: { seq: secondMessage, text: 'two, edited', id: `${id}-e` },
    });
    expect(edited.status).toBe(201);
    const branch = (edited.body as { branch: { sessionId: string; forkedFrom: string; forkedAt: number } }).branch;
    expect(branch).toMatchObject({ sessionId: `${id}-e`, forkedFrom: id });
    await settled(branch.sessionId, 2);
    expect(await texts(branch.sessionId)).toEqual([
      'user:one',
      'assistant:echo: one',
      'user:two, edited',
      'assistant:echo: two, edited',
    ]);

    const regenerated = await request(gateway.url, 'POST', `/v1/sessions/${id}/regenerate`, { json: {} });
    expect(regenerated.status).toBe(201);
    const again = (regenerated.body as { branch: { sessionId: string; forkedAt: number } }).branch;
    await settled(again.sessionId, 2);
    expect(await texts(again.sessionId)).toEqual([
      'user:one',
      'assistant:echo: one',
      'user:two',
      'assistant:echo: two',
    ]);
    expect(again.forkedAt).toBe(branch.forkedAt);

    // The original is untouched, event for event.
    expect(await stack.client.events(id)).toEqual(before);
    const listed = await request(gateway.url, 'GET', `/v1/sessions/${id}/branches`);
    expect(listed.status).toBe(200);
    expect((listed.body as { branches: Array<{ sessionId: string }> }).branches.map((b) => b.sessionId)).toEqual([
      branch.sessionId,
      again.sessionId,
    ]);
  });

  it('refuses to edit what is not a user message, naming the seq', async () => {
    const id = `branchy-bad-${Date.now()}`;
    await stack.client.start({ sessionId: id });
    await stack.client.send(id, 'hello');
    const reply = (await stack.client.events(id)).find((e) => e.type === 'assistant/message')!.seq;
    const refused = await request(gateway.url, 'POST', `/v1/sessions/${id}/edit`, { json: { seq: reply, text: 'x' } });
    expect(refused.status).toBe(400);
    expect(JSON.stringify(refused.body)).toContain(`seq ${reply}`);
  });
});
