/**
 * Crash repair and tool pairing (dsh-spec §8.5, §3.3; §14 properties 13–15). The oracle for
 * the expected closers is the log generator's own model of the open turn, not repair.ts.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  Session,
  TOOL_NOT_STARTED,
  TOOL_OUTCOME_UNKNOWN,
  interruptedTurnClosers,
  type StoredEvent,
  type Message,
  type SessionEvent,
} from '../../src/session/index.js';
import { ANY_REPLACES, BALANCED_REPLACES, buildLog, programArb, testHeader } from '../support/log-gen.js';

/** Asserts every tool-result block follows a tool-call block with its id, and every call is answered. */
function expectPaired(messages: readonly Message[]): void {
  const called = new Set<string>();
  const answered = new Set<string>();
  for (const message of messages) {
    for (const block of message.content) {
      if (block.type === 'tool-call') called.add(block.id);
      if (block.type === 'tool-result') {
        expect(called.has(block.toolCallId), `tool result ${block.toolCallId} has no earlier tool call`).toBe(true);
        answered.add(block.toolCallId);
      }
    }
  }
  expect([...called].filter((id) => !answered.has(id))).toEqual([]);
}

describe('interruptedTurnClosers', () => {
  it('closes an open turn with one error result per unanswered call in call order, then step/end iff a step is open, then turn/end interrupted', () => {
    fc.assert(
      fc.property(programArb(), (program) => {
        const { session, open } = buildLog(program, ANY_REPLACES);
        const original = session.events;
        const closers = interruptedTurnClosers(original);
        if (open.openTurn === undefined) {
          expect(closers).toEqual([]);
          return;
        }
        const last = original.at(-1)!;
        const expectedTypes = [
          ...open.pending.map(() => 'tool/result'),
          ...(open.openStep !== undefined ? ['step/end'] : []),
          'turn/end',
        ];
        expect(closers.map((c) => c.type)).toEqual(expectedTypes);
        for (const closer of closers) expect(closer.time).toBe(last.time);

        const appended = session.appendBatch(closers);
        // Original events unchanged (same frozen objects), closers contiguous after them.
        expect(session.events.slice(0, original.length)).toEqual(original);
        original.forEach((event, i) => expect(session.events[i]).toBe(event));
        expect(appended.map((e) => e.seq)).toEqual(closers.map((_, i) => original.length + i));

        open.pending.forEach((call, i) => {
          const result = appended[i] as SessionEvent<'tool/result'>;
          expect(result.surfaceOp).toBe('append');
          expect(result.data.turn).toBe(call.turn);
          expect(result.data.step).toBe(call.step);
          expect(result.data.message.source).toEqual({ kind: 'tool', callId: call.callId });
          expect(result.data.message.id).toBe(`interrupted-tool-result-${call.callId}-${result.seq}`);
          const block = result.data.message.content[0];
          expect(block.toolCallId).toBe(call.callId);
          expect(block.isError).toBe(true);
          if (call.callSeq !== undefined) {
            expect(result.data.error).toEqual({ name: 'ToolOutcomeUnknownError', code: TOOL_OUTCOME_UNKNOWN });
            expect(result.sourceEventSeqs).toEqual([call.callSeq]);
          } else {
            expect(result.data.error).toEqual({ name: 'ToolNotStartedError', code: TOOL_NOT_STARTED });
            expect(result.sourceEventSeqs).toBeUndefined();
          }
        });
        if (open.openStep !== undefined) {
          expect(appended.at(-2)!.data).toEqual({ turn: open.openTurn, step: open.openStep });
        }
        expect(appended.at(-1)!.data).toEqual({ turn: open.openTurn, reason: { kind: 'interrupted' } });
      }),
      { numRuns: 200 },
    );
  });

  it('a repaired log, and any log whose last turn is closed, gets no further closers', () => {
    fc.assert(
      fc.property(programArb(), (program) => {
        const { session } = buildLog(program, ANY_REPLACES);
        session.appendBatch(interruptedTurnClosers(session.events));
        expect(interruptedTurnClosers(session.events)).toEqual([]);
        // Replaying the repaired log from storage form needs no repair either.
        const replay = Session.fromEvents(session.header, JSON.parse(JSON.stringify(session.events)) as unknown[]);
        expect(interruptedTurnClosers(replay.events)).toEqual([]);
      }),
      { numRuns: 150 },
    );
  });

  it('after crash repair every derived tool result follows its tool call and every tool call is answered (balanced replacements)', () => {
    fc.assert(
      fc.property(programArb(80), (program) => {
        const { session } = buildLog(program, BALANCED_REPLACES);
        session.appendBatch(interruptedTurnClosers(session.events));
        expectPaired(session.deriveMessages());
      }),
      { numRuns: 200 },
    );
  });

  it('explains the two interruption kinds to the model: recorded calls must not be retried blindly, unrecorded ones may be retried', () => {
    const session = Session.create(testHeader());
    session.append({ type: 'turn/start', time: 10, data: { turn: 1 } });
    session.append({ type: 'step/start', time: 11, data: { turn: 1, step: 1 } });
    session.append({
      type: 'assistant/message',
      time: 12,
      data: {
        turn: 1,
        step: 1,
        message: {
          id: 'a1',
          role: 'assistant',
          content: [
            { type: 'tool-call', id: 'recorded', name: 'write', arguments: '{}' },
            { type: 'tool-call', id: 'unrecorded', name: 'write', arguments: '{}' },
          ],
          source: { kind: 'model', provider: 'p', model: 'm' },
        },
      },
      surfaceOp: 'append',
    });
    session.append({
      type: 'tool/call',
      time: 9,
      data: { turn: 1, step: 1, callId: 'recorded', name: 'write', arguments: '{}' },
    });
    const [recorded, unrecorded, stepEnd, turnEnd] = session.appendBatch(
      interruptedTurnClosers(session.events),
    ) as StoredEvent[];
    const textOf = (e: StoredEvent | undefined): string =>
      JSON.stringify((e as SessionEvent<'tool/result'>).data.message.content[0].content);
    expect(textOf(recorded)).toMatch(/outcome is unknown/);
    expect(textOf(recorded)).toMatch(/[Nn]ever retry it blindly/);
    expect(textOf(unrecorded)).toMatch(/before it was recorded as started/);
    expect(textOf(unrecorded)).toMatch(/may be retried/);
    // The clock of the last real event (9, earlier than 12) is reused, not the latest time.
    expect([recorded, unrecorded, stepEnd, turnEnd].map((e) => e!.time)).toEqual([9, 9, 9, 9]);
    expect(stepEnd!.type).toBe('step/end');
    expect(turnEnd!.type).toBe('turn/end');
  });

  it('does not answer calls of an earlier, closed step again', () => {
    const session = Session.create(testHeader());
    session.append({ type: 'turn/start', time: 1, data: { turn: 1 } });
    session.append({ type: 'step/start', time: 1, data: { turn: 1, step: 1 } });
    session.append({
      type: 'assistant/message',
      time: 1,
      data: {
        turn: 1,
        step: 1,
        message: {
          id: 'a1',
          role: 'assistant',
          content: [{ type: 'tool-call', id: 'c1', name: 'n', arguments: '{}' }],
          source: { kind: 'model', provider: 'p', model: 'm' },
        },
      },
      surfaceOp: 'append',
    });
    session.append({
      type: 'tool/result',
      time: 1,
      data: {
        turn: 1,
        step: 1,
        message: {
          id: 'r1',
          role: 'user',
          content: [{ type: 'tool-result', toolCallId: 'c1', content: [] }],
          source: { kind: 'tool', callId: 'c1' },
        },
      },
      surfaceOp: 'append',
    });
    session.append({ type: 'step/end', time: 1, data: { turn: 1, step: 1 } });
    session.append({ type: 'step/start', time: 1, data: { turn: 1, step: 2 } });
    expect(interruptedTurnClosers(session.events).map((c) => c.type)).toEqual(['step/end', 'turn/end']);
  });
});
