/** The relational backends' session keys (the `session_keys` table). */
import { assertSessionId } from '../../session/index.js';
import { newSessionKey, storedSessionKey } from '../inbox.js';
import { type SessionKey, type SessionKeyStore } from '../store.js';
import { step, type RelationalDriver, type RelationalTx, type Steps, type Use } from './driver.js';

/** Session keys in the `session_keys` table, keyed by the session id (the session need not exist). */
export class RelationalSessionKeys implements SessionKeyStore {
  constructor(
    private readonly use: Use,
    private readonly driver: RelationalDriver,
  ) {}

  obtain(sessionId: string): Promise<SessionKey> {
    return this.use(() => {
      assertSessionId(sessionId);
      return this.driver.run('write', (tx) => this.obtainSteps(tx, sessionId));
    });
  }

  find(sessionId: string): Promise<SessionKey | undefined> {
    return this.use(async () => {
      assertSessionId(sessionId);
      const row = await this.driver.run('single', (tx) => step(tx.sessionKey(sessionId)));
      return row && this.checked(sessionId, row);
    });
  }

  /** Inserts a new key unless one is stored, then reads the stored one: the first stored wins a race. */
  private *obtainSteps(tx: RelationalTx, sessionId: string): Steps<SessionKey> {
    yield* step(tx.lockSessionId(sessionId));
    const existing = yield* step(tx.sessionKey(sessionId));
    if (existing) return this.checked(sessionId, existing);
    yield* step(tx.insertSessionKey(sessionId, newSessionKey(), Date.now()));
    const stored = yield* step(tx.sessionKey(sessionId));
    if (!stored) throw new Error(`unreachable: the key of session ${sessionId} was inserted but cannot be read`);
    return this.checked(sessionId, stored);
  }

  private checked(sessionId: string, row: { keyId: unknown; key: unknown }): SessionKey {
    return storedSessionKey(row.keyId, row.key, `the key of session ${sessionId} in ${this.driver.location}`);
  }
}
