/**
 * The engine's operations around a compaction bracket (src/engine: op keys, the fenced log
 * writer, the activity's failure mapping), over a real SQLite store with a scripted model port:
 * a retried activity with the same compaction id resumes its own bracket and appends each batch
 * once; a summary already logged is never requested again; an activity of a superseded run
 * appends nothing. The bracket's content (what it replaces, the summarizer request, retention)
 * is tested in test/context/compaction-activity.test.ts.
 */
import { describe, expect, it } from 'vitest';
import type { SessionEvent } from '../../src/session/index.js';
import { RUN, SUMMARY, conversation, useHarnesses, failOnceOnOp, runEvent } from '../context/context-fakes.js';

const harness = useHarnesses();

describe('paced summaries', () => {
  const limits = { requestsPerMinute: 60, burstMs: 1 };

  it("a summary waits for its slot in the provider's bucket, then is billed against it", async () => {
    const h = await harness({ pacing: { config: { key: 'acct-wait', limits }, pauseAfterMs: 60_000 } });
    await conversation(h);
    // Another worker's call took the slot now: the next one is a second away (60 a minute, no burst to speak of).
    await h.store.pacing.reserve('acct-wait', limits, { requests: 1, tokens: 0 }, Date.now, Number.POSITIVE_INFINITY);
    const started = Date.now();
    const done = await h.compact({ compactionId: 'c1' });
    expect(done.result).not.toBeNull();
    expect(h.model.requests).toHaveLength(1);
    expect(Date.now() - started).toBeGreaterThanOrEqual(500);
    expect((await h.store.pacing.state('acct-wait'))!.requestsAt).toBeGreaterThan(started + 1_500);
  });

  it('a slot further away than the pause threshold fails the attempt as a rate limit with that retry delay; the summarizer is not called and the retry resumes the bracket', async () => {
    const h = await harness({ pacing: { config: { key: 'acct-far', limits }, pauseAfterMs: 200 } });
    await conversation(h);
    await h.store.pacing.reserve('acct-far', limits, { requests: 1, tokens: 0 }, Date.now, Number.POSITIVE_INFINITY);
    const knownHead = await h.store.nextSeq(h.id);
    const failure = (await h.compact({ compactionId: 'c1', knownHead }).catch((error: unknown) => error)) as {
      type?: string;
      nextRetryDelay?: unknown;
    };
    expect(failure.type).toBe('rate_limit');
    expect(failure.nextRetryDelay).toBeDefined();
    expect(h.model.requests).toHaveLength(0);
    expect((await h.events()).slice(knownHead).map((e) => e.type)).toEqual(['compaction/start']);
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    const done = await h.compact({ compactionId: 'c1', knownHead }, { attempt: 2 });
    expect(done.result).not.toBeNull();
    expect(h.model.requests).toHaveLength(1);
  });
});

describe('retried compaction activities', () => {
  it('a retryable summarizer failure is rethrown for Temporal, and the retry resumes the same bracket with one start', async () => {
    const h = await harness({ replies: [new Error('rate limited'), SUMMARY], retryable: true });
    await conversation(h);
    const knownHead = await h.store.nextSeq(h.id);

    await expect(h.compact({ compactionId: 'c1', knownHead }, { attempt: 1 })).rejects.toMatchObject({
      type: 'server',
    });
    expect((await h.events()).slice(knownHead).map((e) => e.type)).toEqual(['compaction/start']);

    const done = await h.compact({ compactionId: 'c1', knownHead }, { attempt: 2 });
    expect(done.result).not.toBeNull();
    expect((await h.events()).slice(knownHead).map((e) => e.type)).toEqual([
      'compaction/start',
      'compaction/summary',
      'user/message',
      'compaction/end',
    ]);
    expect(h.model.requests).toHaveLength(2);
  });

  it('a retry whose summary is already logged closes the bracket without calling the summarizer again', async () => {
    const h = await harness({ wrapStore: failOnceOnOp('/c1/end') });
    await conversation(h);
    const knownHead = await h.store.nextSeq(h.id);

    await expect(h.compact({ compactionId: 'c1', knownHead })).rejects.toThrow(/injected append failure/);
    expect((await h.events()).slice(knownHead).map((e) => e.type)).toEqual([
      'compaction/start',
      'compaction/summary',
      'user/message',
    ]);
    expect(h.model.requests).toHaveLength(1);

    const done = await h.compact({ compactionId: 'c1', knownHead }, { attempt: 2 });

    expect(h.model.requests).toHaveLength(1);
    const added = (await h.events()).slice(knownHead);
    expect(added.map((e) => e.type)).toEqual([
      'compaction/start',
      'compaction/summary',
      'user/message',
      'compaction/end',
    ]);
    expect((added[3] as SessionEvent<'compaction/end'>).data.error).toBeUndefined();
    expect(done.result?.shadowedSeqs).toEqual((added[1] as SessionEvent<'compaction/summary'>).data.shadowedSeqs);
  });

  it('a retry after the commit batch failed asks the summarizer again and commits exactly once', async () => {
    const h = await harness({ wrapStore: failOnceOnOp('/c1/commit') });
    await conversation(h);
    const knownHead = await h.store.nextSeq(h.id);

    await expect(h.compact({ compactionId: 'c1', knownHead })).rejects.toThrow(/injected append failure/);
    expect((await h.events()).slice(knownHead).map((e) => e.type)).toEqual(['compaction/start']);

    const done = await h.compact({ compactionId: 'c1', knownHead }, { attempt: 2 });

    expect(done.result?.compactionId).toBe('c1');
    expect(h.model.requests).toHaveLength(2);
    expect((await h.events()).slice(knownHead).map((e) => e.type)).toEqual([
      'compaction/start',
      'compaction/summary',
      'user/message',
      'compaction/end',
    ]);
  });

  it('a retry of a finished bracket returns the same result and appends nothing', async () => {
    const h = await harness();
    await conversation(h);
    const knownHead = await h.store.nextSeq(h.id);
    const first = await h.compact({ compactionId: 'c1', knownHead });
    const events = await h.events();

    const again = await h.compact({ compactionId: 'c1', knownHead }, { attempt: 2 });

    expect(again).toEqual(first);
    expect(await h.events()).toEqual(events);
    expect(h.model.requests).toHaveLength(1);
  });

  it('a retry of a bracket closed with an error returns that error and appends nothing', async () => {
    const h = await harness({ replies: [new Error('provider down'), SUMMARY] });
    await conversation(h);
    const knownHead = await h.store.nextSeq(h.id);
    const first = await h.compact({ compactionId: 'c1', knownHead });
    const events = await h.events();

    const again = await h.compact({ compactionId: 'c1', knownHead }, { attempt: 2 });

    expect(again.result).toBeNull();
    expect(again.error).toBe(first.error);
    expect(await h.events()).toEqual(events);
    expect(h.model.requests).toHaveLength(1);
  });
});

describe('the fenced log writer', () => {
  it('an activity of a superseded run appends nothing once a later session/run names another run', async () => {
    const h = await harness();
    await conversation(h);
    await h.seed([runEvent('run-2')], 'takeover', 'run-2');
    const before = await h.events();

    await expect(h.compact({ compactionId: 'c1', runId: RUN })).rejects.toMatchObject({
      nonRetryable: true,
      type: 'LOG_AHEAD',
    });

    expect(await h.events()).toEqual(before);
  });
});
