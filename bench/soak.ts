/**
 * Leak soak (issue 53): runs `--turns` turns over `--sessions` sessions through one `sessionlog
 * dev` stack (`node bin/sessionlog.mjs dev`, what `npm run dev` runs: Temporal dev server, worker
 * and HTTP gateway; the offline model; a fresh SESSIONLOG_HOME with the default SQLite store),
 * driven by `--lanes` concurrent HTTP clients on the native API (`POST /v1/sessions/:id/messages?wait=true`,
 * every reply checked). Every `--sample-every` turns, and at the end, it samples from outside the
 * dev process: its RSS (/proc), its V8 heap after a full collection on the main thread and on the
 * workflow threads (through the inspector: dev runs with `--inspect=127.0.0.1:0`), its open file
 * descriptors, the store file and its `-wal`/`-shm` sizes, and the Temporal dev server's RSS.
 *
 * The first half of the run is the warm-up (every session is created and its workflow cached in
 * the first `--sessions` turns); each figure is the least-squares growth over the samples of the
 * second half, as a share of their mean. The store file grows with the log by design, so its
 * figure is the growth of its bytes per turn, not of its size. `--heap-snapshots DIR` also
 * writes heap snapshots of every thread at the midpoint and at the end and prints what grew.
 *
 *   npx tsx bench/soak.ts [--turns 20000] [--sessions 1000] [--lanes 32] [--sample-every 1000] [--heap-snapshots DIR]
 *
 * Needs no TEMPORAL_ADDRESS: dev starts its own Temporal dev server. bin/sessionlog.mjs runs
 * dev from dist/ when `npm run build` is current, else from the sources through tsx (a larger
 * main-thread heap, flat all the same).
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';
import { fileBytes, openFdKinds, residentBytes, startDevStack, type RunningDevStack } from './support/dev-stack.js';
import {
  heapGrowth,
  InspectorClient,
  summarizeHeapSnapshot,
  writeHeapSnapshot,
  type HeapSummary,
} from './support/inspector.js';
import { fmtBytes, fmtInt, fmtRatio, machineLine, printGrid, printTable, type Figure } from './support/report.js';

const { values: args } = parseArgs({
  options: {
    turns: { type: 'string', default: '20000' },
    sessions: { type: 'string', default: '1000' },
    lanes: { type: 'string', default: '32' },
    'sample-every': { type: 'string', default: '1000' },
    'heap-snapshots': { type: 'string' },
  },
});
const TURNS = Number(args.turns);
const SESSIONS = Number(args.sessions);
const LANES = Math.min(Number(args.lanes), SESSIONS);
const SAMPLE_EVERY = Number(args['sample-every']);
const SNAPSHOT_DIR = args['heap-snapshots'];
const REQUEST_TIMEOUT_MS = 120_000;
/** Growth over the last half, as a share of the mean, that still counts as flat. */
const FLAT = 0.05;

type Sample = {
  turns: number;
  elapsedMs: number;
  /** Turns per second since the previous sample. */
  rate: number;
  devRss: number;
  heapMain: number;
  /** Sum over the workflow (worker) threads. */
  heapWorkers: number;
  workerThreads: number;
  fds: number;
  /** Of `fds`, the sockets: HTTP and gRPC connections, which come and go with the load. */
  sockets: number;
  db: number;
  /** Bytes of the store's pages in use (page count less free pages, WAL included), read by a connection of this process. */
  storeUsed: number;
  wal: number;
  shm: number;
  temporalRss: number | undefined;
  temporalDb: number;
  /** Taken after the last turn, with no request in flight (shown, not fitted: it has none of the load's sockets and buffers). */
  idle: boolean;
};

const say = (line: string): void => void process.stderr.write(`soak: ${line}\n`);

/** The stop every lane watches: a signal, or the first fatal error. */
const interrupted = new AbortController();

async function call(url: string, body: unknown): Promise<{ status: number; json: unknown; text: string }> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal: AbortSignal.any([interrupted.signal, AbortSignal.timeout(REQUEST_TIMEOUT_MS)]),
  });
  const text = await response.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    // Not JSON (a proxy's error page, say): the text is reported as the failure.
    json = undefined;
  }
  return { status: response.status, json, text };
}

/** Least-squares slope of `ys` over `xs`. */
function slope(xs: readonly number[], ys: readonly number[]): number {
  const n = xs.length;
  const mx = xs.reduce((a, b) => a + b, 0) / n;
  const my = ys.reduce((a, b) => a + b, 0) / n;
  let num = 0;
  let den = 0;
  for (let i = 0; i < n; i++) {
    num += (xs[i]! - mx) * (ys[i]! - my);
    den += (xs[i]! - mx) ** 2;
  }
  return den === 0 ? 0 : num / den;
}

/**
 * Growth of a series over the second half of the run: the least-squares line through its
 * samples there, its rise from the midpoint to the end as a share of their mean; and the value at
 * the end over the value at the midpoint.
 */
function growthOverLastHalf(points: ReadonlyArray<{ turns: number; value: number }>): {
  fitted: number;
  /** The fitted line's rise per turn. */
  perTurn: number;
  endOverMid: number;
} {
  const last = points[points.length - 1]!;
  const half = points.filter((p) => p.turns >= last.turns / 2);
  const xs = half.map((p) => p.turns);
  const ys = half.map((p) => p.value);
  const meanY = ys.reduce((a, b) => a + b, 0) / ys.length;
  const span = last.turns - half[0]!.turns;
  const perTurn = slope(xs, ys);
  return {
    fitted: meanY === 0 ? 0 : (perTurn * span) / meanY,
    perTurn,
    endOverMid: half[0]!.value === 0 ? Number.NaN : last.value / half[0]!.value,
  };
}

function fmtPercent(share: number): string {
  return `${share >= 0 ? '+' : ''}${(share * 100).toFixed(1)} %`;
}

/** Bytes of pages in use in the store, as a reader sees it (the WAL's committed pages included). */
function storeUsedBytes(reader: Database.Database): number {
  const pragma = (name: string): number => reader.pragma(name, { simple: true }) as number;
  return (pragma('page_count') - pragma('freelist_count')) * pragma('page_size');
}

async function sample(
  stack: RunningDevStack,
  inspector: InspectorClient,
  reader: Database.Database,
  turns: number,
  started: number,
  previous: Sample | undefined,
  idle = false,
): Promise<Sample> {
  const heap = await inspector.heapAfterGc();
  const elapsedMs = performance.now() - started;
  const temporalPid = stack.temporalPid();
  const fds = openFdKinds(stack.pid);
  return {
    turns,
    elapsedMs,
    rate: previous ? ((turns - previous.turns) / (elapsedMs - previous.elapsedMs)) * 1000 : Number.NaN,
    devRss: residentBytes(stack.pid) ?? Number.NaN,
    heapMain: heap.main,
    heapWorkers: heap.workers.reduce((sum, w) => sum + w.used, 0),
    workerThreads: heap.workers.length,
    fds: fds.total,
    sockets: fds.sockets,
    db: fileBytes(stack.storePath),
    storeUsed: storeUsedBytes(reader),
    wal: fileBytes(`${stack.storePath}-wal`),
    shm: fileBytes(`${stack.storePath}-shm`),
    temporalRss: residentBytes(temporalPid),
    temporalDb: fileBytes(join(stack.home, 'temporal', 'temporal.db')),
    idle,
  };
}

/** Heap snapshots of every thread into SNAPSHOT_DIR, summarised by constructor. */
async function snapshotAll(inspector: InspectorClient, label: string): Promise<Map<string, HeapSummary>> {
  mkdirSync(SNAPSHOT_DIR!, { recursive: true });
  const summaries = new Map<string, HeapSummary>();
  const targets = [inspector.main, ...inspector.workers()];
  for (const [index, target] of targets.entries()) {
    const name = index === 0 ? 'main' : `worker-${index}`;
    const path = join(SNAPSHOT_DIR!, `${label}-${name}.heapsnapshot`);
    await writeHeapSnapshot(target, path);
    summaries.set(`${name} (${target.title})`, await summarizeHeapSnapshot(path));
    say(`heap snapshot ${path}`);
  }
  return summaries;
}

type Failure = { turn: number; session: string; what: string };

async function main(): Promise<void> {
  if (!(TURNS > 0 && SESSIONS > 0 && LANES > 0 && SAMPLE_EVERY > 0))
    throw new Error('--turns, --sessions, --lanes and --sample-every must be positive');
  console.log(machineLine());
  say('starting sessionlog dev…');
  const startedAt = performance.now();
  const stack = await startDevStack(say);
  let inspector: InspectorClient | undefined;
  let reader: Database.Database | undefined;
  const onSignal = (signal: NodeJS.Signals): void => {
    say(`${signal}: stopping`);
    interrupted.abort(new Error(`interrupted by ${signal}`));
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  try {
    say(`dev ready after ${((performance.now() - startedAt) / 1000).toFixed(1)} s at ${stack.gatewayUrl}`);
    inspector = await InspectorClient.connect(stack.inspectorUrl);
    // Worker threads attach as NodeWorker.enable reports them; give the reports a moment to arrive.
    await new Promise((resolve) => setTimeout(resolve, 500));

    const samples: Sample[] = [];
    const started = performance.now();
    reader = new Database(stack.storePath, { readonly: true, fileMustExist: true });
    samples.push(await sample(stack, inspector, reader, 0, started, undefined, true));
    const snapshots: Array<Map<string, HeapSummary>> = [];

    let completed = 0;
    let nextSample = SAMPLE_EVERY;
    let sampling: Promise<void> = Promise.resolve();
    const failures: Failure[] = [];
    let failed = 0;
    const midpoint = Math.floor(TURNS / 2);
    let snapshotMid = SNAPSHOT_DIR !== undefined;
    const onTurnDone = (): void => {
      completed += 1;
      const due = completed >= nextSample && completed < TURNS;
      if (!due) return;
      nextSample += SAMPLE_EVERY;
      const at = completed;
      const atMid = snapshotMid && at >= midpoint;
      if (atMid) snapshotMid = false;
      sampling = sampling.then(async () => {
        samples.push(await sample(stack, inspector!, reader!, at, started, samples[samples.length - 1]));
        const s = samples[samples.length - 1]!;
        say(
          `${fmtInt(at)} turns: ${s.rate.toFixed(1)} turns/s, RSS ${fmtBytes(s.devRss)}, heap ${fmtBytes(s.heapMain)} + ${fmtBytes(s.heapWorkers)}, ${s.fds} fds, failures ${failed}`,
        );
        if (atMid) snapshots.push(await snapshotAll(inspector!, 'mid'));
      });
      // Handled at once: a sample failing (dev gone, say) stops the run rather than crash it past its clean-up.
      sampling = sampling.catch((error: unknown) => {
        if (!interrupted.signal.aborted) interrupted.abort(error);
      });
    };

    const created = new Set<string>();
    const lane = async (laneIndex: number): Promise<void> => {
      const rounds = Math.ceil(TURNS / SESSIONS);
      for (let round = 0; round < rounds; round++) {
        for (let s = laneIndex; s < SESSIONS; s += LANES) {
          const turn = round * SESSIONS + s;
          if (turn >= TURNS) return;
          if (!stack.running())
            interrupted.abort(new Error(`sessionlog dev exited during the run:\n${stack.output().slice(-4000)}`));
          if (interrupted.signal.aborted) return;
          const session = `soak-${s}`;
          const fail = (what: string): void => {
            failed += 1;
            if (failures.length < 10) failures.push({ turn, session, what });
          };
          try {
            if (!created.has(session)) {
              const made = await call(`${stack.gatewayUrl}/v1/sessions`, { id: session });
              if (made.status !== 201 && made.status !== 200) {
                fail(`create answered ${made.status}: ${made.text.slice(0, 200)}`);
                continue;
              }
              created.add(session);
            }
            const text = `soak turn ${round + 1} of ${session}: how do the tides follow the moon?`;
            const reply = await call(`${stack.gatewayUrl}/v1/sessions/${session}/messages?wait=true`, { text });
            const body = reply.json as { outcome?: string; text?: string } | undefined;
            if (reply.status !== 200) fail(`send answered ${reply.status}: ${reply.text.slice(0, 200)}`);
            else if (body?.outcome !== 'completed')
              fail(`outcome ${String(body?.outcome)}: ${reply.text.slice(0, 200)}`);
            else if (!body.text) fail('empty reply');
          } catch (error) {
            if (interrupted.signal.aborted) return;
            fail((error as Error).message);
          } finally {
            onTurnDone();
          }
        }
      }
    };
    say(`${fmtInt(TURNS)} turns over ${fmtInt(SESSIONS)} sessions, ${LANES} lanes`);
    await Promise.all(Array.from({ length: LANES }, (_, i) => lane(i)));
    await sampling;
    if (interrupted.signal.aborted) throw interrupted.signal.reason;
    samples.push(await sample(stack, inspector, reader, completed, started, samples[samples.length - 1], true));
    if (SNAPSHOT_DIR !== undefined) snapshots.push(await snapshotAll(inspector, 'end'));

    report(samples, failed, failures);
    if (snapshots.length === 2) reportSnapshots(snapshots[0]!, snapshots[1]!);
  } finally {
    inspector?.close();
    reader?.close();
    say('stopping sessionlog dev…');
    const exit = await stack.stop();
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    say(
      exit.clean
        ? 'dev stopped cleanly'
        : `dev stopped with ${JSON.stringify({ code: exit.code, signal: exit.signal })}; its output:\n${stack.output().slice(-4000)}`,
    );
  }
}

function report(samples: readonly Sample[], failed: number, failures: readonly Failure[]): void {
  const last = samples[samples.length - 1]!;
  printGrid(
    `Soak: ${fmtInt(last.turns)} turns over ${fmtInt(SESSIONS)} sessions, ${LANES} lanes, one sessionlog dev (heap after a full GC; "+ wf" = workflow threads)`,
    [
      'turns',
      'elapsed',
      'turns/s',
      'dev RSS',
      'heap main',
      '+ wf threads',
      'fds (sockets)',
      'store file',
      'in use',
      'B/turn',
      '-wal',
      '-shm',
      'Temporal RSS',
      'Temporal db',
    ],
    samples.map((s, i) => {
      const prev = samples[i - 1];
      return [
        `${fmtInt(s.turns)}${s.idle ? ' (idle)' : ''}`,
        `${(s.elapsedMs / 1000).toFixed(0)} s`,
        Number.isNaN(s.rate) ? '' : s.rate.toFixed(1),
        fmtBytes(s.devRss),
        fmtBytes(s.heapMain),
        `${fmtBytes(s.heapWorkers)} (${s.workerThreads})`,
        `${s.fds} (${s.sockets})`,
        fmtBytes(s.db),
        fmtBytes(s.storeUsed),
        prev && s.turns > prev.turns ? fmtInt((s.storeUsed - prev.storeUsed) / (s.turns - prev.turns)) : '',
        fmtBytes(s.wal),
        fmtBytes(s.shm),
        s.temporalRss === undefined ? '' : fmtBytes(s.temporalRss),
        fmtBytes(s.temporalDb),
      ];
    }),
  );

  // The process figures are fitted over the samples taken under load (the idle ones are shown only).
  const loaded = samples.filter((s) => !s.idle);
  const flatFigure = (name: string, pick: (s: Sample) => number, show: (v: number) => string): Figure => {
    if (loaded.length < 2) return { name, value: 'too few samples under load' };
    const points = loaded.map((s) => ({ turns: s.turns, value: pick(s) }));
    const { fitted, perTurn, endOverMid } = growthOverLastHalf(points);
    const end = points[points.length - 1]!;
    const mid = points.find((p) => p.turns >= end.turns / 2)!;
    const per1000 = perTurn * 1000;
    return {
      name: `${name}: growth over the last half (fitted, its rise per 1,000 turns; end ÷ midpoint)`,
      value: `${fmtPercent(fitted)} (${per1000 >= 0 ? '+' : '-'}${show(Math.abs(per1000))}); ${show(end.value)} ÷ ${show(mid.value)} = ${Number.isNaN(endOverMid) ? '–' : fmtRatio(endOverMid, 3)}`,
      target: `≤ ${FLAT * 100}% growth`,
      met: fitted <= FLAT,
    };
  };
  // Bytes of store pages each interval's turns added: flat when the log costs the same per turn
  // throughout (the file's own size moves in checkpoint-sized steps, too coarse for this).
  const perTurn = samples.slice(1).map((s, i) => ({
    ...s,
    storePerTurn: (s.storeUsed - samples[i]!.storeUsed) / Math.max(1, s.turns - samples[i]!.turns),
  }));
  const storeFigure = (): Figure => {
    if (perTurn.length < 2) return { name: 'store bytes per turn', value: 'too few samples' };
    const { fitted } = growthOverLastHalf(perTurn.map((s) => ({ turns: s.turns, value: s.storePerTurn })));
    const half = perTurn.filter((s) => s.turns > last.turns / 2);
    const meanPerTurn = half.reduce((sum, s) => sum + s.storePerTurn, 0) / half.length;
    return {
      name: 'store bytes (pages in use) per turn: growth over the last half (fitted)',
      value: `${fmtPercent(fitted)} (${fmtInt(meanPerTurn)} B/turn in the last half)`,
      target: `≤ ${FLAT * 100}% growth`,
      met: fitted <= FLAT,
    };
  };
  const rates = samples.filter((s) => !Number.isNaN(s.rate));
  printTable(`Soak: ${fmtInt(last.turns)} turns, ${fmtInt(SESSIONS)} sessions: flat after warm-up (the first half)`, [
    {
      name: 'failed turns',
      value: `${fmtInt(failed)} of ${fmtInt(last.turns)}`,
      target: '0',
      met: failed === 0,
    },
    // A heap snapshot makes V8 allocate hundreds of MiB in dev that it keeps resident afterwards.
    SNAPSHOT_DIR === undefined
      ? flatFigure('dev RSS', (s) => s.devRss, fmtBytes)
      : { name: 'dev RSS', value: 'not judged: the heap snapshots taken at the midpoint inflate it' },
    flatFigure('dev heap after GC (main + workflow threads)', (s) => s.heapMain + s.heapWorkers, fmtBytes),
    flatFigure('dev heap after GC, main thread', (s) => s.heapMain, fmtBytes),
    flatFigure('dev heap after GC, workflow threads', (s) => s.heapWorkers, fmtBytes),
    flatFigure(
      'dev open file descriptors',
      (s) => s.fds,
      (v) => (Number.isInteger(v) ? String(v) : v.toFixed(1)),
    ),
    // Files, pipes and event fds: what a leak of handles would grow. Sockets swing with the
    // connections in flight when a sample is taken (32 lanes, the worker's gRPC streams).
    flatFigure(
      'dev open file descriptors other than sockets',
      (s) => s.fds - s.sockets,
      (v) => (Number.isInteger(v) ? String(v) : v.toFixed(1)),
    ),
    storeFigure(),
    flatFigure('store -wal size', (s) => s.wal, fmtBytes),
    flatFigure('store -shm size', (s) => s.shm, fmtBytes),
    {
      name: 'Temporal dev server RSS: growth over the last half (fitted), for information',
      value:
        loaded.length < 2
          ? '–'
          : fmtPercent(growthOverLastHalf(loaded.map((s) => ({ turns: s.turns, value: s.temporalRss ?? 0 }))).fitted),
    },
    {
      name: 'turns/s (first interval; last interval)',
      value: rates.length > 0 ? `${rates[0]!.rate.toFixed(1)}; ${rates[rates.length - 1]!.rate.toFixed(1)}` : '–',
    },
    { name: 'run time', value: `${(last.elapsedMs / 1000).toFixed(0)} s` },
  ]);
  for (const f of failures) console.log(`failure: turn ${f.turn} (${f.session}): ${f.what}`);
}

function reportSnapshots(mid: Map<string, HeapSummary>, end: Map<string, HeapSummary>): void {
  for (const [thread, after] of end) {
    const before = mid.get(thread);
    if (!before) continue;
    printGrid(
      `Heap growth from the midpoint to the end, ${thread}: the node kinds whose self size grew most`,
      ['type:constructor', 'count at end', 'Δ count', 'self size at end', 'Δ self size'],
      heapGrowth(before, after, 15).map((g) => [
        g.key,
        fmtInt(g.count),
        `${g.countDelta >= 0 ? '+' : ''}${fmtInt(g.countDelta)}`,
        fmtBytes(g.size),
        `${g.sizeDelta >= 0 ? '+' : '-'}${fmtBytes(Math.abs(g.sizeDelta))}`,
      ]),
    );
  }
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    say(error instanceof Error ? (error.stack ?? error.message) : String(error));
    process.exit(1);
  },
);
