/**
 * A real headless Chromium for the inspector tests: Debian's `chromium` (installed by
 * scripts/ensure-chromium when missing), driven by playwright-core. No browser is downloaded.
 * Each page records its console errors and every request it makes, so a test can assert that
 * the page stayed quiet and talked to nobody but the gateway.
 */
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';

const ROOT = new URL('../..', import.meta.url).pathname;

/** The Chromium binary, installing Debian's package when it is missing; throws saying what to do when it cannot. */
export function ensureChromium(): string {
  try {
    return execFileSync(join(ROOT, 'scripts/ensure-chromium'), {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: 15 * 60_000,
    }).trim();
  } catch (error) {
    const stderr = String((error as { stderr?: string }).stderr ?? '').trim();
    throw new Error(
      `the inspector tests need a Chromium and none could be found or installed:\n${stderr || (error as Error).message}`,
      { cause: error },
    );
  }
}

/**
 * Launches Chromium headless. Playwright gives every launch a fresh temporary profile
 * (`--user-data-dir`), so no state leaks between runs; the flags keep the browser itself off
 * the network (no component updates, sync, QUIC or first-run pings).
 */
export async function launchChromium(executablePath: string): Promise<Browser> {
  return chromium.launch({
    executablePath,
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}

/** A page and what it did: console errors, uncaught exceptions and every request URL. */
export type WatchedPage = {
  context: BrowserContext;
  page: Page;
  consoleErrors: string[];
  requests: Array<{ url: string; method: string; headers: Record<string, string> }>;
  /** Requests to any origin other than `origin`. */
  foreignRequests(origin: string): string[];
  close(): Promise<void>;
};

export async function openWatchedPage(
  browser: Browser,
  viewport = { width: 1500, height: 1000 },
): Promise<WatchedPage> {
  const context = await browser.newContext({ viewport, deviceScaleFactor: 1 });
  const page = await context.newPage();
  const consoleErrors: string[] = [];
  const requests: WatchedPage['requests'] = [];
  page.on('console', (message) => {
    if (message.type() === 'error' || message.type() === 'warning')
      consoleErrors.push(`console.${message.type()}: ${message.text()}`);
  });
  page.on('pageerror', (error) => consoleErrors.push(`uncaught: ${error.message}`));
  context.on('request', (request) =>
    requests.push({ url: request.url(), method: request.method(), headers: request.headers() }),
  );
  return {
    context,
    page,
    consoleErrors,
    requests,
    foreignRequests: (origin) =>
      requests.map((r) => r.url).filter((url) => !url.startsWith('data:') && new URL(url).origin !== origin),
    close: () => context.close(),
  };
}

/**
 * The little of the DOM the tests touch inside `page.evaluate` (the project compiles without
 * the DOM library). Use as `globalThis as unknown as PageGlobals`; the cast compiles away.
 */
export type DomElement = {
  dataset: Record<string, string | undefined>;
  textContent: string | null;
  querySelector(selector: string): DomElement | null;
};

export type PageGlobals = {
  document: { body: unknown; querySelector(selector: string): DomElement | null };
  MutationObserver: new (callback: () => void) => { observe(target: unknown, options: Record<string, boolean>): void };
  sessionStorage: { getItem(key: string): string | null };
  getComputedStyle(element: unknown): { color: string };
  scrollTo(x: number, y: number): void;
  seenReplies?: Array<{ text: string; streaming: string | undefined }>;
};
