/**
 * The live event stream (`GET /v1/sessions/:id/events` with `Accept: text/event-stream`):
 * stored events from the requested seq, then each new one as the workflow appends it, framed
 * as Server-Sent Events with the seq as the event id so a client's `Last-Event-ID` resumes
 * exactly after the last event it received.
 */
import { once } from 'node:events';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { SessionClient } from '../client/session-client.js';
import { isEventOfType, type SessionEvent, type StoredEvent } from '../session/index.js';
import { chunkAttemptOf } from './turn-stream/output-items.js';
import { GatewayError, toErrorResponse } from './errors.js';

/** Open streams, so the gateway can end them all when it closes. */
export type StreamRegistry = Set<AbortController>;

export type StreamEventsOptions = {
  client: SessionClient;
  sessionId: string;
  fromSeq: number;
  /** Close the stream after this many events. */
  limit: number | undefined;
  /** Send the stored part's runs of text and reasoning chunks as one event each ({@link chunkRunKey}). */
  coalesce?: boolean;
  heartbeatMs: number;
  streams: StreamRegistry;
};

/** Whether the request asks for an SSE stream. */
export function wantsEventStream(request: FastifyRequest): boolean {
  const accept = request.headers.accept ?? '';
  return accept.split(',').some((part) => part.split(';')[0]!.trim().toLowerCase() === 'text/event-stream');
}

/** One SSE frame: `id`, `event`, `data` (JSON on one line; JSON.stringify never emits a raw newline); `coalesced`: how many chunk events it stands for. */
export function formatEventFrame(event: StoredEvent, coalesced?: number): string {
  const data = coalesced === undefined ? event : { ...event, coalesced };
  return `id: ${event.seq}\nevent: ${event.type}\ndata: ${JSON.stringify(data)}\n\n`;
}

/** The headers of every event stream the gateway answers with. */
export const STREAM_HEADERS = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-cache, no-transform',
  connection: 'keep-alive',
  'x-accel-buffering': 'no',
};

/** An event stream a handler writes: frames wait for the socket to drain; `signal` aborts when the client leaves or the gateway closes. */
export type EventStreamWriter = { write(frame: string): Promise<void>; readonly signal: AbortSignal };

/**
 * Takes over `reply` as an event stream (the gateway's one way to): registers it so the
 * gateway can end it on close, writes the headers (and `preamble`), sends `heartbeat` comments,
 * runs `body`, and ends the response. A failure of `body` while the client is still there is
 * written as the frame `failureFrame` makes of it (which also logs it when it must be).
 */
export async function hijackEventStream(
  reply: FastifyReply,
  options: {
    streams: StreamRegistry;
    heartbeatMs: number;
    headers?: Record<string, string>;
    preamble?: string;
    heartbeat?: string;
  },
  body: (stream: EventStreamWriter) => Promise<void>,
  failureFrame: (error: unknown) => string,
): Promise<void> {
  const abort = new AbortController();
  options.streams.add(abort);
  reply.hijack();
  const res = reply.raw;
  const onClose = (): void => abort.abort();
  // 'close' on the response fires when the client goes away (or after we end it).
  res.on('close', onClose);
  res.writeHead(200, { ...STREAM_HEADERS, ...options.headers });
  // The client learns the stream is open now, not at its first frame: a turn that waits (a
  // running turn before it, a pause, a slow first token) must not look like a hung request.
  if (options.preamble !== undefined) res.write(options.preamble);
  else res.flushHeaders();
  const comment = `: ${options.heartbeat ?? 'keepalive'}\n\n`;
  const heartbeat = setInterval(() => {
    if (!res.writableEnded) res.write(comment);
  }, options.heartbeatMs);
  const stream: EventStreamWriter = {
    signal: abort.signal,
    async write(frame) {
      if (abort.signal.aborted || res.writableEnded) return;
      if (!res.write(frame)) await drained(res, abort.signal);
    },
  };
  try {
    await body(stream);
  } catch (error) {
    if (!abort.signal.aborted && !res.writableEnded) res.write(failureFrame(error));
  } finally {
    clearInterval(heartbeat);
    res.off('close', onClose);
    options.streams.delete(abort);
    if (!res.writableEnded) res.end();
  }
}

/**
 * Takes over the response and streams events until the client disconnects, the gateway
 * closes or `limit` events were sent. The session must exist (checked by the caller, so an
 * unknown id is still a plain 404). A start past the log's end is refused with 400 before
 * the stream opens: once a 200 stream has begun, an EventSource would reconnect with the same
 * `Last-Event-ID` forever. `HEAD` gets the stream's headers and ends.
 */
export async function streamEvents(
  request: FastifyRequest,
  reply: FastifyReply,
  options: StreamEventsOptions,
): Promise<void> {
  const nextSeq = await options.client.nextSeq(options.sessionId);
  if (options.fromSeq > nextSeq) {
    throw new GatewayError(
      'INVALID_REQUEST',
      `the stream cannot start at seq ${options.fromSeq}: session ${options.sessionId} has ${nextSeq} events (seqs below ${nextSeq}), so Last-Event-ID must be below ${nextSeq} and from at most ${nextSeq}; reconnect without Last-Event-ID to start over`,
    );
  }
  if (request.method === 'HEAD') {
    const { connection: _keepAlive, ...headers } = STREAM_HEADERS;
    reply.hijack();
    reply.raw.writeHead(200, headers).end();
    return;
  }
  await hijackEventStream(
    reply,
    // `retry` tells EventSource clients how long to wait before reconnecting, and flushes the headers.
    { streams: options.streams, heartbeatMs: options.heartbeatMs, preamble: 'retry: 2000\n\n', heartbeat: 'heartbeat' },
    async (stream) => {
      let sent = 0;
      let run: { key: string; event: StoredEvent; count: number } | undefined;
      const flush = async (): Promise<void> => {
        if (!run) return;
        const { event, count } = run;
        run = undefined;
        await stream.write(formatEventFrame(event, count > 1 ? count : undefined));
        sent += 1;
      };
      for await (const event of options.client.follow(options.sessionId, options.fromSeq, stream.signal)) {
        if (stream.signal.aborted) break;
        const key = options.coalesce && event.seq < nextSeq ? chunkRunKey(event) : undefined;
        if (key !== undefined && run?.key === key)
          run = { key, event: mergeChunks(run.event, event), count: run.count + 1 };
        else {
          await flush();
          if (key !== undefined) run = { key, event, count: 1 };
          else {
            await stream.write(formatEventFrame(event));
            sent += 1;
          }
        }
        // The stored part ends here: what follows is live, one event at a time.
        if (event.seq === nextSeq - 1) await flush();
        if (options.limit !== undefined && sent >= options.limit) break;
      }
    },
    (error) => {
      const response = toErrorResponse(error);
      if (response.logDetail) request.log.error({ err: error, sessionId: options.sessionId }, 'event stream failed');
      return `event: error\ndata: ${JSON.stringify(response.body)}\n\n`;
    },
  );
}

/**
 * The run an `assistant/chunk` event belongs to for coalescing: one model call's text (or
 * reasoning) chunks of one step. Undefined for any other event (tool-call deltas included).
 */
export function chunkRunKey(event: StoredEvent): string | undefined {
  if (!isEventOfType(event, 'assistant/chunk')) return undefined;
  const { turn, step, chunk } = event.data;
  if (chunk.kind === 'tool-call-delta') return undefined;
  return `${turn}/${step}/${chunk.kind}/${chunkAttemptOf(event.op) ?? event.op ?? ''}`;
}

/** `later` carrying the text of `earlier` before its own: seq, op and time are the later event's. */
function mergeChunks(earlier: StoredEvent, later: StoredEvent): StoredEvent {
  const a = earlier as SessionEvent<'assistant/chunk'>;
  const b = later as SessionEvent<'assistant/chunk'>;
  const text = (a.data.chunk as { text: string }).text + (b.data.chunk as { text: string }).text;
  return { ...b, data: { ...b.data, chunk: { ...b.data.chunk, text } as typeof b.data.chunk } };
}

/** Waits for the socket to drain, or for the stream to be abandoned. */
export async function drained(res: NodeJS.WritableStream, signal: AbortSignal): Promise<void> {
  try {
    await once(res, 'drain', { signal });
  } catch (error) {
    // AbortError: the client left or the gateway is closing; the caller's loop sees the abort.
    if (!signal.aborted) throw error;
  }
}
