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
 */
import { expect } from 'vitest';
import type { SessionStore } from '../../src/persistence/index.js';
import {
  SESSION_FORMAT_VERSION,
  Session,
  isSessionlogError,
  type ContentBlock,
  type NewEvent,
  type SessionEvent,
  type SessionHeader,
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

/**
 * Judges one damaged session: runs every reader and writer against `store` (which has never
 * seen the session), checks the outcome against the oracle and returns its category.
 */
export async function judge(
  store: SessionStore,
  id: string,
  original: Original,
  damage: Damage,
  access: CaseAccess,
  sibling: { id: string; events: number },
  backend: 'sqlite' | 'jsonl' | 'postgres',
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
