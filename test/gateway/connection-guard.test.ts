/**
 * A connection the listener guard refuses (429, one address over its limit) or evicts (408, too
 * many connections waiting on their clients) changes nothing: the request it carries is never
 * handled, even when it arrives complete. Before, a refused connection was still handed to the
 * HTTP parser, so a message posted on it was logged and answered while its client read 429
 * (found by running the hostile clients against `npm run dev`; the first test fails on that
 * code). An evicted connection's request was already dropped (the second test passed before
 * too); it stays here because the guard now promises it. Real gateway, real loopback sockets,
 * each client address its own.
 */
import type { Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type RunningGateway } from '../../src/gateway/index.js';
import type { StoredEvent } from '../../src/session/index.js';
import { startStack, type Stack } from '../support/stack.js';
import { createSettledSession, openSocket, readUntilClosed, request } from './http.js';

const LIMITS = { maxConnectionsPerAddress: 2, maxWaitingConnections: 3 };

let stack: Stack;
let gateway: RunningGateway;
const sessionId = `guard-${Date.now()}`;

beforeAll(async () => {
  stack = await startStack();
  gateway = await startGateway({
    client: stack.client,
    host: '127.0.0.1',
    port: 0,
    listenerLimits: LIMITS,
    bodyLimitBytes: 64 * 1024,
    sseHeartbeatMs: 60_000,
  });
  await createSettledSession(gateway.url, sessionId);
});
afterAll(async () => {
  await gateway?.close();
  await stack?.close();
});

/** A raw connection from `localAddress` and what the gateway sends on it until it closes. */
async function open(localAddress: string): Promise<{ socket: Socket; answer: Promise<{ text: string }> }> {
  const socket = await openSocket(gateway.url, localAddress);
  return { socket, answer: readUntilClosed(socket) };
}

function messageRequest(text: string): { head: string; body: string } {
  const body = JSON.stringify({ text });
  return {
    head: `POST /v1/sessions/${sessionId}/messages HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n`,
    body,
  };
}

async function userTexts(): Promise<string[]> {
  const events: StoredEvent[] = await stack.store.readFrom(sessionId, 0);
  return events.flatMap((e) =>
    e.type === 'user/message'
      ? (e.data as { content: Array<{ type: string; text?: string }> }).content.map((c) => c.text ?? '')
      : [],
  );
}

/** Waits until the gateway has seen the connections settle (the server and the guard run on the same loop). */
const settle = () => sleep(300);

describe('connections the listener guard closes', () => {
  it('a complete message sent on a connection refused with 429 is never logged', async () => {
    const address = '127.0.0.71';
    const held = [await open(address), await open(address)];
    await settle();
    const refused = await open(address);
    const text = `refused-${Date.now()}`;
    const { head, body } = messageRequest(text);
    refused.socket.write(head + body);
    const { text: answer } = await refused.answer;
    expect(answer).toMatch(/^HTTP\/1\.1 429 /);
    expect(answer).toContain('TOO_MANY_CONNECTIONS');
    // Had the request been handled, its message would be in the log well within this.
    await sleep(1_500);
    expect(await userTexts()).not.toContain(text);
    for (const h of held) h.socket.destroy();
    // The address is served again once it holds fewer connections.
    await settle();
    const ok = await request(gateway.url, 'GET', `/v1/sessions/${sessionId}`);
    expect(ok.status).toBe(200);
  });

  it('a message that arrives complete after its connection was evicted with 408 is never logged', async () => {
    const text = `evicted-${Date.now()}`;
    const { head, body } = messageRequest(text);
    const slow = await open('127.0.0.81');
    slow.socket.write(head.slice(0, 20));
    await settle();
    // Three more waiting connections: one past the limit, so the longest-waiting one (slow) goes.
    const others = [await open('127.0.0.82'), await open('127.0.0.83'), await open('127.0.0.84')];
    await settle();
    // The rest of the request arrives while the close lingers.
    slow.socket.write(head.slice(20) + body);
    expect((await slow.answer).text).toMatch(/^HTTP\/1\.1 408 /);
    await sleep(1_500);
    expect(await userTexts()).not.toContain(text);
    for (const o of others) o.socket.destroy();
  });

  it('a message sent in full on a connection within the limits is logged (the probe above can see one)', async () => {
    const text = `accepted-${Date.now()}`;
    const { head, body } = messageRequest(text);
    const client = await open('127.0.0.91');
    client.socket.write(head + body);
    await expect.poll(async () => (await userTexts()).includes(text), { timeout: 30_000, interval: 200 }).toBe(true);
    client.socket.destroy();
    expect((await client.answer).text).toMatch(/^HTTP\/1\.1 202 /);
  });
});
