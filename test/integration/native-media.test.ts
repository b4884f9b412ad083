/**
 * Media through the native API and the client (issue 50), against the real stack (Temporal dev
 * server, SQLite, the offline model over HTTP, a worker) and the gateway over HTTP:
 *
 * - a PNG sent in `POST /v1/sessions/:id/messages?wait=true` is logged in the user/message as an
 *   image block (a reference with type, size, digest and pixel size), its bytes are served back
 *   by `GET /v1/sessions/:id/media/:name`, and no workflow history holds its bytes, its base64 or
 *   a marker in its pixels, as stored or opened with the session's key;
 * - uploads (multipart, raw bytes, JSON) are checked and stored once, and a message can name one
 *   by its locator;
 * - every bad part (a data URL not base64, a non-http(s) scheme, a declared type the bytes are
 *   not, an unknown type, a cut or oversized image, another session's or tenant's medium) is a
 *   4xx naming the part, with nothing stored and the session unchanged;
 * - with URL fetching on, a loopback URL is refused before any byte is fetched;
 * - erasing the session leaves none of its media readable or stored.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { Client } from '@temporalio/client';
import type { Payload } from '@temporalio/common';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isRefusedAddress } from '../../src/client/media.js';
import { SEALED_ENCODING, SessionPayloadCodec } from '../../src/client/session-codec.js';
import { SessionClient } from '../../src/client/session-client.js';
import { startGateway, type RunningGateway } from '../../src/gateway/index.js';
import {
  isEventOfType,
  isSessionlogError,
  type ContentBlock,
  type StoredEvent,
  type StoredMedia,
} from '../../src/session/index.js';
import { workflowIdFor } from '../../src/workflows/api.js';
import { request, type JsonResponse } from '../gateway/http.js';
import { GIF_1X1, PDF_MINIMAL, base64, noisyPng, png, pngChunk } from '../support/media.js';
import { startStack, type Stack } from '../support/stack.js';

const MEDIA_LIMIT = 64 * 1024;

let stack: Stack;
let gateway: RunningGateway;
/** A client (and gateway) with a small media limit and URL fetching on. */
let strict: SessionClient;
let strictGateway: RunningGateway;
let imageServer: Server;
let imageServerPort: number;

beforeAll(async () => {
  stack = await startStack();
  gateway = await startGateway({ client: stack.client, host: '127.0.0.1', port: 0, bodyLimitBytes: 4 * 1024 * 1024 });
  strict = new SessionClient({
    temporal: new Client({ connection: stack.temporal.connection, namespace: 'default' }),
    store: stack.store,
    taskQueue: stack.taskQueue,
    media: { maxBytes: MEDIA_LIMIT, fetchImageUrls: true },
  });
  strictGateway = await startGateway({ client: strict, host: '127.0.0.1', port: 0, bodyLimitBytes: 4 * 1024 * 1024 });
  // A server on loopback with a real PNG: what a fetch must never reach.
  imageServer = createServer((_, response) => {
    response.writeHead(200, { 'content-type': 'image/png' });
    response.end(Buffer.from(png(2, 2)));
  });
  await new Promise<void>((resolve) => imageServer.listen(0, '127.0.0.1', resolve));
  imageServerPort = (imageServer.address() as AddressInfo).port;
});

afterAll(async () => {
  await new Promise((resolve) => imageServer?.close(resolve));
  await strictGateway?.close();
  await gateway?.close();
  await stack?.close();
});

let counter = 0;
const newId = (name: string) => `native-media-${name}-${Date.now()}-${counter++}`;

const call = (method: string, path: string, init?: Parameters<typeof request>[3]): Promise<JsonResponse> =>
  request(gateway.url, method, path, init);

async function createSession(base: string, id: string): Promise<void> {
  const created = await request(base, 'POST', '/v1/sessions', { json: { id } });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
}

/** A PNG holding `marker` in a text chunk, so its bytes are findable anywhere. */
function markedPng(marker: string): Uint8Array {
  const image = png(8, 8, [1, 2, 3], 0);
  // The marker goes in a text chunk before IEND: part of the file's bytes, ignored by image readers.
  const iendAt = image.length - 12;
  const chunk = pngChunk('tEXt', Buffer.from(`Comment\0${marker}`, 'latin1'));
  return new Uint8Array(Buffer.concat([image.subarray(0, iendAt), chunk, image.subarray(iendAt)]));
}

function userMessages(events: readonly StoredEvent[]) {
  return events.filter((event) => isEventOfType(event, 'user/message')) as Array<
    Extract<StoredEvent, { type: 'user/message' }>
  >;
}

/** How many media rows the SQLite store holds (all sessions). */
function storedMediaRows(): number {
  const db = new Database(join(stack.dir, 'sessions.db'), { readonly: true });
  try {
    return (db.prepare('SELECT count(*) AS n FROM media').get() as { n: number }).n;
  } finally {
    db.close();
  }
}

function payloadsOf(history: unknown): Payload[] {
  const found: Payload[] = [];
  const visit = (value: unknown): void => {
    if (value === null || typeof value !== 'object' || value instanceof Uint8Array) return;
    if (Array.isArray(value)) return value.forEach(visit);
    const record = value as Payload & Record<string, unknown>;
    if (record.data instanceof Uint8Array && record.metadata && typeof record.metadata === 'object') found.push(record);
    else Object.values(record).forEach(visit);
  };
  visit(history);
  return found;
}

const holds = (payloads: readonly Payload[], needle: string) =>
  payloads.some((payload) => Buffer.from(payload.data ?? new Uint8Array()).includes(Buffer.from(needle, 'latin1')));

describe('a PNG through the native API', () => {
  it('is logged as an image block, served back as its bytes, and never crosses Temporal', async () => {
    const id = newId('e2e');
    await createSession(gateway.url, id);
    const marker = `MARK-${Math.random().toString(36).slice(2, 12)}`;
    const image = markedPng(marker);
    const sent = await call('POST', `/v1/sessions/${id}/messages?wait=true`, {
      json: {
        content: [
          { type: 'text', text: 'what is in this picture?' },
          { type: 'image', data: base64(image), mediaType: 'image/png', detail: 'low' },
        ],
      },
    });
    expect(sent.status, JSON.stringify(sent.body)).toBe(200);
    expect((sent.body as { outcome: string }).outcome).toBe('completed');

    const [logged] = userMessages(await stack.store.readFrom(id, 0));
    const [text, block] = logged!.data.content as [ContentBlock, Extract<ContentBlock, { type: 'image' }>];
    expect(text).toEqual({ type: 'text', text: 'what is in this picture?' });
    expect(block.type).toBe('image');
    expect(block.detail).toBe('low');
    const source = block.source as StoredMedia;
    expect(source).toMatchObject({
      kind: 'artifact',
      mediaType: 'image/png',
      bytes: image.byteLength,
      width: 8,
      height: 8,
    });
    expect(source.locator).toBe(`artifact:${id}/media-${source.sha256}.png`);
    // The log holds the reference, never the bytes.
    expect(JSON.stringify(logged)).not.toContain(marker);

    // The transcript links each medium; the link serves the bytes with their type.
    const transcript = await call('GET', `/v1/sessions/${id}/transcript`);
    const linked = (transcript.body as { events: StoredEvent[] }).events.find((e) => e.type === 'user/message')!;
    const url = (linked.data as { content: Array<{ url?: string }> }).content[1]!.url!;
    expect(url).toBe(`/v1/sessions/${id}/media/media-${source.sha256}.png`);
    for (const path of [
      url,
      `/v1/sessions/${id}/media/${source.sha256}`,
      `/v1/sessions/${id}/artifacts/media-${source.sha256}.png`,
    ]) {
      const served = await fetch(`${gateway.url}${path}`);
      expect(served.status, path).toBe(200);
      expect(served.headers.get('content-type')).toBe('image/png');
      expect(Buffer.from(await served.arrayBuffer()).equals(Buffer.from(image)), path).toBe(true);
    }
    const history = await call('GET', `/v1/sessions/${id}/messages`);
    expect(JSON.stringify(history.body)).toContain(url);

    // No workflow history of the session holds the image: not as stored, not opened with the session's key.
    const codec = new SessionPayloadCodec(stack.store.sessionKeys);
    let sealed = 0;
    for await (const execution of stack.temporal.workflow.list({ query: `WorkflowId = '${workflowIdFor(id)}'` })) {
      const events = await stack.temporal.workflow.getHandle(workflowIdFor(id), execution.runId).fetchHistory();
      const payloads = payloadsOf(events);
      const ours = payloads.filter(
        (p) => p.metadata?.encoding !== undefined && Buffer.from(p.metadata.encoding).toString() === SEALED_ENCODING,
      );
      sealed += ours.length;
      const opened = await codec.decode(ours, {
        type: 'workflow',
        namespace: 'default',
        workflowId: workflowIdFor(id),
      });
      for (const needle of [marker, base64(image), base64(image).slice(0, 64)]) {
        expect(holds(payloads, needle), `a stored payload holds ${needle.slice(0, 20)}`).toBe(false);
        expect(holds(opened, needle), `an opened payload holds ${needle.slice(0, 20)}`).toBe(false);
      }
    }
    expect(sealed).toBeGreaterThan(0);

    // Erased with the session: counted in the receipt, unreadable, no row left.
    const before = storedMediaRows();
    const erased = await call('DELETE', `/v1/sessions/${id}`);
    expect(erased.status, JSON.stringify(erased.body)).toBe(200);
    expect((erased.body as { receipt: { store: { removed: { media: number } } } }).receipt.store.removed.media).toBe(1);
    expect(storedMediaRows()).toBe(before - 1);
    expect((await fetch(`${gateway.url}${url}`)).status).toBeGreaterThanOrEqual(400);
    const read = await stack.client.readMedia(id, source.locator).catch((error: unknown) => error);
    expect(isSessionlogError(read)).toBe(true);
  });

  it('uploads as multipart, raw bytes or JSON are stored once and can be sent by locator', async () => {
    const id = newId('upload');
    await createSession(gateway.url, id);
    const image = png(3, 5);
    const form = new FormData();
    form.append('file', new Blob([Buffer.from(image)], { type: 'image/png' }), 'photo.png');
    const multipart = await fetch(`${gateway.url}/v1/sessions/${id}/media`, { method: 'POST', body: form });
    const uploaded = (await multipart.json()) as { media: StoredMedia; url: string };
    expect(multipart.status, JSON.stringify(uploaded)).toBe(201);
    expect(uploaded.media).toMatchObject({ kind: 'artifact', mediaType: 'image/png', width: 3, height: 5 });

    const raw = await fetch(`${gateway.url}/v1/sessions/${id}/media`, {
      method: 'POST',
      headers: { 'content-type': 'image/png' },
      body: Buffer.from(image),
    });
    expect(raw.status).toBe(201);
    expect(((await raw.json()) as { media: StoredMedia }).media).toEqual(uploaded.media);
    const json = await call('POST', `/v1/sessions/${id}/media`, {
      json: { data: base64(PDF_MINIMAL), mediaType: 'application/pdf', filename: 'doc.pdf' },
    });
    expect(json.status, JSON.stringify(json.body)).toBe(201);
    const pdf = (json.body as { media: StoredMedia }).media;
    const gif = await fetch(`${gateway.url}/v1/sessions/${id}/media`, {
      method: 'POST',
      headers: { 'content-type': 'image/gif' },
      body: Buffer.from(GIF_1X1),
    });
    expect(gif.status).toBe(201);

    const sent = await call('POST', `/v1/sessions/${id}/messages?wait=true`, {
      json: {
        content: [
          { type: 'text', text: 'these two' },
          { type: 'image', artifact: uploaded.media.locator },
          { type: 'file', artifact: pdf.locator, filename: 'doc.pdf' },
        ],
      },
    });
    expect(sent.status, JSON.stringify(sent.body)).toBe(200);
    const [logged] = userMessages(await stack.store.readFrom(id, 0));
    expect(logged!.data.content.slice(1)).toEqual([
      { type: 'image', source: uploaded.media },
      { type: 'file', source: pdf, filename: 'doc.pdf' },
    ]);
    // The uploads above are three distinct contents; the repeated PNG was stored once.
    const receipt = (await call('DELETE', `/v1/sessions/${id}`)).body as {
      receipt: { store: { removed: { media: number } } };
    };
    expect(receipt.receipt.store.removed.media).toBe(3);
  });

  it('keeps an http(s) image URL as a URL when fetching is off', async () => {
    const id = newId('url');
    await createSession(gateway.url, id);
    const sent = await call('POST', `/v1/sessions/${id}/messages`, {
      json: {
        content: [
          { type: 'text', text: 'and this one?' },
          { type: 'image', url: 'https://example.com/cat.png' },
        ],
      },
    });
    expect(sent.status, JSON.stringify(sent.body)).toBe(202);
    const messages = await eventuallyUserMessages(id);
    expect(messages[0]!.data.content[1]).toEqual({
      type: 'image',
      source: { kind: 'url', url: 'https://example.com/cat.png' },
    });
  });
});

async function eventuallyUserMessages(id: string) {
  for (let i = 0; i < 200; i++) {
    const found = userMessages(await stack.store.readFrom(id, 0));
    if (found.length > 0) return found;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`no user message in ${id}`);
}

describe('bad parts over HTTP: a 4xx naming the part, nothing stored, the session unchanged', () => {
  const good = { type: 'text', text: 'look' };
  const cases: Array<[string, unknown, number, string]> = [
    ['a data URL that is not base64', { type: 'image', url: 'data:image/png,rawbytes' }, 400, 'INVALID_MEDIA'],
    ['a file: URL', { type: 'image', url: 'file:///etc/passwd' }, 400, 'INVALID_MEDIA'],
    ['a javascript: URL', { type: 'image', url: 'javascript:alert(1)' }, 400, 'INVALID_MEDIA'],
    [
      'a declared type the bytes are not',
      { type: 'image', data: base64(png(2, 2)), mediaType: 'image/jpeg' },
      400,
      'INVALID_MEDIA',
    ],
    [
      'an unknown type',
      { type: 'file', data: base64(png(2, 2)), mediaType: 'application/zip' },
      415,
      'UNSUPPORTED_MEDIA_TYPE',
    ],
    [
      'a truncated image',
      { type: 'image', data: base64(png(16, 16).subarray(0, 60)), mediaType: 'image/png' },
      400,
      'INVALID_MEDIA',
    ],
    [
      'an oversized image',
      { type: 'image', data: base64(noisyPng(200, 200)), mediaType: 'image/png' },
      413,
      'MEDIA_TOO_LARGE',
    ],
    ['a loopback URL to fetch', { type: 'image', url: 'http://127.0.0.1:1/x.png' }, 400, 'INVALID_MEDIA'],
  ];
  for (const [what, part, status, code] of cases) {
    it(`${what}: ${status} ${code}`, async () => {
      const id = newId('bad');
      await createSession(strictGateway.url, id);
      const rows = storedMediaRows();
      const answer = await request(strictGateway.url, 'POST', `/v1/sessions/${id}/messages?wait=true`, {
        json: { content: [good, part] },
      });
      expect(answer.status, JSON.stringify(answer.body)).toBe(status);
      const error = (answer.body as { error: { code: string; message: string } }).error;
      expect(error.code).toBe(code);
      expect(error.message).toMatch(/^content\[1\]: /);
      expect(storedMediaRows()).toBe(rows);
      // The new session's run may log its `session/run` meanwhile; no message is logged.
      expect(userMessages(await stack.store.readFrom(id, 0))).toEqual([]);
      expect(await stack.store.inbox.list(id)).toEqual([]);
    });
  }

  it("another session's medium is ARTIFACT_FOREIGN (403), another tenant's too, and nothing is stored", async () => {
    const owner = newId('owner');
    const other = newId('other');
    await createSession(gateway.url, owner);
    await createSession(gateway.url, other);
    const { media } = (
      await call('POST', `/v1/sessions/${owner}/media`, { json: { data: base64(png(2, 3)), mediaType: 'image/png' } })
    ).body as { media: StoredMedia };
    const rows = storedMediaRows();
    const answer = await call('POST', `/v1/sessions/${other}/messages`, {
      json: { content: [good, { type: 'image', artifact: media.locator }] },
    });
    expect(answer.status, JSON.stringify(answer.body)).toBe(403);
    expect((answer.body as { error: { code: string; message: string } }).error).toMatchObject({
      code: 'ARTIFACT_FOREIGN',
      message: expect.stringMatching(/^content\[1\]: /),
    });
    expect((await fetch(`${gateway.url}/v1/sessions/${other}/media/media-${media.sha256}.png`)).status).toBe(404);
    expect(storedMediaRows()).toBe(rows);
    expect(userMessages(await stack.store.readFrom(other, 0))).toEqual([]);
    expect(await stack.store.inbox.list(other)).toEqual([]);

    // Tenants: acme's medium is not bravo's to send or read, even with the same bytes stored by both.
    const acme = stack.client.forTenant('acme');
    const bravo = stack.client.forTenant('bravo');
    const a = newId('acme');
    const b = newId('bravo');
    await acme.create({ sessionId: a });
    await bravo.create({ sessionId: b });
    const image = png(4, 4, [9, 9, 9]);
    const mine = await acme.uploadMedia(a, { data: image, mediaType: 'image/png' });
    const theirs = await bravo.uploadMedia(b, { data: image, mediaType: 'image/png' });
    expect(theirs.sha256).toBe(mine.sha256);
    expect(theirs.locator).not.toBe(mine.locator);
    const foreign = await bravo
      .send(b, '', { content: [{ type: 'image', artifact: mine.locator }] })
      .catch((e: unknown) => e);
    expect(isSessionlogError(foreign, 'ARTIFACT_FOREIGN'), String(foreign)).toBe(true);
    expect((foreign as { part?: number }).part).toBe(0);
    const unseen = await bravo.readMedia(a, mine.locator).catch((e: unknown) => e);
    expect(isSessionlogError(unseen, 'SESSION_NOT_FOUND'), String(unseen)).toBe(true);
    await acme.erase(a);
    expect(Buffer.from((await bravo.readMedia(b, theirs.locator)).bytes).equals(Buffer.from(image))).toBe(true);
  });

  it('uploads are checked the same way: a mismatched type, an unknown type, too many bytes, a form without a file', async () => {
    const id = newId('bad-upload');
    await createSession(strictGateway.url, id);
    const rows = storedMediaRows();
    const post = (body: Buffer | FormData, type: string) =>
      fetch(`${strictGateway.url}/v1/sessions/${id}/media`, {
        method: 'POST',
        headers: { 'content-type': type },
        body,
      });
    const answers = [
      [await post(Buffer.from(png(2, 2)), 'image/webp'), 400, 'INVALID_MEDIA'],
      [await post(Buffer.from(png(2, 2)), 'application/octet-stream'), 415, 'UNSUPPORTED_MEDIA_TYPE'],
      [await post(Buffer.from(noisyPng(200, 200)), 'image/png'), 413, 'MEDIA_TOO_LARGE'],
      [
        await fetch(`${strictGateway.url}/v1/sessions/${id}/media`, { method: 'POST', body: new FormData() }),
        400,
        'INVALID_MEDIA',
      ],
    ] as const;
    for (const [response, status, code] of answers) {
      const body = (await response.json()) as { error: { code: string } };
      expect(response.status, JSON.stringify(body)).toBe(status);
      expect(body.error.code).toBe(code);
    }
    expect(storedMediaRows()).toBe(rows);
    // Other routes still take JSON only.
    const elsewhere = await fetch(`${strictGateway.url}/v1/sessions/${id}/messages`, {
      method: 'POST',
      headers: { 'content-type': 'image/png' },
      body: Buffer.from(png(1, 1)),
    });
    expect(elsewhere.status).toBe(415);
  });
});

describe('fetching image URLs (SESSIONLOG_FETCH_IMAGE_URLS)', () => {
  it('refuses a host that resolves to loopback before fetching, by name or by address', async () => {
    let requests = 0;
    imageServer.on('request', () => requests++);
    const id = newId('fetch');
    await strict.create({ sessionId: id });
    for (const host of ['127.0.0.1', 'localhost', '[::1]']) {
      const error = await strict
        .send(id, '', { content: [{ type: 'image', url: `http://${host}:${imageServerPort}/cat.png` }] })
        .catch((e: unknown) => e);
      expect(isSessionlogError(error, 'INVALID_MEDIA'), `${host}: ${String(error)}`).toBe(true);
      expect((error as Error).message).toMatch(/private, loopback or link-local/);
    }
    expect(requests).toBe(0);
    expect(userMessages(await stack.store.readFrom(id, 0))).toEqual([]);
  });

  it('takes only public addresses', () => {
    for (const address of [
      '127.0.0.1',
      '10.1.2.3',
      '172.16.0.1',
      '192.168.1.1',
      '169.254.169.254',
      '100.64.0.1',
      '0.0.0.0',
      '::1',
      'fe80::1',
      'fd00::1',
      '::ffff:127.0.0.1',
      '::ffff:a00:1',
      '224.0.0.1',
      'not-an-ip',
    ])
      expect(isRefusedAddress(address), address).toBe(true);
    for (const address of ['93.184.216.34', '8.8.8.8', '2606:4700:4700::1111'])
      expect(isRefusedAddress(address), address).toBe(false);
  });
});

describe('forks keep their own copy of the media', () => {
  it("a fork's seed names media stored under the fork's id, which outlive the parent's erasure and reach its next turn", async () => {
    const parent = newId('parent');
    const image = png(6, 4, [40, 50, 60]);
    const sent = await stack.client.send(parent, '', {
      content: [
        { type: 'text', text: 'remember this' },
        { type: 'image', data: image, mediaType: 'image/png' },
      ],
    });
    expect(sent.outcome).toBe('completed');
    const [original] = userMessages(await stack.store.readFrom(parent, 0));
    const parentSource = (original!.data.content[1] as { source: StoredMedia }).source;

    const { sessionId: child } = await stack.client.fork(parent);
    const [copied] = userMessages(await stack.store.readFrom(child, 0));
    const childSource = (copied!.data.content[1] as { source: StoredMedia }).source;
    expect(childSource).toEqual({ ...parentSource, locator: `artifact:${child}/media-${parentSource.sha256}.png` });
    expect((await stack.client.erase(parent)).store.removed.media).toBe(1);

    expect(
      Buffer.from((await stack.client.readMedia(child, childSource.locator)).bytes).equals(Buffer.from(image)),
    ).toBe(true);
    const next = await stack.client.send(child, 'and now?');
    expect(next.outcome, JSON.stringify(next.error)).toBe('completed');
    expect((await stack.client.erase(child)).store.removed.media).toBe(1);
  });
});

describe("the part an error names is the caller's", () => {
  it('with text given beside media-only parts, a bad part is named by its index in the parts sent', async () => {
    const id = newId('index');
    const owner = newId('index-owner');
    const foreign = await stack.client.uploadMedia(owner, { data: png(2, 2), mediaType: 'image/png' });
    const error = await stack.client
      .send(id, 'a caption', {
        content: [
          { type: 'image', data: png(2, 2), mediaType: 'image/png' },
          { type: 'image', artifact: foreign.locator },
        ],
      })
      .catch((e: unknown) => e);
    expect(isSessionlogError(error, 'ARTIFACT_FOREIGN'), String(error)).toBe(true);
    expect((error as { part?: number }).part).toBe(1);
    expect((error as Error).message).toMatch(/^content\[1\]: /);
  });
});
