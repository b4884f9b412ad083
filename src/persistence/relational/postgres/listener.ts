/** `LISTEN/NOTIFY` for the PostgreSQL store's `watch`: one listening connection per store. */
import pg from 'pg';
import type { Notification, PoolConfig } from 'pg';
import type { RemoteAppends } from '../../watch.js';
import { quoteIdent } from './schema.js';

/**
 * One dedicated connection per store that `LISTEN`s on the store's channel and fans each
 * notification (payload: a session id) out to that session's watchers. A lost connection
 * wakes every watcher (they re-read) and is re-established on the next watcher poll.
 */
export class NotificationListener implements RemoteAppends {
  private client: pg.Client | undefined;
  private connecting: Promise<void> | undefined;
  private readonly subscribers = new Map<string, Set<() => void>>();
  private closed = false;

  constructor(
    private readonly config: PoolConfig,
    private readonly channel: string,
  ) {}

  subscribe(id: string, wake: () => void): () => void {
    let set = this.subscribers.get(id);
    if (!set) this.subscribers.set(id, (set = new Set()));
    set.add(wake);
    return () => {
      set.delete(wake);
      if (set.size === 0 && this.subscribers.get(id) === set) this.subscribers.delete(id);
    };
  }

  /** Resolves once the connection listens (or could not be made: watchers then rely on polling). */
  listen(): Promise<void> {
    if (this.closed || this.client) return Promise.resolve();
    this.connecting ??= this.connect().finally(() => (this.connecting = undefined));
    return this.connecting;
  }

  private async connect(): Promise<void> {
    const client = new pg.Client(this.config);
    const lost = (): void => {
      if (this.client === client) this.client = undefined;
      this.wakeAll();
    };
    client.on('error', lost);
    client.on('end', lost);
    client.on('notification', (message: Notification) => {
      if (message.channel !== this.channel || message.payload === undefined) return;
      for (const wake of [...(this.subscribers.get(message.payload) ?? [])]) wake();
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${quoteIdent(this.channel)}`);
    } catch {
      // Server unreachable or out of connections: watchers poll, and the next poll retries.
      await client.end().catch(() => undefined);
      return;
    }
    if (this.closed) {
      await client.end().catch(() => undefined);
      return;
    }
    this.client = client;
    // Appends committed while no listener was connected are found by this re-read.
    this.wakeAll();
  }

  private wakeAll(): void {
    for (const set of this.subscribers.values()) for (const wake of [...set]) wake();
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.connecting;
    const client = this.client;
    this.client = undefined;
    if (client) {
      try {
        await client.end();
      } catch {
        // Ending a connection that already broke: nothing left to release.
      }
    }
  }
}
