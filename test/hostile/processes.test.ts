/**
 * The gateway (`sessionlog serve`) and the worker's operations listener (`sessionlog worker`
 * with SESSIONLOG_METRICS_PORT) as real processes, under what hostile or broken clients do:
 * slow headers, bodies stalled past their timeout and then abandoned, bodies refused before
 * they are read and then stalled, endless chunked bodies, 1,000 concurrent slow connections,
 * disconnects mid-body, mid-turn and mid-stream, a 100 MB body, malformed UTF-8 and header
 * floods. After each probe the same processes still serve: `GET /v1/sessions` answers, both
 * `/healthz` are ok, and neither process has exited.
 *
 * Two gateways: `serve` with short request deadlines (so the timeout probes end quickly) and
 * `crowded` with every default, for the connection floods (the defaults must keep 1,000 slow
 * clients from starving a fast one).
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import type { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveConfig } from '../../src/config.js';
import { DEFAULT_LISTENER_LIMITS } from '../../src/gateway/listener-guard.js';
import { startFakeModelServer, type FakeModelServer } from '../../src/model/fake-server.js';
import { startCli, type CliProcess } from '../support/cli-process.js';
import { eventually } from '../support/log-wait.js';
import { expectRawErrorShape, openSocket, rawExchange, readUntilClosed } from '../gateway/http.js';

const dir = mkdtempSync(join(tmpdir(), 'sessionlog-hostile-'));
const common = {
  SESSIONLOG_STORE: `sqlite:${join(dir, 'sessions.db')}`,
  SESSIONLOG_TASK_QUEUE: `hostile-${randomUUID()}`,
  SESSIONLOG_MODEL: 'fake',
  OPENAI_API_KEY: 'hostile-test-key',
};
/** Short deadlines for `serve` and the worker's listener; the probes' pauses are chosen against them. */
const SHORT = {
  SESSIONLOG_CONNECTION_TIMEOUT_MS: '2000',
  SESSIONLOG_HEADERS_TIMEOUT_MS: '1000',
  SESSIONLOG_BODY_TIMEOUT_MS: '1500',
  SESSIONLOG_REQUEST_TIMEOUT_MS: '6000',
};
const BODY_TIMEOUT_MS = Number(SHORT.SESSIONLOG_BODY_TIMEOUT_MS);
/** A body this many MiB is over the gateway's default limit (which grows with the media limit). */
const OVER_LIMIT_MIB = Math.ceil(resolveConfig({ ...common, ...SHORT }).gateway.bodyLimitBytes / (1024 * 1024)) + 2;
const LONG = {
  SESSIONLOG_CONNECTION_TIMEOUT_MS: '300000',
  SESSIONLOG_HEADERS_TIMEOUT_MS: '300000',
  SESSIONLOG_REQUEST_TIMEOUT_MS: '300000',
};

let fake: FakeModelServer;
let worker: CliProcess;
let serve: CliProcess;
let crowded: CliProcess;
let gatewayUrl: string;
let crowdedUrl: string;
let opsUrl: string;
const sessionId = `hostile-${Date.now()}`;

beforeAll(async () => {
  fake = await startFakeModelServer({ model: 'fake' });
  const model = { OPENAI_BASE_URL: fake.baseURL };
  worker = startCli('worker', dir, { ...common, ...model, ...SHORT, SESSIONLOG_METRICS_PORT: '0' });
  serve = startCli('serve', dir, { ...common, ...model, ...SHORT, SESSIONLOG_PORT: '0' });
  // Default connection limits; request deadlines long enough that no slow client times out during a probe.
  crowded = startCli('serve', dir, { ...common, ...model, ...LONG, SESSIONLOG_PORT: '0' });
  opsUrl = await worker.waitFor(/operations: (http:\/\/[^/\s]+)\/healthz/);
  gatewayUrl = await serve.waitFor(/gateway: (http:\/\/[^/\s]+)\/v1/);
  crowdedUrl = await crowded.waitFor(/gateway: (http:\/\/[^/\s]+)\/v1/);
  await worker.waitFor(/(worker on )/);
  expect((await post(gatewayUrl, '/v1/sessions', { id: sessionId })).status).toBe(201);
  const reply = await post(gatewayUrl, `/v1/sessions/${sessionId}/messages?wait=true`, { text: 'settle' });
  expect(reply.status).toBe(200);
}, 180_000);

afterAll(async () => {
  const codes = await Promise.all([serve?.stop(), crowded?.stop(), worker?.stop()]);
  await fake?.close();
  // SIGTERM is a clean stop for both commands.
  expect(codes).toEqual([0, 0, 0]);
}, 60_000);

/**
 * One request on a connection of its own, closed after the answer (`agent: false`): the test's
 * own keep-alive connections must not sit in the gateways' connection counts.
 */
function call(method: string, url: string, body?: unknown): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const request = httpRequest(
      url,
      { method, agent: false, headers: payload ? { 'content-type': 'application/json' } : {} },
      (response) => {
        let text = '';
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => (text += chunk));
        response.on('end', () => resolve({ status: response.statusCode ?? 0, text }));
        response.on('error', reject);
      },
    );
    request.on('error', reject);
    request.end(payload);
  });
}

async function post(base: string, path: string, body: unknown): Promise<{ status: number; body: unknown }> {
  const response = await call('POST', `${base}${path}`, body);
  return { status: response.status, body: JSON.parse(response.text) as unknown };
}

const get = (url: string) => call('GET', url);

/** A gauge or counter of the gateway's /metrics, by name and label set. */
async function metric(base: string, name: string, labels: string): Promise<number> {
  const { text } = await get(`${base}/metrics`);
  const line = text.split('\n').find((l) => l.startsWith(`${name}{${labels}}`));
  return line === undefined ? 0 : Number(line.split(' ').pop());
}

/** Waits until no connection of the crowded gateway waits on its client (the last probe's sockets are gone). */
async function crowdedSettled(): Promise<void> {
  await eventually(async () =>
    (await metric(crowdedUrl, 'sessionlog_http_connections', 'state="waiting"')) === 0 ? true : undefined,
  );
}

/** The same processes still serve: both gateways list sessions, every /healthz is ok, none exited. */
async function expectStillServing(label: string): Promise<void> {
  for (const [name, proc] of [
    ['serve', serve],
    ['crowded serve', crowded],
    ['worker', worker],
  ] as const) {
    expect(proc.alive(), `${label}: ${name} exited\n${proc.stderr().slice(-2000)}`).toBe(true);
  }
  for (const base of [gatewayUrl, crowdedUrl]) {
    const list = await get(`${base}/v1/sessions`);
    expect(list.status, `${label}: GET /v1/sessions on ${base}`).toBe(200);
    expect((await get(`${base}/healthz`)).status, `${label}: ${base}/healthz`).toBe(200);
  }
  expect((await get(`${opsUrl}/healthz`)).status, `${label}: worker /healthz`).toBe(200);
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

const statusOf = (text: string): number => Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0);

const jsonHead = (method: string, path: string, extra: string): string =>
  `${method} ${path} HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\n${extra}\r\n`;

describe('the gateway process under hostile clients', () => {
  it('answers a body stalled past its timeout with 408, and serves on after the client abandons it', async () => {
    const response = await rawExchange(gatewayUrl, [
      jsonHead('POST', `/v1/sessions/${sessionId}/messages`, 'Content-Length: 100\r\n'),
      '{"text":',
    ]);
    expect(response.status).toBe(408);
    expect(expectRawErrorShape(response, 'stalled body')).toBe('REQUEST_TIMEOUT');
    await expectStillServing('stalled body');
  });

  it('serves on when a client abandons a stalled body before its timeout fires', async () => {
    const socket = await openSocket(gatewayUrl);
    socket.on('error', () => {
      // The client side is destroyed below; nothing to read.
    });
    socket.write(jsonHead('POST', `/v1/sessions/${sessionId}/messages`, 'Content-Length: 100\r\n') + '{"te');
    await sleep(200);
    socket.destroy();
    // Past the body timeout of the abandoned request: its timer has fired (or been cleared).
    await sleep(BODY_TIMEOUT_MS * 2);
    await expectStillServing('abandoned body');
  });

  it.each([
    [
      'a 415 (a body that is not JSON)',
      415,
      'POST',
      '/v1/sessions',
      'Content-Type: text/plain\r\nContent-Length: 100\r\n',
    ],
    ['a GET that announces a body', 200, 'GET', '/v1/sessions', 'Content-Length: 100\r\n'],
    ['a 404', 404, 'POST', '/v1/no-such-route', 'Content-Type: application/json\r\nContent-Length: 100\r\n'],
  ])(
    'serves on after %s answered before its body arrived, the body stalled and then abandoned',
    async (_label, status, method, path, headers) => {
      const socket = await openSocket(gatewayUrl);
      const read = readUntilClosed(socket, BODY_TIMEOUT_MS * 3);
      socket.write(`${method} ${path} HTTP/1.1\r\nHost: gateway\r\n${headers}\r\nab`);
      // Held open past the body timeout (the old gateway crashed here), then abandoned.
      await sleep(BODY_TIMEOUT_MS * 2);
      socket.destroy();
      const { text } = await read;
      expect(statusOf(text)).toBe(status);
      await expectStillServing(`${method} ${path} answered before its body`);
    },
  );

  it('cuts an endless chunked body with 408 and serves on', async () => {
    const socket = await openSocket(gatewayUrl);
    const read = readUntilClosed(socket);
    socket.write(jsonHead('POST', `/v1/sessions/${sessionId}/messages`, 'Transfer-Encoding: chunked\r\n'));
    let chunks = 0;
    const writer = setInterval(() => {
      if (!socket.destroyed && socket.writable) socket.write('1\r\n \r\n');
      chunks += 1;
    }, 50);
    const { text, closed } = await read;
    clearInterval(writer);
    socket.destroy();
    expect(closed).toBe(true);
    expect(statusOf(text)).toBe(408);
    expect(chunks).toBeGreaterThan(1);
    await expectStillServing('endless chunked body');
  });

  it('cuts headers that trickle in with 408 and serves on', async () => {
    const trickle: Array<string | number> = ['GET /v1/sessions HTTP/1.1\r\n'];
    for (let i = 0; i < 40; i++) trickle.push(300, `X-Slow-${i}: y\r\n`);
    const response = await rawExchange(gatewayUrl, trickle);
    expect(response.closed).toBe(true);
    expect(response.status).toBe(408);
    await expectStillServing('slow headers');
  });

  it('refuses a 100 MB body with 413, announced or chunked, and serves on', async () => {
    const announced = await openSocket(gatewayUrl);
    const announcedRead = readUntilClosed(announced);
    announced.write(jsonHead('POST', '/v1/sessions', `Content-Length: ${100 * 1024 * 1024}\r\n`));
    const megabyte = Buffer.alloc(1024 * 1024, 0x20);
    // Writing stops once an answer arrived, as a client does.
    const answered = (socket: Socket) => socket.bytesRead > 0;
    for (let i = 0; i < 100 && !announced.destroyed && announced.writable && !answered(announced); i++) {
      if (!announced.write(megabyte))
        await new Promise((resolve) => announced.once('drain', resolve).once('close', resolve));
    }
    expect(statusOf((await announcedRead).text)).toBe(413);
    announced.destroy();

    const chunked = await openSocket(gatewayUrl);
    const chunkedRead = readUntilClosed(chunked);
    chunked.write(jsonHead('POST', '/v1/sessions', 'Transfer-Encoding: chunked\r\n'));
    const frame = Buffer.concat([Buffer.from(`${megabyte.length.toString(16)}\r\n`), megabyte, Buffer.from('\r\n')]);
    let sent = 0;
    for (; sent < 100 && !chunked.destroyed && chunked.writable && !answered(chunked); sent++) {
      if (!chunked.write(frame)) await new Promise((resolve) => chunked.once('drain', resolve).once('close', resolve));
    }
    const { text } = await chunkedRead;
    chunked.destroy();
    expect(statusOf(text)).toBe(413);
    await expectStillServing('100 MB body');
  });

  it('lets a client that keeps sending a too-large body read its 413 (a lingering close, not a reset)', async () => {
    // Like a client that streams its upload without watching for an early answer: it stops only
    // when the connection fails. Closing with its bytes unread would reset the connection, and the
    // client would lose the 413 it had not read yet.
    for (let round = 0; round < 5; round++) {
      const socket = await openSocket(gatewayUrl);
      const read = readUntilClosed(socket);
      socket.write(jsonHead('POST', '/v1/sessions', `Content-Length: ${OVER_LIMIT_MIB * 1024 * 1024}\r\n`));
      const megabyte = Buffer.alloc(1024 * 1024, 0x20);
      for (let i = 0; i < OVER_LIMIT_MIB && !socket.destroyed && socket.writable; i++) {
        if (!socket.write(megabyte))
          await new Promise((resolve) => socket.once('drain', resolve).once('close', resolve));
      }
      socket.end();
      const { text } = await read;
      socket.destroy();
      expect(statusOf(text), `round ${round}`).toBe(413);
    }
    await expectStillServing('a client that kept sending');
  });

  it('refuses a JSON body that is not UTF-8 with 400 INVALID_JSON, and a path of malformed UTF-8 with 400', async () => {
    const body = '{"text":"caf\xe9 \xff\xfe"}';
    const response = await rawExchange(gatewayUrl, [
      jsonHead('POST', `/v1/sessions/${sessionId}/messages`, `Content-Length: ${body.length}\r\nConnection: close\r\n`),
      body,
    ]);
    expect(response.status).toBe(400);
    expect(expectRawErrorShape(response, 'malformed UTF-8 body')).toBe('INVALID_JSON');
    expect(JSON.parse(response.body).error.message).toContain('UTF-8');
    const path = await rawExchange(gatewayUrl, [
      'GET /v1/sessions/%FF%FE HTTP/1.1\r\nHost: gateway\r\nConnection: close\r\n\r\n',
    ]);
    expect(path.status).toBe(400);
    await expectStillServing('malformed UTF-8');
  });

  it('answers a header flood with 431, and many small headers as usual', async () => {
    const big = `GET /v1/sessions HTTP/1.1\r\nHost: gateway\r\nX-Flood: ${'a'.repeat(100 * 1024)}\r\n\r\n`;
    const flood = await rawExchange(gatewayUrl, [big]);
    expect(flood.status).toBe(431);
    let many = 'GET /v1/sessions HTTP/1.1\r\nHost: gateway\r\nConnection: close\r\n';
    for (let i = 0; i < 2_500; i++) many += `x${i}:y\r\n`;
    const manySmall = await rawExchange(gatewayUrl, [`${many}\r\n`]);
    expect([200, 431]).toContain(manySmall.status);
    await expectStillServing('header flood');
  });

  it('serves on when clients vanish mid-turn (?wait=true) and mid-stream (SSE, OpenAI), and the turn still completes', async () => {
    fake.configure({ firstTokenDelayMs: 300, tokenDelayMs: 30 });
    try {
      const waiting = await openSocket(gatewayUrl);
      waiting.on('error', () => undefined);
      const body = JSON.stringify({ text: 'vanishing caller' });
      waiting.write(
        jsonHead('POST', `/v1/sessions/${sessionId}/messages?wait=true`, `Content-Length: ${body.length}\r\n`) + body,
      );
      await sleep(100);
      waiting.destroy();

      const sse = await openSocket(gatewayUrl);
      const firstFrame = new Promise<void>((resolve) => sse.once('data', () => resolve()));
      sse.on('error', () => undefined);
      sse.write(`GET /v1/sessions/${sessionId}/events HTTP/1.1\r\nHost: gateway\r\nAccept: text/event-stream\r\n\r\n`);
      await firstFrame;
      sse.destroy();

      const conversation = await post(gatewayUrl, '/openai/v1/conversations', {});
      expect(conversation.status).toBe(200);
      const conversationId = (conversation.body as { id: string }).id;
      const controller = new AbortController();
      const streamed = await fetch(`${gatewayUrl}/openai/v1/responses`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          model: 'fake',
          conversation: conversationId,
          input: 'stream then vanish',
          stream: true,
        }),
        signal: controller.signal,
      });
      expect(streamed.status).toBe(200);
      const reader = streamed.body!.getReader();
      await reader.read();
      controller.abort();

      // The abandoned `?wait=true` turn ran to its end all the same.
      await eventually(async () => {
        const history = await get(`${gatewayUrl}/v1/sessions/${sessionId}/messages`);
        return history.text.includes('echo: vanishing caller') ? true : undefined;
      });
    } finally {
      fake.configure({ firstTokenDelayMs: 0, tokenDelayMs: 0 });
    }
    await expectStillServing('vanishing clients');
  });
});

describe('the gateway process with its default connection limits', () => {
  /** Opens `count` connections from `addresses` (round robin) that send half a request line and then nothing. */
  async function slowClients(base: string, count: number, addresses: string[]) {
    const sockets: Socket[] = [];
    const answers = new Map<Socket, string>();
    await Promise.all(
      Array.from({ length: count }, async (_, i) => {
        const socket = await openSocket(base, addresses[i % addresses.length]);
        socket.setEncoding('latin1');
        socket.on('data', (chunk: string) => answers.set(socket, (answers.get(socket) ?? '') + chunk));
        socket.on('error', () => {
          // Reset by the gateway when it refuses or evicts the connection; the answer (if any) is in `answers`.
        });
        socket.write('GET /v1/sessions HTTP/1.1\r\nHost: gate');
        sockets.push(socket);
      }),
    );
    return {
      sockets,
      open: () => sockets.filter((s) => !s.destroyed && !s.readableEnded && !answers.has(s)).length,
      answeredWith: (status: number) => [...answers.values()].filter((text) => statusOf(text) === status).length,
      close: () => sockets.forEach((s) => s.destroy()),
    };
  }

  /** A fast client's request while the slow ones hold their connections; returns its status and the slow ones still open. */
  async function fastRequestAmong(slow: { open(): number }): Promise<{ status: number; slowOpen: number }> {
    const socket = await openSocket(crowdedUrl, '127.0.0.1');
    const read = readUntilClosed(socket);
    socket.write('GET /v1/sessions HTTP/1.1\r\nHost: gateway\r\nConnection: close\r\n\r\n');
    const { text } = await read;
    return { status: statusOf(text), slowOpen: slow.open() };
  }

  it('holds 1,000 slow connections from ten addresses and still answers a fast client while all of them wait', async () => {
    await crowdedSettled();
    const addresses = Array.from({ length: 10 }, (_, i) => `127.0.0.${20 + i}`);
    const slow = await slowClients(crowdedUrl, 1_000, addresses);
    try {
      const fast = await fastRequestAmong(slow);
      expect(fast.status).toBe(200);
      // Answered while every slow client still held its connection: nobody had to time out first.
      expect(fast.slowOpen).toBe(1_000);
    } finally {
      slow.close();
    }
    await expectStillServing('1,000 slow connections');
  });

  it(`refuses connections past ${DEFAULT_LISTENER_LIMITS.maxConnectionsPerAddress} from one address with 429, and serves other addresses`, async () => {
    await crowdedSettled();
    const limit = DEFAULT_LISTENER_LIMITS.maxConnectionsPerAddress;
    const refusedBefore = await metric(crowdedUrl, 'sessionlog_http_connections_closed_total', 'reason="per_address"');
    const slow = await slowClients(crowdedUrl, 1_000, ['127.0.0.40']);
    try {
      await eventually(async () => (slow.answeredWith(429) === 1_000 - limit ? true : undefined));
      const fast = await fastRequestAmong(slow);
      expect(fast.status).toBe(200);
      expect(fast.slowOpen).toBe(limit);
      const refused = await metric(crowdedUrl, 'sessionlog_http_connections_closed_total', 'reason="per_address"');
      expect(refused - refusedBefore).toBe(1_000 - limit);
    } finally {
      slow.close();
    }
    await expectStillServing('one address over its limit');
  });

  it(`closes the longest-waiting connections past ${DEFAULT_LISTENER_LIMITS.maxWaitingConnections} waiting ones with 408, and a fast client gets in`, async () => {
    await crowdedSettled();
    const limit = DEFAULT_LISTENER_LIMITS.maxWaitingConnections;
    const addresses = Array.from({ length: 8 }, (_, i) => `127.0.0.${60 + i}`);
    const count = limit + 100;
    const slow = await slowClients(crowdedUrl, count, addresses);
    try {
      await eventually(async () => (slow.answeredWith(408) === count - limit ? true : undefined));
      const fast = await fastRequestAmong(slow);
      expect(fast.status).toBe(200);
      // The fast client's connection made room by closing one more slow one; the rest still wait.
      expect(fast.slowOpen).toBe(limit - 1);
    } finally {
      slow.close();
    }
    await expectStillServing('waiting connections over the limit');
  });
});

describe("the worker's operations listener under hostile clients", () => {
  it('cuts trickling headers, a stalled body and an endless chunked body, and serves on', async () => {
    const trickle: Array<string | number> = ['GET /healthz HTTP/1.1\r\n'];
    for (let i = 0; i < 40; i++) trickle.push(300, `X-Slow-${i}: y\r\n`);
    const headers = await rawExchange(opsUrl, trickle);
    expect(headers.closed).toBe(true);

    const stalled = await openSocket(opsUrl);
    const stalledRead = readUntilClosed(stalled, 20_000);
    stalled.write('POST /healthz HTTP/1.1\r\nHost: ops\r\nContent-Length: 100\r\n\r\nab');
    await sleep(BODY_TIMEOUT_MS * 2);
    stalled.destroy();
    expect(statusOf((await stalledRead).text)).toBe(405);

    const endless = await openSocket(opsUrl);
    const endlessRead = readUntilClosed(endless, 20_000);
    endless.write('POST /healthz HTTP/1.1\r\nHost: ops\r\nTransfer-Encoding: chunked\r\n\r\n');
    const writer = setInterval(() => {
      if (!endless.destroyed && endless.writable) endless.write('1\r\n \r\n');
    }, 50);
    const { closed } = await endlessRead;
    clearInterval(writer);
    endless.destroy();
    expect(closed).toBe(true);
    await expectStillServing('ops: slow requests');
  });

  it('holds 1,000 slow connections and answers /healthz while all of them wait; survives a header flood and a 100 MB body', async () => {
    const sockets: Socket[] = [];
    const addresses = Array.from({ length: 10 }, (_, i) => `127.0.0.${80 + i}`);
    try {
      for (let i = 0; i < 1_000; i++) {
        const socket = await openSocket(opsUrl, addresses[i % addresses.length]);
        socket.on('error', () => undefined);
        socket.write('GET /healthz HTTP/1.1\r\nHost: o');
        sockets.push(socket);
      }
      const health = await rawExchange(opsUrl, ['GET /healthz HTTP/1.1\r\nHost: ops\r\nConnection: close\r\n\r\n']);
      expect(health.status).toBe(200);
      expect(sockets.filter((s) => !s.destroyed && !s.readableEnded).length).toBe(1_000);
    } finally {
      sockets.forEach((s) => s.destroy());
    }
    const flood = await rawExchange(opsUrl, [
      `GET /healthz HTTP/1.1\r\nHost: ops\r\nX-Flood: ${'a'.repeat(100 * 1024)}\r\n\r\n`,
    ]);
    expect(flood.status).toBe(431);

    const big = await openSocket(opsUrl);
    const bigRead = readUntilClosed(big);
    big.write(`POST /healthz HTTP/1.1\r\nHost: ops\r\nContent-Length: ${100 * 1024 * 1024}\r\n\r\n`);
    const megabyte = Buffer.alloc(1024 * 1024, 0x20);
    for (let i = 0; i < 100 && !big.destroyed && big.writable; i++) {
      if (!big.write(megabyte)) await new Promise((resolve) => big.once('drain', resolve).once('close', resolve));
    }
    big.destroy();
    expect(statusOf((await bigRead).text)).toBe(405);
    await expectStillServing('ops: crowds and floods');
  });
});

describe('after every probe', () => {
  it('the gateway and worker still run turns end to end', async () => {
    const reply = await post(gatewayUrl, `/v1/sessions/${sessionId}/messages?wait=true`, { text: 'still here?' });
    expect(reply.status).toBe(200);
    expect(JSON.stringify(reply.body)).toContain('echo: still here?');
    const crowdedReply = await post(crowdedUrl, `/v1/sessions/${sessionId}/messages?wait=true`, { text: 'and here?' });
    expect(crowdedReply.status).toBe(200);
    expect(serve.stderr()).not.toMatch(/Unhandled 'error' event|uncaught/i);
  });
});
