/**
 * The live event stream over real HTTP: tokens arrive while the turn is still running, a
 * reconnect with Last-Event-ID neither loses nor repeats an event, and a client that goes
 * away ends the server's follow.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { openEventStreamCount, startGateway, type RunningGateway } from '../../src/gateway/index.js';
import { startStack, type Stack } from '../support/stack.js';
import { expectErrorShape, openSse, rawExchange, readEventsUntil, request } from './http.js';

let stack: Stack;
let gateway: RunningGateway;
beforeAll(async () => {
  stack = await startStack();
  gateway = await startGateway({
    client: stack.client,
    host: '127.0.0.1',
    port: 0,
    bodyLimitBytes: 64 * 1024,
    sseHeartbeatMs: 200,
  });
});
afterAll(async () => {
  await gateway?.close();
  await stack?.close();
});
beforeEach(() => {
  stack.fake.reset();
  stack.fake.configure({ tokenDelayMs: 0, firstTokenDelayMs: 0 });
});

let counter = 0;
const newId = (name: string) => `sse-${name}-${Date.now()}-${counter++}`;
const LONG = Array.from({ length: 80 }, (_, i) => `token${i}`).join(' ');

async function createSession(id: string): Promise<void> {
  expect((await request(gateway.url, 'POST', '/v1/sessions', { json: { id } })).status).toBe(201);
}

describe('GET /v1/sessions/:id/events as Server-Sent Events', () => {
  it('delivers the first assistant/chunk while the turn is still open, before its turn/end', async () => {
    const id = newId('live');
    await createSession(id);
    const sse = await openSse(`${gateway.url}/v1/sessions/${id}/events`);
    expect(sse.status).toBe(200);
    expect(sse.headers.get('content-type')).toContain('text/event-stream');
    stack.fake.enqueueReplies({ text: LONG });
    stack.fake.configure({ tokenDelayMs: 20 });
    await request(gateway.url, 'POST', `/v1/sessions/${id}/messages`, { json: { text: 'tell me something long' } });

    const firstChunk = await readEventsUntil(sse, (e) => e.type === 'assistant/chunk');
    expect(firstChunk.at(-1)!.type).toBe('assistant/chunk');
    // At the moment the client holds the first token, the turn has not ended in the log.
    const storedAtFirstToken = await stack.store.readFrom(id, 0);
    expect(storedAtFirstToken.some((e) => e.type === 'turn/end')).toBe(false);

    const rest = await readEventsUntil(sse, (e) => e.type === 'turn/end');
    sse.close();
    const received = [...firstChunk, ...rest];
    expect(received.map((e) => e.seq)).toEqual(received.map((_, i) => i));
    expect(received.every((e) => e.frameId === String(e.seq))).toBe(true);
    const stored = await stack.store.readFrom(id, 0);
    expect(received.map((e) => `${e.seq}:${e.type}`)).toEqual(
      stored.slice(0, received.length).map((e) => `${e.seq}:${e.type}`),
    );
    expect(received.filter((e) => e.type === 'assistant/chunk').length).toBeGreaterThan(1);
  });

  it('a reconnect with Last-Event-ID resumes after the last event: nothing missed, nothing repeated', async () => {
    const id = newId('resume');
    await createSession(id);
    stack.fake.enqueueReplies({ text: LONG });
    stack.fake.configure({ tokenDelayMs: 20 });
    const first = await openSse(`${gateway.url}/v1/sessions/${id}/events?from=0`);
    await request(gateway.url, 'POST', `/v1/sessions/${id}/messages`, { json: { text: 'stream me' } });
    let chunks = 0;
    const before = await readEventsUntil(first, (e) => e.type === 'assistant/chunk' && ++chunks === 3);
    first.close();
    const lastId = before.at(-1)!.frameId;
    // Mid-turn: more events are appended while the client is away.
    await new Promise((resolve) => setTimeout(resolve, 150));

    const second = await openSse(`${gateway.url}/v1/sessions/${id}/events?from=0`, { 'last-event-id': lastId });
    const after = await readEventsUntil(second, (e) => e.type === 'turn/end');
    second.close();

    const seqs = [...before, ...after].map((e) => e.seq);
    expect(new Set(seqs).size).toBe(seqs.length);
    const stored = await stack.store.readFrom(id, 0);
    const turnEnd = stored.find((e) => e.type === 'turn/end')!.seq;
    expect(seqs).toEqual(stored.filter((e) => e.seq <= turnEnd).map((e) => e.seq));
    expect(after[0]!.seq).toBe(Number(lastId) + 1);
    // The reconnect happened mid-turn: the second stream still carried live tokens.
    expect(after.some((e) => e.type === 'assistant/chunk')).toBe(true);
  });

  it('with ?coalesce=true a reconnect gets what it missed as one chunk per run of chunks, then the live tail event by event', async () => {
    const id = newId('coalesce');
    await createSession(id);
    stack.fake.enqueueReplies({ text: LONG });
    stack.fake.configure({ tokenDelayMs: 20 });
    const url = `${gateway.url}/v1/sessions/${id}/events?coalesce=true`;
    const first = await openSse(url);
    await request(gateway.url, 'POST', `/v1/sessions/${id}/messages`, { json: { text: 'coalesce me' } });
    let chunks = 0;
    const before = await readEventsUntil(first, (e) => e.type === 'assistant/chunk' && ++chunks === 3);
    first.close();
    const lastId = before.at(-1)!.frameId;
    await new Promise((resolve) => setTimeout(resolve, 400));

    const second = await openSse(url, { 'last-event-id': lastId });
    const frames: Array<{ seq: number; type: string; text: string; coalesced?: number }> = [];
    for (;;) {
      const frame = await second.next();
      if (frame === undefined) break;
      if (frame.data === undefined) continue;
      const event = JSON.parse(frame.data) as {
        seq: number;
        type: string;
        coalesced?: number;
        data: { chunk?: { text: string } };
      };
      expect(frame.id).toBe(String(event.seq));
      frames.push({ seq: event.seq, type: event.type, text: event.data.chunk?.text ?? '', coalesced: event.coalesced });
      if (event.type === 'turn/end') break;
    }
    second.close();
    // The first chunk frame stands for the chunks logged while the client was away.
    const firstChunk = frames.find((f) => f.type === 'assistant/chunk')!;
    expect(firstChunk.coalesced).toBeGreaterThan(1);
    expect(firstChunk.text.split(' ').length).toBeGreaterThan(5);
    expect(frames.map((f) => f.seq).every((seq, i, list) => i === 0 || seq > list[i - 1]!)).toBe(true);
    // No text lost or repeated: the frames' chunk texts after the last one received are the logged ones after it.
    const stored = await stack.store.readFrom(id, Number(lastId) + 1);
    const loggedText = stored
      .filter((e) => e.type === 'assistant/chunk' && e.seq <= frames.at(-1)!.seq)
      .map((e) => (e.data as { chunk: { text?: string } }).chunk.text ?? '')
      .join('');
    expect(frames.map((f) => f.text).join('')).toBe(loggedText);
    expect(frames.at(-1)!.seq).toBe(stored.find((e) => e.type === 'turn/end')!.seq);
  });

  it('ends the server-side follow when the client disconnects, and sends heartbeats while idle', async () => {
    const id = newId('gone');
    await createSession(id);
    const sse = await openSse(`${gateway.url}/v1/sessions/${id}/events`);
    await expect.poll(() => openEventStreamCount(gateway.app)).toBe(1);
    let heartbeat = false;
    for (let frame = await sse.next(); frame !== undefined; frame = await sse.next()) {
      if (frame.comment === 'heartbeat') {
        heartbeat = true;
        break;
      }
    }
    expect(heartbeat).toBe(true);
    sse.close();
    await expect.poll(() => openEventStreamCount(gateway.app), { timeout: 5_000 }).toBe(0);
  });

  it('ends open streams when the gateway closes, so close() does not hang', async () => {
    const id = newId('shutdown');
    await createSession(id);
    const second = await startGateway({ client: stack.client, host: '127.0.0.1', port: 0, bodyLimitBytes: 1024 });
    const sse = await openSse(`${second.url}/v1/sessions/${id}/events`);
    await expect.poll(() => openEventStreamCount(second.app)).toBe(1);
    await second.close();
    expect(openEventStreamCount(second.app)).toBe(0);
    let frame = await sse.next();
    while (frame !== undefined) frame = await sse.next();
    expect(frame).toBeUndefined();
  });

  it('closes the stream by itself after ?limit events', async () => {
    const id = newId('limit');
    await createSession(id);
    await request(gateway.url, 'POST', `/v1/sessions/${id}/messages?wait=true`, { json: { text: 'hi' } });
    const sse = await openSse(`${gateway.url}/v1/sessions/${id}/events?from=1&limit=3`);
    const events = await readEventsUntil(sse, () => false);
    expect(events.map((e) => e.seq)).toEqual([1, 2, 3]);
  });

  it('answers an unknown session with a JSON 404, not a stream', async () => {
    const res = await request(gateway.url, 'GET', '/v1/sessions/no-such-session/events', {
      headers: { accept: 'text/event-stream' },
    });
    expect(res.status).toBe(404);
    expect(res.body).toMatchObject({ error: { code: 'SESSION_NOT_FOUND' } });
  });

  it('refuses a Last-Event-ID beyond the head with a JSON 400 before any stream starts, so an EventSource does not reconnect forever', async () => {
    const id = newId('beyond');
    await createSession(id);
    await request(gateway.url, 'POST', `/v1/sessions/${id}/messages?wait=true`, { json: { text: 'hi' } });
    const next = await stack.store.nextSeq(id);
    for (const lastEventId of [String(Number.MAX_SAFE_INTEGER), String(next), String(next + 1)]) {
      const refused = await request(gateway.url, 'GET', `/v1/sessions/${id}/events`, {
        headers: { accept: 'text/event-stream', 'last-event-id': lastEventId },
      });
      expect(refused.status, lastEventId).toBe(400);
      expect(expectErrorShape(refused, lastEventId)).toBe('INVALID_REQUEST');
      expect((refused.body as { error: { message: string } }).error.message).toContain(`has ${next} events`);
    }
    const fromBeyond = await request(gateway.url, 'GET', `/v1/sessions/${id}/events?from=${next + 1}`, {
      headers: { accept: 'text/event-stream' },
    });
    expect(fromBeyond.status).toBe(400);
    expect(openEventStreamCount(gateway.app)).toBe(0);

    // The last event's own id is a valid resume point: the stream opens and carries the next turn.
    const sse = await openSse(`${gateway.url}/v1/sessions/${id}/events`, { 'last-event-id': String(next - 1) });
    expect(sse.status).toBe(200);
    await request(gateway.url, 'POST', `/v1/sessions/${id}/messages`, { json: { text: 'again' } });
    const events = await readEventsUntil(sse, (e) => e.type === 'turn/end');
    sse.close();
    expect(events[0]!.seq).toBe(next);
  });

  it('ends a HEAD request for the event stream after its headers', async () => {
    const id = newId('head');
    await createSession(id);
    const response = await rawExchange(
      gateway.url,
      [
        `HEAD /v1/sessions/${id}/events HTTP/1.1\r\nHost: gateway\r\nAccept: text/event-stream\r\nConnection: close\r\n\r\n`,
      ],
      10_000,
    );
    expect(response.status).toBe(200);
    expect(response.headers['content-type']).toContain('text/event-stream');
    // The server ended the response and, as asked, closed the connection; no stream body.
    expect(response.closed).toBe(true);
    expect(response.body).toBe('');
    expect(openEventStreamCount(gateway.app)).toBe(0);
  });
});
