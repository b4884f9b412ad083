/**
 * Corruption suite, JSONL backend (DESIGN §4.1, §10): sessions written through the real append
 * path are copied and damaged at the byte and line level — byte flips anywhere, truncation at
 * every kind of offset, deleted, duplicated and swapped lines, edited JSON fields, changed seqs,
 * garbage appended, header edits — and each outcome is judged by the oracle in
 * test/support/corruption.ts. Seeded (SESSIONLOG_CORRUPTION_SEED reproduces a run).
 *
 * Every other case (`COLD_EVERY`) also gets a projection checkpoint whose anchor seals an
 * undamaged prefix of its original log, 1..all of its batches, written by the real code as the
 * same session in a scratch directory (its file is checked to be the start of the case's
 * undamaged copy); a fresh store instance's cold derived-history read through it is judged
 * (test/support/corruption.ts, `ColdCheck`). Only every other case: writing every case's prefix
 * through the real append path (a JSONL append costs 1.5-2 ms of CPU) took the suite to nearly
 * four times its time, and every other case still well over twice.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openStore, type SessionStore } from '../../src/persistence/index.js';
import { SESSION_FORMAT_VERSION, isSessionlogError, type NewEvent } from '../../src/session/index.js';
import {
  ColdTally,
  OutcomeCounts,
  checkpointPlans,
  anchoredCheckpoints,
  corruptionSeed,
  freshReaders,
  judge,
  originalOf,
  realisticBatches,
  scratchDir,
  seededRng,
  writeBatches,
  type Damage,
  type GeneratedBatch,
  type Original,
  type Rng,
} from '../support/corruption.js';
import { tempDir } from '../support/store-fixtures.js';

const CASES = 360;
const PRISTINE = 4;
const SEED = corruptionSeed(0x51_0c_c0_01);
/** The checkpoints' prefixes are drawn from a stream of their own, so a seed's damages stay what they were. */
const ANCHOR_STREAM = 0x0a_c4_0e_27;
/** Every how many cases one gets a checkpoint and its cold read judged. */
const COLD_EVERY = 2;

type Line = { start: number; end: number };

/** Line spans of a file (each including its newline); line 0 is the header, line i is seq i-1. */
function linesOf(bytes: Buffer): Line[] {
  const lines: Line[] = [];
  let start = 0;
  while (start < bytes.length) {
    const newline = bytes.indexOf(10, start);
    const end = newline < 0 ? bytes.length : newline + 1;
    lines.push({ start, end });
    start = end;
  }
  return lines;
}

function lineAt(lines: readonly Line[], offset: number): number {
  return lines.findIndex((line) => offset >= line.start && offset < line.end);
}

const seqsFrom = (from: number, n: number): Set<number> =>
  new Set(Array.from({ length: Math.max(0, n - from) }, (_, i) => from + i));

/** One JSON edit of an event line, as a person with an editor (or a buggy tool) might make it. */
function editLine(rng: Rng, text: string, original: Original): { text: string; detail: string } {
  const value = JSON.parse(text) as Record<string, unknown>;
  const data = value.data as Record<string, unknown> | undefined;
  const edits: Array<[string, () => void]> = [
    ['seq+1', () => (value.seq = (value.seq as number) + 1)],
    ['seq-1', () => (value.seq = (value.seq as number) - 1)],
    ['seq=random', () => (value.seq = rng.int(original.events.length + 5))],
    [
      'type=other',
      () =>
        (value.type = rng.pick([
          'turn/start',
          'turn/end',
          'user/message',
          'assistant/chunk',
          'tool/result',
          'step/end',
        ])),
    ],
    ['type=unknown', () => (value.type = 'future/thing')],
    ['op=other', () => (value.op = rng.pick(original.batches).op)],
    ['op=new', () => (value.op = `edited-${rng.int(1000)}`)],
    ['op removed', () => delete value.op],
    ['surfaceOp removed', () => delete value.surfaceOp],
    [
      'surfaceOp bogus replace',
      () => ((value.surfaceOp = { op: 'replace', start: 99_999, end: 99_999 }), (value.sourceEventSeqs = [99_999])),
    ],
    ['surfaceOp on non-surface', () => (value.surfaceOp = 'append')],
    ['role changed', () => data && (data.role = 'assistant')],
    ['data emptied', () => (value.data = {})],
    ['data null', () => (value.data = null)],
    ['turn changed', () => data && (data.turn = ((data.turn as number) ?? 1) + 7)],
    ['time as text', () => (value.time = String(value.time))],
    ['extra key', () => (value.extra = true)],
    ['batchSize+1', () => (value.batchSize = (value.batchSize as number) + 1)],
    ['batchSize-1', () => (value.batchSize = (value.batchSize as number) - 1)],
    ['batchSize removed', () => delete value.batchSize],
    ['ignorable added', () => (value.ignorable = true)],
  ];
  const [detail, edit] = rng.pick(edits);
  edit();
  return { text: `${JSON.stringify(value)}\n`, detail };
}

/** Damages a copy of a session file. `original` describes the stored log. */
function damageFile(rng: Rng, bytes: Buffer, original: Original): { bytes: Buffer; damage: Damage } {
  const n = original.events.length;
  const lines = linesOf(bytes);
  const eventLine = (): number => 1 + rng.int(n);
  const finalBatch = original.batches[original.batches.length - 1]!;
  const result = (
    kind: string,
    detail: string,
    out: Buffer,
    damaged: Set<number>,
    header = false,
    mustRefuse = false,
  ): { bytes: Buffer; damage: Damage } => ({
    bytes: out,
    damage: { kind, detail, damaged, header, mustRefuse },
  });
  const kind = rng.pick([
    'flip',
    'flip',
    'flip-final-batch',
    'truncate',
    'truncate',
    'delete-line',
    'duplicate-line',
    'swap-lines',
    'edit-field',
    'edit-field',
    'garbage',
    'header-edit',
  ]);
  switch (kind) {
    case 'flip':
    case 'flip-final-batch': {
      const from = kind === 'flip' ? 0 : lines[1 + finalBatch.first]!.start;
      const offset = from + rng.int(bytes.length - from);
      const out = Buffer.from(bytes);
      out[offset] = out[offset]! ^ (1 + rng.int(255));
      const line = lineAt(lines, offset);
      const damaged = new Set<number>();
      if (line > 0) damaged.add(line - 1);
      // A flipped newline joins this line with the next one.
      if (bytes[offset] === 10 && line + 1 < lines.length) damaged.add(line);
      return result(kind, `byte ${offset} of line ${line}`, out, damaged, line === 0);
    }
    case 'truncate': {
      const variant = rng.pick(['random', 'line end', 'before newline', 'header', 'batch boundary', 'final batch']);
      let cut: number;
      if (variant === 'random') cut = 1 + rng.int(bytes.length - 1);
      else if (variant === 'line end') cut = lines[1 + rng.int(n)]!.start;
      else if (variant === 'before newline') cut = lines[eventLine()]!.end - 1;
      else if (variant === 'header') cut = 1 + rng.int(lines[0]!.end - 1);
      else if (variant === 'batch boundary') cut = lines[1 + rng.pick(original.batches).first]!.start;
      else
        cut = lines[1 + finalBatch.first]!.start + 1 + rng.int(bytes.length - lines[1 + finalBatch.first]!.start - 1);
      const line = lineAt(lines, cut);
      return result(
        `truncate:${variant}`,
        `at byte ${cut}`,
        bytes.subarray(0, cut),
        seqsFrom(Math.max(0, line - 1), n),
        line === 0,
      );
    }
    case 'delete-line': {
      const line = rng.chance(0.05) ? 0 : eventLine();
      const out = Buffer.concat([bytes.subarray(0, lines[line]!.start), bytes.subarray(lines[line]!.end)]);
      // A missing line before the last leaves a seq gap.
      return result(
        kind,
        `line ${line}`,
        out,
        line === 0 ? new Set() : new Set([line - 1]),
        line === 0,
        line > 0 && line < n,
      );
    }
    case 'duplicate-line': {
      const line = eventLine();
      const at = rng.chance(0.5) ? line + 1 : 1 + rng.int(n + 1);
      const copy = bytes.subarray(lines[line]!.start, lines[line]!.end);
      const position = at < lines.length ? lines[at]!.start : bytes.length;
      const out = Buffer.concat([bytes.subarray(0, position), copy, bytes.subarray(position)]);
      return result(kind, `line ${line} inserted before line ${at}`, out, new Set([at - 1]), false, true);
    }
    case 'swap-lines': {
      const a = eventLine();
      const b = rng.chance(0.5) && a < n ? a + 1 : eventLine();
      const [i, j] = a < b ? [a, b] : [b, a];
      if (i === j) return result(kind, `line ${i} with itself`, Buffer.from(bytes), new Set());
      const out = Buffer.concat([
        bytes.subarray(0, lines[i]!.start),
        bytes.subarray(lines[j]!.start, lines[j]!.end),
        bytes.subarray(lines[i]!.end, lines[j]!.start),
        bytes.subarray(lines[i]!.start, lines[i]!.end),
        bytes.subarray(lines[j]!.end),
      ]);
      return result(kind, `lines ${i} and ${j}`, out, new Set([i - 1, j - 1]), false, true);
    }
    case 'edit-field': {
      const line = eventLine();
      const { text, detail } = editLine(rng, bytes.toString('utf8', lines[line]!.start, lines[line]!.end), original);
      const out = Buffer.concat([
        bytes.subarray(0, lines[line]!.start),
        Buffer.from(text, 'utf8'),
        bytes.subarray(lines[line]!.end),
      ]);
      return result(`edit:${detail}`, `line ${line}`, out, new Set([line - 1]));
    }
    case 'garbage': {
      const variant = rng.pick([
        'random bytes',
        'random bytes + newline',
        'partial json',
        'json object + newline',
        'wrong-seq event + newline',
        'blank line',
      ]);
      const garbage =
        variant === 'random bytes' || variant === 'random bytes + newline'
          ? Buffer.concat([
              Buffer.from(Array.from({ length: 1 + rng.int(40) }, () => rng.int(256)).filter((b) => b !== 10)),
              Buffer.from(variant.endsWith('newline') ? '\n' : ''),
            ])
          : variant === 'partial json'
            ? Buffer.from(`{"seq":${n},"type":"turn/st`)
            : variant === 'json object + newline'
              ? Buffer.from('{}\n')
              : variant === 'blank line'
                ? Buffer.from('\n')
                : Buffer.from(`${JSON.stringify({ ...original.events[n - 1], seq: n + 3, batchSize: 1 })}\n`);
      // A complete line that parses but is no valid next event is corruption, not a torn write.
      const complete = variant === 'json object + newline' || variant === 'wrong-seq event + newline';
      return result(
        `garbage:${variant}`,
        `${garbage.length} bytes`,
        Buffer.concat([bytes, garbage]),
        new Set([n]),
        false,
        complete,
      );
    }
    default: {
      const header = JSON.parse(bytes.toString('utf8', 0, lines[0]!.end)) as Record<string, unknown>;
      const edits: Array<[string, () => void]> = [
        ['id', () => (header.id = 'someone-else')],
        ['version+1', () => (header.version = (header.version as number) + 1)],
        ['format+1', () => (header.format = (header.format as number) + 1)],
        ['format text', () => (header.format = 'two')],
        ['type', () => (header.type = 'sessions')],
        ['createdAt', () => (header.createdAt = (header.createdAt as number) + 1)],
        ['unknown key', () => (header.colour = 'blue')],
        ['agent removed', () => delete header.agent],
      ];
      const [detail, edit] = rng.pick(edits);
      edit();
      const out = Buffer.concat([Buffer.from(`${JSON.stringify(header)}\n`), bytes.subarray(lines[0]!.end)]);
      return result(`header:${detail}`, 'line 0', out, new Set(), true);
    }
  }
}

/** Bytes of the first `events` event lines (and the header) of a file. */
function prefixBytes(bytes: Buffer, events: number): Buffer {
  const lines = linesOf(bytes);
  return bytes.subarray(0, lines[Math.min(events, lines.length - 1)]!.end);
}

describe('corruption suite: jsonl', () => {
  it(`each of ${CASES} random damages to sessions written by the real code is refused naming a damaged seq, or a torn final write recovered, never a shorter log or a rewritten file`, async () => {
    const { dir, cleanup } = tempDir('sessionlog-corruption-jsonl-');
    const root = join(dir, 'root');
    const scratchPlace = scratchDir('sessionlog-corruption-jsonl-scratch-');
    const scratchRoot = join(scratchPlace.dir, 'root');
    const rng = seededRng(SEED);
    const anchorRng = seededRng(SEED ^ ANCHOR_STREAM);
    const counts = new Map<string, number>();
    const outcomes = new OutcomeCounts();
    const cold = new ColdTally();
    const scratch = await openStore(`jsonl:${scratchRoot}`);
    try {
      const setup = await openStore(`jsonl:${root}`);
      const originals: Original[] = [];
      const generated: GeneratedBatch[][] = [];
      const files: Buffer[] = [];
      for (let p = 0; p < PRISTINE; p++) {
        generated.push(realisticBatches(rng, `pristine-${p}`));
        originals.push(originalOf(await writeBatches(setup, `pristine-${p}`, generated[p]!)));
        files.push(readFileSync(join(root, `pristine-${p}`, 'session.jsonl')));
      }
      await setup.close();
      // Each checked case's checkpoint: the same session's first k original batches, written by the real code.
      const records = await anchoredCheckpoints(scratch, checkpointPlans(CASES, COLD_EVERY, generated, anchorRng), 4);
      for (let i = 0; i < CASES; i++) {
        const p = i % PRISTINE;
        const id = `case-${i}`;
        // The same bytes under another id: only the header line names the session.
        const lines = linesOf(files[p]!);
        const header = JSON.parse(files[p]!.toString('utf8', 0, lines[0]!.end)) as Record<string, unknown>;
        const copy = Buffer.concat([
          Buffer.from(`${JSON.stringify({ ...header, id })}\n`),
          files[p]!.subarray(lines[0]!.end),
        ]);
        const record = records[i];
        if (record) {
          const prefix = prefixBytes(copy, record.anchor.seq + 1);
          expect(
            readFileSync(join(scratchRoot, id, 'session.jsonl')).equals(prefix),
            `${id}: the scratch file is not the start of the case's copy`,
          ).toBe(true);
          expect(record.anchor.position, `${id}: the anchor's position`).toBe(prefix.length);
          if (record.anchor.seq === originals[p]!.events.length - 1) cold.wholeLog++;
        }
        const { bytes, damage } = damageFile(rng, copy, originals[p]!);
        const path = join(root, id, 'session.jsonl');
        mkdirSync(join(root, id), { mode: 0o700 });
        writeFileSync(path, bytes, { mode: 0o600 });
        const store = await openStore(`jsonl:${root}`);
        try {
          if (record) await store.projectionCache.put(id, record);
          const outcome = await judge(
            store,
            id,
            originals[p]!,
            damage,
            {
              snapshot: () => readFileSync(path).toString('latin1'),
              keepsPrefix: (before, kept) =>
                readFileSync(path)
                  .subarray(0, prefixBytes(Buffer.from(before, 'latin1'), kept).length)
                  .equals(prefixBytes(Buffer.from(before, 'latin1'), kept)),
            },
            { id: 'pristine-0', events: originals[0]!.events.length },
            'jsonl',
            record && { readers: freshReaders(() => openStore(`jsonl:${root}`)), record, tally: cold },
          );
          outcomes.add(damage.kind.split(':')[0]!, outcome);
          counts.set(damage.kind, (counts.get(damage.kind) ?? 0) + 1);
        } finally {
          await store.close();
        }
      }
    } finally {
      await scratch.close();
      scratchPlace.cleanup();
      cleanup();
    }
    outcomes.print('jsonl', SEED);
    cold.print('jsonl', SEED);
    expect(outcomes.total()).toBe(CASES);
    expect(cold.judged).toBe(Math.ceil(CASES / COLD_EVERY));
    expect(cold.anchored, 'no cold read took the anchored path').toBeGreaterThan(0);
    // The run exercised both sides of the rule.
    expect(outcomes.total('refused')).toBeGreaterThan(CASES / 4);
    expect(outcomes.total('recovered')).toBeGreaterThan(10);
  }, 300_000);
});

// ---------------------------------------------------------------------------------------------
// Issue 52: an acknowledged final batch is never cut

const T0 = 1_700_000_000_000;

/**
 * A finished session as the engine logs it, 16 events: a run marker, then two turns, each its
 * start and message (the first with the request header), its step's start, then its reply as one
 * batch (`assistant/chunk`, `assistant/message`, `step/end`, `turn/end`). Returns the next seq.
 */
async function finishedSession(store: SessionStore, id: string): Promise<number> {
  await store.create({ version: SESSION_FORMAT_VERSION, id, createdAt: T0 });
  let next = 0;
  const append = async (batch: NewEvent[], op: string): Promise<void> => {
    await store.append(id, batch, { expectedSeq: next, op });
    next += batch.length;
  };
  await append(
    [{ type: 'session/run', time: T0, data: { workflowId: `session/${id}`, runId: 'run-1' } }],
    'run-1/start',
  );
  for (const turn of [1, 2]) {
    const text = `reply ${turn}`;
    await append(
      [
        { type: 'turn/start', time: T0, data: { turn } },
        ...(turn === 1
          ? [
              {
                type: 'request/header',
                time: T0,
                data: { header: { provider: 'fake', model: 'fake-1', system: 'terse' }, reason: 'initial' },
              } as NewEvent,
            ]
          : []),
        {
          type: 'user/message',
          time: T0,
          data: {
            id: `u${turn}`,
            role: 'user',
            content: [{ type: 'text', text: `ask ${turn}` }],
            source: { kind: 'user' },
          },
          surfaceOp: 'append',
        },
      ],
      `run-1/t${turn}/begin`,
    );
    await append([{ type: 'step/start', time: T0, data: { turn, step: 1 } }], `run-1/t${turn}/s1/start`);
    await append(
      [
        { type: 'assistant/chunk', time: T0, data: { turn, step: 1, chunk: { kind: 'text-delta', text } } },
        {
          type: 'assistant/message',
          time: T0,
          data: {
            turn,
            step: 1,
            message: {
              id: `a${turn}`,
              role: 'assistant',
              content: [{ type: 'text', text }],
              source: { kind: 'model', provider: 'fake', model: 'fake-1' },
            },
          },
          surfaceOp: 'append',
          sourceEventSeqs: [next],
        },
        { type: 'step/end', time: T0, data: { turn, step: 1 } },
        { type: 'turn/end', time: T0, data: { turn, reason: { kind: 'completed' } } },
      ],
      `run-1/t${turn}/s1/reply`,
    );
  }
  return next;
}

/** The error `attempt` fails with (fails the test when it succeeds). */
async function refusalOf(attempt: () => Promise<unknown>): Promise<Error> {
  const outcome = await attempt().then(
    (value) => ({ value }),
    (error: unknown) => ({ error }),
  );
  if (!('error' in outcome)) throw new Error(`expected a refusal, got ${JSON.stringify(outcome.value)}`);
  return outcome.error as Error;
}

function expectCorruptAt(error: Error, seq: number): void {
  expect(isSessionlogError(error, 'CORRUPT_LOG'), String(error)).toBe(true);
  expect(error.message).toMatch(new RegExp(`damaged at seq ${seq}\\b`));
}

describe('an acknowledged final batch (issue 52)', () => {
  it('a finished session whose final turn/end line has its first byte changed in place (still complete, ending in its newline) is refused with CORRUPT_LOG naming seq 15 by every read and by the next append; its three intact records stay on disk', async () => {
    const { dir, cleanup } = tempDir('sessionlog-ack-batch-');
    try {
      const url = `jsonl:${join(dir, 'root')}`;
      const writer = await openStore(url);
      const next = await finishedSession(writer, 's');
      await writer.close();
      expect(next).toBe(16);
      const path = join(dir, 'root', 's', 'session.jsonl');
      const bytes = readFileSync(path);
      const lastLineStart = bytes.lastIndexOf(10, bytes.length - 2) + 1;
      expect(JSON.parse(bytes.toString('utf8', lastLineStart))).toMatchObject({ seq: 15, type: 'turn/end' });
      const damaged = Buffer.from(bytes);
      damaged[lastLineStart] = 'X'.charCodeAt(0);
      writeFileSync(path, damaged);

      const store = await openStore(url);
      try {
        for (const attempt of [
          () => store.readFrom('s', 0),
          () => store.inspect('s'),
          () => store.load('s'),
          () => store.session('s'),
          () =>
            store.append('s', [{ type: 'turn/start', time: T0, data: { turn: 3 } }], {
              expectedSeq: 16,
              op: 'run-1/t3',
            }),
          () =>
            store.append('s', [{ type: 'turn/start', time: T0, data: { turn: 3 } }], {
              expectedSeq: 12,
              op: 'run-2/t3',
            }),
        ])
          expectCorruptAt(await refusalOf(attempt), 15);
        expect(await store.scan('s')).toMatchObject({ problem: { seq: 15, torn: false, code: 'CORRUPT_LOG' } });
      } finally {
        await store.close();
      }
      expect(readFileSync(path).equals(damaged), 'nothing on disk changed').toBe(true);
      const kept = damaged
        .toString('utf8', 0, lastLineStart)
        .trimEnd()
        .split('\n')
        .slice(-3)
        .map((line) => (JSON.parse(line) as { type: string }).type);
      expect(kept).toEqual(['assistant/chunk', 'assistant/message', 'step/end']);
    } finally {
      cleanup();
    }
  });

  it('a final batch torn after it was acknowledged (its last line cut, no newline) is refused to the writer that saw it, naming the cut seq, and cut only for a writer that never saw it', async () => {
    const { dir, cleanup } = tempDir('sessionlog-ack-torn-');
    try {
      const url = `jsonl:${join(dir, 'root')}`;
      const writer = await openStore(url);
      const next = await finishedSession(writer, 's');
      await writer.close();
      const path = join(dir, 'root', 's', 'session.jsonl');
      const bytes = readFileSync(path);
      const lastLineStart = bytes.lastIndexOf(10, bytes.length - 2) + 1;
      const torn = bytes.subarray(0, lastLineStart + 10);
      writeFileSync(path, torn);

      const store = await openStore(url);
      try {
        // Reads cannot know who saw the batch: a torn write is left out, and said to be torn.
        expect(await store.readFrom('s', 0)).toHaveLength(12);
        expect(await store.scan('s')).toMatchObject({ problem: { seq: 12, badSeq: 15, torn: true } });
        // The writer that was acknowledged seqs up to 15 appends at 16: damage, never cut.
        const refused = await refusalOf(() =>
          store.append('s', [{ type: 'turn/start', time: T0, data: { turn: 3 } }], {
            expectedSeq: next,
            op: 'run-1/t3',
          }),
        );
        expectCorruptAt(refused, 15);
        expect(refused.message).toMatch(/acknowledged/);
        expect(readFileSync(path).equals(torn), 'nothing on disk changed').toBe(true);
        // A writer that saw only seqs 0..11 (a new run reading the log as it is) may cut it.
        expect(
          await store.append(
            's',
            [{ type: 'session/run', time: T0, data: { workflowId: 'session/s', runId: 'run-2' } }],
            {
              expectedSeq: 12,
              op: 'run-2/start',
            },
          ),
        ).toEqual({ firstSeq: 12, lastSeq: 12, replayed: false });
      } finally {
        await store.close();
      }
    } finally {
      cleanup();
    }
  });
});
