/**
 * The inspector (`/ui`) in a real headless Chromium, against the real gateway, a Temporal dev
 * server, a worker and the fake model: the sessions list, a session's turns, tokens streaming
 * into the page, a compacted session's bracket and plot, spilled output paged from its
 * artifact, and the bearer-token flow with its signed stream token. Every page must log no
 * console error and request nothing from any host but the gateway.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { COMPACTION_INSTRUCTION } from '../../src/context/compaction.js';
import { startGateway, type RunningGateway } from '../../src/gateway/index.js';
import type { FakeChatRequest } from '../../src/model/fake-server.js';
import { textOf, type ContextReport, type SessionEvent, type StoredEvent } from '../../src/session/index.js';
import { BUILTIN_TOOLS } from '../../src/tools/builtin.js';
import { ToolRegistry, type Tool } from '../../src/tools/registry.js';
import { request } from '../gateway/http.js';
import { startStack, type Stack } from '../support/stack.js';
import {
  ensureChromium,
  launchChromium,
  openWatchedPage,
  type DomElement,
  type PageGlobals,
  type WatchedPage,
} from './browser.js';

const TOKEN = 'inspector-test-token-0123456789';
const ARTIFACTS = join(new URL('../..', import.meta.url).pathname, '.tmp', 'inspector');

/** A tool that returns `size` characters of numbered lines. */
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

const isCompactionRequest = (r: FakeChatRequest) => r.lastUserText === COMPACTION_INSTRUCTION;
const ofType = <K extends SessionEvent['type']>(events: readonly StoredEvent[], type: K) =>
  events.filter((e) => e.type === type) as Array<SessionEvent<K>>;

let stack: Stack;
let gateway: RunningGateway;
let guarded: RunningGateway;
let browser: Browser;
const pages: WatchedPage[] = [];
let counter = 0;
const newId = (name: string) => `ui-${name}-${Date.now()}-${counter++}`;

beforeAll(async () => {
  browser = await launchChromium(ensureChromium());
  stack = await startStack({
    worker: {
      tools: new ToolRegistry([...BUILTIN_TOOLS, dumpTool]),
      agent: { model: 'fake', system: 'You are a test assistant.', tools: ['read_artifact', 'dump'] },
      spillMaxInlineBytes: 6_000,
      context: {
        policy: { budgetTokens: 6_000, thresholdRatio: 0.8, retainRatio: 0.3 },
        pruner: { thresholdChars: 3_000, headChars: 1_000, tailChars: 500 },
      },
    },
  });
  const options = { client: stack.client, host: '127.0.0.1', port: 0, bodyLimitBytes: 1 << 20 };
  gateway = await startGateway(options);
  guarded = await startGateway({ ...options, token: TOKEN });
  mkdirSync(ARTIFACTS, { recursive: true });
}, 20 * 60_000);

afterAll(async () => {
  await browser?.close();
  await guarded?.close();
  await gateway?.close();
  await stack?.close();
});

beforeEach(() => {
  stack.fake.reset();
  stack.fake.configure({ tokenDelayMs: 0, firstTokenDelayMs: 0 });
});

afterEach(async () => {
  // Every page of the test: no console error, no request beyond the gateway.
  const opened = pages.splice(0);
  for (const watched of opened) {
    expect(watched.consoleErrors).toEqual([]);
    const origins = new Set([new URL(gateway.url).origin, new URL(guarded.url).origin]);
    expect(watched.requests.length).toBeGreaterThan(0);
    expect(watched.requests.map((r) => r.url).filter((url) => !origins.has(new URL(url).origin))).toEqual([]);
    await watched.close();
  }
});

async function openPage(): Promise<WatchedPage> {
  const watched = await openWatchedPage(browser);
  pages.push(watched);
  return watched;
}

const api = (method: string, path: string, json?: unknown) =>
  request(gateway.url, method, path, json === undefined ? {} : { json });

describe('the sessions list', () => {
  it('shows sessions created through the API with their turns, filters by id, and opens one on its turns', async () => {
    const busy = newId('list-busy');
    const quiet = newId('list-quiet');
    expect((await api('POST', '/v1/sessions', { id: busy })).status).toBe(201);
    expect((await api('POST', '/v1/sessions', { id: quiet })).status).toBe(201);
    expect(
      (await api('POST', `/v1/sessions/${busy}/messages?wait=true`, { text: 'hello inspector' })).body,
    ).toMatchObject({ text: 'echo: hello inspector' });

    const { page } = await openPage();
    await page.goto(`${gateway.url}/ui/`);
    const busyRow = page.locator(`[data-testid=session-row][data-session-id="${busy}"]`);
    const quietRow = page.locator(`[data-testid=session-row][data-session-id="${quiet}"]`);
    await busyRow.waitFor();
    await quietRow.waitFor();
    const events = await stack.store.readFrom(busy, 0);
    await expect.poll(() => busyRow.locator('[data-field=turns]').textContent()).toBe('1');
    await expect.poll(() => busyRow.locator('[data-field=events]').textContent()).toBe(String(events.length));
    await expect.poll(() => busyRow.locator('[data-field=phase]').textContent()).toContain('idle');
    // An idle session reads "idle" once, not the derived phase and the workflow's beside it.
    await expect
      .poll(async () => ((await busyRow.locator('[data-field=phase]').textContent()) ?? '').replace(/\s+/g, ' ').trim())
      .toBe('idle');
    // The page's placeholder is gone once the app has rendered.
    expect(await page.getByText('Loading the inspector…').count()).toBe(0);
    expect(await page.locator('#app > .loading').count()).toBe(0);
    await expect.poll(() => quietRow.locator('[data-field=turns]').textContent()).toBe('0');

    await page.locator('[data-testid=filter]').fill(busy);
    await expect.poll(() => page.locator('[data-testid=session-row]').count()).toBe(1);
    expect(await busyRow.count()).toBe(1);

    await busyRow.locator('a').first().click();
    const turn = page.locator('[data-testid=turn][data-turn="1"]');
    await turn.waitFor();
    expect(page.url()).toBe(`${gateway.url}/ui/#/sessions/${busy}`);
    expect(await turn.getAttribute('data-outcome')).toBe('completed');
    expect(await turn.locator('[data-testid=user-message] .text').textContent()).toBe('hello inspector');
    expect(await page.getByText('Loading the inspector…').count()).toBe(0);
    expect(await turn.locator('[data-testid=reply-text]').textContent()).toBe('echo: hello inspector');
  });
});

describe('one session', () => {
  it('lists the branches an edit and a regeneration made, and opens one, which names its parent', async () => {
    const id = newId('branches');
    expect((await api('POST', '/v1/sessions', { id })).status).toBe(201);
    await api('POST', `/v1/sessions/${id}/messages?wait=true`, { text: 'first question' });
    const seq = (await stack.store.readFrom(id, 0)).find((e) => e.type === 'user/message')!.seq;
    const edited = await api('POST', `/v1/sessions/${id}/edit`, { seq, text: 'first question, edited', id: `${id}-e` });
    expect(edited.status).toBe(201);
    const regenerated = await api('POST', `/v1/sessions/${id}/regenerate`, { id: `${id}-r` });
    expect(regenerated.status).toBe(201);

    const { page } = await openPage();
    await page.goto(`${gateway.url}/ui/#/sessions/${id}`);
    const branches = page.locator('[data-testid=branches] a');
    await expect.poll(() => branches.allTextContents()).toEqual([`${id}-e`, `${id}-r`]);
    await page.locator(`[data-branch="${id}-e"]`).click();
    await page.locator('[data-testid=turn][data-turn="1"]').waitFor();
    expect(page.url()).toBe(`${gateway.url}/ui/#/sessions/${id}-e`);
    await expect
      .poll(() => page.locator('[data-testid=turn][data-turn="1"] [data-testid=user-message] .text').textContent())
      .toBe('first question, edited');
    expect(await page.locator('.facts').textContent()).toContain(`fork of${id}`);
  });

  it('streams a posted message into the page token by token, and ends with the logged reply', async () => {
    const id = newId('stream');
    await api('POST', '/v1/sessions', { id });
    const { page } = await openPage();
    await page.goto(`${gateway.url}/ui/#/sessions/${id}`);
    await page.locator('[data-testid=stream-state]', { hasText: 'live' }).waitFor();

    // Record every text the open reply shows, as the page renders it.
    await page.evaluate(() => {
      const g = globalThis as unknown as PageGlobals;
      const seen: NonNullable<PageGlobals['seenReplies']> = [];
      g.seenReplies = seen;
      new g.MutationObserver(() => {
        const reply = g.document.querySelector('[data-testid=reply][data-turn="1"]');
        const text = reply?.querySelector('[data-testid=reply-text]')?.textContent;
        if (reply && text !== undefined && text !== null && seen.at(-1)?.text !== text)
          seen.push({ text, streaming: reply.dataset.streaming });
      }).observe(g.document.body, { subtree: true, childList: true, characterData: true, attributes: true });
    });
    const words = Array.from({ length: 40 }, (_, i) => `word${i}`).join(' ');
    stack.fake.enqueueReplies({ text: words });
    stack.fake.configure({ tokenDelayMs: 60 });
    expect((await api('POST', `/v1/sessions/${id}/messages`, { text: 'tell me forty words' })).status).toBe(202);

    // The first tokens are on the page while the turn is still open in the log.
    const reply = page.locator('[data-testid=reply][data-turn="1"]');
    await page.waitForFunction(() => {
      const el = (globalThis as unknown as PageGlobals).document.querySelector('[data-testid=reply][data-turn="1"]');
      return (
        el?.dataset.streaming === 'true' && (el.querySelector('[data-testid=reply-text]')?.textContent ?? '').length > 0
      );
    });
    const partial = (await reply.locator('[data-testid=reply-text]').textContent())!;
    expect((await stack.store.readFrom(id, 0)).some((e) => e.type === 'turn/end')).toBe(false);
    expect(partial.length).toBeLessThan(words.length);
    expect(words.startsWith(partial)).toBe(true);

    await page.locator('[data-testid=reply][data-turn="1"][data-streaming=false]').waitFor();
    const logged = ofType(await stack.store.readFrom(id, 0), 'assistant/message').at(-1)!;
    const finalText = await reply.locator('[data-testid=reply-text]').textContent();
    expect(finalText).toBe(textOf(logged.data.message.content));
    expect(finalText).toBe(words);

    // The text grew in steps, each a prefix of the reply, before it was complete.
    const seen = (await page.evaluate(() => (globalThis as unknown as PageGlobals).seenReplies)) ?? [];
    const growing = seen.filter((s) => s.streaming === 'true').map((s) => s.text);
    expect(new Set(growing.filter((text) => text.length < words.length)).size).toBeGreaterThanOrEqual(3);
    for (let i = 0; i < growing.length; i++) {
      expect(words.startsWith(growing[i]!)).toBe(true);
      if (i > 0) expect(growing[i]!.length).toBeGreaterThan(growing[i - 1]!.length);
    }
    // The new events reached the log panel as they were appended, chunks folded into the reply.
    await page.locator(`[data-testid=log-event][data-seq="${logged.seq}"]`).waitFor();
    expect(await page.locator(`[data-testid=log-chunks]`, { hasText: `folded into #${logged.seq}` }).count()).toBe(1);
  });

  it('shows a compacted session: the bracket, the shadowed seqs greyed, the summary, the originals on a toggle, and the plot with one point per request and the compaction marked', async () => {
    const id = newId('compacted');
    let dumpSize = 5_000;
    stack.fake.setMatcher((r) => {
      if (isCompactionRequest(r)) return { text: '## Primary request\n- the user asked for dumps' };
      const last = r.body.messages.at(-1)!;
      if (dumpSize > 0 && last.role === 'user')
        return { text: 'dumping', toolCalls: [{ name: 'dump', arguments: { size: dumpSize } }] };
      if (last.role === 'tool')
        return {
          text: `Done: the dump has 120 lines. ${'Nothing new failed since the last run; the warnings are the same as before. '.repeat(5)}`,
        };
      return undefined;
    });
    // Turns until a compaction closed, then one more so the plot shows a request after it.
    let events: StoredEvent[] = [];
    for (let turn = 1; turn <= 10 && !events.some((e) => e.type === 'compaction/end'); turn++) {
      await stack.client.send(
        id,
        `turn ${turn}: dump please. ${'Show me the whole build log of the service again, with every warning, so I can compare it with the previous run. '.repeat(6)}`,
      );
      events = await stack.store.readFrom(id, 0);
    }
    dumpSize = 0;
    await stack.client.send(id, 'thanks, that is all');
    events = await stack.store.readFrom(id, 0);
    const summary = ofType(events, 'compaction/summary')[0]!;
    expect(summary).toBeDefined();
    const start = ofType(events, 'compaction/start').find((e) => e.data.compactionId === summary.data.compactionId)!;
    const shadowedSeqs = summary.data.shadowedSeqs;
    const replies = ofType(events, 'assistant/message');
    const modelRequests = stack.fake
      .chatRequests()
      .filter((r) => (r.messages.at(-1) as { content?: unknown }).content !== COMPACTION_INSTRUCTION);
    expect(replies.length).toBe(modelRequests.length);

    const { page } = await openPage();
    await page.goto(`${gateway.url}/ui/#/sessions/${id}`);
    const bracket = page.locator(`[data-testid=bracket][data-compaction-id="${summary.data.compactionId}"]`);
    await bracket.waitFor();
    expect(await bracket.getAttribute('data-trigger')).toBe(start.data.trigger);
    const shownSeqs = await bracket
      .locator('[data-testid=log-event]')
      .evaluateAll((rows) => rows.map((r) => Number((r as unknown as DomElement).dataset.seq)));
    const end = ofType(events, 'compaction/end').find((e) => e.data.compactionId === summary.data.compactionId)!;
    expect(shownSeqs).toEqual(events.filter((e) => e.seq >= start.seq && e.seq <= end.seq).map((e) => e.seq));
    expect(await bracket.locator('[data-testid=bracket-shadowed]').textContent()).toContain(
      `shadows ${shadowedSeqs.length} events`,
    );

    // Each shadowed seq is drawn greyed, marked as summarized by the checkpoint.
    const checkpointSeq = summary.seq + 1;
    for (const seq of shadowedSeqs) {
      const row = page.locator(`[data-testid=log-event][data-seq="${seq}"]`);
      expect(await row.getAttribute('data-state')).toBe('summary');
      expect(await row.textContent()).toContain(`summarized → #${checkpointSeq}`);
      expect(await row.evaluate((el) => (globalThis as unknown as PageGlobals).getComputedStyle(el).color)).toBe(
        'rgb(154, 161, 171)',
      );
    }
    expect(await page.locator(`[data-testid=log-event][data-seq="${checkpointSeq}"]`).getAttribute('data-state')).toBe(
      'surface',
    );
    // The next request opens with the summary.
    const first = page.locator('[data-testid=next-message]').first();
    expect(await first.getAttribute('data-kind')).toBe('summary');
    expect(await first.getAttribute('data-seq')).toBe(String(checkpointSeq));
    expect(await first.locator('.text').textContent()).toContain('the user asked for dumps');
    const history = await stack.client.history(id);
    expect(await page.locator('[data-testid=next-message]').count()).toBe(history.length);

    // Toggling the summary shows the originals it replaced.
    expect(await bracket.locator('[data-testid=originals]').count()).toBe(0);
    await bracket.locator('[data-testid=toggle-originals]').click();
    const originals = bracket.locator('[data-testid=originals] .original');
    await originals.first().waitFor();
    expect(
      await originals.evaluateAll((rows) => rows.map((r) => Number((r as unknown as DomElement).dataset.seq))),
    ).toEqual(shadowedSeqs);
    expect(await bracket.locator('[data-testid=originals]').textContent()).toContain('turn 1: dump please');
    await bracket.locator('[data-testid=toggle-originals]').click();
    await expect.poll(() => bracket.locator('[data-testid=originals]').count()).toBe(0);

    // The plot: one point per model request, the compaction marked where it happened.
    const plot = page.locator('[data-testid=plot]');
    expect(await plot.getAttribute('data-points')).toBe(String(modelRequests.length));
    expect(await page.locator('[data-testid=plot-points] tbody tr').count()).toBe(modelRequests.length);
    const requestsBefore = replies.filter((r) => r.seq < start.seq).length;
    const marks = await page.locator('[data-testid=plot-marks] li').evaluateAll((items) =>
      items.map((i) => ({
        kind: (i as unknown as DomElement).dataset.kind,
        after: Number((i as unknown as DomElement).dataset.after),
      })),
    );
    expect(marks).toContainEqual({
      kind: start.data.trigger === 'context-overflow' ? 'overflow' : 'compaction',
      after: requestsBefore,
    });
    expect(await page.locator('[data-testid=plot] canvas').count()).toBeGreaterThan(0);

    await page.evaluate(() => (globalThis as unknown as PageGlobals).scrollTo(0, 0));
    await page.screenshot({ path: join(ARTIFACTS, 'session.png'), fullPage: false });
  });

  it('shows a spilled tool result as its preview and pages the full output from its artifact', async () => {
    const id = newId('spill');
    stack.fake.setMatcher((r) =>
      r.body.messages.at(-1)!.role === 'user'
        ? { text: 'dumping', toolCalls: [{ name: 'dump', arguments: { size: 30_000 } }] }
        : { text: 'dumped' },
    );
    await stack.client.send(id, 'dump something huge');
    const result = ofType(await stack.store.readFrom(id, 0), 'tool/result')[0]!;
    const locator = (result.data.meta as { locator: string }).locator;
    const full = await stack.store.artifacts.get(id, locator);

    const { page } = await openPage();
    await page.goto(`${gateway.url}/ui/#/sessions/${id}`);
    const shown = page.locator(`[data-testid=tool-result][data-seq="${result.seq}"]`);
    await shown.waitFor();
    expect(await shown.getAttribute('data-spilled')).toBe('true');
    expect(await shown.locator('pre').textContent()).toContain(`Full result stored at: ${locator}`);
    await shown.locator('[data-testid=artifact-link]').click();
    const viewer = page.locator('[data-testid=artifact-viewer]');
    await viewer.locator('[data-testid=artifact-range]', { hasText: 'of 30,000' }).waitFor();
    expect(await viewer.locator('[data-testid=artifact-text]').textContent()).toBe(full.slice(0, 20_000));
    await viewer.locator('[data-testid=artifact-next]').click();
    await viewer.locator('[data-testid=artifact-range]', { hasText: '20,000–30,000' }).waitFor();
    expect(await viewer.locator('[data-testid=artifact-text]').textContent()).toBe(full.slice(20_000));
  });
});

describe('the context breakdown', () => {
  it("draws GET /context: tokens by kind against budget and window, the compaction point, and each next message's tokens", async () => {
    const id = newId('context');
    await api('POST', '/v1/sessions', { id });
    expect(
      (await api('POST', `/v1/sessions/${id}/messages?wait=true`, { text: 'how big is my context?' })).status,
    ).toBe(200);
    const context = ((await api('GET', `/v1/sessions/${id}/context`)).body as { context: ContextReport }).context;
    expect(context.budget).toBe(6_000);
    expect(context.messages.length).toBeGreaterThan(0);

    const { page } = await openPage();
    await page.goto(`${gateway.url}/ui/#/sessions/${id}`);
    const breakdown = page.locator('[data-testid=context-breakdown]');
    await breakdown.waitFor();
    expect(await breakdown.textContent()).toContain(`compacts at ${context.compactAt.toLocaleString('en-US')}`);
    expect(await breakdown.locator('.kinds li').count()).toBe(6);
    expect(await page.locator('[data-testid=message-tokens]').allTextContents()).toEqual(
      context.messages.map((m) => `${m.tokens} tok`),
    );
    expect(await page.locator('[data-testid=next-request-totals]').textContent()).toContain(
      `${context.tokens.total.toLocaleString('en-US')} tokens · budget 6,000`,
    );
  });
});

describe('the context pressure plot', () => {
  it('gives the y axis room for its longest label (a 1M-token budget draws "1,200,000")', async () => {
    const { page } = await openPage();
    await page.goto(`${gateway.url}/ui/`);
    await page.locator('#app').waitFor();
    // Page code as text: the modules are the page's own (the import map resolves preact and uPlot).
    const measured = (await page.evaluate(`(async () => {
      const { render } = await import('preact');
      const { html } = await import('/ui/format.js');
      const { ContextPlot } = await import('/ui/plot.js');
      const host = document.createElement('div');
      host.style.width = '640px';
      document.body.append(host);
      const requests = [1, 2, 3].map((index) => ({ index, promptTokens: 900000 + index * 100000, seq: index }));
      render(html\`<\${ContextPlot} requests=\${requests} actions=\${[]} budget=\${{ value: 1000000, approximate: false }} window=\${1048576} />\`, host);
      await new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve)));
      const over = host.querySelector('.u-over');
      // The longest label uPlot can draw on this scale, in uPlot's default axis font.
      const canvas = document.createElement('canvas').getContext('2d');
      canvas.font = '12px system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, "Noto Sans", sans-serif, "Apple Color Emoji", "Segoe UI Emoji", "Segoe UI Symbol", "Noto Color Emoji"';
      return { plotLeft: over.offsetLeft, labelWidth: canvas.measureText('1,400,000').width };
    })()`)) as { plotLeft: number; labelWidth: number };
    // Tick (10) and gap (5) beside the label, all left of the plotting area.
    expect(measured.plotLeft).toBeGreaterThanOrEqual(Math.ceil(measured.labelWidth) + 15);
  });
});

describe('with a gateway token', () => {
  it('asks for the token, then works, and follows the live tail with a signed stream token', async () => {
    const id = newId('guarded');
    expect(
      (
        await request(guarded.url, 'POST', '/v1/sessions', {
          json: { id },
          headers: { authorization: `Bearer ${TOKEN}` },
        })
      ).status,
    ).toBe(201);

    const watched = await openPage();
    const { page } = watched;
    await page.goto(`${guarded.url}/ui/`);
    await page.locator('[data-testid=token-prompt]').waitFor();
    expect(await page.locator('[data-testid=sessions]').count()).toBe(0);
    // Before the token was given, the page asked /v1 for nothing.
    expect(watched.requests.filter((r) => new URL(r.url).pathname.startsWith('/v1/'))).toEqual([]);

    await page.locator('input[name=token]').fill(TOKEN);
    await page.locator('button[type=submit]').click();
    const row = page.locator(`[data-testid=session-row][data-session-id="${id}"]`);
    await row.waitFor();
    await row.locator('a').first().click();
    await page.locator('[data-testid=stream-state]', { hasText: 'live' }).waitFor();

    stack.fake.configure({ tokenDelayMs: 20 });
    const posted = await request(guarded.url, 'POST', `/v1/sessions/${id}/messages`, {
      json: { text: 'through the guarded gateway' },
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(posted.status).toBe(202);
    await page.locator('[data-testid=reply][data-turn="1"][data-streaming=false]').waitFor();
    expect(await page.locator('[data-testid=reply][data-turn="1"] [data-testid=reply-text]').textContent()).toBe(
      'echo: through the guarded gateway',
    );

    // Every /v1 call carried the bearer token, except the event stream, which used a stream token.
    const v1 = watched.requests.filter((r) => new URL(r.url).pathname.startsWith('/v1/'));
    const streams = v1.filter(
      (r) => new URL(r.url).pathname.endsWith('/events') && new URL(r.url).searchParams.has('streamToken'),
    );
    expect(streams.length).toBeGreaterThan(0);
    for (const stream of streams) expect(stream.headers.authorization).toBeUndefined();
    for (const call of v1.filter((r) => !streams.includes(r)))
      expect(call.headers.authorization).toBe(`Bearer ${TOKEN}`);
    // The token stays in this tab's session storage.
    expect(
      await page.evaluate(() => (globalThis as unknown as PageGlobals).sessionStorage.getItem('sessionlog.token')),
    ).toBe(TOKEN);
  });
});
