/**
 * Op keys carry the pass of a step (DESIGN §4.1, issue 8): after a provider's overflow refusal
 * the model step compacts and calls the model again (pass 1) within the same attempt, under keys
 * of its own, so an `llm/retry` that pass logs is not taken for pass 0's `llm/retry` and
 * silently dropped as "already written".
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { COMPACTION_INSTRUCTION } from '../../src/context/compaction.js';
import { verifyLog, type KnownEventType, type SessionEvent, type StoredEvent } from '../../src/session/index.js';
import { startStack, type Stack } from '../support/stack.js';

/**
 * The fake provider's context limit: turn 1 (about 1,200 tokens) fits under it, turn 2 (1,700
 * more) does not until turn 1 is summarised, and one summarizer request holds all of turn 1.
 */
const LIMIT = 3_000;
const words = (n: number, tag: string) => Array.from({ length: n }, (_, i) => `${tag}${i % 50}`).join(' ');

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({
    fake: { contextLimitTokens: LIMIT },
    // Only the provider's overflow refusal triggers compaction here (the catalogue window is far larger).
    // No tools: one summarizer request holds all of turn 1, so one summary makes room.
    worker: { context: { pruner: false }, agent: { model: 'fake', system: 'You are a test assistant.', tools: [] } },
  });
});
afterAll(async () => {
  await stack?.close();
});

const isSummarizer = (messages: readonly { content?: unknown }[]) =>
  messages.at(-1)?.content === COMPACTION_INSTRUCTION;
const ofType = <K extends KnownEventType>(events: readonly StoredEvent[], type: K) =>
  events.filter((e) => e.type === type) as Array<SessionEvent<K>>;

describe('op keys of a step re-entered after an overflow compaction', () => {
  it('pass 0 and pass 1 of one step that both hit a retryable failure log two llm/retry events under keys of their own', async () => {
    const id = `passes-${Date.now()}`;
    const first = await stack.client.send(id, words(300, 'a'));
    expect(first.outcome).toBe('completed');

    stack.fake.setMatcher((request) => {
      if (!isSummarizer(request.body.messages)) return undefined;
      // The step's second pass starts right after this summary: its first attempt gets a 429 too.
      stack.fake.injectFault({ kind: 'rate_limit', retryAfterSeconds: 1 });
      return { text: '## Summary\n- the user sent a long list of words' };
    });
    stack.fake.injectFault({ kind: 'rate_limit', retryAfterSeconds: 1 });
    const requestsBefore = stack.fake.chatRequests().length;
    const second = await stack.client.send(id, words(850, 'b'));
    expect(second.outcome).toBe('completed');
    expect(second.turn).toBe(2);

    // What the provider saw in turn 2: 429 (attempt 1), overflow (attempt 2, pass 0), the summary,
    // 429 (attempt 2, pass 1), the answer (attempt 3).
    const turn2 = stack.fake
      .requests()
      .filter((r) => r.path === '/v1/chat/completions')
      .slice(requestsBefore);
    expect(
      turn2.map((r) => [
        isSummarizer((r.body as { messages: { content?: unknown }[] }).messages) ? 'summary' : 'step',
        r.status,
      ]),
    ).toEqual([
      ['step', 429],
      ['step', 400],
      ['summary', 200],
      ['step', 429],
      ['step', 200],
    ]);

    const events = await stack.client.events(id);
    const retries = ofType(events, 'llm/retry').filter((e) => e.data.turn === 2);
    // Attempt 1 (pass 0) asks for attempt 2; attempt 2's pass 1 asks for attempt 3.
    expect(retries.map((e) => [e.data.step, e.data.attempt, e.data.failure.code])).toEqual([
      [1, 2, 'rate_limit'],
      [1, 3, 'rate_limit'],
    ]);
    expect(retries.map((e) => e.op!.split('/').slice(-3).join('/'))).toEqual(['p0/a1/retry', 'p1/a2/retry']);
    const summary = ofType(events, 'compaction/summary').at(-1)!;
    expect(retries[0]!.seq).toBeLessThan(summary.seq);
    expect(retries[1]!.seq).toBeGreaterThan(summary.seq);
    // The summary made room: the breaker did not trip (the recall tools' schemas count toward the request too).
    expect(ofType(events, 'compaction/stalled')).toEqual([]);
    expect(verifyLog(await stack.client.header(id), events)).toEqual([]);
  }, 120_000);
});
