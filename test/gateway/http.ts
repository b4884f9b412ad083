/**
 * HTTP helpers for the gateway tests: JSON requests over Node's fetch and a small SSE reader
 * that parses the `text/event-stream` framing from the response body itself.
 */
import { expect } from 'vitest';

export type JsonResponse = { status: number; headers: Headers; body: unknown };

/** Sends a request and reads the JSON body (any status). */
export async function request(baseUrl: string, method: string, path: string, init: { json?: unknown; body?: string; headers?: Record<string, string> } = {}): Promise<JsonResponse> {
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
export async function readEventsUntil(sse: SseConnection, stop: (event: { seq: number; type: string }) => boolean): Promise<Array<{ seq: number; type: string; frameId: string }>> {
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
