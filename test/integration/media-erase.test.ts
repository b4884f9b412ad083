/**
 * Erasing a session that had images (issue 50: "erasing the session leaves no media byte readable
 * in the store or in Temporal"), on SQLite, JSONL and PostgreSQL, through the real stack. The
 * session gets a PNG in a user message and another PNG in a tool's result (stored by the tool
 * with `putMedia`). Each PNG is stored uncompressed with a unique marker as its pixel rows, so
 * its bytes are findable in any file or row:
 *
 * - before the erase the store holds both images (so the checks can fail) and they read back;
 * - no workflow history of the session holds an image, its base64 or its marker: not in any
 *   payload as stored, and not in any sealed payload opened with the session's key (what crossed
 *   Temporal was a reference);
 * - after the erase no file (SQLite: database, -wal and -shm; JSONL: every file under the store)
 *   and no row (PostgreSQL, every table) holds either image's bytes, `readMedia` of each locator
 *   fails, the receipt counts the media, and the workflow histories are gone from Temporal
 *   (polled: the server deletes them in the background).
 */
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { deflateSync } from 'node:zlib';
import type { Payload } from '@temporalio/common';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isGoneFromTemporal } from '../../src/client/erase.js';
import type { EraseReceipt } from '../../src/client/session-client.js';
import { SEALED_ENCODING, SessionPayloadCodec } from '../../src/client/session-codec.js';
import { BUILTIN_TOOLS } from '../../src/tools/builtin.js';
import { ToolRegistry, type Tool } from '../../src/tools/registry.js';
import type { SessionEvent, StoredMedia } from '../../src/session/index.js';
import { inspectMedia } from '../../src/session/media.js';
import { workflowIdFor } from '../../src/workflows/api.js';
import { eventually } from '../support/log-wait.js';
import { StoreStack } from '../support/store-stack.js';
import {
  dropPostgresTestSchemas,
  jsonlFixture,
  postgresFixture,
  probePostgres,
  sqliteFixture,
  tempDir,
  type BackendFixture,
} from '../support/store-fixtures.js';
import { pngChunk } from '../support/media.js';

const postgres = await probePostgres();
if (!postgres.available) console.warn(`media erase tests: PostgreSQL skipped: ${postgres.reason}`);
const FIXTURES: BackendFixture[] = [sqliteFixture, jsonlFixture, ...(postgres.available ? [postgresFixture] : [])];

let counter = 0;
const newId = (name: string) => `media-erase-${name}-${Date.now()}-${counter++}`;

// ---- marked PNGs -----------------------------------------------------------------------------

/** A 64×16 RGB PNG whose every pixel row is `marker` repeated, deflated without compression (the marker stays readable). */
function markedPng(marker: string): Uint8Array {
  const width = 64;
  const height = 16;
  const rowBytes = width * 3;
  const row = Buffer.alloc(rowBytes + 1);
  Buffer.from(marker.repeat(Math.ceil(rowBytes / marker.length)).slice(0, rowBytes), 'ascii').copy(row, 1);
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr[8] = 8;
  ihdr[9] = 2;
  return new Uint8Array(
    Buffer.concat([
      Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
      pngChunk('IHDR', ihdr),
      pngChunk('IDAT', deflateSync(Buffer.concat(Array.from({ length: height }, () => row)), { level: 0 })),
      pngChunk('IEND', new Uint8Array()),
    ]),
  );
}

type Marked = { marker: string; png: Uint8Array; base64: string };
function marked(label: string): Marked {
  const marker = `${label}-${randomBytes(8).toString('hex')}-`;
  const png = markedPng(marker);
  const base64 = Buffer.from(png).toString('base64');
  // A window of the image's base64 from its pixel data (whichever way a copy was encoded, this is in it).
  return { marker, png, base64: base64.slice(base64.length / 2, base64.length / 2 + 48) };
}

// ---- where bytes may be ------------------------------------------------------------------------

function filesUnder(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? filesUnder(join(dir, entry.name)) : [join(dir, entry.name)],
  );
}

function isSerializedBuffer(value: unknown): value is { type: 'Buffer'; data: number[] } {
  return (
    value !== null &&
    typeof value === 'object' &&
    (value as { type?: unknown }).type === 'Buffer' &&
    Array.isArray((value as { data?: unknown }).data)
  );
}

/**
 * A byte array as JSON.stringify wrote it after a structured clone (the fixture reads PostgreSQL
 * in a worker thread, so a bytea column arrives as a Uint8Array): `{"0": 137, "1": 80, …}`.
 */
function serializedBytes(value: object): Buffer | undefined {
  const entries = Object.entries(value);
  if (entries.length === 0) return undefined;
  const bytes = Buffer.alloc(entries.length);
  for (const [i, [key, byte]] of entries.entries()) {
    if (key !== String(i) || typeof byte !== 'number') return undefined;
    bytes[i] = byte;
  }
  return bytes;
}

/** Whether `needle` occurs in any string or byte array inside `value`. */
function holds(value: unknown, needle: string): boolean {
  if (value instanceof Uint8Array) return Buffer.from(value).includes(Buffer.from(needle, 'latin1'));
  if (typeof value === 'string') return value.includes(needle);
  if (isSerializedBuffer(value)) return Buffer.from(value.data).includes(Buffer.from(needle, 'latin1'));
  const bytes =
    value !== null && typeof value === 'object' && !Array.isArray(value) ? serializedBytes(value) : undefined;
  if (bytes) return bytes.includes(Buffer.from(needle, 'latin1'));
  if (Array.isArray(value)) return value.some((item) => holds(item, needle));
  if (value !== null && typeof value === 'object') return Object.values(value).some((item) => holds(item, needle));
  return false;
}

/** Whether anything the backend stores holds `needle`: its files, or (PostgreSQL) any row of any table. */
function storeHolds(fixture: BackendFixture, url: string, needle: string): boolean {
  if (fixture.name === 'postgres')
    return fixture
      .dump(url)
      .split('\n')
      .some((line) => line.length > 0 && holds(JSON.parse(line.slice(line.indexOf(':') + 1)), needle));
  const paths =
    fixture.name === 'sqlite'
      ? ['', '-wal', '-shm'].map((suffix) => `${url.slice('sqlite:'.length)}${suffix}`)
      : filesUnder(url.slice('jsonl:'.length));
  const bytes = Buffer.from(needle, 'latin1');
  return paths.some((path) => existsSync(path) && readFileSync(path).includes(bytes));
}

/** Every payload of a history (the sealed ones and any other). */
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

const isSealed = (payload: Payload) =>
  payload.metadata?.encoding !== undefined && Buffer.from(payload.metadata.encoding).toString() === SEALED_ENCODING;

describe.each(FIXTURES)('erasing a session with images: $name', (fixture) => {
  let world: StoreStack;
  let cleanup: () => void;
  let fromTool: Marked;
  let toolStored: StoredMedia | undefined;

  beforeAll(async () => {
    const temp = tempDir('sessionlog-media-erase-');
    cleanup = temp.cleanup;
    fromTool = marked('tool-image');
    /** A tool that returns a picture, stored in the session's artifact store as the registry documents. */
    const snapshot: Tool = {
      name: 'snapshot',
      description: 'Take a picture.',
      parameters: { type: 'object', properties: {} },
      async run(_args, context) {
        toolStored = await context.artifacts.putMedia({
          sessionId: context.sessionId,
          bytes: fromTool.png,
          ...inspectMedia(fromTool.png, 'image/png', 1 << 20),
        });
        return {
          text: 'here it is',
          content: [
            { type: 'text', text: 'here it is' },
            { type: 'image', source: toolStored },
          ],
        };
      },
    };
    world = new StoreStack(fixture.url(temp.dir), {
      // A new workflow run every turn, so the session has several histories.
      tunables: { continueAsNewAfterTurns: 1 },
      worker: {
        tools: new ToolRegistry([...BUILTIN_TOOLS, snapshot]),
        agent: { model: 'fake', tools: ['read_artifact', 'snapshot'] },
      },
    });
    await world.start();
  }, 120_000);

  afterAll(async () => {
    await world?.stop();
    if (fixture.name === 'postgres') dropPostgresTestSchemas();
    cleanup?.();
  });

  const runsOf = async (id: string): Promise<string[]> => {
    const logged = (await world.client.events(id))
      .filter((e): e is SessionEvent<'session/run'> => e.type === 'session/run')
      .map((e) => e.data.runId);
    const newest = (await world.client.temporal.workflow.getHandle(workflowIdFor(id)).describe()).runId;
    return [...new Set([...logged, newest])];
  };

  it('leaves no byte of its images in the store or in Temporal', async () => {
    const id = newId(fixture.name);
    const sent = marked('user-image');
    const first = await world.client.send(id, 'what is this?', {
      content: [
        { type: 'text', text: 'what is this?' },
        { type: 'image', data: sent.png, mediaType: 'image/png' },
      ],
    });
    expect(first.outcome).toBe('completed');
    world.stack.fake.enqueueReplies(
      { text: 'looking', toolCalls: [{ name: 'snapshot', arguments: {} }] },
      { text: 'a picture' },
    );
    expect((await world.client.send(id, 'take a picture')).outcome).toBe('completed');
    expect((await world.client.send(id, 'thanks')).outcome).toBe('completed');

    // Both images are in the log as references and in the store as bytes (so the checks below can fail).
    const events = await world.client.events(id);
    const logged = JSON.stringify(events);
    const userBlock = events
      .filter((e): e is SessionEvent<'user/message'> => e.type === 'user/message')
      .flatMap((e) => e.data.content)
      .find((b) => b.type === 'image');
    expect(userBlock, 'the user message logged an image block').toBeDefined();
    const userStored = (userBlock as { source: StoredMedia }).source;
    expect(toolStored, 'the tool ran').toBeDefined();
    expect(logged).toContain(toolStored!.locator);
    for (const image of [sent, fromTool]) {
      expect(logged).not.toContain(image.base64);
      expect(storeHolds(fixture, world.url, image.marker), `${image.marker} is stored before the erase`).toBe(true);
    }
    expect(Buffer.from(await world.stack.store.artifacts.readMedia(id, userStored.locator))).toEqual(
      Buffer.from(sent.png),
    );
    expect(Buffer.from(await world.stack.store.artifacts.readMedia(id, toolStored!.locator))).toEqual(
      Buffer.from(fromTool.png),
    );

    // Temporal never held an image: no payload as stored, and no sealed payload opened with the key.
    const runIds = await runsOf(id);
    expect(runIds.length).toBeGreaterThan(1);
    const codec = new SessionPayloadCodec(world.client.store.sessionKeys);
    let sealedCount = 0;
    for (const runId of runIds) {
      const history = await world.client.temporal.workflow.getHandle(workflowIdFor(id), runId).fetchHistory();
      const payloads = payloadsOf(history);
      const sealed = payloads.filter(isSealed);
      sealedCount += sealed.length;
      const opened = await codec.decode(sealed, {
        type: 'workflow',
        namespace: 'default',
        workflowId: workflowIdFor(id),
      });
      for (const image of [sent, fromTool])
        for (const needle of [image.marker, image.base64]) {
          expect(holds(payloads, needle), `run ${runId}: a stored payload holds ${needle}`).toBe(false);
          expect(holds(opened, needle), `run ${runId}: an opened payload holds ${needle}`).toBe(false);
        }
    }
    expect(sealedCount, 'the histories hold sealed payloads that were opened and checked').toBeGreaterThan(0);

    const erased = await world.http('DELETE', `/v1/sessions/${id}`);
    expect(erased.status, JSON.stringify(erased.body)).toBe(200);
    const receipt = (erased.body as { receipt: EraseReceipt }).receipt;
    expect(receipt.store.erased).toBe(true);
    expect(receipt.store.removed.media).toBe(2);

    for (const image of [sent, fromTool])
      for (const needle of [image.marker, image.base64])
        expect(storeHolds(fixture, world.url, needle), `${needle} is left in the store after the erase`).toBe(false);
    for (const locator of [userStored.locator, toolStored!.locator]) {
      const read = await world.stack.store.artifacts.readMedia(id, locator).then(
        () => 'read',
        (error: unknown) => (error as { code?: string }).code ?? String(error),
      );
      expect(read, `readMedia(${locator}) after the erase`).not.toBe('read');
    }

    // The histories go too (the server deletes in the background: polled, bounded).
    const gone = async (runId: string): Promise<boolean> => {
      const handle = world.client.temporal.workflow.getHandle(workflowIdFor(id), runId);
      const described = await handle.describe().then(() => false, isGoneFromTemporal);
      const history = await handle.fetchHistory().then(() => false, isGoneFromTemporal);
      return described && history;
    };
    await eventually(
      async () => ((await Promise.all(runIds.map(gone))).every(Boolean) ? true : undefined),
      180_000,
      250,
    );
  }, 300_000);
});
