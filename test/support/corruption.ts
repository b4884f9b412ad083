/**
 * The corruption suite's machinery (DESIGN §4.1, §10; issue 8): realistic sessions written through
 * the real append path, seeded random damage, and the oracle every outcome is judged by.
 *
 * A damage names the stored records it touched (`damaged`: seqs, or the seq where an inserted
 * record stands; `header`). The oracle then demands one of:
 *
 * - refused: every read and write fails with CORRUPT_LOG (or UNSUPPORTED_FORMAT for an intact
 *   record of an unknown type) naming the session and a seq inside a damaged batch, not before the
 *   first damaged batch (a header problem only for header damage); `scan` reports the same seq
 *   without throwing; nothing stored changes; another session still loads.
 * - loaded: every batch the damage did not touch is present, at its seqs, byte for byte, in what
 *   `readFrom`, `inspect`, `load` and a later `append` see; nothing stored before the valid end is
 *   rewritten. Within that, the log is either shorter by a JSONL torn final write (`recovered`),
 *   the same as before (`unchanged`), or different only in damaged records the damage left valid
 *   (`undetectable`: e.g. a flipped letter inside a message, or a store cut at a batch boundary,
 *   which is an older valid log — no store can tell these without checksums).
 *
 * Any other outcome, and any error that is not a SessionlogError, fails the test.
 *
 * Cold derived-history reads through a checkpoint anchor (issue 27, src/persistence/anchor.ts):
 * each case can also carry a projection-cache record whose anchor seals an UNDAMAGED prefix of
 * the original log (written by the real code in a scratch store, {@link anchoredCheckpoint}). A
 * store instance with no validated copy of the session (a freshly opened one, or one that never
 * read it) then reads the derived history through the record, put after the damaged copy was
 * written ({@link ColdCheck}): it must refuse exactly when `readFrom` refused, with the same
 * code, naming the session; otherwise its messages are the full fold's. An anchored read
 * (`readAnchored`) that returned a value never stands for a log refused at or before the
 * anchor's seq, nor for one whose header was damaged.
 */
import { accessSync, constants, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'vitest';
import {
  readDerivedHistory,
  writeProjectionCheckpoint,
  type AnchoredRead,
  type ProjectionCacheRecord,
  type SessionStore,
} from '../../src/persistence/index.js';
import {
  SESSION_FORMAT_VERSION,
  Session,
  isSessionlogError,
  surfaceProjection,
  type ContentBlock,
  type NewEvent,
  type SessionEvent,
  type SessionHeader,
  type SessionlogError,
  type StoredEvent,
} from '../../src/session/index.js';

// ---------------------------------------------------------------------------------------------
// Seeded randomness

export type Rng = {
  next(): number;
  int(n: number): number;
  pick<T>(items: readonly T[]): T;
  chance(p: number): boolean;
};

/** mulberry32: small, fast, and the same sequence for a seed on every machine. */
export function seededRng(seed: number): Rng {
  let state = seed >>> 0;
  const next = (): number => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return {
    next,
    int: (n) => Math.floor(next() * n),
    pick: (items) => items[Math.floor(next() * items.length)]!,
    chance: (p) => next() < p,
  };
}

// ---------------------------------------------------------------------------------------------
// Realistic sessions

export type GeneratedBatch = { op: string; events: NewEvent[] };

const T0 = 1_700_000_000_000;
const WORDS = ['alpha', 'beta', 'ünïcødé', '𝄞', '"quoted"', 'line\nbreak', '{"json":1}', 'tab\there', 'plain'];

export function corruptionHeader(id: string): SessionHeader {
  return {
    version: SESSION_FORMAT_VERSION,
    id,
    createdAt: T0,
    agent: { model: 'fake-1', system: 'You are terse.', tools: ['echo', 'read_artifact'] },
  };
}

/**
 * The batches a session's workflow would write: runs, turns with steps, streamed chunks, tool
 * calls and results, retries, compaction brackets and prunes; sometimes ending inside an open turn.
 */
export function realisticBatches(rng: Rng, id: string): GeneratedBatch[] {
  const session = Session.create(corruptionHeader(id));
  const batches: GeneratedBatch[] = [];
  let time = T0;
  const text = (): string => `${rng.pick(WORDS)} ${rng.int(10_000)} ${rng.pick(WORDS)}`;
  const add = (op: string, events: NewEvent[]): StoredEvent[] => {
    const stored = session.appendBatch(events, op);
    batches.push({ op, events });
    return stored;
  };
  const tick = (): number => (time += 1 + rng.int(900));
  add('run-1/start', [{ type: 'session/run', time: tick(), data: { workflowId: `session/${id}`, runId: 'run-1' } }]);
  const turns = 3 + rng.int(4);
  let compactions = 0;
  for (let turn = 1; turn <= turns; turn++) {
    const prefix = `run-1/t${turn}`;
    const open = turn === turns && rng.chance(0.4);
    add(`${prefix}/begin`, [
      { type: 'turn/start', time: tick(), data: { turn } },
      ...(turn === 1
        ? [
            {
              type: 'request/header',
              time,
              data: { header: { provider: 'fake', model: 'fake-1', system: 'You are terse.' }, reason: 'initial' },
            } as NewEvent,
          ]
        : []),
      {
        type: 'user/message',
        time,
        data: { id: `u${turn}`, role: 'user', content: [{ type: 'text', text: text() }], source: { kind: 'user' } },
        surfaceOp: 'append',
      },
    ]);
    const steps = 1 + rng.int(3);
    for (let step = 1; step <= steps; step++) {
      const sp = `${prefix}/s${step}`;
      add(`${sp}/start`, [{ type: 'step/start', time: tick(), data: { turn, step } }]);
      const chunkSeqs: number[] = [];
      const flushes = 1 + rng.int(3);
      for (let n = 0; n < flushes; n++) {
        const chunks: NewEvent[] = Array.from({ length: 1 + rng.int(4) }, () => ({
          type: 'assistant/chunk',
          time: tick(),
          data: {
            turn,
            step,
            chunk: rng.chance(0.3) ? { kind: 'reasoning-delta', text: text() } : { kind: 'text-delta', text: text() },
          },
        }));
        chunkSeqs.push(...add(`${sp}/a1/c${n}`, chunks).map((e) => e.seq));
        if (open && step === steps && n === 0 && rng.chance(0.5)) return batches;
      }
      if (rng.chance(0.15)) {
        add(`${sp}/p0/a1/fail`, [
          {
            type: 'llm/retry',
            time: tick(),
            data: { turn, step, attempt: 1, delayMs: 100, failure: { code: 'RATE_LIMITED', message: '429' } },
          },
        ]);
      }
      const calls = step < steps ? 1 + rng.int(2) : 0;
      const callIds = Array.from({ length: calls }, (_, i) => `call-${turn}-${step}-${i}`);
      const content: ContentBlock[] = [
        { type: 'text', text: text() },
        ...callIds.map((callId) => ({
          type: 'tool-call' as const,
          id: callId,
          name: 'echo',
          arguments: JSON.stringify({ text: text() }),
        })),
      ];
      const reply = add(`${sp}/reply`, [
        {
          type: 'assistant/message',
          time: tick(),
          data: {
            turn,
            step,
            message: {
              id: `a${turn}-${step}`,
              role: 'assistant',
              content,
              source: { kind: 'model', provider: 'fake', model: 'fake-1' },
            },
            usage: { inputTokens: 100 + rng.int(1000), outputTokens: rng.int(300) },
          },
          surfaceOp: 'append',
          sourceEventSeqs: chunkSeqs,
        },
        ...callIds.map((callId): NewEvent => ({
          type: 'tool/call',
          time,
          data: { turn, step, callId, name: 'echo', arguments: '{}' },
        })),
      ]);
      if (open && step === steps) return batches;
      if (calls > 0) {
        add(
          `${sp}/results`,
          callIds.map((callId, i): NewEvent => ({
            type: 'tool/result',
            time: tick(),
            data: {
              turn,
              step,
              message: {
                id: `r-${callId}`,
                role: 'user',
                content: [
                  {
                    type: 'tool-result',
                    toolCallId: callId,
                    content: [{ type: 'text', text: `${text()} `.repeat(1 + rng.int(5)) }],
                  },
                ],
                source: { kind: 'tool', callId },
              },
              meta: { artifact: `artifact:${id}/echo-${callId}.txt`, bytes: 10 + rng.int(100) },
            },
            surfaceOp: 'append',
            sourceEventSeqs: [reply[1 + i]!.seq],
          })),
        );
      }
      add(`${sp}/end`, [{ type: 'step/end', time: tick(), data: { turn, step } }]);
    }
    add(`${prefix}/end`, [{ type: 'turn/end', time: tick(), data: { turn, reason: { kind: 'completed' } } }]);
    const nodes = [...session.surfaceNodes];
    if (nodes.length >= 4 && rng.chance(0.45)) {
      const compactionId = `cmp-${++compactions}`;
      const [start] = add(`run-1/${compactionId}/start`, [
        { type: 'compaction/start', time: tick(), data: { compactionId, turn: null, trigger: 'pressure' } },
      ]);
      const shadowed = nodes.slice(0, 2 + rng.int(nodes.length - 2));
      add(`run-1/${compactionId}/summary`, [
        {
          type: 'compaction/summary',
          time: tick(),
          data: {
            compactionId,
            summary: [{ type: 'text', text: `summary ${text()}` }],
            shadowedRange: { start: shadowed[0]!, end: shadowed[shadowed.length - 1]! },
            shadowedSeqs: shadowed,
            shadowedTokenCount: 100 + rng.int(1000),
            provider: 'fake',
            model: 'fake-1',
          },
        },
        {
          type: 'user/message',
          time,
          data: {
            id: `sum-${compactionId}`,
            role: 'user',
            content: [{ type: 'text', text: `<summary>${text()}</summary>` }],
            source: { kind: 'plugin', plugin: 'compact', compactionId },
          },
          surfaceOp: { op: 'replace', start: shadowed[0]!, end: shadowed[shadowed.length - 1]! },
          sourceEventSeqs: [start!.seq, ...shadowed],
        },
      ]);
      add(`run-1/${compactionId}/end`, [{ type: 'compaction/end', time: tick(), data: { compactionId, turn: null } }]);
    }
    const results = session.surfaceNodes.filter((seq) => session.eventAt(seq)!.type === 'tool/result');
    if (results.length > 0 && rng.chance(0.3)) {
      const target = rng.pick(results);
      const original = session.eventAt(target) as SessionEvent<'tool/result'>;
      const [prune] = add(`run-1/t${turn}/prune`, [
        {
          type: 'compaction/prune',
          time: tick(),
          data: { shadowedRange: { start: target, end: target }, shadowedSeqs: [target], shadowedTokenCount: 40 },
        },
      ]);
      batches[batches.length - 1]!.events.push({
        type: 'tool/result',
        time,
        data: {
          ...original.data,
          message: {
            ...original.data.message,
            content: [{ ...original.data.message.content[0], content: [{ type: 'text', text: '[pruned]' }] }],
          },
        },
        surfaceOp: { op: 'replace', start: target, end: target },
        sourceEventSeqs: [prune!.seq, target],
      });
      // Re-plan the grown batch: the session must hold what the store will hold.
      session.appendBatch([batches[batches.length - 1]!.events[1]!], `run-1/t${turn}/prune`);
    }
  }
  return batches;
}

/** Appends the batches through the store's real append path; returns the stored events. */
export async function writeBatches(
  store: SessionStore,
  id: string,
  batches: readonly GeneratedBatch[],
): Promise<StoredEvent[]> {
  await store.create(corruptionHeader(id));
  let seq = 0;
  for (const batch of batches) {
    const result = await store.append(id, batch.events, { expectedSeq: seq, op: batch.op });
    expect(result.replayed).toBe(false);
    seq = result.lastSeq + 1;
  }
  return store.readFrom(id, 0);
}

// ---------------------------------------------------------------------------------------------
// The oracle

export type Damage = {
  kind: string;
  detail: string;
  /** Seqs of records the damage changed or removed, and seqs where it inserted a record. */
  damaged: ReadonlySet<number>;
  header: boolean;
  /** The damage leaves evidence in storage that something is missing or wrong, so loading must fail. */
  mustRefuse?: boolean;
};

export type Outcome =
  'refused' | 'refused-later' | 'refused-newer-format' | 'refused-header' | 'recovered' | 'unchanged' | 'undetectable';

/**
 * How many of the original batches a case's checkpoint covers: 1..all of them, all of them in
 * about a quarter of the cases.
 */
export function anchorBatches(rng: Rng, batches: number): number {
  return rng.chance(0.25) ? batches : 1 + rng.int(batches);
}

/**
 * The checkpoint plans of a suite's cases: every `every`-th case (case `i` a copy of pristine
 * session `i % generated.length`) gets one over its first k original batches, k drawn from `rng`.
 */
export function checkpointPlans(
  cases: number,
  every: number,
  generated: ReadonlyArray<readonly GeneratedBatch[]>,
  rng: Rng,
): Array<CheckpointPlan | undefined> {
  return Array.from({ length: cases }, (_, i) => {
    if (i % every !== 0) return undefined;
    const batches = generated[i % generated.length]!;
    return { id: `case-${i}`, batches, k: anchorBatches(rng, batches.length) };
  });
}

/**
 * A temporary directory for the scratch store the checkpoints are written in: in memory
 * (/dev/shm) where there is one, since every append there is synced, else in the temp directory.
 */
export function scratchDir(prefix: string): { dir: string; cleanup: () => void } {
  let base = tmpdir();
  try {
    accessSync('/dev/shm', constants.W_OK);
    base = '/dev/shm';
  } catch {
    // No writable /dev/shm (not Linux): the scratch store lives on disk, only slower.
  }
  const dir = mkdtempSync(join(base, prefix));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** A projection cache record with an anchor. */
export type AnchoredRecord = ProjectionCacheRecord & { anchor: NonNullable<ProjectionCacheRecord['anchor']> };

/** A case's checkpoint: session `id` holding the first `k` of a pristine session's `batches`. */
export type CheckpointPlan = { id: string; batches: readonly GeneratedBatch[]; k: number };

/**
 * Writes the first `k` of a pristine session's batches as session `id` in `scratch` (a store of
 * its own) through the real create and append, with the header {@link writeBatches} gives `id`,
 * so its stored bytes are those of the damaged copy's undamaged prefix; checkpoints it with the
 * real code and returns the record, which must carry an anchor at the prefix's last seq.
 */
export async function anchoredCheckpoint(scratch: SessionStore, plan: CheckpointPlan): Promise<AnchoredRecord> {
  const { id, batches, k } = plan;
  const events = await writeBatches(scratch, id, batches.slice(0, k));
  const written = await writeProjectionCheckpoint(scratch, id, undefined, {
    onCacheProblem: (problem) => {
      throw problem;
    },
  });
  expect(written.asOfSeq, `checkpoint of ${id}`).toBe(events.length - 1);
  const record = await scratch.projectionCache.get(id);
  expect(record?.anchor, `the checkpoint of ${id} has no anchor`).toBeDefined();
  expect(record!.anchor!.seq, `the anchor of ${id}`).toBe(events.length - 1);
  expect(record!.rows[surfaceProjection.key]?.seq, `the surface row of ${id}`).toBe(events.length - 1);
  return record as AnchoredRecord;
}

/**
 * {@link anchoredCheckpoint} for every plan (none where there is none), `concurrency` sessions at
 * a time: a store's appends to different sessions wait on each other only for CPU.
 */
export async function anchoredCheckpoints(
  scratch: SessionStore,
  plans: ReadonlyArray<CheckpointPlan | undefined>,
  concurrency: number,
): Promise<Array<AnchoredRecord | undefined>> {
  const records: Array<AnchoredRecord | undefined> = new Array<AnchoredRecord | undefined>(plans.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < plans.length) {
      const i = next++;
      const plan = plans[i];
      if (plan) records[i] = await anchoredCheckpoint(scratch, plan);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return records;
}

/** The original log: its events and the seq range of every batch. */
export type Original = {
  events: readonly StoredEvent[];
  batches: ReadonlyArray<{ op: string; first: number; last: number }>;
};

export function originalOf(events: readonly StoredEvent[]): Original {
  const batches: Array<{ op: string; first: number; last: number }> = [];
  for (const event of events) {
    const last = batches[batches.length - 1];
    if (last && last.op === event.op) last.last = event.seq;
    else batches.push({ op: event.op!, first: event.seq, last: event.seq });
  }
  return { events, batches };
}

function batchAround(original: Original, seq: number): { first: number; last: number } {
  return original.batches.find((b) => b.first <= seq && seq <= b.last) ?? { first: seq, last: seq };
}

/** What the store under test offers the oracle besides its public API. */
export type CaseAccess = {
  /** Everything stored for the damaged session (and nothing else), for "changed nothing" checks. */
  snapshot(): string | Promise<string>;
  /** True when `before` (a snapshot) is kept as is at the start of the current storage up to the first `keptEvents` events. */
  keepsPrefix(before: string, keptEvents: number): boolean | Promise<boolean>;
};

async function settle<T>(attempt: () => Promise<T>): Promise<{ ok: true; value: T } | { ok: false; error: unknown }> {
  try {
    return { ok: true, value: await attempt() };
  } catch (error) {
    return { ok: false, error };
  }
}

function describeError(error: unknown): string {
  return isSessionlogError(error) ? `${error.code}: ${error.message}` : String((error as Error)?.stack ?? error);
}

/** How a case's two cold reads get their store instance (see {@link ColdCheck}). */
export type ColdReaders = <T>(purpose: 'derived' | 'anchored', body: (store: SessionStore) => Promise<T>) => Promise<T>;

/** Each cold read on a store instance opened for it, closed after it. */
export function freshReaders(open: () => Promise<SessionStore>): ColdReaders {
  return async (_purpose, body) => {
    const store = await open();
    try {
      return await body(store);
    } finally {
      await store.close();
    }
  };
}

/**
 * Each kind of cold read on a store instance of its own, kept open for the suite: every case is a
 * session such an instance never read before, so it holds no validated copy of it.
 */
export function standingReaders(derived: SessionStore, anchored: SessionStore): ColdReaders {
  return (purpose, body) => body(purpose === 'derived' ? derived : anchored);
}

/** A case's cold derived-history read through its checkpoint (see the file comment). */
export type ColdCheck = {
  /**
   * Runs a cold read on a store instance on the store's database or directory that holds no
   * validated copy of the session; the `derived` and the `anchored` read on different instances.
   */
  readers: ColdReaders;
  /** The checkpoint put for the case, its anchor sealing an undamaged prefix of the original log. */
  record: AnchoredRecord;
  tally: ColdTally;
};

/** Counts of the cold reads a suite judged (printed with its report). */
export class ColdTally {
  /** Cases whose cold read was judged. */
  judged = 0;
  /** Of those, cases where `readAnchored` returned a session (the prefix verified, the tail validated). */
  anchored = 0;
  /** Cold reads refused (as `readFrom` was). */
  refused = 0;
  /** Cold reads that succeeded from the checkpoint (`fromCache`). */
  fromCache = 0;
  /** Cases whose anchor sealed the whole original log. */
  wholeLog = 0;

  print(backend: string, seed: number): void {
    console.info(
      `[corruption ${backend}] seed ${seed}: cold derived-history reads judged ${this.judged}, ` +
        `anchored reads taken ${this.anchored}, refused ${this.refused}, ` +
        `succeeded from the checkpoint ${this.fromCache}, anchors over the whole original log ${this.wholeLog}`,
    );
  }
}

/**
 * The cold read of a case (see {@link ColdCheck}), judged against what `readFrom` on `store`
 * gave (`readFrom`): the same refusal, or the full fold's messages.
 */
async function judgeCold(
  store: SessionStore,
  id: string,
  where: string,
  original: Original,
  damage: Damage,
  readFrom: { ok: true; value: StoredEvent[] } | { ok: false; error: unknown },
  cold: ColdCheck,
): Promise<void> {
  const { record, tally } = cold;
  const anchor = record.anchor;
  const at = `${id}, ${where}, checkpoint anchored at seq ${anchor.seq}`;
  tally.judged++;
  const read = await cold.readers('derived', (fresh) => settle(() => readDerivedHistory(fresh, id)));
  const surface = surfaceProjection.stateSchema.parse(record.rows[surfaceProjection.key]!.val);
  const anchored = await cold.readers('anchored', (fresh) => settle(() => fresh.readAnchored(id, anchor, surface)));
  if (!anchored.ok)
    expect(isSessionlogError(anchored.error), `${at}: readAnchored threw ${describeError(anchored.error)}`).toBe(true);
  const taken = anchored.ok && typeof anchored.value === 'object';

  if (!readFrom.ok) {
    const code = (readFrom.error as SessionlogError).code;
    expect(read.ok, `${at}: readFrom refused (${describeError(readFrom.error)}) but the cold read did not`).toBe(false);
    const error = (read as { ok: false; error: unknown }).error;
    expect(isSessionlogError(error, code), `${at}: the cold read: ${describeError(error)}`).toBe(true);
    expect((error as Error).message, `${at}: the cold read`).toContain(`session ${id}`);
    tally.refused++;
  } else {
    expect(
      read.ok,
      `${at}: readFrom succeeded but the cold read failed: ${read.ok ? '' : describeError(read.error)}`,
    ).toBe(true);
    const history = (read as { ok: true; value: Awaited<ReturnType<typeof readDerivedHistory>> }).value;
    const full = Session.fromEvents(await store.header(id), await store.readFrom(id, 0)).deriveMessages();
    expect(history.asOfSeq, `${at}: the cold read's seq`).toBe(readFrom.value.length - 1);
    if (history.fromCache) tally.fromCache++;
    // Also when the damage left a valid log that differs inside the anchored prefix (rows
    // swapped): the anchor does not match, so the checkpoint is not used at all.
    expect(history.messages, `${at}: the cold read's messages are not the full fold's`).toEqual(full);
  }

  if (taken) {
    tally.anchored++;
    // Damage in the prefix (the header included) is never accepted by the anchor.
    expect(damage.header, `${at}: readAnchored accepted a log with a damaged header`).toBe(false);
    if (readFrom.ok) {
      expect((anchored.value as AnchoredRead).nextSeq, `${at}: readAnchored's next seq`).toBe(readFrom.value.length);
    } else {
      const message = (readFrom.error as Error).message;
      const seq = /\bseq (\d+)\b/.exec(message);
      expect(
        seq !== null && Number(seq[1]) > anchor.seq,
        `${at}: readAnchored returned a session of a log refused at or before the anchor: ${message}`,
      ).toBe(true);
    }
  }
}

/**
 * Judges one damaged session: runs every reader and writer against `store` (which has never
 * seen the session), checks the outcome against the oracle and returns its category. With
 * `cold`, the session's cold derived-history read through its checkpoint is judged too, right
 * after the first reads (before any write), against what `readFrom` gave.
 */
export async function judge(
  store: SessionStore,
  id: string,
  original: Original,
  damage: Damage,
  access: CaseAccess,
  sibling: { id: string; events: number },
  backend: 'sqlite' | 'jsonl' | 'postgres',
  cold?: ColdCheck,
): Promise<Outcome> {
  const where = `${damage.kind} (${damage.detail})`;
  const before = await access.snapshot();
  const n = original.events.length;
  const reads = {
    readFrom: await settle(() => store.readFrom(id, 0)),
    inspect: await settle(() => store.inspect(id)),
    nextSeq: await settle(() => store.nextSeq(id)),
    session: await settle(() => store.session(id)),
    scan: await settle(() => store.scan(id)),
  };
  expect(await access.snapshot(), `${where}: a read changed the stored data`).toBe(before);
  if (cold) {
    await judgeCold(store, id, where, original, damage, reads.readFrom, cold);
    expect(await access.snapshot(), `${where}: a cold derived-history read changed the stored data`).toBe(before);
  }
  expect(reads.scan.ok, `${where}: scan threw ${reads.scan.ok ? '' : describeError(reads.scan.error)}`).toBe(true);
  const report = (reads.scan as { ok: true; value: Awaited<ReturnType<SessionStore['scan']>> }).value;

  if (!reads.readFrom.ok) {
    // Refused: the same refusal everywhere, naming the session and a damaged seq.
    const error = reads.readFrom.error;
    expect(
      isSessionlogError(error, 'CORRUPT_LOG') || isSessionlogError(error, 'UNSUPPORTED_FORMAT'),
      `${where}: ${describeError(error)}`,
    ).toBe(true);
    const code = (error as { code: string }).code;
    const message = (error as Error).message;
    expect(message, where).toContain(`session ${id}`);
    const writes = {
      load: await settle(() => store.load(id)),
      append: await settle(() =>
        store.append(id, [{ type: 'session/run', time: T0, data: { workflowId: 'w', runId: 'after-damage' } }], {
          expectedSeq: n,
          op: 'after-damage',
        }),
      ),
      watch: await settle(async () => {
        for await (const _ of store.watch(id, 0)) break;
      }),
    };
    for (const [name, result] of Object.entries({ ...reads, ...writes })) {
      if (name === 'scan') continue;
      expect(result.ok, `${where}: ${name} did not refuse`).toBe(false);
      expect((result as { error: { code?: string } }).error.code, `${where}: ${name}`).toBe(code);
    }
    expect(await access.snapshot(), `${where}: a refused write changed the stored data`).toBe(before);
    expect((await store.readFrom(sibling.id, 0)).length, `${where}: the sibling session`).toBe(sibling.events);
    const seq = /\bseq (\d+)\b/.exec(message);
    if (!seq) {
      expect(damage.header, `${where}: a header refusal for damage that did not touch the header: ${message}`).toBe(
        true,
      );
      expect(report.headerProblem?.code, where).toBe(code);
      return code === 'UNSUPPORTED_FORMAT' ? 'refused-newer-format' : 'refused-header';
    }
    const named = Number(seq[1]);
    expect(
      damage.damaged.size,
      `${where}: refused at seq ${named} but nothing was damaged: ${message}`,
    ).toBeGreaterThan(0);
    const first = Math.min(...damage.damaged);
    const inDamagedBatch = (s: number): boolean =>
      [...damage.damaged].some((d) => {
        const batch = batchAround(original, d);
        return batch.first <= s && s <= Math.max(batch.last, d);
      });
    // Nothing before the first damaged batch is blamed. The named seq is in a damaged batch, or
    // it is a later, intact record that the damage made inconsistent (a replace of a node a
    // damaged record removed, an op stored twice): found where the log contradicts itself.
    expect(
      named,
      `${where}: refused naming seq ${named}, before the damage (${[...damage.damaged].join(',')}): ${message}`,
    ).toBeGreaterThanOrEqual(batchAround(original, first).first);
    expect(report.problem, where).toMatchObject({ seq: named, torn: false });
    expect(report.events.length, where).toBeLessThanOrEqual(named);
    if (code === 'UNSUPPORTED_FORMAT') return 'refused-newer-format';
    return inDamagedBatch(named) ? 'refused' : 'refused-later';
  }

  // Loaded: every batch the damage did not touch is there, byte for byte.
  expect(
    damage.mustRefuse ?? false,
    `${where}: the damage left evidence of missing or wrong records, yet the log loaded`,
  ).toBe(false);
  const read = reads.readFrom.value;
  for (const [name, result] of Object.entries(reads))
    expect(
      result.ok,
      `${where}: readFrom succeeded but ${name} failed: ${result.ok ? '' : describeError(result.error)}`,
    ).toBe(true);
  const inspected = (reads.inspect as { ok: true; value: Awaited<ReturnType<SessionStore['inspect']>> }).value;
  expect(JSON.stringify(inspected.events.slice(0, read.length)), where).toBe(JSON.stringify(read));
  expect(
    JSON.stringify((reads.session as { ok: true; value: { events: readonly StoredEvent[] } }).value.events),
    where,
  ).toBe(JSON.stringify(read));
  const required = original.batches.filter((b) => ![...damage.damaged].some((d) => d >= b.first && d <= b.last));
  for (const batch of required) {
    for (let seq = batch.first; seq <= batch.last; seq++) {
      expect(
        JSON.stringify(read[seq]),
        `${where}: acknowledged, undamaged event ${seq} (batch ${batch.op}) is not what a read sees`,
      ).toBe(JSON.stringify(original.events[seq]));
    }
  }
  // Beyond the original end only what the damage itself stored, where it happens to be a valid batch.
  if (read.length > n)
    expect(
      [...damage.damaged].some((d) => d >= n),
      `${where}: a read shows events that were never appended`,
    ).toBe(true);
  const torn = report.problem?.torn === true;
  if (torn) expect(backend, `${where}: only JSONL has torn writes`).toBe('jsonl');
  else expect(report.problem, `${where}: scan found a problem the reads did not refuse`).toBeUndefined();
  expect(inspected.truncated > 0, where).toBe(torn);

  const loaded = await store.load(id);
  expect(JSON.stringify(loaded.events.slice(0, read.length)), where).toBe(JSON.stringify(read));
  expect(await access.keepsPrefix(before, read.length), `${where}: load rewrote stored data it kept`).toBe(true);
  const head = loaded.events.length;
  const appended = await store.append(
    id,
    [{ type: 'session/run', time: T0, data: { workflowId: 'w', runId: 'after-damage' } }],
    { expectedSeq: head, op: 'after-damage' },
  );
  expect(appended, where).toEqual({ firstSeq: head, lastSeq: head, replayed: false });
  const after = await store.readFrom(id, 0);
  expect(JSON.stringify(after.slice(0, head)), where).toBe(JSON.stringify(loaded.events));
  expect(after.length, where).toBe(head + 1);
  if (torn) {
    // A torn final write goes whole: what is kept ends where a batch ended.
    expect(
      read.length === 0 || original.batches.some((b) => b.last === read.length - 1),
      `${where}: recovery kept part of a batch`,
    ).toBe(true);
    return 'recovered';
  }
  return JSON.stringify(read) === JSON.stringify(original.events) && !damage.header ? 'unchanged' : 'undetectable';
}

/** Tallies outcomes by damage kind and prints them (the suite's report). */
export class OutcomeCounts {
  private readonly counts = new Map<string, Map<Outcome, number>>();

  add(kind: string, outcome: Outcome): void {
    const row = this.counts.get(kind) ?? new Map<Outcome, number>();
    row.set(outcome, (row.get(outcome) ?? 0) + 1);
    this.counts.set(kind, row);
  }

  total(outcome?: Outcome): number {
    let sum = 0;
    for (const row of this.counts.values())
      for (const [o, n] of row) if (outcome === undefined || o === outcome) sum += n;
    return sum;
  }

  print(backend: string, seed: number): void {
    const outcomes: Outcome[] = [
      'refused',
      'refused-later',
      'refused-newer-format',
      'refused-header',
      'recovered',
      'unchanged',
      'undetectable',
    ];
    const lines = [
      `[corruption ${backend}] seed ${seed}: ${this.total()} damaged sessions`,
      `  ${'damage'.padEnd(22)}${outcomes.map((o) => o.padStart(22)).join('')}`,
    ];
    for (const [kind, row] of [...this.counts].sort(([a], [b]) => a.localeCompare(b))) {
      lines.push(`  ${kind.padEnd(22)}${outcomes.map((o) => String(row.get(o) ?? 0).padStart(22)).join('')}`);
    }
    lines.push(`  ${'total'.padEnd(22)}${outcomes.map((o) => String(this.total(o)).padStart(22)).join('')}`);
    console.info(lines.join('\n'));
  }
}

/** The seed of a run: SESSIONLOG_CORRUPTION_SEED, or the suite's fixed default. */
export function corruptionSeed(fallback: number): number {
  const value = process.env.SESSIONLOG_CORRUPTION_SEED;
  return value === undefined ? fallback : Number(value);
}
