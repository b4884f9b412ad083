/** Waiting on a session's log in tests: follow the live tail until a predicate holds (bounded). */
import type { SessionClient } from '../../src/client/session-client.js';
import type { StoredEvent } from '../../src/session/index.js';
import type { SessionStatus } from '../../src/workflows/api.js';

export async function waitForEvent(
  client: SessionClient,
  sessionId: string,
  predicate: (event: StoredEvent) => boolean,
  timeoutMs = 30_000,
): Promise<StoredEvent> {
  const abort = new AbortController();
  const timer = setTimeout(
    () => abort.abort(new Error(`no matching event in session ${sessionId} within ${timeoutMs} ms`)),
    timeoutMs,
  );
  try {
    for await (const event of client.follow(sessionId, 0, abort.signal)) {
      if (predicate(event)) return event;
    }
    throw abort.signal.reason instanceof Error
      ? abort.signal.reason
      : new Error(`log of ${sessionId} ended before a matching event`);
  } finally {
    clearTimeout(timer);
    abort.abort();
  }
}

/** Polls `fn` until it returns a value other than undefined (bounded). */
export async function eventually<T>(
  fn: () => Promise<T | undefined>,
  timeoutMs = 30_000,
  intervalMs = 100,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await fn();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

/** Polls the session's live status until its phase is `phase` (bounded); returns that status. */
export async function waitForPhase(
  client: SessionClient,
  sessionId: string,
  phase: SessionStatus['phase'],
  timeoutMs = 30_000,
): Promise<SessionStatus> {
  return eventually(async () => {
    const status = await client.status(sessionId);
    return status.phase === phase ? status : undefined;
  }, timeoutMs);
}
