/**
 * Property tests of media in the log (issue 50: "a property test over random media sequences
 * keeps replay, the meter and the derived history identical"). Over random sequences of user
 * turns with and without images (stored and remote) and files, and tool rounds whose results
 * hold images, three things are compared however the session was read:
 *
 * - the derived history (`Session.deriveMessages()`),
 * - the request the media policy builds (`applyMediaPolicy` then `buildChatRequest`, with the
 *   stored bytes read back from the store), and
 * - the meter's count (`createTokenMeter().measure`),
 *
 * each derived from scratch (`Session.fromEvents` and a fresh meter), incrementally (one session
 * appended turn by turn, one meter measuring after every batch, so its per-node cache is used),
 * and after a replay from the store: the batches appended to a real SQLite, JSONL and (when it
 * answers at 127.0.0.1:5432) PostgreSQL store, the store closed and opened again, the log loaded
 * and the media read back. And a log
 * without media gives the request the builder gave before media existed (an independent model of
 * the pre-media wire form, src/model/request.ts at d2c2b14~1) and a meter count no policy changes.
 */
import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyMediaPolicy, resolveMediaPolicy, type MediaPolicy } from '../../src/context/media-policy.js';
import { createTokenMeter } from '../../src/context/token-meter.js';
import { DEFAULT_MODEL_CATALOGUE, lookupModel } from '../../src/model/catalogue.js';
import { buildChatRequest, storedMediaOf, type ChatRequestBody } from '../../src/model/request.js';
import { openStore } from '../../src/persistence/open.js';
import type { SessionStore } from '../../src/persistence/store.js';
import {
  Session,
  textOf,
  type ContentBlock,
  type NewEvent,
  type RequestHeader,
  type SessionHeader,
  type StoredMedia,
} from '../../src/session/index.js';
import { inspectMedia } from '../../src/session/media.js';
import { PDF_MINIMAL, png, utf8 } from '../support/media.js';
import { testHeader } from '../support/persistence-events.js';
import {
  dropPostgresTestSchemas,
  jsonlFixture,
  postgresFixture,
  probePostgres,
  sqliteFixture,
  tempDir,
  type BackendFixture,
} from '../support/store-fixtures.js';

const RUNS = { numRuns: 25 };
const MODEL = lookupModel(DEFAULT_MODEL_CATALOGUE, 'fake');
const HEADER: RequestHeader = { provider: 'fake', model: 'fake', system: 'You are a test assistant.' };

/** The media every generated session stores: three images of different sizes, a PDF and a text file. */
const POOL: ReadonlyArray<{ bytes: Uint8Array; mediaType: 'image/png' | 'application/pdf' | 'text/plain' }> = [
  { bytes: png(16, 16, [10, 200, 30]), mediaType: 'image/png' },
  { bytes: png(700, 300, [200, 30, 30], 1), mediaType: 'image/png' },
  { bytes: png(40, 1200, [30, 30, 200], 2), mediaType: 'image/png' },
  { bytes: PDF_MINIMAL, mediaType: 'application/pdf' },
  { bytes: utf8('notes: the quarterly numbers\nline two\n'), mediaType: 'text/plain' },
];

/** A medium a generated message holds: an index into the session's stored POOL, or a remote image. */
type MediaPick = { kind: 'stored'; index: number; detail?: 'low' | 'high' } | { kind: 'remote'; url: string };
type TurnSpec = {
  text: string;
  media: MediaPick[];
  /** A tool round before the reply: the result's text and the media it returns. */
  tool?: { text: string; media: MediaPick[] };
  reply: string;
};

const words = fc.stringMatching(/^[a-z ]{0,24}$/);
const pickArb = (images: boolean): fc.Arbitrary<MediaPick> =>
  fc.oneof(
    {
      arbitrary: fc.record(
        {
          kind: fc.constant('stored' as const),
          index: images ? fc.integer({ min: 0, max: 2 }) : fc.integer({ min: 0, max: POOL.length - 1 }),
          detail: fc.constantFrom('low' as const, 'high' as const),
        },
        { requiredKeys: ['kind', 'index'] },
      ),
      weight: 4,
    },
    {
      arbitrary: fc.nat(99).map((n) => ({ kind: 'remote' as const, url: `https://images.example.com/${n}.png` })),
      weight: 1,
    },
  );
const turnArb = (withMedia: boolean): fc.Arbitrary<TurnSpec> =>
  fc.record(
    {
      text: words,
      media: withMedia ? fc.array(pickArb(false), { maxLength: 3 }) : fc.constant([]),
      tool: fc.record({ text: words, media: withMedia ? fc.array(pickArb(true), { maxLength: 2 }) : fc.constant([]) }),
      reply: words,
    },
    { requiredKeys: ['text', 'media', 'reply'] },
  );
const programArb = (withMedia: boolean) => fc.array(turnArb(withMedia), { minLength: 1, maxLength: 8 });
const policyArb: fc.Arbitrary<MediaPolicy> = fc
  .integer({ min: 0, max: 4 })
  .map((recentTurns) => resolveMediaPolicy({ recentTurns }));

function block(pick: MediaPick, stored: readonly StoredMedia[], turn: number): ContentBlock {
  if (pick.kind === 'remote') return { type: 'image', source: { kind: 'url', url: pick.url } };
  const source = stored[pick.index]!;
  if (source.mediaType.startsWith('image/'))
    return { type: 'image', source, ...(pick.detail ? { detail: pick.detail } : {}) };
  return { type: 'file', source, filename: `doc-${turn}.${source.mediaType === 'text/plain' ? 'txt' : 'pdf'}` };
}

/** The program's log as the engine writes it, one batch per write: the user message, the tool round, the reply. */
function batchesOf(program: readonly TurnSpec[], stored: readonly StoredMedia[]): NewEvent[][] {
  const batches: NewEvent[][] = [];
  program.forEach((spec, i) => {
    const turn = i + 1;
    const time = 1_700_000_000_000 + turn;
    const content: ContentBlock[] = [
      ...(spec.text === '' && spec.media.length > 0 ? [] : [{ type: 'text' as const, text: spec.text }]),
      ...spec.media.map((pick) => block(pick, stored, turn)),
    ];
    batches.push([
      { type: 'turn/start', time, data: { turn } },
      {
        type: 'user/message',
        time,
        data: { id: `u${turn}`, role: 'user', content, source: { kind: 'user' } },
        surfaceOp: 'append',
      },
      { type: 'step/start', time, data: { turn, step: 1 } },
    ]);
    let step = 1;
    if (spec.tool) {
      const callId = `call-${turn}`;
      batches.push([
        {
          type: 'assistant/message',
          time,
          data: {
            turn,
            step,
            message: {
              id: `a${turn}-tool`,
              role: 'assistant',
              content: [{ type: 'tool-call', id: callId, name: 'look', arguments: '{}' }],
              source: { kind: 'model', provider: 'fake', model: 'fake' },
            },
            finishReason: 'tool_calls',
          },
          surfaceOp: 'append',
        },
        { type: 'tool/call', time, data: { turn, step, callId, name: 'look', arguments: '{}' } },
      ]);
      batches.push([
        {
          type: 'tool/result',
          time,
          data: {
            turn,
            step,
            message: {
              id: `r${turn}`,
              role: 'user',
              content: [
                {
                  type: 'tool-result',
                  toolCallId: callId,
                  content: [
                    { type: 'text', text: spec.tool.text },
                    ...spec.tool.media.map((p) => block(p, stored, turn)),
                  ],
                },
              ],
              source: { kind: 'tool', callId },
            },
          },
          surfaceOp: 'append',
        },
        { type: 'step/end', time, data: { turn, step } },
      ]);
      step = 2;
      batches.push([{ type: 'step/start', time, data: { turn, step } }]);
    }
    batches.push([
      {
        type: 'assistant/message',
        time,
        data: {
          turn,
          step,
          message: {
            id: `a${turn}`,
            role: 'assistant',
            content: [{ type: 'text', text: spec.reply }],
            source: { kind: 'model', provider: 'fake', model: 'fake' },
          },
          finishReason: 'stop',
        },
        surfaceOp: 'append',
      },
      { type: 'step/end', time, data: { turn, step } },
      { type: 'turn/end', time, data: { turn, reason: { kind: 'completed' } } },
    ]);
  });
  return batches;
}

type Derived = { messages: unknown; request: ChatRequestBody; tokens: number };

/** The request the policy builds for `session`, with the bytes of its stored media read by `read`. */
async function requestOf(
  session: Session,
  policy: MediaPolicy,
  read: (locator: string) => Promise<Uint8Array> | Uint8Array,
): Promise<ChatRequestBody> {
  const messages = applyMediaPolicy(session.deriveMessages(), policy, MODEL.input);
  const media = new Map<string, Uint8Array>();
  for (const medium of storedMediaOf(messages)) media.set(medium.locator, await read(medium.locator));
  return buildChatRequest({ messages, header: HEADER, model: MODEL, media });
}

async function derive(
  session: Session,
  policy: MediaPolicy,
  read: (locator: string) => Promise<Uint8Array> | Uint8Array,
  meter = createTokenMeter({ media: policy }),
): Promise<Derived> {
  return {
    messages: session.deriveMessages(),
    request: await requestOf(session, policy, read),
    tokens: meter.measure(session, HEADER).totalTokens,
  };
}

const postgres = await probePostgres();
if (!postgres.available) console.warn(`media property tests: PostgreSQL skipped: ${postgres.reason}`);
const STORES: BackendFixture[] = [sqliteFixture, jsonlFixture, ...(postgres.available ? [postgresFixture] : [])];
const opened: Array<{ name: string; url: string; store: SessionStore }> = [];
const cleanups: Array<() => void> = [];

beforeAll(async () => {
  for (const fixture of STORES) {
    const temp = tempDir(`sessionlog-media-props-${fixture.name}-`);
    cleanups.push(temp.cleanup);
    const url = fixture.url(temp.dir);
    opened.push({ name: fixture.name, url, store: await openStore(url) });
  }
});

afterAll(async () => {
  for (const { store } of opened) await store.close();
  for (const cleanup of cleanups) cleanup();
  if (postgres.available) dropPostgresTestSchemas();
});

/** Stores the pool for session `header.id` in every store; each store must describe the media identically. */
async function storePool(header: SessionHeader): Promise<StoredMedia[]> {
  let first: StoredMedia[] | undefined;
  for (const { store } of opened) {
    await store.create(header);
    const stored: StoredMedia[] = [];
    for (const { bytes, mediaType } of POOL)
      stored.push(
        await store.artifacts.putMedia({ sessionId: header.id, bytes, ...inspectMedia(bytes, mediaType, 1 << 20) }),
      );
    if (first) expect(stored).toEqual(first);
    first ??= stored;
  }
  return first!;
}

describe('media in the log: derivation, request and meter agree however the log is read', () => {
  const seen = { imagesSent: 0, standIns: 0 };
  it('from scratch, incrementally, and replayed from SQLite, JSONL and PostgreSQL (closed and opened again)', async () => {
    await fc.assert(
      fc.asyncProperty(programArb(true), policyArb, async (program, policy) => {
        const header = testHeader(`media-props-${randomUUID()}`);
        const stored = await storePool(header);
        const bytesByLocator = new Map(stored.map((m, i) => [m.locator, POOL[i]!.bytes]));
        const readPool = (locator: string) => {
          const bytes = bytesByLocator.get(locator);
          if (!bytes) throw new Error(`no medium ${locator}`);
          return bytes;
        };
        const batches = batchesOf(program, stored);

        // Incrementally: one session, one meter measuring after every batch (its per-node cache in use).
        const live = Session.create(header);
        const meter = createTokenMeter({ media: policy });
        for (const [i, batch] of batches.entries()) {
          live.appendBatch(batch, `op-${i}`);
          const tokens = meter.measure(live, HEADER).totalTokens;
          // Each prefix measures as a fresh meter measures it from scratch.
          expect(tokens).toBe(
            createTokenMeter({ media: policy }).measure(Session.fromEvents(header, live.events), HEADER).totalTokens,
          );
        }
        const incremental = await derive(live, policy, readPool, meter);

        // From scratch.
        const scratch = await derive(Session.fromEvents(header, live.events), policy, readPool);
        expect(scratch).toEqual(incremental);

        // Replayed from each store, closed and opened again first.
        for (const entry of opened) {
          let seq = 0;
          for (const [i, batch] of batches.entries()) {
            await entry.store.append(header.id, batch, { expectedSeq: seq, op: `op-${i}` });
            seq += batch.length;
          }
          await entry.store.close();
          entry.store = await openStore(entry.url);
          const loaded = await entry.store.load(header.id);
          expect(loaded.events.length).toBe(live.events.length);
          const store = entry.store;
          // The store's own validated copy of the session measures the same.
          expect(createTokenMeter({ media: policy }).measure(await store.session(header.id), HEADER).totalTokens).toBe(
            incremental.tokens,
          );
          const replayed = await derive(Session.fromEvents(header, loaded.events), policy, (locator) =>
            store.artifacts.readMedia(header.id, locator),
          );
          expect({ store: entry.name, ...replayed }).toEqual({ store: entry.name, ...incremental });
        }

        // The log holds references only; the request the bytes, where the policy sends them.
        const serialized = JSON.stringify(live.events);
        for (const { bytes } of POOL) expect(serialized).not.toContain(Buffer.from(bytes).toString('base64'));
        const wire = JSON.stringify(incremental.request);
        if (wire.includes('data:image/png;base64,')) seen.imagesSent++;
        if (stored.some((m) => m.mediaType.startsWith('image/') && wire.includes(`${m.locator}; open it again`)))
          seen.standIns++;
      }),
      RUNS,
    );
    // Not vacuous: some generated requests carried image bytes, and some a stand-in naming an image.
    expect(seen.imagesSent).toBeGreaterThan(0);
    expect(seen.standIns).toBeGreaterThan(0);
  }, 240_000);
});

/**
 * The chat request of a log without media as src/model/request.ts built it before media existed
 * (d2c2b14~1): a system message, each user message as one string of its text, each tool result
 * a `tool` message of its text, each reply its text (null beside tool calls when empty) and calls.
 */
function preMediaMessages(session: Session, system: string): unknown[] {
  const wire: unknown[] = [{ role: 'system', content: system }];
  for (const message of session.deriveMessages()) {
    if (message.role === 'assistant') {
      const calls = message.content.flatMap((b) =>
        b.type === 'tool-call'
          ? [{ id: b.id, type: 'function', function: { name: b.name, arguments: b.arguments } }]
          : [],
      );
      const text = textOf(message.content);
      wire.push({
        role: 'assistant',
        content: text === '' && calls.length > 0 ? null : text,
        ...(calls.length > 0 ? { tool_calls: calls } : {}),
      });
    } else if (message.content[0]?.type === 'tool-result') {
      const result = message.content[0];
      wire.push({ role: 'tool', tool_call_id: result.toolCallId, content: textOf(result.content) });
    } else wire.push({ role: 'user', content: textOf(message.content) });
  }
  return wire;
}

describe('a log without media', () => {
  it('derives the request it gave before media existed, and a meter count no media policy changes', async () => {
    await fc.assert(
      fc.asyncProperty(programArb(false), policyArb, async (program, policy) => {
        const header = testHeader(`media-props-text-${randomUUID()}`);
        const session = Session.create(header);
        for (const [i, batch] of batchesOf(program, []).entries()) session.appendBatch(batch, `op-${i}`);
        const derived = session.deriveMessages();
        expect(applyMediaPolicy(derived, policy, MODEL.input)).toEqual(derived);
        const request = await requestOf(session, policy, () => {
          throw new Error('a log without media reads no media');
        });
        expect(request).toEqual({
          model: MODEL.id,
          messages: preMediaMessages(session, HEADER.system!),
          stream: true,
          stream_options: { include_usage: true },
        });
        const tokens = createTokenMeter({ media: policy }).measure(session, HEADER).totalTokens;
        expect(createTokenMeter().measure(session, HEADER).totalTokens).toBe(tokens);
        expect(
          createTokenMeter({ media: resolveMediaPolicy({ recentTurns: 0 }) }).measure(session, HEADER).totalTokens,
        ).toBe(tokens);
      }),
      { numRuns: 60 },
    );
  });
});
