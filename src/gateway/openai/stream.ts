/**
 * A response's events as Server-Sent Events (`POST /responses` with `stream: true`, and
 * `GET /responses/:id?stream=true&starting_after=N`): `event: <type>` and `data: <event JSON>`
 * per event, as OpenAI sends them, replayed from the log and then live until the response's
 * terminal event. Only events whose `sequence_number` is greater than `startingAfter` are
 * sent, so a client that lost its connection resumes exactly where it stopped.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { ResponseStreamEvent } from 'openai/resources/responses/responses';
import type { SessionClient } from '../../client/session-client.js';
import type { StoredEvent } from '../../session/index.js';
import { hijackEventStream, type StreamRegistry } from '../sse.js';
import { OpenAiError, toOpenAiErrorResponse } from './errors.js';
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

export function formatResponseEvent(event: ResponseStreamEvent): string {
  return `event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`;
}

/**
 * A fold of one answer from a session's log, as a stream follows it: the Responses API's
 * tracker, or another API's fold over the same turn (the AI SDK's UI message stream).
 */
export interface AnswerFold<E> {
  readonly context: { sessionId: string };
  push(event: StoredEvent): E[];
  /** Ends an answer that waits for the caller once the batch that asked is known to be whole. */
  flush(): E[];
  state(): 'queued' | 'running' | 'done';
  /** True while the answer has asked the caller for something and ends with that batch. */
  awaitingCaller(): boolean;
}

/**
 * Feeds a live event to the tracker. A response that waits for the caller ends after the batch
 * requesting the calls; when the log holds nothing after this event, that batch is whole (a
 * batch is committed at once), so the response ends now rather than when the next event comes.
 */
export async function feedLive<E>(client: SessionClient, tracker: AnswerFold<E>, event: StoredEvent): Promise<E[]> {
  const events = tracker.push(event);
  if (tracker.awaitingCaller() && (await client.nextSeq(tracker.context.sessionId)) === event.seq + 1)
    events.push(...tracker.flush());
  return events;
}

/** How often a follow checks that the session's workflow still runs (nothing else would write the response). */
const WORKFLOW_CHECK_MS = 2_000;

/**
 * Follows the log from `fromSeq`, feeding the tracker and handing what each event produced to
 * `deliver`, until the response ends or `signal` aborts. A response can only progress while its
 * session's workflow runs (the only writer of its log): checked every few seconds, and when the
 * workflow is gone and the log shows the response unfinished, this fails (409) rather than
 * wait for ever.
 */
export async function followResponse<E>(
  client: SessionClient,
  tracker: AnswerFold<E>,
  fromSeq: number,
  signal: AbortSignal,
  deliver: (events: readonly E[]) => Promise<void>,
): Promise<void> {
  const sessionId = tracker.context.sessionId;
  const stop = new AbortController();
  const forward = (): void => stop.abort();
  signal.addEventListener('abort', forward, { once: true });
  let gone = false;
  const watchdog = setInterval(() => {
    client.isRunning(sessionId).then(
      (running) => {
        if (!running) {
          gone = true;
          stop.abort();
        }
      },
      (error: unknown) => {
        // Temporal unreachable for a moment: the next check asks again.
        void error;
      },
    );
  }, WORKFLOW_CHECK_MS);
  let next = fromSeq;
  try {
    for await (const event of client.follow(sessionId, fromSeq, stop.signal)) {
      next = event.seq + 1;
      await deliver(await feedLive(client, tracker, event));
      if (tracker.state() === 'done') return;
    }
  } finally {
    clearInterval(watchdog);
    signal.removeEventListener('abort', forward);
  }
  if (!gone || signal.aborted) return;
  // The run may have written its last events just before it ended: take what the log holds now.
  for (const event of await client.events(sessionId, next)) await deliver(tracker.push(event));
  await deliver(tracker.flush());
  if (tracker.state() !== 'done') {
    throw new OpenAiError(
      409,
      `conversation ${sessionId} has no running workflow, so this response cannot progress; resume the session (POST /v1/sessions/${sessionId}/resume) and retrieve it again`,
      {
        code: 'session_not_running',
      },
    );
  }
}

/**
 * Replayed events as a client that rejoins gets them (issue 25): consecutive text, reasoning
 * and argument deltas of one part become one delta carrying the last one's sequence number, so
 * a rejoin catches up at once. The SDKs accumulate deltas and only compare sequence numbers
 * with `starting_after`, so the gaps this leaves are harmless.
 */
export function coalesceResponseEvents(events: readonly ResponseStreamEvent[]): ResponseStreamEvent[] {
  const out: ResponseStreamEvent[] = [];
  for (const event of events) {
    const last = out.at(-1);
    if (
      last !== undefined &&
      last.type === event.type &&
      (event.type === 'response.output_text.delta' ||
        event.type === 'response.reasoning_text.delta' ||
        event.type === 'response.function_call_arguments.delta') &&
      'item_id' in last &&
      last.item_id === event.item_id &&
      ('content_index' in event ? (last as { content_index?: number }).content_index === event.content_index : true)
    ) {
      const merged = { ...event, delta: `${(last as { delta: string }).delta}${event.delta}` };
      if ('logprobs' in event && 'logprobs' in last)
        (merged as { logprobs: unknown[] }).logprobs = [
          ...(last.logprobs as unknown[]),
          ...(event.logprobs as unknown[]),
        ];
      out[out.length - 1] = merged as ResponseStreamEvent;
    } else out.push(event);
  }
  return out;
}

/** Takes over the response and streams the response's events until its terminal event or the client leaves. */
export async function streamResponseEvents(
  request: FastifyRequest,
  reply: FastifyReply,
  options: ResponseStreamOptions,
): Promise<void> {
  await hijackEventStream(
    reply,
    { streams: options.streams, heartbeatMs: options.heartbeatMs },
    async (stream) => {
      const send = async (events: readonly ResponseStreamEvent[]): Promise<void> => {
        for (const event of events)
          if (event.sequence_number > options.startingAfter) await stream.write(formatResponseEvent(event));
      };
      // What the client missed comes at once: one delta per part, not a replay at typing speed.
      await send(
        coalesceResponseEvents(options.replayed.filter((event) => event.sequence_number > options.startingAfter)),
      );
      if (options.tracker.state() !== 'done')
        await followResponse(options.client, options.tracker, options.fromSeq, stream.signal, send);
    },
    (error) => {
      const response = toOpenAiErrorResponse(error);
      if (response.logDetail)
        request.log.error({ err: error, sessionId: options.tracker.context.sessionId }, 'response stream failed');
      const { message, code, param } = response.body.error;
      return `event: error\ndata: ${JSON.stringify({ type: 'error', code, message, param, sequence_number: options.tracker.eventCount })}\n\n`;
    },
  );
}

/**
 * Follows the log until the response's terminal event (a non-streamed response waits for its
 * turn), the client leaves or the gateway closes.
 */
export async function followUntilDone(
  request: FastifyRequest,
  client: SessionClient,
  tracker: ResponseTracker,
  fromSeq: number,
  streams: StreamRegistry,
): Promise<void> {
  if (tracker.state() === 'done') return;
  const abort = new AbortController();
  streams.add(abort);
  const onClose = (): void => abort.abort();
  request.raw.socket.on('close', onClose);
  try {
    await followResponse(client, tracker, fromSeq, abort.signal, async () => undefined);
  } finally {
    request.raw.socket.off('close', onClose);
    streams.delete(abort);
  }
}
