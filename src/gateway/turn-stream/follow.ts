/**
 * Following a turn's answer in the log: a fold of one answer (`AnswerFold`: the Responses API's
 * tracker, LangGraph's run fold, the AI SDK's UI message fold) fed the log's events as they are
 * appended, until the answer ends, the caller leaves, or the session's workflow is gone.
 */
import type { FastifyRequest } from 'fastify';
import type { SessionClient } from '../../client/session-client.js';
import type { StoredEvent } from '../../session/index.js';
import { OpenAiError } from '../openai-errors.js';
import type { StreamRegistry } from '../sse.js';

/**
 * A fold of one answer from a session's log, as a stream follows it: the Responses API's
 * tracker, or another API's fold over the same turn (a LangGraph run, the AI SDK's UI message
 * stream).
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
 * Follows the log until the answer ends (a request that waits for its turn: a non-streamed
 * response, chat completion or LangGraph run), the client leaves or the gateway closes. `left`:
 * the client's connection closed before the answer ended.
 */
export async function followUntilDone<E>(
  request: FastifyRequest,
  client: SessionClient,
  fold: AnswerFold<E>,
  fromSeq: number,
  streams: StreamRegistry,
): Promise<{ left: boolean }> {
  if (fold.state() === 'done') return { left: false };
  const abort = new AbortController();
  streams.add(abort);
  let left = false;
  const onClose = (): void => {
    left = true;
    abort.abort();
  };
  request.raw.socket.on('close', onClose);
  try {
    await followResponse(client, fold, fromSeq, abort.signal, async () => undefined);
  } finally {
    request.raw.socket.off('close', onClose);
    streams.delete(abort);
  }
  return { left };
}
