/**
 * DESIGN §4.1 on every backend, as the reproducers of issue 8 found it broken: a store never
 * deletes or rewrites a committed record. A complete record that fails validation, a seq gap
 * and a damaged record inside committed data are refused with CORRUPT_LOG naming the session
 * and the first bad seq, by every read and write, and nothing on disk changes; other sessions
 * keep working. SQLite and PostgreSQL have no torn writes, so they never truncate.
 */
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openStore, type SessionStore } from '../../src/persistence/index.js';
import {
  SESSION_FORMAT_VERSION,
  isSessionlogError,
  type NewEvent,
  type SessionHeader,
  type StoredEvent,
} from '../../src/session/index.js';
import {
  BACKENDS,
  dropPostgresTestSchemas,
  postgresFixture,
  probePostgres,
  tempDir,
  type BackendFixture,
} from '../support/store-fixtures.js';

const postgres = await probePostgres();
if (!postgres.available) console.warn(`integrity tests: PostgreSQL skipped: ${postgres.reason}`);
afterAll(() => dropPostgresTestSchemas());

const T0 = 1_700_000_000_000;
const header = (id: string): SessionHeader => ({ version: SESSION_FORMAT_VERSION, id, createdAt: T0 });
const user = (id: string, text = id): NewEvent => ({
  type: 'user/message',
  time: T0,
  data: { id, role: 'user', content: [{ type: 'text', text }], source: { kind: 'user' } },
  surfaceOp: 'append',
});
const turnStart = (turn: number): NewEvent => ({ type: 'turn/start', time: T0, data: { turn } });
const turnEnd = (turn: number): NewEvent => ({
  type: 'turn/end',
  time: T0,
  data: { turn, reason: { kind: 'completed' } },
});
const chunk = (text: string): NewEvent => ({
  type: 'assistant/chunk',
  time: T0,
  data: { turn: 2, step: 1, chunk: { kind: 'text-delta', text } },
});

/** Every way a caller reaches a session's events; each must refuse a corrupt log the same way. */
function readers(store: SessionStore, id: string, head: number): Array<[string, () => Promise<unknown>]> {
  return [
    ['load', () => store.load(id)],
    ['inspect', () => store.inspect(id)],
    ['readFrom(0)', () => store.readFrom(id, 0)],
    ['readFrom(head)', () => store.readFrom(id, head)],
    ['nextSeq', () => store.nextSeq(id)],
    ['append', () => store.append(id, [user('late')], { expectedSeq: head, op: 'late' })],
    [
      'watch',
      async () => {
        for await (const _ of store.watch(id, 0)) break;
      },
    ],
  ];
}

async function failure(attempt: () => Promise<unknown>): Promise<unknown> {
  try {
    await attempt();
  } catch (error) {
    return error;
  }
  return undefined;
}

describe.each([...BACKENDS, ...(postgres.available ? [postgresFixture] : [])])(
  'stored-log integrity: $name',
  (fixture: BackendFixture) => {
    let cleanup: () => void;
    let url: string;
    const opened: SessionStore[] = [];

    async function open(): Promise<SessionStore> {
      const store = await openStore(url, { pollIntervalMs: 10 });
      opened.push(store);
      return store;
    }

    /** Writes `batches` through the real append path (and a healthy sibling session), then closes the store. */
    async function write(id: string, batches: readonly NewEvent[][]): Promise<void> {
      const store = await open();
      await store.create(header(id));
      await store.create(header('sibling'));
      await store.append('sibling', [turnStart(1), user('hello'), turnEnd(1)], { expectedSeq: 0, op: 'sibling-1' });
      let seq = 0;
      for (const [n, batch] of batches.entries()) {
        await store.append(id, batch, { expectedSeq: seq, op: `b${n}` });
        seq += batch.length;
      }
      await store.close();
    }

    /** Every reader refuses with CORRUPT_LOG naming the session and `seq`; the storage is unchanged; the sibling still loads. */
    async function expectRefused(id: string, seq: number, head: number): Promise<void> {
      const before = fixture.dump(url);
      const store = await open();
      for (const [name, attempt] of readers(store, id, head)) {
        const error = await failure(attempt);
        expect(isSessionlogError(error, 'CORRUPT_LOG'), `${name}: ${String(error)}`).toBe(true);
        expect((error as Error).message, name).toContain(`session ${id}`);
        expect((error as Error).message, name).toMatch(new RegExp(`seq ${seq}\\b`));
      }
      expect(fixture.dump(url)).toBe(before);
      expect((await store.load('sibling')).events).toHaveLength(3);
    }

    beforeEach(() => {
      const made = tempDir(`sessionlog-integrity-${fixture.name}-`);
      cleanup = made.cleanup;
      url = fixture.url(made.dir);
    });

    afterEach(async () => {
      for (const store of opened.splice(0)) await store.close();
      cleanup();
    });

    const closedThenOpen = [
      [turnStart(1), user('u1'), turnEnd(1)],
      [turnStart(2)],
      [user('u2', 'the message that must survive')],
    ];

    it('a complete user/message without surfaceOp at seq 4 after an open turn is refused with CORRUPT_LOG naming seq 4, not deleted and closed', async () => {
      await write('s', closedThenOpen);
      const stored = await storedEvent('s', 4);
      fixture.editRecord(url, 's', 4, { kind: 'replace', event: withoutKey(stored, 'surfaceOp') });
      await expectRefused('s', 4, 5);
    });

    it('a complete user/message whose role is assistant is refused with CORRUPT_LOG naming its seq', async () => {
      await write('s', closedThenOpen);
      const stored = await storedEvent('s', 4);
      fixture.editRecord(url, 's', 4, {
        kind: 'replace',
        event: { ...stored, data: { ...(stored.data as object), role: 'assistant' } },
      });
      await expectRefused('s', 4, 5);
    });

    it('a committed turn/end stored at seq 3 with seq 2 missing is refused naming seq 2, not replaced by an interrupted turn/end', async () => {
      await write('s', [
        [turnStart(1), user('u1')],
        [{ type: 'step/start', time: T0, data: { turn: 1, step: 1 } }],
        [{ type: 'step/end', time: T0, data: { turn: 1, step: 1 } }, turnEnd(1)],
      ]);
      fixture.editRecord(url, 's', 2, { kind: 'delete' });
      await expectRefused('s', 2, 4);
    });

    it('one garbled assistant/chunk in the middle of an open turn is refused naming its seq, and the intact chunks after it stay stored', async () => {
      await write('s', [
        [turnStart(1), user('u1'), turnEnd(1)],
        [turnStart(2), user('u2')],
        [{ type: 'step/start', time: T0, data: { turn: 2, step: 1 } }],
        [chunk('a'), chunk('b'), chunk('c')],
        [chunk('d'), chunk('e'), chunk('f')],
      ]);
      fixture.editRecord(url, 's', 7, { kind: 'garble' });
      await expectRefused('s', 7, 12);
    });

    it('a garbled compaction/start is refused naming its seq; the summary, replacement message and compaction/end after it stay stored', async () => {
      await write('s', [
        [turnStart(1), user('u1'), turnEnd(1)],
        [{ type: 'compaction/start', time: T0, data: { compactionId: 'c1', turn: null, trigger: 'manual' } }],
        [
          {
            type: 'compaction/summary',
            time: T0,
            data: {
              compactionId: 'c1',
              summary: [{ type: 'text', text: 'sum' }],
              shadowedRange: { start: 1, end: 1 },
              shadowedSeqs: [1],
              shadowedTokenCount: 3,
              provider: 'fake',
              model: 'm',
            },
          },
          { ...user('summary', '<summary>'), surfaceOp: { op: 'replace', start: 1, end: 1 }, sourceEventSeqs: [1] },
        ],
        [{ type: 'compaction/end', time: T0, data: { compactionId: 'c1', turn: null } }],
      ]);
      fixture.editRecord(url, 's', 3, { kind: 'garble' });
      await expectRefused('s', 3, 7);
    });

    it('a replace pointing at a seq that is not on the surface is refused naming its seq', async () => {
      await write('s', [
        [turnStart(1), user('u1'), turnEnd(1)],
        [{ ...user('r'), surfaceOp: { op: 'replace', start: 1, end: 1 }, sourceEventSeqs: [1] }],
      ]);
      const stored = await storedEvent('s', 3);
      fixture.editRecord(url, 's', 3, {
        kind: 'replace',
        event: { ...stored, surfaceOp: { op: 'replace', start: 2, end: 2 }, sourceEventSeqs: [2] },
      });
      await expectRefused('s', 3, 4);
    });

    it('a stored record whose seq was changed (a duplicate of seq 1) is refused naming the seq where it stands', async () => {
      await write('s', closedThenOpen);
      const stored = await storedEvent('s', 2);
      // Seq 2 now claims to be seq 1: a duplicate; the relational backends also lose seq 2 itself.
      if (fixture.name === 'jsonl') {
        fixture.editRecord(url, 's', 2, { kind: 'replace', event: { ...stored, seq: 1 } });
        await expectRefused('s', 2, 5);
      } else {
        fixture.editRecord(url, 's', 2, { kind: 'replace', event: { ...stored, seq: 7 } });
        await expectRefused('s', 2, 5);
      }
    });

    it.skipIf(fixture.name === 'jsonl')(
      'a damaged final record is refused and left in place: this backend commits whole transactions and never truncates',
      async () => {
        await write('s', closedThenOpen);
        fixture.editRecord(url, 's', 4, { kind: 'garble' });
        await expectRefused('s', 4, 5);
      },
    );

    it('an op already stored with a different event count or types is OP_CONFLICT and writes nothing; the same batch again is replayed', async () => {
      await write('s', [[turnStart(1), user('u1')]]);
      const store = await open();
      const before = fixture.dump(url);
      for (const batch of [[turnStart(1)], [turnStart(1), user('u1'), turnEnd(1)], [turnStart(1), turnEnd(1)]]) {
        const error = await failure(() => store.append('s', batch, { expectedSeq: 2, op: 'b0' }));
        expect(isSessionlogError(error, 'OP_CONFLICT'), `${batch.length} events: ${String(error)}`).toBe(true);
        expect((error as Error).message).toMatch(/b0/);
      }
      expect(fixture.dump(url)).toBe(before);
      expect(
        await store.append('s', [turnStart(1), user('other text, same types')], { expectedSeq: 2, op: 'b0' }),
      ).toEqual({ firstSeq: 0, lastSeq: 1, replayed: true });
    });

    async function storedEvent(id: string, seq: number): Promise<Record<string, unknown>> {
      const store = await open();
      const [event] = await store.readFrom(id, seq, 1);
      await store.close();
      return JSON.parse(JSON.stringify(event as StoredEvent)) as Record<string, unknown>;
    }
  },
);

function withoutKey(object: Record<string, unknown>, key: string): Record<string, unknown> {
  const { [key]: _dropped, ...rest } = object;
  return rest;
}
