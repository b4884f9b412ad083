/** The relational backends' inbox (the `inbox` table). */
import { assertSessionId } from '../../session/index.js';
import { assertInboxKey, assertInboxKeys, inboxConflict, inboxPutRef } from '../inbox.js';
import { type InboxEntry, type InboxRef, type InboxStore } from '../store.js';
import { step, type RelationalDriver, type RelationalTx, type Steps, refuseTombstoned, type Use } from './driver.js';

/** The inbox in the `inbox` table, keyed by the session id (the session need not exist). */
export class RelationalInbox implements InboxStore {
  constructor(
    private readonly use: Use,
    private readonly driver: RelationalDriver,
  ) {}

  put(sessionId: string, key: string, body: string): Promise<InboxRef> {
    return this.use(async () => {
      const ref = inboxPutRef(sessionId, key, body);
      // Written before (a retried send): a read, which needs no write lock, answers it.
      const held = await this.driver.run('single', (tx) => step(tx.inboxEntry(sessionId, ref.key)));
      if (held && held.digest === ref.digest && held.bytes === ref.bytes) return ref;
      return this.driver.run('write', (tx) => putInboxEntry(tx, sessionId, ref, body));
    });
  }

  get(sessionId: string, key: string): Promise<string | undefined> {
    return this.use(() => {
      assertSessionId(sessionId);
      assertInboxKey(sessionId, key);
      return this.driver.run('single', (tx) => step(tx.inboxBody(sessionId, key)));
    });
  }

  remove(sessionId: string, keys: readonly string[]): Promise<number> {
    return this.use(async () => {
      assertInboxKeys(sessionId, keys);
      if (keys.length === 0) return 0;
      // Most removals find nothing (the engine removed the entry when it logged it): a read,
      // which needs no write lock, answers those.
      let held = false;
      for (const key of keys)
        if (await this.driver.run('single', (tx) => step(tx.inboxEntry(sessionId, key)))) held = true;
      if (!held) return 0;
      return this.driver.run('write', (tx) => step(tx.deleteInboxEntries(sessionId, keys)));
    });
  }

  list(sessionId: string): Promise<InboxEntry[]> {
    return this.use(() => {
      assertSessionId(sessionId);
      return this.driver.run('single', (tx) => step(tx.listInbox(sessionId)));
    });
  }
}

/**
 * Stores the entry unless its key is held: the same body again returns its reference, a different
 * one is refused. Under the id's lock, so an erasure cannot slip between the tombstone check and
 * the insert.
 */
function* putInboxEntry(tx: RelationalTx, sessionId: string, ref: InboxRef, body: string): Steps<InboxRef> {
  yield* step(tx.lockSessionId(sessionId));
  yield* refuseTombstoned(tx, sessionId);
  for (;;) {
    if (yield* step(tx.insertInboxEntry(sessionId, { ...ref, storedAt: Date.now(), body }))) return ref;
    const stored = yield* step(tx.inboxEntry(sessionId, ref.key));
    // Gone again: another process removed the entry between the insert and this read; insert again.
    if (!stored) continue;
    if (stored.digest !== ref.digest || stored.bytes !== ref.bytes) throw inboxConflict(sessionId, ref.key);
    return ref;
  }
}
