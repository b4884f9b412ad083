/**
 * A store that refuses writes for a long while (DESIGN §5; issue 8): here another connection
 * holds SQLite's write lock, as a worker stopped inside its write transaction does. The model
 * step gives up after its attempts; closing the turn keeps retrying past any fixed number of
 * attempts instead of failing the session's workflow (which answered every waiting `send` with a
 * bare "Workflow Update failed"). Once the lock is gone the turn is closed, `send` answers what
 * the log says, and the session keeps working.
 */
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inboxKeys } from '../../src/persistence/index.js';
import { openStore } from '../../src/persistence/open.js';
import { verifyLog, type KnownEventType, type SessionEvent, type StoredEvent } from '../../src/session/index.js';
import { eventually, waitForEvent } from '../support/log-wait.js';
import { startStack, type Stack } from '../support/stack.js';
import { tempDir } from '../support/store-fixtures.js';

/** More attempts than the local activities' retry policy used to allow before the workflow failed. */
const PAST_THE_OLD_LIMIT = 11;

const ofType = <K extends KnownEventType>(events: readonly StoredEvent[], type: K) =>
  events.filter((e) => e.type === type) as Array<SessionEvent<K>>;

let stack: Stack;
let path: string;
let cleanup: () => void;
/** Attempts of the `endTurn` local activity seen by the worker. */
let endTurnAttempts = 0;

beforeAll(async () => {
  const temp = tempDir('sessionlog-unavailable-');
  cleanup = temp.cleanup;
  path = join(temp.dir, 'sessions.db');
  stack = await startStack({
    // A refused write is UNAVAILABLE after 100 ms, so attempts go by quickly.
    store: await openStore(`sqlite:${path}`, { busyTimeoutMs: 100 }),
    tunables: { modelMaxAttempts: 2 },
    worker: {
      workerOptions: {
        maxHeartbeatThrottleInterval: '500ms',
        defaultHeartbeatThrottleInterval: '500ms',
        interceptors: {
          activity: [
            (ctx) => {
              if (ctx.info.activityType === 'endTurn') endTurnAttempts = Math.max(endTurnAttempts, ctx.info.attempt);
              return {};
            },
          ],
        },
      },
    },
  });
});
afterAll(async () => {
  await stack?.close();
  cleanup?.();
});

describe('a store that refuses writes past every retry', () => {
  it('does not fail the session: once writes succeed again the turn is closed and send answers what the log says', async () => {
    const id = `unavailable-${Date.now()}`;
    expect((await stack.client.send(id, 'first')).outcome).toBe('completed');

    // A slow reply, so the store can be locked while the turn streams (its turn/start is logged).
    stack.fake.enqueueReplies({ text: Array.from({ length: 60 }, (_, i) => `w${i}`).join(' ') });
    stack.fake.configure({ tokenDelayMs: 40 });
    const sent = stack.client.send(id, 'second');
    await waitForEvent(
      stack.client,
      id,
      (e) => e.type === 'assistant/chunk' && (e as SessionEvent<'assistant/chunk'>).data.turn === 2,
    );
    const blocker = new Database(path);
    try {
      blocker.exec('BEGIN IMMEDIATE');
      // A workflow that gave up would answer the send now; one that keeps retrying gets past the old limit.
      const settled = sent.then(
        (reply) => ({ reply }),
        (error: unknown) => ({ error }),
      );
      const outcome = await Promise.race([
        settled,
        eventually(
          async () => (endTurnAttempts >= PAST_THE_OLD_LIMIT ? ('retrying' as const) : undefined),
          120_000,
          100,
        ),
      ]);
      expect(outcome, 'the send is still waiting while the store refuses writes').toBe('retrying');
    } finally {
      if (blocker.inTransaction) blocker.exec('ROLLBACK');
      blocker.close();
    }

    const reply = await sent;
    const events = await stack.client.events(id);
    const end = ofType(events, 'turn/end').find((e) => e.data.turn === 2);
    expect(end?.data.reason.kind).toBe('error');
    expect(reply.outcome).toBe(end?.data.reason.kind);
    expect(reply.turn).toBe(2);
    expect(verifyLog(await stack.client.header(id), events)).toEqual([]);
    expect(await stack.client.isRunning(id)).toBe(true);
    const third = await stack.client.send(id, 'third');
    expect(third.outcome).toBe('completed');
    expect(third.turn).toBe(3);
    expect(third.text).toBe('echo: third');
  }, 180_000);

  it('keeps a send whose turn the store never took waiting (nothing logged, turn number given back) until the store takes it', async () => {
    const id = `unavailable-start-${Date.now()}`;
    expect((await stack.client.send(id, 'first')).turn).toBe(1);
    const before = await stack.client.events(id);
    // The message reached the inbox before the store stopped taking writes (DESIGN §5.2): the
    // send finds it there (a read), so the update reaches the workflow, whose steps cannot log it.
    await stack.store.inbox.put(id, inboxKeys.message('second-msg'), JSON.stringify({ text: 'second' }));
    const blocker = new Database(path);
    let sent: Promise<unknown> | undefined;
    try {
      blocker.exec('BEGIN IMMEDIATE');
      // Every attempt of the model step finds the store locked before it can log turn 2.
      sent = stack.client.send(id, 'second', { id: 'second-msg' });
      const status = await eventually(
        async () => {
          const current = await stack.client.status(id);
          return current.lastError?.includes('could not be logged') ? current : undefined;
        },
        120_000,
        200,
      );
      expect(status.lastError).toMatch(/turn 2 could not be logged, trying again/);
      expect((await stack.client.events(id)).length).toBe(before.length);
    } finally {
      if (blocker.inTransaction) blocker.exec('ROLLBACK');
      blocker.close();
    }
    // Turn 2 again (no LOG_BEHIND): the waiting send is answered by it.
    expect(await sent).toMatchObject({ turn: 2, outcome: 'completed', text: 'echo: second' });
    const events = await stack.client.events(id);
    expect(ofType(events, 'user/message').map((m) => m.data.id)).toEqual([expect.any(String), 'second-msg']);
    expect(verifyLog(await stack.client.header(id), events)).toEqual([]);
    expect(await stack.client.send(id, 'third')).toMatchObject({ turn: 3, outcome: 'completed' });
  }, 180_000);
});
