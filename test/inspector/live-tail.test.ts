/**
 * The inspector's live tail in a real headless Chromium, against the real gateway, a Temporal
 * dev server, a worker and the fake model: with one session open, every known event type
 * (src/session/events.ts) is appended to its log, and the page hears each one on the stream and
 * ends holding exactly the log. The page takes its vocabulary from the gateway, so a type added
 * to the code reaches it without a second list; an event it cannot hear (a type missing from
 * what it was told) is read back over the JSON route instead of stopping the tail.
 */
import type { Browser } from 'playwright-core';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { COMPACTION_INSTRUCTION } from '../../src/context/compaction.js';
import { seedOp } from '../../src/engine/ops.js';
import { startGateway, type RunningGateway } from '../../src/gateway/index.js';
import { KNOWN_EVENT_TYPES, planFork, seedEventOf, type StoredEvent } from '../../src/session/index.js';
import { BUILTIN_TOOLS } from '../../src/tools/builtin.js';
import { ToolRegistry, type Tool } from '../../src/tools/registry.js';
import { waitForEvent } from '../support/log-wait.js';
import { startStack, type Stack } from '../support/stack.js';
import { ensureChromium, launchChromium, openWatchedPage, type DomElement, type WatchedPage } from './browser.js';

/** A tool that needs approval before it runs. */
const deployTool: Tool = {
  name: 'deploy',
  description: 'Deploys the service to a target.',
  parameters: { type: 'object', properties: { target: { type: 'string' } }, required: ['target'] },
  approval: 'always',
  run: async (args) => ({ text: `deployed to ${(args as { target: string }).target}` }),
};

/** A tool that returns `size` characters of numbered lines (large enough for the pruner). */
const dumpTool: Tool = {
  name: 'dump',
  description: 'Return a large text.',
  parameters: { type: 'object', properties: { size: { type: 'integer' } }, required: ['size'] },
  async run(args) {
    const size = (args as { size: number }).size;
    let text = '';
    for (let i = 0; text.length < size; i++) text += `line ${i}: ${'x'.repeat(40)}\n`;
    return { text: text.slice(0, size) };
  },
};

const BUDGET_TOKENS = 6_000;

let stack: Stack;
let gateway: RunningGateway;
let browser: Browser;
const pages: WatchedPage[] = [];
let counter = 0;
const newId = (name: string) => `tail-${name}-${Date.now()}-${counter++}`;

beforeAll(async () => {
  browser = await launchChromium(ensureChromium());
  stack = await startStack({
    worker: {
      tools: new ToolRegistry([...BUILTIN_TOOLS, deployTool, dumpTool]),
      agent: { model: 'fake', system: 'You are a test assistant.', tools: ['deploy', 'dump'] },
      context: {
        policy: { budgetTokens: BUDGET_TOKENS, thresholdRatio: 0.8, retainRatio: 0.3 },
        pruner: { thresholdChars: 3_000, headChars: 1_000, tailChars: 500 },
      },
    },
  });
  gateway = await startGateway({ client: stack.client, host: '127.0.0.1', port: 0, bodyLimitBytes: 1 << 20 });
}, 20 * 60_000);

afterAll(async () => {
  await browser?.close();
  await gateway?.close();
  await stack?.close();
});

beforeEach(() => {
  stack.fake.reset();
  stack.fake.configure({ tokenDelayMs: 0, firstTokenDelayMs: 0, contextLimitTokens: null });
});

afterEach(async () => {
  for (const watched of pages.splice(0)) {
    expect(watched.consoleErrors).toEqual([]);
    expect(watched.foreignRequests(gateway.url)).toEqual([]);
    await watched.close();
  }
});

async function openPage(): Promise<WatchedPage> {
  const watched = await openWatchedPage(browser);
  pages.push(watched);
  return watched;
}

/** The JSON reads of a missed range the page made (`/events?from=…&limit=…`). */
const gapReads = (watched: WatchedPage) =>
  watched.requests
    .map((r) => new URL(r.url))
    .filter((url) => url.pathname.endsWith('/events') && url.searchParams.has('limit'));

/** The event count the page shows equals the log's (polled until it does, or the poll times out). */
async function expectPageHoldsLog(watched: WatchedPage, id: string): Promise<StoredEvent[]> {
  const log = await stack.store.readFrom(id, 0);
  await expect
    .poll(() => watched.page.locator('[data-testid=event-count]').getAttribute('data-count'), { timeout: 20_000 })
    .toBe(String(log.length));
  return log;
}

/** The types of the log panel's rows at or after `fromSeq` (a folded run of chunks counts as `assistant/chunk`). */
async function typesShownFrom(watched: WatchedPage, fromSeq: number): Promise<string[]> {
  const rows = await watched.page.locator('[data-testid=log-event]').evaluateAll((els) =>
    els.map((el) => ({
      seq: Number((el as unknown as DomElement).dataset.seq),
      type: (el as unknown as DomElement).dataset.type,
    })),
  );
  const chunkRuns = await watched.page
    .locator('[data-testid=log-chunks]')
    .evaluateAll((els) => els.map((el) => Number((el as unknown as DomElement).dataset.from)));
  const types = new Set(rows.filter((r) => r.seq >= fromSeq).map((r) => r.type!));
  if (chunkRuns.some((from) => from >= fromSeq)) types.add('assistant/chunk');
  return [...types].sort();
}

describe('the live tail', () => {
  it('hears every known event type appended while the page is open, and ends holding exactly the log', async () => {
    // A parent to fork from: the child's seed (ending in session/end-seed) is its first live batch.
    const parent = newId('parent');
    await stack.client.create({ sessionId: parent });
    await stack.client.send(parent, 'hello parent');
    const id = newId('all');
    const parentLog = await stack.store.inspect(parent);
    const fork = planFork({ header: parentLog.header, events: parentLog.events }, id, Date.now());
    // The child's header first, as its own run creates it, so the page can open on the empty log.
    await stack.store.create(fork.header);

    const watched = await openPage();
    const { page } = watched;
    await page.goto(`${gateway.url}/ui/#/sessions/${id}`);
    await page.locator('[data-testid=stream-state]', { hasText: 'live' }).waitFor();
    expect(await page.locator('[data-testid=event-count]').getAttribute('data-count')).toBe('0');

    // The seed batch, as the child's run appends it (engine/seed.ts): the parent's prefix, then session/end-seed.
    await stack.store.append(id, [...fork.seed.map(seedEventOf), fork.endSeed!], { expectedSeq: 0, op: seedOp(id) });

    // session/run, session/metadata, session/budget: a run takes over, then the caller's settings.
    await stack.client.note(id, { metadata: { values: { ticket: 'OPS-1' } } });
    await stack.client.setBudget(id, { total: { tokens: 1 }, waitMs: 120_000 }, { by: 'ops' });

    // A turn: one rate-limited attempt (llm/retry), a reply calling a tool that needs approval,
    // a budget breach before the tool round, raised (session/budget), then the approval with
    // "allow for the rest of the session" (tool/approval, tool/allow), the result and the answer.
    stack.fake.injectFault({ kind: 'rate_limit', retryAfterSeconds: 1 });
    stack.fake.enqueueReplies(
      { text: 'Deploying now.', toolCalls: [{ id: 'call-deploy', name: 'deploy', arguments: { target: 'prod' } }] },
      { text: 'Deployed.' },
    );
    const deployed = stack.client.send(id, 'deploy to prod please');
    await waitForEvent(stack.client, id, (e) => e.type === 'budget/breach');
    await stack.client.setBudget(id, null, { by: 'ops' });
    await waitForEvent(stack.client, id, (e) => e.type === 'tool/approval-request');
    await stack.client.approve(id, 'call-deploy', { decision: 'approve', allowForSession: true, by: 'alice' });
    expect((await deployed).outcome).toBe('completed');

    // A large tool result the pruner can cut later.
    stack.fake.enqueueReplies(
      { text: 'Dumping.', toolCalls: [{ id: 'call-dump', name: 'dump', arguments: { size: 5_000 } }] },
      { text: 'Here is the dump.' },
    );
    expect((await stack.client.send(id, 'dump the build log')).outcome).toBe('completed');

    // Instructions larger than the compaction threshold on their own: the pressure ladder prunes
    // the old tool result (compaction/prune), summarises the history (compaction/start, summary,
    // end) and, since nothing it may touch shrinks the system prompt, stalls (compaction/stalled).
    stack.fake.setMatcher((request) =>
      request.lastUserText === COMPACTION_INSTRUCTION ? { text: '## Goal\n- deploy and dump' } : undefined,
    );
    const longSystem = `You are careful. ${'The quick brown fox jumps over the lazy dog near the river bank. '.repeat(500)}`;
    await stack.client.send(id, 'answer with the long instructions', { agent: { system: longSystem } });

    // A provider refusing a request over the window it states: the window is learned (model/limit),
    // and the turn ends for context, the instructions alone being over it.
    stack.fake.configure({ contextLimitTokens: 1_000 });
    const refused = await stack.client.send(id, 'one last question');
    expect(refused.outcome).toBe('error');
    stack.fake.configure({ contextLimitTokens: null });

    const log = await expectPageHoldsLog(watched, id);
    // Every known type was appended after the page opened (on an empty log), and reached it.
    expect([...new Set(log.map((e) => e.type))].sort()).toEqual([...KNOWN_EVENT_TYPES].sort());
    expect(await typesShownFrom(watched, 0)).toEqual([...KNOWN_EVENT_TYPES].sort());
    // Each came on the stream, by its name: the page never had to read a missed range back.
    expect(gapReads(watched)).toEqual([]);
    await expect.poll(() => page.locator('[data-testid=stream-state]').textContent()).toBe('● live');
  }, 180_000);

  it('reads back over the JSON route an event of a type it was not told of, and the tail goes on', async () => {
    const id = newId('gap');
    await stack.client.create({ sessionId: id });
    const watched = await openPage();
    const { page } = watched;
    // A page told one type fewer than the log holds (a newer writer's type): it cannot hear session/metadata.
    await page.route('**/ui/', async (route) => {
      const response = await route.fetch();
      const html = (await response.text()).replace(
        /(name="sessionlog-event-types" content="[^"]*)\bsession\/metadata\b/,
        '$1',
      );
      await route.fulfill({ response, body: html });
    });
    await page.goto(`${gateway.url}/ui/#/sessions/${id}`);
    await page.locator('[data-testid=stream-state]', { hasText: 'live' }).waitFor();
    const openedAt = (await stack.store.readFrom(id, 0)).length;

    await stack.client.note(id, { metadata: { values: { ticket: 'OPS-2' } } });
    expect((await stack.client.send(id, 'after the metadata')).outcome).toBe('completed');

    const log = await expectPageHoldsLog(watched, id);
    const metadata = log.find((e) => e.type === 'session/metadata')!;
    expect(metadata.seq).toBeGreaterThanOrEqual(openedAt);
    await page.locator(`[data-testid=log-event][data-seq="${metadata.seq}"][data-type="session/metadata"]`).waitFor();
    await page.locator('[data-testid=reply][data-turn="1"][data-streaming=false]').waitFor();
    // The missed event was read back once, from its own seq.
    expect(gapReads(watched).map((url) => url.searchParams.get('from'))).toEqual([String(metadata.seq)]);
  }, 120_000);
});
