/**
 * What the inspector reads, over real HTTP against a real stack: the turns and surface views,
 * artifact pages, signed stream tokens (accepted on the events route only), and the static
 * page at /ui with the libraries it imports, served without the bearer token.
 */
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type RunningGateway } from '../../src/gateway/index.js';
import { artifactResponse, surfaceResponse, turnsResponse } from '../../src/gateway/native/inspector-schemas.js';
import { foldSurfaceView, foldTurns } from '../../src/session/index.js';
import { startStack, type Stack } from '../support/stack.js';
import { expectErrorShape, openSse, readEventsUntil, request } from './http.js';

const TOKEN = 'inspector-routes-token-0123456789';
const UI_DIR = join(new URL('../..', import.meta.url).pathname, 'src', 'gateway', 'ui');

let stack: Stack;
let gateway: RunningGateway;
let guarded: RunningGateway;
let sessionA: string;
let sessionB: string;

beforeAll(async () => {
  stack = await startStack();
  const options = { client: stack.client, store: stack.store, host: '127.0.0.1', port: 0, bodyLimitBytes: 64 * 1024 };
  gateway = await startGateway(options);
  guarded = await startGateway({ ...options, token: TOKEN });
  sessionA = `inspector-a-${Date.now()}`;
  sessionB = `inspector-b-${Date.now()}`;
  stack.fake.enqueueReplies(
    { text: 'counting', toolCalls: [{ name: 'word_count', arguments: { text: 'one two three' } }] },
    { text: 'three words' },
  );
  await stack.client.send(sessionA, 'count my words');
  await stack.client.send(sessionB, 'hello');
});
afterAll(async () => {
  await guarded?.close();
  await gateway?.close();
  await stack?.close();
});

const call = (path: string, init?: Parameters<typeof request>[3]) => request(gateway.url, 'GET', path, init);
const auth = { authorization: `Bearer ${TOKEN}` };

describe('GET /v1/sessions/:id/turns and /surface', () => {
  it('answer with the folds of the stored log, in the documented shapes', async () => {
    const events = await stack.store.readFrom(sessionA, 0);
    const turns = await call(`/v1/sessions/${sessionA}/turns`);
    expect(turns.status).toBe(200);
    expect(turnsResponse.safeParse(turns.body).success).toBe(true);
    expect(turns.body).toEqual(JSON.parse(JSON.stringify(foldTurns(events))));
    const body = turns.body as ReturnType<typeof foldTurns>;
    expect(body.turns[0]!.steps[0]!.toolCalls[0]).toMatchObject({
      name: 'word_count',
      result: { text: '{"words":3,"lines":1,"characters":13}', isError: false },
    });

    const summary = (await call(`/v1/sessions/${sessionA}/turns?last=0`)).body as ReturnType<typeof foldTurns>;
    expect(summary.turns).toEqual([]);
    expect(summary.activity).toEqual(body.activity);

    const surface = await call(`/v1/sessions/${sessionA}/surface`);
    expect(surface.status).toBe(200);
    expect(surfaceResponse.safeParse(surface.body).success).toBe(true);
    expect(surface.body).toEqual(JSON.parse(JSON.stringify(foldSurfaceView(events))));
  });

  it('refuse a bad query and an unknown session with the error shape', async () => {
    for (const [path, status] of [
      [`/v1/sessions/${sessionA}/turns?last=-1`, 400],
      [`/v1/sessions/${sessionA}/turns?first=1`, 400],
      ['/v1/sessions/no-such-session/turns', 404],
      ['/v1/sessions/no-such-session/surface', 404],
    ] as const) {
      const response = await call(path);
      expect(response.status, path).toBe(status);
      expectErrorShape(response, path);
    }
  });
});

describe('GET /v1/sessions/:id/artifacts/:name', () => {
  it('pages an artifact by offset and limit, and refuses names that are not an artifact of the session', async () => {
    const content = Array.from({ length: 500 }, (_, i) => `row ${i}`).join('\n');
    const { locator } = await stack.store.artifacts.put({ sessionId: sessionB, name: 'big.txt', content });
    const name = locator.split('/').pop()!;
    const first = await call(`/v1/sessions/${sessionB}/artifacts/${name}?limit=100`);
    expect(first.status).toBe(200);
    expect(artifactResponse.safeParse(first.body).success).toBe(true);
    expect(first.body).toEqual({ locator, offset: 0, text: content.slice(0, 100), total: content.length });
    const last = await call(`/v1/sessions/${sessionB}/artifacts/${name}?offset=${content.length - 10}&limit=100`);
    expect(last.body).toMatchObject({ text: content.slice(-10), total: content.length });
    expect(((await call(`/v1/sessions/${sessionB}/artifacts/${name}`)).body as { text: string }).text).toBe(
      content.slice(0, 20_000),
    );

    // The tool output of session A is an artifact of A, not of B.
    const toolResult = (await stack.store.readFrom(sessionA, 0)).find((e) => e.type === 'tool/result')!;
    const toolArtifact = (toolResult.data as { meta: { locator: string } }).meta.locator.split('/').pop()!;
    expect(((await call(`/v1/sessions/${sessionA}/artifacts/${toolArtifact}`)).body as { text: string }).text).toBe(
      '{"words":3,"lines":1,"characters":13}',
    );
    const elsewhere = await call(`/v1/sessions/${sessionB}/artifacts/${toolArtifact}`);
    expect(elsewhere.status).toBe(404);
    expect(expectErrorShape(elsewhere, 'artifact of another session')).toBe('ARTIFACT_NOT_FOUND');
    for (const path of [
      `/v1/sessions/${sessionB}/artifacts/.hidden`,
      `/v1/sessions/${sessionB}/artifacts/${name}?limit=0`,
      `/v1/sessions/${sessionB}/artifacts/${name}?limit=999999`,
    ]) {
      const response = await call(path);
      expect(response.status, path).toBe(400);
      expectErrorShape(response, path);
    }
  });
});

describe('signed stream tokens', () => {
  it("are minted with the bearer token and open that session's event stream without it", async () => {
    expect((await request(guarded.url, 'POST', `/v1/sessions/${sessionA}/stream-token`)).status).toBe(401);
    const minted = await request(guarded.url, 'POST', `/v1/sessions/${sessionA}/stream-token`, { headers: auth });
    expect(minted.status).toBe(200);
    const { token, expiresAt } = minted.body as { token: string; expiresAt: number };
    expect(expiresAt).toBeGreaterThan(Date.now());

    const sse = await openSse(
      `${guarded.url}/v1/sessions/${sessionA}/events?from=0&streamToken=${encodeURIComponent(token)}`,
    );
    expect(sse.status).toBe(200);
    const received = await readEventsUntil(sse, (e) => e.type === 'turn/end');
    sse.close();
    expect(received.map((e) => e.seq)).toEqual(received.map((_, i) => i));
  });

  it('are refused for another session, on any other route, and when forged', async () => {
    const { token } = (await request(guarded.url, 'POST', `/v1/sessions/${sessionA}/stream-token`, { headers: auth }))
      .body as { token: string };
    const refused = [
      `/v1/sessions/${sessionB}/events?streamToken=${encodeURIComponent(token)}`,
      `/v1/sessions/${sessionA}/turns?streamToken=${encodeURIComponent(token)}`,
      `/v1/sessions/${sessionA}/messages?streamToken=${encodeURIComponent(token)}`,
      `/v1/sessions/${sessionA}/events?streamToken=${encodeURIComponent(`${Date.now() + 30_000}.${'A'.repeat(43)}`)}`,
      `/v1/sessions/${sessionA}/events?streamToken=${encodeURIComponent(TOKEN)}`,
    ];
    for (const path of refused) {
      const response = await request(guarded.url, 'GET', path, { headers: { accept: 'text/event-stream' } });
      expect(response.status, path).toBe(401);
      expect(expectErrorShape(response, path)).toBe('UNAUTHORIZED');
    }
    const post = await request(
      guarded.url,
      'POST',
      `/v1/sessions/${sessionA}/messages?streamToken=${encodeURIComponent(token)}`,
      { json: { text: 'sneaky' } },
    );
    expect(post.status).toBe(401);
  });
});

describe('the inspector page at /ui', () => {
  it('is served without the token, tells the page whether /v1 wants one, and allows only its own scripts', async () => {
    const redirect = await fetch(`${guarded.url}/ui`, { redirect: 'manual' });
    expect(redirect.status).toBe(302);
    expect(redirect.headers.get('location')).toBe('/ui/');

    for (const [base, mode] of [
      [gateway.url, 'none'],
      [guarded.url, 'bearer'],
    ] as const) {
      const page = await fetch(`${base}/ui/`);
      expect(page.status).toBe(200);
      expect(page.headers.get('content-type')).toContain('text/html');
      const html = await page.text();
      // The page's HTML may close the tag either way (`>` or ` />`, as Prettier writes it).
      expect(html).toMatch(new RegExp(`<meta name="sessionlog-auth" content="${mode}"\\s*/?>`));
      const csp = page.headers.get('content-security-policy') ?? '';
      const importMap = /<script type="importmap">([\s\S]*?)<\/script>/.exec(html)![1]!;
      expect(csp).toContain(`script-src 'self' 'sha256-${createHash('sha256').update(importMap).digest('base64')}'`);
      expect(csp).toContain("connect-src 'self'");
      expect(page.headers.get('x-content-type-options')).toBe('nosniff');
    }
    // /v1 still wants the token.
    expect((await request(guarded.url, 'GET', '/v1/sessions')).status).toBe(401);
  });

  it('serves every module the page imports: its own files and the libraries in its import map, from this install', async () => {
    const html = await (await fetch(`${guarded.url}/ui/`)).text();
    const imports = (
      JSON.parse(/<script type="importmap">([\s\S]*?)<\/script>/.exec(html)![1]!) as { imports: Record<string, string> }
    ).imports;
    const files = readdirSync(UI_DIR).filter((f) => f.endsWith('.js'));
    expect(files).toContain('app.js');
    for (const file of files) {
      const served = await fetch(`${guarded.url}/ui/${file}`);
      expect(served.status, file).toBe(200);
      expect(served.headers.get('content-type'), file).toContain('text/javascript');
      const source = await served.text();
      expect(source).toBe(readFileSync(join(UI_DIR, file), 'utf8'));
      for (const [, specifier] of source.matchAll(/^import [^'"]*['"]([^'"]+)['"]/gm)) {
        if (specifier!.startsWith('./')) expect(files, `${file} imports ${specifier}`).toContain(specifier!.slice(2));
        else expect(Object.keys(imports), `${file} imports ${specifier}`).toContain(specifier);
      }
    }
    for (const [specifier, target] of Object.entries(imports)) {
      const served = await fetch(new URL(target, `${guarded.url}/ui/`));
      expect(served.status, specifier).toBe(200);
      expect(served.headers.get('content-type'), specifier).toContain('text/javascript');
      expect(await served.text(), specifier).not.toContain('sourceMappingURL');
    }
    const css = await fetch(`${guarded.url}/ui/vendor/uplot.css`);
    expect(css.headers.get('content-type')).toContain('text/css');
  });

  it('answers unknown files with a JSON 404 and never reads outside its folder', async () => {
    for (const path of [
      '/ui/nope.js',
      '/ui/vendor/nope.mjs',
      '/ui/..%2Fserver.ts',
      '/ui/%2E%2E%2Fui-routes.ts',
      '/ui/ui-routes.ts',
      '/ui/.hidden.js',
    ]) {
      const response = await request(guarded.url, 'GET', path);
      expect(response.status, path).toBe(404);
      expect(expectErrorShape(response, path)).toBe('NOT_FOUND');
    }
  });
});

describe('the OpenAPI document', () => {
  it("documents the inspector's read routes and the stream token", async () => {
    const doc = (await call('/v1/openapi.json')).body as {
      paths: Record<string, Record<string, { operationId: string; parameters?: Array<{ name: string }> }>>;
    };
    expect(doc.paths['/v1/sessions/{id}/turns']?.get?.operationId).toBe('getTurns');
    expect(doc.paths['/v1/sessions/{id}/surface']?.get?.operationId).toBe('getSurface');
    expect(doc.paths['/v1/sessions/{id}/artifacts/{name}']?.get?.operationId).toBe('readArtifact');
    expect(doc.paths['/v1/sessions/{id}/stream-token']?.post?.operationId).toBe('mintStreamToken');
    expect(doc.paths['/v1/sessions/{id}/events']?.get?.parameters?.map((p) => p.name)).toContain('streamToken');
  });
});
