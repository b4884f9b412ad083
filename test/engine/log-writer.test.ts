/**
 * The fenced log writer (src/engine/log-writer.ts) on real stores: a writer appends only right
 * after what it last saw. Two attempts of one run (a worker paused past its heartbeat and the
 * attempt that replaced it) share the store's validated copy in one process, and any read brings
 * that copy up to date; the stale attempt must still be refused, not write at the new head.
 */
import { ApplicationFailure } from '@temporalio/common';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { toTemporalFailure } from '../../src/activities/failures.js';
import { LogWriter } from '../../src/engine/log-writer.js';
import { openStore } from '../../src/persistence/open.js';
import type { SessionStore } from '../../src/persistence/store.js';
import { SESSION_FORMAT_VERSION, SessionlogError, isSessionlogError, type NewEvent } from '../../src/session/index.js';
import { BACKENDS, tempDir } from '../support/store-fixtures.js';

const RUN = 'run-1';
const ID = 'writer-fence';
const turnStart = (turn: number): NewEvent => ({ type: 'turn/start', time: 1, data: { turn } });

async function refusalCode(attempt: Promise<unknown>): Promise<string | undefined> {
  try {
    await attempt;
  } catch (error) {
    if (isSessionlogError(error)) return error.code;
    throw error;
  }
  return undefined;
}

describe.each(BACKENDS)('LogWriter fence: $name', (fixture) => {
  let store: SessionStore;
  let cleanup: () => void;
  beforeEach(async () => {
    const temp = tempDir('sessionlog-writer-');
    cleanup = temp.cleanup;
    store = await openStore(fixture.url(temp.dir));
    await store.create({ version: SESSION_FORMAT_VERSION, id: ID, createdAt: 1 });
    const owner = await LogWriter.takeOver(store, ID, RUN);
    await owner.claim(
      { type: 'session/run', time: 1, data: { workflowId: `session/${ID}`, runId: RUN } },
      `${RUN}/run`,
    );
  });
  afterEach(async () => {
    await store.close();
    cleanup();
  });

  it('a stale attempt of the same run is refused with SEQ_CONFLICT after another attempt appended, even once its view caught up', async () => {
    const stale = await LogWriter.open(store, ID, RUN, await store.nextSeq(ID));
    const current = await LogWriter.open(store, ID, RUN, await store.nextSeq(ID));
    const [written] = await current.append([turnStart(1)], `${RUN}/t1/s1/a2/start`);
    // The shared copy the stale writer reads is up to date now (the current attempt's append and
    // this read both brought it there); the stale writer must not take its head from it.
    expect((await store.session(ID)).nextSeq).toBe(written!.seq + 1);
    expect(await refusalCode(stale.append([turnStart(1)], `${RUN}/t1/s1/a1/start`))).toBe('SEQ_CONFLICT');
    expect(
      await refusalCode(stale.append([turnStart(1)], `${RUN}/t1/s1/a1/retry`)),
      'refused again after its own failed append',
    ).toBe('SEQ_CONFLICT');
    // A batch the other attempt already stored is still found under its op (exactly once).
    expect((await stale.append([turnStart(1)], `${RUN}/t1/s1/a2/start`)).map((e) => e.seq)).toEqual([written!.seq]);
    expect((await store.readFrom(ID, 0)).map((e) => e.op)).toEqual([`${RUN}/run`, `${RUN}/t1/s1/a2/start`]);
  });

  it('a run whose session a newer run has claimed is refused with LOG_AHEAD (it stops), not a retryable conflict', async () => {
    const old = await LogWriter.open(store, ID, RUN, await store.nextSeq(ID));
    const newer = await LogWriter.takeOver(store, ID, 'run-2');
    await newer.claim(
      { type: 'session/run', time: 2, data: { workflowId: `session/${ID}`, runId: 'run-2' } },
      'run-2/run',
    );
    expect(await refusalCode(old.append([turnStart(1)], `${RUN}/t1/s1/start`))).toBe('LOG_AHEAD');
  });

  it('a writer appends its own batches one after another', async () => {
    const writer = await LogWriter.open(store, ID, RUN, await store.nextSeq(ID));
    await writer.append([turnStart(1)], `${RUN}/t1/s1/start`);
    await writer.append(
      [{ type: 'turn/end', time: 1, data: { turn: 1, reason: { kind: 'completed' } } }],
      `${RUN}/t1/end`,
    );
    expect((await store.readFrom(ID, 0)).map((e) => e.type)).toEqual(['session/run', 'turn/start', 'turn/end']);
  });
});

describe('what the activities retry', () => {
  it('retries a SEQ_CONFLICT (another attempt of the step wrote meanwhile: the retry opens afresh)', () => {
    const failure = toTemporalFailure(new SessionlogError('SEQ_CONFLICT', 'expected seq 4, stored 6'));
    expect(failure).toBeInstanceOf(ApplicationFailure);
    expect(failure).toMatchObject({ type: 'SEQ_CONFLICT', nonRetryable: false });
  });

  it('does not retry the head checks that stop a run', () => {
    for (const code of ['LOG_AHEAD', 'LOG_BEHIND'] as const)
      expect(toTemporalFailure(new SessionlogError(code, 'stop'))).toMatchObject({ type: code, nonRetryable: true });
  });
});
