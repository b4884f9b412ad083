/**
 * Worker crash test (DESIGN §10): the worker runs as a child process and is killed with SIGKILL
 * during a model stream, during a tool, inside an append (held before it is written or after it
 * committed) and at random points, while several sessions are driven concurrently with `send`
 * (update) and `post` (signal). After every kill a fresh worker is started; at the end a fresh
 * worker finishes every session and the logs are checked:
 *
 * - every acknowledged user message is logged exactly once and its turn is answered;
 * - no assistant message is duplicated, one reply per (turn, step);
 * - seqs are contiguous, each op is one contiguous batch, every turn is closed;
 * - the fake model server (in this process, so it outlives the kills) saw no request for a
 *   prompt after the reply to that prompt was logged.
 *
 * Set CRASH_SEED to replay a schedule, CRASH_KILLS to change the number of kills.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { appendFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SessionClient, type Reply } from '../../src/client/session-client.js';
import { DEFAULT_MODEL_CATALOGUE, lookupModel } from '../../src/model/catalogue.js';
import { startFakeModelServer, type FakeModelServer, type FakeReply } from '../../src/model/fake-server.js';
import { buildChatRequest } from '../../src/model/request.js';
import { openStore } from '../../src/persistence/open.js';
import type { SessionStore } from '../../src/persistence/store.js';
import type { StoredEvent, SessionEvent } from '../../src/session/index.js';
import { workflowBundle } from '../../src/worker.js';
import {
  SESSION_WORKFLOW_TYPE,
  workflowIdFor,
  type SessionTunables,
  type SessionWorkflowInput,
} from '../../src/workflows/api.js';
import { TEST_TUNABLES, temporalAddress } from '../support/stack.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const CHILD = 'test/support/worker-child.ts';

const KILLS = Number(process.env.CRASH_KILLS ?? 32);
const SEED = Number(process.env.CRASH_SEED ?? Date.now() % 1_000_000);
const SESSIONS = 4;
/** How long a kill waits for its chosen point before killing anyway (counted as a miss). */
const KILL_POINT_WAIT_MS = 12_000;
/** Bound on a worker's start (it is slow only on a badly overloaded machine). */
const START_BOUND_MS = 120_000;
/** Replacement workers prepared ahead (started, connected, not yet polling). */
const SPARES = 2;
/** Bound on the final drain, after the last kill. */
const DRAIN_MS = 150_000;

/**
 * Crashes consume activity attempts (a heartbeat timeout is a failed attempt), so the budgets
 * are raised above what a handful of kills of one step can use up.
 */
const TUNABLES: Partial<SessionTunables> = {
  ...TEST_TUNABLES,
  modelHeartbeatMs: 2_000,
  modelMaxAttempts: 10,
  toolMaxAttempts: 10,
};

// ---- seeded randomness ------------------------------------------------------------------

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
const between = (lo: number, hi: number): number => Math.floor(lo + rng() * (hi - lo));
const pick = <T>(items: readonly T[]): T => items[Math.floor(rng() * items.length)]!;

// ---- the model ----------------------------------------------------------------------------

const FILLER =
  'alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa quebec romeo sierra tango'.split(
    ' ',
  );

/** Scripted by the user text: `[sleep]` asks for the sleep tool, `[multi]` for sleep and calculator, else a long text. */
function reply({
  body,
  lastUserText,
}: {
  body: { messages: Array<{ role: string }> };
  lastUserText: string;
}): FakeReply {
  const messages = body.messages;
  const last = messages[messages.length - 1]!;
  const afterTools = last.role === 'tool' || messages[messages.length - 2]?.role === 'tool';
  const words = Array.from({ length: 24 }, (_, i) => FILLER[i % FILLER.length]).join(' ');
  if (afterTools) return { text: `Tools are done for "${lastUserText}". ${words}` };
  if (lastUserText.includes('[sleep]'))
    return { text: 'Sleeping first.', toolCalls: [{ name: 'sleep', arguments: { ms: 900 } }] };
  if (lastUserText.includes('[multi]')) {
    return {
      text: 'Two tools.',
      toolCalls: [
        { name: 'sleep', arguments: { ms: 700 } },
        { name: 'calculator', arguments: { expression: '6*7' } },
      ],
    };
  }
  return { text: `Reply to "${lastUserText}": ${words}` };
}

/** JSON with sorted keys, to compare request message arrays. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

// ---- the child worker -------------------------------------------------------------------

type ChildLine = {
  event: string;
  pid: number;
  at: number;
  op?: string;
  when?: string;
  sessionId?: string;
  callId?: string;
};

class ChildWorker {
  readonly proc: ChildProcess;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Resolves when the worker is prepared and waits for `go` (CHILD_WAIT_FOR_GO). */
  readonly armed: Promise<void>;
  readonly ready: Promise<void>;
  private readonly listeners = new Set<(line: ChildLine) => void>();
  private stderrTail: string[] = [];
  killedByUs = false;

  constructor(args: readonly string[], env: Record<string, string>) {
    this.proc = spawn(process.execPath, args, {
      cwd: ROOT,
      env: { ...process.env, ...env, CHILD_WAIT_FOR_GO: '1' },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    this.exited = new Promise((resolve) => this.proc.once('exit', (code, signal) => resolve({ code, signal })));
    const logFile = process.env.CRASH_LOG_DIR
      ? join(process.env.CRASH_LOG_DIR, `child-${this.proc.pid}.log`)
      : undefined;
    const keep = (line: string) => {
      if (logFile) appendFileSync(logFile, `${new Date().toISOString()} ${line}\n`);
    };
    this.proc.stdout!.on('data', (d: Buffer) => keep(d.toString('utf8').trimEnd()));
    createInterface({ input: this.proc.stderr! }).on('line', (line) => {
      keep(line);
      this.stderrTail.push(line);
      if (this.stderrTail.length > 40) this.stderrTail.shift();
    });
    let onReady: () => void = () => undefined;
    let onArmed: () => void = () => undefined;
    const early =
      (what: string) =>
      ({ code, signal }: { code: number | null; signal: NodeJS.Signals | null }) =>
        new Error(`worker child exited before ${what} (code ${code}, signal ${signal}):\n${this.stderr()}`);
    this.armed = new Promise<void>((resolve, reject) => {
      onArmed = resolve;
      void this.exited.then((exit) => reject(early('armed')(exit)));
    });
    this.ready = new Promise<void>((resolve, reject) => {
      onReady = resolve;
      void this.exited.then((exit) => reject(early('ready')(exit)));
    });
    // Not every child is awaited to the end (a spare may be stopped unused).
    this.armed.catch(() => undefined);
    this.ready.catch(() => undefined);
    createInterface({ input: this.proc.stdout! }).on('line', (text) => {
      let line: ChildLine;
      try {
        line = JSON.parse(text) as ChildLine;
      } catch {
        return;
      }
      if (line.event === 'armed') onArmed();
      if (line.event === 'ready') onReady();
      for (const listener of this.listeners) listener(line);
    });
  }

  /** Lets an armed worker start polling; resolves once it does (bounded). */
  async go(): Promise<void> {
    const bounded = async (what: string, promise: Promise<void>) => {
      const timeout = sleep(START_BOUND_MS).then(() => 'timeout' as const);
      if ((await Promise.race([promise, timeout])) === 'timeout')
        throw new Error(`worker child not ${what} after ${START_BOUND_MS} ms:\n${this.stderr()}`);
    };
    await bounded('armed', this.armed);
    this.proc.stdin!.write('go\n');
    await bounded('ready', this.ready);
  }

  stderr(): string {
    return this.stderrTail.join('\n');
  }

  /** Resolves with the first line `match` accepts, or undefined after `ms`. */
  waitLine(match: (line: ChildLine) => boolean, ms: number): Promise<ChildLine | undefined> {
    return new Promise((resolve) => {
      const done = (line: ChildLine | undefined) => {
        clearTimeout(timer);
        this.listeners.delete(listener);
        resolve(line);
      };
      const listener = (line: ChildLine) => {
        if (match(line)) done(line);
      };
      const timer = setTimeout(() => done(undefined), ms);
      this.listeners.add(listener);
    });
  }

  async kill(): Promise<void> {
    this.killedByUs = true;
    this.proc.kill('SIGKILL');
    await this.exited;
  }

  async stop(): Promise<void> {
    this.killedByUs = true;
    this.proc.kill('SIGTERM');
    const exited = await Promise.race([this.exited, sleep(15_000).then(() => undefined)]);
    if (!exited) await this.kill();
  }
}

/**
 * How to run the child: compiled once to plain JS with esbuild (what tsx itself uses), so each
 * of the many restarts skips tsx's per-module transform; `--import tsx` when esbuild is missing.
 */
async function childArgs(outDir: string): Promise<string[]> {
  try {
    const esbuild = await import('esbuild');
    const outfile = join(outDir, 'worker-child.mjs');
    await esbuild.build({
      entryPoints: [join(ROOT, CHILD)],
      bundle: true,
      platform: 'node',
      format: 'esm',
      packages: 'external',
      target: 'node20',
      outfile,
      logLevel: 'silent',
    });
    return [outfile];
  } catch {
    return ['--import', 'tsx', CHILD];
  }
}

// ---- watching the logs from this process --------------------------------------------------

class LogWatcher {
  readonly logs = new Map<string, StoredEvent[]>();
  private readonly listeners = new Set<(sessionId: string, event: StoredEvent, log: readonly StoredEvent[]) => void>();
  private stopped = false;
  private loop: Promise<void> | undefined;

  constructor(
    private readonly store: SessionStore,
    private readonly sessionIds: readonly string[],
  ) {}

  start(): void {
    this.loop = (async () => {
      while (!this.stopped) {
        for (const id of this.sessionIds) {
          const log = this.logs.get(id) ?? [];
          this.logs.set(id, log);
          let tail: StoredEvent[] = [];
          try {
            tail = await this.store.readFrom(id, log.length);
          } catch {
            // Not created yet.
          }
          for (const event of tail) {
            log.push(event);
            for (const listener of this.listeners) listener(id, event, log);
          }
        }
        await sleep(15);
      }
    })();
  }

  /** Resolves with the first new event `match` accepts, or undefined after `ms`. */
  waitEvent(
    match: (sessionId: string, event: StoredEvent, log: readonly StoredEvent[]) => boolean,
    ms: number,
  ): Promise<StoredEvent | undefined> {
    return new Promise((resolve) => {
      const done = (event: StoredEvent | undefined) => {
        clearTimeout(timer);
        this.listeners.delete(listener);
        resolve(event);
      };
      const listener = (sessionId: string, event: StoredEvent, log: readonly StoredEvent[]) => {
        if (match(sessionId, event, log)) done(event);
      };
      const timer = setTimeout(() => done(undefined), ms);
      this.listeners.add(listener);
    });
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.loop;
  }
}

/** Where each session stands: its log head and its workflow's pending work (printed when a kill point is missed). */
async function diagnose(client: SessionClient, watcher: LogWatcher, sessionIds: readonly string[]): Promise<string> {
  const lines: string[] = [];
  for (const id of sessionIds) {
    const last = watcher.logs.get(id)?.at(-1);
    let pending = '';
    try {
      const { raw } = await client.temporal.workflow.getHandle(workflowIdFor(id)).describe();
      const activities = (raw.pendingActivities ?? []).map(
        (a) => `${a.activityType?.name} attempt ${a.attempt} state ${a.state} ${a.lastFailure?.message ?? ''}`,
      );
      const task = raw.pendingWorkflowTask
        ? `workflow task attempt ${raw.pendingWorkflowTask.attempt} state ${raw.pendingWorkflowTask.state}`
        : 'no workflow task';
      pending = `${task}; ${activities.join('; ') || 'no activity'}`;
    } catch (error) {
      pending = `describe failed: ${(error as Error).message}`;
    }
    lines.push(`    ${id}: head ${last ? `${last.seq} ${last.type} ${last.op ?? ''}` : 'empty'}; ${pending}`);
  }
  return `  diagnosis:\n${lines.join('\n')}`;
}

// ---- the test -----------------------------------------------------------------------------

type KillKind = 'stream' | 'tool' | 'append' | 'random';
type KillRecord = { kind: KillKind; hit: boolean; detail: string };
type Sent = { sessionId: string; id: string; text: string; via: 'send' | 'post'; acked: boolean; reply?: Reply };

const APPEND_POINTS: Array<{ when: 'before' | 'after'; op: string; label: string }> = [
  { when: 'after', op: '/reply$', label: 'reply committed' },
  { when: 'before', op: '/reply$', label: 'reply not yet written' },
  { when: 'after', op: '/start$', label: 'turn/step start committed' },
  { when: 'after', op: '/a[12]/c\\d+$', label: 'chunk committed' },
  { when: 'after', op: '/results$', label: 'tool results committed' },
  { when: 'before', op: '/results$', label: 'tool results not yet written' },
];

let dir: string;
let fake: FakeModelServer;
let store: SessionStore;
let connection: Connection;
let client: SessionClient;
let bundlePath: string;
let childDir: string;
let childCommand: string[];
const taskQueue = `crash-${randomUUID()}`;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'sessionlog-crash-'));
  fake = await startFakeModelServer({ firstTokenDelayMs: 150, tokenDelayMs: 20, matcher: reply });
  store = await openStore(`sqlite:${join(dir, 'sessions.db')}`, { pollIntervalMs: 20 });
  connection = await Connection.connect({ address: temporalAddress() });
  client = new SessionClient({
    temporal: new Client({ connection, namespace: 'default' }),
    store,
    taskQueue,
    tunables: TUNABLES,
  });
  bundlePath = join(dir, 'workflow-bundle.js');
  writeFileSync(bundlePath, (await workflowBundle()).code);
  // Inside the repository (git-ignored .tmp) so the compiled child resolves node_modules.
  childDir = join(ROOT, '.tmp', `crash-${process.pid}-${randomUUID().slice(0, 8)}`);
  mkdirSync(childDir, { recursive: true });
  childCommand = await childArgs(childDir);
});

afterAll(async () => {
  await connection?.close();
  await fake?.close();
  await store?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
  if (childDir) rmSync(childDir, { recursive: true, force: true });
});

describe('worker crashes (SIGKILL of a child worker process)', () => {
  it(
    `every session finishes and the logs keep their invariants after ${KILLS} kills`,
    { timeout: 600_000 },
    async () => {
      const started = Date.now();
      const sessionIds = Array.from({ length: SESSIONS }, (_, i) => `crash-${SEED}-${i}-${randomUUID().slice(0, 8)}`);
      const childEnv = {
        TEMPORAL_ADDRESS: temporalAddress(),
        SESSIONLOG_STORE: `sqlite:${join(dir, 'sessions.db')}`,
        FAKE_MODEL_BASE_URL: fake.baseURL,
        SESSIONLOG_TASK_QUEUE: taskQueue,
        WORKFLOW_BUNDLE_PATH: bundlePath,
      };

      // Start the workflows with a short workflow-task timeout (inherited across continue-as-new),
      // so a workflow task lost with a killed worker is retried on the next one quickly.
      for (const sessionId of sessionIds) {
        const input: SessionWorkflowInput = { sessionId, tunables: TUNABLES };
        await client.temporal.workflow.start(SESSION_WORKFLOW_TYPE, {
          workflowId: workflowIdFor(sessionId),
          taskQueue,
          args: [input],
          workflowTaskTimeout: '5s',
        });
      }

      const watcher = new LogWatcher(store, sessionIds);
      watcher.start();

      // ---- drivers: send (update) and post (signal) concurrently, retrying until acknowledged
      const sent: Sent[] = [];
      const clientErrors: string[] = [];
      let driving = true;
      const retrying = async <T>(what: string, fn: () => Promise<T>): Promise<T> => {
        for (let attempt = 1; ; attempt++) {
          try {
            return await fn();
          } catch (error) {
            clientErrors.push(`${what} (attempt ${attempt}): ${(error as Error).message}`);
            if (Date.now() - started > 400_000) throw error;
            await sleep(300);
          }
        }
      };
      const drive = async (sessionId: string, index: number): Promise<void> => {
        for (let n = 1; driving; n++) {
          const marker = pick(['', '', '[sleep]', '[sleep]', '[multi]']);
          const id = `${sessionId}.m${n}`;
          const text = `${marker} message ${n} of session ${index}`.trim();
          if (rng() < 0.3) {
            const record: Sent = { sessionId, id, text, via: 'post', acked: false };
            sent.push(record);
            await retrying(`post ${id}`, () => client.post(sessionId, text, { id }));
            record.acked = true;
            await sleep(between(100, 700));
          } else {
            const record: Sent = { sessionId, id, text, via: 'send', acked: false };
            sent.push(record);
            record.reply = await retrying(`send ${id}`, () => client.send(sessionId, text, { id }));
            record.acked = true;
          }
        }
        // A posted message is confirmed by sending it again under the same id: it must not be answered twice.
        for (const record of sent.filter((s) => s.sessionId === sessionId && s.via === 'post')) {
          record.reply = await retrying(`confirm ${record.id}`, () =>
            client.send(sessionId, record.text, { id: record.id }),
          );
        }
      };
      const drivers = sessionIds.map((id, i) => drive(id, i));

      // ---- the kill loop
      const kinds: KillKind[] = Array.from(
        { length: KILLS },
        (_, i) => (['stream', 'tool', 'append', 'random'] as const)[i % 4]!,
      );
      for (let i = kinds.length - 1; i > 0; i--) {
        const j = Math.floor(rng() * (i + 1));
        [kinds[i], kinds[j]] = [kinds[j]!, kinds[i]!];
      }
      const kills: KillRecord[] = [];
      const points = kinds.map((kind) => (kind === 'append' ? pick(APPEND_POINTS) : undefined));
      const prepare = (i: number): ChildWorker => {
        const point = points[i];
        return new ChildWorker(childCommand, {
          ...childEnv,
          ...(point ? { CHILD_HOLD_APPEND: `${point.when}:${point.op}` } : {}),
        });
      };
      // Each worker's replacement is prepared (imports, connection) while it runs, and starts
      // polling only after it was killed.
      const spares = Array.from({ length: Math.min(SPARES, kinds.length + 1) }, (_, i) => prepare(i));
      let startWaitMs = 0;
      for (const [i, kind] of kinds.entries()) {
        const point = points[i];
        const child = spares.shift()!;
        const goAt = Date.now();
        await child.go();
        startWaitMs += Date.now() - goAt;
        if (i + spares.length + 1 <= kinds.length) spares.push(prepare(i + spares.length + 1));
        const readyAt = Date.now();
        let hit = false;
        let detail = '';
        if (kind === 'stream') {
          // A chunk appended by this worker to a step that has no reply yet.
          const chunk = await watcher.waitEvent((_, event, log) => {
            // Early attempts only, so one step is not killed over and over (each kill costs it an attempt).
            if (event.type !== 'assistant/chunk' || event.time < readyAt || !/\/a[12]\/c\d+$/.test(event.op ?? ''))
              return false;
            const { turn, step } = (event as SessionEvent<'assistant/chunk'>).data;
            return !log.some(
              (e) =>
                e.type === 'assistant/message' &&
                (e as SessionEvent<'assistant/message'>).data.turn === turn &&
                (e as SessionEvent<'assistant/message'>).data.step === step,
            );
          }, KILL_POINT_WAIT_MS);
          hit = chunk !== undefined;
          detail = chunk ? `chunk seq ${chunk.seq} (${chunk.op})` : 'no open stream';
          if (hit) await sleep(between(0, 200));
        } else if (kind === 'tool') {
          const line = await child.waitLine((l) => l.event === 'tool-start', KILL_POINT_WAIT_MS);
          hit = line !== undefined;
          detail = line ? `sleep tool ${line.callId}` : 'no tool started';
          if (hit) await sleep(between(0, 400));
        } else if (kind === 'append') {
          const line = await child.waitLine((l) => l.event === 'hold', KILL_POINT_WAIT_MS);
          hit = line !== undefined;
          detail = line ? `${point!.label}: ${line.op}` : `no append matched ${point!.when}:${point!.op}`;
        } else {
          const delay = between(200, 3_000);
          await sleep(delay);
          hit = true;
          detail = `${delay} ms after ready`;
        }
        if (child.proc.exitCode !== null || child.proc.signalCode !== null) {
          throw new Error(
            `worker child died by itself (${child.proc.exitCode ?? child.proc.signalCode}):\n${child.stderr()}`,
          );
        }
        await child.kill();
        if (!hit) console.log(await diagnose(client, watcher, sessionIds));
        kills.push({ kind, hit, detail: `${detail} (+${Date.now() - readyAt} ms)` });
        console.log(
          `[${Math.round((Date.now() - started) / 1000)}s] kill ${kills.length}/${kinds.length} ${kind}${hit ? '' : ' (missed)'}: ${kills.at(-1)!.detail}`,
        );
      }
      const killsDoneAt = Date.now();

      // ---- a fresh worker finishes every session
      driving = false;
      const finalWorker = spares.shift()!;
      await finalWorker.go();
      for (const spare of spares) await spare.stop();
      let drained = false;
      try {
        await Promise.race([Promise.all(drivers).then(() => (drained = true)), sleep(DRAIN_MS).then(() => undefined)]);
      } finally {
        await finalWorker.stop();
        await watcher.stop();
      }

      const summary = {
        seed: SEED,
        kills: kills.length,
        byKind: Object.fromEntries(
          (['stream', 'tool', 'append', 'random'] as const).map((k) => [
            k,
            `${kills.filter((r) => r.kind === k && r.hit).length}/${kills.filter((r) => r.kind === k).length} hit`,
          ]),
        ),
        messages: sent.length,
        posts: sent.filter((s) => s.via === 'post').length,
        chatRequests: fake.chatRequests().length,
        workflowRuns: [...watcher.logs.values()].flat().filter((e) => e.type === 'session/run').length,
        clientErrors: clientErrors.length,
        killLoopMs: killsDoneAt - started,
        waitedForWorkerStartMs: startWaitMs,
        drainMs: Date.now() - killsDoneAt,
      };
      console.log(`worker crash summary: ${JSON.stringify(summary)}`);
      if (clientErrors.length > 0) {
        // Distinct messages with counts (a send is refused while a workflow task is being retried).
        const counts = new Map<string, number>();
        for (const e of clientErrors)
          counts.set(e.replace(/^.*?\): /, ''), (counts.get(e.replace(/^.*?\): /, '')) ?? 0) + 1);
        console.log(`  client errors (retried): ${JSON.stringify([...counts])}`);
      }

      expect(kills.length).toBeGreaterThanOrEqual(Math.min(30, KILLS));
      for (const kind of ['stream', 'tool', 'append'] as const)
        expect(kills.filter((k) => k.kind === kind && k.hit).length, `kills that hit a ${kind}`).toBeGreaterThan(0);
      expect(drained, 'every send (and confirmation of a post) resolved after the last kill').toBe(true);
      expect(sent.every((s) => s.acked && s.reply !== undefined)).toBe(true);

      // ---- invariants of every log
      const requests = fake.requests().filter((r) => r.method === 'POST' && r.path === '/v1/chat/completions');
      const requestKeys = requests.map((r) => ({
        key: canonical((r.body as { messages: unknown }).messages),
        time: r.time,
      }));
      const model = lookupModel(DEFAULT_MODEL_CATALOGUE, 'fake');
      for (const sessionId of sessionIds) {
        const events = await store.readFrom(sessionId, 0);
        // Contiguous seqs.
        expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i));
        // Each op is one contiguous batch (never written twice).
        const opRanges = new Map<string, { first: number; last: number; count: number }>();
        for (const e of events) {
          if (e.op === undefined) continue;
          const r = opRanges.get(e.op);
          if (r) {
            r.last = e.seq;
            r.count += 1;
          } else opRanges.set(e.op, { first: e.seq, last: e.seq, count: 1 });
        }
        for (const [op, r] of opRanges) expect(r.last - r.first + 1, `op ${op} is one batch`).toBe(r.count);

        // Turns: every turn/start has exactly one turn/end after it, turn numbers unique.
        const starts = events.filter((e): e is SessionEvent<'turn/start'> => e.type === 'turn/start');
        const ends = events.filter((e): e is SessionEvent<'turn/end'> => e.type === 'turn/end');
        const startTurns = starts.map((e) => e.data.turn);
        expect(new Set(startTurns).size, `${sessionId}: turn numbers are unique`).toBe(startTurns.length);
        expect(ends.map((e) => e.data.turn).sort((a, b) => a - b)).toEqual([...startTurns].sort((a, b) => a - b));
        for (const end of ends) expect(end.data.reason.kind, `${sessionId} turn ${end.data.turn}`).toBe('completed');

        // Replies: no duplicate message id, one per (turn, step), none interrupted.
        const replies = events.filter((e): e is SessionEvent<'assistant/message'> => e.type === 'assistant/message');
        expect(new Set(replies.map((r) => r.data.message.id)).size).toBe(replies.length);
        const steps = replies.map((r) => `${r.data.turn}/${r.data.step}`);
        expect(new Set(steps).size, `${sessionId}: one reply per (turn, step)`).toBe(steps.length);
        expect(replies.filter((r) => r.data.interrupted)).toEqual([]);

        // Acknowledged messages: logged once, answered in their turn.
        const userMessages = events.filter(
          (e): e is SessionEvent<'user/message'> => e.type === 'user/message' && e.surfaceOp === 'append',
        );
        const turnOf = (seq: number): number => {
          let turn = -1;
          for (const s of starts) if (s.seq < seq) turn = s.data.turn;
          return turn;
        };
        for (const record of sent.filter((s) => s.sessionId === sessionId)) {
          const logged = userMessages.filter((m) => m.data.id === record.id);
          expect(logged.length, `${record.id} (${record.via}) logged exactly once`).toBe(1);
          const turn = turnOf(logged[0]!.seq);
          const answer = replies.filter(
            (r) => r.data.turn === turn && r.seq > logged[0]!.seq && r.data.finishReason === 'stop',
          );
          expect(answer.length, `${record.id} answered once in turn ${turn}`).toBe(1);
          expect(record.reply?.turn).toBe(turn);
          expect(record.reply?.outcome).toBe('completed');
          expect(record.reply?.messageId).toBe(answer[0]!.data.message.id);
        }
        expect(userMessages.length, `${sessionId}: no user message that was not sent`).toBe(
          sent.filter((s) => s.sessionId === sessionId).length,
        );

        // Tool calls each have one result.
        const calls = events.filter((e): e is SessionEvent<'tool/call'> => e.type === 'tool/call');
        const results = events.filter((e): e is SessionEvent<'tool/result'> => e.type === 'tool/result');
        expect(results.map((r) => r.data.message.source.callId).sort()).toEqual(calls.map((c) => c.data.callId).sort());

        // The model was asked for each logged reply, and never again once it was logged.
        const history = await client.history(sessionId);
        for (const r of replies) {
          const header = events
            .filter((e): e is SessionEvent<'request/header'> => e.type === 'request/header' && e.seq < r.seq)
            .at(-1)!.data.header;
          const before = history.slice(
            0,
            history.findIndex((m) => m.id === r.data.message.id),
          );
          const key = canonical(
            JSON.parse(JSON.stringify(buildChatRequest({ messages: before, header, model }).messages)),
          );
          const matching = requestKeys.filter((q) => q.key === key);
          expect(
            matching.filter((q) => q.time <= r.time).length,
            `${sessionId} turn ${r.data.turn} step ${r.data.step}: the request that produced the reply`,
          ).toBeGreaterThan(0);
          expect(
            matching.filter((q) => q.time > r.time).map((q) => q.time - r.time),
            `${sessionId} turn ${r.data.turn} step ${r.data.step}: no model call after its reply was logged (seq ${r.seq})`,
          ).toEqual([]);
        }
      }
    },
  );
});
