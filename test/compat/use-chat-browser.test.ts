/**
 * `useChat` (`@ai-sdk/react`) in a real headless Chromium sending a file (issue 50): a small React
 * page, bundled at test time with esbuild, renders `useChat({id, transport: new
 * DefaultChatTransport({api: '/ai-sdk/chat'})})` with a file input; the test picks a PNG in it
 * and presses send, and `sendMessage({text, files})` sends the file as the AI SDK does in a
 * browser (read into a data URL). The page is served at the gateway's own origin (Playwright
 * answers its one URL), so its requests go to the real gateway, a Temporal dev server, a worker
 * and the offline model, which, asked to "describe the media", names what it received.
 */
import { createHash } from 'node:crypto';
import { build } from 'esbuild';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type RunningGateway } from '../../src/gateway/index.js';
import { isKnownEvent, type ImageBlock } from '../../src/session/index.js';
import { ensureChromium, launchChromium, openWatchedPage, type PageGlobals } from '../inspector/browser.js';
import { png } from '../support/media.js';
import { startStack, type Stack } from '../support/stack.js';

/** The page's script: useChat with a file input, a send button and the messages as rendered text. */
const PAGE_SCRIPT = `
import { createElement as h, useRef } from 'react';
import { createRoot } from 'react-dom/client';
import { useChat } from '@ai-sdk/react';
import { DefaultChatTransport } from 'ai';

function App() {
  const files = useRef(null);
  const { messages, sendMessage, status, error } = useChat({
    id: window.CHAT_ID,
    transport: new DefaultChatTransport({ api: '/ai-sdk/chat' }),
  });
  return h('main', { 'data-status': status },
    h('input', { id: 'file', type: 'file', ref: files }),
    h('button', { id: 'send', onClick: () => sendMessage({ text: 'describe the media', files: files.current.files }) }, 'send'),
    error ? h('p', { id: 'error' }, String(error.message)) : null,
    h('ol', null, messages.map((m) => h('li', { key: m.id, 'data-role': m.role },
      m.parts.map((p, i) => h('span', { key: i, 'data-part': p.type }, p.type === 'text' ? p.text : p.type === 'file' ? p.filename : ''))))),
  );
}
createRoot(document.getElementById('root')).render(h(App));
`;

let stack: Stack;
let gateway: RunningGateway;
let browser: Browser;
let bundle: string;

beforeAll(async () => {
  const chromium = ensureChromium();
  stack = await startStack({ worker: { agent: { model: 'fake', system: 'You look at pictures.', tools: [] } } });
  gateway = await startGateway({
    client: stack.client,
    host: '127.0.0.1',
    port: 0,
    bodyLimitBytes: 1024 * 1024,
    defaultAgent: { model: 'fake' },
  });
  const built = await build({
    stdin: { contents: PAGE_SCRIPT, resolveDir: new URL('.', import.meta.url).pathname, loader: 'js' },
    bundle: true,
    write: false,
    format: 'iife',
    platform: 'browser',
    define: { 'process.env.NODE_ENV': '"production"' },
    logLevel: 'silent',
  });
  bundle = built.outputFiles[0]!.text;
  browser = await launchChromium(chromium);
});
afterAll(async () => {
  await browser?.close();
  await gateway?.close();
  await stack?.close();
});

describe('useChat in Chromium', () => {
  it('sends a picked file: the log holds the image (its sha-256 the bytes picked), the model describes it, the page shows the answer', async () => {
    const picture = Buffer.from(png(64, 48));
    const sha256 = createHash('sha256').update(picture).digest('hex');
    const chatId = `use-chat-${Date.now()}`;
    const watched = await openWatchedPage(browser);
    const { page } = watched;
    const pageUrl = `${gateway.url}/__use-chat-test`;
    await page.route(pageUrl, (route) =>
      route.fulfill({
        contentType: 'text/html',
        body: `<!doctype html><html><body><div id="root"></div><script>window.CHAT_ID = ${JSON.stringify(chatId)};</script><script>${bundle}</script></body></html>`,
      }),
    );
    try {
      await page.goto(pageUrl);
      await page.setInputFiles('#file', { name: 'dot.png', mimeType: 'image/png', buffer: picture });
      await page.click('#send');
      await page.waitForFunction(
        () =>
          (globalThis as unknown as PageGlobals).document.querySelector('main')?.dataset.status === 'ready' &&
          (globalThis as unknown as PageGlobals).document.querySelector('li[data-role="assistant"]') !== null,
        undefined,
        { timeout: 30_000 },
      );
      expect(await page.textContent('li[data-role="user"]')).toContain('dot.png');
      expect(await page.textContent('li[data-role="assistant"]')).toContain(
        `image image/png 64x48 sha256=${sha256.slice(0, 12)}`,
      );
      expect(await page.$('#error')).toBeNull();

      const events = await stack.client.events(chatId, 0);
      const images = events.flatMap((event) =>
        isKnownEvent(event) && event.type === 'user/message'
          ? event.data.content.filter((block): block is ImageBlock => block.type === 'image')
          : [],
      );
      expect(images).toHaveLength(1);
      expect(images[0]!.source).toMatchObject({
        kind: 'artifact',
        mediaType: 'image/png',
        sha256,
        width: 64,
        height: 48,
      });
      expect(watched.foreignRequests(new URL(gateway.url).origin)).toEqual([]);
      expect(watched.consoleErrors).toEqual([]);
    } finally {
      await watched.close();
    }
  });
});
