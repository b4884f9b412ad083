/**
 * The one conformance suite every `SessionStore` backend passes (DESIGN §4; dsh-spec §14
 * properties 39–52 adapted to our interface). Each test opens a fresh store in its own temp
 * directory through `openStore(url)`. Backend-specific raw access (planting foreign records,
 * dumping stored data) comes from the fixture.
 */
import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  ALL_TENANTS,
  tenantScope,
  type TenantScope,
  openStore,
  scopeStore,
  readDerivedHistory,
  writeProjectionCheckpoint,
  searchableText,
  SNIPPET_MAX_CHARS,
  type SearchHit,
  type SessionStore,
} from '../../src/persistence/index.js';
import { indexedWords } from '../../src/persistence/search.js';
import {
  ProjectionRegistry,
  SESSION_FORMAT_VERSION,
  Session,
  interruptedTurnClosers,
  DEFAULT_TENANT,
  isSessionlogError,
  repairOp,
  surfaceProjection,
  type ContentBlock,
  type StoredEvent,
  type SurfaceSnapshot,
  type NewEvent,
  type SessionErrorCode,
  type SessionHeader,
} from '../../src/session/index.js';
import { ANY_REPLACES, buildLog, programArb } from '../support/log-gen.js';
import { GIF_1X1, png } from '../support/media.js';
import { tempDir, type BackendFixture } from '../support/store-fixtures.js';

const T0 = 1_700_000_000_000;

function header(id: string, extra: Partial<SessionHeader> = {}): SessionHeader {
  return { version: SESSION_FORMAT_VERSION, id, createdAt: T0, ...extra };
}

const run = (n: number): NewEvent => ({
  type: 'session/run',
  time: T0 + n,
  data: { workflowId: 'wf', runId: `run-${n}` },
});
const user = (id: string, text = id): NewEvent => ({
  type: 'user/message',
  time: T0,
  data: { id, role: 'user', content: [{ type: 'text', text }], source: { kind: 'user' } },
  surfaceOp: 'append',
});

/** Awaits `attempt` (which may also throw synchronously) and returns the SessionlogError code it failed with. */
async function failureCode(attempt: () => unknown): Promise<SessionErrorCode | string> {
  try {
    const value = attempt();
    if (value && typeof (value as AsyncIterable<unknown>)[Symbol.asyncIterator] === 'function') {
      for await (const _ of value as AsyncIterable<unknown>) break;
    } else {
      await value;
    }
  } catch (error) {
    return isSessionlogError(error) ? error.code : `non-sessionlog error: ${String(error)}`;
  }
  return 'did not fail';
}

async function failure(attempt: () => unknown): Promise<unknown> {
  try {
    await attempt();
  } catch (error) {
    return error;
  }
  return undefined;
}

/** Appends `inputs` split into batches of the given sizes, mirroring each batch on `reference`. */
async function appendInBatches(
  store: SessionStore,
  reference: Session,
  inputs: readonly NewEvent[],
  sizes: readonly number[],
): Promise<void> {
  let at = 0;
  let batch = 0;
  while (at < inputs.length) {
    const size = Math.max(1, Math.min(sizes[batch % Math.max(sizes.length, 1)] ?? 1, inputs.length - at));
    const slice = inputs.slice(at, at + size);
    const op = `op-${batch}`;
    const result = await store.append(reference.id, slice, { expectedSeq: reference.nextSeq, op });
    expect(result).toEqual({
      firstSeq: reference.nextSeq,
      lastSeq: reference.nextSeq + slice.length - 1,
      replayed: false,
    });
    reference.appendBatch(slice, op);
    at += size;
    batch += 1;
  }
}

/** Collects `count` events from a watch, or fails after a generous deadline (never a pass/fail timing). */
async function take(iterable: AsyncIterable<StoredEvent>, count: number): Promise<StoredEvent[]> {
  const out: StoredEvent[] = [];
  if (count === 0) return out;
  for await (const event of iterable) {
    out.push(event);
    if (out.length === count) break;
  }
  return out;
}

const assistant = (id: string, turn: number, step: number, content: ContentBlock[]): NewEvent => ({
  type: 'assistant/message',
  time: T0,
  data: {
    turn,
    step,
    message: { id, role: 'assistant', content, source: { kind: 'model', provider: 'fake', model: 'fake-1' } },
  },
  surfaceOp: 'append',
});

const toolResult = (callId: string, turn: number, step: number, text: string): NewEvent => ({
  type: 'tool/result',
  time: T0,
  data: {
    turn,
    step,
    message: {
      id: `r-${callId}`,
      role: 'user',
      content: [{ type: 'tool-result', toolCallId: callId, content: [{ type: 'text', text }] }],
      source: { kind: 'tool', callId },
    },
  },
  surfaceOp: 'append',
});

const GREP_ARGUMENTS = JSON.stringify({ pattern: 'quokka\nhabitat', path: 'src/zoo.ts' });

/**
 * A turn whose every text-bearing event holds its own word, then a manual compaction that shadows
 * the turn's surface nodes (1, 3, 7, 8): user message 1 (walrus, naïve), reasoning 3 (zebra),
 * tool call 3 and 4 (quokka habitat, zoo.ts), tool result 7 (ocelot, zoo.ts), answer 8 (walrus,
 * café), compaction summary 12 (narwhal), replacement 13 (checkpoint).
 */
function searchableTurn(): NewEvent[] {
  return [
    { type: 'turn/start', time: T0, data: { turn: 1 } },
    user('u1', 'Where is the Walrus migration plan? A naïve question.'),
    { type: 'step/start', time: T0, data: { turn: 1, step: 1 } },
    assistant('a1', 1, 1, [
      { type: 'reasoning', text: 'The zebra crossing note may help.' },
      { type: 'text', text: 'Let me search the repository.' },
      { type: 'tool-call', id: 'c1', name: 'grep', arguments: GREP_ARGUMENTS },
    ]),
    { type: 'tool/call', time: T0, data: { turn: 1, step: 1, callId: 'c1', name: 'grep', arguments: GREP_ARGUMENTS } },
    { type: 'step/end', time: T0, data: { turn: 1, step: 1 } },
    { type: 'step/start', time: T0, data: { turn: 1, step: 2 } },
    toolResult('c1', 1, 2, 'src/zoo.ts:12: the OCELOT enclosure opens at 09:30'),
    assistant('a2', 1, 2, [{ type: 'text', text: 'The plan lives in docs/walrus.md; the café opens later.' }]),
    { type: 'step/end', time: T0, data: { turn: 1, step: 2 } },
    { type: 'turn/end', time: T0, data: { turn: 1, reason: { kind: 'completed' } } },
    { type: 'compaction/start', time: T0, data: { compactionId: 'k1', turn: null, trigger: 'manual' } },
    {
      type: 'compaction/summary',
      time: T0,
      data: {
        compactionId: 'k1',
        summary: [{ type: 'text', text: 'Summary: the narwhal budget was approved.' }],
        shadowedRange: { start: 1, end: 8 },
        shadowedSeqs: [1, 3, 7, 8],
        shadowedTokenCount: 100,
        provider: 'fake',
        model: 'fake-1',
      },
    },
    {
      type: 'user/message',
      time: T0,
      data: {
        id: 'checkpoint-k1',
        role: 'user',
        content: [{ type: 'text', text: 'Checkpoint: earlier turns were summarised.' }],
        source: { kind: 'plugin', plugin: 'compact', compactionId: 'k1' },
      },
      surfaceOp: { op: 'replace', start: 1, end: 8 },
      sourceEventSeqs: [11, 12, 1, 3, 7, 8],
    },
    { type: 'compaction/end', time: T0, data: { compactionId: 'k1', turn: null } },
  ];
}

const seqsOf = (hits: readonly SearchHit[]): number[] => hits.map((hit) => hit.seq);
const sortedSeqsOf = (hits: readonly SearchHit[]): number[] => seqsOf(hits).sort((a, b) => a - b);

/** The seqs whose indexed words hold every one of `words` (the reference the indexes must agree with). */
function referenceSearch(events: readonly StoredEvent[], words: readonly string[]): number[] {
  return events
    .filter((event) => {
      const text = searchableText(event);
      if (text === undefined) return false;
      const indexed = new Set(indexedWords(text));
      return words.every((word) => indexed.has(word));
    })
    .map((event) => event.seq);
}

function openTurnInputs(): NewEvent[] {
  return [
    { type: 'turn/start', time: T0 + 1, data: { turn: 1 } },
    user('u1', 'please use tools'),
    { type: 'step/start', time: T0 + 2, data: { turn: 1, step: 1 } },
    { type: 'assistant/chunk', time: T0 + 3, data: { turn: 1, step: 1, chunk: { kind: 'text-delta', text: 'Call' } } },
    {
      type: 'assistant/message',
      time: T0 + 4,
      data: {
        turn: 1,
        step: 1,
        message: {
          id: 'a1',
          role: 'assistant',
          content: [
            { type: 'text', text: 'Calling' },
            { type: 'tool-call', id: 'c1', name: 'echo', arguments: '{"x":1}' },
            { type: 'tool-call', id: 'c2', name: 'echo', arguments: '{"x":2}' },
          ],
          source: { kind: 'model', provider: 'fake', model: 'fake-1' },
        },
      },
      surfaceOp: 'append',
      sourceEventSeqs: [3],
    },
    { type: 'tool/call', time: T0 + 5, data: { turn: 1, step: 1, callId: 'c1', name: 'echo', arguments: '{"x":1}' } },
  ];
}

export function runStoreConformance(fixture: BackendFixture): void {
  describe(`SessionStore conformance: ${fixture.name}`, () => {
    let dir: string;
    let cleanup: () => void;
    let url: string;
    let store: SessionStore;
    const opened: SessionStore[] = [];

    /** Another store instance on the same storage (a second process, or a restart). */
    async function reopen(): Promise<SessionStore> {
      const s = await openStore(url, { pollIntervalMs: 10 });
      opened.push(s);
      return s;
    }

    beforeEach(async () => {
      ({ dir, cleanup } = tempDir(`sessionlog-conf-${fixture.name}-`));
      url = fixture.url(dir);
      store = await reopen();
    });

    afterEach(async () => {
      for (const s of opened.splice(0)) await s.close();
      cleanup();
    });

    describe('create, header, exists, list', () => {
      it('create registers the header; header() returns it and list() lists every created session', async () => {
        const a = header('alpha', { agent: { model: 'deepseek-flash', system: 'sys', tools: ['read_artifact'] } });
        const b = header('beta', { parentSession: 'alpha', seedLength: 3 });
        await store.create(a);
        await store.create(b);
        expect(await store.header('alpha')).toEqual(a);
        expect(await store.exists('beta')).toBe(true);
        expect(await store.exists('gamma')).toBe(false);
        const listed = await (await reopen()).list(ALL_TENANTS);
        expect([...listed].sort((x, y) => x.id.localeCompare(y.id))).toEqual([a, b]);
      });

      it('create is idempotent for an identical header and SESSION_ALREADY_EXISTS for a different one, which changes nothing', async () => {
        await store.create(header('s'));
        await store.create(header('s'));
        await (await reopen()).create(header('s'));
        const before = fixture.dump(url);
        expect(await failureCode(() => store.create(header('s', { createdAt: T0 + 1 })))).toBe(
          'SESSION_ALREADY_EXISTS',
        );
        expect(await failureCode(() => store.create(header('s', { agent: { model: 'other' } })))).toBe(
          'SESSION_ALREADY_EXISTS',
        );
        expect(fixture.dump(url)).toBe(before);
        expect(await store.header('s')).toEqual(header('s'));
      });

      it('create refuses a header version ahead of this build as UNSUPPORTED_FORMAT', async () => {
        expect(await failureCode(() => store.create(header('s', { version: SESSION_FORMAT_VERSION + 1 })))).toBe(
          'UNSUPPORTED_FORMAT',
        );
        expect(await store.exists('s')).toBe(false);
      });

      it('every method on a session that does not exist fails with SESSION_NOT_FOUND', async () => {
        for (const attempt of [
          () => store.header('nope'),
          () => store.append('nope', [run(0)], { expectedSeq: 0, op: 'x' }),
          () => store.readFrom('nope', 0),
          () => store.nextSeq('nope'),
          () => store.load('nope'),
          () => store.inspect('nope'),
          () => store.session('nope'),
          () => store.scan('nope'),
          () => store.erase('nope', ALL_TENANTS),
          () => store.search('nope', 'anything'),
          () => store.artifacts.put({ sessionId: 'nope', name: 'a.txt', content: 'x' }),
        ]) {
          expect(await failureCode(attempt)).toBe('SESSION_NOT_FOUND');
        }
      });
    });

    describe('append', () => {
      it('appends only at expectedSeq: a stale or future expectedSeq is SEQ_CONFLICT and writes nothing', async () => {
        await store.create(header('s'));
        expect(await store.append('s', [run(0), run(1)], { expectedSeq: 0, op: 'b0' })).toEqual({
          firstSeq: 0,
          lastSeq: 1,
          replayed: false,
        });
        const before = fixture.dump(url);
        for (const expectedSeq of [0, 1, 3, 100]) {
          expect(
            await failureCode(() => store.append('s', [run(9)], { expectedSeq, op: `stale-${expectedSeq}` })),
          ).toBe('SEQ_CONFLICT');
        }
        expect(fixture.dump(url)).toBe(before);
        expect(await store.nextSeq('s')).toBe(2);
        expect(await (await reopen()).nextSeq('s')).toBe(2);
        expect(await store.append('s', [run(2)], { expectedSeq: 2, op: 'b1' })).toEqual({
          firstSeq: 2,
          lastSeq: 2,
          replayed: false,
        });
      });

      it('every stored event carries its batch op and seqs are contiguous from 0', async () => {
        await store.create(header('s'));
        await store.append('s', [run(0), run(1), run(2)], { expectedSeq: 0, op: 'first' });
        await store.append('s', [run(3)], { expectedSeq: 3, op: 'second' });
        const events = await (await reopen()).readFrom('s', 0);
        expect(events.map((e) => [e.seq, e.op])).toEqual([
          [0, 'first'],
          [1, 'first'],
          [2, 'first'],
          [3, 'second'],
        ]);
      });

      it('an op already stored is replayed with its original seqs and writes nothing, even when expectedSeq is now stale and from another instance', async () => {
        await store.create(header('s'));
        const first = await store.append('s', [run(0), run(1)], { expectedSeq: 0, op: 'once' });
        const before = fixture.dump(url);
        expect(await store.append('s', [run(0), run(1)], { expectedSeq: 0, op: 'once' })).toEqual({
          ...first,
          replayed: true,
        });
        expect(fixture.dump(url)).toBe(before);
        await store.append('s', [run(2)], { expectedSeq: 2, op: 'later' });
        const afterLater = fixture.dump(url);
        // Stale expectedSeq (0, now 3) and a fresh instance that must index ops from storage.
        const other = await reopen();
        expect(await other.append('s', [run(0), run(1)], { expectedSeq: 0, op: 'once' })).toEqual({
          ...first,
          replayed: true,
        });
        expect(await other.append('s', [run(0), run(1)], { expectedSeq: 3, op: 'once' })).toEqual({
          ...first,
          replayed: true,
        });
        expect(fixture.dump(url)).toBe(afterLater);
        expect(await other.nextSeq('s')).toBe(3);
      });

      it('a batch that fails validation (surface rule, non-JSON data, empty) is rejected whole and writes nothing', async () => {
        await store.create(header('s'));
        await store.append('s', [user('u0')], { expectedSeq: 0, op: 'b0' });
        const before = fixture.dump(url);
        const badReplace: NewEvent = {
          ...user('r'),
          surfaceOp: { op: 'replace', start: 7, end: 7 },
          sourceEventSeqs: [0],
        };
        const nonJson = {
          type: 'session/run',
          time: T0,
          data: { workflowId: 'w', runId: 'r', n: Number.NaN },
        } as NewEvent;
        const noSurfaceOp = { type: 'user/message', time: T0, data: (user('x') as { data: unknown }).data } as NewEvent;
        expect(
          await failureCode(() => store.append('s', [user('ok'), badReplace], { expectedSeq: 1, op: 'bad-1' })),
        ).toBe('SURFACE_VIOLATION');
        expect(
          await failure(() => store.append('s', [user('ok'), nonJson], { expectedSeq: 1, op: 'bad-2' })),
        ).toBeInstanceOf(TypeError);
        expect(await failureCode(() => store.append('s', [noSurfaceOp], { expectedSeq: 1, op: 'bad-3' }))).toBe(
          'SURFACE_VIOLATION',
        );
        expect(await failureCode(() => store.append('s', [], { expectedSeq: 1, op: 'bad-4' }))).toBe(
          'INVALID_ARGUMENT',
        );
        expect(await failureCode(() => store.append('s', [run(1)], { expectedSeq: 1, op: '' }))).toBe(
          'INVALID_ARGUMENT',
        );
        expect(await failureCode(() => store.append('s', [run(1)], { expectedSeq: -1, op: 'neg' }))).toBe(
          'INVALID_ARGUMENT',
        );
        expect(fixture.dump(url)).toBe(before);
        // The failed ops were not recorded: they can be used for a valid batch now.
        expect(await store.append('s', [user('ok')], { expectedSeq: 1, op: 'bad-1' })).toEqual({
          firstSeq: 1,
          lastSeq: 1,
          replayed: false,
        });
      });

      it('an event this build could not read back (unknown, empty or non-string type) is refused at append, so a load never drops or refuses it later', async () => {
        await store.create(header('s'));
        await store.append('s', [run(0)], { expectedSeq: 0, op: 'b0' });
        const before = fixture.dump(url);
        for (const type of ['future/widget', '', 5]) {
          const event = { type, time: T0, data: {} } as unknown as NewEvent;
          const code = await failureCode(() =>
            store.append('s', [event, run(1)], { expectedSeq: 1, op: `t-${String(type)}` }),
          );
          expect(['INVALID_EVENT', 'INVALID_ARGUMENT'], `type ${JSON.stringify(type)}: ${code}`).toContain(code);
        }
        expect(fixture.dump(url)).toBe(before);
        const loaded = await (await reopen()).load('s');
        expect([loaded.events.length, loaded.truncated]).toEqual([1, 0]);
      });

      it('a replace is validated against the stored surface, also by a fresh instance', async () => {
        await store.create(header('s'));
        await store.append('s', [user('u0'), user('u1')], { expectedSeq: 0, op: 'b0' });
        const other = await reopen();
        const summary: NewEvent = {
          ...user('sum'),
          surfaceOp: { op: 'replace', start: 0, end: 1 },
          sourceEventSeqs: [0, 1],
        };
        await other.append('s', [summary], { expectedSeq: 2, op: 'b1' });
        const again: NewEvent = {
          ...user('sum2'),
          surfaceOp: { op: 'replace', start: 0, end: 0 },
          sourceEventSeqs: [0],
        };
        expect(await failureCode(() => store.append('s', [again], { expectedSeq: 3, op: 'b2' }))).toBe(
          'SURFACE_VIOLATION',
        );
      });

      it('two instances appending at the same expectedSeq: exactly one wins, the other gets SEQ_CONFLICT, the log does not fork', async () => {
        await store.create(header('s'));
        const other = await reopen();
        for (let round = 0; round < 10; round++) {
          const expectedSeq = await store.nextSeq('s');
          const outcomes = await Promise.allSettled([
            store.append('s', [run(round)], { expectedSeq, op: `a-${round}` }),
            other.append('s', [run(round)], { expectedSeq, op: `b-${round}` }),
          ]);
          const won = outcomes.filter((o) => o.status === 'fulfilled');
          const lost = outcomes.filter((o): o is PromiseRejectedResult => o.status === 'rejected');
          expect(won).toHaveLength(1);
          expect(lost.map((o) => (isSessionlogError(o.reason) ? o.reason.code : String(o.reason)))).toEqual([
            'SEQ_CONFLICT',
          ]);
        }
        const events = await (await reopen()).readFrom('s', 0);
        expect(events.map((e) => e.seq)).toEqual([...Array(10).keys()]);
      });
    });

    describe('round trip', () => {
      it('random valid logs appended in random batches read back byte-identical (chunks included) and derive the same history', async () => {
        await fc.assert(
          fc.asyncProperty(
            programArb(50),
            fc.array(fc.integer({ min: 1, max: 6 }), { minLength: 1, maxLength: 8 }),
            async (program, sizes) => {
              const id = `rt-${Math.random().toString(36).slice(2, 10)}`;
              const generated = buildLog(program, ANY_REPLACES);
              const h = header(id);
              await store.create(h);
              const reference = Session.create(h);
              await appendInBatches(store, reference, generated.inputs, sizes);
              const fresh = await reopen();
              const read = await fresh.readFrom(id, 0);
              expect(JSON.stringify(read)).toBe(JSON.stringify(reference.events));
              const inspected = await fresh.inspect(id);
              expect(JSON.stringify(inspected.events.slice(0, reference.nextSeq))).toBe(
                JSON.stringify(reference.events),
              );
              expect(Session.fromEvents(h, read).deriveMessages()).toEqual(reference.deriveMessages());
            },
          ),
          { numRuns: 12 },
        );
      });

      it('unicode, control characters, large and deeply nested payloads round-trip exactly', async () => {
        await store.create(header('s'));
        let nested: unknown = 'leaf';
        for (let i = 0; i < 200; i++) nested = { i, nested };
        const text = `ünïcødé 𝄞 \u0000 \u2028 \u2029 "q" \\ \n\t ${'x'.repeat(200_000)}`;
        const events: NewEvent[] = [
          user('u', text),
          {
            type: 'assistant/chunk',
            time: -5,
            data: { turn: 1, step: 1, chunk: { kind: 'reasoning-delta', text: '\ud83d\ude00' } },
          },
          {
            type: 'session/run',
            time: Number.MAX_SAFE_INTEGER,
            data: { workflowId: 'w', runId: 'r', deep: nested } as never,
          },
        ];
        const reference = Session.create(header('s'));
        await appendInBatches(store, reference, events, [3]);
        expect(JSON.stringify(await (await reopen()).readFrom('s', 0))).toBe(JSON.stringify(reference.events));
      });
    });

    describe('load, inspect and crash repair', () => {
      it('load repairs a cold interrupted turn durably with the closers crash repair prescribes; a second load adds nothing', async () => {
        await store.create(header('s'));
        const reference = Session.create(header('s'));
        await appendInBatches(store, reference, openTurnInputs(), [2, 3, 1]);
        const closers = interruptedTurnClosers(reference.events);
        const expected = [...reference.events, ...reference.appendBatch(closers, repairOp(reference.nextSeq - 1))];

        const loaded = await (await reopen()).load('s');
        expect(loaded.repaired).toBe(4);
        expect(loaded.header).toEqual(header('s'));
        expect(JSON.stringify(loaded.events)).toBe(JSON.stringify(expected));
        expect(loaded.events.slice(-4).map((e) => e.type)).toEqual([
          'tool/result',
          'tool/result',
          'step/end',
          'turn/end',
        ]);

        const fresh = await reopen();
        expect(JSON.stringify(await fresh.readFrom('s', 0))).toBe(JSON.stringify(expected));
        const before = fixture.dump(url);
        const second = await fresh.load('s');
        expect(second.repaired).toBe(0);
        expect(JSON.stringify(second.events)).toBe(JSON.stringify(expected));
        expect(fixture.dump(url)).toBe(before);
      });

      it('load of random logs appends exactly the closers of an open turn (and nothing for a closed one), and the result derives paired history', async () => {
        await fc.assert(
          fc.asyncProperty(programArb(40), async (program) => {
            const id = `ld-${Math.random().toString(36).slice(2, 10)}`;
            const generated = buildLog(program, ANY_REPLACES);
            await store.create(header(id));
            const reference = Session.create(header(id));
            await appendInBatches(store, reference, generated.inputs, [4]);
            const closers = interruptedTurnClosers(reference.events);
            if (closers.length > 0) reference.appendBatch(closers, repairOp(reference.nextSeq - 1));
            const loaded = await (await reopen()).load(id);
            expect(loaded.repaired).toBe(closers.length);
            expect(JSON.stringify(loaded.events)).toBe(JSON.stringify(reference.events));
            expect((await (await reopen()).load(id)).repaired).toBe(0);
          }),
          { numRuns: 10 },
        );
      });

      it('inspect shows the closers in memory but writes nothing; readFrom never shows closers', async () => {
        await store.create(header('s'));
        const reference = Session.create(header('s'));
        await appendInBatches(store, reference, openTurnInputs(), [6]);
        const before = fixture.dump(url);
        const inspected = await store.inspect('s');
        expect(inspected.repaired).toBe(4);
        expect(inspected.events).toHaveLength(reference.nextSeq + 4);
        expect(fixture.dump(url)).toBe(before);
        expect(await store.nextSeq('s')).toBe(reference.nextSeq);
        expect(JSON.stringify(await store.readFrom('s', 0))).toBe(JSON.stringify(reference.events));
        const fresh = await reopen();
        expect((await fresh.inspect('s')).repaired).toBe(4);
        expect(fixture.dump(url)).toBe(before);
      });

      it('after a load repair a writer holding the old head gets SEQ_CONFLICT', async () => {
        await store.create(header('s'));
        await store.append('s', openTurnInputs(), { expectedSeq: 0, op: 'turn' });
        const head = await store.nextSeq('s');
        await (await reopen()).load('s');
        expect(await failureCode(() => store.append('s', [run(0)], { expectedSeq: head, op: 'late' }))).toBe(
          'SEQ_CONFLICT',
        );
      });

      it('a damaged final record is a torn write only in JSONL (dropped by load, ignored by readFrom); the transactional backends refuse it; damage before a committed record is CORRUPT_LOG everywhere', async () => {
        await store.create(header('s'));
        await store.create(header('c'));
        const closed: NewEvent[] = [
          { type: 'turn/start', time: T0, data: { turn: 1 } },
          user('u1'),
          { type: 'turn/end', time: T0, data: { turn: 1, reason: { kind: 'completed' } } },
        ];
        await store.append('s', closed, { expectedSeq: 0, op: 'turn-1' });
        await store.append('c', closed.slice(0, 2), { expectedSeq: 0, op: 'turn-1' });
        await store.close();
        fixture.plantDamagedRecord(url, 's', 3, true);
        fixture.plantDamagedRecord(url, 'c', 2, false);
        fixture.plantEvent(url, 'c', {
          seq: 3,
          type: 'turn/end',
          time: T0,
          data: { turn: 1, reason: { kind: 'completed' } },
          op: 'late',
        });
        const fresh = await reopen();
        if (fixture.name === 'jsonl') {
          expect((await fresh.readFrom('s', 0)).map((e) => e.seq)).toEqual([0, 1, 2]);
          const loaded = await fresh.load('s');
          expect(loaded.events.map((e) => e.seq)).toEqual([0, 1, 2]);
          expect(loaded.truncated).toBe(1);
          expect(await fresh.append('s', [run(3)], { expectedSeq: 3, op: 'after' })).toEqual({
            firstSeq: 3,
            lastSeq: 3,
            replayed: false,
          });
          expect((await (await reopen()).readFrom('s', 0)).map((e) => e.seq)).toEqual([0, 1, 2, 3]);
        } else {
          const before = fixture.dump(url);
          for (const attempt of [
            () => fresh.readFrom('s', 0),
            () => fresh.load('s'),
            () => fresh.append('s', [run(3)], { expectedSeq: 3, op: 'after' }),
          ]) {
            expect(await failureCode(attempt)).toBe('CORRUPT_LOG');
          }
          expect(fixture.dump(url)).toBe(before);
        }
        expect(await failureCode(() => fresh.load('c'))).toBe('CORRUPT_LOG');
      });

      it('a finished session whose acknowledged final turn/end is damaged in place is refused with CORRUPT_LOG naming its seq by every read and write, and nothing on disk changes (issue 52)', async () => {
        await store.create(header('s'));
        // Each turn: its start and message, its step's start, then the reply as one batch whose
        // last record is the turn/end (as the engine logs a streamed reply).
        let next = 0;
        for (const turn of [1, 2]) {
          const chunkSeq = next + 3;
          const batches: NewEvent[][] = [
            [{ type: 'turn/start', time: T0, data: { turn } }, user(`u${turn}`)],
            [{ type: 'step/start', time: T0, data: { turn, step: 1 } }],
            [
              {
                type: 'assistant/chunk',
                time: T0,
                data: { turn, step: 1, chunk: { kind: 'text-delta', text: `reply ${turn}` } },
              },
              {
                ...assistant(`a${turn}`, turn, 1, [{ type: 'text', text: `reply ${turn}` }]),
                sourceEventSeqs: [chunkSeq],
              },
              { type: 'step/end', time: T0, data: { turn, step: 1 } },
              { type: 'turn/end', time: T0, data: { turn, reason: { kind: 'completed' } } },
            ],
          ];
          for (const [i, batch] of batches.entries()) {
            await store.append('s', batch, { expectedSeq: next, op: `t${turn}-b${i}` });
            next += batch.length;
          }
        }
        expect(next).toBe(14);
        const lastSeq = next - 1;
        await store.close();
        // The final turn/end, complete (a JSONL line that still ends in its newline), no longer decodes.
        fixture.editRecord(url, 's', lastSeq, { kind: 'garble' });
        const before = fixture.dump(url);
        const fresh = await reopen();
        const refusal = async (attempt: () => Promise<unknown>): Promise<void> => {
          const error = await failure(attempt);
          expect(isSessionlogError(error, 'CORRUPT_LOG'), String(error)).toBe(true);
          expect((error as Error).message).toMatch(new RegExp(`seq ${lastSeq}\\b`));
        };
        await refusal(() => fresh.readFrom('s', 0));
        await refusal(() => fresh.inspect('s'));
        await refusal(() => fresh.load('s'));
        await refusal(() => fresh.session('s'));
        await refusal(() => fresh.append('s', [run(99)], { expectedSeq: next, op: 'next' }));
        // A writer that never saw the final batch is refused too: the damage is a complete record.
        await refusal(() => fresh.append('s', [run(99)], { expectedSeq: lastSeq - 3, op: 'other' }));
        const report = await fresh.scan('s');
        expect(report.problem).toMatchObject({ seq: lastSeq, code: 'CORRUPT_LOG', torn: false });
        expect(fixture.dump(url), 'the damaged store is exactly as it was').toBe(before);
        const other = await reopen();
        await refusal(() => other.load('s'));
        expect(fixture.dump(url)).toBe(before);
      });
    });

    describe('readFrom', () => {
      it('returns exactly the stored events with seq >= fromSeq (empty past the end), honours limit, and rejects negative or fractional fromSeq', async () => {
        await store.create(header('s'));
        await store.append('s', [run(0), run(1), run(2), run(3), run(4)], { expectedSeq: 0, op: 'b' });
        const all = await store.readFrom('s', 0);
        expect(all).toHaveLength(5);
        for (let n = 0; n <= 7; n++) {
          expect(await store.readFrom('s', n)).toEqual(all.slice(n));
          expect(await store.readFrom('s', n, 2)).toEqual(all.slice(n, n + 2));
        }
        expect(await store.readFrom('s', 1, 0)).toEqual([]);
        for (const fromSeq of [-1, 0.5, 2.5, Number.NaN, Number.POSITIVE_INFINITY]) {
          expect(await failureCode(() => store.readFrom('s', fromSeq))).toBe('INVALID_ARGUMENT');
        }
        expect(await failureCode(() => store.readFrom('s', 0, -1))).toBe('INVALID_ARGUMENT');
        expect(await failureCode(() => store.readFrom('s', 0, 1.5))).toBe('INVALID_ARGUMENT');
      });
    });

    describe('format refusals', () => {
      it('an unknown event type without ignorable is refused as UNSUPPORTED_FORMAT naming a newer version by load, inspect and readFrom', async () => {
        await store.create(header('s'));
        await store.append('s', [run(0)], { expectedSeq: 0, op: 'b0' });
        await store.close();
        fixture.plantEvent(url, 's', { seq: 1, type: 'future/widget', time: T0, data: { v: 2 }, op: 'future' });
        const fresh = await reopen();
        for (const attempt of [() => fresh.load('s'), () => fresh.inspect('s'), () => fresh.readFrom('s', 0)]) {
          const error = await failure(attempt);
          expect(isSessionlogError(error, 'UNSUPPORTED_FORMAT')).toBe(true);
          expect((error as Error).message).toMatch(/newer version/);
        }
      });

      it('the same unknown type marked ignorable loads, round-trips and does not block appends', async () => {
        await store.create(header('s'));
        await store.append('s', [user('u0')], { expectedSeq: 0, op: 'b0' });
        await store.close();
        fixture.plantEvent(url, 's', {
          seq: 1,
          type: 'future/widget',
          time: T0,
          data: { v: 2 },
          op: 'future',
          ignorable: true,
        });
        const fresh = await reopen();
        const loaded = await fresh.load('s');
        expect(loaded.events[1]).toEqual({
          seq: 1,
          type: 'future/widget',
          time: T0,
          data: { v: 2 },
          op: 'future',
          ignorable: true,
        });
        expect(await fresh.append('s', [user('u2')], { expectedSeq: 2, op: 'b1' })).toEqual({
          firstSeq: 2,
          lastSeq: 2,
          replayed: false,
        });
        const read = await (await reopen()).readFrom('s', 0);
        expect(
          Session.fromEvents(header('s'), read)
            .deriveMessages()
            .map((m) => m.id),
        ).toEqual(['u0', 'u2']);
      });

      it('a stored header whose version is ahead of this build is refused as UNSUPPORTED_FORMAT naming a newer version', async () => {
        await store.create(header('s'));
        await store.append('s', [run(0)], { expectedSeq: 0, op: 'b0' });
        await store.close();
        fixture.setHeaderVersion(url, 's', SESSION_FORMAT_VERSION + 1);
        const fresh = await reopen();
        const attempts: Array<[string, () => Promise<unknown>]> = [
          ['header', () => fresh.header('s')],
          ['load', () => fresh.load('s')],
          ['inspect', () => fresh.inspect('s')],
          ['readFrom', () => fresh.readFrom('s', 0)],
          ['nextSeq', () => fresh.nextSeq('s')],
          ['append', () => fresh.append('s', [run(1)], { expectedSeq: 1, op: 'b1' })],
        ];
        for (const [method, attempt] of attempts) {
          const error = await failure(attempt);
          expect(isSessionlogError(error, 'UNSUPPORTED_FORMAT'), `${method}: ${String(error)}`).toBe(true);
          expect((error as Error).message).toMatch(/newer version/);
        }
      });
    });

    describe('session ids', () => {
      const invalidIds = ['../x', '.hidden', '', 'x'.repeat(129), 'a/b', 'ünï', 'a b', 'a\\b', '..'];

      it.each(invalidIds.map((id) => [JSON.stringify(id), id]))(
        'the invalid id %s is refused with INVALID_SESSION_ID by every method and creates nothing',
        async (_label, id) => {
          await store.create(header('ok'));
          const before = fixture.dump(url);
          const attempts: Array<() => unknown> = [
            () => store.create({ version: SESSION_FORMAT_VERSION, id, createdAt: T0 }),
            () => store.header(id),
            () => store.exists(id),
            () => store.append(id, [run(0)], { expectedSeq: 0, op: 'x' }),
            () => store.readFrom(id, 0),
            () => store.nextSeq(id),
            () => store.load(id),
            () => store.inspect(id),
            () => store.session(id),
            () => store.scan(id),
            () => store.erase(id, ALL_TENANTS),
            () => store.watch(id, 0),
            () => store.artifacts.put({ sessionId: id, name: 'a.txt', content: 'x' }),
            () => store.projectionCache.get(id),
            () => store.projectionCache.put(id, { identity: { createdAt: T0 }, rows: {} }),
            () => store.create({ ...header('child'), parentSession: id }),
          ];
          for (const attempt of attempts) expect(await failureCode(attempt)).toBe('INVALID_SESSION_ID');
          expect(fixture.dump(url)).toBe(before);
          expect((await store.list(ALL_TENANTS)).map((h) => h.id)).toEqual(['ok']);
        },
      );

      it('an id of exactly 128 allowed characters is accepted', async () => {
        const id = `A-_.${'z9'.repeat(62)}`;
        expect(id).toHaveLength(128);
        await store.create(header(id));
        await store.append(id, [run(0)], { expectedSeq: 0, op: 'b' });
        expect((await (await reopen()).readFrom(id, 0)).length).toBe(1);
      });
    });

    describe('watch', () => {
      it('yields stored events from fromSeq, then live appends from this and another instance in order, and ends on abort', async () => {
        await store.create(header('s'));
        await store.append('s', [run(0), run(1), run(2)], { expectedSeq: 0, op: 'b0' });
        const controller = new AbortController();
        const iterator = store.watch('s', 1, { signal: controller.signal })[Symbol.asyncIterator]();
        const seen: number[] = [];
        const next = async (): Promise<void> => {
          const r = await iterator.next();
          expect(r.done).toBe(false);
          seen.push((r.value as StoredEvent).seq);
        };
        await next();
        await next();
        expect(seen).toEqual([1, 2]);
        const pending = next();
        await store.append('s', [run(3)], { expectedSeq: 3, op: 'b1' });
        await pending;
        // Another instance (as another process would): found by polling or notification.
        const other = await reopen();
        const pending2 = Promise.all([next(), next()]).then(() => undefined);
        await other.append('s', [run(4), run(5)], { expectedSeq: 4, op: 'b2' });
        await pending2;
        expect(seen).toEqual([1, 2, 3, 4, 5]);
        const ended = iterator.next();
        controller.abort();
        expect((await ended).done).toBe(true);
      });

      it('a watch started past the end waits for the next append; a consumer break releases it', async () => {
        await store.create(header('s'));
        const watching = take(store.watch('s', 0), 2);
        await store.append('s', [run(0)], { expectedSeq: 0, op: 'b0' });
        await store.append('s', [run(1)], { expectedSeq: 1, op: 'b1' });
        expect((await watching).map((e) => e.seq)).toEqual([0, 1]);
      });

      it('a watch ends when the store closes', async () => {
        await store.create(header('s'));
        await store.append('s', [run(0)], { expectedSeq: 0, op: 'b0' });
        const seen: number[] = [];
        const done = (async () => {
          for await (const event of store.watch('s', 0)) {
            seen.push(event.seq);
            if (seen.length === 1) void store.close();
          }
        })();
        await done;
        expect(seen).toEqual([0]);
      });
    });

    describe('artifacts', () => {
      it('put returns a locator and byte length; get and read return the content; same names get distinct locators', async () => {
        await store.create(header('s'));
        const content = `line one\nünïcødé 𝄞\n${'z'.repeat(10_000)}`;
        const ref = await store.artifacts.put({ sessionId: 's', name: 'echo-call1.txt', content });
        expect(ref.bytes).toBe(Buffer.byteLength(content, 'utf8'));
        const again = await store.artifacts.put({ sessionId: 's', name: 'echo-call1.txt', content: 'second' });
        expect(again.locator).not.toBe(ref.locator);
        const fresh = await reopen();
        expect(await fresh.artifacts.get('s', ref.locator)).toBe(content);
        expect(await fresh.artifacts.get('s', again.locator)).toBe('second');
        expect(await fresh.artifacts.read('s', ref.locator, 5, 3)).toEqual({
          text: content.slice(5, 8),
          total: content.length,
        });
        expect(await fresh.artifacts.read('s', ref.locator, content.length + 5, 3)).toEqual({
          text: '',
          total: content.length,
        });
      });

      it('a hostile suggested name stays inside the session namespace, and unknown or malformed locators are ARTIFACT_NOT_FOUND', async () => {
        await store.create(header('s'));
        await store.create(header('t'));
        const ref = await store.artifacts.put({ sessionId: 's', name: '../../t/../etc/passwd', content: 'x' });
        expect(ref.locator.startsWith('artifact:s/')).toBe(true);
        expect(await store.artifacts.get('s', ref.locator)).toBe('x');
        for (const locator of [
          'artifact:s/missing.txt',
          'nonsense',
          'artifact:../x/y',
          'artifact:s/../t',
          'artifact:s/.hidden',
        ]) {
          expect(await failureCode(() => store.artifacts.get('s', locator))).toBe('ARTIFACT_NOT_FOUND');
        }
      });

      it("a session never reads another session's artifact: get and read of a foreign locator are ARTIFACT_FOREIGN without its content, even for a session that does not exist", async () => {
        await store.create(header('victim'));
        await store.create(header('attacker'));
        const secret = 'the victim tool output 7f3a';
        const ref = await store.artifacts.put({ sessionId: 'victim', name: 'calculator-call_1.txt', content: secret });
        const fresh = await reopen();
        for (const reader of ['attacker', 'nobody']) {
          for (const attempt of [
            () => fresh.artifacts.get(reader, ref.locator),
            () => fresh.artifacts.read(reader, ref.locator, 0, 100),
          ]) {
            const error = await failure(attempt);
            expect(isSessionlogError(error, 'ARTIFACT_FOREIGN'), String(error)).toBe(true);
            expect((error as Error).message).toContain(reader);
            expect((error as Error).message).not.toContain(secret);
          }
        }
        // Same name under the attacker's own id: a different artifact (not found), never the victim's.
        const own = ref.locator.replace('artifact:victim/', 'artifact:attacker/');
        expect(await failureCode(() => fresh.artifacts.get('attacker', own))).toBe('ARTIFACT_NOT_FOUND');
        expect(await fresh.artifacts.get('victim', ref.locator)).toBe(secret);
        expect(await failureCode(() => fresh.artifacts.get('../victim', ref.locator))).toBe('INVALID_SESSION_ID');
      });

      it('for any sessions, names and locators, a read through session A returns only an artifact A stored, never one of B (property)', async () => {
        await fc.assert(
          fc.asyncProperty(
            fc.uniqueArray(fc.stringMatching(/^[A-Za-z0-9_-]{1,12}$/), { minLength: 2, maxLength: 4 }),
            fc.array(fc.tuple(fc.nat(), fc.string({ maxLength: 20 }), fc.string({ maxLength: 30 })), {
              minLength: 1,
              maxLength: 8,
            }),
            fc.array(
              fc.tuple(
                fc.nat(),
                fc.nat(),
                fc.oneof(fc.constant('own'), fc.constant('swap'), fc.string({ maxLength: 40 })),
              ),
              { minLength: 1, maxLength: 12 },
            ),
            async (names, puts, reads) => {
              const prefix = `p${Math.random().toString(36).slice(2, 8)}-`;
              const ids = names.map((n) => `${prefix}${n}`);
              for (const id of ids) await store.create(header(id));
              const stored = new Map<string, { owner: string; content: string }>();
              for (const [who, name, content] of puts) {
                const owner = ids[who % ids.length]!;
                const ref = await store.artifacts.put({ sessionId: owner, name, content: `${owner}:${content}` });
                stored.set(ref.locator, { owner, content: `${owner}:${content}` });
              }
              const locators = [...stored.keys()];
              for (const [who, which, how] of reads) {
                const reader = ids[who % ids.length]!;
                const target = locators[which % locators.length]!;
                const locator =
                  how === 'own'
                    ? target
                    : how === 'swap'
                      ? target.replace(/^artifact:[^/]+\//, `artifact:${reader}/`)
                      : how;
                let content: string | undefined;
                try {
                  content = await store.artifacts.get(reader, locator);
                } catch (error) {
                  expect(['ARTIFACT_FOREIGN', 'ARTIFACT_NOT_FOUND']).toContain(
                    isSessionlogError(error) ? error.code : String(error),
                  );
                  continue;
                }
                expect(stored.get(locator), `${reader} read ${locator}`).toEqual({ owner: reader, content });
              }
            },
          ),
          { numRuns: 25 },
        );
      });
    });

    describe('media (issue 50)', () => {
      const image = png(4, 3);
      const sha = createHash('sha256').update(image).digest('hex');
      const put = (s: SessionStore, sessionId: string, bytes: Uint8Array = image) =>
        s.artifacts.putMedia({ sessionId, bytes, mediaType: 'image/png', width: 4, height: 3 });

      it('putMedia stores the bytes content-addressed and returns the reference; readMedia gives back the same bytes after a reopen', async () => {
        await store.create(header('s'));
        const media = await put(store, 's');
        expect(media).toEqual({
          kind: 'artifact',
          locator: `artifact:s/media-${sha}.png`,
          mediaType: 'image/png',
          bytes: image.byteLength,
          sha256: sha,
          width: 4,
          height: 3,
        });
        const read = await (await reopen()).artifacts.readMedia('s', media.locator);
        expect(read).toBeInstanceOf(Uint8Array);
        expect(Buffer.from(read).equals(Buffer.from(image))).toBe(true);
        // Binary-safe: every byte value survives (NUL, 0x80-0xFF, invalid UTF-8 sequences).
        const allBytes = new Uint8Array(Array.from({ length: 512 }, (_, i) => (i * 7) & 0xff));
        const file = await store.artifacts.putMedia({ sessionId: 's', bytes: allBytes, mediaType: 'application/pdf' });
        expect(file).not.toHaveProperty('width');
        expect(Buffer.from(await store.artifacts.readMedia('s', file.locator)).equals(Buffer.from(allBytes))).toBe(
          true,
        );
      });

      it('the same bytes put twice (or by two store instances) are stored once: one locator, one stored copy', async () => {
        await store.create(header('s'));
        const first = await put(store, 's');
        const second = await put(store, 's');
        const third = await put(await reopen(), 's');
        expect(second).toEqual(first);
        expect(third).toEqual(first);
        const other = await put(store, 's', png(4, 3, [1, 2, 3]));
        expect(other.locator).not.toBe(first.locator);
        const receipt = await store.erase('s', ALL_TENANTS);
        expect(receipt.removed.media).toBe(2);
      });

      it("a session never reads another session's media (ARTIFACT_FOREIGN, without the bytes); unknown, malformed and tool-artifact locators are ARTIFACT_NOT_FOUND; no session, no put", async () => {
        await store.create(header('victim'));
        await store.create(header('attacker'));
        const media = await put(store, 'victim');
        for (const reader of ['attacker', 'nobody']) {
          const error = await failure(() => store.artifacts.readMedia(reader, media.locator));
          expect(isSessionlogError(error, 'ARTIFACT_FOREIGN'), String(error)).toBe(true);
        }
        // The same digest under the attacker's own id is not the victim's copy.
        const own = media.locator.replace('artifact:victim/', 'artifact:attacker/');
        expect(await failureCode(() => store.artifacts.readMedia('attacker', own))).toBe('ARTIFACT_NOT_FOUND');
        const tool = await store.artifacts.put({ sessionId: 'victim', name: 'tool-1.txt', content: 'x' });
        for (const locator of [
          tool.locator,
          'nonsense',
          `artifact:victim/media-${sha}.gif`,
          `artifact:victim/media-${'0'.repeat(64)}.png`,
        ])
          expect(await failureCode(() => store.artifacts.readMedia('victim', locator)), locator).toBe(
            'ARTIFACT_NOT_FOUND',
          );
        expect(await failureCode(() => put(store, 'missing'))).toBe('SESSION_NOT_FOUND');
        expect(
          await failureCode(() =>
            store.artifacts.putMedia({ sessionId: 'victim', bytes: new Uint8Array(), mediaType: 'image/png' }),
          ),
        ).toBe('INVALID_ARGUMENT');
      });

      it('erase removes the media of the session and counts them in the receipt; nothing of them stays readable or stored; other sessions keep theirs', async () => {
        await store.create(header('gone'));
        await store.create(header('kept'));
        const gone = await put(store, 'gone');
        await put(store, 'gone', GIF_1X1);
        const kept = await put(store, 'kept');
        const receipt = await store.erase('gone', ALL_TENANTS);
        expect(receipt.removed.media).toBe(2);
        expect(receipt.places.some((place) => /media/.test(place.place) && place.removed === 2)).toBe(true);
        for (const s of [store, await reopen()]) {
          expect(['SESSION_ERASED', 'ARTIFACT_NOT_FOUND', 'SESSION_NOT_FOUND']).toContain(
            await failureCode(() => s.artifacts.readMedia('gone', gone.locator)),
          );
          expect(Buffer.from(await s.artifacts.readMedia('kept', kept.locator)).equals(Buffer.from(image))).toBe(true);
        }
        await store.erase('kept', ALL_TENANTS);
        expect(fixture.dump(url)).not.toContain(sha);
      });

      it("two tenants sending the same bytes get separate copies: one tenant cannot read the other's, and erasing one leaves the other whole", async () => {
        const acme = scopeStore(store, 'acme');
        const bravo = scopeStore(store, 'bravo');
        await acme.create(header('a1'));
        await bravo.create(header('b1'));
        const a = await put(acme, 'a1');
        const b = await put(bravo, 'b1');
        expect(a.sha256).toBe(b.sha256);
        expect(a.locator).not.toBe(b.locator);
        expect(await failureCode(() => acme.artifacts.readMedia('b1', b.locator))).toBe('SESSION_NOT_FOUND');
        expect(await failureCode(() => put(acme, 'b1'))).toBe('SESSION_NOT_FOUND');
        expect(await failureCode(() => acme.artifacts.readMedia('a1', b.locator))).toBe('ARTIFACT_FOREIGN');
        expect((await acme.erase('a1', tenantScope('acme'))).removed.media).toBe(1);
        expect(Buffer.from(await bravo.artifacts.readMedia('b1', b.locator)).equals(Buffer.from(image))).toBe(true);
      });
    });

    describe('projection cache and derived history', () => {
      async function seed(id: string, inputs: readonly NewEvent[]): Promise<Session> {
        await store.create(header(id));
        const reference = Session.create(header(id));
        await appendInBatches(store, reference, inputs, [3]);
        return reference;
      }

      const conversation = (n: number, from = 0): NewEvent[] =>
        Array.from({ length: n }, (_, i) => user(`u${from + i}`, `message ${from + i}`));

      it('a fresh read folds from seq 0 and writes a checkpoint; the next read uses it; both equal the full derivation', async () => {
        const reference = await seed('s', conversation(5));
        const first = await readDerivedHistory(store, 's');
        expect(first.fromCache).toBe(false);
        expect(first.messages).toEqual(reference.deriveMessages());
        expect(first.asOfSeq).toBe(4);
        const record = await store.projectionCache.get('s');
        expect(record?.rows.surface?.seq).toBe(4);
        const second = await readDerivedHistory(await reopen(), 's');
        expect(second.fromCache).toBe(true);
        expect(second.messages).toEqual(reference.deriveMessages());
      });

      it('the checkpoint holds the surface node list, not messages; a version-1 record (with messages) is refolded and replaced', async () => {
        const reference = await seed('s', conversation(6));
        await readDerivedHistory(store, 's');
        const record = await store.projectionCache.get('s');
        expect(record?.rows.surface).toEqual({
          ver: 2,
          seq: 5,
          val: { nodes: [0, 1, 2, 3, 4, 5], replaceGeneration: 0 },
        });
        const versionOne = {
          ver: 1,
          seq: 5,
          val: {
            nodes: reference.surfaceNodes.map((seq) => ({
              seq,
              message: { role: 'user', id: 'stale', content: 'stale' },
            })),
            replaceGeneration: 0,
          },
        };
        await store.projectionCache.put('s', { identity: { createdAt: T0 }, rows: { surface: versionOne } });
        const upgraded = await reopen();
        const history = await readDerivedHistory(upgraded, 's');
        expect(history.fromCache).toBe(false);
        expect(history.messages).toEqual(reference.deriveMessages());
        expect((await upgraded.projectionCache.get('s'))?.rows.surface).toEqual(record?.rows.surface);
        expect((await readDerivedHistory(upgraded, 's')).fromCache).toBe(true);
      });

      it('a stale checkpoint (the log grew, with a replacement) is used and the tail folded onto it', async () => {
        const reference = await seed('s', conversation(4));
        await readDerivedHistory(store, 's');
        const more: NewEvent[] = [
          ...conversation(2, 4),
          { ...user('sum'), surfaceOp: { op: 'replace', start: 1, end: 4 }, sourceEventSeqs: [1, 2, 3, 4] },
        ];
        await store.append('s', more, { expectedSeq: 4, op: 'more' });
        reference.appendBatch(more, 'more');
        // Through the copy this store holds, the checkpoint agrees with the copy's own surface fold.
        const held = await readDerivedHistory(store, 's');
        expect(held).toMatchObject({ fromCache: true, messages: reference.deriveMessages() });
        const history = await readDerivedHistory(await reopen(), 's');
        expect(history.fromCache).toBe(true);
        expect(history.messages).toEqual(reference.deriveMessages());
        expect(history.messages.map((m) => m.id)).toEqual(['u0', 'sum', 'u5']);
      });

      it('a checkpoint bound to another identity (createdAt) is never used', async () => {
        const reference = await seed('s', conversation(3));
        const foreign = new ProjectionRegistry().register(surfaceProjection);
        const lie = Session.create(header('s'));
        lie.appendBatch([user('forged-0'), user('forged-1'), user('forged-2')]);
        await store.projectionCache.put('s', {
          identity: { createdAt: T0 + 999 },
          rows: foreign.checkpoint(foreign.foldAll(lie.events), 2),
        });
        const history = await readDerivedHistory(store, 's');
        expect(history.fromCache).toBe(false);
        expect(history.messages).toEqual(reference.deriveMessages());
      });

      it('checkpoints that are garbage (schema-invalid state, wrong version, ahead of the log, unparsable text) fall back to a full fold', async () => {
        const reference = await seed('s', conversation(4));
        const registry = new ProjectionRegistry().register(surfaceProjection);
        const good = registry.checkpoint(registry.foldAll(reference.events.slice(0, 2)), 1);
        const bad = [
          { surface: { ver: surfaceProjection.stateVersion, seq: 1, val: { nodes: 'nope', replaceGeneration: 0 } } },
          { surface: { ...good.surface!, ver: 42 } },
          { surface: { ...good.surface!, seq: 50 } },
        ];
        for (const rows of bad) {
          await store.projectionCache.put('s', { identity: { createdAt: T0 }, rows });
          const history = await readDerivedHistory(store, 's');
          expect(history.messages).toEqual(reference.deriveMessages());
        }
        await store.close();
        fixture.plantCacheText(url, 's', '{"identity": {"createdAt": 17000000');
        const fresh = await reopen();
        expect(await fresh.projectionCache.get('s')).toBeUndefined();
        expect((await readDerivedHistory(fresh, 's')).messages).toEqual(reference.deriveMessages());
      });

      it('for random logs and a checkpoint at any seq, readDerivedHistory equals Session.fromEvents(...).deriveMessages()', async () => {
        await fc.assert(
          fc.asyncProperty(programArb(40), fc.nat(1000), async (program, cut) => {
            const generated = buildLog(program, ANY_REPLACES);
            if (generated.inputs.length === 0) return;
            const id = `pc-${Math.random().toString(36).slice(2, 10)}`;
            const reference = await seed(id, generated.inputs);
            const registry = new ProjectionRegistry().register(surfaceProjection);
            const at = cut % reference.nextSeq;
            await store.projectionCache.put(id, {
              identity: { createdAt: T0 },
              rows: registry.checkpoint(registry.foldAll(reference.events.slice(0, at + 1)), at),
            });
            const history = await readDerivedHistory(await reopen(), id);
            const expected = Session.fromEvents(header(id), await store.readFrom(id, 0)).deriveMessages();
            expect(history.messages).toEqual(expected);
            expect(history.fromCache).toBe(true);
          }),
          { numRuns: 10 },
        );
      });

      it('for random logs and an anchored checkpoint at any seq, a cold read verifies the anchor, validates the tail and equals the full derivation', async () => {
        await fc.assert(
          fc.asyncProperty(programArb(40), fc.nat(1000), async (program, cut) => {
            const generated = buildLog(program, ANY_REPLACES);
            if (generated.inputs.length === 0) return;
            const id = `ac-${Math.random().toString(36).slice(2, 10)}`;
            const at = cut % generated.inputs.length;
            const reference = await seed(id, generated.inputs.slice(0, at + 1));
            await writeProjectionCheckpoint(store, id);
            const record = (await store.projectionCache.get(id))!;
            expect(record.anchor?.seq).toBe(at);
            const rest = generated.inputs.slice(at + 1);
            for (let i = 0; i < rest.length; i += 3) {
              const slice = rest.slice(i, i + 3);
              await store.append(id, slice, { expectedSeq: reference.nextSeq, op: `rest-${i}` });
              reference.appendBatch(slice, `rest-${i}`);
            }
            const surface = record.rows.surface!.val as unknown as SurfaceSnapshot;
            const anchored = await (await reopen()).readAnchored(id, record.anchor!, surface);
            expect(typeof anchored === 'object' && anchored.nextSeq).toBe(reference.nextSeq);
            const history = await readDerivedHistory(await reopen(), id);
            expect(history.messages).toEqual(reference.deriveMessages());
            expect(history.fromCache).toBe(true);
          }),
          { numRuns: 10 },
        );
      });
    });

    describe('session: the one validated copy', () => {
      it("session(id) is the store's validated copy: equal to the stored log, the same object on every call, and appends through the store commit into it", async () => {
        await store.create(header('s'));
        await store.append('s', [user('u0'), user('u1')], { expectedSeq: 0, op: 'b0' });
        const view = await store.session('s');
        expect(JSON.stringify(view.events)).toBe(JSON.stringify(await store.readFrom('s', 0)));
        expect(view.deriveMessages().map((m) => m.id)).toEqual(['u0', 'u1']);
        await store.append('s', [user('u2')], { expectedSeq: 2, op: 'b1' });
        expect(await store.session('s')).toBe(view);
        expect(view.nextSeq).toBe(3);
        expect(view.deriveMessages().map((m) => m.id)).toEqual(['u0', 'u1', 'u2']);
        expect(view.eventAt(2)?.op).toBe('b1');
      });

      it('session(id) is brought up to the head when another instance (a process) appended, and plans against it', async () => {
        await store.create(header('s'));
        await store.append('s', [user('u0')], { expectedSeq: 0, op: 'b0' });
        const view = await store.session('s');
        const other = await reopen();
        await other.append(
          's',
          [user('u1'), { ...user('sum'), surfaceOp: { op: 'replace', start: 0, end: 1 }, sourceEventSeqs: [0, 1] }],
          { expectedSeq: 1, op: 'b1' },
        );
        expect(await store.session('s')).toBe(view);
        expect(view.nextSeq).toBe(3);
        expect(view.deriveMessages().map((m) => m.id)).toEqual(['sum']);
        expect(() =>
          view.planBatch([{ ...user('again'), surfaceOp: { op: 'replace', start: 0, end: 0 }, sourceEventSeqs: [0] }]),
        ).toThrow(/not found in surface/);
      });

      it('a copy ahead of the stored log (an older backup restored under a running store) is replaced by one read from the stored log', async () => {
        await store.create(header('s'));
        await store.append('s', [user('u0'), user('u1')], { expectedSeq: 0, op: 'b0' });
        await store.append('s', [user('u2')], { expectedSeq: 2, op: 'b1' });
        const ahead = await store.session('s');
        expect(ahead.nextSeq).toBe(3);
        fixture.dropLastBatch(url, 's');
        const current = await store.session('s');
        expect(current).not.toBe(ahead);
        expect(current.nextSeq).toBe(2);
        expect(JSON.stringify(current.events)).toBe(JSON.stringify(await (await reopen()).readFrom('s', 0)));
        expect(await failureCode(() => store.append('s', [user('x')], { expectedSeq: 3, op: 'b2' }))).toBe(
          'SEQ_CONFLICT',
        );
        await store.append('s', [user('u2-again')], { expectedSeq: 2, op: 'b1-again' });
        expect((await store.readFrom('s', 0)).map((event) => event.op)).toEqual(['b0', 'b0', 'b1-again']);
      });

      it('session(id) of a damaged log is CORRUPT_LOG and of an unknown session SESSION_NOT_FOUND', async () => {
        await store.create(header('s'));
        await store.append('s', [user('u0'), user('u1')], { expectedSeq: 0, op: 'b0' });
        await store.append('s', [user('u2')], { expectedSeq: 2, op: 'b1' });
        await store.close();
        fixture.editRecord(url, 's', 1, { kind: 'garble' });
        const fresh = await reopen();
        expect(await failureCode(() => fresh.session('s'))).toBe('CORRUPT_LOG');
        expect(await failureCode(() => fresh.session('t'))).toBe('SESSION_NOT_FOUND');
      });

      it('an ignorable event of an unknown type is kept verbatim by reads and the validated copy but never reaches the surface', async () => {
        await store.create(header('s'));
        await store.append('s', [user('u0')], { expectedSeq: 0, op: 'b0' });
        await store.close();
        fixture.plantEvent(url, 's', {
          seq: 1,
          type: 'future/widget',
          time: T0,
          data: { v: 2 },
          op: 'future',
          ignorable: true,
        });
        const fresh = await reopen();
        const view = await fresh.session('s');
        expect(view.storedAt(1)).toEqual({
          seq: 1,
          type: 'future/widget',
          time: T0,
          data: { v: 2 },
          op: 'future',
          ignorable: true,
        });
        expect(view.surface.nodes).toEqual([0]);
        expect((await fresh.readFrom('s', 1))[0]).toEqual(view.storedAt(1));
      });
    });

    describe('scan', () => {
      it('a healthy log scans with its header, every event and no problem, and scanning writes nothing', async () => {
        await store.create(header('s'));
        await store.append('s', openTurnInputs(), { expectedSeq: 0, op: 'b0' });
        const before = fixture.dump(url);
        const report = await (await reopen()).scan('s');
        expect(report.header).toEqual(header('s'));
        expect(report.problem).toBeUndefined();
        expect(JSON.stringify(report.events)).toBe(JSON.stringify(await store.readFrom('s', 0)));
        expect(fixture.dump(url)).toBe(before);
      });

      it('a damaged log scans without throwing: the valid prefix before the first bad seq, and that seq with the reason; nothing changes', async () => {
        await store.create(header('s'));
        await store.append('s', [user('u0'), user('u1')], { expectedSeq: 0, op: 'b0' });
        await store.append('s', [user('u2')], { expectedSeq: 2, op: 'b1' });
        await store.append('s', [user('u3')], { expectedSeq: 3, op: 'b2' });
        await store.close();
        fixture.editRecord(url, 's', 2, { kind: 'garble' });
        const before = fixture.dump(url);
        const report = await (await reopen()).scan('s');
        expect(report.events.map((e) => e.seq)).toEqual([0, 1]);
        expect(report.problem).toMatchObject({ seq: 2, code: 'CORRUPT_LOG', torn: false });
        expect(report.problem?.reason.length).toBeGreaterThan(0);
        expect(fixture.dump(url)).toBe(before);
      });

      it('a header of a newer format scans as a header problem, not an exception', async () => {
        await store.create(header('s'));
        await store.append('s', [run(0)], { expectedSeq: 0, op: 'b0' });
        await store.close();
        fixture.setHeaderVersion(url, 's', SESSION_FORMAT_VERSION + 1);
        const report = await (await reopen()).scan('s');
        expect(report.header).toBeUndefined();
        expect(report.headerProblem).toMatchObject({
          code: 'UNSUPPORTED_FORMAT',
          reason: expect.stringMatching(/newer version/),
        });
        expect(report.events).toEqual([]);
      });

      it('a torn final record scans as a torn write in JSONL and as corruption elsewhere', async () => {
        await store.create(header('s'));
        await store.append('s', [run(0), run(1)], { expectedSeq: 0, op: 'b0' });
        await store.close();
        fixture.plantDamagedRecord(url, 's', 2, true);
        const report = await (await reopen()).scan('s');
        expect(report.events).toHaveLength(2);
        expect(report.problem).toMatchObject({ seq: 2, torn: fixture.name === 'jsonl' });
      });
    });

    describe('erase', () => {
      async function populated(id: string, text: string): Promise<void> {
        await store.create(header(id));
        await store.append(id, [{ type: 'turn/start', time: T0, data: { turn: 1 } }, user(`${id}-u`, text)], {
          expectedSeq: 0,
          op: 'b0',
        });
        await store.artifacts.put({ sessionId: id, name: 'tool-1.txt', content: `artifact of ${text}` });
        await readDerivedHistory(store, id);
      }

      it('erase removes the header, events, artifacts and projection checkpoint and says so; other sessions and forks keep theirs', async () => {
        await populated('gone', 'erase me');
        await populated('kept', 'keep me');
        const parentEvents = await store.readFrom('gone', 0);
        // A fork holds its own copy of the seed (DESIGN §4.2).
        await store.create(header('fork', { parentSession: 'gone', seedLength: parentEvents.length }));
        await store.append(
          'fork',
          [
            ...parentEvents.map(
              (e) =>
                ({
                  type: e.type,
                  time: e.time,
                  data: e.data,
                  ...(e.surfaceOp ? { surfaceOp: e.surfaceOp } : {}),
                }) as NewEvent,
            ),
          ],
          { expectedSeq: 0, op: 'seed' },
        );
        const artifact = (await store.artifacts.put({ sessionId: 'gone', name: 'last.txt', content: 'x' })).locator;
        const receipt = await store.erase('gone', ALL_TENANTS);
        expect(receipt).toMatchObject({
          sessionId: 'gone',
          erased: true,
          removed: { header: 1, events: 2, artifacts: 2, projectionCheckpoints: 1 },
        });
        expect(receipt.places.length).toBeGreaterThan(0);
        expect(receipt.tombstoneUntil).toBeGreaterThan(Date.now());
        const fresh = await reopen();
        for (const s of [store, fresh]) {
          expect(await s.exists('gone')).toBe(false);
          expect((await s.list(ALL_TENANTS)).map((h) => h.id).sort()).toEqual(['fork', 'kept']);
          expect(await failureCode(() => s.readFrom('gone', 0))).toBe('SESSION_NOT_FOUND');
          expect(await failureCode(() => s.artifacts.get('gone', artifact))).toBe('ARTIFACT_NOT_FOUND');
          expect(await s.projectionCache.get('gone')).toBeUndefined();
          expect((await s.readFrom('kept', 0)).length).toBe(2);
          expect(JSON.stringify((await s.readFrom('fork', 0)).map((e) => e.data))).toBe(
            JSON.stringify(parentEvents.map((e) => e.data)),
          );
        }
      });

      it('erasing again returns a receipt that nothing was left, and an id never created is SESSION_NOT_FOUND', async () => {
        await populated('gone', 'erase me');
        const first = await store.erase('gone', ALL_TENANTS);
        const again = await (await reopen()).erase('gone', ALL_TENANTS);
        expect(again).toMatchObject({
          sessionId: 'gone',
          erased: false,
          removed: { header: 0, events: 0, artifacts: 0, projectionCheckpoints: 0 },
          tombstoneUntil: first.tombstoneUntil,
        });
        expect(await failureCode(() => store.erase('never', ALL_TENANTS))).toBe('SESSION_NOT_FOUND');
      });

      it('an erased id is refused by create with SESSION_ERASED while its tombstone lasts, and can be reused after it expires', async () => {
        await populated('gone', 'erase me');
        await store.erase('gone', ALL_TENANTS);
        for (const s of [store, await reopen()]) {
          const error = await failure(() => s.create(header('gone')));
          expect(isSessionlogError(error, 'SESSION_ERASED'), String(error)).toBe(true);
          expect((error as Error).message).toMatch(/pick another id/);
        }
        const short = await openStore(url, { tombstoneMs: 1 });
        opened.push(short);
        await populated('brief', 'short lived');
        const { tombstoneUntil } = await short.erase('brief', ALL_TENANTS);
        for (let i = 0; i < 1000 && Date.now() <= tombstoneUntil; i++)
          await new Promise((resolve) => setTimeout(resolve, 1));
        await short.create(header('brief'));
        expect(await short.nextSeq('brief')).toBe(0);
      });

      it('the validated copy of an erased session is gone with it: a later session with the same id starts empty', async () => {
        const short = await openStore(url, { tombstoneMs: 1 });
        opened.push(short);
        await short.create(header('s'));
        await short.append('s', [user('old')], { expectedSeq: 0, op: 'b0' });
        const { tombstoneUntil } = await short.erase('s', ALL_TENANTS);
        for (let i = 0; i < 1000 && Date.now() <= tombstoneUntil; i++)
          await new Promise((resolve) => setTimeout(resolve, 1));
        await short.create(header('s', { createdAt: T0 + 5 }));
        expect((await short.session('s')).nextSeq).toBe(0);
        expect(await short.append('s', [user('new')], { expectedSeq: 0, op: 'b0' })).toEqual({
          firstSeq: 0,
          lastSeq: 0,
          replayed: false,
        });
      });
    });

    describe('tenant scopes', () => {
      it("list and erase take a scope: one tenant's sessions (a header without a tenant is the default tenant's), or ALL_TENANTS; another tenant's session is SESSION_NOT_FOUND to erase and stays whole", async () => {
        await store.create(header('a1', { tenant: 'acme' }));
        await store.create(header('a2', { tenant: 'acme' }));
        await store.create(header('b1', { tenant: 'bravo' }));
        await store.create(header('d1'));
        await store.append('b1', [user('b1-u', 'bravo text')], { expectedSeq: 0, op: 'b0' });
        const ids = async (scope: TenantScope) => (await store.list(scope)).map((h) => h.id).sort();
        expect(await ids(ALL_TENANTS)).toEqual(['a1', 'a2', 'b1', 'd1']);
        expect(await ids(tenantScope('acme'))).toEqual(['a1', 'a2']);
        expect(await ids(tenantScope('bravo'))).toEqual(['b1']);
        expect(await ids(tenantScope(DEFAULT_TENANT))).toEqual(['d1']);
        expect(await ids(tenantScope('nobody'))).toEqual([]);

        const refused = await failure(() => store.erase('b1', tenantScope('acme')));
        expect(isSessionlogError(refused, 'SESSION_NOT_FOUND'), String(refused)).toBe(true);
        expect(await failure(() => store.erase('missing', tenantScope('acme')))).toMatchObject({
          code: 'SESSION_NOT_FOUND',
        });
        for (const s of [store, await reopen()]) {
          expect(await s.exists('b1')).toBe(true);
          expect((await s.readFrom('b1', 0)).map((e) => e.seq)).toEqual([0]);
        }
        expect((await store.erase('b1', tenantScope('bravo'))).erased).toBe(true);
        expect((await store.erase('d1', tenantScope(DEFAULT_TENANT))).erased).toBe(true);
        expect((await store.erase('a1', ALL_TENANTS)).erased).toBe(true);
        expect(await ids(ALL_TENANTS)).toEqual(['a2']);
      });

      it('a missing or malformed scope is INVALID_ARGUMENT, never every tenant', async () => {
        await store.create(header('a1', { tenant: 'acme' }));
        for (const scope of [undefined, null, {}, { allTenants: true }, { tenant: 'Not A Tenant' }, 'acme'])
          for (const call of [() => store.list(scope as never), () => store.erase('a1', scope as never)]) {
            const error = await failure(call);
            expect(isSessionlogError(error, 'INVALID_ARGUMENT'), `${JSON.stringify(scope)}: ${String(error)}`).toBe(
              true,
            );
          }
        expect(await store.exists('a1')).toBe(true);
      });
    });

    describe('tenant spend', () => {
      /** A turn of one priced model reply asking for `calls` tool calls, then a priced summary. */
      const spendingTurn = (turn: number, calls: number): NewEvent[] => {
        const callIds = Array.from({ length: calls }, (_, i) => `t${turn}c${i}`);
        return [
          { type: 'turn/start', time: T0, data: { turn } },
          user(`u${turn}`),
          { type: 'step/start', time: T0, data: { turn, step: 1 } },
          {
            type: 'assistant/message',
            time: T0,
            data: {
              turn,
              step: 1,
              message: {
                id: `a${turn}`,
                role: 'assistant',
                content: [
                  { type: 'text', text: 'on it' },
                  ...callIds.map((id) => ({ type: 'tool-call' as const, id, name: 'echo', arguments: '{}' })),
                ],
                source: { kind: 'model', provider: 'fake', model: 'fake-1' },
              },
              usage: { inputTokens: 100, outputTokens: 20, cacheReadTokens: 5 },
              cost: 0.25,
            },
            surfaceOp: 'append',
          },
          ...callIds.map((callId): NewEvent => ({
            type: 'tool/call',
            time: T0,
            data: { turn, step: 1, callId, name: 'echo', arguments: '{}' },
          })),
        ];
      };

      it("sums what each tenant's sessions spent as batches are appended, exactly once per batch, and keeps an erased session's spend in its tenant's total", async () => {
        await store.create(header('a1', { tenant: 'acme' }));
        await store.create(header('a2', { tenant: 'acme' }));
        await store.create(header('b1', { tenant: 'bravo' }));
        expect(await store.spend.tenant('acme')).toEqual({
          tokens: 0,
          costUsd: 0,
          modelCalls: 0,
          toolCalls: 0,
          wallMs: 0,
          sessions: 0,
        });
        await store.append('a1', spendingTurn(1, 2), { expectedSeq: 0, op: 'a1-t1' });
        // The same op again is the same batch: nothing is counted twice.
        await store.append('a1', spendingTurn(1, 2), { expectedSeq: 0, op: 'a1-t1' });
        await store.append('a2', spendingTurn(1, 0), { expectedSeq: 0, op: 'a2-t1' });
        await store.append('b1', spendingTurn(1, 1), { expectedSeq: 0, op: 'b1-t1' });
        // Events that spend nothing add nothing; a turn's wall time counts when it ends, from a
        // turn/start in an earlier batch.
        await store.append('a2', [user('a2-more')], { expectedSeq: 4, op: 'a2-more' });
        const end: NewEvent = {
          type: 'turn/end',
          time: T0 + 2_000,
          data: { turn: 1, reason: { kind: 'interrupted' } },
        };
        await store.append('a1', [end], { expectedSeq: 6, op: 'a1-end' });
        const acme = { tokens: 250, costUsd: 0.5, modelCalls: 2, toolCalls: 2, wallMs: 2_000, sessions: 2 };
        expect(await store.spend.tenant('acme')).toEqual(acme);
        expect(await store.spend.tenant('bravo')).toEqual({
          tokens: 125,
          costUsd: 0.25,
          modelCalls: 1,
          toolCalls: 1,
          wallMs: 0,
          sessions: 1,
        });
        expect((await store.spend.tenant('nobody')).sessions).toBe(0);
        expect(await (await reopen()).spend.tenant('acme')).toEqual(acme);

        // Erasing a session takes its id away, not what it spent.
        await store.erase('a1', ALL_TENANTS);
        expect(await store.spend.tenant('acme')).toEqual({ ...acme, sessions: 1 });
        await store.erase('a2', tenantScope('acme'));
        expect(await (await reopen()).spend.tenant('acme')).toEqual({ ...acme, sessions: 0 });
        expect((await store.spend.tenant('bravo')).tokens).toBe(125);
        // A fork's seed batch copies what its parent spent: the tenant did not spend it again.
        const seed: NewEvent[] = [
          ...spendingTurn(1, 0),
          { type: 'step/end', time: T0, data: { turn: 1, step: 1 } },
          { type: 'turn/end', time: T0, data: { turn: 1, reason: { kind: 'completed' } } },
        ];
        await store.create(header('a3', { tenant: 'acme', parentSession: 'a2', seedLength: seed.length }));
        await store.append('a3', [...seed, { type: 'session/end-seed', time: T0, data: {} }], {
          expectedSeq: 0,
          op: 'seed',
        });
        expect(await store.spend.tenant('acme')).toEqual({ ...acme, sessions: 0 });
        await store.append('a3', spendingTurn(2, 1), { expectedSeq: seed.length + 1, op: 'a3-t2' });
        const withFork = { tokens: 375, costUsd: 0.75, modelCalls: 3, toolCalls: 3, wallMs: 2_000, sessions: 1 };
        expect(await store.spend.tenant('acme')).toEqual(withFork);
        expect(await (await reopen()).spend.tenant('acme')).toEqual(withFork);
        const error = await failure(() => store.spend.tenant('Not A Tenant'));
        expect(isSessionlogError(error, 'INVALID_ARGUMENT'), String(error)).toBe(true);
      });
    });

    describe('inbox and session keys', () => {
      const sha256 = (text: string): string => createHash('sha256').update(text, 'utf8').digest('hex');

      it("an append's delivered entries leave the inbox with the batch (its other entries stay), also when the batch was stored already; bad keys are refused before anything is written", async () => {
        await store.create(header('s'));
        await store.inbox.put('s', 'message/m1', 'first');
        await store.inbox.put('s', 'message/m2', 'second');
        await store.inbox.put('other', 'message/m1', 'not yours');
        expect(
          await store.append('s', [user('first')], { expectedSeq: 0, op: 'b0', delivered: ['message/m1', 'gone'] }),
        ).toEqual({ firstSeq: 0, lastSeq: 0, replayed: false });
        const keys = async (id: string) => (await (await reopen()).inbox.list(id)).map((entry) => entry.key);
        expect(await keys('s')).toEqual(['message/m2']);
        expect(await keys('other')).toEqual(['message/m1']);
        expect(
          await failureCode(() => store.append('s', [user('x')], { expectedSeq: 1, op: 'b1', delivered: [''] })),
        ).toBe('INVALID_ARGUMENT');
        expect(await store.nextSeq('s')).toBe(1);
        expect(await keys('s')).toEqual(['message/m2']);
        // A retried append (its batch stored) still takes the entries it logs out of the inbox.
        expect(
          (await store.append('s', [user('first')], { expectedSeq: 0, op: 'b0', delivered: ['message/m2'] })).replayed,
        ).toBe(true);
        expect(await keys('s')).toEqual([]);
      });

      it('put returns the body reference (UTF-8 bytes, hex SHA-256); get, list and remove see the entries of their own session only, also from another instance, with or without the session', async () => {
        await store.create(header('s'));
        const body = 'héllo 👋 {"x":1}';
        const ref = await store.inbox.put('s', 'msg-1', body);
        expect(ref).toEqual({ key: 'msg-1', bytes: Buffer.byteLength(body, 'utf8'), digest: sha256(body) });
        await store.inbox.put('s', 'msg-2', 'second');
        await store.inbox.put('other', 'msg-1', 'not yours');
        const other = await reopen();
        for (const s of [store, other]) {
          expect(await s.inbox.get('s', 'msg-1')).toBe(body);
          expect(await s.inbox.get('s', 'missing')).toBeUndefined();
          expect(await s.inbox.get('nobody', 'msg-1')).toBeUndefined();
          expect(await s.inbox.get('other', 'msg-1')).toBe('not yours');
          const listed = await s.inbox.list('s');
          expect(listed.map(({ storedAt: _, ...entry }) => entry)).toEqual([
            ref,
            { key: 'msg-2', bytes: 6, digest: sha256('second') },
          ]);
          expect(listed.every((entry) => Number.isSafeInteger(entry.storedAt) && entry.storedAt > 0)).toBe(true);
        }
        // An inbox without a session makes no session.
        expect(await store.exists('other')).toBe(false);
        expect((await store.list(ALL_TENANTS)).map((h) => h.id)).toEqual(['s']);
        expect(await other.inbox.remove('s', ['msg-1', 'missing', 'msg-1'])).toBe(1);
        expect(await store.inbox.get('s', 'msg-1')).toBeUndefined();
        expect((await store.inbox.list('s')).map((entry) => entry.key)).toEqual(['msg-2']);
        expect(await store.inbox.list('other')).toHaveLength(1);
        expect(await store.inbox.remove('s', [])).toBe(0);
        expect(await store.inbox.list('nobody')).toEqual([]);
      });

      it('put is idempotent for the same body; a different body under a held key is INVALID_MESSAGE naming the key, and the stored body stays', async () => {
        const first = await store.inbox.put('s', 'k', 'the body');
        const [storedAt] = (await store.inbox.list('s')).map((entry) => entry.storedAt);
        expect(await store.inbox.put('s', 'k', 'the body')).toEqual(first);
        expect(await (await reopen()).inbox.put('s', 'k', 'the body')).toEqual(first);
        expect((await store.inbox.list('s')).map((entry) => [entry.key, entry.storedAt])).toEqual([['k', storedAt]]);
        const error = await failure(() => store.inbox.put('s', 'k', 'another body'));
        expect(isSessionlogError(error, 'INVALID_MESSAGE'), String(error)).toBe(true);
        expect((error as Error).message).toContain('"k"');
        expect(await store.inbox.get('s', 'k')).toBe('the body');
        expect((await store.inbox.list('s')).map(({ storedAt: _, ...entry }) => entry)).toEqual([first]);
      });

      it('put refuses a bad key (empty, over 300 characters, a lone surrogate) with INVALID_ARGUMENT, a body over 32 MiB with MESSAGE_TOO_LARGE, and stores nothing', async () => {
        expect(await store.inbox.put('s', 'k'.repeat(300), 'fine')).toMatchObject({ bytes: 4 });
        for (const key of ['', 'k'.repeat(301), 'bad\uD800key'])
          expect(await failureCode(() => store.inbox.put('s', key, 'body'))).toBe('INVALID_ARGUMENT');
        expect(await failureCode(() => store.inbox.put('s', 'big', 'é'.repeat(16 * 1024 * 1024 + 1)))).toBe(
          'MESSAGE_TOO_LARGE',
        );
        expect(await failureCode(() => store.inbox.put('../x', 'k', 'body'))).toBe('INVALID_SESSION_ID');
        expect((await store.inbox.list('s')).map((entry) => entry.key)).toEqual(['k'.repeat(300)]);
      });

      it('a 9 MiB body round-trips byte for byte', async () => {
        const chunk = 'a line of text with ünïcödé and \u0000 and "quotes"\n';
        const body = chunk.repeat(Math.ceil((9 * 1024 * 1024) / Buffer.byteLength(chunk, 'utf8')));
        const ref = await store.inbox.put('s', 'big', body);
        expect(ref.bytes).toBe(Buffer.byteLength(body, 'utf8'));
        expect(ref.bytes).toBeGreaterThan(9 * 1024 * 1024);
        expect(ref.digest).toBe(sha256(body));
        const read = await (await reopen()).inbox.get('s', 'big');
        expect(read?.length).toBe(body.length);
        expect(read === body).toBe(true);
      });

      it('put on an id whose tombstone lasts is SESSION_ERASED and stores nothing', async () => {
        await store.create(header('gone'));
        await store.erase('gone', ALL_TENANTS);
        for (const s of [store, await reopen()]) {
          const error = await failure(() => s.inbox.put('gone', 'k', 'late'));
          expect(isSessionlogError(error, 'SESSION_ERASED'), String(error)).toBe(true);
        }
        expect(await store.inbox.list('gone')).toEqual([]);
      });

      it('obtain makes one key per session id, the same for concurrent callers in two instances; find is undefined before and the same key after', async () => {
        const other = await reopen();
        expect(await store.sessionKeys.find('s')).toBeUndefined();
        const keys = await Promise.all([
          store.sessionKeys.obtain('s'),
          other.sessionKeys.obtain('s'),
          store.sessionKeys.obtain('s'),
          other.sessionKeys.obtain('s'),
        ]);
        const [key] = keys;
        expect(key!.id).toMatch(/^[0-9a-f]{16}$/);
        expect(key!.key).toHaveLength(32);
        for (const k of keys)
          expect({ id: k.id, key: k.key.toString('hex') }).toEqual({
            id: key!.id,
            key: key!.key.toString('hex'),
          });
        for (const s of [store, other, await reopen()]) {
          const found = await s.sessionKeys.find('s');
          expect(found && { id: found.id, key: found.key.toString('hex') }).toEqual({
            id: key!.id,
            key: key!.key.toString('hex'),
          });
        }
        const second = await store.sessionKeys.obtain('t');
        expect(second.id).not.toBe(key!.id);
        expect(second.key.equals(key!.key)).toBe(false);
        // A key makes no session.
        expect(await store.exists('s')).toBe(false);
      });

      it("erase removes the session's inbox entries and key with it, counts them and names where; other ids keep theirs", async () => {
        await store.create(header('gone'));
        await store.append('gone', [user('u1')], { expectedSeq: 0, op: 'b0' });
        await store.inbox.put('gone', 'a', 'first');
        await store.inbox.put('gone', 'b', 'second');
        await store.sessionKeys.obtain('gone');
        await store.inbox.put('kept', 'a', 'mine');
        const kept = await store.sessionKeys.obtain('kept');
        const receipt = await (await reopen()).erase('gone', ALL_TENANTS);
        expect(receipt).toMatchObject({
          erased: true,
          removed: {
            header: 1,
            events: 1,
            artifacts: 0,
            projectionCheckpoints: 0,
            inboxEntries: 2,
            sessionKey: 1,
            transcriptEntries: 0,
          },
        });
        expect(receipt.places.filter((p) => /inbox$/.test(p.place)).map((p) => p.removed)).toEqual([2]);
        expect(receipt.places.filter((p) => /session[._]keys?$/.test(p.place)).map((p) => p.removed)).toEqual([1]);
        for (const s of [store, await reopen()]) {
          expect(await s.inbox.list('gone')).toEqual([]);
          expect(await s.inbox.get('gone', 'a')).toBeUndefined();
          expect(await s.sessionKeys.find('gone')).toBeUndefined();
          expect(await s.inbox.get('kept', 'a')).toBe('mine');
          expect((await s.sessionKeys.find('kept'))?.key.equals(kept.key)).toBe(true);
        }
        expect(await store.erase('gone', ALL_TENANTS)).toMatchObject({
          erased: false,
          removed: { inboxEntries: 0, sessionKey: 0 },
        });
      });

      it('erase of an id with only inbox entries, or only a key, removes them and leaves a tombstone; with nothing at all it stays SESSION_NOT_FOUND', async () => {
        await store.inbox.put('early', 'a', 'before the session');
        await store.inbox.put('early', 'b', 'also before');
        const receipt = await store.erase('early', ALL_TENANTS);
        expect(receipt).toMatchObject({
          sessionId: 'early',
          erased: true,
          removed: { header: 0, events: 0, artifacts: 0, projectionCheckpoints: 0, inboxEntries: 2, sessionKey: 0 },
        });
        expect(receipt.tombstoneUntil).toBeGreaterThan(Date.now());
        expect(await store.inbox.list('early')).toEqual([]);
        expect(await failureCode(() => store.inbox.put('early', 'c', 'after'))).toBe('SESSION_ERASED');
        expect(await failureCode(() => store.create(header('early')))).toBe('SESSION_ERASED');
        expect(await store.erase('early', ALL_TENANTS)).toMatchObject({ erased: false });

        await store.sessionKeys.obtain('keyed');
        expect(await (await reopen()).erase('keyed', ALL_TENANTS)).toMatchObject({
          erased: true,
          removed: { header: 0, inboxEntries: 0, sessionKey: 1 },
        });
        expect(await store.sessionKeys.find('keyed')).toBeUndefined();

        expect(await failureCode(() => store.erase('never', ALL_TENANTS))).toBe('SESSION_NOT_FOUND');
        expect((await store.list(ALL_TENANTS)).map((h) => h.id)).toEqual([]);
      });
    });

    describe('pacing buckets', () => {
      const limits = { requestsPerMinute: 600, tokensPerMinute: 60_000, burstMs: 1_000 };
      const one = (tokens = 100) => ({ requests: 1, tokens });

      it('grants a burst at once, then spaces reservations at the rate, shared by every instance and kept across a reopen', async () => {
        const other = await reopen();
        const grants = [];
        // 600/min = one per 100 ms; a burst of 1 s holds 10.
        for (let i = 0; i < 14; i++)
          grants.push(await (i % 2 ? other : store).pacing.reserve('p', limits, one(), T0, 60_000));
        expect(grants.every((g) => g.taken)).toBe(true);
        expect(grants.slice(0, 10).map((g) => g.startAt)).toEqual(Array(10).fill(T0));
        expect(grants.slice(10).map((g) => g.startAt - T0)).toEqual([100, 200, 300, 400]);
        await store.close();
        const again = await reopen();
        expect(await again.pacing.state('p')).toEqual({ requestsAt: T0 + 1_400, tokensAt: T0 + 1_400 });
        expect((await again.pacing.reserve('p', limits, one(), T0, 60_000)).startAt - T0).toBe(500);
        // Another key is another bucket.
        expect((await again.pacing.reserve('q', limits, one(), T0, 60_000)).startAt).toBe(T0);
      });

      it('does not take a slot further away than the caller waits; tokens pace too and are corrected after the call', async () => {
        for (let i = 0; i < 10; i++) await store.pacing.reserve('p', limits, one(), T0, 0);
        const refused = await store.pacing.reserve('p', limits, one(), T0, 50);
        expect(refused).toEqual({ startAt: T0 + 100, taken: false });
        expect((await store.pacing.state('p'))!.requestsAt).toBe(T0 + 1_000);
        // 60,000 tokens/min with a 1 s burst: 1,000 tokens at once, then one per ms.
        const big = await store.pacing.reserve('t', limits, one(3_000), T0, 60_000);
        expect(big.startAt - T0).toBe(2_000);
        await store.pacing.adjust('t', limits, -1_000, T0);
        expect((await store.pacing.state('t'))!.tokensAt).toBe(T0 + 2_000);
        expect(await store.pacing.state('never')).toBeUndefined();
      });

      it('serialises concurrent reservations across instances: no two share a slot', async () => {
        const others = [store, await reopen(), await reopen()];
        const slow = { requestsPerMinute: 60, burstMs: 1_000 };
        const grants = await Promise.all(
          Array.from({ length: 30 }, (_, i) => others[i % 3]!.pacing.reserve('c', slow, one(0), T0, 3_600_000)),
        );
        const starts = grants.map((g) => g.startAt - T0).sort((a, b) => a - b);
        expect(starts).toEqual(Array.from({ length: 30 }, (_, i) => i * 1_000));
      });

      it('refuses bad keys and limits', async () => {
        expect(await failureCode(() => store.pacing.reserve('', limits, one(), T0, 0))).toBe('INVALID_ARGUMENT');
        expect(await failureCode(() => store.pacing.reserve('k', { requestsPerMinute: -1 }, one(), T0, 0))).toBe(
          'INVALID_ARGUMENT',
        );
        expect(await failureCode(() => store.pacing.reserve('k', { perHour: 5 } as never, one(), T0, 0))).toBe(
          'INVALID_ARGUMENT',
        );
      });
    });

    describe('transcript index', () => {
      /** A transcript digest as the gateway makes one: hex SHA-256 of some text. */
      const digestOf = (text: string): string => createHash('sha256').update(text, 'utf8').digest('hex');
      const d1 = digestOf('transcript one');
      const d2 = digestOf('transcript two');

      it('put then get returns the entry, also from another instance and after a reopen; a pair never put is undefined', async () => {
        await store.create(header('s'));
        expect(await store.transcripts.get('caller-a', d1)).toBeUndefined();
        await store.transcripts.put('caller-a', d1, { sessionId: 's', seq: 4 });
        const other = await reopen();
        for (const s of [store, other]) {
          expect(await s.transcripts.get('caller-a', d1)).toEqual({ sessionId: 's', seq: 4 });
          expect(await s.transcripts.get('caller-a', d2)).toBeUndefined();
        }
        await store.close();
        expect(await (await reopen()).transcripts.get('caller-a', d1)).toEqual({ sessionId: 's', seq: 4 });
        // An index entry makes no session and changes no log.
        expect((await other.list(ALL_TENANTS)).map((h) => h.id)).toEqual(['s']);
        expect(await other.nextSeq('s')).toBe(0);
      });

      it('putting a pair again replaces its entry (newest wins), also with another session; put is answered by every instance', async () => {
        await store.create(header('a'));
        await store.create(header('b'));
        const other = await reopen();
        await store.transcripts.put('caller', d1, { sessionId: 'a', seq: 2 });
        await other.transcripts.put('caller', d1, { sessionId: 'a', seq: 6 });
        expect(await store.transcripts.get('caller', d1)).toEqual({ sessionId: 'a', seq: 6 });
        await store.transcripts.put('caller', d1, { sessionId: 'b', seq: 0 });
        for (const s of [store, other])
          expect(await s.transcripts.get('caller', d1)).toEqual({ sessionId: 'b', seq: 0 });
        await other.transcripts.put('caller', d1, { sessionId: 'a', seq: 9 });
        expect(await store.transcripts.get('caller', d1)).toEqual({ sessionId: 'a', seq: 9 });
      });

      it('scopes are separate: the same digest in two scopes names two entries, and a scope never sees another one', async () => {
        await store.create(header('a'));
        await store.create(header('b'));
        await store.transcripts.put('token-hash-1', d1, { sessionId: 'a', seq: 1 });
        await store.transcripts.put('token-hash-2', d1, { sessionId: 'b', seq: 7 });
        expect(await store.transcripts.get('token-hash-1', d1)).toEqual({ sessionId: 'a', seq: 1 });
        expect(await store.transcripts.get('token-hash-2', d1)).toEqual({ sessionId: 'b', seq: 7 });
        expect(await store.transcripts.get('token-hash-3', d1)).toBeUndefined();
        // A scope is compared exactly: no prefix, case or trailing-space match.
        for (const scope of ['token-hash-', 'Token-hash-1', 'token-hash-1 ', 'token-hash-12'])
          expect(await store.transcripts.get(scope, d1), scope).toBeUndefined();
      });

      it('a scope of 1-200 printable ASCII characters and a 64-digit lowercase hex digest are accepted; anything else is INVALID_ARGUMENT for put and get, and nothing is stored', async () => {
        await store.create(header('s'));
        const longest = ' !~'.repeat(66) + 'xy';
        expect(longest).toHaveLength(200);
        for (const scope of ['x', longest, 'sha256:AbC/+= token', '{"json": [1]}']) {
          await store.transcripts.put(scope, d1, { sessionId: 's', seq: 1 });
          expect(await store.transcripts.get(scope, d1), scope).toEqual({ sessionId: 's', seq: 1 });
        }
        const badScopes: unknown[] = [
          '',
          'x'.repeat(201),
          'caf\u00e9',
          'tab\there',
          'line\nbreak',
          'nul\u0000',
          'del\u007f',
          42,
          undefined,
        ];
        const badDigests: unknown[] = [
          d1.toUpperCase(),
          d1.slice(1),
          `${d1}0`,
          `${d1.slice(0, 63)}g`,
          '',
          7,
          undefined,
        ];
        for (const scope of badScopes) {
          expect(
            await failureCode(() => store.transcripts.put(scope as string, d2, { sessionId: 's', seq: 1 })),
            String(scope),
          ).toBe('INVALID_ARGUMENT');
          expect(await failureCode(() => store.transcripts.get(scope as string, d2)), String(scope)).toBe(
            'INVALID_ARGUMENT',
          );
        }
        for (const digest of badDigests) {
          expect(
            await failureCode(() => store.transcripts.put('caller', digest as string, { sessionId: 's', seq: 1 })),
            String(digest),
          ).toBe('INVALID_ARGUMENT');
          expect(await failureCode(() => store.transcripts.get('caller', digest as string)), String(digest)).toBe(
            'INVALID_ARGUMENT',
          );
        }
        for (const seq of [-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 53, '3', undefined])
          expect(
            await failureCode(() => store.transcripts.put('caller', d2, { sessionId: 's', seq: seq as number })),
            String(seq),
          ).toBe('INVALID_ARGUMENT');
        for (const entry of [undefined, null, 's'])
          expect(await failureCode(() => store.transcripts.put('caller', d2, entry as never)), String(entry)).toBe(
            'INVALID_ARGUMENT',
          );
        for (const sessionId of ['../x', '', '.hidden', undefined])
          expect(
            await failureCode(() => store.transcripts.put('caller', d2, { sessionId: sessionId as string, seq: 1 })),
            String(sessionId),
          ).toBe('INVALID_SESSION_ID');
        expect(await store.transcripts.get('caller', d2)).toBeUndefined();
        // The largest safe seq is a seq.
        await store.transcripts.put('caller', d2, { sessionId: 's', seq: Number.MAX_SAFE_INTEGER });
        expect(await (await reopen()).transcripts.get('caller', d2)).toEqual({
          sessionId: 's',
          seq: Number.MAX_SAFE_INTEGER,
        });
      });

      it('put naming a session that does not exist is SESSION_NOT_FOUND, one whose tombstone lasts SESSION_ERASED; nothing is stored and the entry it replaced stays', async () => {
        await store.create(header('s'));
        await store.transcripts.put('caller', d1, { sessionId: 's', seq: 3 });
        expect(await failureCode(() => store.transcripts.put('caller', d1, { sessionId: 'never', seq: 1 }))).toBe(
          'SESSION_NOT_FOUND',
        );
        // Inbox entries or a key do not make a session.
        await store.inbox.put('early', 'm', 'before the session');
        await store.sessionKeys.obtain('early');
        expect(await failureCode(() => store.transcripts.put('caller', d2, { sessionId: 'early', seq: 0 }))).toBe(
          'SESSION_NOT_FOUND',
        );
        await store.create(header('gone'));
        await store.erase('gone', ALL_TENANTS);
        for (const s of [store, await reopen()]) {
          const error = await failure(() => s.transcripts.put('caller', d1, { sessionId: 'gone', seq: 1 }));
          expect(isSessionlogError(error, 'SESSION_ERASED'), String(error)).toBe(true);
        }
        expect(await store.transcripts.get('caller', d1)).toEqual({ sessionId: 's', seq: 3 });
        expect(await store.transcripts.get('caller', d2)).toBeUndefined();
      });

      it("erase removes every entry that names the session, counts them in the receipt and names where; other sessions' entries, and a pair taken over by another session, stay", async () => {
        for (const id of ['gone', 'kept', 'taker']) await store.create(header(id));
        await store.transcripts.put('caller-1', d1, { sessionId: 'gone', seq: 1 });
        await store.transcripts.put('caller-1', d2, { sessionId: 'gone', seq: 5 });
        await store.transcripts.put('caller-2', d1, { sessionId: 'gone', seq: 2 });
        // Named the erased session once, then another one: no longer its entry.
        await store.transcripts.put('caller-3', d1, { sessionId: 'gone', seq: 1 });
        await store.transcripts.put('caller-3', d1, { sessionId: 'taker', seq: 8 });
        await store.transcripts.put('caller-2', d2, { sessionId: 'kept', seq: 4 });
        const receipt = await (await reopen()).erase('gone', ALL_TENANTS);
        expect(receipt).toMatchObject({
          erased: true,
          removed: {
            header: 1,
            events: 0,
            artifacts: 0,
            projectionCheckpoints: 0,
            inboxEntries: 0,
            sessionKey: 0,
            transcriptEntries: 3,
          },
        });
        expect(receipt.places.filter((p) => /transcripts$/.test(p.place)).map((p) => p.removed)).toEqual([3]);
        for (const s of [store, await reopen()]) {
          expect(await s.transcripts.get('caller-1', d1)).toBeUndefined();
          expect(await s.transcripts.get('caller-1', d2)).toBeUndefined();
          expect(await s.transcripts.get('caller-2', d1)).toBeUndefined();
          expect(await s.transcripts.get('caller-3', d1)).toEqual({ sessionId: 'taker', seq: 8 });
          expect(await s.transcripts.get('caller-2', d2)).toEqual({ sessionId: 'kept', seq: 4 });
        }
        expect(await store.erase('gone', ALL_TENANTS)).toMatchObject({
          erased: false,
          removed: { transcriptEntries: 0 },
        });
        expect((await store.erase('kept', ALL_TENANTS)).removed.transcriptEntries).toBe(1);
        expect(await store.transcripts.get('caller-2', d2)).toBeUndefined();
      });

      it('an id erased and created again starts with no entries: the old ones name nothing', async () => {
        const short = await openStore(url, { tombstoneMs: 1 });
        opened.push(short);
        await short.create(header('s'));
        await short.transcripts.put('caller', d1, { sessionId: 's', seq: 5 });
        const { tombstoneUntil } = await short.erase('s', ALL_TENANTS);
        for (let i = 0; i < 1000 && Date.now() <= tombstoneUntil; i++)
          await new Promise((resolve) => setTimeout(resolve, 1));
        await short.create(header('s', { createdAt: T0 + 5 }));
        for (const s of [short, await reopen()]) expect(await s.transcripts.get('caller', d1)).toBeUndefined();
        await short.transcripts.put('caller', d2, { sessionId: 's', seq: 0 });
        expect(await short.transcripts.get('caller', d2)).toEqual({ sessionId: 's', seq: 0 });
        expect(await short.transcripts.get('caller', d1)).toBeUndefined();
      });

      it('a put racing an erasure of its session either fails (SESSION_ERASED) or is erased with it: get never finds the erased session', async () => {
        const other = await reopen();
        // The erasure starts 0-11 ms after the put, so the two meet at different steps (every outcome must hold).
        for (let i = 0; i < 12; i++) {
          const id = `race-${i}`;
          await store.create(header(id));
          const [put] = await Promise.allSettled([
            other.transcripts.put('caller', digestOf(id), { sessionId: id, seq: i }),
            new Promise((resolve) => setTimeout(resolve, i)).then(() => store.erase(id, ALL_TENANTS)),
          ]);
          if (put.status === 'rejected')
            expect(isSessionlogError(put.reason, 'SESSION_ERASED'), String(put.reason)).toBe(true);
          for (const s of [store, other]) expect(await s.transcripts.get('caller', digestOf(id))).toBeUndefined();
        }
      });
    });

    describe('search', () => {
      /** Creates `id` and appends `events` in batches of `size`. */
      async function seeded(id: string, events: readonly NewEvent[], size = 3): Promise<void> {
        await store.create(header(id));
        await appendInBatches(store, Session.create(header(id)), events, [size]);
      }

      it('finds every kind of text-bearing event (message text, reasoning, tool-call arguments, tool results, compaction summaries), case- and accent-insensitively, shadowed ones included', async () => {
        await seeded('s', searchableTurn());
        const view = await store.session('s');
        // The turn's messages are off the surface: only the compaction's replacement is left there.
        expect(view.surface.nodes).toEqual([13]);
        for (const s of [store, await reopen()]) {
          const find = async (query: string): Promise<number[]> => sortedSeqsOf(await s.search('s', query));
          expect(await find('walrus')).toEqual([1, 8]);
          expect(await find('WALRUS Migration')).toEqual([1]);
          expect(await find('zebra')).toEqual([3]);
          expect(await find('quokka habitat')).toEqual([3, 4]);
          expect(await find('grep')).toEqual([3, 4]);
          expect(await find('ocelot enclosure')).toEqual([7]);
          expect(await find('zoo.ts')).toEqual([3, 4, 7]);
          expect(await find('narwhal')).toEqual([12]);
          expect(await find('checkpoint')).toEqual([13]);
          expect(await find('cafe')).toEqual([8]);
          expect(await find('CAFÉ')).toEqual([8]);
          expect(await find('naive')).toEqual([1]);
          // Every word must match; a word only in non-text events (turn, step markers) matches nothing.
          expect(await find('walrus narwhal')).toEqual([]);
          expect(await find('completed')).toEqual([]);
          expect(await find('manual')).toEqual([]);
        }
      });

      it('each hit has a snippet of at most 300 characters holding a matched word, cut around it from a long text', async () => {
        const long = `${'lorem ipsum dolor '.repeat(200)}the shy IBEX lives on the ridge ${'sit amet consectetur '.repeat(200)}`;
        await seeded('s', [user('u0', long), user('u1', 'an ibex, briefly')]);
        const hits = await store.search('s', 'ibex');
        expect(sortedSeqsOf(hits)).toEqual([0, 1]);
        for (const hit of hits) {
          expect(hit.snippet.length).toBeLessThanOrEqual(SNIPPET_MAX_CHARS);
          expect(hit.snippet.toLowerCase()).toContain('ibex');
        }
        const cut = hits.find((hit) => hit.seq === 0)!.snippet;
        expect(cut).toMatch(/^….*the shy IBEX lives on the ridge.*…$/);
        expect(cut.length).toBeGreaterThan(200);
        expect(hits.find((hit) => hit.seq === 1)!.snippet).toBe('an ibex, briefly');
      });

      it('ranks best first: more occurrences in a shorter text rank higher, on every backend', async () => {
        await seeded('s', [
          user('long', `kestrel ${'filler '.repeat(200)}`),
          user('three', 'kestrel kestrel kestrel'),
          user('one', 'kestrel hawk falcon'),
          user('none', 'hawk'),
        ]);
        const hits = await store.search('s', 'kestrel');
        expect(seqsOf(hits)).toEqual([1, 2, 0]);
        expect(hits[0]!.score).toBeGreaterThan(hits[1]!.score);
        expect(hits[1]!.score).toBeGreaterThan(hits[2]!.score);
      });

      it('returns at most limit hits (default 20, at most 100), best first, and refuses a bad limit or an empty query with INVALID_ARGUMENT', async () => {
        await seeded(
          's',
          Array.from({ length: 30 }, (_, i) => user(`g${i}`, `gecko ${'gecko '.repeat(i % 4)}number ${i}`)),
          7,
        );
        const all = await store.search('s', 'gecko', { limit: 100 });
        expect(sortedSeqsOf(all)).toEqual([...Array(30).keys()]);
        for (let i = 1; i < all.length; i++) expect(all[i - 1]!.score).toBeGreaterThanOrEqual(all[i]!.score);
        const top = await store.search('s', 'gecko');
        expect(top).toHaveLength(20);
        expect(seqsOf(top)).toEqual(seqsOf(all).slice(0, 20));
        expect(seqsOf(await store.search('s', 'gecko', { limit: 5 }))).toEqual(seqsOf(all).slice(0, 5));
        expect(await store.search('s', 'gecko', {})).toHaveLength(20);
        for (const limit of [0, 101, 2.5, -1, Number.NaN, '3']) {
          expect(
            await failureCode(() => store.search('s', 'gecko', { limit } as never)),
            `limit ${String(limit)}`,
          ).toBe('INVALID_ARGUMENT');
        }
        const tooManyWords = Array.from({ length: 33 }, (_, i) => `w${i}`).join(' ');
        for (const query of ['', '   ', '\n\t', 42, undefined, 'x'.repeat(1001), tooManyWords]) {
          expect(
            await failureCode(() => store.search('s', query as string)),
            `query ${JSON.stringify(query)?.slice(0, 40)}`,
          ).toBe('INVALID_ARGUMENT');
        }
        expect(await failureCode(() => store.search('s', 'gecko', null as never))).toBe('INVALID_ARGUMENT');
      });

      it('treats the query as plain words: FTS5 and tsquery syntax neither throws nor is interpreted, and a query of only punctuation finds nothing', async () => {
        await seeded('s', [
          user('u0', 'gecko in the garden'),
          user('u1', 'salt OR pepper'),
          user('u2', 'near the barn'),
        ]);
        const find = async (query: string): Promise<number[]> => sortedSeqsOf(await store.search('s', query));
        // Operators are ordinary words (every one must be in the text), quotes and stars punctuation.
        expect(await find('"gecko" OR bar*')).toEqual([]);
        expect(await find('salt OR pepper')).toEqual([1]);
        expect(await find('salt AND pepper')).toEqual([]);
        expect(await find('salt NOT pepper')).toEqual([]);
        expect(await find('NEAR(')).toEqual([2]);
        expect(await find('NEAR(gecko garden)')).toEqual([]);
        // A column filter is two words, and the text has no word "body".
        expect(await find('body:gecko')).toEqual([]);
        for (const query of [
          '"gecko"',
          'gecko*',
          'gecko:*',
          '^gecko',
          '-gecko',
          '{gecko}',
          '(gecko)',
          "gecko'",
          'gecko\\',
          '"gecko',
          'gecko & !',
          '+gecko',
          'gecko;',
        ]) {
          expect(await find(query), query).toEqual([0]);
        }
        for (const query of ['"', '*', '"*()^:-', "'", '\\', '&|!<->', ':*', '…', 'NEAR(', ')(']) {
          const attempt = await failure(() => store.search('s', query));
          expect(attempt, query).toBeUndefined();
        }
        expect(await find('"*()^:-')).toEqual([]);
        expect(await find("'; DROP TABLE events; --")).toEqual([]);
        expect(await store.nextSeq('s')).toBe(3);
        expect(await find('garden')).toEqual([0]);
      });

      it("never returns another session's events, and a session's search sees only its own seqs", async () => {
        await seeded(
          'other',
          Array.from({ length: 25 }, (_, i) => user(`o${i}`, `walrus platypus ${i}`)),
          10,
        );
        await seeded('s', searchableTurn());
        await seeded('third', [user('t0', 'walrus')]);
        for (const s of [store, await reopen()]) {
          expect(sortedSeqsOf(await s.search('s', 'walrus', { limit: 100 }))).toEqual([1, 8]);
          expect(await s.search('s', 'platypus', { limit: 100 })).toEqual([]);
          expect(sortedSeqsOf(await s.search('other', 'walrus', { limit: 100 }))).toEqual([...Array(25).keys()]);
          expect(sortedSeqsOf(await s.search('other', 'platypus 24'))).toEqual([24]);
          expect(await s.search('other', 'narwhal')).toEqual([]);
          expect(sortedSeqsOf(await s.search('third', 'walrus'))).toEqual([0]);
        }
        await store.erase('third', ALL_TENANTS);
        expect(await failureCode(() => store.search('third', 'walrus'))).toBe('SESSION_NOT_FOUND');
        expect(sortedSeqsOf(await store.search('other', 'walrus', { limit: 100 }))).toHaveLength(25);
      });

      it('is in step with the log: events appended by another instance and by crash repair are found at once', async () => {
        await seeded('s', [user('u0', 'first heron')]);
        const other = await reopen();
        expect(sortedSeqsOf(await other.search('s', 'heron'))).toEqual([0]);
        await store.append('s', [user('u1', 'second heron')], { expectedSeq: 1, op: 'b-late' });
        expect(sortedSeqsOf(await other.search('s', 'heron'))).toEqual([0, 1]);
        await other.append('s', openTurnInputs(), { expectedSeq: 2, op: 'b-turn' });
        const loaded = await (await reopen()).load('s');
        expect(loaded.repaired).toBeGreaterThan(0);
        const closers = loaded.events.slice(-loaded.repaired);
        // The repair's tool results carry text; each is found under its own seq.
        const repairedResults = closers.filter((e) => e.type === 'tool/result');
        expect(repairedResults.length).toBeGreaterThan(0);
        const words = indexedWords(searchableText(repairedResults[0]!)!).slice(0, 3);
        for (const s of [store, other]) {
          const hits = sortedSeqsOf(await s.search('s', words.join(' '), { limit: 100 }));
          expect(hits).toEqual(referenceSearch(loaded.events, words));
          expect(hits).toContain(repairedResults[0]!.seq);
        }
      });

      it('for random logs appended in random batches, every backend finds exactly the events whose words hold the query', async () => {
        const queries = [
          ['alpha'],
          ['beta'],
          ['gamma'],
          ['delta'],
          ['unicode'],
          ['clef'],
          ['line', 'break'],
          ['quoted'],
          ['json', '1'],
          ['recap'],
          ['compacted', 'summary'],
          ['pruned'],
          ['alpha', '7'],
        ];
        await fc.assert(
          fc.asyncProperty(
            programArb(50),
            fc.array(fc.integer({ min: 1, max: 6 }), { minLength: 1, maxLength: 8 }),
            async (program, sizes) => {
              const id = `sr-${Math.random().toString(36).slice(2, 10)}`;
              const generated = buildLog(program, ANY_REPLACES);
              await store.create(header(id));
              const reference = Session.create(header(id));
              await appendInBatches(store, reference, generated.inputs, sizes);
              const fresh = await reopen();
              for (const words of queries) {
                const expected = referenceSearch(reference.events, words);
                for (const s of [store, fresh]) {
                  const hits = await s.search(id, words.join(' '), { limit: 100 });
                  if (expected.length <= 100) expect(sortedSeqsOf(hits), words.join(' ')).toEqual(expected);
                  else expect(hits).toHaveLength(100);
                  for (const hit of hits) expect(expected).toContain(hit.seq);
                }
              }
            },
          ),
          { numRuns: 8 },
        );
      });

      it('a damaged log is CORRUPT_LOG for search, as for every read', async () => {
        await seeded('s', [user('u0', 'heron one'), user('u1', 'heron two'), user('u2', 'heron three')], 1);
        await store.close();
        fixture.editRecord(url, 's', 1, { kind: 'garble' });
        expect(await failureCode(async () => (await reopen()).search('s', 'heron'))).toBe('CORRUPT_LOG');
      });
    });

    describe('closed store', () => {
      it('every method of a closed store fails with STORE_CLOSED', async () => {
        await store.create(header('s'));
        await store.close();
        for (const attempt of [
          () => store.create(header('t')),
          () => store.header('s'),
          () => store.append('s', [run(0)], { expectedSeq: 0, op: 'x' }),
          () => store.readFrom('s', 0),
          () => store.load('s'),
          () => store.inspect('s'),
          () => store.session('s'),
          () => store.scan('s'),
          () => store.erase('s', ALL_TENANTS),
          () => store.list(ALL_TENANTS),
          () => store.search('s', 'anything'),
          () => store.transcripts.put('caller', '0'.repeat(64), { sessionId: 's', seq: 0 }),
          () => store.transcripts.get('caller', '0'.repeat(64)),
        ]) {
          expect(await failureCode(attempt)).toBe('STORE_CLOSED');
        }
      });
    });
  });
}
