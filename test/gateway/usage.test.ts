/**
 * The cost ledger (issue 26) over real HTTP: every model reply and compaction summary logs the
 * provider's usage and its cost at the catalogue's prices; `GET /v1/sessions/:id/usage` sums
 * them per turn, per model and in total, and its token sums equal what the (fake) provider
 * reported; `GET /v1/usage` sums across sessions within a time window.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type RunningGateway } from '../../src/gateway/index.js';
import { DEFAULT_MODEL_CATALOGUE } from '../../src/model/catalogue.js';
import { costOf, type UsageLedger } from '../../src/session/index.js';
import { startStack, type Stack } from '../support/stack.js';
import { request } from './http.js';

const PRICES = { input: 3, cachedInput: 0.3, output: 15 };

let stack: Stack;
let gateway: RunningGateway;
beforeAll(async () => {
  stack = await startStack({
    catalogue: {
      ...DEFAULT_MODEL_CATALOGUE,
      models: { ...DEFAULT_MODEL_CATALOGUE.models, fake: { ...DEFAULT_MODEL_CATALOGUE.models.fake!, prices: PRICES } },
    },
  });
  gateway = await startGateway({ client: stack.client, host: '127.0.0.1', port: 0, bodyLimitBytes: 64 * 1024 });
});
afterAll(async () => {
  await gateway?.close();
  await stack?.close();
});

const get = async <T>(path: string): Promise<{ status: number; body: T }> => {
  const response = await request(gateway.url, 'GET', path);
  return { status: response.status, body: response.body as T };
};

describe('the cost ledger', () => {
  it('sums each reply and summary per turn, per model and in total; its tokens are what the provider reported', async () => {
    stack.fake.reset();
    const id = `usage-${Date.now()}`;
    await stack.client.create({ sessionId: id });
    for (let i = 1; i <= 4; i++) await stack.client.send(id, `question ${i}: ${'tell me more about it '.repeat(40)}`);
    expect(await stack.client.compact(id)).not.toBeNull();
    const reported = stack.fake.reportedUsage();
    expect(reported).toHaveLength(5);

    const { status, body: ledger } = await get<UsageLedger>(`/v1/sessions/${id}/usage`);
    expect(status).toBe(200);
    expect(ledger.total.calls).toBe(5);
    expect(ledger.total.unpricedCalls).toBe(0);
    // The provider's figures: prompt tokens split into cached and uncached, completion tokens.
    const cached = reported.reduce((n, u) => n + u.prompt_tokens_details.cached_tokens, 0);
    const prompt = reported.reduce((n, u) => n + u.prompt_tokens, 0);
    const completion = reported.reduce((n, u) => n + u.completion_tokens, 0);
    expect(ledger.total.cachedInputTokens).toBe(cached);
    expect(ledger.total.inputTokens).toBe(prompt - cached);
    expect(ledger.total.outputTokens).toBe(completion);
    // Its cost: each call at the prices (a cache read at the cached price).
    const expected = reported.reduce(
      (usd, u) =>
        usd +
        costOf(
          {
            inputTokens: u.prompt_tokens - u.prompt_tokens_details.cached_tokens,
            cacheReadTokens: u.prompt_tokens_details.cached_tokens,
            outputTokens: u.completion_tokens,
          },
          PRICES,
        ),
      0,
    );
    expect(ledger.total.costUsd).toBeGreaterThan(0);
    expect(ledger.total.costUsd).toBeCloseTo(expected, 12);
    expect(Object.keys(ledger.byModel)).toEqual(['fake']);
    expect(ledger.byModel.fake!.costUsd).toBeCloseTo(expected, 12);
    // Per turn: one reply each, and the manual compaction between turns.
    expect(ledger.byTurn.map((t) => [t.turn, t.replies, t.compactions])).toEqual([
      [null, 0, 1],
      [1, 1, 0],
      [2, 1, 0],
      [3, 1, 0],
      [4, 1, 0],
    ]);
    expect(ledger.byTurn.reduce((usd, t) => usd + t.costUsd, 0)).toBeCloseTo(ledger.total.costUsd, 12);
    // The TypeScript client reads the same ledger.
    expect(await stack.client.usage(id)).toEqual(ledger);
  });

  it('sums across sessions within a time window; bad bounds are a 400 naming them', async () => {
    const before = Date.now();
    const ids = [`usage-a-${before}`, `usage-b-${before}`];
    for (const id of ids) {
      await stack.client.create({ sessionId: id });
      await stack.client.send(id, `hello from ${id}`);
    }
    const after = Date.now() + 1;
    const window = await get<{ total: { calls: number; costUsd: number }; sessions: number }>(
      `/v1/usage?from=${new Date(before).toISOString()}&to=${after}`,
    );
    expect(window.status).toBe(200);
    expect(window.body.sessions).toBe(2);
    expect(window.body.total.calls).toBe(2);
    const each = await Promise.all(ids.map((id) => stack.client.usage(id)));
    expect(window.body.total.costUsd).toBeCloseTo(
      each.reduce((usd, l) => usd + l.total.costUsd, 0),
      12,
    );
    // Nothing logged before the first session of this test counts in an earlier window.
    expect((await get<{ total: { calls: number } }>(`/v1/usage?to=${before - 60_000}`)).body.total.calls).toBe(0);
    // The tenant's running spend (what its caps are checked against) is the ledger's, all time.
    type Totals = {
      calls: number;
      inputTokens: number;
      cachedInputTokens: number;
      cacheWriteTokens: number;
      outputTokens: number;
      costUsd: number;
    };
    const all = await get<{ total: Totals; spend: unknown }>('/v1/usage?tenant=default');
    expect(all.status).toBe(200);
    const { total } = all.body;
    expect(all.body.spend).toEqual({
      spent: {
        tokens: total.inputTokens + total.cachedInputTokens + total.cacheWriteTokens + total.outputTokens,
        costUsd: expect.closeTo(total.costUsd, 12) as unknown,
        // Replies only: the ledger's calls also count the compaction summary of the first test.
        modelCalls: total.calls - 1,
        toolCalls: 0,
        wallMs: expect.any(Number) as unknown,
        sessions: 3,
      },
      caps: null,
    });
    // Every turn of this file's sessions ended: their wall time is in.
    expect((all.body.spend as { spent: { wallMs: number } }).spent.wallMs).toBeGreaterThan(0);
    // A sum over every tenant (no tenant named, a gateway without tokens) has no one tenant's spend.
    expect((await get<{ spend: unknown }>('/v1/usage')).body.spend).toBeNull();
    const bad = await get<{ error: { code: string; message: string } }>('/v1/usage?from=yesterday');
    expect(bad.status).toBe(400);
    expect(bad.body.error.message).toMatch(/from must be an ISO 8601 time/);
  });
});
