/**
 * Compaction that forgets nothing the agent can't get back, and that learns from the provider
 * (issue: recall, learned limits, breaker), on the real stack: the recall tools find facts a
 * summary replaced; a window the provider states in its refusal is learned once and holds
 * across restarts; a compaction that cannot restore headroom trips a breaker read from the log.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { COMPACTION_INSTRUCTION } from '../../src/context/compaction.js';
import type { FakeChatRequest } from '../../src/model/fake-server.js';
import type { SessionEvent, StoredEvent } from '../../src/session/index.js';
import { startStack, type Stack } from '../support/stack.js';

const isSummarizer = (request: FakeChatRequest) => request.lastUserText === COMPACTION_INSTRUCTION;
const ofType = <K extends SessionEvent['type']>(events: readonly StoredEvent[], type: K) =>
  events.filter((e) => e.type === type) as Array<SessionEvent<K>>;
const filler = (n: number, tag: string) =>
  Array.from({ length: n }, (_, i) => `${tag} note ${i}: the weather was mild and the meeting ran long`).join('. ');

describe('recall after compaction', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({
      worker: { context: { policy: { budgetTokens: 2_500, thresholdRatio: 0.8, retainRatio: 0.1 }, pruner: false } },
    });
  });
  afterAll(async () => {
    await stack?.close();
  });

  it('search_history finds a fact only the shadowed range holds, with its seq, and read_history returns the original events byte for byte', async () => {
    const id = `recall-${Date.now()}`;
    const other = `recall-other-${Date.now()}`;
    stack.fake.setMatcher((request) => {
      if (isSummarizer(request)) return { text: '## Goal\n- chatting about meetings\n## Facts\n- (none)' };
      const last = request.body.messages.at(-1)!;
      if (last.role === 'tool') return { text: `found: ${String(last.content).slice(0, 400)}` };
      if (request.lastUserText.startsWith('what was the launch code'))
        return { text: 'let me look', toolCalls: [{ name: 'search_history', arguments: { query: 'launch code' } }] };
      if (request.lastUserText.startsWith('read seq')) {
        const seq = Number(request.lastUserText.split(' ')[2]);
        return { text: 'reading', toolCalls: [{ name: 'read_history', arguments: { fromSeq: seq, toSeq: seq } }] };
      }
      return { text: `ok ${'r'.repeat(300)}` };
    });
    await stack.client.send(other, 'the other session knows the word PELICAN-SECRET');
    await stack.client.send(id, 'remember this: the launch code is ZEBRA-4471');
    // Enough talk for two compactions to shadow the first turn.
    for (let turn = 0; turn < 14; turn++) await stack.client.send(id, filler(6, `turn ${turn}`));
    let events = await stack.client.events(id);
    expect(ofType(events, 'compaction/summary').length).toBeGreaterThanOrEqual(2);
    const fact = ofType(events, 'user/message').find((e) => JSON.stringify(e.data).includes('ZEBRA-4471'))!;
    const session = await stack.store.session(id);
    expect(session.surfaceNodes.includes(fact.seq)).toBe(false);
    expect(JSON.stringify(await stack.client.history(id))).not.toContain('ZEBRA-4471');

    const recalled = await stack.client.send(id, 'what was the launch code?');
    expect(recalled.outcome).toBe('completed');
    events = await stack.client.events(id);
    const search = ofType(events, 'tool/result').at(-1)!;
    const found = search.data.message.content[0].content.map((b) => (b.type === 'text' ? b.text : '')).join('');
    expect(found).toContain('ZEBRA-4471');
    expect(found).toContain(`seq ${fact.seq}`);
    expect(found).toContain('replaced by a summary');
    expect(recalled.text).toContain('ZEBRA-4471');

    await stack.client.send(id, `read seq ${fact.seq}`);
    events = await stack.client.events(id);
    const read = ofType(events, 'tool/result').at(-1)!;
    const text = read.data.message.content[0].content.map((b) => (b.type === 'text' ? b.text : '')).join('');
    expect(text.split('\n')[0]).toBe(JSON.stringify(events[fact.seq]));

    // The other session's words are never found from this one.
    stack.fake.setMatcher((request) =>
      isSummarizer(request)
        ? { text: '## Goal\n- x' }
        : request.body.messages.at(-1)!.role === 'tool'
          ? { text: 'searched' }
          : { text: 'looking', toolCalls: [{ name: 'search_history', arguments: { query: 'PELICAN-SECRET' } }] },
    );
    await stack.client.send(id, 'search for the pelican');
    const foreign = ofType(await stack.client.events(id), 'tool/result').at(-1)!;
    // (This session's own mentions of the pelican may match; the other session's message never does.)
    expect(JSON.stringify(foreign.data)).not.toContain('other session knows');
  }, 180_000);
});

describe('learned limits', () => {
  const LIMIT = 2_500;
  let stack: Stack;
  beforeAll(async () => {
    // The catalogue says the fake model has a 128K window: only the provider's refusal tells the truth.
    stack = await startStack({ fake: { contextLimitTokens: LIMIT }, worker: { context: { pruner: false } } });
  });
  afterAll(async () => {
    await stack?.close();
  });

  it('over 30 turns one overflow refusal is learned as model/limit, every later request stays under it, across a worker restart and a new run', async () => {
    const id = `limits-${Date.now()}`;
    stack.fake.setMatcher((request) =>
      isSummarizer(request)
        ? { text: '## Goal\n- a long chat\n## Facts\n- (none)' }
        : { text: `reply ${'w'.repeat(250)}` },
    );
    const main = () =>
      stack.fake
        .requests()
        .filter(
          (r) =>
            r.path === '/v1/chat/completions' && !JSON.stringify(r.body).includes(COMPACTION_INSTRUCTION.slice(0, 60)),
        );
    const before = main().length;
    for (let turn = 1; turn <= 30; turn++) {
      if (turn === 11) await stack.restartWorker();
      if (turn === 21) {
        // A new run from the log alone: the limit comes back from model/limit.
        await stack.temporal.workflow.getHandle(`session/${id}`).terminate('test: new run');
        await stack.client.resume(id);
      }
      const reply = await stack.client.send(id, `turn ${turn}: ${filler(3, `t${turn}`)}`);
      expect(reply.outcome, `turn ${turn}`).toBe('completed');
    }
    const requests = main().slice(before);
    const refused = requests.filter((r) => r.status === 400);
    expect(refused).toHaveLength(1);
    const events = await stack.client.events(id);
    expect(ofType(events, 'model/limit').map((e) => e.data)).toEqual([
      { model: 'fake', contextWindow: LIMIT, source: 'provider-message' },
    ]);
    // Compaction kept the session under the learned limit from then on.
    expect(ofType(events, 'compaction/summary').length).toBeGreaterThan(0);
  }, 300_000);
});

describe('the compaction breaker', () => {
  const SYSTEM = `You are a meticulous assistant. ${filler(60, 'policy')}`;
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({
      worker: {
        agent: { model: 'fake', system: SYSTEM, tools: [] },
        // A soft budget below the system prompt; the model's window is far larger.
        context: { policy: { budgetTokens: 1_000 }, pruner: false },
      },
    });
  });
  afterAll(async () => {
    await stack?.close();
  });

  it('logs one compaction/stalled when the system prompt alone exceeds the budget, calls no summarizer, answers all the same, holds across a restart until the request has grown, then climbs again', async () => {
    const id = `breaker-${Date.now()}`;
    let summaries = 0;
    stack.fake.setMatcher((request) => {
      if (isSummarizer(request)) {
        summaries += 1;
        return { text: '## Goal\n- short' };
      }
      return { text: 'ok' };
    });
    // The request fits the window: a stall is no reason to refuse the turn.
    const first = await stack.client.send(id, 'hello');
    expect(first.outcome).toBe('completed');
    let events = await stack.client.events(id);
    const [stall] = ofType(events, 'compaction/stalled');
    expect(ofType(events, 'compaction/stalled')).toHaveLength(1);
    expect(stall!.data.budget).toBe(1_000);
    expect(stall!.data.irreducible).toBeGreaterThan(stall!.data.threshold);
    expect(stall!.data.reason).toMatch(/above its target of \d+/);
    expect(summaries).toBe(0);

    // A restarted worker reads the breaker from the log: a little growth does not make it climb again.
    await stack.restartWorker();
    expect((await stack.client.send(id, 'still there?')).outcome).toBe('completed');
    events = await stack.client.events(id);
    expect(ofType(events, 'compaction/stalled')).toHaveLength(1);
    expect(ofType(events, 'compaction/start')).toHaveLength(0);

    // Growth past the headroom a compaction must win: the ladder climbs again and summarises what it can.
    for (let turn = 0; turn < 12 && summaries === 0; turn++)
      expect((await stack.client.send(id, filler(5, `more ${turn}`))).outcome).toBe('completed');
    expect(summaries).toBeGreaterThan(0);
    events = await stack.client.events(id);
    expect(ofType(events, 'compaction/summary').length).toBeGreaterThan(0);
    expect(ofType(events, 'compaction/stalled').length).toBeGreaterThan(1);
  }, 300_000);
});

describe('a request that cannot fit the window', () => {
  const SYSTEM = `You are a meticulous assistant. ${filler(60, 'policy')}`;
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({
      // The provider's window is smaller than the system prompt alone.
      fake: { contextLimitTokens: 500 },
      worker: { agent: { model: 'fake', system: SYSTEM, tools: [] }, context: { pruner: false } },
    });
  });
  afterAll(async () => {
    await stack?.close();
  });

  it('ends the turn with context_overflow naming the system prompt and the excess, refuses nothing more at the provider, and takes the next message', async () => {
    const id = `too-large-${Date.now()}`;
    const first = await stack.client.send(id, 'hello');
    expect(first.outcome).toBe('error');
    const events = await stack.client.events(id);
    const end = ofType(events, 'turn/end').at(-1)!;
    expect(end.data.reason).toMatchObject({ kind: 'error', error: { code: 'context_overflow' } });
    const message = (end.data.reason as { error: { message: string } }).error.message;
    expect(message).toMatch(/over the 500-token context window \(as the provider stated it\)/);
    expect(message).toMatch(/the largest is the system prompt \(\d+\)/);

    // The next message is taken (a new turn), and fails the same way without asking the provider again.
    const refusedBefore = stack.fake.requests().filter((r) => r.status === 400).length;
    const second = await stack.client.send(id, 'and now?');
    expect(second.outcome).toBe('error');
    expect(second.turn).toBe(first.turn + 1);
    expect(stack.fake.requests().filter((r) => r.status === 400).length).toBe(refusedBefore);
    expect(refusedBefore).toBe(1);
  }, 120_000);
});
