/**
 * Clients of a fleet over plain HTTP, as a backend service would be: a driver that sends user
 * messages through the gateways (`POST …/messages?wait=true`, retried with the same message id
 * on another gateway until one acknowledges it), and SSE followers that tail a session's log
 * (`GET …/events`, `Accept: text/event-stream`) and reconnect with `Last-Event-ID` whenever a
 * stream ends. Used by the fleet test and bench/fleet.ts.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { StoredEvent } from '../../src/session/index.js';

/** The gateway's answer to `?wait=true`. */
export type ReplyBody = { turn: number; replySeq: number | null; outcome: string; text: string; messageId: string };

/** A message some gateway acknowledged, with how it got there. */
export type Ack = {
  sessionId: string;
  messageId: string;
  text: string;
  reply: ReplyBody;
  /** HTTP attempts it took (1 = first try). */
  attempts: number;
  /** From the first attempt to the acknowledgement, ms. */
  latencyMs: number;
};

/** Why attempts failed, by kind (`503 UNAVAILABLE`, `network`, `timeout`, …), counted. */
export type FailureCounts = Map<string, number>;

function countFailure(failures: FailureCounts, kind: string): void {
  failures.set(kind, (failures.get(kind) ?? 0) + 1);
}

/** Sends through the fleet's gateways, alternating, retrying on another gateway until acknowledged. */
export class HttpDriver {
  readonly failures: FailureCounts = new Map();
  /** Requests under way, by gateway URL. */
  private readonly pending = new Map<string, number>();

  constructor(
    /** The gateways' base URLs (looked up per attempt: a slot may be restarted meanwhile). */
    private readonly gatewayUrls: () => string[],
    private readonly token: string,
    private readonly options: { attemptTimeoutMs: number; deadlineMs: number } = {
      attemptTimeoutMs: 120_000,
      deadlineMs: 600_000,
    },
  ) {}

  /** Requests under way through `url`, or through any gateway. */
  inFlight(url?: string): number {
    if (url !== undefined) return this.pending.get(url) ?? 0;
    return [...this.pending.values()].reduce((a, b) => a + b, 0);
  }

  private headers(): Record<string, string> {
    return { authorization: `Bearer ${this.token}`, 'content-type': 'application/json' };
  }

  /** POST with retries on any failure but a 4xx other than 409 (bounded by the deadline). */
  private async postUntilOk<T>(
    path: string,
    body: unknown,
    startSlot: number,
    okStatuses: number[],
  ): Promise<{ body: T; attempts: number }> {
    const deadline = Date.now() + this.options.deadlineMs;
    for (let attempt = 1; ; attempt++) {
      const urls = this.gatewayUrls();
      const url = urls[(startSlot + attempt - 1) % urls.length]!;
      let failure: string;
      this.pending.set(url, (this.pending.get(url) ?? 0) + 1);
      try {
        const response = await fetch(`${url}${path}`, {
          method: 'POST',
          headers: this.headers(),
          body: JSON.stringify(body),
          signal: AbortSignal.timeout(this.options.attemptTimeoutMs),
        }).finally(() => this.pending.set(url, this.pending.get(url)! - 1));
        const text = await response.text();
        if (okStatuses.includes(response.status))
          return { body: (text ? JSON.parse(text) : undefined) as T, attempts: attempt };
        const code = (JSON.parse(text) as { error?: { code?: string } }).error?.code ?? 'unknown';
        failure = `${response.status} ${code}`;
        if (response.status >= 400 && response.status < 500 && response.status !== 409)
          throw new Error(`${path} refused: ${failure}: ${text}`);
      } catch (error) {
        if ((error as Error).message.includes(' refused: ')) throw error;
        failure = (error as Error).name === 'TimeoutError' ? 'timeout' : 'network';
      }
      countFailure(this.failures, failure);
      if (Date.now() > deadline)
        throw new Error(`${path}: no gateway acknowledged within ${this.options.deadlineMs} ms (last: ${failure})`);
      await sleep(Math.min(100 * 2 ** Math.min(attempt, 5), 2_000));
    }
  }

  /** Creates a session; 409 means an earlier attempt already created it (its first message starts the workflow if need be). */
  async createSession(sessionId: string, startSlot: number): Promise<void> {
    await this.postUntilOk('/v1/sessions', { id: sessionId }, startSlot, [201, 409]);
  }

  /** Sends one message (idempotent by `messageId`) and waits for the reply. */
  async send(sessionId: string, messageId: string, text: string, startSlot: number): Promise<Ack> {
    const started = Date.now();
    const { body, attempts } = await this.postUntilOk<ReplyBody>(
      `/v1/sessions/${sessionId}/messages?wait=true`,
      { text, id: messageId },
      startSlot,
      [200],
    );
    return { sessionId, messageId, text, reply: body, attempts, latencyMs: Date.now() - started };
  }
}

/** One parsed SSE frame. */
type Frame = { id?: string; event?: string; data: string };

/** Splits an SSE byte stream into frames (comments and `retry:` lines dropped). */
async function* sseFrames(body: ReadableStream<Uint8Array>): AsyncGenerator<Frame> {
  const decoder = new TextDecoder();
  let buffer = '';
  for await (const chunk of body as unknown as AsyncIterable<Uint8Array>) {
    buffer += decoder.decode(chunk, { stream: true });
    for (let end = buffer.indexOf('\n\n'); end >= 0; end = buffer.indexOf('\n\n')) {
      const raw = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const frame: Frame = { data: '' };
      let hasData = false;
      for (const line of raw.split('\n')) {
        if (line.startsWith('id: ')) frame.id = line.slice(4);
        else if (line.startsWith('event: ')) frame.event = line.slice(7);
        else if (line.startsWith('data: ')) {
          frame.data += (hasData ? '\n' : '') + line.slice(6);
          hasData = true;
        }
      }
      if (hasData) yield frame;
    }
  }
}

/** A live tail of one session through the gateways, reconnecting with Last-Event-ID. */
export class SseFollower {
  /** Events received, in arrival order (duplicates and gaps kept, for the checks). */
  readonly events: StoredEvent[] = [];
  /** Arrival time (ms) of each event in `events`. */
  readonly arrivals: number[] = [];
  /** Streams opened after the first. */
  reconnects = 0;
  /** When each stream ended and when the next one was open again (ms). */
  readonly gaps: Array<{ endedAt: number; reopenedAt: number; slot: number }> = [];
  /** `error` events the gateway sent before ending a stream (store or Temporal trouble). */
  readonly errorEvents: string[] = [];
  private readonly abort = new AbortController();
  private running: Promise<void> | undefined;
  private onEvent: ((event: StoredEvent) => void) | undefined;

  constructor(
    readonly sessionId: string,
    private readonly gatewayUrls: () => string[],
    /** The gateway to use while it answers; the others when it does not. */
    private readonly preferredSlot: number,
    private readonly token: string,
  ) {}

  /** The last seq received, or -1. */
  get lastSeq(): number {
    return this.events.length === 0 ? -1 : this.events[this.events.length - 1]!.seq;
  }

  start(onEvent?: (event: StoredEvent) => void): void {
    this.onEvent = onEvent;
    this.running = this.loop();
  }

  async stop(): Promise<void> {
    this.abort.abort();
    await this.running;
  }

  private async loop(): Promise<void> {
    /** When the last open stream ended (undefined before the first one). */
    let endedAt: number | undefined;
    /** Failed attempts since the last open stream: which gateway to try next. */
    let failed = 0;
    while (!this.abort.signal.aborted) {
      const urls = this.gatewayUrls();
      const slot = (this.preferredSlot + failed) % urls.length;
      const headers: Record<string, string> = { accept: 'text/event-stream', authorization: `Bearer ${this.token}` };
      if (this.lastSeq >= 0) headers['last-event-id'] = String(this.lastSeq);
      let opened = false;
      let endedWithError = false;
      try {
        const response = await fetch(`${urls[slot]}/v1/sessions/${this.sessionId}/events?from=0`, {
          headers,
          signal: this.abort.signal,
        });
        if (response.status !== 200 || !response.body) {
          await response.body?.cancel();
          throw new Error(`HTTP ${response.status}`);
        }
        opened = true;
        if (endedAt !== undefined) {
          this.gaps.push({ endedAt, reopenedAt: Date.now(), slot });
          this.reconnects += 1;
        }
        for await (const frame of sseFrames(response.body)) {
          if (frame.event === 'error') {
            this.errorEvents.push(frame.data);
            endedWithError = true;
            continue;
          }
          const event = JSON.parse(frame.data) as StoredEvent;
          this.events.push(event);
          this.arrivals.push(Date.now());
          this.onEvent?.(event);
        }
      } catch (error) {
        // The stream broke (gateway killed, connection refused or reset) or we are stopping:
        // either way the code below decides what next.
        void error;
      }
      if (this.abort.signal.aborted) return;
      if (opened) {
        endedAt = Date.now();
        failed = 0;
        // The gateway ended the stream because its store or Temporal failed: give it a moment.
        if (endedWithError) await sleep(250);
      } else {
        // Refused: try the next gateway at once, and pause after a round of refusals.
        failed += 1;
        if (failed % urls.length === 0) await sleep(100);
      }
    }
  }
}
