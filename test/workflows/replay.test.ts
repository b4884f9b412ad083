import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import proto from '@temporalio/proto';

const { temporal } = proto;
import { Worker } from '@temporalio/worker';
import { describe, expect, it } from 'vitest';
import { SESSION_FAILURE_CONVERTER_PATH, SessionPayloadCodec } from '../../src/client/session-codec.js';
import type { SessionKey, SessionKeyStore } from '../../src/persistence/index.js';
import { workflowBundle } from '../../src/worker.js';
import { installQuietRuntime } from '../support/stack.js';

const DIR = new URL('../fixtures/histories/', import.meta.url).pathname;
const files = readdirSync(DIR)
  .filter((f) => f.endsWith('.history.pb'))
  .sort();

/**
 * The keys the recorded sessions' payloads are sealed with (record-histories.ts writes them):
 * histories recorded before sealing have plain payloads, which the codec passes through.
 */
const recordedKeys = JSON.parse(readFileSync(join(DIR, 'keys.json'), 'utf8')) as Record<
  string,
  { id: string; key: string }
>;
const fixtureKeys: SessionKeyStore = {
  find: (sessionId) => Promise.resolve(keyOf(sessionId)),
  obtain: (sessionId) => {
    const key = keyOf(sessionId);
    return key ? Promise.resolve(key) : Promise.reject(new Error(`no recorded key for ${sessionId}`));
  },
};
function keyOf(sessionId: string): SessionKey | undefined {
  const recorded = recordedKeys[sessionId];
  return recorded && { id: recorded.id, key: Buffer.from(recorded.key, 'base64') };
}

describe('recorded workflow histories replay deterministically', () => {
  it('has recorded histories to replay, including turns that wait for an approval and for an external tool', () => {
    expect(files.length).toBeGreaterThanOrEqual(7);
    expect(files).toEqual(
      expect.arrayContaining(['approval.history.pb', 'approval-resumed.history.pb', 'external-tool.history.pb']),
    );
    // And the same scenarios recorded with caller input in the inbox and every payload sealed.
    expect(files.filter((f) => f.startsWith('sealed-')).length).toBeGreaterThanOrEqual(7);
  });

  it.each(files)('replays %s without a determinism error', async (file) => {
    installQuietRuntime();
    const history = temporal.api.history.v1.History.decode(readFileSync(join(DIR, file)));
    await expect(
      Worker.runReplayHistory(
        {
          workflowBundle: await workflowBundle(),
          dataConverter: {
            payloadCodecs: [new SessionPayloadCodec(fixtureKeys)],
            failureConverterPath: SESSION_FAILURE_CONVERTER_PATH,
          },
        },
        history,
        file,
      ),
    ).resolves.toBeUndefined();
  });
});
