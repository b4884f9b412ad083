/**
 * The OpenAI response fold as a pure function of the log: on random valid logs the events
 * derived from any prefix of the log are a prefix of those derived from the whole log, with
 * sequence numbers counting from 0 (so a rejoin at any point resumes exactly); and a retried
 * model call's re-streamed reply is sent once, or replaces the item streamed so far when it
 * says something else.
 */
import fc from 'fast-check';
import type { ResponseStreamEvent } from 'openai/resources/responses/responses';
import { describe, expect, it } from 'vitest';
import { encodeResponseId, type ResponseAnchor } from '../../src/gateway/openai/ids.js';
import { itemTag, messageItemId } from '../../src/gateway/turn-stream/ids.js';
import { conversationItems } from '../../src/gateway/openai/items.js';
import { ResponseTracker } from '../../src/gateway/openai/response-fold.js';
import { stepOps } from '../../src/engine/ops.js';
import { isKnownEvent, type StoredEvent } from '../../src/session/index.js';
import { ANY_REPLACES, buildLog, programArb, testHeader } from '../support/log-gen.js';

const sessionId = 'fold-session';
const TAG = itemTag(sessionId);

function tracker(anchor: ResponseAnchor): ResponseTracker {
  return new ResponseTracker({
    responseId: encodeResponseId({ sessionId, anchor }),
    sessionId,
    anchor,
    header: testHeader(sessionId),
    defaults: { model: 'fake' },
  });
}

function derive(events: readonly StoredEvent[], anchor: ResponseAnchor): ResponseStreamEvent[] {
  const fold = tracker(anchor);
  return events.flatMap((event) => fold.push(event));
}

describe('response fold on random logs', () => {
  it('derives from every prefix of the log a prefix of the whole derivation, numbered from 0', () => {
    fc.assert(
      fc.property(programArb(50), (program) => {
        const { session } = buildLog(program, ANY_REPLACES);
        const events = session.events;
        const anchors = events
          .filter((e) => e.type === 'user/message' && e.surfaceOp === 'append')
          .map((e) => (e.data as { id: string }).id);
        for (const messageId of anchors.slice(0, 3)) {
          const anchor: ResponseAnchor = { kind: 'message', messageId };
          const whole = derive(events, anchor);
          expect(whole.map((e) => e.sequence_number)).toEqual(whole.map((_, i) => i));
          for (let k = 0; k <= events.length; k += Math.max(1, Math.floor(events.length / 12))) {
            expect(whole.slice(0, derive(events.slice(0, k), anchor).length)).toEqual(
              derive(events.slice(0, k), anchor),
            );
          }
          const terminal = whole.filter(
            (e) => e.type === 'response.completed' || e.type === 'response.failed' || e.type === 'response.incomplete',
          );
          expect(terminal.length).toBeLessThanOrEqual(1);
          if (terminal.length === 1) expect(whole.at(-1)).toBe(terminal[0]);
        }
        // The conversation's items are derived without error from any such log.
        conversationItems(sessionId, events);
      }),
      { numRuns: 60 },
    );
  });
});

// ---- hand-written logs ------------------------------------------------------------------

const RUN = 'run-1';
const KEY = { runId: RUN, turn: 1, step: 1, pass: 0 };

/** A log of one turn: the user's message, the chunks of each attempt (by attempt number), then the logged reply. */
function turnLog(attempts: Array<[number, string[]]>, reply: string, held: string[] = []): StoredEvent[] {
  const events: Array<Omit<StoredEvent, 'seq'>> = [
    { type: 'turn/start', time: 1000, data: { turn: 1 }, op: stepOps.start(KEY) },
    { type: 'step/start', time: 1000, data: { turn: 1, step: 1 }, op: stepOps.start(KEY) },
    {
      type: 'user/message',
      time: 1000,
      data: { id: 'm1', role: 'user', content: [{ type: 'text', text: 'hi' }], source: { kind: 'user' } },
      surfaceOp: 'append',
      op: stepOps.start(KEY),
    },
  ];
  for (const [attempt, texts] of attempts) {
    texts.forEach((text, n) =>
      events.push({
        type: 'assistant/chunk',
        time: 1001,
        data: { turn: 1, step: 1, chunk: { kind: 'text-delta', text } },
        op: stepOps.chunks(KEY, attempt, n),
      }),
    );
  }
  // The call's last chunks, held for the reply's own batch (src/engine/ops/model-step.ts).
  for (const text of held)
    events.push({
      type: 'assistant/chunk',
      time: 1002,
      data: { turn: 1, step: 1, chunk: { kind: 'text-delta', text } },
      op: stepOps.reply(KEY),
    });
  const message = {
    id: 'a1',
    role: 'assistant',
    content: [{ type: 'text', text: reply }],
    source: { kind: 'model', provider: 'fake', model: 'fake' },
  };
  events.push({
    type: 'assistant/message',
    time: 1002,
    data: { turn: 1, step: 1, message, finishReason: 'stop' },
    surfaceOp: 'append',
    op: stepOps.reply(KEY),
  });
  events.push({ type: 'step/end', time: 1002, data: { turn: 1, step: 1 }, op: stepOps.reply(KEY) });
  events.push({
    type: 'turn/end',
    time: 1002,
    data: { turn: 1, reason: { kind: 'completed' } },
    op: stepOps.reply(KEY),
  });
  return events.map((e, seq) => ({ ...e, seq }) as StoredEvent);
}

function deltas(events: readonly ResponseStreamEvent[]): Array<[string, string]> {
  return events.filter((e) => e.type === 'response.output_text.delta').map((e) => [e.item_id, e.delta]);
}

describe('a retried model call', () => {
  const anchor: ResponseAnchor = { kind: 'message', messageId: 'm1' };

  it('that streams the same reply again sends only what goes beyond what was sent', () => {
    const log = turnLog(
      [
        [1, ['Hello ', 'wor']],
        [2, ['Hel', 'lo world', '!']],
      ],
      'Hello world!',
    );
    expect(log.every(isKnownEvent)).toBe(true);
    const fold = tracker(anchor);
    const events = log.flatMap((e) => fold.push(e));
    expect(deltas(events)).toEqual([
      [messageItemId(TAG, 1, 1, 0), 'Hello '],
      [messageItemId(TAG, 1, 1, 0), 'wor'],
      [messageItemId(TAG, 1, 1, 0), 'ld'],
      [messageItemId(TAG, 1, 1, 0), '!'],
    ]);
    const response = fold.snapshot();
    expect(response.status).toBe('completed');
    expect(response.output.map((i) => i.id)).toEqual([messageItemId(TAG, 1, 1, 0)]);
    expect(response.output_text).toBe('Hello world!');
  });

  it('that says something else closes the streamed item as incomplete and streams a new one; only the logged reply is output', () => {
    const log = turnLog(
      [
        [1, ['Hello ', 'wor']],
        [2, ['Good', 'bye']],
      ],
      'Goodbye',
    );
    const fold = tracker(anchor);
    const events = log.flatMap((e) => fold.push(e));
    expect(deltas(events)).toEqual([
      [messageItemId(TAG, 1, 1, 0), 'Hello '],
      [messageItemId(TAG, 1, 1, 0), 'wor'],
      [messageItemId(TAG, 1, 1, 1), 'Good'],
      [messageItemId(TAG, 1, 1, 1), 'bye'],
    ]);
    const abandoned = events.find(
      (e) => e.type === 'response.output_item.done' && e.item.id === messageItemId(TAG, 1, 1, 0),
    );
    expect(abandoned).toMatchObject({ item: { status: 'incomplete' } });
    const response = fold.snapshot();
    expect(response.output.map((i) => i.id)).toEqual([messageItemId(TAG, 1, 1, 1)]);
    expect(response.output_text).toBe('Goodbye');
    // The conversation's assistant item is the response's output item.
    expect(conversationItems(sessionId, log).map((i) => i.id)).toEqual(['m1', messageItemId(TAG, 1, 1, 1)]);
  });

  it('whose last chunks were written in the reply batch streams them once, after what the chunk batches sent', () => {
    const fold = tracker(anchor);
    const events = turnLog([[1, ['Hello ', 'wor']]], 'Hello world!', ['ld', '!']).flatMap((e) => fold.push(e));
    expect(deltas(events)).toEqual([
      [messageItemId(TAG, 1, 1, 0), 'Hello '],
      [messageItemId(TAG, 1, 1, 0), 'wor'],
      [messageItemId(TAG, 1, 1, 0), 'ld!'],
    ]);
    expect(fold.snapshot().output_text).toBe('Hello world!');
  });

  it('whose retry held its whole different reply for the reply batch replaces the item streamed by the failed call', () => {
    const fold = tracker(anchor);
    const events = turnLog([[1, ['Hello ', 'wor']]], 'Goodbye', ['Good', 'bye']).flatMap((e) => fold.push(e));
    expect(deltas(events)).toEqual([
      [messageItemId(TAG, 1, 1, 0), 'Hello '],
      [messageItemId(TAG, 1, 1, 0), 'wor'],
      [messageItemId(TAG, 1, 1, 1), 'Goodbye'],
    ]);
    expect(fold.snapshot().output.map((i) => i.id)).toEqual([messageItemId(TAG, 1, 1, 1)]);
  });

  it('whose reply was logged without chunks still yields the item events and the text as one delta', () => {
    const fold = tracker(anchor);
    const events = turnLog([], 'All at once').flatMap((e) => fold.push(e));
    expect(events.map((e) => e.type)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.delta',
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.completed',
    ]);
    expect(fold.snapshot().output_text).toBe('All at once');
  });
});
