/**
 * Boundaries before Temporal (issue: boundaries): `compact` validates its id and never starts a
 * workflow or creates a session for a refused or unknown id; a model the catalogue does not
 * know is refused at create (400 UNKNOWN_MODEL) and, named by an existing session, ends its
 * turn at once instead of being retried as a transient failure; message ids and texts with a
 * lone surrogate are refused by the client itself.
 */
import { WorkflowNotFoundError } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentCheck } from '../../src/compose.js';
import { SessionClient } from '../../src/client/session-client.js';
import { startGateway, type RunningGateway } from '../../src/gateway/index.js';
import { DEFAULT_MODEL_CATALOGUE } from '../../src/model/catalogue.js';
import { SESSION_FORMAT_VERSION } from '../../src/session/index.js';
import { workflowIdFor } from '../../src/workflows/api.js';
import { TEST_TUNABLES, startStack, type Stack } from '../support/stack.js';

let stack: Stack;
let client: SessionClient;
let gateway: RunningGateway;
beforeAll(async () => {
  stack = await startStack();
  // The client as the CLI and gateway assembly build it: agents checked against the catalogue.
  client = new SessionClient({
    temporal: stack.temporal,
    store: stack.store,
    taskQueue: stack.taskQueue,
    tunables: TEST_TUNABLES,
    checkAgent: agentCheck(DEFAULT_MODEL_CATALOGUE),
  });
  gateway = await startGateway({ client, host: '127.0.0.1', port: 0, bodyLimitBytes: 64 * 1024 });
});
afterAll(async () => {
  await gateway?.close();
  await stack?.close();
});

async function workflowExists(sessionId: string): Promise<boolean> {
  try {
    await stack.temporal.workflow.getHandle(workflowIdFor(sessionId)).describe();
    return true;
  } catch (error) {
    if (error instanceof WorkflowNotFoundError) return false;
    throw error;
  }
}

describe('compact', () => {
  it.each([['../escape'], ["x' OR '1'='1"]])(
    'refuses the id %j with INVALID_SESSION_ID and starts no workflow',
    async (id) => {
      await expect(client.compact(id)).rejects.toMatchObject({ code: 'INVALID_SESSION_ID' });
      expect(await workflowExists(id)).toBe(false);
    },
  );

  it('answers an unknown valid id with SESSION_NOT_FOUND (404 over HTTP), creating no session and no workflow', async () => {
    const id = `never-created-${Date.now()}`;
    await expect(client.compact(id)).rejects.toMatchObject({ code: 'SESSION_NOT_FOUND' });
    const response = await fetch(`${gateway.url}/v1/sessions/${id}/compact`, { method: 'POST' });
    expect(response.status).toBe(404);
    expect(((await response.json()) as { error: { code: string } }).error.code).toBe('SESSION_NOT_FOUND');
    expect(await stack.store.exists(id)).toBe(false);
    expect(await workflowExists(id)).toBe(false);
  });
});

describe('models the catalogue does not know', () => {
  it('are refused at create with 400 UNKNOWN_MODEL, and no session is created', async () => {
    const id = `unknown-model-${Date.now()}`;
    const response = await fetch(`${gateway.url}/v1/sessions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ id, agent: { model: 'no-such-model-xyz' } }),
    });
    expect(response.status).toBe(400);
    expect(((await response.json()) as { error: { code: string } }).error.code).toBe('UNKNOWN_MODEL');
    expect(await stack.store.exists(id)).toBe(false);
  });

  it('named by a stored session, end its turn with unknown_model on the first attempt (no transient retries)', async () => {
    const id = `stale-model-${Date.now()}`;
    // A header written before the catalogue lost the model (the store takes any name).
    await stack.store.create({
      version: SESSION_FORMAT_VERSION,
      id,
      createdAt: Date.now(),
      agent: { model: 'retired-model-9' },
    });
    const requestsBefore = stack.fake.requests().length;
    const reply = await client.send(id, 'hello?');
    expect(reply.outcome).toBe('error');
    const events = await client.events(id);
    expect(events.filter((e) => e.type === 'llm/retry')).toEqual([]);
    const end = events.find((e) => e.type === 'turn/end')!;
    expect(end.data).toMatchObject({ reason: { kind: 'error', error: { code: 'unknown_model' } } });
    // The provider was never called for it.
    expect(stack.fake.requests().length).toBe(requestsBefore);
  });
});

describe('message input', () => {
  it('refuses a message id or text with a lone surrogate before Temporal (send and post)', async () => {
    const id = `surrogates-${Date.now()}`;
    await expect(client.send(id, 'hello', { id: 'm\ud800id' })).rejects.toMatchObject({ code: 'INVALID_MESSAGE' });
    await expect(client.post(id, 'bad \udc00 text')).rejects.toMatchObject({ code: 'INVALID_MESSAGE' });
    expect(await workflowExists(id)).toBe(false);
  });
});
