/**
 * The gateway's request deadlines over real loopback sockets: a body that never ends or
 * trickles, headers that trickle and a request that outlives the request timeout are each cut
 * with a 408 in the documented error shape; a live SSE stream and a long `?wait=true` turn,
 * which have fully arrived, are never cut. Also the settings that configure them.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ConfigError, resolveConfig } from '../../src/config.js';
import { DEFAULT_GATEWAY_TIMEOUTS } from '../../src/gateway/settings.js';
import { createGateway, startGateway, type RunningGateway } from '../../src/gateway/index.js';
import type { StoredEvent } from '../../src/session/index.js';
import { startStack, type Stack } from '../support/stack.js';
import {
  captureLogger,
  createSettledSession,
  expectRawErrorShape,
  openSse,
  rawExchange,
  readEventsUntil,
  request,
  type LogEntry,
} from './http.js';

/** Short deadlines so the tests run quickly; the pauses below are chosen against these. */
const TIMEOUTS = { connectionTimeoutMs: 1_000, headersTimeoutMs: 1_000, bodyTimeoutMs: 2_000, requestTimeoutMs: 4_000 };

let stack: Stack;
let gateway: RunningGateway;
let logs: LogEntry[];
const sessionId = `timeouts-${Date.now()}`;

beforeAll(async () => {
  stack = await startStack();
  const { logger, entries } = captureLogger();
  logs = entries;
  gateway = await startGateway({
    client: stack.client,
    host: '127.0.0.1',
    port: 0,
    bodyLimitBytes: 64 * 1024,
    logger,
    sseHeartbeatMs: 60_000,
    ...TIMEOUTS,
  });
  // A settled log (the run started, one turn answered): later changes could only come from the requests under test.
  await createSettledSession(gateway.url, sessionId);
});
afterAll(async () => {
  await gateway?.close();
  await stack?.close();
});
beforeEach(() => {
  stack.fake.reset();
  stack.fake.configure({ tokenDelayMs: 0, firstTokenDelayMs: 0 });
});

const messageHead = (path: string, framing: string): string =>
  `POST ${path} HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\n${framing}\r\n\r\n`;

async function storedLog(): Promise<StoredEvent[]> {
  return stack.store.readFrom(sessionId, 0);
}

describe('gateway timeouts', () => {
  it('cuts a chunked body that never ends with 408 REQUEST_TIMEOUT in the error shape, and closes the connection', async () => {
    const before = await storedLog();
    const response = await rawExchange(gateway.url, [
      messageHead(`/v1/sessions/${sessionId}/messages`, 'Transfer-Encoding: chunked'),
      '5\r\n{"tex\r\n',
    ]);
    expect(response.status).toBe(408);
    expect(expectRawErrorShape(response, 'endless chunked body')).toBe('REQUEST_TIMEOUT');
    expect(JSON.parse(response.body).error.message).toContain('SESSIONLOG_BODY_TIMEOUT_MS');
    expect(response.closed).toBe(true);
    expect(await storedLog()).toEqual(before);
  });

  it('cuts a body sent one byte every 1.5 s with 408, though the connection never goes idle for its idle timeout', async () => {
    const body = JSON.stringify({ text: 'slow loris' });
    const parts: Array<string | number> = [
      messageHead(`/v1/sessions/${sessionId}/messages`, `Content-Length: ${Buffer.byteLength(body)}`),
    ];
    for (const byte of body) parts.push(byte, 1_500);
    const before = await storedLog();
    const response = await rawExchange(gateway.url, parts);
    expect(response.status).toBe(408);
    expect(expectRawErrorShape(response, 'one byte per 1.5 s')).toBe('REQUEST_TIMEOUT');
    expect(await storedLog()).toEqual(before);
  });

  it('cuts request headers that trickle in with 408 in the error shape (headers timeout)', async () => {
    const parts: Array<string | number> = ['GET /v1/sessions HTTP/1.1\r\nHost: gateway\r\n'];
    for (let i = 0; i < 20; i++) parts.push(300, `X-Slow-${i}: 1\r\n`);
    const response = await rawExchange(gateway.url, parts);
    expect(response.status).toBe(408);
    expect(expectRawErrorShape(response, 'trickling headers')).toBe('REQUEST_TIMEOUT');
    expect(JSON.parse(response.body).error.message).toContain('SESSIONLOG_HEADERS_TIMEOUT_MS');
  });

  it('cuts a request that outlives the request timeout even when the body timeout is longer, with 408 in the error shape', async () => {
    const lenient = await startGateway({
      client: stack.client,
      host: '127.0.0.1',
      port: 0,
      bodyLimitBytes: 64 * 1024,
      connectionTimeoutMs: 1_000,
      headersTimeoutMs: 1_000,
      bodyTimeoutMs: 60_000,
      requestTimeoutMs: 2_000,
    });
    try {
      const parts: Array<string | number> = [messageHead(`/v1/sessions/${sessionId}/messages`, 'Content-Length: 100')];
      for (let i = 0; i < 40; i++) parts.push('{', 250);
      const response = await rawExchange(lenient.url, parts);
      expect(response.status).toBe(408);
      expect(expectRawErrorShape(response, 'request timeout')).toBe('REQUEST_TIMEOUT');
      expect(JSON.parse(response.body).error.message).toContain('SESSIONLOG_REQUEST_TIMEOUT_MS');
    } finally {
      await lenient.close();
    }
  });

  it('never cuts a live SSE stream: after every deadline has passed it still delivers the next turn', async () => {
    const id = `${sessionId}-sse`;
    expect((await request(gateway.url, 'POST', '/v1/sessions', { json: { id } })).status).toBe(201);
    const sse = await openSse(`${gateway.url}/v1/sessions/${id}/events?from=0`);
    expect(sse.status).toBe(200);
    // Quiet for longer than the idle, headers, body and request timeouts together (no heartbeat in between).
    await new Promise((resolve) => setTimeout(resolve, TIMEOUTS.requestTimeoutMs + 1_500));
    expect(
      (await request(gateway.url, 'POST', `/v1/sessions/${id}/messages`, { json: { text: 'still there?' } })).status,
    ).toBe(202);
    const events = await readEventsUntil(sse, (event) => event.type === 'turn/end');
    sse.close();
    expect(events.at(-1)?.type).toBe('turn/end');
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i));
  });

  it('answers a ?wait=true turn that takes longer than every deadline', async () => {
    const id = `${sessionId}-wait`;
    expect((await request(gateway.url, 'POST', '/v1/sessions', { json: { id } })).status).toBe(201);
    stack.fake.configure({ firstTokenDelayMs: TIMEOUTS.requestTimeoutMs + 1_000 });
    const reply = await request(gateway.url, 'POST', `/v1/sessions/${id}/messages?wait=true`, {
      json: { text: 'take your time' },
    });
    expect(reply.status).toBe(200);
    expect(reply.body).toMatchObject({ outcome: 'completed', text: 'echo: take your time' });
  });

  it('logs an aborted upload at debug, not as an error', async () => {
    const seen = logs.length;
    const parts = [messageHead(`/v1/sessions/${sessionId}/messages`, 'Content-Length: 200'), '{"text": "cut sh'];
    // Read for a moment, then walk away mid-body.
    await rawExchange(gateway.url, parts, 300);
    await expect
      .poll(() => logs.slice(seen).some((entry) => entry.msg === 'client aborted the request'), { timeout: 5_000 })
      .toBe(true);
    const loud = logs.slice(seen).filter((entry) => entry.level >= 40);
    expect(loud, JSON.stringify(loud)).toEqual([]);
    expect(logs.slice(seen).find((entry) => entry.msg === 'client aborted the request')?.level).toBe(20);
  });
});

describe('timeout settings', () => {
  it('default to the documented values and are read from SESSIONLOG_*_TIMEOUT_MS', () => {
    expect(resolveConfig({}).gateway).toMatchObject(DEFAULT_GATEWAY_TIMEOUTS);
    expect(DEFAULT_GATEWAY_TIMEOUTS).toEqual({
      connectionTimeoutMs: 60_000,
      headersTimeoutMs: 10_000,
      bodyTimeoutMs: 30_000,
      requestTimeoutMs: 60_000,
    });
    const config = resolveConfig({
      SESSIONLOG_CONNECTION_TIMEOUT_MS: '5000',
      SESSIONLOG_HEADERS_TIMEOUT_MS: '2000',
      SESSIONLOG_BODY_TIMEOUT_MS: '3000',
      SESSIONLOG_REQUEST_TIMEOUT_MS: '4000',
    });
    expect(config.gateway).toMatchObject({
      connectionTimeoutMs: 5_000,
      headersTimeoutMs: 2_000,
      bodyTimeoutMs: 3_000,
      requestTimeoutMs: 4_000,
    });
  });

  it('refuse a headers timeout longer than the request timeout, and values that are not whole milliseconds, naming the setting', () => {
    expect(() => resolveConfig({ SESSIONLOG_HEADERS_TIMEOUT_MS: '90000' })).toThrow(ConfigError);
    expect(() => resolveConfig({ SESSIONLOG_HEADERS_TIMEOUT_MS: '90000' })).toThrow(
      /SESSIONLOG_HEADERS_TIMEOUT_MS.*SESSIONLOG_REQUEST_TIMEOUT_MS/,
    );
    expect(() => resolveConfig({ SESSIONLOG_BODY_TIMEOUT_MS: '1.5' })).toThrow(/SESSIONLOG_BODY_TIMEOUT_MS/);
    expect(() => resolveConfig({ SESSIONLOG_CONNECTION_TIMEOUT_MS: '0' })).toThrow(/SESSIONLOG_CONNECTION_TIMEOUT_MS/);
    const base = { client: stack.client, host: '127.0.0.1', bodyLimitBytes: 1024 };
    expect(() => createGateway({ ...base, headersTimeoutMs: 5_000, requestTimeoutMs: 1_000 })).toThrow(
      /SESSIONLOG_HEADERS_TIMEOUT_MS/,
    );
    expect(() => createGateway({ ...base, bodyTimeoutMs: 0 })).toThrow(/SESSIONLOG_BODY_TIMEOUT_MS/);
  });
});
