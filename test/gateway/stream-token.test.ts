/**
 * Signed stream tokens (src/gateway/stream-token.ts): valid for one session, for a short time,
 * under the key of the gateway token that minted them.
 */
import { describe, expect, it } from 'vitest';
import { STREAM_TOKEN_TTL_MS, createStreamTokenSigner } from '../../src/gateway/stream-token.js';

const NOW = 1_800_000_000_000;
const GATEWAY_TOKEN = 'gateway-token-0123456789abcdef';

describe('stream tokens', () => {
  it('verify for the session they were minted for, until they expire', () => {
    const signer = createStreamTokenSigner(GATEWAY_TOKEN);
    const minted = signer.mint('s1', NOW);
    expect(minted.expiresAt).toBe(NOW + STREAM_TOKEN_TTL_MS);
    expect(signer.verify(minted.token, 's1', NOW)).toBe(true);
    expect(signer.verify(minted.token, 's1', minted.expiresAt - 1)).toBe(true);
    expect(signer.verify(minted.token, 's1', minted.expiresAt)).toBe(false);
    expect(signer.verify(minted.token, 's2', NOW)).toBe(false);
  });

  it('are accepted by every gateway with the same token and by no other', () => {
    const minted = createStreamTokenSigner(GATEWAY_TOKEN).mint('s1', NOW);
    expect(createStreamTokenSigner(GATEWAY_TOKEN).verify(minted.token, 's1', NOW)).toBe(true);
    expect(createStreamTokenSigner('another-gateway-token-0123456789').verify(minted.token, 's1', NOW)).toBe(false);
    // Without a gateway token the key is random per signer.
    expect(
      createStreamTokenSigner(undefined).verify(createStreamTokenSigner(undefined).mint('s1', NOW).token, 's1', NOW),
    ).toBe(false);
  });

  it('refuse a tampered token, a moved expiry and malformed input', () => {
    const signer = createStreamTokenSigner(GATEWAY_TOKEN);
    const { token, expiresAt } = signer.mint('s1', NOW);
    const [, mac] = token.split('.');
    const flipped = `${expiresAt}.${mac!.slice(0, -1)}${mac!.endsWith('A') ? 'B' : 'A'}`;
    expect(signer.verify(flipped, 's1', NOW)).toBe(false);
    expect(signer.verify(`${expiresAt + 1000}.${mac}`, 's1', NOW)).toBe(false);
    for (const bad of [
      '',
      'x',
      `${expiresAt}`,
      `${expiresAt}.`,
      `${expiresAt}.${mac}.x`,
      `-1.${mac}`,
      `${GATEWAY_TOKEN}`,
    ])
      expect(signer.verify(bad, 's1', NOW)).toBe(false);
  });

  it('refuse an expiry further ahead than one token lifetime could make', () => {
    const signer = createStreamTokenSigner(GATEWAY_TOKEN);
    const future = signer.mint('s1', NOW + 3 * STREAM_TOKEN_TTL_MS);
    expect(signer.verify(future.token, 's1', NOW)).toBe(false);
  });
});
