/**
 * How the engine's model calls reach the bytes of stored media (issue 50): read from the
 * session's artifact store inside the activity that makes the call, never through Temporal.
 */
import type { ModelPort, ModelRequest } from '../model/provider.js';
import type { EngineDeps } from './deps.js';

/** Reads a stored medium of session `sessionId` (the store refuses another session's locator). */
export function mediaReader(deps: EngineDeps, sessionId: string): (locator: string) => Promise<Uint8Array> {
  return (locator) => deps.store.artifacts.readMedia(sessionId, locator);
}

/**
 * `port` with every request reading its stored media through `readMedia`: the summarizer's,
 * whose range may hold some (the context layer calls it without knowing the store).
 */
export function withMediaReader(port: ModelPort, readMedia: (locator: string) => Promise<Uint8Array>): ModelPort {
  return Object.assign(Object.create(port) as ModelPort, {
    stream: (request: ModelRequest) => port.stream({ readMedia, ...request }),
  });
}
