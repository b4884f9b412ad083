/**
 * Cold reads through a checkpoint's anchor (src/persistence/anchor.ts), on every backend: a fresh
 * store verifies the checkpointed prefix by hashing its stored bytes and validates only the tail,
 * and damage anywhere, in the prefix, the tail or the checkpoint, still ends in the answer or the
 * refusal a full read gives.
 */
import pg from 'pg';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  openStore,
  parseProjectionCacheRecord,
  readDerivedHistory,
  writeProjectionCheckpoint,
  type AnchoredRead,
  type ProjectionCacheRecord,
  type SessionStore,
} from '../../src/persistence/index.js';
import { DIGEST_CHUNK_ROWS } from '../../src/persistence/anchor.js';
import { Session, isSessionlogError, type NewEvent, type SurfaceSnapshot } from '../../src/session/index.js';
import { closedTurn, testHeader } from '../support/persistence-events.js';
import {
  BACKENDS,
  POSTGRES_TEST_URL,
  dropPostgresTestSchemas,
  postgresFixture,
  probePostgres,
  tempDir,
  type BackendFixture,
} from '../support/store-fixtures.js';

const postgres = await probePostgres();
if (!postgres.available) console.warn(`anchored reads: PostgreSQL skipped: ${postgres.reason}`);
const fixtures: BackendFixture[] = [...BACKENDS, ...(postgres.available ? [postgresFixture] : [])];

const T = 1_700_000_000_000;
const GREP = JSON.stringify({ pattern: 'quokka' });

function toolResult(content: string, extra: Record<string, unknown> = {}): never {
  return {
    turn: 1,
    step: 2,
    message: {
      id: 'r1',
      role: 'user',
      content: [{ type: 'tool-result', toolCallId: 'c1', content: [{ type: 'text', text: content }] }],
      source: { kind: 'tool', callId: 'c1' },
      ...extra,
    },
  } as never;
}

/** A closed turn with a tool call; its tool result is the surface node at seq 7. */
function toolTurn(): NewEvent[] {
  const reply = (id: string, step: number, content: unknown[]): NewEvent => ({
    type: 'assistant/message',
    time: T,
    data: {
      turn: 1,
      step,
      message: { id, role: 'assistant', content, source: { kind: 'model', provider: 'fake', model: 'm' } },
    } as never,
    surfaceOp: 'append',
  });
  return [
    { type: 'turn/start', time: T, data: { turn: 1 } },
    {
      type: 'user/message',
      time: T,
      data: { id: 'u1', role: 'user', content: [{ type: 'text', text: 'find it' }], source: { kind: 'user' } },
      surfaceOp: 'append',
    },
    { type: 'step/start', time: T, data: { turn: 1, step: 1 } },
    reply('a1', 1, [{ type: 'tool-call', id: 'c1', name: 'grep', arguments: GREP }]),
    { type: 'tool/call', time: T, data: { turn: 1, step: 1, callId: 'c1', name: 'grep', arguments: GREP } },
    { type: 'step/end', time: T, data: { turn: 1, step: 1 } },
    { type: 'step/start', time: T, data: { turn: 1, step: 2 } },
    { type: 'tool/result', time: T, data: toolResult('a very long grep output'), surfaceOp: 'append' },
    reply('a2', 2, [{ type: 'text', text: 'found it' }]),
    { type: 'step/end', time: T, data: { turn: 1, step: 2 } },
    { type: 'turn/end', time: T, data: { turn: 1, reason: { kind: 'completed' } } },
  ];
}

const TOOL_RESULT_SEQ = 7;
/** The pruner's rewrite of the tool result at seq 7: only its inner content changes. */
const prune: NewEvent = {
  type: 'tool/result',
  time: T,
  data: toolResult('[pruned]'),
  surfaceOp: { op: 'replace', start: TOOL_RESULT_SEQ, end: TOOL_RESULT_SEQ },
  sourceEventSeqs: [TOOL_RESULT_SEQ],
};

/** Seqs of the log {@link build} writes: the anchored prefix, then the tail. */
const PREFIX_LAST = 16; // toolTurn (0..10) and closedTurn(2) (11..16)
const PRUNE_SEQ = 17; // the tail: the prune (17), closedTurn(3) (18..23)
const HEAD = 24;

describe.each(fixtures)('anchored cold reads: $name', (fixture) => {
  let dir: { dir: string; cleanup: () => void };
  let url: string;
  const open: SessionStore[] = [];

  async function fresh(): Promise<SessionStore> {
    const store = await openStore(url);
    open.push(store);
    return store;
  }

  /** The checkpointed prefix (anchored at PREFIX_LAST), then the tail; every store closed after. */
  async function build(): Promise<ProjectionCacheRecord> {
    const store = await fresh();
    await store.create(testHeader('s'));
    await store.append('s', toolTurn(), { expectedSeq: 0, op: 'turn-1' });
    await store.append('s', closedTurn(2, T), { expectedSeq: 11, op: 'turn-2' });
    expect(await writeProjectionCheckpoint(store, 's')).toEqual({ asOfSeq: PREFIX_LAST });
    const record = (await store.projectionCache.get('s'))!;
    expect(record.anchor).toMatchObject({ seq: PREFIX_LAST });
    await store.append('s', [prune], { expectedSeq: PRUNE_SEQ, op: 'prune' });
    await store.append('s', closedTurn(3, T), { expectedSeq: 18, op: 'turn-3' });
    await closeAll();
    return record;
  }

  async function closeAll(): Promise<void> {
    for (const store of open.splice(0)) await store.close();
  }

  /** Appends `session/run` events to session `s` for seqs `from` to `to` (exclusive), 4,096 an append. */
  async function appendRuns(store: SessionStore, from: number, to: number): Promise<void> {
    for (let head = from; head < to; head += 4_096) {
      const runs = Array.from({ length: Math.min(to, head + 4_096) - head }, (_, i): NewEvent => ({
        type: 'session/run',
        time: T,
        data: { workflowId: 'w', runId: `r${head + i}` },
      }));
      await store.append('s', runs, { expectedSeq: head, op: `runs-${head}` });
    }
  }

  /** The session an anchored read returned (failing the test when the store answered held or differs). */
  function readOf(result: AnchoredRead | 'held' | 'differs'): AnchoredRead {
    expect(typeof result).toBe('object');
    return result as AnchoredRead;
  }

  function surfaceOf(record: ProjectionCacheRecord): SurfaceSnapshot {
    return record.rows.surface!.val as unknown as SurfaceSnapshot;
  }

  /** What a full read of the stored log answers: its messages, or the error it is refused with. */
  async function fullRead(): Promise<{ messages: unknown } | { error: unknown }> {
    const store = await fresh();
    try {
      return {
        messages: Session.fromEvents(await store.header('s'), await store.readFrom('s', 0)).deriveMessages(),
      };
    } catch (error) {
      return { error };
    }
  }

  /** A cold derived-history read on a fresh store, as an answer or an error. */
  async function coldRead(): Promise<{ messages: unknown; fromCache: boolean } | { error: unknown }> {
    try {
      const history = await readDerivedHistory(await fresh(), 's');
      return { messages: history.messages, fromCache: history.fromCache };
    } catch (error) {
      return { error };
    }
  }

  /** The cold read refuses exactly as a full read does, naming the same seq. */
  async function expectRefusedAsFullRead(): Promise<void> {
    const full = await fullRead();
    expect('error' in full && isSessionlogError(full.error, 'CORRUPT_LOG')).toBe(true);
    const cold = await coldRead();
    expect('error' in cold).toBe(true);
    const [fullError, coldError] = [(full as { error: Error }).error, (cold as { error: Error }).error];
    expect(isSessionlogError(coldError, 'CORRUPT_LOG')).toBe(true);
    expect(coldError.message).toBe(fullError.message);
  }

  beforeEach(() => {
    dir = tempDir('sessionlog-anchored-');
    url = fixture.url(dir.dir);
  });

  afterEach(async () => {
    await closeAll();
    if (fixture.name === 'postgres') dropPostgresTestSchemas();
    dir.cleanup();
  });

  it('verifies the prefix by its digest and validates only the tail, in the context the anchor holds', async () => {
    const record = await build();
    const anchored = readOf(await (await fresh()).readAnchored('s', record.anchor!, surfaceOf(record)));
    expect(anchored.nextSeq).toBe(HEAD);
    expect(anchored.storedAt(PRUNE_SEQ)).toMatchObject({ seq: PRUNE_SEQ, op: 'prune', type: 'tool/result' });
    // Of the prefix, only what the surface still shows (and the anchored seq) was decoded.
    expect(anchored.storedAt(TOOL_RESULT_SEQ)).toMatchObject({ seq: TOOL_RESULT_SEQ, op: 'turn-1' });
    expect(anchored.storedAt(0)).toBeUndefined();
    expect(anchored.anchor.seq).toBe(HEAD - 1);

    const full = await fullRead();
    const cold = await coldRead();
    expect(cold).toEqual({ messages: (full as { messages: unknown }).messages, fromCache: true });
    expect(JSON.stringify((cold as { messages: unknown }).messages)).toContain('[pruned]');
    // A tail this short is not due a checkpoint (derived-history.ts): the read left the record as it was.
    expect(await (await fresh()).projectionCache.get('s')).toEqual(record);
  });

  it('writes the checkpoint back, anchored at the head, once the tail is due one, and the next cold read verifies it', async () => {
    await build();
    const writer = await fresh();
    const runs = (from: number): NewEvent[] =>
      Array.from({ length: 100 }, (_, i) => ({
        type: 'session/run',
        time: T,
        data: { workflowId: 'w', runId: `r${from + i}` },
      }));
    for (let at = HEAD; at < HEAD + 300; at += 100)
      await writer.append('s', runs(at), { expectedSeq: at, op: `runs-${at}` });
    await closeAll();
    expect(await coldRead()).toMatchObject({ fromCache: true });
    const refreshed = (await (await fresh()).projectionCache.get('s'))!;
    expect(refreshed.anchor?.seq).toBe(HEAD + 299);
    const again = readOf(await (await fresh()).readAnchored('s', refreshed.anchor!, surfaceOf(refreshed)));
    expect(again).toMatchObject({ nextSeq: HEAD + 300 });
    expect(again.anchor).toEqual(refreshed.anchor);
  });

  it('reads through the validated copy a store already holds, and anchors only that copy at its head', async () => {
    const record = await build();
    const store = await fresh();
    await store.readFrom('s', 0);
    expect(await store.readAnchored('s', record.anchor!, surfaceOf(record))).toBe('held');
    expect(await store.prefixAnchor('s', HEAD - 2)).toBeUndefined();
    const anchor = await store.prefixAnchor('s', HEAD - 1);
    // The anchor of the copy the store validated is the anchor a cold read computes from the stored bytes.
    const cold = readOf(await (await fresh()).readAnchored('s', record.anchor!, surfaceOf(record)));
    expect(anchor).toEqual(cold.anchor);
  });

  it('does not take a prefix that changed in any way, even validly, from the anchor', async () => {
    const record = await build();
    const edited = (await fresh()).readFrom('s', 0).then((events) => events[1]!);
    const user = (await edited) as unknown as Record<string, unknown> & { data: { content: unknown[] } };
    await closeAll();
    fixture.editRecord(url, 's', 1, {
      kind: 'replace',
      event: { ...user, data: { ...user.data, content: [{ type: 'text', text: 'find it, edited' }] } },
    });
    expect(await (await fresh()).readAnchored('s', record.anchor!, surfaceOf(record))).toBe('differs');
    const cold = await coldRead();
    expect(cold).toEqual({ ...(await fullRead()), fromCache: false });
    expect(JSON.stringify(cold)).toContain('find it, edited');
  });

  /** Changes the stored log into another valid one: the reply a2 (a surface node at seq 8) and the step/end after it change places. */
  async function swapReplyAndStepEnd(): Promise<void> {
    const events = await (await fresh()).readFrom('s', 0);
    await closeAll();
    const [reply, stepEnd] = [events[8]!, events[9]!] as unknown as Array<Record<string, unknown>>;
    fixture.editRecord(url, 's', 8, { kind: 'replace', event: { ...stepEnd, seq: 8 } });
    fixture.editRecord(url, 's', 9, { kind: 'replace', event: { ...reply, seq: 9 } });
  }

  it('does not use a checkpoint at all over a prefix changed into another valid log (two records swapped)', async () => {
    const record = await build();
    await swapReplyAndStepEnd();
    expect(await (await fresh()).readAnchored('s', record.anchor!, surfaceOf(record))).toBe('differs');
    const full = await fullRead();
    expect('messages' in full).toBe(true);
    // Not from the checkpoint, whose surface still names seq 8 as the reply.
    expect(await coldRead()).toEqual({ ...full, fromCache: false });
    expect(JSON.stringify(full)).toContain('found it');
  });

  it('does not use a checkpoint over a log changed under it when the store reads through its validated copy', async () => {
    const record = await build();
    await swapReplyAndStepEnd();
    const full = await fullRead();
    const store = await fresh();
    await store.readFrom('s', 0);
    // The store holds a copy of the changed log: it reads through it, not through the anchor.
    expect(await store.readAnchored('s', record.anchor!, surfaceOf(record))).toBe('held');
    const problems: unknown[] = [];
    const history = await readDerivedHistory(store, 's', undefined, { onCacheProblem: (p) => problems.push(p) });
    expect({ messages: history.messages, fromCache: history.fromCache }).toEqual({ ...full, fromCache: false });
    expect(String(problems[0])).toContain(`checkpoint at seq ${PREFIX_LAST} is not the stored log's`);
    // The record was rewritten from the copy, so the next read of this store uses it again.
    expect((await readDerivedHistory(store, 's')).fromCache).toBe(true);
  });

  it.each([
    ['a prefix record that does not decode', 3, { kind: 'garble' } as const],
    ['a prefix record removed', 2, { kind: 'delete' } as const],
    ['a tail record that does not decode', 20, { kind: 'garble' } as const],
  ])('refuses %s as a full read does', async (_name, seq, edit) => {
    const record = await build();
    fixture.editRecord(url, 's', seq, edit);
    expect(await (await fresh()).readAnchored('s', record.anchor!, surfaceOf(record))).toBe('differs');
    await expectRefusedAsFullRead();
  });

  it('validates the tail against the anchored prefix: a rewrite of a prefix tool result that changes more than its content is refused', async () => {
    const record = await build();
    fixture.editRecord(url, 's', PRUNE_SEQ, {
      kind: 'replace',
      event: {
        seq: PRUNE_SEQ,
        type: 'tool/result',
        time: T,
        data: toolResult('[pruned]', { id: 'another-id' }),
        surfaceOp: prune.surfaceOp,
        sourceEventSeqs: prune.sourceEventSeqs,
      },
    });
    expect(await (await fresh()).readAnchored('s', record.anchor!, surfaceOf(record))).toBe('differs');
    await expectRefusedAsFullRead();
  });

  // PostgreSQL's batches table cannot hold an op twice (its primary key), so no log there reuses one.
  it.skipIf(fixture.name === 'postgres')(
    'validates the tail against the anchored ops: a tail batch reusing a prefix op is refused',
    async () => {
      const record = await build();
      fixture.plantEvent(url, 's', {
        seq: HEAD,
        type: 'session/run',
        time: T,
        data: { workflowId: 'w', runId: 'r' },
        op: 'turn-1',
      });
      expect(await (await fresh()).readAnchored('s', record.anchor!, surfaceOf(record))).toBe('differs');
      await expectRefusedAsFullRead();
    },
  );

  // Batch records in a table of their own (PostgreSQL): one added where no batch starts is seen,
  // whether it starts on a row of the anchored prefix or before seq 0.
  it.skipIf(fixture.name !== 'postgres').each([
    ['on a row of the prefix (seq 3)', 3],
    ['before seq 0', -1],
  ])('does not take a prefix whose batches table gained a record %s', async (_where, firstSeq) => {
    const record = await build();
    const admin = new pg.Client({ connectionString: POSTGRES_TEST_URL });
    await admin.connect();
    try {
      const schema = `"${new URL(url).searchParams.get('schema')!}"`;
      await admin.query(
        `INSERT INTO ${schema}.batches (session_key, op, first_seq, last_seq)
         SELECT key, 'planted', $2, $2 FROM ${schema}.sessions WHERE id = $1`,
        ['s', firstSeq],
      );
    } finally {
      await admin.end();
    }
    expect(await (await fresh()).readAnchored('s', record.anchor!, surfaceOf(record))).toBe('differs');
  });

  it('does not trust a checkpoint whose surface or ops were edited', async () => {
    const record = await build();
    const surface = surfaceOf(record);
    const store = await fresh();
    const dropped = { ...surface, nodes: surface.nodes.slice(1) };
    expect(await store.readAnchored('s', record.anchor!, dropped)).toBe('differs');
    const ops = record.anchor!.ops.filter(([op]) => op !== 'turn-2');
    expect(await store.readAnchored('s', { ...record.anchor!, ops }, surface)).toBe('differs');
    const moved = { ...record.anchor!, seq: PREFIX_LAST - 1 };
    expect(await store.readAnchored('s', moved, surface)).toBe('differs');
    expect(readOf(await store.readAnchored('s', record.anchor!, surface)).nextSeq).toBe(HEAD);
  });

  it('leaves a relational log whose op holds a control character unanchored (its digest text could be read two ways); it reads as before', async () => {
    const store = await fresh();
    await store.create(testHeader('s'));
    await store.append('s', closedTurn(1, T), { expectedSeq: 0, op: 'turn\u001f1' });
    await writeProjectionCheckpoint(store, 's');
    const record = (await store.projectionCache.get('s'))!;
    // JSONL anchors the file's bytes, which JSON escapes the op in.
    expect(record.anchor === undefined).toBe(fixture.name !== 'jsonl');
    await store.append('s', closedTurn(2, T), { expectedSeq: 6, op: 'turn-2' });
    await closeAll();
    expect(await coldRead()).toEqual({ ...(await fullRead()), fromCache: true });
  });

  it('hashes a long log chunk by chunk: checkpoints at, just past and two whole chunks in verify, and a change inside a whole chunk is seen', async () => {
    const CHUNK = DIGEST_CHUNK_ROWS; // PostgreSQL hashes a whole chunk on the server
    const store = await fresh();
    await store.create(testHeader('s'));
    await store.append('s', closedTurn(1, T), { expectedSeq: 0, op: 'turn-1' });
    let head = 6;
    const grow = async (to: number): Promise<void> => {
      await appendRuns(store, head, to);
      head = to;
    };
    const records: ProjectionCacheRecord[] = [];
    for (const last of [CHUNK - 1, CHUNK, 2 * CHUNK - 1]) {
      await grow(last + 1);
      expect(await writeProjectionCheckpoint(store, 's')).toEqual({ asOfSeq: last });
      records.push((await store.projectionCache.get('s'))!);
    }
    await grow(2 * CHUNK + 40);
    const sealed = await store.prefixAnchor('s', head - 1);
    await closeAll();
    for (const record of records) {
      const read = readOf(await (await fresh()).readAnchored('s', record.anchor!, surfaceOf(record)));
      expect(read.nextSeq).toBe(head);
      // The cold read's digest, from the database's chunks, is the one the writer's validated copy seals.
      expect(read.anchor).toEqual(sealed);
    }
    // A valid change in the first chunk, which PostgreSQL hashes whole on the server.
    const changed = (await (await fresh()).readFrom('s', 100))[0]! as unknown as Record<string, unknown>;
    await closeAll();
    fixture.editRecord(url, 's', 100, {
      kind: 'replace',
      event: { ...changed, data: { workflowId: 'w', runId: 'x' } },
    });
    for (const record of records)
      expect(await (await fresh()).readAnchored('s', record.anchor!, surfaceOf(record))).toBe('differs');
    expect(await coldRead()).toEqual({ ...(await fullRead()), fromCache: false });
  });

  it.skipIf(fixture.name !== 'postgres')(
    'hashes whole chunks on a second pooled connection when one is free, and alone when none can be had or it fails',
    async () => {
      const CHUNK = DIGEST_CHUNK_ROWS;
      const store = await fresh();
      await store.create(testHeader('s'));
      await store.append('s', closedTurn(1, T), { expectedSeq: 0, op: 'turn-1' });
      await appendRuns(store, 6, 2 * CHUNK);
      expect(await writeProjectionCheckpoint(store, 's')).toEqual({ asOfSeq: 2 * CHUNK - 1 });
      await appendRuns(store, 2 * CHUNK, 2 * CHUNK + 40);
      const record = (await store.projectionCache.get('s'))!;
      const sealed = await store.prefixAnchor('s', 2 * CHUNK + 39);
      await closeAll();

      const connect = pg.Pool.prototype.connect as (this: pg.Pool) => Promise<pg.PoolClient>;
      /** An anchored read on a fresh store, its connections taken through `lend` (the read's own first, then any spare). */
      const readWith = async (lend: (this: pg.Pool, nth: number) => Promise<pg.PoolClient>) => {
        const reader = await fresh();
        let nth = 0;
        const spy = vi.spyOn(pg.Pool.prototype, 'connect').mockImplementation(function (this: pg.Pool) {
          return lend.call(this, ++nth);
        } as never);
        try {
          const read = readOf(await reader.readAnchored('s', record.anchor!, surfaceOf(record)));
          return { read, connections: nth };
        } finally {
          spy.mockRestore();
          await closeAll();
        }
      };

      // A free connection: both hash, and the digest is the one the writer sealed.
      const both = await readWith(function () {
        return connect.call(this);
      });
      expect(both.connections).toBe(2);
      expect(both.read.anchor).toEqual(sealed);
      expect(both.read.nextSeq).toBe(2 * CHUNK + 40);
      // No spare to be had (it fails to connect): the read's own connection hashes every chunk.
      const alone = await readWith(function (nth) {
        return nth === 2 ? Promise.reject(new Error('no spare')) : connect.call(this);
      });
      expect(alone.read.anchor).toEqual(sealed);
      // A spare whose statement fails: its chunk is hashed again on the read's own connection.
      const broken = await readWith(async function (nth) {
        const client = await connect.call(this);
        if (nth === 2) client.query = (() => Promise.reject(new Error('spare broke'))) as never;
        return client;
      });
      expect(broken.connections).toBe(2);
      expect(broken.read.anchor).toEqual(sealed);
      // A full pool (no idle connection, no room for one) is not asked: the read never waits on it.
      const full = await readWith(async function (nth) {
        if (nth > 1) throw new Error('a full pool was asked for a spare');
        const client = await connect.call(this);
        this.options.max = this.totalCount;
        return client;
      });
      expect(full.connections).toBe(1);
      expect(full.read.anchor).toEqual(sealed);

      // A valid change in the second chunk is seen too, whichever connection hashed it.
      const changed = (await (await fresh()).readFrom('s', CHUNK + 100))[0]! as unknown as Record<string, unknown>;
      await closeAll();
      fixture.editRecord(url, 's', CHUNK + 100, {
        kind: 'replace',
        event: { ...changed, data: { workflowId: 'w', runId: 'x' } },
      });
      expect(await (await fresh()).readAnchored('s', record.anchor!, surfaceOf(record))).toBe('differs');
      expect(await coldRead()).toEqual({ ...(await fullRead()), fromCache: false });
    },
  );

  it('answers SESSION_NOT_FOUND for a session that does not exist', async () => {
    const record = await build();
    await expect((await fresh()).readAnchored('nope', record.anchor!, surfaceOf(record))).rejects.toMatchObject({
      code: 'SESSION_NOT_FOUND',
    });
  });
});

describe("a checkpoint record's anchor as stored", () => {
  const anchor = { seq: 9, digest: 'A'.repeat(86), ops: [['turn-1', 0, 5] as unknown, ['turn-2', 6, 9]] };
  const recordText = (ops: unknown) =>
    JSON.stringify({ identity: { createdAt: 1 }, rows: {}, anchor: { ...anchor, ops } });

  it('reads an op list of [op, firstSeq, lastSeq] entries, and no other shape (the record then reads as absent)', () => {
    expect(parseProjectionCacheRecord(recordText(anchor.ops))?.anchor?.ops).toEqual([
      ['turn-1', 0, 5],
      ['turn-2', 6, 9],
    ]);
    expect(parseProjectionCacheRecord(recordText([]))?.anchor?.ops).toEqual([]);
    for (const ops of [
      {},
      'turn-1',
      [['turn-1', 0]],
      [['turn-1', 0, 5, 6]],
      [[1, 0, 5]],
      [['turn-1', -1, 5]],
      [['turn-1', 0, 5.5]],
      [['turn-1', 0, '5']],
      [['turn-1', 0, 2 ** 53]],
      [{ 0: 'turn-1', 1: 0, 2: 5, length: 3 }],
      [['turn-1', 0, 5], null],
    ])
      expect(parseProjectionCacheRecord(recordText(ops))).toBeUndefined();
  });
});
