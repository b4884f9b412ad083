/**
 * `WatchHub`: live tails shared per session. Every follower of a session in this process is
 * fed by one `store.watch` of that session (one poll loop, or one LISTEN subscription), so a
 * thousand idle followers cost what one does.
 *
 * Each follower still gets every event from its own `fromSeq`, exactly once and in seq order:
 * events the shared watch delivers are buffered per follower, and whatever lies before them
 * (a follower that started behind the shared cursor, or a slow one whose buffer overflowed) is
 * read from the store with `readFrom` until the follower reaches the buffered events. The shared
 * watch starts at the session's head when its first follower arrives and stops when its last
 * follower leaves; an error of the shared watch reaches every follower of the session.
 */
import { assertSeqArgument } from '../persistence/errors.js';
import type { SessionStore } from '../persistence/store.js';
import { assertSessionId, isSessionlogError, type StoredEvent } from '../session/index.js';

export type WatchHubOptions = {
  /** Events read from the store per catch-up page. Default 500. */
  pageSize?: number;
  /** Events buffered for one follower before it is switched to reading the store (a slow consumer). Default 1024. */
  maxBuffered?: number;
};

type Follower = {
  /** The next seq this follower yields. */
  next: number;
  /** Events from the shared watch not yet yielded, in seq order. */
  queue: StoredEvent[];
  /** The buffer overflowed: the shared watch skips this follower until it reads the store again. */
  detached: boolean;
  /** Resolves the follower's wait for news. */
  wake: (() => void) | undefined;
};

/** The shared watch of one session. */
type Channel = {
  followers: Set<Follower>;
  stop: AbortController;
  /** Resolves once the shared watch knows where it starts (the session's head). */
  started: Promise<void>;
  /** The first seq the shared watch has not delivered yet. */
  cursor: number;
  /** The shared watch ended: the store closed, or it failed (`failure`). */
  ended: boolean;
  failure: { error: unknown } | undefined;
};

/**
 * Shares one store watch per session among all the followers of that session in this process.
 * Build one per store; `SessionClient.follow` goes through it.
 */
export class WatchHub {
  private readonly channels = new Map<string, Channel>();
  private readonly pageSize: number;
  private readonly maxBuffered: number;

  constructor(
    private readonly store: SessionStore,
    options: WatchHubOptions = {},
  ) {
    this.pageSize = options.pageSize ?? 500;
    this.maxBuffered = options.maxBuffered ?? 1024;
  }

  /** Sessions with a shared watch open right now. */
  get watchedSessions(): number {
    return this.channels.size;
  }

  /** Followers attached right now, over all sessions. */
  get followers(): number {
    let count = 0;
    for (const channel of this.channels.values()) count += channel.followers.size;
    return count;
  }

  /**
   * A live tail of session `sessionId`: stored events from `fromSeq`, then each new one as it is
   * appended, in seq order with none skipped or repeated. Ends when `signal` aborts or the store
   * closes; a consumer `break` detaches the follower. Throws what the shared watch throws.
   */
  follow(sessionId: string, fromSeq: number, signal?: AbortSignal): AsyncIterable<StoredEvent> {
    assertSessionId(sessionId);
    assertSeqArgument('fromSeq', fromSeq);
    return this.tail(sessionId, fromSeq, signal);
  }

  private async *tail(
    sessionId: string,
    fromSeq: number,
    signal: AbortSignal | undefined,
  ): AsyncGenerator<StoredEvent> {
    if (signal?.aborted) return;
    const channel = this.channels.get(sessionId) ?? this.open(sessionId);
    const follower: Follower = { next: fromSeq, queue: [], detached: false, wake: undefined };
    channel.followers.add(follower);
    const onAbort = (): void => follower.wake?.();
    signal?.addEventListener('abort', onAbort);
    try {
      await channel.started;
      while (!signal?.aborted) {
        // Buffered events are never behind `next`: deliver() drops older ones, and a store read
        // stops short of the first buffered event.
        const buffered = follower.queue[0];
        if (buffered !== undefined && buffered.seq === follower.next) {
          follower.queue.shift();
          follower.next = buffered.seq + 1;
          yield buffered;
          continue;
        }
        // Everything before the first buffered event (or before the shared cursor) is stored:
        // read it. Re-attach first, so events delivered during the read are buffered, not lost.
        const upTo = buffered?.seq ?? channel.cursor;
        if (follower.next < upTo) {
          follower.detached = false;
          let page: StoredEvent[];
          try {
            page = await this.store.readFrom(sessionId, follower.next, Math.min(this.pageSize, upTo - follower.next));
          } catch (error) {
            // The store closed under us: end like store.watch does.
            if (isSessionlogError(error, 'STORE_CLOSED')) return;
            throw error;
          }
          if (page[0]?.seq !== follower.next) {
            throw new Error(
              `watch hub: the store returned no event ${follower.next} of session ${sessionId} although seq ${upTo - 1} was watched`,
            );
          }
          for (const event of page) {
            if (signal?.aborted) return;
            follower.next = event.seq + 1;
            yield event;
          }
          continue;
        }
        if (channel.failure) throw channel.failure.error;
        if (channel.ended) return;
        await new Promise<void>((resolve) => (follower.wake = resolve));
        follower.wake = undefined;
      }
    } finally {
      signal?.removeEventListener('abort', onAbort);
      this.leave(sessionId, channel, follower);
    }
  }

  private open(sessionId: string): Channel {
    const channel: Channel = {
      followers: new Set(),
      stop: new AbortController(),
      started: Promise.resolve(),
      cursor: 0,
      ended: false,
      failure: undefined,
    };
    channel.started = this.store.nextSeq(sessionId).then((head) => {
      channel.cursor = head;
    });
    this.channels.set(sessionId, channel);
    void this.pump(sessionId, channel);
    return channel;
  }

  /** Runs the shared watch and hands each event to every attached follower. */
  private async pump(sessionId: string, channel: Channel): Promise<void> {
    try {
      await channel.started;
      for await (const event of this.store.watch(sessionId, channel.cursor, { signal: channel.stop.signal })) {
        channel.cursor = event.seq + 1;
        for (const follower of channel.followers) this.deliver(follower, event);
      }
    } catch (error) {
      if (!channel.stop.signal.aborted) channel.failure = { error };
    } finally {
      channel.ended = true;
      if (this.channels.get(sessionId) === channel) this.channels.delete(sessionId);
      for (const follower of channel.followers) follower.wake?.();
    }
  }

  private deliver(follower: Follower, event: StoredEvent): void {
    if (follower.detached || event.seq < follower.next) return;
    if (follower.queue.length >= this.maxBuffered) {
      // A slow consumer: stop buffering for it; it reads the store until it catches up.
      follower.queue = [];
      follower.detached = true;
    } else {
      follower.queue.push(event);
    }
    follower.wake?.();
  }

  private leave(sessionId: string, channel: Channel, follower: Follower): void {
    channel.followers.delete(follower);
    if (channel.followers.size > 0) return;
    channel.stop.abort();
    if (this.channels.get(sessionId) === channel) this.channels.delete(sessionId);
  }
}
