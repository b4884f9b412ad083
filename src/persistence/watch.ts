/**
 * The live tail (`SessionStore.watch`) every backend shares: a watcher yields the stored events
 * from its seq on, then wakes on an append made through any store instance at the same location in
 * this process, on a remote append where the backend hears of them (PostgreSQL `LISTEN/NOTIFY`),
 * or on the next poll tick, and ends when the store closes.
 */
import { EventEmitter } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import type { StoredEvent } from '../session/index.js';
import { assertReadArguments } from './errors.js';

/**
 * In-process append notifications, shared by every store instance in this process that points
 * at the same location, so a watcher wakes immediately on an append made through another
 * instance. Appends by other processes are found by polling or by {@link RemoteAppends}.
 */
const appendSignals = new EventEmitter();
appendSignals.setMaxListeners(0);

function signalName(location: string, id: string): string {
  return `${location}\0${id}`;
}

/** Where a backend hears of appends made by other processes without polling (PostgreSQL `LISTEN`). */
export type RemoteAppends = {
  /**
   * Resolves once listening, or once that failed (watchers then rely on polling). Called before a
   * watch's first read and again before every read, so a lost connection is made again.
   */
  listen(): Promise<void>;
  /** Wakes `wake` on a remote append to session `id`; returns the unsubscribe. */
  subscribe(id: string, wake: () => void): () => void;
};

type WatchSource = {
  /** Stored events with seq >= fromSeq (a bounded page). */
  read(fromSeq: number): Promise<StoredEvent[]>;
  /** Registers a wake-up for appends to this session and for store close; returns an unsubscribe. */
  subscribe(wake: () => void): () => void;
  isClosed(): boolean;
  pollIntervalMs: number;
};

/** How many events a watcher reads at a time. */
const WATCH_PAGE = 1000;

/** One store instance's live tail: its watchers, the wake-ups they listen to, and its close. */
export class LiveTail {
  private closed = false;
  private readonly closeListeners = new Set<() => void>();

  constructor(
    /** Identifies the stored data: every store instance at one location shares the in-process wake-ups. */
    private readonly location: string,
    private readonly pollIntervalMs: number,
    /** The store's `readFrom`. */
    private readonly readFrom: (id: string, fromSeq: number, limit: number) => Promise<StoredEvent[]>,
    private readonly remote?: RemoteAppends,
  ) {}

  /** Wakes this process's watchers of session `id`, through every store instance at this location. */
  appended(id: string): void {
    appendSignals.emit(signalName(this.location, id));
  }

  /** `SessionStore.watch`: its arguments are checked now, the events read as the consumer iterates. */
  watch(id: string, fromSeq: number, signal?: AbortSignal): AsyncIterable<StoredEvent> {
    assertReadArguments(id, fromSeq, undefined);
    return this.follow(id, fromSeq, signal);
  }

  private async *follow(id: string, fromSeq: number, signal: AbortSignal | undefined): AsyncGenerator<StoredEvent> {
    const remote = this.remote;
    // Listening before the first read means no notification between that read and LISTEN is lost.
    if (remote && !this.closed) await remote.listen();
    yield* watchEvents(
      {
        read: (seq) => {
          // Re-establishes a lost listener; the poll covers the gap.
          if (remote) void remote.listen();
          return this.readFrom(id, seq, WATCH_PAGE);
        },
        subscribe: (wake) => this.subscribe(id, wake),
        isClosed: () => this.closed,
        pollIntervalMs: this.pollIntervalMs,
      },
      fromSeq,
      signal,
    );
  }

  /** Ends every watch of this store instance. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const wake of [...this.closeListeners]) wake();
  }

  private subscribe(id: string, wake: () => void): () => void {
    const name = signalName(this.location, id);
    this.closeListeners.add(wake);
    appendSignals.on(name, wake);
    const offRemote = this.remote?.subscribe(id, wake);
    return () => {
      offRemote?.();
      appendSignals.off(name, wake);
      this.closeListeners.delete(wake);
    };
  }
}

/**
 * The `watch` loop: yields stored events from `fromSeq`, then waits for an in-process append
 * signal or the next poll tick and yields what is new. Ends when `signal` aborts or the store
 * closes; a consumer `break` unsubscribes.
 */
async function* watchEvents(source: WatchSource, fromSeq: number, signal?: AbortSignal): AsyncGenerator<StoredEvent> {
  let cursor = fromSeq;
  let woken = false;
  let wakeWaiter: (() => void) | undefined;
  const wake = (): void => {
    woken = true;
    wakeWaiter?.();
  };
  const unsubscribe = source.subscribe(wake);
  signal?.addEventListener('abort', wake);
  try {
    while (!signal?.aborted && !source.isClosed()) {
      woken = false;
      let events: StoredEvent[];
      try {
        events = await source.read(cursor);
      } catch (error) {
        if (source.isClosed()) return;
        throw error;
      }
      for (const event of events) {
        if (signal?.aborted) return;
        yield event;
        cursor = event.seq + 1;
      }
      if (events.length > 0 || woken) continue;
      const ac = new AbortController();
      await Promise.race([
        new Promise<void>((resolve) => (wakeWaiter = resolve)),
        sleep(source.pollIntervalMs, undefined, { signal: ac.signal }).catch(() => {
          // AbortError from cancelling the poll timer once the wake-up won the race.
        }),
      ]);
      ac.abort();
      wakeWaiter = undefined;
    }
  } finally {
    unsubscribe();
    signal?.removeEventListener('abort', wake);
  }
}
