/**
 * Who a request acts for (DESIGN §5.3, issue 26): gateway tokens are scoped to one tenant and
 * a set of rights, each route naming the one it needs by what it does (route-table.ts). `read`
 * (every route that only reads, whatever its method), `write` (create sessions, send messages, runs,
 * cancel, compact, fork…), `approve` (answer tool approvals, post external tool results) and
 * `admin` (erase, salvage, resume, change a budget). A request's handler gets a client scoped
 * to its token's tenant (SessionClient.forTenant, persistence/tenants.ts): another tenant's
 * session answers 404 exactly as one that does not exist, and the attempt is logged and
 * counted. A token without a right the route needs gets 403.
 *
 * `SESSIONLOG_GATEWAY_TOKEN` (one token) acts for the `default` tenant with every right; with
 * no token at all (loopback only) a request acts for every tenant, as the CLI on that machine.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import type { CrossTenantAttempt } from '../client/session-client.js';
import { ConfigError, DEFAULT_TENANT, isValidTenant } from '../session/index.js';

export const RIGHTS = ['read', 'write', 'approve', 'admin'] as const;
export type Right = (typeof RIGHTS)[number];

/** What a token may do: its tenant (undefined: every tenant, for a gateway without tokens) and rights. */
export type Grant = { tenant: string | undefined; rights: ReadonlySet<Right> };

/** A scoped token as configured. */
export type TokenGrant = { token: string; tenant: string; rights?: readonly Right[] };

export const FULL_RIGHTS: ReadonlySet<Right> = new Set(RIGHTS);

/**
 * What a request acts for when the gateway has no token (loopback only, one user's machine):
 * every tenant, every right, as the CLI on that machine.
 */
export const OPEN_GRANT: Grant = { tenant: undefined, rights: FULL_RIGHTS };

/** A gateway without tokens: every request acts for the default tenant with every right. */
export const OPEN_ACCESS: RouteAccess = { grantOf: () => OPEN_GRANT, onCrossTenant: () => undefined };

/** A request's grant: a token's, or `stream` for a stream token (read, the session's own tenant). */
export type RequestGrant = Grant | 'stream';

/** How routes learn what a request may do, and where refused cross-tenant attempts go. */
export type RouteAccess = {
  grantOf(request: FastifyRequest): RequestGrant | undefined;
  onCrossTenant(attempt: CrossTenantAttempt): void;
};

function digest(token: string): Buffer {
  return createHash('sha256').update(token, 'utf8').digest();
}

/** Finds the grant of a presented token in constant time per configured token. */
export class TokenGrants {
  private readonly entries: Array<{ digest: Buffer; grant: Grant }>;

  constructor(legacy: string | undefined, scoped: readonly TokenGrant[]) {
    this.entries = [];
    if (legacy !== undefined)
      this.entries.push({ digest: digest(legacy), grant: { tenant: DEFAULT_TENANT, rights: FULL_RIGHTS } });
    for (const entry of scoped) {
      if (entry.token.length < 16)
        throw new ConfigError(`a gateway token of tenant ${entry.tenant} is shorter than 16 characters`);
      if (!isValidTenant(entry.tenant))
        throw new ConfigError(
          `gateway token tenant ${JSON.stringify(entry.tenant)} is not a tenant name (a-z 0-9 . _ -, at most 64)`,
        );
      for (const right of entry.rights ?? [])
        if (!RIGHTS.includes(right))
          throw new ConfigError(`unknown gateway token right ${JSON.stringify(right)} (expected ${RIGHTS.join(', ')})`);
      this.entries.push({
        digest: digest(entry.token),
        grant: { tenant: entry.tenant, rights: new Set(entry.rights ?? RIGHTS) },
      });
    }
    const seen = new Set<string>();
    for (const { digest: d } of this.entries) {
      const hex = d.toString('hex');
      if (seen.has(hex)) throw new ConfigError('the same gateway token is configured twice');
      seen.add(hex);
    }
  }

  /** Whether any token is configured (else every request acts for the default tenant with every right). */
  get required(): boolean {
    return this.entries.length > 0;
  }

  /** The grant of `token`, or undefined for an unknown one. */
  find(token: string): Grant | undefined {
    const presented = digest(token);
    let found: Grant | undefined;
    // Every entry is compared, so the time does not say which one matched.
    for (const entry of this.entries) if (timingSafeEqual(entry.digest, presented)) found ??= entry.grant;
    return found;
  }

  /**
   * What stream tokens are signed with: the one token when it is the only one (as before scoped
   * tokens), else every configured token (rotating any revokes them).
   */
  signingSecret(legacy: string | undefined): string | undefined {
    if (this.entries.length === 0) return undefined;
    if (legacy !== undefined && this.entries.length === 1) return legacy;
    return this.entries.map((e) => e.digest.toString('hex')).join(':');
  }
}

/** SESSIONLOG_GATEWAY_TOKENS: `{"<token>": {"tenant": "acme", "rights": ["read", "write"]}}`. */
export function parseTokenGrants(text: string): TokenGrant[] {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new ConfigError(
      'SESSIONLOG_GATEWAY_TOKENS must be JSON: {"<token>": {"tenant": "<tenant>", "rights": ["read", "write", "approve", "admin"]}}',
    );
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new ConfigError('SESSIONLOG_GATEWAY_TOKENS must be a JSON object keyed by token');
  const grants = Object.entries(value as Record<string, unknown>).map(([token, grant]): TokenGrant => {
    const g = grant as { tenant?: unknown; rights?: unknown } | null;
    if (typeof g !== 'object' || g === null || typeof g.tenant !== 'string')
      throw new ConfigError('each SESSIONLOG_GATEWAY_TOKENS entry needs a "tenant"');
    if (g.rights !== undefined && !Array.isArray(g.rights))
      throw new ConfigError('SESSIONLOG_GATEWAY_TOKENS "rights" must be a list');
    return { token, tenant: g.tenant, ...(g.rights ? { rights: g.rights as Right[] } : {}) };
  });
  // The same checks the gateway makes, at configuration time.
  new TokenGrants(undefined, grants);
  return grants;
}
