import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import proto from '@temporalio/proto';

const { temporal } = proto;
import { Worker } from '@temporalio/worker';
import { describe, expect, it } from 'vitest';
import { workflowBundle } from '../../src/worker.js';
import { installQuietRuntime } from '../support/stack.js';

const DIR = new URL('../fixtures/histories/', import.meta.url).pathname;
const files = readdirSync(DIR)
  .filter((f) => f.endsWith('.history.pb'))
  .sort();

describe('recorded workflow histories replay deterministically', () => {
  it('has recorded histories to replay, including turns that wait for an approval and for an external tool', () => {
    expect(files.length).toBeGreaterThanOrEqual(7);
    expect(files).toEqual(
      expect.arrayContaining(['approval.history.pb', 'approval-resumed.history.pb', 'external-tool.history.pb']),
    );
  });

  it.each(files)('replays %s without a determinism error', async (file) => {
    installQuietRuntime();
    const history = temporal.api.history.v1.History.decode(readFileSync(join(DIR, file)));
    await expect(
      Worker.runReplayHistory({ workflowBundle: await workflowBundle() }, history, file),
    ).resolves.toBeUndefined();
  });
});
