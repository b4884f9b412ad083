/**
 * Short-lived signed stream tokens. A browser `EventSource` cannot send an `Authorization`
 * header, so the inspector first mints a token with its bearer token
 * (`POST /v1/sessions/:id/stream-token`) and opens the live tail with it in the query string
 * (`GET /v1/sessions/:id/events?streamToken=…`). The token is valid for one session, for a
 * short time, and on that route only.
 *
 * Format: `<expiresAt ms>.<base64url HMAC-SHA256(key, "<sessionId>\n<expiresAt>")>`. The key
 * is derived from the gateway token with HKDF, so every gateway sharing the token accepts the
 * tokens any of them minted, and rotating the gateway token revokes them all. Without a
 * gateway token the key is random per process (nothing is checked then anyway).
 */
import { createHmac, hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto';
import type { FastifyRequest } from 'fastify';

/** How long a minted stream token may be used to open a stream. An open stream is not cut when it expires. */
export const STREAM_TOKEN_TTL_MS = 60_000;

/** The one route that accepts a stream token instead of the bearer token. */
export const STREAM_TOKEN_ROUTE = { method: 'GET', url: '/v1/sessions/:id/events' } as const;

/** The query parameter that carries the token. */
export const STREAM_TOKEN_PARAM = 'streamToken';

export type MintedStreamToken = { token: string; expiresAt: number };

export type StreamTokenSigner = {
  mint(sessionId: string, now?: number): MintedStreamToken;
  /** Whether `token` was minted by this key for `sessionId` and has not expired at `now`. */
  verify(token: string, sessionId: string, now?: number): boolean;
};

const KEY_INFO = 'sessionlog/stream-token/v1';

function signature(key: Buffer, sessionId: string, expiresAt: number): Buffer {
  return createHmac('sha256', key).update(`${sessionId}\n${expiresAt}`, 'utf8').digest();
}

/** A signer keyed by `gatewayToken` (or a random key when the gateway has none). */
export function createStreamTokenSigner(
  gatewayToken: string | undefined,
  ttlMs = STREAM_TOKEN_TTL_MS,
): StreamTokenSigner {
  const key =
    gatewayToken === undefined ? randomBytes(32) : Buffer.from(hkdfSync('sha256', gatewayToken, '', KEY_INFO, 32));
  return {
    mint(sessionId, now = Date.now()) {
      const expiresAt = now + ttlMs;
      return { token: `${expiresAt}.${signature(key, sessionId, expiresAt).toString('base64url')}`, expiresAt };
    },
    verify(token, sessionId, now = Date.now()) {
      const match = /^(\d{1,16})\.([A-Za-z0-9_-]{43})$/.exec(token);
      if (!match) return false;
      const expiresAt = Number(match[1]);
      // A token from the future beyond one TTL was not minted by this signer's clock.
      if (expiresAt <= now || expiresAt > now + 2 * ttlMs) return false;
      return timingSafeEqual(Buffer.from(match[2]!, 'base64url'), signature(key, sessionId, expiresAt));
    },
  };
}

/**
 * Whether `request` is authorised by a valid stream token: only a GET of the events route,
 * only for the session the token was minted for.
 */
export function streamTokenAuthorizes(request: FastifyRequest, signer: StreamTokenSigner): boolean {
  if (request.method !== STREAM_TOKEN_ROUTE.method || request.routeOptions.url !== STREAM_TOKEN_ROUTE.url) return false;
  const token = (request.query as Record<string, unknown> | undefined)?.[STREAM_TOKEN_PARAM];
  const sessionId = (request.params as Record<string, unknown> | undefined)?.id;
  return typeof token === 'string' && typeof sessionId === 'string' && signer.verify(token, sessionId);
}
