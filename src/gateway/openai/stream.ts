/**
 * A response's events as Server-Sent Events (`POST /responses` with `stream: true`, and
 * `GET /responses/:id?stream=true&starting_after=N`): `event: <type>` and `data: <event JSON>`
 * per event, as OpenAI sends them, replayed from the log and then live until the response's
 * terminal event. Only events whose `sequence_number` is greater than `startingAfter` are
 * sent, so a client that lost its connection resumes exactly where it stopped.
 */
import { once } from 'node:events';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { ResponseStreamEvent } from 'openai/resources/responses/responses';
import type { SessionClient } from '../../client/session-client.js';
import type { StoredEvent } from '../../session/index.js';
import type { StreamRegistry } from '../sse.js';
import { toOpenAiErrorResponse } from './errors.js';
import type { ResponseTracker } from './response-fold.js';

export type ResponseStreamOptions = {
  client: SessionClient;
  tracker: ResponseTracker;
  /** Events the tracker produced from the stored log, before following it. */
  replayed: readonly ResponseStreamEvent[];
  /** The seq to follow the log from (the stored log's length when `replayed` was made). */
  fromSeq: number;
  /** Send only events with a greater sequence number (-1: all). */
  startingAfter: number;
  heartbeatMs: number;
  streams: StreamRegistry;
};

const STREAM_HEADERS = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-cache, no-transform',
  connection: 'keep-alive',
  'x-accel-buffering': 'no',
};

export function formatResponseEvent(event: ResponseStreamEvent): string {
  return `event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`;
}

/**
 * Feeds a live event to the tracker. A response that waits for the caller ends after the batch
 * requesting the calls; when the log holds nothing after this event, that batch is whole (a
 * batch is committed at once), so the response ends now rather than when the next event comes.
 */
export async function feedLive(client: SessionClient, tracker: ResponseTracker, event: StoredEvent): Promise<ResponseStreamEvent[]> {
  const events = tracker.push(event);
  if (tracker.awaitingCaller() && (await client.nextSeq(tracker.context.sessionId)) === event.seq + 1) events.push(...tracker.flush());
  return events;
}

/** Takes over the response and streams the response's events until its terminal event or the client leaves. */
export async function streamResponseEvents(request: FastifyRequest, reply: FastifyReply, options: ResponseStreamOptions): Promise<void> {
  const abort = new AbortController();
  options.streams.add(abort);
  reply.hijack();
  const res = reply.raw;
  const onClose = (): void => abort.abort();
  res.on('close', onClose);
  res.writeHead(200, STREAM_HEADERS);
  const heartbeat = setInterval(() => {
    if (!res.writableEnded) res.write(': keepalive\n\n');
  }, options.heartbeatMs);
  const send = async (events: readonly ResponseStreamEvent[]): Promise<void> => {
    for (const event of events) {
      if (event.sequence_number <= options.startingAfter || abort.signal.aborted) continue;
      if (!res.write(formatResponseEvent(event))) await drained(res, abort.signal);
    }
  };
  try {
    await send(options.replayed);
    if (options.tracker.state() !== 'done') {
      for await (const event of options.client.follow(options.tracker.context.sessionId, options.fromSeq, abort.signal)) {
        if (abort.signal.aborted) break;
        await send(await feedLive(options.client, options.tracker, event));
        if (options.tracker.state() === 'done') break;
      }
    }
  } catch (error) {
    if (!abort.signal.aborted) {
      const response = toOpenAiErrorResponse(error);
      if (response.logDetail) request.log.error({ err: error, sessionId: options.tracker.context.sessionId }, 'response stream failed');
      const { message, code, param } = response.body.error;
      if (!res.writableEnded) res.write(`event: error\ndata: ${JSON.stringify({ type: 'error', code, message, param, sequence_number: options.tracker.eventCount })}\n\n`);
    }
  } finally {
    clearInterval(heartbeat);
    res.off('close', onClose);
    options.streams.delete(abort);
    if (!res.writableEnded) res.end();
  }
}

/**
 * Follows the log until the response's terminal event (a non-streamed response waits for its
 * turn). Resolves false when the client left or the gateway closes first.
 */
export async function followUntilDone(request: FastifyRequest, client: SessionClient, tracker: ResponseTracker, fromSeq: number, streams: StreamRegistry): Promise<boolean> {
  if (tracker.state() === 'done') return true;
  const abort = new AbortController();
  streams.add(abort);
  const onClose = (): void => abort.abort();
  request.raw.socket.on('close', onClose);
  try {
    for await (const event of client.follow(tracker.context.sessionId, fromSeq, abort.signal)) {
      await feedLive(client, tracker, event);
      if (tracker.state() === 'done') return true;
    }
    return false;
  } finally {
    request.raw.socket.off('close', onClose);
    streams.delete(abort);
  }
}

async function drained(res: NodeJS.WritableStream, signal: AbortSignal): Promise<void> {
  try {
    await once(res, 'drain', { signal });
  } catch (error) {
    // AbortError: the client left or the gateway is closing; the caller's loop sees the abort.
    if (!signal.aborted) throw error;
  }
}
