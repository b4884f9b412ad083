/**
 * What the Temporal SDK's stack-trace hook costs a turn (issue 27, "Turn ÷ (floor + model
 * time)" and "Group commit" in BENCHMARKS.md). The TypeScript SDK installs a V8 promise hook in
 * every workflow thread (`@temporalio/worker` lib/workflow/vm-shared.js, no option turns it
 * off): for each promise created in a workflow context it builds an `Error`, formats its stack
 * through the bundle's source map and records it, so that the `__stack_trace` query can say
 * where a workflow waits. This bench counts those promises and times the hook per turn for
 * sessionlog's workflow, Temporal's naive chat and the floor (bench/workflows/chat-peers.ts),
 * one turn of each in rotation on the same server and fake model.
 *
 * The workers run in debug mode, so their workflows run in this thread and the hook is the one
 * wrapped here (bench-only: nothing in src/ is timed); the hook's code and cost are the same in a
 * workflow thread. Debug mode makes turns slower than a normal worker's, so the turn times here
 * are context, not the turn benchmark's figures.
 *
 * It also counts the worker's calls into the workflow sandbox per turn. The SDK makes each call
 * (activate, each pass of unblocking conditions, conclude) through `vm` `runInContext` with a
 * `timeout` (its deadlock detection, 5 s; not a worker option), and for every call with a
 * timeout Node starts a watchdog thread and joins it when the call returns. What that costs a
 * call here is timed against the same call without a timeout, on Node alone.
 *
 *   scripts/temporal-dev-server run -- npx tsx bench/workflow-promises.ts [--turns 40] [--warmup 5]
 */
import v8 from 'node:v8';
import vm from 'node:vm';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime } from '@temporalio/worker';
import { SessionClient } from '../src/client/session-client.js';
import { startFakeModelServer } from '../src/model/fake-server.js';
import { createOpenAIProvider } from '../src/model/provider.js';
import { openSqliteStore } from '../src/persistence/index.js';
import { workflowIdFor } from '../src/workflows/api.js';
import { createWorker } from '../src/worker.js';
import { SYSTEM_PROMPT, createChatPeerWorker } from './support/peer-turns.js';
import { fmtMs, fmtRatio, machineLine, median, printGrid, printTable, since } from './support/report.js';
import {
  chatUpdate,
  endSignal,
  floorTurnUpdate,
  type floorWorkflow,
  type naiveChatWorkflow,
} from './workflows/chat-peers.js';

const { values } = parseArgs({
  options: { turns: { type: 'string', default: '40' }, warmup: { type: 'string', default: '5' } },
});
const TURNS = Number(values.turns);
const WARMUP = Number(values.warmup);

/** Promises the SDK's hook recorded (a workflow context's promise gets a `runId`) and the time spent in it. */
const hooked = { promises: 0, ms: 0 };

/**
 * Wraps the SDK's promise hook before any worker installs it. Only the hook's `init` does work
 * per promise (its `settled` only deletes the entry), so `init` is what is timed.
 */
function wrapPromiseHooks(): void {
  type Hooks = Parameters<typeof v8.promiseHooks.createHook>[0];
  const createHook = v8.promiseHooks.createHook.bind(v8.promiseHooks);
  v8.promiseHooks.createHook = (hooks: Hooks) => {
    const init = hooks.init;
    if (!init) return createHook(hooks);
    return createHook({
      ...hooks,
      init(promise, parent) {
        const start = performance.now();
        init(promise, parent);
        hooked.ms += performance.now() - start;
        if ((promise as { runId?: string }).runId !== undefined) hooked.promises += 1;
      },
    });
  };
}

/** Calls into a workflow sandbox (the workers run in debug mode, so in this thread), and those with a timeout. */
const sandboxCalls = { all: 0, timed: 0 };

/** Counts `runInContext` calls, before any worker compiles its scripts. */
function countSandboxCalls(): void {
  const runInContext = vm.Script.prototype.runInContext;
  vm.Script.prototype.runInContext = function (this: vm.Script, context, options) {
    sandboxCalls.all += 1;
    if (options?.timeout !== undefined) sandboxCalls.timed += 1;
    return runInContext.call(this, context, options);
  };
}

/** What a `timeout` adds to one `runInContext` call (Node's watchdog thread): µs per call, median of 5 rounds. */
function watchdogCostUs(): { withTimeout: number; without: number } {
  const context = vm.createContext({}, { microtaskMode: 'afterEvaluate' });
  const script = new vm.Script('1 + 1');
  const perCall = (timeout: number | undefined) => {
    const calls = 2_000;
    const start = performance.now();
    for (let i = 0; i < calls; i++) script.runInContext(context, timeout === undefined ? {} : { timeout });
    return ((performance.now() - start) * 1000) / calls;
  };
  const rounds = Array.from({ length: 5 }, () => [perCall(5_000), perCall(undefined)] as const);
  return { withTimeout: median(rounds.map((r) => r[0])), without: median(rounds.map((r) => r[1])) };
}

type System = 'sessionlog' | 'naive' | 'floor';
const SYSTEMS: readonly System[] = ['sessionlog', 'naive', 'floor'];
type Sample = { promises: number; hookMs: number; turnMs: number; sandboxCalls: number; timedCalls: number };

async function main(): Promise<void> {
  const address = process.env.TEMPORAL_ADDRESS;
  if (!address) throw new Error('TEMPORAL_ADDRESS is not set (run under scripts/temporal-dev-server run -- …)');
  wrapPromiseHooks();
  countSandboxCalls();
  Runtime.install({ logger: new DefaultLogger('WARN') });
  const dir = mkdtempSync(join(tmpdir(), 'sessionlog-bench-promises-'));
  const native = await NativeConnection.connect({ address });
  const connection = await Connection.connect({ address });
  const temporal = new Client({ connection });
  const store = openSqliteStore(join(dir, 'sessions.db'));
  const fake = await startFakeModelServer({});
  const model = createOpenAIProvider({ baseURL: fake.baseURL, apiKey: 'bench', provider: 'fake' });
  const tuning = { debugMode: true };
  const sessionQueue = `bench-promises-${randomUUID()}`;
  const peerQueue = `bench-promises-peers-${randomUUID()}`;
  const sessionWorker = await createWorker({
    connection: native,
    taskQueue: sessionQueue,
    store,
    model,
    agent: { model: 'fake', system: SYSTEM_PROMPT, tools: [] },
    workerOptions: tuning,
  });
  const peerWorker = await createChatPeerWorker(native, peerQueue, fake.baseURL, tuning);
  const running = [sessionWorker.run(), peerWorker.run()];
  const client = new SessionClient({ temporal, store, taskQueue: sessionQueue });
  const sessionId = `promises-${randomUUID()}`;
  const tag = randomUUID().slice(0, 8);
  const naive = await temporal.workflow.start<typeof naiveChatWorkflow>('naiveChatWorkflow', {
    taskQueue: peerQueue,
    workflowId: `promises-naive-${tag}`,
    args: [SYSTEM_PROMPT],
  });
  const floor = await temporal.workflow.start<typeof floorWorkflow>('floorWorkflow', {
    taskQueue: peerQueue,
    workflowId: `promises-floor-${tag}`,
    args: [],
  });
  const text = 'Tell me about the weather in a sentence or two, please, and keep it short thanks.';
  const turnOf: Record<System, () => Promise<unknown>> = {
    sessionlog: async () => {
      const reply = await client.send(sessionId, text);
      if (reply.outcome !== 'completed') throw new Error(`sessionlog turn ended ${reply.outcome}`);
    },
    naive: () => naive.executeUpdate(chatUpdate, { args: [text] }),
    floor: () => floor.executeUpdate(floorTurnUpdate, { args: [text] }),
  };
  const samples = new Map<System, Sample[]>(SYSTEMS.map((s) => [s, []]));
  try {
    for (let turn = 1; turn <= WARMUP + TURNS; turn++) {
      for (const system of SYSTEMS) {
        const before = { ...hooked };
        const calls = { ...sandboxCalls };
        const start = performance.now();
        await turnOf[system]();
        const sample = {
          promises: hooked.promises - before.promises,
          hookMs: hooked.ms - before.ms,
          turnMs: since(start),
          sandboxCalls: sandboxCalls.all - calls.all,
          timedCalls: sandboxCalls.timed - calls.timed,
        };
        if (turn > WARMUP) samples.get(system)!.push(sample);
      }
    }
  } finally {
    await client.close(sessionId).catch(() => undefined);
    await temporal.workflow
      .getHandle(workflowIdFor(sessionId))
      .result()
      .catch(() => undefined);
    await naive.signal(endSignal).catch(() => undefined);
    await floor.signal(endSignal).catch(() => undefined);
    await Promise.allSettled([naive.result(), floor.result()]);
    sessionWorker.shutdown();
    peerWorker.shutdown();
    await Promise.allSettled(running);
    await fake.close();
    await store.close();
    await connection.close();
    await native.close();
    rmSync(dir, { recursive: true, force: true });
  }

  const of = (system: System) => {
    const list = samples.get(system)!;
    return {
      promises: median(list.map((s) => s.promises)),
      hookMs: median(list.map((s) => s.hookMs)),
      perPromiseUs: median(list.map((s) => (s.promises > 0 ? (1000 * s.hookMs) / s.promises : 0))),
      turnMs: median(list.map((s) => s.turnMs)),
      sandboxCalls: median(list.map((s) => s.sandboxCalls)),
      timedCalls: median(list.map((s) => s.timedCalls)),
    };
  };
  const watchdog = watchdogCostUs();
  const watchdogUs = watchdog.withTimeout - watchdog.without;
  const figures = Object.fromEntries(SYSTEMS.map((s) => [s, of(s)])) as Record<System, ReturnType<typeof of>>;
  console.log(`\n${machineLine()}`);
  printGrid(
    `The SDK's stack-trace hook per turn (median of ${TURNS} turns after ${WARMUP}, one of each system in rotation; workers in debug mode)`,
    ['system', 'workflow promises per turn', 'hook time per turn', 'per promise', 'turn (debug mode)'],
    SYSTEMS.map((s) => [
      s,
      String(figures[s].promises),
      fmtMs(figures[s].hookMs),
      `${figures[s].perPromiseUs.toFixed(0)} µs`,
      fmtMs(figures[s].turnMs),
    ]),
  );
  printGrid(
    `Calls into the workflow sandbox per turn (median of the same turns); a call with a timeout costs ${watchdog.withTimeout.toFixed(0)} µs here against ${watchdog.without.toFixed(1)} µs without (Node's watchdog thread, median of 5 rounds of 2,000 calls)`,
    ['system', 'sandbox calls per turn', 'of them with a timeout', "the timeouts' watchdogs per turn"],
    SYSTEMS.map((s) => [
      s,
      String(figures[s].sandboxCalls),
      String(figures[s].timedCalls),
      fmtMs((figures[s].timedCalls * watchdogUs) / 1000),
    ]),
  );
  const ours = figures.sessionlog;
  printTable('The hook: sessionlog against the naive chat', [
    {
      name: "workflow promises per turn, sessionlog ÷ naive chat's",
      value: `${fmtRatio(ours.promises / figures.naive.promises)} (${ours.promises} vs ${figures.naive.promises})`,
    },
    {
      name: 'hook time per turn, sessionlog more than the naive chat',
      value: fmtMs(ours.hookMs - figures.naive.hookMs),
    },
  ]);
}

await main();
