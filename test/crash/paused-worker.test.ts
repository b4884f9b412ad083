/**
 * A worker paused past its heartbeat (issue 8; DESIGN §1.4, §5): a child worker process is
 * stopped with SIGSTOP in the middle of streaming a reply; a second worker takes the step over
 * (with SQLite it may be refused the store while the stopped one holds the write lock; with
 * JSONL it breaks the stale lock); then the first is resumed with SIGCONT and carries on with
 * its stale attempt. Whichever way the race goes, what `send()` reported must be what the log
 * says once every attempt has ended: the outcome and the reply.
 *
 * The stopped worker runs one activity at a time (CHILD_ONE_ACTIVITY), so it has no activity poll
 * open while it streams: the server hands retried tasks to a stopped worker's open polls, where
 * each is lost to a timeout before another worker gets one.
 */
import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SessionClient, type Reply } from '../../src/client/session-client.js';
import { startFakeModelServer, type FakeModelServer } from '../../src/model/fake-server.js';
import { openStore } from '../../src/persistence/open.js';
import type { SessionStore } from '../../src/persistence/store.js';
import {
  textOf,
  verifyLog,
  type KnownEventType,
  type SessionEvent,
  type StoredEvent,
} from '../../src/session/index.js';
import { workflowBundle } from '../../src/worker.js';
import { eventually, waitForEvent } from '../support/log-wait.js';
import { bundleScript, spawnLineChild, type LineChild } from '../support/spawn-ts.js';
import { TEST_TUNABLES, temporalAddress } from '../support/stack.js';
import { BACKENDS, tempDir } from '../support/store-fixtures.js';

const CHILD = 'test/support/worker-child.ts';
/** Each attempt handed to the stopped worker's open poll is lost to a heartbeat timeout: attempts to spare. */
const TUNABLES = { ...TEST_TUNABLES, modelHeartbeatMs: 2_000, modelMaxAttempts: 8 };
/** A reply long enough to stream for a few seconds at the fake's token delay. */
const LONG = Array.from({ length: 80 }, (_, i) => `word${i}`).join(' ');

const ofType = <K extends KnownEventType>(events: readonly StoredEvent[], type: K) =>
  events.filter((e) => e.type === type) as Array<SessionEvent<K>>;

let fake: FakeModelServer;
let connection: Connection;
let bundle: string;
let workflowCode: string;
beforeAll(async () => {
  fake = await startFakeModelServer({ firstTokenDelayMs: 100, tokenDelayMs: 40, matcher: () => ({ text: LONG }) });
  connection = await Connection.connect({ address: temporalAddress() });
  bundle = await bundleScript(CHILD);
  workflowCode = (await workflowBundle()).code;
}, 120_000);
afterAll(async () => {
  await connection?.close();
  await fake?.close();
});

/** The turn's outcome and final reply as the log states them. */
function loggedTurn(
  events: readonly StoredEvent[],
  turn: number,
): { outcome: string | undefined; replySeq: number | null; text: string } {
  const end = ofType(events, 'turn/end').find((e) => e.data.turn === turn);
  const reply = ofType(events, 'assistant/message')
    .filter((e) => e.data.turn === turn)
    .at(-1);
  return {
    outcome: end?.data.reason.kind,
    replySeq: reply?.seq ?? null,
    text: reply ? textOf(reply.data.message.content) : '',
  };
}

/** Model step attempts a worker child (CHILD_DEBUG) started. */
function modelStepAttempts(stderr: string): number {
  return (stderr.match(/activity start modelStep /g) ?? []).length;
}

/** Model step attempts a worker child (CHILD_DEBUG) started and has not finished. */
function modelStepsUnderway(stderr: string): number {
  return modelStepAttempts(stderr) - (stderr.match(/activity (done|failed) modelStep /g) ?? []).length;
}

describe.each(BACKENDS)('a worker paused past its heartbeat, replaced, then resumed: $name', (fixture) => {
  let store: SessionStore;
  let client: SessionClient;
  let cleanup: () => void;
  const children: LineChild[] = [];

  beforeAll(async () => {
    const temp = tempDir('sessionlog-paused-worker-');
    cleanup = temp.cleanup;
    const url = fixture.url(temp.dir);
    const taskQueue = `paused-${randomUUID()}`;
    store = await openStore(url, { pollIntervalMs: 20 });
    client = new SessionClient({
      temporal: new Client({ connection, namespace: 'default' }),
      store,
      taskQueue,
      tunables: TUNABLES,
    });
    const bundlePath = join(temp.dir, 'workflow-bundle.js');
    writeFileSync(bundlePath, workflowCode);
    const env = {
      TEMPORAL_ADDRESS: temporalAddress(),
      SESSIONLOG_STORE: url,
      FAKE_MODEL_BASE_URL: fake.baseURL,
      SESSIONLOG_TASK_QUEUE: taskQueue,
      WORKFLOW_BUNDLE_PATH: bundlePath,
      CHILD_DEBUG: '1',
    };
    // The worker to be stopped has no activity poll open while it streams (see above).
    // Its model stream gives up after 2 s without data, so when it resumes after a longer stop its
    // stale attempt goes on to log a retry (refused: the log has moved on).
    children.push(
      spawnLineChild(bundle, [], { ...env, CHILD_ONE_ACTIVITY: '1', CHILD_MODEL_IDLE_MS: '2000' }),
      spawnLineChild(bundle, [], { ...env, CHILD_WAIT_FOR_GO: '1' }),
    );
  }, 120_000);
  afterAll(async () => {
    for (const child of children) {
      child.process.kill('SIGCONT');
      child.process.kill('SIGTERM');
      const stopped = await Promise.race([child.exited.then(() => true), sleep(15_000).then(() => false)]);
      if (!stopped) child.process.kill('SIGKILL');
      await child.exited;
    }
    await store?.close();
    cleanup?.();
  }, 60_000);

  it('what send() reports equals what the log says: outcome and reply', async () => {
    const [first, second] = children as [LineChild, LineChild];
    await first.waitFor(/"event":"ready"/);
    await second.waitFor(/"event":"armed"/);
    const id = `paused-${fixture.name}-${Date.now()}`;
    try {
      await client.start({ sessionId: id });
      const sent = client.send(id, 'tell me a long story');
      // Mid-stream: the first worker has logged part of the reply.
      await waitForEvent(client, id, (e) => e.type === 'assistant/chunk');
      first.process.kill('SIGSTOP');
      second.send('go');
      await second.waitFor(/"event":"ready"/);
      // Past its heartbeat: the replacement has taken the step over and finished an attempt of it
      // (completed it, or was refused the store while the stopped worker holds its write lock).
      await eventually(
        async () => (/activity (done|failed) modelStep /.test(second.stderr()) ? true : undefined),
        120_000,
        100,
      );
      first.process.kill('SIGCONT');
      const reply: Reply = await sent;
      const atAnswer = await client.events(id);
      // Every attempt either worker had taken ends (the resumed worker's are stale: refused, abandoned or replayed).
      await eventually(
        async () =>
          modelStepsUnderway(first.stderr()) === 0 && modelStepsUnderway(second.stderr()) === 0 ? true : undefined,
        60_000,
        100,
      );
      const events = await client.events(id);

      const logged = loggedTurn(events, 1);
      expect(
        { outcome: reply.outcome, replySeq: reply.replySeq, text: reply.text },
        'send() reports what the log says',
      ).toEqual(logged);
      const replies = ofType(events, 'assistant/message').filter((e) => e.data.turn === 1);
      expect(replies.filter((r) => !r.data.interrupted).length, 'at most one reply for the step').toBeLessThanOrEqual(
        1,
      );
      expect(events, 'nothing was written after send() was answered').toEqual(atAnswer);
      expect(verifyLog(await client.header(id), events)).toEqual([]);
      console.log(
        `paused worker (${fixture.name}): send answered ${reply.outcome}; replacement ran ${modelStepAttempts(second.stderr())} model step attempt(s)`,
      );

      // Both workers serve the session now; the next answer is what the log says too.
      const next = await client.send(id, 'and another one');
      const after = await client.events(id);
      expect({ outcome: next.outcome, replySeq: next.replySeq, text: next.text }).toEqual(loggedTurn(after, 2));
      expect(next.outcome).toBe('completed');
      expect(verifyLog(await client.header(id), after)).toEqual([]);
    } catch (error) {
      console.log(
        `paused worker (${fixture.name}):\n${first.stderr()}\nreplacement:\n${second.stderr()}\nlog: ${JSON.stringify((await client.events(id).catch(() => [])).map((e) => [e.seq, e.type, e.op]))}`,
      );
      throw error;
    }
  }, 240_000);
});
