/**
 * Row-level damage for the relational backends' corruption suites (SQLite, PostgreSQL): a
 * session's stored rows as a plain model, the damages an operator, a bad migration or a disk can
 * do to rows — byte flips in any stored value, truncation at every kind of seq, deleted,
 * duplicated and swapped rows, edited JSON fields, changed seqs, garbage rows, batch-index and
 * header edits — and the snapshot the oracle compares.
 */
import type { Damage, Original, Rng } from './corruption.js';

export type EventRowModel = {
  seq: number;
  type: string;
  time: number;
  data: string;
  surface_op: string | null;
  source_event_seqs: string | null;
  ignorable: boolean | null;
};

export type BatchRowModel = { op: string; first_seq: number; last_seq: number };

/** Everything a relational store keeps of one session's log. */
export type RowModel = { header: string; events: EventRowModel[]; batches: BatchRowModel[] };

export function cloneModel(model: RowModel): RowModel {
  return {
    header: model.header,
    events: model.events.map((e) => ({ ...e })),
    batches: model.batches.map((b) => ({ ...b })),
  };
}

/** A canonical text of the model, for "nothing changed" checks. */
export function snapshotOf(model: RowModel): string {
  const events = [...model.events].sort((a, b) => a.seq - b.seq);
  const batches = [...model.batches].sort((a, b) => a.first_seq - b.first_seq || a.op.localeCompare(b.op));
  return JSON.stringify({ header: model.header, events, batches });
}

/** True when `current` still holds the header, and every event and batch of `before` below `kept`, unchanged. */
export function keepsRowPrefix(before: string, current: RowModel, kept: number): boolean {
  const old = JSON.parse(before) as RowModel;
  if (old.header !== current.header) return false;
  const events = new Map(current.events.map((e) => [e.seq, JSON.stringify(e)]));
  const batches = new Set(current.batches.map((b) => JSON.stringify(b)));
  return (
    old.events.every((e) => e.seq >= kept || events.get(e.seq) === JSON.stringify(e)) &&
    old.batches.every((b) => b.last_seq >= kept || batches.has(JSON.stringify(b)))
  );
}

/** Flips one byte of a stored text value (as UTF-8) and reads it back as text (PostgreSQL text holds no NUL). */
function flipText(rng: Rng, text: string): string {
  const bytes = Buffer.from(text, 'utf8');
  if (bytes.length === 0) return 'x';
  const at = rng.int(bytes.length);
  bytes[at] = bytes[at]! ^ (1 + rng.int(255)) || 1;
  return bytes.toString('utf8').replaceAll('\u0000', '\u0001');
}

const range = (from: number, to: number): number[] =>
  Array.from({ length: Math.max(0, to - from + 1) }, (_, i) => from + i);

/** One JSON edit of a stored event row (the row's columns, not just its data). */
function editRow(rng: Rng, row: EventRowModel, original: Original): string {
  const data = JSON.parse(row.data) as Record<string, unknown> | null;
  const edits: Array<[string, () => void]> = [
    [
      'type=other',
      () =>
        (row.type = rng.pick(['turn/start', 'turn/end', 'user/message', 'assistant/chunk', 'tool/result', 'step/end'])),
    ],
    ['type=unknown', () => (row.type = 'future/thing')],
    ['ignorable', () => (row.ignorable = true)],
    ['surface_op removed', () => (row.surface_op = null)],
    [
      'surface_op bogus replace',
      () => (
        (row.surface_op = JSON.stringify({ op: 'replace', start: 99_999, end: 99_999 })),
        (row.source_event_seqs = '[99999]')
      ),
    ],
    ['surface_op on any row', () => (row.surface_op = 'append')],
    ['sources not an array', () => (row.source_event_seqs = '{"a":1}')],
    ['role changed', () => data && ((data.role = 'assistant'), (row.data = JSON.stringify(data)))],
    ['data emptied', () => (row.data = '{}')],
    ['data null', () => (row.data = 'null')],
    ['data not json', () => (row.data = row.data.slice(0, Math.floor(row.data.length / 2)))],
    ['turn changed', () => data && ((data.turn = ((data.turn as number) ?? 1) + 7), (row.data = JSON.stringify(data)))],
    ['time changed', () => (row.time = row.time + 1 + rng.int(original.events.length))],
  ];
  const [detail, edit] = rng.pick(edits);
  edit();
  return detail;
}

/** Damages a copy of a session's rows in place. */
export function damageRows(rng: Rng, model: RowModel, original: Original): Damage {
  const n = original.events.length;
  const rowAt = (seq: number): EventRowModel => model.events.find((e) => e.seq === seq)!;
  const anySeq = (): number => rng.int(n);
  const damage = (kind: string, detail: string, damaged: number[], header = false, mustRefuse = false): Damage => ({
    kind,
    detail,
    damaged: new Set(damaged),
    header,
    mustRefuse,
  });
  const kind = rng.pick([
    'flip',
    'flip',
    'truncate',
    'truncate',
    'delete-row',
    'duplicate-row',
    'swap-rows',
    'edit-field',
    'edit-field',
    'change-seq',
    'garbage',
    'batch-edit',
    'header-edit',
  ]);
  switch (kind) {
    case 'flip': {
      const target = rng.pick([
        'data',
        'data',
        'data',
        'type',
        'surface_op',
        'source_event_seqs',
        'batch op',
        'header',
      ]);
      if (target === 'header') {
        model.header = flipText(rng, model.header);
        return damage('flip', 'header', [], true);
      }
      if (target === 'batch op') {
        const batch = rng.pick(model.batches);
        batch.op = flipText(rng, batch.op);
        return damage(
          'flip',
          `op of batch ${batch.first_seq}..${batch.last_seq}`,
          range(batch.first_seq, batch.last_seq),
        );
      }
      const row = rowAt(anySeq());
      const column = target as 'data' | 'type' | 'surface_op' | 'source_event_seqs';
      row[column] = flipText(rng, row[column] ?? '');
      return damage('flip', `${column} of seq ${row.seq}`, [row.seq]);
    }
    case 'truncate': {
      const variant = rng.pick(['rows only', 'rows and batches', 'at a batch boundary', 'batch clipped']);
      const cut = variant === 'at a batch boundary' ? rng.pick(original.batches).first : 1 + rng.int(n - 1);
      model.events = model.events.filter((e) => e.seq < cut);
      if (variant === 'rows and batches' || variant === 'at a batch boundary')
        model.batches = model.batches.filter((b) => b.first_seq < cut);
      if (variant === 'batch clipped') {
        model.batches = model.batches.filter((b) => b.first_seq < cut);
        for (const batch of model.batches) batch.last_seq = Math.min(batch.last_seq, cut - 1);
      }
      // Batches that still name the cut rows are evidence of them.
      return damage(`truncate:${variant}`, `from seq ${cut}`, range(cut, n - 1), false, variant === 'rows only');
    }
    case 'delete-row': {
      if (rng.chance(0.3)) {
        const batch = rng.pick(model.batches);
        model.batches = model.batches.filter((b) => b !== batch);
        return damage(
          'delete-row',
          `batch ${batch.first_seq}..${batch.last_seq}`,
          range(batch.first_seq, batch.last_seq),
          false,
          true,
        );
      }
      const seq = anySeq();
      model.events = model.events.filter((e) => e.seq !== seq);
      return damage('delete-row', `event ${seq}`, [seq], false, true);
    }
    case 'duplicate-row': {
      const seq = anySeq();
      model.events.push({ ...rowAt(seq), seq: n });
      if (rng.chance(0.5)) model.batches.push({ op: `dup-${seq}`, first_seq: n, last_seq: n });
      return damage('duplicate-row', `event ${seq} copied to seq ${n}`, [n]);
    }
    case 'swap-rows': {
      const a = anySeq();
      const b = rng.chance(0.5) && a + 1 < n ? a + 1 : anySeq();
      const [ra, rb] = [rowAt(a), rowAt(b)];
      const contentA = { ...ra };
      Object.assign(ra, { ...rb, seq: a });
      Object.assign(rb, { ...contentA, seq: b });
      return damage('swap-rows', `events ${a} and ${b}`, a === b ? [] : [a, b]);
    }
    case 'edit-field': {
      const row = rowAt(anySeq());
      const detail = editRow(rng, row, original);
      return damage(`edit:${detail}`, `seq ${row.seq}`, [row.seq]);
    }
    case 'change-seq': {
      const row = rowAt(anySeq());
      const from = row.seq;
      row.seq = rng.chance(0.5) ? n + rng.int(5) : -1 - rng.int(3);
      return damage('change-seq', `${from} -> ${row.seq}`, row.seq >= 0 ? [from, row.seq] : [from], false, true);
    }
    case 'garbage': {
      const variant = rng.pick(['row', 'row and batch', 'row far ahead']);
      const seq = variant === 'row far ahead' ? n + 10 : n;
      model.events.push({
        seq,
        type: 'session/run',
        time: 1,
        data: rng.chance(0.5) ? '{"workflowId":' : '{"garbage":true}',
        surface_op: null,
        source_event_seqs: null,
        ignorable: null,
      });
      if (variant !== 'row') model.batches.push({ op: 'garbage', first_seq: seq, last_seq: seq });
      return damage(`garbage:${variant}`, `seq ${seq}`, [n], false, true);
    }
    case 'batch-edit': {
      const batch = rng.pick(model.batches);
      const before = { ...batch };
      if (rng.chance(0.5)) batch.first_seq += rng.chance(0.5) ? 1 : -1;
      else batch.last_seq += rng.chance(0.5) ? 1 : -1;
      return damage(
        'batch-edit',
        `${before.first_seq}..${before.last_seq} -> ${batch.first_seq}..${batch.last_seq}`,
        range(
          Math.max(0, Math.min(before.first_seq, batch.first_seq) - 1),
          Math.max(before.last_seq, batch.last_seq) + 1,
        ),
      );
    }
    default: {
      const header = JSON.parse(model.header) as Record<string, unknown>;
      const edits: Array<[string, () => void]> = [
        ['id', () => (header.id = 'someone-else')],
        ['version+1', () => (header.version = (header.version as number) + 1)],
        ['createdAt', () => (header.createdAt = (header.createdAt as number) + 1)],
        ['unknown key', () => (header.colour = 'blue')],
        ['agent removed', () => delete header.agent],
        ['not json', () => (model.header = model.header.slice(0, 10))],
      ];
      const [detail, edit] = rng.pick(edits);
      edit();
      if (detail !== 'not json') model.header = JSON.stringify(header);
      return damage(`header:${detail}`, 'header', [], true);
    }
  }
}
