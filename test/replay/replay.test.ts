import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import proto from '@temporalio/proto';

const { temporal } = proto;
import { Worker } from '@temporalio/worker';
import { describe, expect, it } from 'vitest';
import { workflowBundle } from '../../src/worker.js';
import { installQuietRuntime } from '../support/stack.js';

const DIR = new URL('../fixtures/histories/', import.meta.url).pathname;
const files = readdirSync(DIR).filter((f) => f.endsWith('.history.pb')).sort();

describe('recorded workflow histories replay deterministically', () => {
  it('has recorded histories to replay', () => {
    expect(files.length).toBeGreaterThanOrEqual(4);
  });

  it.each(files)('replays %s without a determinism error', async (file) => {
    installQuietRuntime();
    const history = temporal.api.history.v1.History.decode(readFileSync(join(DIR, file)));
    await expect(Worker.runReplayHistory({ workflowBundle: await workflowBundle() }, history, file)).resolves.toBeUndefined();
  });
});
