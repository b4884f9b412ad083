/**
 * Property tests of the log, the surface fold and derived history over random valid logs
 * (dsh-spec §14 properties 1, 6, 8, 9, 10, 11; DESIGN §3 "deterministic derivation").
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  ProjectionRegistry,
  Session,
  deriveEventMessage,
  foldSurface,
  surfaceMessages,
  surfaceProjection,
  type SurfaceNodeState,
  type StoredEvent,
  type Message,
  type NewEvent,
} from '../../src/session/index.js';
import {
  ANY_REPLACES,
  BALANCED_REPLACES,
  buildLog,
  isDeepFrozen,
  nonSurfaceEventArb,
  programArb,
  withInsertedEvents,
} from '../support/log-gen.js';
import { testHeader, userMessage } from '../support/persistence-events.js';

const RUNS = { numRuns: 150 };

function derivedFromScratch(events: readonly StoredEvent[]): Message[] {
  return foldSurface(events)
    .nodes.map((seq) => deriveEventMessage(events[seq]!))
    .filter((m): m is Message => m !== null);
}

function surfaceView(events: readonly StoredEvent[]): Message[] {
  const registry = new ProjectionRegistry().register(surfaceProjection);
  return surfaceMessages(registry.foldAll(events).surface as SurfaceNodeState, (seq) => events[seq]);
}

describe('log envelope', () => {
  it('every event of a random log has seq equal to its index and nextSeq equals the event count', () => {
    fc.assert(
      fc.property(programArb(), (program) => {
        const { session, inputs } = buildLog(program, ANY_REPLACES);
        expect(session.events.map((e) => e.seq)).toEqual(inputs.map((_, i) => i));
        expect(session.nextSeq).toBe(session.events.length);
      }),
      RUNS,
    );
  });

  it('a previously returned events array never grows and is frozen', () => {
    fc.assert(
      fc.property(programArb(), (program) => {
        const { session } = buildLog(program, ANY_REPLACES);
        const before = session.events;
        const length = before.length;
        session.append({ type: 'session/run', time: 1, data: { workflowId: 'w', runId: 'r' } });
        expect(before.length).toBe(length);
        expect(Object.isFrozen(before)).toBe(true);
        expect(session.events.length).toBe(length + 1);
      }),
      { numRuns: 30 },
    );
  });
});

describe('surface fold', () => {
  it('a replace splices out the positional span, inserts its own seq there and bumps replaceGeneration by exactly one; appends never change it', () => {
    fc.assert(
      fc.property(programArb(), (program) => {
        // An independent model of the surface, advanced event by event.
        const model: number[] = [];
        let modelGeneration = 0;
        let seen = 0;
        buildLog(program, ANY_REPLACES, (session) => {
          for (; seen < session.nextSeq; seen++) {
            const event = session.eventAt(seen)!;
            const op = event.surfaceOp;
            if (op === undefined) continue;
            if (op === 'append') {
              model.push(event.seq);
            } else {
              const i = model.indexOf(op.start);
              const j = model.indexOf(op.end);
              expect(i).toBeGreaterThanOrEqual(0);
              expect(j).toBeGreaterThanOrEqual(i);
              model.splice(i, j - i + 1, event.seq);
              modelGeneration += 1;
            }
          }
          expect(session.surface.nodes).toEqual(model);
          expect(session.replaceGeneration).toBe(modelGeneration);
        });
      }),
      RUNS,
    );
  });

  it('replaceGeneration equals the number of replace events in the log and foldSurface reports each replacement', () => {
    fc.assert(
      fc.property(programArb(), (program) => {
        const { session } = buildLog(program, ANY_REPLACES);
        const replaces = session.events.filter((e) => e.surfaceOp !== undefined && e.surfaceOp !== 'append');
        const folded = foldSurface(session.events);
        expect(session.replaceGeneration).toBe(replaces.length);
        expect(folded.replaceGeneration).toBe(replaces.length);
        expect(folded.replacements.map((r) => r.seq)).toEqual(replaces.map((e) => e.seq));
        for (const r of folded.replacements) {
          expect(r.shadowedSeqs.length).toBeGreaterThan(0);
          const sources = session.eventAt(r.seq)!.sourceEventSeqs!;
          for (const s of r.shadowedSeqs) expect(sources).toContain(s);
        }
      }),
      RUNS,
    );
  });
});

describe('derived history', () => {
  it('deriveMessages equals the per-node projection of surface nodes and never holds a log-only or empty assistant message', () => {
    fc.assert(
      fc.property(programArb(), (program) => {
        const { session } = buildLog(program, ANY_REPLACES);
        const expected = session.surface.nodes
          .map((seq) => deriveEventMessage(session.eventAt(seq)!))
          .filter((m): m is Message => m !== null);
        const derived = session.deriveMessages();
        expect(derived).toEqual(expected);
        const surfaceData = new Set<unknown>();
        for (const e of session.events) {
          if (e.type === 'user/message') surfaceData.add(e.data);
          if (e.type === 'assistant/message' || e.type === 'tool/result')
            surfaceData.add((e.data as { message: unknown }).message);
        }
        for (const m of derived) {
          // Every message is the very object stored in a surface event, never one built from chunks.
          expect(surfaceData.has(m)).toBe(true);
          if (m.role === 'assistant') expect(m.content.length).toBeGreaterThan(0);
        }
      }),
      RUNS,
    );
  });

  it('the incrementally cached derivation, probed at random moments, always equals a from-scratch foldSurface projection and the surface projection view', () => {
    fc.assert(
      fc.property(programArb(80), (program) => {
        buildLog(program, ANY_REPLACES, (session, action) => {
          if (action.c % 3 !== 0) return;
          const events = session.events;
          expect(session.deriveMessages()).toEqual(derivedFromScratch(events));
          expect(session.surface.nodes).toEqual(foldSurface(events).nodes);
        });
        const { session } = buildLog(program, ANY_REPLACES);
        expect(session.deriveMessages()).toEqual(derivedFromScratch(session.events));
        expect(session.deriveMessages()).toEqual(surfaceView(session.events));
      }),
      RUNS,
    );
  });

  it('committing planned batches gives the log, surface and messages of appending one by one, also when a later plan superseded the one committed', () => {
    fc.assert(
      fc.property(programArb(), fc.array(fc.tuple(fc.integer({ min: 1, max: 6 }), fc.boolean())), (program, cuts) => {
        const { inputs, session, header } = buildLog(program, ANY_REPLACES);
        const planned = Session.create(header);
        let at = 0;
        for (let i = 0; at < inputs.length; i++) {
          const [size, supersede] = cuts[i % Math.max(1, cuts.length)] ?? [1, false];
          const batch = inputs.slice(at, at + size);
          at += batch.length;
          const events = planned.planBatch(batch);
          // Another plan (one event longer) replaces the first as "the last plan": committing the
          // first then folds and checks it event by event instead of adopting that plan's fold.
          if (supersede) planned.planBatch([...batch, userMessage(`extra-${i}`, 'planned, never written')]);
          planned.commitPlanned(events);
          expect(events.every((event) => Object.isFrozen(event) && isDeepFrozen(event))).toBe(true);
        }
        expect(planned.events).toEqual(session.events);
        expect(planned.surface).toEqual(session.surface);
        expect(planned.surface.nodes).toEqual(foldSurface(planned.events).nodes);
        expect(planned.deriveMessages()).toEqual(session.deriveMessages());
      }),
      RUNS,
    );
  });

  it('a planned batch committed after the log moved on is refused (SEQ_CONFLICT) and changes nothing', () => {
    const session = Session.create(testHeader('stale-plan'));
    session.append(userMessage('u0', 'first', 1));
    const stale = session.planBatch([userMessage('u1', 'planned, never written', 2)]);
    session.append(userMessage('u2', 'appended meanwhile', 3));
    const before = { events: session.events, surface: session.surface };
    expect(() => session.commitPlanned(stale)).toThrow(expect.objectContaining({ code: 'SEQ_CONFLICT' }));
    expect(session.events).toEqual(before.events);
    expect(session.surface).toEqual(before.surface);
    expect(session.deriveMessages().map((m) => m.id)).toEqual(['u0', 'u2']);
  });

  it('derivation is deterministic: building the same log twice gives identical events, nodes and messages', () => {
    fc.assert(
      fc.property(programArb(), (program) => {
        const one = buildLog(program, ANY_REPLACES).session;
        const two = buildLog(program, ANY_REPLACES).session;
        expect(two.events).toEqual(one.events);
        expect(two.surface).toEqual(one.surface);
        expect(two.deriveMessages()).toEqual(one.deriveMessages());
      }),
      { numRuns: 50 },
    );
  });

  it('replaying the events with Session.fromEvents (also after a JSON round trip) gives deep-equal messages, nodes and replaceGeneration', () => {
    fc.assert(
      fc.property(programArb(), (program) => {
        const { session, header } = buildLog(program, ANY_REPLACES);
        for (const events of [session.events, JSON.parse(JSON.stringify(session.events)) as unknown[]]) {
          const replay = Session.fromEvents(header, events);
          expect(replay.events).toEqual(session.events);
          expect(replay.surface.nodes).toEqual(session.surface.nodes);
          expect(replay.replaceGeneration).toBe(session.replaceGeneration);
          expect(replay.deriveMessages()).toEqual(session.deriveMessages());
        }
      }),
      RUNS,
    );
  });

  it('inserting non-surface events anywhere in a log never changes deriveMessages', () => {
    fc.assert(
      fc.property(
        programArb(),
        fc.array(fc.tuple(fc.nat(200), fc.array(nonSurfaceEventArb, { minLength: 1, maxLength: 3 })), { maxLength: 8 }),
        (program, insertions) => {
          const { inputs, session, header } = buildLog(program, ANY_REPLACES);
          const extra = new Map<number, NewEvent[]>();
          for (const [at, events] of insertions) {
            const k = at % (inputs.length + 1);
            extra.set(k, [...(extra.get(k) ?? []), ...events]);
          }
          const padded = Session.create(header);
          padded.appendBatch(withInsertedEvents(inputs, extra));
          expect(padded.nextSeq).toBe(session.nextSeq + [...extra.values()].reduce((n, list) => n + list.length, 0));
          expect(padded.deriveMessages()).toEqual(session.deriveMessages());
          expect(padded.replaceGeneration).toBe(session.replaceGeneration);
        },
      ),
      RUNS,
    );
  });

  it('stored events of an ignorable unknown type, inserted anywhere, load and do not change derivation', () => {
    fc.assert(
      fc.property(programArb(), fc.array(fc.nat(200), { maxLength: 5 }), (program, positions) => {
        const { inputs, session, header } = buildLog(program, ANY_REPLACES);
        const extra = new Map<number, NewEvent[]>();
        // A placeholder marks each position; it is swapped for the unknown type below.
        const placeholder: NewEvent = { type: 'session/end-seed', time: 5, data: {} };
        for (const p of positions) extra.set(p % (inputs.length + 1), [placeholder]);
        const shifted = withInsertedEvents(inputs, extra);
        const stored = shifted.map((input, seq) => {
          if (input === placeholder)
            return { seq, type: 'future/widget', time: 5, data: { from: 'v9' }, ignorable: true };
          return { seq, ...input };
        });
        const replay = Session.fromEvents(header, stored);
        expect(replay.deriveMessages()).toEqual(session.deriveMessages());
      }),
      { numRuns: 80 },
    );
  });

  it('derived messages and stored events are deeply frozen; mutating them throws and never alters the log or later derivations', () => {
    fc.assert(
      fc.property(programArb(), (program) => {
        const { session } = buildLog(program, BALANCED_REPLACES);
        const snapshot = JSON.stringify(session.events);
        const derived = session.deriveMessages();
        expect(isDeepFrozen(session.events)).toBe(true);
        for (const m of derived) {
          expect(isDeepFrozen(m)).toBe(true);
          expect(() => {
            (m as { id: string }).id = 'hacked';
          }).toThrow(TypeError);
          expect(() => {
            (m.content as unknown[]).push({ type: 'text', text: 'x' });
          }).toThrow(TypeError);
        }
        for (const e of session.events) {
          expect(() => {
            (e as { seq: number }).seq = -1;
          }).toThrow(TypeError);
        }
        // The returned array is the caller's: emptying it must not reach the cache.
        const expectedLength = derived.length;
        derived.length = 0;
        expect(session.deriveMessages()).toHaveLength(expectedLength);
        expect(JSON.stringify(session.events)).toBe(snapshot);
      }),
      { numRuns: 60 },
    );
  });
});

describe('surface projection checkpoints', () => {
  it('restoring the surface projection from a checkpoint at any seq plus the tail equals a full fold and deriveMessages', () => {
    fc.assert(
      fc.property(programArb(), fc.nat(1000), (program, cut) => {
        const { session } = buildLog(program, ANY_REPLACES);
        const events = session.events;
        if (events.length === 0) return;
        const registry = new ProjectionRegistry().register(surfaceProjection);
        const at = cut % events.length;
        const rows = registry.checkpoint(registry.foldAll(events.slice(0, at + 1)), at);
        // A checkpoint is stored as JSON; restore from the stored form.
        const storedRows = JSON.parse(JSON.stringify(rows)) as typeof rows;
        const floor = registry.restoreFloor(storedRows);
        expect(floor).toBe(at);
        const restored = registry.restore(storedRows, events.slice(floor), floor);
        expect(restored.asOfSeq).toBe(events.length - 1);
        expect(restored.states).toEqual(registry.foldAll(events));
        expect(surfaceMessages(restored.states.surface as SurfaceNodeState, (seq) => events[seq])).toEqual(
          session.deriveMessages(),
        );
        expect((restored.states.surface as SurfaceNodeState).nodes).toEqual(session.surfaceNodes);
      }),
      RUNS,
    );
  });

  it('a checkpoint with a different stateVersion is refused when reading from a floor above 0 and refolded from 0', () => {
    const { session } = buildLog(
      Array.from({ length: 30 }, (_, i) => ({ kind: [0, 2, 1, 4, 7, 8][i % 6]!, a: i, b: i, c: i })),
      ANY_REPLACES,
    );
    const events = session.events;
    const registry = new ProjectionRegistry().register(surfaceProjection);
    const rows = registry.checkpoint(registry.foldAll(events.slice(0, 10)), 9);
    const stale = { surface: { ...rows.surface!, ver: 99 } };
    expect(() => registry.restore(stale, events.slice(9), 9)).toThrow(/re-read from seq 0/);
    expect(registry.restoreFloor(stale)).toBe(0);
    expect(registry.restore(stale, events, 0).states).toEqual(registry.foldAll(events));
  });
});
