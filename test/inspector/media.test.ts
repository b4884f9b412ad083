/**
 * The inspector's media (issue 50, "the inspector shows thumbnails") in a real headless Chromium,
 * against the real gateway, a Temporal dev server, a worker and the offline model. A session
 * gets a user message with a PNG, a PDF and a remote image URL, and a tool result with another
 * PNG; its page shows:
 *
 * - each stored image as a thumbnail that loads (the <img>'s naturalWidth is the image's own
 *   width), read from the native media route, on a gateway with a token too (the page sends its
 *   bearer token, as for its other calls);
 * - the file as a chip with its name, type and size;
 * - the remote image as its URL, never loaded: the page requests nothing from any other host.
 *
 * Every page must log no console error and request nothing from any host but the gateway.
 */
import type { Browser } from 'playwright-core';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startGateway, type RunningGateway } from '../../src/gateway/index.js';
import type { StoredMedia } from '../../src/session/index.js';
import { inspectMedia } from '../../src/session/media.js';
import { BUILTIN_TOOLS } from '../../src/tools/builtin.js';
import { ToolRegistry, type Tool } from '../../src/tools/registry.js';
import { request } from '../gateway/http.js';
import { PDF_MINIMAL, png } from '../support/media.js';
import { startStack, type Stack } from '../support/stack.js';
import { ensureChromium, launchChromium, openWatchedPage, type DomElement, type WatchedPage } from './browser.js';

const TOKEN = 'inspector-media-token-0123456789';
const REMOTE = 'https://images.example.com/never-loaded.png';
const USER_IMAGE = png(48, 32, [20, 120, 220]);
const TOOL_IMAGE = png(24, 40, [220, 120, 20], 7);

/** A tool returning a picture, stored in the session's artifact store. */
const snapshot: Tool = {
  name: 'snapshot',
  description: 'Take a picture.',
  parameters: { type: 'object', properties: {} },
  async run(_args, context) {
    const source: StoredMedia = await context.artifacts.putMedia({
      sessionId: context.sessionId,
      bytes: TOOL_IMAGE,
      ...inspectMedia(TOOL_IMAGE, 'image/png', 1 << 20),
    });
    return {
      text: 'the picture',
      content: [
        { type: 'text', text: 'the picture' },
        { type: 'image', source },
      ],
    };
  },
};

let stack: Stack;
let gateway: RunningGateway;
let guarded: RunningGateway;
let browser: Browser;
const pages: WatchedPage[] = [];
let counter = 0;
const newId = (name: string) => `ui-media-${name}-${Date.now()}-${counter++}`;

beforeAll(async () => {
  browser = await launchChromium(ensureChromium());
  stack = await startStack({
    worker: {
      tools: new ToolRegistry([...BUILTIN_TOOLS, snapshot]),
      agent: { model: 'fake', system: 'You are a test assistant.', tools: ['read_artifact', 'snapshot'] },
    },
  });
  const options = { client: stack.client, host: '127.0.0.1', port: 0, bodyLimitBytes: 1 << 20 };
  gateway = await startGateway(options);
  guarded = await startGateway({ ...options, token: TOKEN });
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
  const opened = pages.splice(0);
  for (const watched of opened) {
    expect(watched.consoleErrors).toEqual([]);
    const origins = new Set([new URL(gateway.url).origin, new URL(guarded.url).origin]);
    expect(
      watched.requests.map((r) => r.url).filter((url) => !url.startsWith('data:') && !origins.has(new URL(url).origin)),
    ).toEqual([]);
    await watched.close();
  }
});

async function openPage(): Promise<WatchedPage> {
  const watched = await openWatchedPage(browser);
  pages.push(watched);
  return watched;
}

/** A session with a user message holding a PNG, a PDF and a remote image, and a tool result holding a PNG. */
async function sessionWithMedia(id: string): Promise<void> {
  const first = await stack.client.send(id, 'look at these', {
    content: [
      { type: 'text', text: 'look at these' },
      { type: 'image', data: USER_IMAGE, mediaType: 'image/png' },
      { type: 'file', data: PDF_MINIMAL, mediaType: 'application/pdf', filename: 'report.pdf' },
      { type: 'image', url: REMOTE },
    ],
  });
  expect(first.outcome).toBe('completed');
  stack.fake.enqueueReplies({ text: 'taking one', toolCalls: [{ name: 'snapshot', arguments: {} }] }, { text: 'done' });
  expect((await stack.client.send(id, 'take a picture')).outcome).toBe('completed');
}

type Img = DomElement & { naturalWidth: number; naturalHeight: number; complete: boolean };

/** The loaded size of the thumbnail under `selector`, once it has loaded. */
async function loadedSize(page: WatchedPage['page'], selector: string): Promise<{ width: number; height: number }> {
  const thumbnail = page.locator(selector);
  await thumbnail.waitFor();
  await page.waitForFunction((s) => {
    const img = (
      globalThis as unknown as { document: { querySelector(s: string): Img | null } }
    ).document.querySelector(s);
    return img !== null && img.complete && img.naturalWidth > 0;
  }, selector);
  return thumbnail.evaluate((img) => ({
    width: (img as unknown as Img).naturalWidth,
    height: (img as unknown as Img).naturalHeight,
  }));
}

describe('media in the inspector', () => {
  it('shows a user message’s image as a loaded thumbnail, its file as a chip, a remote image as its URL, and a tool result’s image', async () => {
    const id = newId('open');
    expect((await request(gateway.url, 'POST', '/v1/sessions', { json: { id } })).status).toBe(201);
    await sessionWithMedia(id);

    const watched = await openPage();
    const { page } = watched;
    await page.goto(`${gateway.url}/ui/#/sessions/${id}`);
    const user = '[data-testid=turn][data-turn="1"] [data-testid=user-message]';
    expect(await loadedSize(page, `${user} [data-testid=media-thumbnail]`)).toEqual({ width: 48, height: 32 });

    const file = page.locator(`${user} [data-testid=media-file]`);
    expect(await file.locator('[data-testid=media-file-name]').textContent()).toBe('report.pdf');
    expect(await file.locator('[data-testid=media-file-facts]').textContent()).toBe(
      `application/pdf · ${PDF_MINIMAL.length} B`,
    );
    expect(await page.locator(`${user} [data-testid=media-remote] code`).textContent()).toBe(REMOTE);

    const result = '[data-testid=turn][data-turn="2"] [data-testid=tool-result]';
    expect(await loadedSize(page, `${result} [data-testid=media-thumbnail]`)).toEqual({ width: 24, height: 40 });

    // The thumbnails came from the native media route; the remote image was never asked for.
    const mediaCalls = watched.requests.filter((r) => new URL(r.url).pathname.startsWith(`/v1/sessions/${id}/media/`));
    expect(new Set(mediaCalls.map((r) => new URL(r.url).pathname)).size).toBe(2);
    expect(watched.requests.some((r) => r.url === REMOTE)).toBe(false);
  });

  it('loads a thumbnail through a gateway with a token, sending the bearer token', async () => {
    const id = newId('guarded');
    await sessionWithMedia(id);
    const watched = await openPage();
    const { page } = watched;
    await page.goto(`${guarded.url}/ui/`);
    await page.locator('input[name=token]').fill(TOKEN);
    await page.locator('button[type=submit]').click();
    await page.locator('[data-testid=sessions]').waitFor();
    await page.goto(`${guarded.url}/ui/#/sessions/${id}`);
    const user = '[data-testid=turn][data-turn="1"] [data-testid=user-message]';
    expect(await loadedSize(page, `${user} [data-testid=media-thumbnail]`)).toEqual({ width: 48, height: 32 });
    const mediaCalls = watched.requests.filter((r) => new URL(r.url).pathname.startsWith(`/v1/sessions/${id}/media/`));
    expect(mediaCalls.length).toBeGreaterThan(0);
    for (const call of mediaCalls) expect(call.headers.authorization).toBe(`Bearer ${TOKEN}`);
  });
});
