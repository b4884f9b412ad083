/**
 * The validated copies a store instance keeps (DESIGN §2: the store holds the one validated copy of
 * each open session in a process): the most recently used sessions' copies, and the lock that
 * serializes this process's work on each session's copy. Backends serialize processes themselves
 * (a JSONL lock file, SQLite's database lock, a PostgreSQL row lock).
 */
import AsyncLock from 'async-lock';
import { LRUCache } from 'lru-cache';

export class SessionCopies<Copy extends object> {
  private readonly cache: LRUCache<string, Copy>;
  private readonly lock = new AsyncLock({ maxPending: Number.POSITIVE_INFINITY });

  /** Keeps the copies of at most `size` sessions (`sessionCacheSize`). */
  constructor(size: number) {
    this.cache = new LRUCache({ max: size });
  }

  get(id: string): Copy | undefined {
    return this.cache.get(id);
  }

  set(id: string, copy: Copy): void {
    this.cache.set(id, copy);
  }

  /** Forgets the session's copy: the next call reads the stored log afresh. */
  evict(id: string): void {
    this.cache.delete(id);
  }

  clear(): void {
    this.cache.clear();
  }

  /** Runs `body` once this process's earlier work on session `id` has finished. */
  serial<T>(id: string, body: () => Promise<T>): Promise<T> {
    return this.lock.acquire(id, body);
  }
}
