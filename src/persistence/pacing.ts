/**
 * Provider pacing (DESIGN §5.3, issue 26): one token bucket per provider key, shared by every
 * worker through the store, so that many sessions on many workers stay under a provider's
 * requests- and tokens-per-minute limits instead of all hitting them and backing off together.
 *
 * The bucket is kept as two "theoretical arrival times" (the generic cell rate algorithm), one
 * for requests and one for tokens: each is the time at which the bucket would be full again
 * if nothing more were taken. A reservation of `cost` at `now` may start when the bucket holds
 * `cost` units: `start = max(now, max(tat, now) + cost·interval - burstMs)`, and takes them:
 * `tat = max(tat, now) + cost·interval`. Reservations are granted in order, each at a time of
 * its own, so callers sleep until their slot rather than retry. A reservation whose slot is
 * further away than the caller will wait is not taken (the caller pauses and asks again).
 * After the call, the tokens it really used correct the estimate it reserved ({@link PacingStore.adjust}).
 *
 * The state is one small row per key (the JSON of {@link PaceState}), read and written in one
 * transaction, so it survives worker restarts and is exact across processes.
 */
import type { PacingStore } from './store.js';
import { SessionlogError } from '../session/index.js';

/** A provider's limits: requests and tokens per minute (either may be absent), and how much may come at once. */
export type PaceLimits = {
  requestsPerMinute?: number;
  tokensPerMinute?: number;
  /** The burst allowed after a quiet spell, as this much time's worth of the rates (default {@link DEFAULT_BURST_MS}). */
  burstMs?: number;
};

export type PaceState = { requestsAt: number; tokensAt: number };

export type PaceCost = { requests: number; tokens: number };

/** A reservation: `startAt` (epoch ms) is when the call may start; `taken` false when it was further than `maxWaitMs` away. */
export type PaceGrant = { startAt: number; taken: boolean };

/** A time (epoch ms), or a clock read once the bucket is held (so a wait for another worker's reservation is not counted as idle time). */
export type Clock = number | (() => number);

/**
 * Half a one-second burst: a call reaches the provider a little after its slot
 * (scheduling, the connection), and these late arrivals must still fit a provider that allows
 * one second's worth at once. The rate itself is the provider's, so throughput is not lost.
 */
export const DEFAULT_BURST_MS = 500;
/** The longest key: a provider name and a digest of its API key. */
export const MAX_PACE_KEY = 200;

/** Why `limits` cannot pace (undefined when they can). */
export function paceLimitsProblem(limits: unknown): string | undefined {
  if (typeof limits !== 'object' || limits === null || Array.isArray(limits)) return 'rate limits must be an object';
  for (const [key, value] of Object.entries(limits)) {
    if (!['requestsPerMinute', 'tokensPerMinute', 'burstMs'].includes(key))
      return `unknown rate limit ${JSON.stringify(key)} (expected requestsPerMinute, tokensPerMinute, burstMs)`;
    if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0 || value > 1e12)
      return `rate limit ${key} must be a positive number`;
  }
  return undefined;
}

function assertKey(key: string): void {
  if (typeof key !== 'string' || key.length === 0 || key.length > MAX_PACE_KEY)
    throw new SessionlogError('INVALID_ARGUMENT', `a pacing key must be 1-${MAX_PACE_KEY} characters`);
}

/** The state of a row as stored; a row that is not one is refused rather than reset. */
export function parsePaceState(text: string, where: string): PaceState {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    value = undefined;
  }
  const state = value as Partial<PaceState> | undefined;
  if (!state || !Number.isFinite(state.requestsAt) || !Number.isFinite(state.tokensAt))
    throw new SessionlogError('CORRUPT_LOG', `${where}: a pacing row does not hold a bucket state`);
  return { requestsAt: state.requestsAt!, tokensAt: state.tokensAt! };
}

/** The reservation `cost` makes in `state` at `now` (pure). */
export function paceReserve(
  state: PaceState | undefined,
  limits: PaceLimits,
  cost: PaceCost,
  now: number,
): { startAt: number; state: PaceState } {
  const burstMs = limits.burstMs ?? DEFAULT_BURST_MS;
  const next: PaceState = { requestsAt: state?.requestsAt ?? now, tokensAt: state?.tokensAt ?? now };
  let startAt = now;
  const take = (at: number, perMinute: number | undefined, units: number): number => {
    if (perMinute === undefined || units <= 0) return at;
    const interval = 60_000 / perMinute;
    const from = Math.max(at, now);
    startAt = Math.max(startAt, from + units * interval - Math.max(burstMs, interval * Math.min(units, 1)));
    return from + units * interval;
  };
  next.requestsAt = take(next.requestsAt, limits.requestsPerMinute, cost.requests);
  next.tokensAt = take(next.tokensAt, limits.tokensPerMinute, cost.tokens);
  return { startAt, state: next };
}

/** `state` after `tokens` more (or, negative, fewer) were used than reserved. */
export function paceAdjust(state: PaceState | undefined, limits: PaceLimits, tokens: number, now: number): PaceState {
  const base = state ?? { requestsAt: now, tokensAt: now };
  if (limits.tokensPerMinute === undefined || tokens === 0) return base;
  // Tokens given back cannot make the bucket fuller than full.
  return { ...base, tokensAt: Math.max(now, base.tokensAt) + (tokens * 60_000) / limits.tokensPerMinute };
}

/** One atomic read-modify-write of a key's row: what each backend provides. */
export type PaceRowUpdate = (previous: PaceState | undefined) => PaceState | undefined;

/** The PacingStore over a backend's atomic row update (`update` returns the row it kept). */
export function pacingStore(
  update: (key: string, change: PaceRowUpdate) => Promise<PaceState | undefined>,
): PacingStore {
  return {
    async reserve(key, limits, cost, now, maxWaitMs) {
      assertKey(key);
      const problem = paceLimitsProblem(limits);
      if (problem) throw new SessionlogError('INVALID_ARGUMENT', problem);
      let grant: PaceGrant = { startAt: 0, taken: false };
      await update(key, (previous) => {
        const at = typeof now === 'function' ? now() : now;
        const reserved = paceReserve(previous, limits, cost, at);
        grant = { startAt: reserved.startAt, taken: reserved.startAt - at <= maxWaitMs };
        return grant.taken ? reserved.state : undefined;
      });
      return grant;
    },
    async adjust(key, limits, tokens, now) {
      assertKey(key);
      if (tokens === 0 || limits.tokensPerMinute === undefined) return;
      await update(key, (previous) => paceAdjust(previous, limits, tokens, now));
    },
    async state(key) {
      assertKey(key);
      return update(key, () => undefined);
    },
  };
}
