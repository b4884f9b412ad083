/**
 * The model step (src/engine/ops/model-step.ts), the heart of a turn, called directly without
 * Temporal against a real SQLite store and the offline model: what a reply logs, that a replayed
 * step never calls the model again, and what stops or delays a call before it is made (a spend
 * cap, pacing), a provider's context overflow and a message too large for the window.
 */
import { describe, expect, it } from 'vitest';
import { useFakeModel } from '../support/fake-model.js';
import { catalogueContext, ofType, stepContext, useEngineHarness } from './engine-harness.js';

const fake = useFakeModel();
const harness = useEngineHarness(fake);

describe('a reply', () => {
  it('logs the turn, the entering message, the request header, the streamed chunks, then the message with its usage and cost, and closes the turn', async () => {
    const h = await harness();
    fake().enqueueReplies({ text: 'Hello from the model, in a few words.' });
    const message = await h.message('m1', 'hi there');

    const result = await h.modelStep({ turn: 1, step: 1, entering: [message] });

    expect(result).toMatchObject({ outcome: 'completed', replayed: false, toolCalls: [] });
    const events = await h.events();
    const types = events.map((event) => event.type);
    expect(types.slice(0, 5)).toEqual(['session/run', 'turn/start', 'step/start', 'user/message', 'request/header']);
    expect(types.slice(-3)).toEqual(['assistant/message', 'step/end', 'turn/end']);
    const chunks = ofType(events, 'assistant/chunk');
    expect(chunks.length).toBeGreaterThan(0);
    const [reply] = ofType(events, 'assistant/message');
    expect(result.replySeq).toBe(reply!.seq);
    expect(reply!.sourceEventSeqs).toEqual(chunks.map((chunk) => chunk.seq));
    expect(reply!.data.message.content).toEqual([{ type: 'text', text: 'Hello from the model, in a few words.' }]);
    const sent = fake().reportedUsage()[0]!;
    expect(reply!.data.usage?.outputTokens).toBe(sent.completion_tokens);
    expect(reply!.data.usage!.inputTokens + (reply!.data.usage!.cacheReadTokens ?? 0)).toBe(sent.prompt_tokens);
    // The fake's catalogue prices are zero: the cost is logged, and is zero.
    expect(reply!.data.cost).toBe(0);
    expect(ofType(events, 'turn/end')[0]!.data.reason).toEqual({ kind: 'completed' });
    expect(ofType(events, 'user/message')[0]!.data.content).toEqual([{ type: 'text', text: 'hi there' }]);
    // The message's inbox entry went with the batch that logged it.
    expect(await h.store.inbox.list(h.sessionId)).toEqual([]);
    expect(h.modelCalls()).toBe(1);
  });

  it('a replayed step (the same op keys, its reply logged) returns the logged reply without calling the model again', async () => {
    const h = await harness();
    fake().enqueueReplies({ text: 'only once' });
    const knownHead = h.head;
    const message = await h.message('m1', 'hi');
    const first = await h.modelStep({ turn: 1, step: 1, entering: [message] });
    const logged = await h.events();

    // The activity retried after its reply was logged: the same input, the workflow's head from before.
    h.head = knownHead;
    const again = await h.modelStep({ turn: 1, step: 1, entering: [message] }, stepContext(2));

    expect(again).toMatchObject({
      outcome: 'completed',
      replayed: true,
      replySeq: first.replySeq,
      headSeq: first.headSeq,
    });
    expect(h.modelCalls()).toBe(1);
    expect(await h.events()).toEqual(logged);
  });
});

describe('before the call', () => {
  it('a spend cap already reached logs a budget/breach and hands it back; the model is not called, and a retried check logs it once', async () => {
    const h = await harness();
    const noted = await h.engine.logNote({
      sessionId: h.sessionId,
      runId: h.runId,
      knownHead: h.head,
      note: { id: 'budget-1', budget: { total: { modelCalls: 1 } } },
    });
    h.head = noted.headSeq;
    await h.modelStep({ turn: 1, step: 1, entering: [await h.message('m1', 'first')] });
    expect(h.modelCalls()).toBe(1);

    const before = h.head;
    const message = await h.message('m2', 'second');
    const result = await h.modelStep({ turn: 2, step: 1, entering: [message] });

    expect(result.outcome).toBe('budget');
    expect(result.breach).toMatchObject({ cap: 'modelCalls', scope: 'total', used: 1, limit: 1, before: 'model' });
    expect(h.modelCalls()).toBe(1);
    const breaches = ofType(await h.events(), 'budget/breach');
    expect(breaches).toHaveLength(1);
    expect(result.breach!.seq).toBe(breaches[0]!.seq);

    h.head = before;
    const retried = await h.modelStep({ turn: 2, step: 1, entering: [message] }, stepContext(2));
    expect(retried.breach?.seq).toBe(breaches[0]!.seq);
    expect(ofType(await h.events(), 'budget/breach')).toHaveLength(1);
    expect(h.modelCalls()).toBe(1);
  });

  const limits = { requestsPerMinute: 60, burstMs: 1 };

  it("waits for its slot in the provider's bucket, heartbeating, then calls the model", async () => {
    const h = await harness({ pacing: { key: 'acct-wait', limits } });
    // Another worker's call took the slot now: the next one is about a second away.
    await h.store.pacing.reserve('acct-wait', limits, { requests: 1, tokens: 0 }, Date.now, Number.POSITIVE_INFINITY);
    const ctx = stepContext();

    const result = await h.modelStep(
      { turn: 1, step: 1, entering: [await h.message('m1', 'hi')], pauseAfterMs: 60_000 },
      ctx,
    );

    expect(result.outcome).toBe('completed');
    expect(h.modelCalls()).toBe(1);
    expect(ctx.heartbeats).toContainEqual({ pacedMs: expect.any(Number) });
    const paced = ctx.heartbeats.find((beat) => (beat as { pacedMs?: number }).pacedMs !== undefined) as {
      pacedMs: number;
    };
    expect(paced.pacedMs).toBeGreaterThan(0);
  });

  it('a slot further away than the step may wait is handed back as a rate limit with that wait (llm/retry logged); the model is not called', async () => {
    const h = await harness({ pacing: { key: 'acct-far', limits } });
    await h.store.pacing.reserve('acct-far', limits, { requests: 1, tokens: 0 }, Date.now, Number.POSITIVE_INFINITY);

    const result = await h.modelStep({ turn: 1, step: 1, entering: [await h.message('m1', 'hi')], pauseAfterMs: 100 });

    expect(result.outcome).toBe('rate-limited');
    expect(result.retryAfterMs).toBeGreaterThan(100);
    expect(h.modelCalls()).toBe(0);
    const [retry] = ofType(await h.events(), 'llm/retry');
    expect(retry!.data.failure.code).toBe('rate_limit');
    expect(retry!.data.delayMs).toBe(result.retryAfterMs);
  });
});

describe('context overflow', () => {
  it("a provider's overflow refusal ends the turn with context_overflow (never handed back as a replay-only outcome)", async () => {
    const h = await harness();
    fake().configure({ contextLimitTokens: 5 });

    const result = await h.modelStep({
      turn: 1,
      step: 1,
      entering: [await h.message('m1', 'a message longer than five tokens, by some way')],
    });

    expect(result.outcome).toBe('error');
    expect(result.error?.code).toBe('context_overflow');
    expect(result.turnEnd?.outcome).toBe('error');
    const [end] = ofType(await h.events(), 'turn/end');
    expect(end!.data.reason).toMatchObject({ kind: 'error', error: { code: 'context_overflow' } });
    expect(h.modelCalls()).toBe(1);
  });

  it('with context management, the window the refusal states is learned (model/limit) and a request that cannot fit it is not sent again', async () => {
    const h = await harness({ context: catalogueContext() });
    fake().configure({ contextLimitTokens: 5 });

    const result = await h.modelStep({
      turn: 1,
      step: 1,
      entering: [await h.message('m1', 'a message longer than five tokens, by some way')],
    });

    expect(result.outcome).toBe('error');
    expect(result.error?.code).toBe('context_overflow');
    const events = await h.events();
    expect(ofType(events, 'model/limit').map((event) => event.data)).toEqual([
      { model: 'fake', contextWindow: 5, source: 'provider-message' },
    ]);
    expect(ofType(events, 'turn/end')[0]!.data.reason).toMatchObject({
      kind: 'error',
      error: { code: 'context_overflow' },
    });
    expect(h.modelCalls()).toBe(1);
  });
});

describe('oversized input', () => {
  it('a message over half the request budget is stored whole as an artifact and logged (and sent) as a preview naming it', async () => {
    const h = await harness({ context: catalogueContext({ budgetTokens: 4_000 }) });
    const words = Array.from({ length: 6_000 }, (_, i) => `word${i}`).join(' ');

    const result = await h.modelStep({ turn: 1, step: 1, entering: [await h.message('big', words)] });

    expect(result.outcome).toBe('completed');
    const [logged] = ofType(await h.events(), 'user/message');
    const text = (logged!.data.content[0] as { text: string }).text;
    expect(text.length).toBeLessThan(words.length / 10);
    const locator = /stored at: (artifact:\S+?)\. /.exec(text)?.[1];
    expect(locator, text).toBeDefined();
    expect(await h.store.artifacts.get(h.sessionId, locator!)).toBe(words);
    const sent = JSON.stringify(fake().chatRequests()[0]!.messages);
    expect(sent).toContain(locator!);
    expect(sent).not.toContain('word3000 ');
  });
});
