/**
 * The surface view (src/session/surface-view.ts): which logged events the next request carries
 * and what shadowed the others, on a written log and as properties over random valid logs.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  Session,
  deriveEventMessage,
  foldSurface,
  foldSurfaceView,
  isSurfaceType,
  type NewEvent,
  type SessionEvent,
  type ToolResultMessage,
} from '../../src/session/index.js';
import { ANY_REPLACES, buildLog, programArb, testHeader } from '../support/log-gen.js';

const T = 1_700_000_000_000;
const result = (text: string): ToolResultMessage => ({
  id: 'r1',
  role: 'user',
  content: [{ type: 'tool-result', toolCallId: 'c1', content: [{ type: 'text', text }] }],
  source: { kind: 'tool', callId: 'c1' },
});

describe('foldSurfaceView on a written log', () => {
  it('marks a pruned result as pruned, and what a summary replaced (the prune included) as summarized', () => {
    const session = Session.create(testHeader('surface-view'));
    const inputs: NewEvent[] = [
      {
        type: 'user/message',
        time: T,
        data: { id: 'u1', role: 'user', content: [{ type: 'text', text: 'go' }], source: { kind: 'user' } },
        surfaceOp: 'append',
      },
      {
        type: 'assistant/message',
        time: T,
        data: {
          turn: 1,
          step: 1,
          message: {
            id: 'a1',
            role: 'assistant',
            content: [{ type: 'tool-call', id: 'c1', name: 'dump', arguments: '{}' }],
            source: { kind: 'model', provider: 'fake', model: 'fake' },
          },
        },
        surfaceOp: 'append',
      },
      { type: 'tool/result', time: T, data: { turn: 1, step: 1, message: result('long output') }, surfaceOp: 'append' },
      {
        type: 'compaction/prune',
        time: T,
        data: { shadowedRange: { start: 2, end: 2 }, shadowedSeqs: [2], shadowedTokenCount: 9 },
      },
      {
        type: 'tool/result',
        time: T,
        data: { turn: 1, step: 1, message: result('long…') },
        surfaceOp: { op: 'replace', start: 2, end: 2 },
        sourceEventSeqs: [2],
      },
      {
        type: 'assistant/message',
        time: T,
        data: {
          turn: 1,
          step: 2,
          message: {
            id: 'a2',
            role: 'assistant',
            content: [],
            source: { kind: 'model', provider: 'fake', model: 'fake' },
          },
        },
        surfaceOp: 'append',
      },
      { type: 'compaction/start', time: T, data: { compactionId: 'cmp', turn: null, trigger: 'manual' } },
      {
        type: 'compaction/summary',
        time: T,
        data: {
          compactionId: 'cmp',
          summary: [{ type: 'text', text: 's' }],
          shadowedRange: { start: 0, end: 4 },
          shadowedSeqs: [0, 1, 4],
          shadowedTokenCount: 30,
          provider: 'fake',
          model: 'fake',
        },
      },
      {
        type: 'user/message',
        time: T,
        data: {
          id: 'checkpoint-cmp',
          role: 'user',
          content: [{ type: 'text', text: 's' }],
          source: { kind: 'plugin', plugin: 'compact', compactionId: 'cmp' },
        },
        surfaceOp: { op: 'replace', start: 0, end: 4 },
        sourceEventSeqs: [6, 7, 0, 1, 4],
      },
      { type: 'compaction/end', time: T, data: { compactionId: 'cmp', turn: null } },
    ];
    for (const input of inputs) session.append(input);
    const view = foldSurfaceView(session.events);
    expect(view.nodes).toEqual([
      { seq: 8, type: 'user/message', messageId: 'checkpoint-cmp' },
      { seq: 5, type: 'assistant/message', messageId: null },
    ]);
    expect(view.shadowed).toEqual([
      { seq: 0, by: 8, kind: 'summary', compactionId: 'cmp' },
      { seq: 1, by: 8, kind: 'summary', compactionId: 'cmp' },
      { seq: 2, by: 4, kind: 'prune', compactionId: null },
      { seq: 4, by: 8, kind: 'summary', compactionId: 'cmp' },
    ]);
    expect(view.replaceGeneration).toBe(2);
  });
});

describe('foldSurfaceView over random valid logs', () => {
  it('puts every surface event either on the surface or shadowed once, by a later replacement of the right kind', () => {
    fc.assert(
      fc.property(programArb(80), (program) => {
        const { session } = buildLog(program, ANY_REPLACES);
        const events = session.events;
        const view = foldSurfaceView(events);
        expect(view.nodes.map((n) => n.seq)).toEqual(foldSurface(events).nodes);
        for (const node of view.nodes) expect(node.messageId).toBe(deriveEventMessage(events[node.seq]!)?.id ?? null);
        const placed = [...view.nodes.map((n) => n.seq), ...view.shadowed.map((s) => s.seq)].sort((a, b) => a - b);
        expect(placed).toEqual(events.filter((e) => isSurfaceType(e.type)).map((e) => e.seq));
        for (const s of view.shadowed) {
          const by = events[s.by]!;
          expect(s.by).toBeGreaterThan(s.seq);
          expect(by.surfaceOp).not.toBe('append');
          const compactionId =
            by.type === 'user/message' ? (by as SessionEvent<'user/message'>).data.source : undefined;
          if (s.kind === 'summary') expect(compactionId).toMatchObject({ compactionId: s.compactionId });
          if (s.kind === 'prune') expect(events[s.by - 1]!.type).toBe('compaction/prune');
        }
      }),
      { numRuns: 150 },
    );
  });
});
