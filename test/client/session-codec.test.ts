/**
 * The session payload codec (DESIGN §5.2) against a real SQLite store's session keys: what it
 * seals opens only as the same session's payload, any change to a sealed payload is refused, and
 * no two seals share an IV (GCM's one requirement; IVs are drawn from the random source a block
 * at a time, so this crosses blocks). Its compact form (issue 50) deflates what pays and seals
 * the rest as is; payloads sealed in the first form (histories recorded before) still open, and
 * neither form opens once the session's key is gone.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Payload } from '@temporalio/common';
import proto from '@temporalio/proto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LEGACY_SEALED_ENCODING, SEALED_ENCODING, SessionPayloadCodec } from '../../src/client/session-codec.js';
import type { SessionKey, SessionKeyStore } from '../../src/persistence/index.js';
import { openSqliteStore } from '../../src/persistence/relational/sqlite/store.js';
import type { SessionStore } from '../../src/persistence/store.js';

const { temporal } = proto;
const IV_BYTES = 12;
const TAG_BYTES = 16;
const HISTORIES = new URL('../fixtures/histories/', import.meta.url).pathname;

/** A payload sealed the way the codec sealed them before issue 50 (its code as it was then). */
function legacySeal(payload: Payload, sessionId: string, key: SessionKey): Payload {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', key.key, iv);
  cipher.setAAD(new TextEncoder().encode(sessionId));
  const plain = temporal.api.common.v1.Payload.encode(payload).finish();
  return {
    metadata: {
      encoding: new TextEncoder().encode('binary/sessionlog-sealed'),
      session: new TextEncoder().encode(sessionId),
      'key-id': new TextEncoder().encode(key.id),
    },
    data: Buffer.concat([iv, cipher.update(plain), cipher.final(), cipher.getAuthTag()]),
  };
}

/** The plaintext of a sealed payload, opened by hand with the session's key. */
function plaintextOf(sealed: Payload, sessionId: string, key: SessionKey): Buffer {
  const data = Buffer.from(sealed.data!);
  const decipher = createDecipheriv('aes-256-gcm', key.key, data.subarray(0, IV_BYTES));
  decipher.setAAD(new TextEncoder().encode(sessionId));
  decipher.setAuthTag(data.subarray(data.length - TAG_BYTES));
  return Buffer.concat([decipher.update(data.subarray(IV_BYTES, data.length - TAG_BYTES)), decipher.final()]);
}

/** Session keys held in memory, which a test can erase. */
function memoryKeys(): SessionKeyStore & { erase(sessionId: string): void } {
  const keys = new Map<string, SessionKey>();
  return {
    obtain: (sessionId) => {
      if (!keys.has(sessionId)) keys.set(sessionId, { id: randomBytes(8).toString('hex'), key: randomBytes(32) });
      return Promise.resolve(keys.get(sessionId)!);
    },
    find: (sessionId) => Promise.resolve(keys.get(sessionId)),
    erase: (sessionId) => void keys.delete(sessionId),
  };
}

function payload(text: string): Payload {
  return { metadata: { encoding: new TextEncoder().encode('json/plain') }, data: new TextEncoder().encode(text) };
}

function workflowOf(sessionId: string) {
  return { namespace: 'default', workflowId: `session/${sessionId}` };
}

describe('SessionPayloadCodec', () => {
  let dir: string;
  let store: SessionStore;
  let codec: SessionPayloadCodec;

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'sessionlog-codec-'));
    store = openSqliteStore(join(dir, 'sessions.db'));
    codec = new SessionPayloadCodec(store.sessionKeys);
  });

  afterAll(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('opens what it sealed, and leaves payloads of other workflows as they are', async () => {
    const plain = [payload('"hello"'), payload('{"turn":1}')];
    const sealed = await codec.encode(plain, { type: 'workflow', ...workflowOf('codec-a') });
    for (const p of sealed) expect(new TextDecoder().decode(p.metadata!.encoding)).toBe(SEALED_ENCODING);
    expect(sealed.map((p) => Buffer.from(p.data!).includes(Buffer.from('hello')))).toEqual([false, false]);
    const opened = await codec.decode(sealed, { type: 'workflow', ...workflowOf('codec-a') });
    expect(opened.map((p) => new TextDecoder().decode(p.data))).toEqual(['"hello"', '{"turn":1}']);
    const other = await codec.encode(plain, { type: 'workflow', namespace: 'default', workflowId: 'other/1' });
    expect(other).toEqual(plain);
  });

  it('gives every seal its own IV, across the blocks they are drawn in', async () => {
    const count = 2_500;
    const sealed = await codec.encode(
      Array.from({ length: count }, (_, i) => payload(String(i))),
      { type: 'workflow', ...workflowOf('codec-iv') },
    );
    const ivs = new Set(sealed.map((p) => Buffer.from(p.data!).subarray(0, IV_BYTES).toString('hex')));
    expect(ivs.size).toBe(count);
    const opened = await codec.decode(sealed, { type: 'workflow', ...workflowOf('codec-iv') });
    expect(opened.map((p) => new TextDecoder().decode(p.data))).toEqual(
      Array.from({ length: count }, (_, i) => String(i)),
    );
  });

  it('refuses a sealed payload with any byte changed, and one relabelled as another session', async () => {
    const [sealed] = await codec.encode([payload('"secret"')], { type: 'workflow', ...workflowOf('codec-b') });
    await codec.encode([payload('"x"')], { type: 'workflow', ...workflowOf('codec-c') });
    const data = Buffer.from(sealed!.data!);
    for (const at of [0, IV_BYTES, data.length - 1]) {
      const damaged = Buffer.from(data);
      damaged[at]! ^= 1;
      await expect(codec.decode([{ ...sealed!, data: damaged }])).rejects.toMatchObject({ code: 'CORRUPT_LOG' });
    }
    // The session id is the additional data: relabelled (and given that session's key id), it does not open.
    const keyC = await store.sessionKeys.find('codec-c');
    const relabelled: Payload = {
      metadata: {
        ...sealed!.metadata,
        s: new TextEncoder().encode('codec-c'),
        k: new TextEncoder().encode(keyC!.id),
      },
      data,
    };
    await expect(codec.decode([relabelled])).rejects.toMatchObject({ code: 'CORRUPT_LOG' });
  });

  it('deflates a payload when that is smaller, seals a short or incompressible one as is, and opens both', async () => {
    const context = { type: 'workflow' as const, ...workflowOf('codec-deflate') };
    const repetitive = JSON.stringify({
      entering: Array.from({ length: 20 }, (_, i) => ({ id: `message-${i}`, bytes: 88 })),
    });
    const noise: Payload = { metadata: { encoding: new TextEncoder().encode('binary/plain') }, data: randomBytes(400) };
    const plain = [payload(repetitive), payload('"hi"'), noise];
    const sealed = await codec.encode(plain, context);
    const key = (await store.sessionKeys.find('codec-deflate'))!;
    const encodedSizes = plain.map((p) => temporal.api.common.v1.Payload.encode(p).finish().length);
    const flags = sealed.map((p) => plaintextOf(p, 'codec-deflate', key)[0]);
    expect(flags).toEqual([1, 0, 0]);
    // Deflated: far smaller than the encoded payload; as is: the payload, its flag byte, IV and tag.
    expect(sealed[0]!.data!.length).toBeLessThan(encodedSizes[0]! / 2);
    expect(sealed[1]!.data!.length).toBe(encodedSizes[1]! + 1 + IV_BYTES + TAG_BYTES);
    expect(sealed[2]!.data!.length).toBe(encodedSizes[2]! + 1 + IV_BYTES + TAG_BYTES);
    for (const p of sealed) {
      expect(Object.keys(p.metadata!).sort()).toEqual(['encoding', 'k', 's']);
      expect(new TextDecoder().decode(p.metadata!.s)).toBe('codec-deflate');
      expect(new TextDecoder().decode(p.metadata!.k)).toBe(key.id);
    }
    expect(Buffer.from(sealed[0]!.data!).includes(Buffer.from('message-1'))).toBe(false);
    const opened = await codec.decode(sealed, context);
    const bytesOf = (ps: Payload[]) =>
      ps.map((p) => ({
        encoding: Buffer.from(p.metadata!.encoding!).toString('hex'),
        data: Buffer.from(p.data!).toString('hex'),
      }));
    expect(bytesOf(opened)).toEqual(bytesOf(plain));
    // Without a serialization context the payload still names its session.
    const contextless = await codec.decode(sealed);
    expect(bytesOf(contextless)).toEqual(bytesOf(plain));
  });

  it('opens payloads sealed in the first form: built by its code, and recorded in a fixture history', async () => {
    const key = await store.sessionKeys.obtain('codec-legacy');
    const old = legacySeal(payload('{"turn":7}'), 'codec-legacy', key);
    const [opened] = await codec.decode([old], { type: 'workflow', ...workflowOf('codec-legacy') });
    expect(new TextDecoder().decode(opened!.data)).toBe('{"turn":7}');
    expect(new TextDecoder().decode(opened!.metadata!.encoding)).toBe('json/plain');
    // Altered, it is refused like a new one.
    const damaged = Buffer.from(old.data!);
    damaged[IV_BYTES]! ^= 1;
    await expect(codec.decode([{ ...old, data: damaged }])).rejects.toMatchObject({ code: 'CORRUPT_LOG' });

    // A history recorded before issue 50 (test/fixtures/histories), opened with its recorded keys.
    const recorded = JSON.parse(readFileSync(join(HISTORIES, 'keys.json'), 'utf8')) as Record<
      string,
      { id: string; key: string }
    >;
    const fixtureCodec = new SessionPayloadCodec({
      find: (sessionId) =>
        Promise.resolve(
          recorded[sessionId] && { id: recorded[sessionId].id, key: Buffer.from(recorded[sessionId].key, 'base64') },
        ),
      obtain: () => Promise.reject(new Error('no new keys in this test')),
    });
    const history = temporal.api.history.v1.History.decode(
      readFileSync(join(HISTORIES, 'sealed-tools-and-close.history.pb')),
    );
    const legacyPayloads: Payload[] = [];
    const collect = (value: unknown): void => {
      if (value === null || typeof value !== 'object' || value instanceof Uint8Array) return;
      const metadata = (value as Payload).metadata;
      if (metadata?.encoding && new TextDecoder().decode(metadata.encoding) === LEGACY_SEALED_ENCODING)
        legacyPayloads.push(value as Payload);
      else for (const child of Object.values(value)) collect(child);
    };
    collect(history.events);
    expect(legacyPayloads.length).toBeGreaterThan(4);
    const openedAll = await fixtureCodec.decode(legacyPayloads);
    for (const p of openedAll) {
      expect(new TextDecoder().decode(p.metadata!.encoding)).toMatch(/^(json\/plain|binary\/null)$/);
    }
    expect(
      openedAll.some((p) => new TextDecoder().decode(p.metadata!.encoding) === 'json/plain' && p.data!.length > 0),
    ).toBe(true);
  });

  it('reads a stored key without a write when an encode misses its cache, and makes one only when none is stored', async () => {
    const keys = memoryKeys();
    const made = await keys.obtain('codec-stored');
    const calls: string[] = [];
    const counted: SessionKeyStore = {
      obtain: (sessionId) => (calls.push(`obtain ${sessionId}`), keys.obtain(sessionId)),
      find: (sessionId) => (calls.push(`find ${sessionId}`), keys.find(sessionId)),
    };
    const fresh = new SessionPayloadCodec(counted);
    const sealed = await fresh.encode([payload('"a"')], { type: 'workflow', ...workflowOf('codec-stored') });
    expect(plaintextOf(sealed[0]!, 'codec-stored', made).subarray(1).toString()).toContain('"a"');
    await fresh.encode([payload('"b"')], { type: 'workflow', ...workflowOf('codec-new') });
    expect(calls).toEqual(['find codec-stored', 'find codec-new', 'obtain codec-new']);
  });

  it('opens neither form once the session key is erased', async () => {
    const keys = memoryKeys();
    const memoryCodec = new SessionPayloadCodec(keys);
    const context = { type: 'workflow' as const, ...workflowOf('codec-erased') };
    const long = JSON.stringify({ text: 'lorem ipsum dolor sit amet '.repeat(20) });
    const sealed = await memoryCodec.encode([payload(long), payload('"short"')], context);
    const old = legacySeal(payload(long), 'codec-erased', (await keys.find('codec-erased'))!);
    expect(await memoryCodec.decode([...sealed, old], context)).toHaveLength(3);
    keys.erase('codec-erased');
    for (const p of [...sealed, old]) {
      // A fresh codec (no key cached) and the one that sealed them (its cache holds the erased key's
      // promise until told to forget it, as erase.ts does).
      memoryCodec.forget('codec-erased');
      for (const c of [new SessionPayloadCodec(keys), memoryCodec])
        await expect(c.decode([p], context)).rejects.toMatchObject({ code: 'SESSION_ERASED' });
    }
  });
});
