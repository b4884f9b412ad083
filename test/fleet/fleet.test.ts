/**
 * The fleet test (DESIGN §8.1, §10): the production topology of test/fleet/topology.ts run
 * natively (the full Temporal server on a private PostgreSQL, sessionlog's store on a second
 * private PostgreSQL, 3 `sessionlog worker` and 2 `sessionlog serve` processes, one fake model
 * server all workers share) and broken on purpose while it serves traffic.
 *
 * A driver sends several turns to each session over HTTP (`POST …/messages?wait=true`, the
 * sessions spread over the two gateways, a failed attempt retried with the same message id on
 * the other gateway), while an SSE follower tails each session through the other gateway. During
 * the run: workers are SIGKILLed at random and replaced, one gateway is SIGKILLed and restarted
 * (its followers reconnect with Last-Event-ID), the Temporal server is restarted, and the
 * store's PostgreSQL is killed with -9 and restarted. Afterwards:
 *
 * - every acknowledged message is in its session's log exactly once and answered exactly once,
 *   by the reply the gateway returned; no assistant message is duplicated;
 * - seqs are contiguous and every turn is closed;
 * - every follower received every event exactly once, in order, as stored;
 * - `sessionlog sessions verify` passes for every session;
 * - the full Temporal server never held a session's text; erasing it through a gateway leaves
 *   nothing of it in the store or the server, and no process's log held the text;
 * - no worker or gateway exited except those killed on purpose, and SIGTERM drains them all
 *   with exit status 0.
 *
 * `npm test` runs a short version; `npm run test:fleet` (FLEET_FULL=1) the full one: 40
 * sessions, 6 turns each, 12 worker kills. FLEET_SESSIONS, FLEET_TURNS, FLEET_WORKER_KILLS and
 * FLEET_SEED override; FLEET_KEEP=1 keeps the processes' logs (the directory is printed).
 */
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { Client, Connection } from '@temporalio/client';
import proto from '@temporalio/proto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EraseReceipt } from '../../src/client/session-client.js';
import { isGoneFromTemporal } from '../../src/client/erase.js';
import { SessionPayloadCodec } from '../../src/client/session-codec.js';
import { startFakeModelServer, type FakeModelServer } from '../../src/model/fake-server.js';
import { openStore } from '../../src/persistence/open.js';
import type { SessionStore } from '../../src/persistence/store.js';
import { isEventOfType, type SessionEvent, type StoredEvent } from '../../src/session/index.js';
import { workflowIdFor } from '../../src/workflows/api.js';
import { Fleet, ROOT } from './harness.js';
import { HttpDriver, SseFollower, type Ack } from './traffic.js';

const FULL = process.env.FLEET_FULL === '1';
const setting = (name: string, fallback: number): number => (process.env[name] ? Number(process.env[name]) : fallback);
const SESSIONS = setting('FLEET_SESSIONS', FULL ? 40 : 12);
const TURNS = setting('FLEET_TURNS', FULL ? 6 : 3);
const WORKER_KILLS = setting('FLEET_WORKER_KILLS', FULL ? 12 : 3);
const SEED = setting('FLEET_SEED', Date.now() % 1_000_000);
const TOKEN = 'fleet-test-token-0123456789abcdef';
/** A model call on a killed worker is retried elsewhere after this long without a heartbeat. */
const MODEL_HEARTBEAT_MS = 3_000;
/** Kills and outages each cost an attempt; the budget is far above what they can use up. */
const MODEL_MAX_ATTEMPTS = 30;
/** The reply streams in ~15 chunks over ~300 ms, so kills land mid-stream. */
const TOKEN_DELAY_MS = 20;
/** Bound on the followers catching up with the stored logs after the last reply. */
const CATCH_UP_MS = 120_000;

function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const rng = mulberry32(SEED);

const dir = mkdtempSync(join(tmpdir(), 'sessionlog-fleet-'));
const runId = randomUUID().slice(0, 8);
const sessionIds = Array.from({ length: SESSIONS }, (_, i) => `fleet-${runId}-s${i}`);
const messageText = (session: number, turn: number) =>
  `turn ${turn} of session ${session}: alpha bravo charlie delta echo foxtrot golf hotel india juliet`;

let fake: FakeModelServer;
let fleet: Fleet | undefined;
let passed = false;

beforeAll(async () => {
  console.log(
    `fleet test: ${FULL ? 'full' : 'short'} run, ${SESSIONS} sessions × ${TURNS} turns, ${WORKER_KILLS} worker kills, seed ${SEED}, logs in ${dir}/logs`,
  );
  fake = await startFakeModelServer({ tokenDelayMs: TOKEN_DELAY_MS });
  fleet = await Fleet.start({
    dir,
    workers: 3,
    gateways: 2,
    modelBaseUrl: fake.baseURL,
    token: TOKEN,
    modelHeartbeatMs: MODEL_HEARTBEAT_MS,
    modelMaxAttempts: MODEL_MAX_ATTEMPTS,
  });
}, 40 * 60_000);

afterAll(async () => {
  await fleet?.forceStop();
  await fake?.close();
  if (passed && process.env.FLEET_KEEP !== '1') rmSync(dir, { recursive: true, force: true });
  else console.log(`fleet test: logs kept in ${dir}/logs`);
}, 120_000);

type ChaosStep = { at: number; name: string; run: () => Promise<void> };

/**
 * Erasure on the production topology (DESIGN §4.2, §5.2): the full Temporal server never held a
 * session's text, not even before the erase (its histories hold sealed references); after
 * `DELETE /v1/sessions/:id` through a gateway the store holds nothing of it (log, inbox, data
 * key), what the server has not deleted yet cannot be opened, and no worker or gateway log line
 * held the text.
 */
async function eraseOneSession(f: Fleet, store: SessionStore): Promise<void> {
  const id = sessionIds[0]!;
  const text = messageText(0, 1);
  expect(JSON.stringify(await store.readFrom(id, 0)), 'the log holds the text').toContain(text);
  const connection = await Connection.connect({ address: f.endpoints.temporalAddress });
  try {
    const temporal = new Client({ connection, namespace: 'default' });
    const runs: string[] = [];
    for await (const run of temporal.workflow.list({ query: `WorkflowId = '${workflowIdFor(id)}'` }))
      runs.push(run.runId);
    expect(runs.length).toBeGreaterThan(0);
    for (const runId of runs) {
      const history = await temporal.workflow.getHandle(workflowIdFor(id), runId).fetchHistory();
      const bytes = Buffer.from(proto.temporal.api.history.v1.History.encode(history).finish());
      expect(bytes.includes(Buffer.from(text)), `run ${runId} holds the text`).toBe(false);
    }
    const erased = await fetch(`${f.gatewayUrl(0)}/v1/sessions/${id}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(erased.status).toBe(200);
    const { receipt } = (await erased.json()) as { receipt: EraseReceipt };
    expect(receipt.store.removed).toMatchObject({ header: 1, sessionKey: 1 });
    expect(receipt.temporal.deletedRuns).toBeGreaterThanOrEqual(runs.length);
    expect(await store.exists(id)).toBe(false);
    expect(await store.inbox.list(id)).toEqual([]);
    expect(await store.sessionKeys.find(id)).toBeUndefined();
    // The server deletes asynchronously (a run just terminated may keep its history a while):
    // whatever is still there holds only payloads sealed with the destroyed key, which no one can open.
    const codec = new SessionPayloadCodec(store.sessionKeys);
    const context = { type: 'workflow' as const, namespace: 'default', workflowId: workflowIdFor(id) };
    let left = 0;
    for (const runId of runs) {
      const history = await temporal.workflow
        .getHandle(workflowIdFor(id), runId)
        .fetchHistory()
        .catch((error: unknown) => {
          if (isGoneFromTemporal(error)) return undefined;
          throw error;
        });
      if (!history) continue;
      left += 1;
      const bytes = Buffer.from(proto.temporal.api.history.v1.History.encode(history).finish());
      expect(bytes.includes(Buffer.from(text)), `run ${runId} holds the text after the erase`).toBe(false);
      const sealed = history.events!.flatMap(
        (event) => event.workflowExecutionStartedEventAttributes?.input?.payloads ?? [],
      );
      for (const payload of sealed) {
        const opened = await codec.decode([payload], context).then(
          () => 'opened',
          (error: unknown) => (error as { code?: string }).code,
        );
        expect(opened, `run ${runId}'s start input after the erase`).toBe('SESSION_ERASED');
      }
    }
    console.log(
      `fleet test: erased ${id}; ${left} of ${runs.length} histories not yet deleted by the server, none readable`,
    );
  } finally {
    await connection.close();
  }
  const logged = f.history.flatMap((p) => p.lines).filter((line) => line.includes(text));
  expect(logged, 'worker and gateway log lines holding the text').toEqual([]);
}

/** Waits (bounded) until `ready` holds; returns whether it did. */
async function until(ready: () => boolean, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (!ready()) {
    if (Date.now() > deadline) return false;
    await sleep(20);
  }
  return true;
}

/**
 * The faults, each at a fraction of the acknowledged messages, in order. Each waits (bounded)
 * until requests are under way, so it lands on a busy fleet; `counts.underLoad` says how many did.
 */
function chaosPlan(f: Fleet, driver: HttpDriver, counts: Record<string, number>): ChaosStep[] {
  const busy = async (url?: string) => {
    if (await until(() => driver.inFlight(url) > 0, 10_000)) counts.underLoad! += 1;
  };
  const steps: ChaosStep[] = [];
  for (let k = 0; k < WORKER_KILLS; k++) {
    steps.push({
      at: 0.05 + (0.75 * (k + 0.5)) / WORKER_KILLS,
      name: 'worker SIGKILL',
      run: async () => {
        // Kill a polling worker while another one polls too (a replacement takes seconds to start).
        const polling = () =>
          f.workers.map((w, slot) => ({ w, slot })).filter(({ w }) => w.lines.some((l) => / worker on /.test(l)));
        await until(() => polling().length >= 2, 60_000);
        const pool = polling().length > 0 ? polling() : f.workers.map((w, slot) => ({ w, slot }));
        const { slot } = pool[Math.floor(rng() * pool.length)]!;
        await busy();
        await f.killWorker(slot);
        counts.workerKills! += 1;
      },
    });
  }
  steps.push({
    at: 0.2,
    name: 'gateway SIGKILL and restart',
    run: async () => {
      const slot = Math.floor(rng() * f.gateways.length);
      await busy(f.gatewayUrl(slot));
      await f.killGateway(slot);
      counts.gatewayKills! += 1;
      await sleep(1_000);
      await f.restartGateway(slot);
    },
  });
  steps.push({
    at: 0.4,
    name: 'Temporal server restart',
    run: async () => {
      await busy();
      await f.temporal.restart();
      counts.temporalRestarts! += 1;
    },
  });
  steps.push({
    at: 0.6,
    name: 'store PostgreSQL kill -9 and restart',
    run: async () => {
      await busy();
      await f.storeDatabase!.kill();
      counts.storeKills! += 1;
      await sleep(1_000);
      await f.storeDatabase!.start();
    },
  });
  return steps.sort((a, b) => a.at - b.at);
}

const typed = <T extends SessionEvent['type']>(events: StoredEvent[], type: T): Array<SessionEvent<T>> =>
  events.flatMap((e) => (isEventOfType(e, type) ? [e] : []));

/** The per-session invariants; returns a list of what is wrong (empty when all hold). */
function checkSession(sessionId: string, stored: StoredEvent[], acks: Ack[], follower: SseFollower): string[] {
  const problems: string[] = [];
  const problem = (what: string) => problems.push(`${sessionId}: ${what}`);
  stored.forEach((e, i) => e.seq !== i && problem(`seq ${e.seq} at position ${i} (not contiguous)`));

  // Turns: each opened once and closed once.
  const starts = typed(stored, 'turn/start').map((e) => e.data.turn);
  const ends = typed(stored, 'turn/end').map((e) => e.data.turn);
  if (new Set(starts).size !== starts.length) problem(`a turn started twice: ${starts.join(',')}`);
  if ([...starts].sort().join(',') !== [...ends].sort().join(','))
    problem(`turns started ${starts.join(',')} but ended ${ends.join(',')}`);

  // User messages: each logged once.
  const users = typed(stored, 'user/message').filter((e) => e.data.source.kind === 'user');
  const userIds = users.map((e) => e.data.id);
  if (new Set(userIds).size !== userIds.length) problem(`a user message is logged twice: ${userIds.join(',')}`);

  // Assistant messages: one final reply per (turn, step), ids unique.
  const replies = typed(stored, 'assistant/message').filter((e) => e.data.interrupted !== true);
  const replyKeys = replies.map((e) => `${e.data.turn}/${e.data.step}`);
  if (new Set(replyKeys).size !== replyKeys.length)
    problem(`duplicate assistant message for turn/step ${replyKeys.join(',')}`);
  const replyIds = replies.map((e) => e.data.message.id);
  if (new Set(replyIds).size !== replyIds.length) problem('duplicate assistant message id');

  // Every acknowledged message: in the log once, in the turn the gateway named, answered once by the reply it returned.
  for (const ack of acks) {
    const logged = users.filter((e) => e.data.id === ack.messageId);
    if (logged.length !== 1) {
      problem(`acknowledged message ${ack.messageId} is logged ${logged.length} times`);
      continue;
    }
    const turnStart = [...typed(stored, 'turn/start')].reverse().find((e) => e.seq < logged[0]!.seq);
    if (turnStart?.data.turn !== ack.reply.turn)
      problem(`message ${ack.messageId} is in turn ${turnStart?.data.turn}, the reply names turn ${ack.reply.turn}`);
    if (ack.reply.outcome !== 'completed')
      problem(`message ${ack.messageId} was answered with outcome ${ack.reply.outcome}`);
    const answers = replies.filter((e) => e.data.turn === ack.reply.turn);
    if (answers.length !== 1) problem(`turn ${ack.reply.turn} has ${answers.length} replies`);
    else if (answers[0]!.seq !== ack.reply.replySeq)
      problem(`turn ${ack.reply.turn}'s reply is seq ${answers[0]!.seq}, the gateway said ${ack.reply.replySeq}`);
    if (ack.reply.text !== `echo: ${ack.text}`)
      problem(`message ${ack.messageId} got ${JSON.stringify(ack.reply.text)}`);
  }

  // The follower: every event exactly once, in order, as stored.
  const seen = follower.events.map((e) => e.seq);
  const expected = stored.map((e) => e.seq);
  if (seen.join(',') !== expected.join(',')) {
    const dups = seen.length - new Set(seen).size;
    problem(
      `follower received ${seen.length} events (${dups} duplicates), ${expected.length} stored; first difference at index ${seen.findIndex((s, i) => s !== expected[i])}`,
    );
  } else if (follower.events.some((e, i) => JSON.stringify(e) !== JSON.stringify(stored[i]))) {
    problem('follower received an event that differs from the stored one');
  }
  return problems;
}

describe(`the fleet: full Temporal server and store on PostgreSQL, 3 workers, 2 gateways (${FULL ? 'full' : 'short'} run)`, () => {
  it(
    'answers every acknowledged message exactly once, and every follower sees every event once, through worker, gateway, Temporal and store crashes',
    async () => {
      const f = fleet!;
      const gatewayUrls = () => f.gatewayPorts.map((_, slot) => f.gatewayUrl(slot));
      const driver = new HttpDriver(gatewayUrls, TOKEN);
      const started = Date.now();

      await Promise.all(sessionIds.map((id, i) => driver.createSession(id, i % 2)));
      const followers = sessionIds.map((id, i) => new SseFollower(id, gatewayUrls, (i + 1) % 2, TOKEN));
      for (const follower of followers) follower.start();

      const total = SESSIONS * TURNS;
      const acks: Ack[] = [];
      const counts: Record<string, number> = {
        workerKills: 0,
        gatewayKills: 0,
        temporalRestarts: 0,
        storeKills: 0,
        underLoad: 0,
      };
      const plan = chaosPlan(f, driver, counts);
      /** The next fault not yet under way; traffic may run ahead of it by PACING_SLACK of the messages, no more. */
      let nextFault = 0;
      const PACING_SLACK = 0.15;
      let driverDone = false;
      const driving = Promise.all(
        sessionIds.map(async (id, i) => {
          for (let turn = 1; turn <= TURNS; turn++) {
            // Pace the traffic so every fault lands while messages are still being sent.
            while (nextFault < plan.length && acks.length >= (plan[nextFault]!.at + PACING_SLACK) * total)
              await sleep(20);
            acks.push(await driver.send(id, `${id}-m${turn}`, messageText(i, turn), i % 2));
          }
        }),
      ).finally(() => (driverDone = true));

      const missed: string[] = [];
      const chaos = (async () => {
        for (const [k, step] of plan.entries()) {
          nextFault = k;
          while (!driverDone && acks.length < step.at * total) await sleep(50);
          if (driverDone) {
            missed.push(step.name);
            continue;
          }
          console.log(
            `fleet test: ${step.name} at ${acks.length}/${total} acknowledged (${((Date.now() - started) / 1000).toFixed(1)} s)`,
          );
          // While this fault runs, traffic may go on up to the next one.
          nextFault = k + 1;
          await step.run();
        }
        nextFault = plan.length;
      })();
      await Promise.all([driving, chaos]);
      const drivenMs = Date.now() - started;

      // Every live worker is back and polling before the checks (the last replacement may still start).
      for (const worker of f.workers) await f.workerReady(worker);

      const store: SessionStore = await openStore(f.endpoints.storeUrl);
      try {
        // Followers catch up with the stored logs.
        const heads = await Promise.all(sessionIds.map((id) => store.nextSeq(id)));
        const deadline = Date.now() + CATCH_UP_MS;
        while (followers.some((fw, i) => fw.lastSeq < heads[i]! - 1) && Date.now() < deadline) await sleep(100);
        for (const follower of followers) await follower.stop();

        const problems: string[] = [];
        let events = 0;
        for (const [i, id] of sessionIds.entries()) {
          const stored = await store.readFrom(id, 0);
          events += stored.length;
          problems.push(
            ...checkSession(
              id,
              stored,
              acks.filter((a) => a.sessionId === id),
              followers[i]!,
            ),
          );
        }

        const retried = acks.filter((a) => a.attempts > 1).length;
        const outageLines = f.history
          .flatMap((p) => p.lines)
          .filter((l) => / is unreachable \(| is reachable again after /.test(l));
        console.log(
          [
            `fleet test results (${FULL ? 'full' : 'short'} run, seed ${SEED}, ${(drivenMs / 1000).toFixed(1)} s of traffic):`,
            `  sessions ${SESSIONS}, turns each ${TURNS}, messages acknowledged ${acks.length}/${total} (${retried} after a retry), events stored ${events}`,
            `  worker SIGKILLs ${counts.workerKills}, gateway SIGKILLs ${counts.gatewayKills}, Temporal restarts ${counts.temporalRestarts}, store PostgreSQL kill -9 ${counts.storeKills} (${counts.underLoad} of ${plan.length} faults with requests under way)`,
            `  failed attempts by kind: ${[...driver.failures].map(([k, n]) => `${k} ×${n}`).join(', ') || 'none'}`,
            `  follower reconnects ${followers.reduce((n, fw) => n + fw.reconnects, 0)}, error events before a reconnect ${followers.reduce((n, fw) => n + fw.errorEvents.length, 0)}`,
            `  outage log lines from workers and gateways: ${outageLines.length}`,
            `  problems: ${problems.length}`,
          ].join('\n'),
        );
        expect(missed, 'every fault happened while the driver was still sending').toEqual([]);
        expect(counts).toMatchObject({
          workerKills: WORKER_KILLS,
          gatewayKills: 1,
          temporalRestarts: 1,
          storeKills: 1,
        });
        expect(acks).toHaveLength(total);
        expect(problems).toEqual([]);

        const verify = await promisify(execFile)(
          process.execPath,
          [join(ROOT, 'bin/sessionlog.mjs'), 'sessions', 'verify', ...sessionIds],
          {
            cwd: ROOT,
            env: { ...process.env, SESSIONLOG_STORE: f.endpoints.storeUrl },
            maxBuffer: 16 << 20,
          },
        );
        expect(
          verify.stdout
            .trim()
            .split('\n')
            .filter((line) => / ok: \d+ events, seqs contiguous/.test(line)),
        ).toHaveLength(SESSIONS);
        await eraseOneSession(f, store);
      } finally {
        await store.close();
      }

      // Only the processes killed on purpose stopped; SIGTERM drains every other one cleanly.
      const unexpected = f.history
        .filter((p) => !p.killedOnPurpose && !p.running)
        .map((p) => `${p.name} (${p.child.exitCode ?? p.child.signalCode})`);
      expect(unexpected).toEqual([]);
      const { exits } = await f.stop();
      expect(exits.filter(({ exit }) => exit.code !== 0 || exit.signal !== null)).toEqual([]);
      fleet = undefined;
      passed = true;
    },
    (FULL ? 45 : 15) * 60_000,
  );
});
