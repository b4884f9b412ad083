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

/** The tenant of a session whose header names none (sessions from before tenants). */
export const DEFAULT_TENANT = 'default';
export const TENANT_PATTERN = /^[a-z0-9][a-z0-9._-]{0,63}$/;

export function isValidTenant(tenant: unknown): tenant is string {
  return typeof tenant === 'string' && TENANT_PATTERN.test(tenant);
}

/** Throws INVALID_ARGUMENT unless `tenant` is a tenant name. */
export function assertTenant(tenant: unknown): asserts tenant is string {
  if (!isValidTenant(tenant))
    throw new SessionlogError(
      'INVALID_ARGUMENT',
      `invalid tenant ${JSON.stringify(String(tenant).slice(0, 80))}: use 1-64 characters of a-z 0-9 . _ - starting with a letter or digit`,
    );
}

/** The tenant a session belongs to (DESIGN §5.3). */
export function tenantOf(header: { tenant?: string }): string {
  return header.tenant ?? DEFAULT_TENANT;
}
