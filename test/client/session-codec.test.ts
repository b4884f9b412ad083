/**
 * The session payload codec (DESIGN §5.2) against a real SQLite store's session keys: what it
 * seals opens only as the same session's payload, any change to a sealed payload is refused, and
 * no two seals share an IV (GCM's one requirement; IVs are drawn from the random source a block
 * at a time, so this crosses blocks).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Payload } from '@temporalio/common';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SEALED_ENCODING, SessionPayloadCodec } from '../../src/client/session-codec.js';
import { openSqliteStore } from '../../src/persistence/relational/sqlite/store.js';
import type { SessionStore } from '../../src/persistence/store.js';

const IV_BYTES = 12;

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
        session: new TextEncoder().encode('codec-c'),
        'key-id': new TextEncoder().encode(keyC!.id),
      },
      data,
    };
    await expect(codec.decode([relabelled])).rejects.toMatchObject({ code: 'CORRUPT_LOG' });
  });
});
