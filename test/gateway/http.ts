/**
 * HTTP helpers for the gateway tests: JSON requests over Node's fetch and a small SSE reader
 * that parses the `text/event-stream` framing from the response body itself.
 */
import { connect, type Socket } from 'node:net';
import type { FastifyBaseLogger } from 'fastify';
import { expect } from 'vitest';

export type JsonResponse = { status: number; headers: Headers; body: unknown };

/** Sends a request and reads the JSON body (any status). */
export async function request(
  baseUrl: string,
  method: string,
  path: string,
  init: { json?: unknown; body?: string; headers?: Record<string, string> } = {},
): Promise<JsonResponse> {
  const headers: Record<string, string> = { ...init.headers };
  let body: string | undefined = init.body;
  if (init.json !== undefined) {
    body = JSON.stringify(init.json);
    headers['content-type'] ??= 'application/json';
  }
  const res = await fetch(`${baseUrl}${path}`, { method, headers, ...(body !== undefined ? { body } : {}) });
  const text = await res.text();
  let parsed: unknown = text;
  if ((res.headers.get('content-type') ?? '').includes('application/json')) parsed = JSON.parse(text) as unknown;
  return { status: res.status, headers: res.headers, body: parsed };
}

/** Asserts the `{error: {code, message}}` shape and returns the code. */
export function expectErrorShape(response: JsonResponse, label: string): string {
  expect(response.headers.get('content-type') ?? '', label).toContain('application/json');
  const body = response.body as { error?: { code?: unknown; message?: unknown } };
  expect(Object.keys(body), label).toEqual(['error']);
  expect(typeof body.error?.code, label).toBe('string');
  expect(typeof body.error?.message, label).toBe('string');
  expect((body.error!.message as string).length, label).toBeGreaterThan(0);
  return body.error!.code as string;
}

export type SseFrame = { id?: string; event?: string; data?: string; comment?: string };

/** An open SSE connection; `next()` yields parsed frames (comments included), undefined at the end. */
export type SseConnection = {
  status: number;
  headers: Headers;
  next(): Promise<SseFrame | undefined>;
  close(): void;
};

/** Opens an SSE stream with fetch and parses frames from the raw body. */
export async function openSse(url: string, headers: Record<string, string> = {}): Promise<SseConnection> {
  const abort = new AbortController();
  const res = await fetch(url, { headers: { accept: 'text/event-stream', ...headers }, signal: abort.signal });
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  let done = false;
  const frames: SseFrame[] = [];
  const parseBuffer = (): void => {
    let end: number;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const frame: SseFrame = {};
      for (const line of block.split('\n')) {
        if (line.startsWith(':')) frame.comment = line.slice(1).trim();
        else {
          const colon = line.indexOf(':');
          const field = colon < 0 ? line : line.slice(0, colon);
          const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
          if (field === 'id' || field === 'event') frame[field] = value;
          else if (field === 'data') frame.data = frame.data === undefined ? value : `${frame.data}\n${value}`;
        }
      }
      frames.push(frame);
    }
  };
  return {
    status: res.status,
    headers: res.headers,
    async next() {
      while (frames.length === 0 && !done) {
        let chunk: Awaited<ReturnType<typeof reader.read>>;
        try {
          chunk = await reader.read();
        } catch (error) {
          // Reading after close() rejects with an AbortError: the stream is over for this reader.
          if (abort.signal.aborted) return undefined;
          throw error;
        }
        if (chunk.done) done = true;
        else {
          buffer += decoder.decode(chunk.value, { stream: true });
          parseBuffer();
        }
      }
      return frames.shift();
    },
    close() {
      abort.abort();
    },
  };
}

/** Reads SSE event frames (skipping comments and retry hints) until `stop` says so or the stream ends. */
export async function readEventsUntil(
  sse: SseConnection,
  stop: (event: { seq: number; type: string }) => boolean,
): Promise<Array<{ seq: number; type: string; frameId: string }>> {
  const events: Array<{ seq: number; type: string; frameId: string }> = [];
  for (;;) {
    const frame = await sse.next();
    if (frame === undefined) return events;
    if (frame.data === undefined) continue;
    const event = JSON.parse(frame.data) as { seq: number; type: string };
    expect(frame.event).toBe(event.type);
    events.push({ seq: event.seq, type: event.type, frameId: frame.id ?? '' });
    if (stop(event)) return events;
  }
}

/** A response read off a raw socket: status line, lower-cased headers, body text. */
export type RawResponse = {
  status: number;
  headers: Record<string, string>;
  body: string;
  text: string;
  closed: boolean;
};

/**
 * Sends `parts` over a raw TCP connection (strings are written as latin1 bytes, numbers are
 * pauses in ms) and reads until the server closes the connection or `waitMs` passes. Writing
 * stops as soon as the server answers or closes. Gives the parsed first response.
 */
export async function rawExchange(
  baseUrl: string,
  parts: ReadonlyArray<string | number>,
  waitMs = 15_000,
): Promise<RawResponse> {
  const { hostname, port } = new URL(baseUrl);
  const socket = connect(Number(port), hostname);
  let text = '';
  let closed = false;
  let stopped = false;
  socket.setEncoding('latin1');
  socket.on('data', (chunk: string) => (text += chunk));
  socket.on('error', () => {
    // A reset after the server answered (it closed with our unread bytes pending): the answer was already read.
  });
  const done = new Promise<void>((resolve) => socket.on('close', () => ((closed = true), resolve())));
  let timeout: NodeJS.Timeout | undefined;
  const timer = new Promise<void>((resolve) => (timeout = setTimeout(resolve, waitMs)));
  const writer = (async () => {
    for (const part of parts) {
      if (stopped || closed || text.length > 0) return;
      if (typeof part === 'number') await new Promise((resolve) => setTimeout(resolve, part));
      else socket.write(part, 'latin1');
    }
  })();
  await Promise.race([done, timer]);
  clearTimeout(timeout);
  stopped = true;
  await writer;
  socket.destroy();
  return { ...parseRawResponse(text), text, closed };
}

/** A raw connection from `localAddress` (any 127.0.0.0/8 address is this machine). */
export function openSocket(base: string, localAddress = '127.0.0.1'): Promise<Socket> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const socket = connect({ host: hostname, port: Number(port), localAddress });
    socket.once('connect', () => resolve(socket));
    socket.once('error', reject);
  });
}

/** Reads what the server sends until it closes the connection (bounded). */
export function readUntilClosed(socket: Socket, waitMs = 15_000): Promise<{ text: string; closed: boolean }> {
  let text = '';
  socket.setEncoding('latin1');
  socket.on('data', (chunk: string) => (text += chunk));
  socket.on('error', () => {
    // A reset after the server answered and closed with our bytes unread: the answer is in `text`.
  });
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve({ text, closed: false }), waitMs);
    socket.once('close', () => {
      clearTimeout(timer);
      resolve({ text, closed: true });
    });
  });
}

function parseRawResponse(text: string): { status: number; headers: Record<string, string>; body: string } {
  const end = text.indexOf('\r\n\r\n');
  const head = end < 0 ? text : text.slice(0, end);
  const [statusLine = '', ...lines] = head.split('\r\n');
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine)?.[1] ?? 0);
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  let body = end < 0 ? '' : text.slice(end + 4);
  const length = headers['content-length'];
  if (length !== undefined) body = Buffer.from(body, 'latin1').subarray(0, Number(length)).toString('utf8');
  return { status, headers, body };
}

/** Asserts a raw response carries the `{error: {code, message}}` shape and returns the code. */
export function expectRawErrorShape(response: RawResponse, label: string): string {
  expect(response.status, `${label}: ${JSON.stringify(response.text.slice(0, 300))}`).toBeGreaterThanOrEqual(400);
  let body: unknown;
  try {
    body = JSON.parse(response.body) as unknown;
  } catch (error) {
    throw new Error(`${label}: the body is not JSON (${(error as Error).message})`, { cause: error });
  }
  const asJson: JsonResponse = { status: response.status, headers: new Headers(response.headers), body };
  return expectErrorShape(asJson, label);
}

/** One record a {@link captureLogger} logger received (pino levels: 20 debug, 30 info, 40 warn, 50 error). */
export type LogEntry = { level: number; msg: string; fields: Record<string, unknown> };

/** A pino-compatible logger that records every call, for asserting what the gateway logs. */
export function captureLogger(): { logger: FastifyBaseLogger; entries: LogEntry[] } {
  const entries: LogEntry[] = [];
  const make = (bindings: Record<string, unknown>): unknown => {
    const at =
      (level: number) =>
      (first?: unknown, second?: unknown): void => {
        const fields = typeof first === 'object' && first !== null ? (first as Record<string, unknown>) : {};
        const msg = typeof first === 'string' ? first : typeof second === 'string' ? second : '';
        entries.push({ level, msg, fields: { ...bindings, ...fields } });
      };
    return {
      level: 'trace',
      fatal: at(60),
      error: at(50),
      warn: at(40),
      info: at(30),
      debug: at(20),
      trace: at(10),
      silent: () => undefined,
      child: (more: Record<string, unknown>) => make({ ...bindings, ...more }),
    };
  };
  return { logger: make({}) as FastifyBaseLogger, entries };
}

/** Creates session `id` through the gateway and has it answer one turn, so its run has started and its log is settled. */
export async function createSettledSession(baseUrl: string, id: string): Promise<void> {
  expect((await request(baseUrl, 'POST', '/v1/sessions', { json: { id } })).status).toBe(201);
  expect(
    (await request(baseUrl, 'POST', `/v1/sessions/${id}/messages?wait=true`, { json: { text: 'settle' } })).status,
  ).toBe(200);
}
