/**
 * The inspector's static page at `/ui` (DESIGN §8): plain ES modules from `./ui/` next to this
 * file (copied into `dist/` by `npm run build`), and the few front-end libraries it imports
 * (Preact, htm, uPlot) served from this package's own dependencies under `/ui/vendor/`. No
 * build step, no CDN: the page loads only from the gateway that serves it.
 *
 * The files hold no session data, so they are served without the bearer token; everything the
 * page shows it reads from `/v1` with the token the user gives it. The page learns whether the
 * gateway wants a token from a `<meta>` in `index.html`, so it can ask before its first request,
 * and the event types of this build (the session's known event types) from another, so its live
 * tail listens to every type the log may hold and no second list can drift from the code's.
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, extname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { KNOWN_EVENT_TYPES } from '../session/index.js';
import { GatewayError } from './errors.js';

/** The fastify URL patterns of the inspector (public: no bearer token). */
export const INSPECTOR_UI_PATHS: readonly string[] = ['/ui', '/ui/', '/ui/:file', '/ui/vendor/:file'];

const UI_DIR = fileURLToPath(new URL('./ui/', import.meta.url));
const FILE_NAME = /^(?!\.)[A-Za-z0-9._-]{1,100}$/;

const CONTENT_TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
};

/** `/ui/vendor/<name>` → a file inside an installed dependency. */
const VENDOR_FILES: Record<string, { pkg: string; path: string }> = {
  'preact.mjs': { pkg: 'preact', path: 'dist/preact.mjs' },
  'preact-hooks.mjs': { pkg: 'preact', path: 'hooks/dist/hooks.mjs' },
  'htm.mjs': { pkg: 'htm', path: 'dist/htm.mjs' },
  'uplot.mjs': { pkg: 'uplot', path: 'dist/uPlot.esm.js' },
  'uplot.css': { pkg: 'uplot', path: 'dist/uPlot.min.css' },
};

export type InspectorUiOptions = {
  /** Whether `/v1` wants a bearer token (the page then asks for it before its first request). */
  tokenRequired: boolean;
};

/** The directory of an installed package (its entry resolved, then up to its package.json). */
function packageDir(pkg: string): string {
  const require = createRequire(import.meta.url);
  let dir = dirname(require.resolve(pkg));
  for (;;) {
    const manifest = join(dir, 'package.json');
    if (existsSync(manifest) && (JSON.parse(readFileSync(manifest, 'utf8')) as { name?: string }).name === pkg)
      return dir;
    const parent = dirname(dir);
    if (parent === dir)
      throw new Error(`cannot find the package directory of ${pkg}; reinstall sessionlog's dependencies (npm ci)`);
    dir = parent;
  }
}

function resolveVendorFiles(): Map<string, string> {
  const dirs = new Map<string, string>();
  const files = new Map<string, string>();
  for (const [name, { pkg, path }] of Object.entries(VENDOR_FILES)) {
    if (!dirs.has(pkg)) dirs.set(pkg, packageDir(pkg));
    const file = join(dirs.get(pkg)!, path);
    if (!existsSync(file))
      throw new Error(
        `the inspector needs ${pkg}/${path}, which is missing; reinstall sessionlog's dependencies (npm ci)`,
      );
    files.set(name, file);
  }
  return files;
}

/** The inline import map's hash, so the Content-Security-Policy can allow it and no other inline script. */
function inlineScriptHashes(html: string): string[] {
  return [...html.matchAll(/<script[^>]*>([\s\S]*?)<\/script>/g)]
    .map((m) => m[1]!)
    .filter((body) => body.trim().length > 0)
    .map((body) => `'sha256-${createHash('sha256').update(body, 'utf8').digest('base64')}'`);
}

function securityHeaders(scriptHashes: readonly string[]): Record<string, string> {
  const csp = [
    "default-src 'self'",
    `script-src 'self' ${scriptHashes.join(' ')}`.trim(),
    "style-src 'self'",
    "img-src 'self' data:",
    "connect-src 'self'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; ');
  return {
    'content-security-policy': csp,
    'x-content-type-options': 'nosniff',
    'referrer-policy': 'no-referrer',
    // The page is small and changes with the package: always revalidate.
    'cache-control': 'no-cache',
  };
}

function contentType(file: string): string {
  const type = CONTENT_TYPES[extname(file)];
  if (!type) throw new GatewayError('NOT_FOUND', `no inspector file ${file}`);
  return type;
}

/** Drops a trailing `//# sourceMappingURL=` line: the maps are not served. */
function withoutSourceMap(text: string): string {
  return text.replace(/\n\/\/# sourceMappingURL=\S+\s*$/, '\n');
}

/** Registers `/ui` on `app`. Throws when the page or a library it needs is missing from the install. */
export function registerInspectorUi(app: FastifyInstance, options: InspectorUiOptions): void {
  const indexPath = join(UI_DIR, 'index.html');
  if (!existsSync(indexPath))
    throw new Error(`the inspector's files are missing (${UI_DIR}); rebuild sessionlog (npm run build)`);
  const index = readFileSync(indexPath, 'utf8')
    .replace('{{AUTH}}', options.tokenRequired ? 'bearer' : 'none')
    .replace('{{EVENT_TYPES}}', [...KNOWN_EVENT_TYPES].join(' '));
  const headers = securityHeaders(inlineScriptHashes(index));
  const vendor = resolveVendorFiles();

  const sendIndex = (reply: FastifyReply) => reply.headers(headers).type(CONTENT_TYPES['.html']!).send(index);

  app.get('/ui', async (_request, reply) => reply.redirect('/ui/', 302));
  app.get('/ui/', async (_request, reply) => sendIndex(reply));
  app.get('/ui/:file', async (request, reply) => {
    const { file } = request.params as { file: string };
    if (file === 'index.html') return sendIndex(reply);
    if (!FILE_NAME.test(file)) throw new GatewayError('NOT_FOUND', `no inspector file ${file}`);
    const type = contentType(file);
    let body: Buffer;
    try {
      body = await readFile(join(UI_DIR, file));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT')
        throw new GatewayError('NOT_FOUND', `no inspector file ${file}`);
      throw error;
    }
    return reply.headers(headers).type(type).send(body);
  });
  app.get('/ui/vendor/:file', async (request, reply) => {
    const { file } = request.params as { file: string };
    const path = vendor.get(file);
    if (!path)
      throw new GatewayError(
        'NOT_FOUND',
        `no inspector library ${file}; the page loads ${[...vendor.keys()].join(', ')}`,
      );
    return reply
      .headers(headers)
      .type(contentType(path))
      .send(withoutSourceMap(await readFile(path, 'utf8')));
  });
}
