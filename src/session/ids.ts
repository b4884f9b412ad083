import { SessionlogError } from './errors.js';

/** Session ids: 1–128 characters of [A-Za-z0-9._-], not starting with '.' (DESIGN §3). */
export const SESSION_ID_PATTERN = /^(?!\.)[A-Za-z0-9._-]{1,128}$/;

export function isValidSessionId(id: unknown): id is string {
  return typeof id === 'string' && SESSION_ID_PATTERN.test(id);
}

/** Throws INVALID_SESSION_ID unless `id` is in the session id alphabet. */
export function assertSessionId(id: unknown): asserts id is string {
  if (!isValidSessionId(id)) {
    const shown = typeof id === 'string' ? JSON.stringify(id.slice(0, 160)) : typeof id;
    throw new SessionlogError(
      'INVALID_SESSION_ID',
      `invalid session id ${shown}: use 1-128 characters of A-Z a-z 0-9 . _ - not starting with '.'`,
    );
  }
}
