/**
 * Gateways are stateless (DESIGN §8.1): a live tail opened on gateway A streams the tokens of a
 * turn that was posted through gateway B, another process, while that turn is still running.
 * On PostgreSQL the wake-up crosses processes by LISTEN/NOTIFY; on SQLite, with both gateway
 * processes (and the worker) on one file, by polling. The latency from a chunk's append (its
 * `time`, stamped by the worker) to its arrival at the follower is measured and printed, not
 * asserted.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeModelServer, type FakeModelServer } from '../../src/model/fake-server.js';
import type { StoredEvent, SessionEvent } from '../../src/session/index.js';
import { temporalAddress } from '../support/stack.js';
import { FleetProcess, PostgresCluster, allowPostgresThrough, freePort, waitReady } from './harness.js';
import { gatewayCommand, gatewayEnvironment, workerEnvironment, type FleetEndpoints } from './topology.js';
import { SseFollower } from './traffic.js';

const TOKEN = 'live-tail-test-token-0123456789';
/** 40 words at 100 ms each: the turn streams for about 4 s. */
const WORDS = 40;
const TOKEN_DELAY_MS = 100;

const dir = mkdtempSync(join(tmpdir(), 'sessionlog-live-tail-'));
allowPostgresThrough(dir);
let fake: FakeModelServer;
let cluster: PostgresCluster | undefined;
const processes: FleetProcess[] = [];

beforeAll(async () => {
  fake = await startFakeModelServer({ tokenDelayMs: TOKEN_DELAY_MS });
  cluster = await PostgresCluster.start(join(dir, 'postgres'));
}, 120_000);

afterAll(async () => {
  await Promise.all(processes.map((p) => p.kill('SIGTERM')));
  await cluster?.destroy();
  await fake?.close();
  rmSync(dir, { recursive: true, force: true });
}, 120_000);

/** One worker and two gateways on `storeUrl`, against the shared dev server. */
async function startProcesses(label: string, storeUrl: string): Promise<{ gatewayA: string; gatewayB: string }> {
  const endpoints: FleetEndpoints = {
    temporalAddress: temporalAddress(),
    namespace: 'default',
    taskQueue: `live-tail-${randomUUID()}`,
    storeUrl,
    modelBaseUrl: fake.baseURL,
    model: 'fake',
  };
  const worker = new FleetProcess(
    `${label}-worker`,
    ['worker'],
    workerEnvironment(endpoints, { opsPort: 0, shutdownGraceMs: 5_000 }),
    join(dir, `${label}.log`),
  );
  processes.push(worker);
  const ops = / operations: (http:\/\/\S+)\/healthz/.exec(await worker.waitForLine(/ operations: /, 120_000))![1]!;
  await waitReady(`${ops}/readyz`, 120_000);
  const urls: string[] = [];
  for (const name of ['a', 'b']) {
    const port = await freePort();
    const env = gatewayEnvironment(endpoints, { token: TOKEN, modelHeartbeatMs: 5_000, modelMaxAttempts: 6 });
    processes.push(
      new FleetProcess(`${label}-gateway-${name}`, gatewayCommand('127.0.0.1', port), env, join(dir, `${label}.log`)),
    );
    urls.push(`http://127.0.0.1:${port}`);
  }
  await Promise.all(urls.map((url) => waitReady(`${url}/readyz`, 120_000)));
  return { gatewayA: urls[0]!, gatewayB: urls[1]! };
}

const auth = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

/** Posts a turn through B while following through A; returns what A saw, when. */
async function tailAcrossGateways(gatewayA: string, gatewayB: string, label: string) {
  const sessionId = `tail-${label}-${randomUUID().slice(0, 8)}`;
  expect(
    (await fetch(`${gatewayB}/v1/sessions`, { method: 'POST', headers: auth, body: JSON.stringify({ id: sessionId }) }))
      .status,
  ).toBe(201);
  const follower = new SseFollower(sessionId, () => [gatewayA], 0, TOKEN);
  follower.start();
  try {
    const text = `tail ${label}: ${Array.from({ length: WORDS - 2 }, (_, i) => `w${i}`).join(' ')}`;
    const posted = await fetch(`${gatewayB}/v1/sessions/${sessionId}/messages?wait=true`, {
      method: 'POST',
      headers: auth,
      body: JSON.stringify({ text }),
    });
    const answeredAt = Date.now();
    expect(posted.status).toBe(200);
    const reply = (await posted.json()) as { turn: number; text: string };
    expect(reply.text).toBe(`echo: ${text}`);

    const isTurnEnd = (e: StoredEvent) =>
      e.type === 'turn/end' && (e as SessionEvent<'turn/end'>).data.turn === reply.turn;
    const deadline = Date.now() + 30_000;
    while (!follower.events.some(isTurnEnd) && Date.now() < deadline)
      await new Promise((resolve) => setTimeout(resolve, 20));
    const turnEnd = follower.events.find(isTurnEnd);
    expect(turnEnd, 'the follower on A received the end of the turn posted through B').toBeDefined();
    const chunks = follower.events
      .map((event, i) => ({ event, arrivedAt: follower.arrivals[i]! }))
      .filter(
        ({ event }) =>
          event.type === 'assistant/chunk' && (event as SessionEvent<'assistant/chunk'>).data.turn === reply.turn,
      );
    return { chunks, turnEnd: turnEnd!, answeredAt };
  } finally {
    await follower.stop();
  }
}

describe('a live tail on gateway A streams a turn posted through gateway B, before the turn ends', () => {
  for (const backend of ['postgres', 'sqlite'] as const) {
    it(`${backend === 'postgres' ? 'PostgreSQL (LISTEN/NOTIFY across processes)' : 'SQLite, both gateways on one file (polling)'}`, async () => {
      const storeUrl =
        backend === 'postgres' ? `${cluster!.url}?schema=live_tail` : `sqlite:${join(dir, 'live-tail.db')}`;
      const { gatewayA, gatewayB } = await startProcesses(backend, storeUrl);
      const { chunks, turnEnd, answeredAt } = await tailAcrossGateways(gatewayA, gatewayB, backend);

      expect(chunks.length).toBeGreaterThan(1);
      // Tokens reached A while the worker was still streaming the turn, not after it closed it.
      expect(chunks[0]!.arrivedAt).toBeLessThan(turnEnd.time);
      expect(chunks[0]!.arrivedAt).toBeLessThan(answeredAt);

      const latencies = chunks.map(({ event, arrivedAt }) => arrivedAt - event.time);
      console.log(
        `live tail across gateways (${backend}): ${chunks.length} chunks over ${((turnEnd.time - chunks[0]!.event.time) / 1000).toFixed(1)} s; ` +
          `append → follower on the other gateway: p50 ${percentile(latencies, 50)} ms, p90 ${percentile(latencies, 90)} ms, max ${Math.max(...latencies)} ms; ` +
          `first token ${((turnEnd.time - chunks[0]!.arrivedAt) / 1000).toFixed(1)} s before the turn ended`,
      );
    }, 300_000);
  }
});
