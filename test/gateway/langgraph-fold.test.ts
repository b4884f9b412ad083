/**
 * The LangGraph run fold and its helpers as pure functions of the log (issue 25): on random
 * valid logs the frames derived from any prefix are a prefix of those derived from the whole
 * log, with frame ids that only grow, so a rejoin after any frame id resumes exactly; a
 * coalesced catch-up carries the same text; the `values` state is the thread's derived
 * history. And the readings of `command.resume`, of metadata and of run input.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { inputMessages, threadMessages } from '../../src/gateway/langgraph/messages.js';
import { answersOf } from '../../src/gateway/langgraph/resume.js';
import {
  RunFold,
  coalesceFrames,
  interruptOf,
  isAfter,
  type RunAnchor,
  type RunFrame,
} from '../../src/gateway/langgraph/run-fold.js';
import { decodeMetadata, encodeMetadata, matchesMetadata, threadRuns } from '../../src/gateway/langgraph/threads.js';
import type { StoredEvent } from '../../src/session/index.js';
import { ANY_REPLACES, buildLog, programArb } from '../support/log-gen.js';

const sessionId = 'lg-fold-session';
const MODES = ['values', 'updates', 'messages-tuple', 'custom'] as const;

function derive(events: readonly StoredEvent[], anchor: RunAnchor): RunFrame[] {
  const fold = new RunFold({ sessionId, runId: 'run', anchor, modes: MODES });
  return events.flatMap((event) => fold.push(event));
}

/** Each message's streamed text, in order, from `messages` frames. */
function streamedText(frames: readonly RunFrame[]): Map<string, string> {
  const out = new Map<string, string>();
  for (const frame of frames) {
    if (frame.event !== 'messages') continue;
    const [chunk] = frame.data as [{ type: string; id: string; content: string }];
    if (chunk.type === 'AIMessageChunk') out.set(chunk.id, (out.get(chunk.id) ?? '') + chunk.content);
  }
  return out;
}

describe('run fold on random logs', () => {
  it('derives from every prefix a prefix of the whole, ids growing, and a rejoin after any frame resumes exactly', () => {
    fc.assert(
      fc.property(programArb(50), (program) => {
        const { session } = buildLog(program, ANY_REPLACES);
        const events = session.events;
        const runs = threadRuns(events);
        // Runs begun by a message, and runs that resumed a turn at an approval answer.
        const anchors: Array<{ anchor: RunAnchor; run?: (typeof runs)[number] }> = [
          ...runs.slice(0, 3).map((run) => ({ anchor: { kind: 'message' as const, messageId: run.runId }, run })),
          ...events
            .filter((e) => e.type === 'tool/approval')
            .slice(0, 2)
            .map((e) => ({
              anchor: { kind: 'resume' as const, turn: (e.data as { turn: number }).turn, fromSeq: e.seq },
            })),
        ];
        for (const { anchor, run } of anchors) {
          const whole = derive(events, anchor);
          const ids = whole.map((frame) => frame.id!);
          for (let i = 1; i < ids.length; i++) expect(isAfter(ids[i]!, ids[i - 1]!)).toBe(true);
          for (let k = 0; k <= events.length; k += Math.max(1, Math.floor(events.length / 10))) {
            const part = derive(events.slice(0, k), anchor);
            expect(whole.slice(0, part.length)).toEqual(part);
            // A client that saw `part` rejoins after its last id: it gets exactly the rest, and
            // coalesced, the same text per message.
            const last = part.at(-1)?.id;
            const rest = whole.filter((frame) => isAfter(frame.id!, last));
            expect(rest).toEqual(whole.slice(part.length));
            expect(streamedText(coalesceFrames(rest))).toEqual(streamedText(rest));
          }
          const values = whole.filter((frame) => frame.event === 'values');
          if (run && values.length > 0 && run.status === 'success') {
            // The last state the run reports is the thread's derived history at its end.
            const end = events.findIndex(
              (e) => e.type === 'turn/end' && (e.data as { turn: number }).turn === run.turn,
            );
            expect((values.at(-1)!.data as { messages: unknown[] }).messages).toEqual(
              threadMessages(sessionId, events.slice(0, end + 1)),
            );
          }
        }
      }),
      { numRuns: 60 },
    );
  });

  it('coalesces a catch-up: one chunk per message, only the newest values', () => {
    const chunk = (id: string, content: string, n: number): RunFrame => ({
      event: 'messages',
      id: `${n}-0`,
      data: [
        { type: 'AIMessageChunk', id, content, additional_kwargs: {}, tool_call_chunks: [] },
        { langgraph_node: 'agent' },
      ],
    });
    const frames: RunFrame[] = [
      { event: 'values', id: '1-0', data: { messages: [1] } },
      chunk('a', 'Hel', 2),
      chunk('a', 'lo', 3),
      { event: 'values', id: '4-0', data: { messages: [1, 2] } },
      chunk('b', 'x', 5),
      chunk('b', 'y', 6),
    ];
    const out = coalesceFrames(frames);
    expect(out.map((f) => [f.event, f.id])).toEqual([
      ['messages', '3-0'],
      ['values', '4-0'],
      ['messages', '6-0'],
    ]);
    expect((out[0]!.data as [{ content: string }])[0].content).toBe('Hello');
    expect((out[2]!.data as [{ content: string }])[0].content).toBe('xy');
  });
});

describe('command.resume', () => {
  const approval = interruptOf([
    { callId: 'c1', tool: 'deploy', arguments: '{"target":"prod"}', kind: 'approval' },
    { callId: 'c2', tool: 'deploy', arguments: '{"target":"eu"}', kind: 'approval' },
  ]);
  const external = interruptOf([{ callId: 'x1', tool: 'lookup', arguments: '{}', kind: 'external' }]);

  it('reads the HITL decisions, one per call in order', () => {
    expect(
      answersOf(
        {
          decisions: [
            { type: 'approve' },
            { type: 'edit', edited_action: { name: 'deploy', args: { target: 'staging' } } },
          ],
        },
        [approval],
      ),
    ).toEqual([
      { kind: 'approval', callId: 'c1', decision: 'approve' },
      { kind: 'approval', callId: 'c2', decision: 'approve', arguments: '{"target":"staging"}' },
    ]);
    expect(answersOf({ decisions: [{ type: 'reject', message: 'no' }, { type: 'approve' }] }, [approval])[0]).toEqual({
      kind: 'approval',
      callId: 'c1',
      decision: 'deny',
      reason: 'no',
    });
    expect(() => answersOf({ decisions: [{ type: 'approve' }] }, [approval])).toThrow(/2 call/);
  });

  it('reads one answer for every call, and answers keyed by interrupt id', () => {
    expect(answersOf(true, [approval]).map((a) => a.kind === 'approval' && a.decision)).toEqual(['approve', 'approve']);
    expect(answersOf('reject', [approval]).map((a) => a.kind === 'approval' && a.decision)).toEqual(['deny', 'deny']);
    expect(answersOf({ approved: false, reason: 'later' }, [approval])[1]).toMatchObject({
      decision: 'deny',
      reason: 'later',
    });
    expect(answersOf({ x1: 'the output' }, [approval, external])).toEqual([
      { kind: 'result', callId: 'x1', output: 'the output' },
    ]);
    expect(answersOf({ decisions: [{ type: 'respond', message: 'found it' }] }, [external])).toEqual([
      { kind: 'result', callId: 'x1', output: 'found it' },
    ]);
    expect(() => answersOf(true, [external])).toThrow(/422|run by the caller/);
    expect(() => answersOf({ type: 'teleport' }, [approval])).toThrow(/allowed decisions are approve, edit, reject/);
  });
});

describe('metadata and input', () => {
  it('round-trips JSON metadata through string pairs and filters by JSON equality', () => {
    const metadata = { user: 'ada', n: 3, flags: { beta: true }, list: [1, 'x'], none: null };
    const decoded = decodeMetadata(encodeMetadata(metadata));
    expect(decoded).toEqual(metadata);
    expect(matchesMetadata(decoded, { n: 3, user: 'ada' })).toBe(true);
    expect(matchesMetadata(decoded, { n: '3' })).toBe(false);
    expect(matchesMetadata(decoded, { flags: { beta: true } })).toBe(true);
  });

  it('reads human messages in every LangChain shape and refuses the rest naming the field', () => {
    const inputTexts = (input: unknown) => inputMessages(input, 1024 * 1024).map((message) => message.text);
    expect(
      inputTexts({
        messages: [
          { role: 'user', content: 'a' },
          { type: 'human', content: [{ type: 'text', text: 'b' }, 'c'] },
          { lc: 1, type: 'constructor', id: ['langchain_core', 'messages', 'HumanMessage'], kwargs: { content: 'd' } },
          'e',
        ],
      }),
    ).toEqual(['a', 'bc', 'd', 'e']);
    expect(inputTexts(null)).toEqual([]);
    expect(() => inputTexts({ messages: [{ type: 'ai', content: 'x' }] })).toThrow(/input\.messages\[0\]/);
    expect(() =>
      inputTexts({ messages: [{ role: 'user', content: [{ type: 'image_url', image_url: 'u' }] }] }),
    ).toThrow(/input\.messages\[0\]\.content\[0\]/);
    expect(() => inputTexts({ topic: 'x' })).toThrow(/input\.topic/);
  });
});
