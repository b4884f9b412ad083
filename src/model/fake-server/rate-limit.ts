/**
 * The fake model's rate limits (`FakeModelConfig.rateLimit`): a token bucket per dimension
 * (requests, prompt tokens), refilled continuously; a request over them is refused with a 429
 * saying when to retry. It remembers when it let requests in and when it refused them.
 */
import type http from 'node:http';
import { rateLimited } from './http.js';
import type { FakeModelConfig } from './types.js';

export class RateLimiter {
  /** The time each bucket would be full again (ms). */
  private state = { requestsAt: 0, tokensAt: 0 };
  private admitted: number[] = [];
  private refusedAt: number[] = [];

  reset(): void {
    this.state = { requestsAt: 0, tokensAt: 0 };
    this.admitted = [];
    this.refusedAt = [];
  }

  /** When each chat request was let in and when one was refused with a 429 (epoch ms). */
  counts(): { admitted: number[]; refused: number; refusedAt: number[] } {
    return { admitted: [...this.admitted], refused: this.refusedAt.length, refusedAt: [...this.refusedAt] };
  }

  /** The most requests let in within any window of `ms`. */
  mostAdmittedWithin(ms: number): number {
    let most = 0;
    for (let i = 0, j = 0; i < this.admitted.length; i++) {
      while (this.admitted[i]! - this.admitted[j]! >= ms) j++;
      most = Math.max(most, i - j + 1);
    }
    return most;
  }

  /** Lets a request of `tokens` prompt tokens in under `limit`, or refuses it with a 429 saying when to retry. */
  admit(limit: FakeModelConfig['rateLimit'], tokens: number, res: http.ServerResponse): void {
    if (!limit) return;
    if (limit.stateLimits !== false) {
      res.setHeader('x-ratelimit-limit-requests', String(limit.requestsPerMinute));
      if (limit.tokensPerMinute !== undefined) res.setHeader('x-ratelimit-limit-tokens', String(limit.tokensPerMinute));
    }
    const now = Date.now();
    const burstMs = limit.burstMs ?? 1_000;
    // Each dimension: full again at `at`; a request fits while `at + cost·interval - now <= burst`.
    const over = (at: number, perMinute: number | undefined, units: number): number => {
      if (perMinute === undefined) return 0;
      const interval = 60_000 / perMinute;
      return Math.max(0, Math.max(at, now) + units * interval - now - Math.max(burstMs, interval));
    };
    const waitMs = Math.max(
      over(this.state.requestsAt, limit.requestsPerMinute, 1),
      over(this.state.tokensAt, limit.tokensPerMinute, tokens),
    );
    if (waitMs > 0) {
      this.refusedAt.push(now);
      throw rateLimited({
        'retry-after': String(Math.ceil(waitMs / 1000)),
        'retry-after-ms': String(Math.ceil(waitMs)),
      });
    }
    this.state.requestsAt = Math.max(this.state.requestsAt, now) + 60_000 / limit.requestsPerMinute;
    if (limit.tokensPerMinute !== undefined)
      this.state.tokensAt = Math.max(this.state.tokensAt, now) + (tokens * 60_000) / limit.tokensPerMinute;
    this.admitted.push(now);
  }
}
