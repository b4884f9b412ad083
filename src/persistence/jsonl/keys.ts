/** The JSONL backend's session keys: one `session.key` file per session, published once. */
import { assertSessionId } from '../../session/index.js';
import { type SessionKey, type SessionKeyStore } from '../store.js';
import { newSessionKey, storedSessionKey } from '../inbox.js';
import { publishOnce, readIfExists, parseJsonOrUndefined } from './files.js';
import type { JsonlSessionStore } from './store.js';

/** Session keys as one file per session, `session.key` in its directory. */
export class JsonlSessionKeys implements SessionKeyStore {
  constructor(private readonly store: JsonlSessionStore) {}

  async obtain(sessionId: string): Promise<SessionKey> {
    const existing = await this.find(sessionId);
    if (existing) return existing;
    await this.store.layout.ensureSessionDir(sessionId);
    const made = newSessionKey();
    // Published only if no key is there: the first writer's key is everyone's.
    await publishOnce(
      this.store.layout.keyPath(sessionId),
      this.store.layout.sessionDir(sessionId),
      JSON.stringify({ id: made.id, key: made.key.toString('base64') }),
    );
    const stored = await this.find(sessionId);
    if (!stored) throw new Error(`unreachable: the key of session ${sessionId} was published but cannot be read`);
    return stored;
  }

  async find(sessionId: string): Promise<SessionKey | undefined> {
    this.store.assertOpen();
    assertSessionId(sessionId);
    const path = this.store.layout.keyPath(sessionId);
    const text = await readIfExists(path);
    if (text === undefined) return undefined;
    const value = parseJsonOrUndefined(text) as { id?: unknown; key?: unknown } | null | undefined;
    const key = typeof value?.key === 'string' ? Buffer.from(value.key, 'base64') : undefined;
    return storedSessionKey(value?.id, key, path);
  }
}
