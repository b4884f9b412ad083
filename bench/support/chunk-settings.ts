/**
 * The chunks phase of bench/turns.ts: what the chunk coalescing settings (flush window and
 * character cap, `CoalesceOptions`) cost a sessionlog turn. The fake model streams the same
 * ~1,600-character replies, optionally pausing between word-sized pieces (a realistic token
 * rate); each setting runs its own conversation on its own worker, and the settings take turns
 * in rotating order so they see the same load. Each reply's chunk commits are counted and
 * timed: SQLite commits run on the worker's event loop, so their time is time that loop does
 * nothing else.
 */
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import type { Client } from '@temporalio/client';
import type { NativeConnection, Worker } from '@temporalio/worker';
import { SessionClient } from '../../src/client/session-client.js';
import { createOpenAIProvider } from '../../src/model/provider.js';
import { DEFAULT_COALESCE, type CoalesceOptions } from '../../src/model/stream.js';
import { openSqliteStore } from '../../src/persistence/index.js';
import { createWorker } from '../../src/worker.js';
import { workflowIdFor } from '../../src/workflows/api.js';
import { questionFor, replyTextFor, startFakeModelProcess } from './fake-model-process.js';
import { SYSTEM_PROMPT, wideWindowCatalogue } from './peer-turns.js';
import { fmtMs, median, printGrid } from './report.js';
import { TurnProbe, isChunkAppend } from './turn-probe.js';

export type ChunkSettingsOptions = {
  temporal: Client;
  native: NativeConnection;
  dir: string;
  /** Coalescing settings to compare; unset fields keep the defaults. */
  settings: Array<Partial<CoalesceOptions>>;
  /** The fake model's pause between streamed pieces, ms (0: as fast as the socket takes them). */
  tokenDelayMs: number;
  /** Measured turns per setting (after one that starts the workflow). */
  turns: number;
};

type TurnFigures = {
  commits: number;
  commitMs: number;
  streamMs: number;
  firstChunkMs: number;
  tailMs: number;
  turnMs: number;
};

/** `50:512` → `{maxDelayMs: 50, maxChars: 512}`; either side may be empty (default). */
export function parseCoalesce(spec: string): Partial<CoalesceOptions> {
  const [delay, chars] = spec.split(':');
  return { ...(delay ? { maxDelayMs: Number(delay) } : {}), ...(chars ? { maxChars: Number(chars) } : {}) };
}

function describe(setting: Partial<CoalesceOptions>): string {
  const resolved = { ...DEFAULT_COALESCE, ...setting };
  const isDefault =
    resolved.maxDelayMs === DEFAULT_COALESCE.maxDelayMs && resolved.maxChars === DEFAULT_COALESCE.maxChars;
  return `${resolved.maxDelayMs} ms / ${resolved.maxChars} chars${isDefault ? ' (default)' : ''}`;
}

export async function benchChunkSettings(options: ChunkSettingsOptions): Promise<void> {
  const fake = await startFakeModelProcess({ tokenDelayMs: options.tokenDelayMs });
  const probe = new TurnProbe();
  const restoreFetch = probe.installFetch();
  const rawStore = openSqliteStore(join(options.dir, 'chunks.db'));
  const store = probe.wrapStore(rawStore);
  const tag = randomUUID().slice(0, 8);
  const lanes: Array<{
    name: string;
    worker: Worker;
    running: Promise<void>;
    client: SessionClient;
    sessionId: string;
    figures: TurnFigures[];
  }> = [];
  try {
    for (const [i, setting] of options.settings.entries()) {
      const taskQueue = `bench-chunks-${i}-${tag}`;
      const provider = probe.wrapModel(
        createOpenAIProvider({
          baseURL: fake.baseURL,
          apiKey: 'bench',
          timeoutMs: 120_000,
          idleTimeoutMs: 120_000,
          provider: 'fake',
          coalesce: setting,
        }),
      );
      const worker = await createWorker({
        connection: options.native,
        taskQueue,
        store,
        model: provider,
        agent: { model: 'fake', system: SYSTEM_PROMPT, tools: [] },
        context: { catalogue: wideWindowCatalogue() },
      });
      lanes.push({
        name: describe(setting),
        worker,
        running: worker.run(),
        client: new SessionClient({ temporal: options.temporal, store, taskQueue }),
        sessionId: `chunks-${i}-${tag}`,
        figures: [],
      });
    }
    for (let turn = 1; turn <= options.turns + 1; turn++) {
      const order = [...lanes.slice(turn % lanes.length), ...lanes.slice(0, turn % lanes.length)];
      for (const lane of order) {
        const label = `${lane.sessionId}:${turn}`;
        probe.label = label;
        const start = performance.now();
        const reply = await lane.client.send(lane.sessionId, questionFor(turn), { id: `chunks-t${turn}` });
        const turnMs = performance.now() - start;
        await probe.checkpointSettled();
        probe.label = '';
        if (reply.text !== replyTextFor(turn)) throw new Error(`${label}: unexpected reply`);
        const spans = probe.spansOf(label);
        probe.forget((l) => l === label);
        if (turn === 1) continue;
        const chunks = spans.filter(isChunkAppend);
        const replied = spans.find((s) => s.op === 'store.append' && s.detail?.includes('assistant/message'));
        const fetched = spans.find((s) => s.op === 'fetch');
        if (fetched?.firstByteAt === undefined || fetched.lastByteAt === undefined || !replied) continue;
        lane.figures.push({
          commits: chunks.length,
          commitMs: chunks.reduce((sum, s) => sum + (s.end - s.start), 0),
          streamMs: fetched.lastByteAt - fetched.firstByteAt,
          firstChunkMs:
            (spans.find((s) => s.op === 'store.append' && s.detail?.includes('assistant/chunk'))?.end ?? Number.NaN) -
            fetched.firstByteAt,
          tailMs: replied.end - fetched.lastByteAt,
          turnMs,
        });
      }
    }
  } finally {
    probe.label = '';
    for (const lane of lanes) {
      await lane.client.close(lane.sessionId).catch(() => undefined);
      await options.temporal.workflow
        .getHandle(workflowIdFor(lane.sessionId))
        .result()
        .catch(() => undefined);
      lane.worker.shutdown();
      await lane.running;
    }
    restoreFetch();
    await fake.close();
    await rawStore.close();
  }
  const m = (figures: TurnFigures[], of: (t: TurnFigures) => number) =>
    median(figures.map(of).filter((v) => Number.isFinite(v)));
  printGrid(
    `Chunk coalescing, sessionlog on SQLite: a ~1,600-character reply streamed ${options.tokenDelayMs > 0 ? `at one word-sized piece per ${options.tokenDelayMs} ms` : 'as fast as the socket takes it'} (median of ${options.turns} turns per setting, settings interleaved)`,
    [
      'window / character cap',
      'chunk-only commits per reply',
      'event loop in them',
      '… share of the stream',
      'first token → first chunk durable',
      'last token → reply durable',
      'stream',
      'turn',
    ],
    lanes.map((lane) => [
      lane.name,
      String(m(lane.figures, (t) => t.commits)),
      fmtMs(m(lane.figures, (t) => t.commitMs)),
      `${(m(lane.figures, (t) => t.commitMs / t.streamMs) * 100).toFixed(1)}%`,
      fmtMs(m(lane.figures, (t) => t.firstChunkMs)),
      fmtMs(m(lane.figures, (t) => t.tailMs)),
      fmtMs(m(lane.figures, (t) => t.streamMs)),
      fmtMs(m(lane.figures, (t) => t.turnMs)),
    ]),
  );
}
