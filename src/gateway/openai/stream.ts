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
import { hijackEventStream, type StreamRegistry } from '../sse.js';
import { toOpenAiErrorResponse } from '../openai-errors.js';
import { followResponse } from '../turn-stream/follow.js';
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
