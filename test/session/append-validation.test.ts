/**
 * Rejections at the append boundary (dsh-spec §14 properties 2–5 and 7, §1.3 lossless JSON,
 * §2.3 surface rules) and at the stored-event boundary (`Session.fromEvents`). Every rejection
 * must leave the log, the surface nodes and replaceGeneration exactly as they were.
 */
import fc from 'fast-check';
import vm from 'node:vm';
import { describe, expect, it } from 'vitest';
import {
  NonJsonValueError,
  SESSION_FORMAT_VERSION,
  Session,
  isSessionlogError,
  toFrozenLosslessJson,
  toLosslessJson,
  type StoredEvent,
  type NewEvent,
  type SessionEvent,
  type ToolResultMessage,
} from '../../src/session/index.js';
import { ANY_REPLACES, buildLog, isDeepFrozen, programArb, testHeader } from '../support/log-gen.js';

type State = { events: readonly StoredEvent[]; nodes: readonly number[]; generation: number; derived: string };

function stateOf(session: Session): State {
  return {
    events: session.events,
    nodes: session.surface.nodes,
    generation: session.replaceGeneration,
    derived: JSON.stringify(session.deriveMessages()),
  };
}

/** Runs `attempt`, expects it to throw, and expects the session to be untouched. */
function expectRejectedUnchanged(session: Session, attempt: () => unknown, check: (error: unknown) => void): void {
  const before = stateOf(session);
  let thrown: unknown;
  try {
    attempt();
  } catch (error) {
    thrown = error;
  }
  expect(thrown, 'append should have been rejected').toBeDefined();
  check(thrown);
  const after = stateOf(session);
  // Same frozen snapshot object: the log did not change at all.
  expect(after.events).toBe(before.events);
  expect(after.nodes).toEqual(before.nodes);
  expect(after.generation).toBe(before.generation);
  expect(after.derived).toBe(before.derived);
}

const isViolation = (error: unknown): void => expect(isSessionlogError(error, 'SURFACE_VIOLATION')).toBe(true);

const user = (id: string, extra: Partial<NewEvent> = {}): NewEvent =>
  ({
    type: 'user/message',
    time: 1,
    data: { id, role: 'user', content: [{ type: 'text', text: id }], source: { kind: 'user' } },
    surfaceOp: 'append',
    ...extra,
  }) as NewEvent;

class Point {
  constructor(
    readonly x: number,
    readonly y: number,
  ) {}
}

/** Factories of values that do not round-trip through JSON, each with its name. */
const nonJsonValues: Array<[string, () => unknown]> = [
  ['BigInt', () => 10n],
  ['undefined property', () => ({ a: undefined })],
  ['-0', () => -0],
  ['NaN', () => NaN],
  ['Infinity', () => Infinity],
  ['-Infinity', () => -Infinity],
  [
    'cycle',
    () => {
      const o: Record<string, unknown> = { a: 1 };
      o.self = o;
      return o;
    },
  ],
  ['sparse array', () => [1, , 3]], // eslint-disable-line no-sparse-arrays
  [
    'array with an extra property',
    () => {
      const arr: unknown[] & { extra?: number } = [1, 2];
      arr.extra = 3;
      return arr;
    },
  ],
  ['Map', () => new Map([['a', 1]])],
  ['Set', () => new Set([1])],
  ['Date', () => new Date(0)],
  ['class instance', () => new Point(1, 2)],
  ['function', () => () => 1],
  ['symbol', () => Symbol('s')],
  ['symbol key', () => ({ [Symbol('k')]: 1 })],
  ['array with a symbol key', () => Object.assign([1], { [Symbol('k')]: 2 })],
  ['array with a non-enumerable extra property', () => Object.defineProperty([1], 'hidden', { value: 2 })],
  ['non-enumerable property', () => Object.defineProperty({}, 'hidden', { value: 1, enumerable: false })],
  ['array with undefined element', () => [1, undefined]],
];

/** Where in an event a bad value is planted. */
const placements: Array<[string, (bad: unknown) => NewEvent]> = [
  [
    'user message content block',
    (bad) =>
      ({
        type: 'user/message',
        time: 1,
        data: { id: 'ux', role: 'user', content: [{ type: 'text', text: 'x', extra: bad }], source: { kind: 'user' } },
        surfaceOp: 'append',
      }) as unknown as NewEvent,
  ],
  [
    'session/run payload',
    (bad) => ({ type: 'session/run', time: 1, data: { workflowId: 'w', runId: 'r', extra: bad } }) as NewEvent,
  ],
  [
    'tool/result meta',
    (bad) =>
      ({
        type: 'tool/result',
        time: 1,
        data: {
          turn: 1,
          step: 1,
          message: {
            id: 'rx',
            role: 'user',
            content: [{ type: 'tool-result', toolCallId: 'cx', content: [] }],
            source: { kind: 'tool', callId: 'cx' },
          },
          meta: { nested: [bad] },
        },
        surfaceOp: 'append',
      }) as NewEvent,
  ],
];

describe('lossless JSON at append', () => {
  it('appending non-lossless-JSON data anywhere in a payload throws NON_JSON_VALUE and leaves events, nodes and generation unchanged', () => {
    fc.assert(
      fc.property(
        programArb(40),
        fc.constantFrom(...nonJsonValues),
        fc.constantFrom(...placements),
        fc.boolean(),
        (program, [, makeBad], [, place], asBatchTail) => {
          const { session } = buildLog(program, ANY_REPLACES);
          const bad = place(makeBad());
          expectRejectedUnchanged(
            session,
            () => (asBatchTail ? session.appendBatch([user('ok-1'), user('ok-2'), bad]) : session.append(bad)),
            (error) => {
              expect(error).toBeInstanceOf(NonJsonValueError);
              expect(error).toBeInstanceOf(TypeError);
              expect((error as NonJsonValueError).code).toBe('NON_JSON_VALUE');
            },
          );
        },
      ),
      { numRuns: 200 },
    );
  });

  it.each(nonJsonValues)('toLosslessJson rejects %s and names the path', (_name, makeBad) => {
    expect(() => toLosslessJson({ outer: { inner: makeBad() } })).toThrow(/\$\.outer/);
  });

  it('accepts null-prototype objects, plain objects from another realm, shared acyclic sub-objects and a "__proto__" own key, returning a detached copy', () => {
    const nullProto = Object.assign(Object.create(null) as Record<string, unknown>, { a: 1 });
    const foreign = vm.runInNewContext('({ b: [1, { c: "x" }] })') as unknown;
    const shared = { s: 1 };
    const withProtoKey = JSON.parse('{"__proto__": {"polluted": true}}') as unknown;
    const input = { nullProto, foreign, pair: [shared, shared], withProtoKey };
    const copy = toLosslessJson(input) as Record<string, unknown>;
    expect(JSON.stringify(copy)).toBe(JSON.stringify(input));
    expect(copy.nullProto).not.toBe(nullProto);
    expect(Object.prototype.hasOwnProperty.call(copy.withProtoKey, '__proto__')).toBe(true);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it.each(nonJsonValues)(
    'toFrozenLosslessJson (the append path) rejects %s with the same error as toLosslessJson',
    (_name, makeBad) => {
      const bad = { outer: { inner: makeBad() } };
      let expected: unknown;
      try {
        toLosslessJson(bad, 'x.data');
      } catch (error) {
        expected = error;
      }
      expect(expected).toBeInstanceOf(NonJsonValueError);
      expect(() => toFrozenLosslessJson(bad, 'x.data')).toThrow((expected as Error).message);
    },
  );

  it('toFrozenLosslessJson returns an equal, detached, deep-frozen copy of any JSON value, also of values the fast copy hands over', () => {
    fc.assert(
      // Through JSON once: fc.jsonValue() may hold -0, which is not lossless JSON.
      fc.property(
        fc.jsonValue().map((value) => JSON.parse(JSON.stringify(value)) as unknown),
        (value) => {
          const copy = toFrozenLosslessJson(value);
          expect(copy).toEqual(value);
          expect(isDeepFrozen(copy)).toBe(true);
          if (value !== null && typeof value === 'object') expect(copy).not.toBe(value);
        },
      ),
    );
    const nullProto = Object.assign(Object.create(null) as Record<string, unknown>, { a: 1 });
    const foreign = vm.runInNewContext('({ b: [1, { c: "x" }] })') as unknown;
    const withProtoKey = JSON.parse('{"__proto__": {"polluted": true}}') as unknown;
    let deep: unknown = 'leaf';
    for (let i = 0; i < 500; i++) deep = [deep];
    for (const value of [{ nullProto, foreign, withProtoKey }, deep]) {
      const copy = toFrozenLosslessJson(value);
      expect(JSON.stringify(copy)).toBe(JSON.stringify(value));
      expect(isDeepFrozen(copy)).toBe(true);
    }
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('reads a stateful getter once, so the stored value is the validated one', () => {
    let reads = 0;
    const data = {
      id: 'g1',
      role: 'user',
      source: { kind: 'user' },
      get content() {
        reads += 1;
        return reads === 1 ? [{ type: 'text', text: 'first' }] : [{ type: 'text', text: 'second' }];
      },
    };
    const session = Session.create(testHeader());
    const event = session.append({ type: 'user/message', time: 1, data: data as never, surfaceOp: 'append' });
    expect(reads).toBe(1);
    expect(session.deriveMessages()[0]!.content).toEqual([{ type: 'text', text: 'first' }]);
    expect(Object.getOwnPropertyDescriptor(event.data, 'content')!.get).toBeUndefined();
  });

  it('stores a detached, frozen copy: mutating the caller object after append does not change the log', () => {
    const session = Session.create(testHeader());
    const input = user('m1');
    session.append(input);
    (input.data as { content: Array<{ text: string }> }).content[0]!.text = 'mutated';
    expect(session.deriveMessages()[0]!.content).toEqual([{ type: 'text', text: 'm1' }]);
  });
});

describe('surfaceOp and sourceEventSeqs rules', () => {
  const surfaceTypes = ['user/message', 'assistant/message', 'tool/result'] as const;

  function surfaceEvent(type: (typeof surfaceTypes)[number], extra: Partial<NewEvent>): NewEvent {
    if (type === 'user/message') return user('s', extra);
    if (type === 'assistant/message') {
      return {
        type,
        time: 1,
        data: {
          turn: 1,
          step: 1,
          message: {
            id: 'a',
            role: 'assistant',
            content: [{ type: 'text', text: 'x' }],
            source: { kind: 'model', provider: 'p', model: 'm' },
          },
        },
        surfaceOp: 'append',
        ...extra,
      } as NewEvent;
    }
    return {
      type,
      time: 1,
      data: {
        turn: 1,
        step: 1,
        message: {
          id: 'r',
          role: 'user',
          content: [{ type: 'tool-result', toolCallId: 'c', content: [] }],
          source: { kind: 'tool', callId: 'c' },
        },
      },
      surfaceOp: 'append',
      ...extra,
    } as NewEvent;
  }

  function withoutSurfaceOp(event: NewEvent): NewEvent {
    const copy = { ...event } as Partial<NewEvent>;
    delete copy.surfaceOp;
    return copy as NewEvent;
  }

  it.each(surfaceTypes)('appending %s without surfaceOp is rejected without side effects', (type) => {
    const program = Array.from({ length: 25 }, (_, i) => ({ kind: (i * 5) % 12, a: i, b: 2 * i, c: 3 * i }));
    const { session } = buildLog(program, ANY_REPLACES);
    expectRejectedUnchanged(session, () => session.append(withoutSurfaceOp(surfaceEvent(type, {}))), isViolation);
  });

  it('appending a log-only event with surfaceOp or sourceEventSeqs is rejected without side effects', () => {
    fc.assert(
      fc.property(
        programArb(30),
        fc.constantFrom<NewEvent>(
          { type: 'turn/start', time: 1, data: { turn: 99 } },
          { type: 'assistant/chunk', time: 1, data: { turn: 1, step: 1, chunk: { kind: 'text-delta', text: 'x' } } },
          { type: 'tool/call', time: 1, data: { turn: 1, step: 1, callId: 'c', name: 'n', arguments: '{}' } },
          { type: 'session/end-seed', time: 1, data: {} },
        ),
        fc.constantFrom<Partial<NewEvent>>(
          { surfaceOp: 'append' },
          { sourceEventSeqs: [0] },
          { surfaceOp: { op: 'replace', start: 0, end: 0 } },
        ),
        (program, logOnly, extra) => {
          const { session } = buildLog(program, ANY_REPLACES);
          expectRejectedUnchanged(session, () => session.append({ ...logOnly, ...extra } as NewEvent), isViolation);
        },
      ),
      { numRuns: 100 },
    );
  });

  it('sourceEventSeqs with a duplicate, a value >= own seq, a negative or fractional value, or [] on a non-assistant event is rejected', () => {
    const base = Session.create(testHeader());
    for (let i = 0; i < 4; i++) base.append(user(`u${i}`));
    // Next seq is 4.
    const bad: Array<[string, NewEvent]> = [
      ['duplicate', user('x', { sourceEventSeqs: [1, 1] })],
      ['own seq', user('x', { sourceEventSeqs: [4] })],
      ['future seq', user('x', { sourceEventSeqs: [9] })],
      ['negative', user('x', { sourceEventSeqs: [-1] })],
      ['fractional', user('x', { sourceEventSeqs: [1.5] })],
      ['string', user('x', { sourceEventSeqs: ['1' as unknown as number] })],
      ['empty on user/message', user('x', { sourceEventSeqs: [] })],
      ['empty on tool/result', surfaceEvent('tool/result', { sourceEventSeqs: [] })],
    ];
    for (const [, event] of bad) expectRejectedUnchanged(base, () => base.append(event), isViolation);
    const accepted = base.append(surfaceEvent('assistant/message', { sourceEventSeqs: [] }));
    expect(accepted.sourceEventSeqs).toEqual([]);
    expect(base.append(user('y', { sourceEventSeqs: [0, 3, 4] })).seq).toBe(5);
  });

  it('a replace naming a seq that is not a current node, or whose start is positioned after its end, or whose sources omit a shadowed node, is rejected', () => {
    fc.assert(
      fc.property(programArb(), fc.nat(1000), fc.nat(1000), (program, x, y) => {
        const { session } = buildLog(program, ANY_REPLACES);
        const nodes = [...session.surfaceNodes];
        const nonNodes = session.events.map((e) => e.seq).filter((s) => !nodes.includes(s));
        const replaceWith = (start: number, end: number, sources: number[]): NewEvent =>
          user('bad-replace', { surfaceOp: { op: 'replace', start, end }, sourceEventSeqs: sources });
        if (nonNodes.length > 0 && nodes.length > 0) {
          const ghost = nonNodes[x % nonNodes.length]!;
          const real = nodes[y % nodes.length]!;
          expectRejectedUnchanged(session, () => session.append(replaceWith(ghost, real, [ghost, real])), isViolation);
          expectRejectedUnchanged(session, () => session.append(replaceWith(real, ghost, [ghost, real])), isViolation);
        }
        expectRejectedUnchanged(
          session,
          () => session.append(replaceWith(session.nextSeq + 3, session.nextSeq + 3, [0])),
          isViolation,
        );
        if (nodes.length >= 2) {
          const i = x % (nodes.length - 1);
          const j = i + 1 + (y % (nodes.length - 1 - i));
          const span = nodes.slice(i, j + 1);
          // Positioned backwards.
          expectRejectedUnchanged(session, () => session.append(replaceWith(nodes[j]!, nodes[i]!, span)), isViolation);
          // Sources missing one shadowed node.
          const missing = span.filter((_, k) => k !== x % span.length);
          expectRejectedUnchanged(
            session,
            () => session.append(replaceWith(nodes[i]!, nodes[j]!, missing)),
            isViolation,
          );
          // Without sources at all.
          expectRejectedUnchanged(
            session,
            () =>
              session.append(user('no-sources', { surfaceOp: { op: 'replace', start: nodes[i]!, end: nodes[j]! } })),
            isViolation,
          );
        }
      }),
      { numRuns: 150 },
    );
  });

  it('a malformed replace object (extra key, missing end, negative seq, unknown op) is rejected', () => {
    const session = Session.create(testHeader());
    session.append(user('u0'));
    for (const op of [
      { op: 'replace', start: 0, end: 0, extra: 1 },
      { op: 'replace', start: 0 },
      { op: 'replace', start: -1, end: 0 },
      { op: 'splice', start: 0, end: 0 },
      'prepend',
    ]) {
      expectRejectedUnchanged(
        session,
        () => session.append(user('r', { surfaceOp: op as never, sourceEventSeqs: [0] })),
        isViolation,
      );
    }
  });

  it('a numerically backwards but positionally forward replace (start seq > end seq) is accepted', () => {
    const session = Session.create(testHeader());
    session.append(user('u0'));
    session.append(user('u1'));
    session.append(user('u2'));
    // Replace u0 by a checkpoint at seq 3: surface [3, 1, 2].
    session.append(user('c1', { surfaceOp: { op: 'replace', start: 0, end: 0 }, sourceEventSeqs: [0] }));
    session.append(user('c2', { surfaceOp: { op: 'replace', start: 3, end: 1 }, sourceEventSeqs: [3, 1] }));
    expect(session.surface.nodes).toEqual([4, 2]);
    expect(session.replaceGeneration).toBe(2);
  });
});

describe('tool/result rewrites', () => {
  function toolSession(): { session: Session; resultSeqs: number[] } {
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
          content: [
            { type: 'tool-call', id: 'c1', name: 'echo', arguments: '{}' },
            { type: 'tool-call', id: 'c2', name: 'echo', arguments: '{}' },
          ],
          source: { kind: 'model', provider: 'p', model: 'm' },
        },
      },
      surfaceOp: 'append',
    });
    const resultSeqs: number[] = [];
    for (const callId of ['c1', 'c2']) {
      const call = session.append({
        type: 'tool/call',
        time: 1,
        data: { turn: 1, step: 1, callId, name: 'echo', arguments: '{}' },
      });
      const message: ToolResultMessage = {
        id: `r-${callId}`,
        role: 'user',
        content: [
          { type: 'tool-result', toolCallId: callId, content: [{ type: 'text', text: 'long output '.repeat(20) }] },
        ],
        source: { kind: 'tool', callId },
      };
      const result = session.append({
        type: 'tool/result',
        time: 1,
        data: { turn: 1, step: 1, message, meta: { bytes: 240 } },
        surfaceOp: 'append',
        sourceEventSeqs: [call.seq],
      });
      resultSeqs.push(result.seq);
    }
    return { session, resultSeqs };
  }

  type ResultData = SessionEvent<'tool/result'>['data'];

  function rewrite(
    session: Session,
    target: number,
    mutate: (data: ResultData) => ResultData,
    range?: { start: number; end: number },
  ): NewEvent {
    const original = session.eventAt(target) as SessionEvent<'tool/result'>;
    const data = JSON.parse(JSON.stringify(original.data)) as ResultData;
    data.message.content[0].content = [{ type: 'text', text: '[pruned]' }];
    const sources = range
      ? [...session.surfaceNodes].slice(
          session.surfaceNodes.indexOf(range.start),
          session.surfaceNodes.indexOf(range.end) + 1,
        )
      : [target];
    return {
      type: 'tool/result',
      time: 2,
      data: mutate(data),
      surfaceOp: { op: 'replace', ...(range ?? { start: target, end: target }) },
      sourceEventSeqs: sources,
    };
  }

  it('a rewrite that changes only the inner tool-result content is accepted and keeps the position and call id', () => {
    const { session, resultSeqs } = toolSession();
    const before = session.deriveMessages().map((m) => m.id);
    const event = session.append(rewrite(session, resultSeqs[0]!, (d) => d));
    expect(session.surface.nodes).toEqual([2, event.seq, resultSeqs[1]]);
    expect(session.deriveMessages().map((m) => m.id)).toEqual(before);
    expect(session.events[resultSeqs[0]!]!.data).toMatchObject({ meta: { bytes: 240 } });
  });

  const forbidden: Array<[string, (d: ResultData) => ResultData]> = [
    ['message id', (d) => ({ ...d, message: { ...d.message, id: 'other' } })],
    ['error', (d) => ({ ...d, error: { name: 'E', code: 'X' } })],
    ['meta', (d) => ({ ...d, meta: { bytes: 1 } })],
    ['turn', (d) => ({ ...d, turn: 2 })],
    ['step', (d) => ({ ...d, step: 2 })],
    ['isError', (d) => ({ ...d, message: { ...d.message, content: [{ ...d.message.content[0], isError: true }] } })],
    ['extra data field', (d) => ({ ...d, note: 'x' }) as ResultData],
  ];

  it.each(forbidden)('a rewrite that also changes the %s is rejected', (_name, mutate) => {
    const { session, resultSeqs } = toolSession();
    expectRejectedUnchanged(session, () => session.append(rewrite(session, resultSeqs[0]!, mutate)), isViolation);
  });

  it('a rewrite whose call id differs (tool-result block and source together) is rejected', () => {
    const { session, resultSeqs } = toolSession();
    const other = (d: ResultData): ResultData => ({
      ...d,
      message: {
        ...d.message,
        content: [{ ...d.message.content[0], toolCallId: 'c2' }],
        source: { kind: 'tool', callId: 'c2' },
      },
    });
    expectRejectedUnchanged(session, () => session.append(rewrite(session, resultSeqs[0]!, other)), isViolation);
  });

  it('a tool/result replace that shadows two nodes, or a non-tool/result node, is rejected', () => {
    const { session, resultSeqs } = toolSession();
    expectRejectedUnchanged(
      session,
      () => session.append(rewrite(session, resultSeqs[0]!, (d) => d, { start: resultSeqs[0]!, end: resultSeqs[1]! })),
      isViolation,
    );
    // Seq 2 is the assistant message.
    expectRejectedUnchanged(
      session,
      () => session.append(rewrite(session, resultSeqs[0]!, (d) => d, { start: 2, end: 2 })),
      isViolation,
    );
  });
});

describe('stored events (Session.fromEvents)', () => {
  const header = { version: SESSION_FORMAT_VERSION, id: 'stored', createdAt: 1 };
  const stored = (seq: number, extra: Record<string, unknown> = {}): Record<string, unknown> => ({
    seq,
    type: 'session/run',
    time: 1,
    data: { workflowId: 'w', runId: 'r' },
    ...extra,
  });

  it('refuses a seq gap, a duplicate seq, an unknown envelope key, a non-integer time and missing data', () => {
    for (const events of [
      [stored(0), stored(2)],
      [stored(0), stored(0)],
      [stored(1)],
      [stored(0, { cwd: '/x' })],
      [stored(0, { time: 1.5 })],
      [stored(0, { data: undefined })],
      [stored(0, { ignorable: false })],
    ]) {
      expect(() => Session.fromEvents(header, events)).toThrow(expect.objectContaining({ code: 'INVALID_EVENT' }));
    }
  });

  it('refuses an unknown event type without ignorable as UNSUPPORTED_FORMAT naming a newer version, and loads it when ignorable', () => {
    const unknown = { seq: 1, type: 'future/thing', time: 1, data: { x: 1 } };
    expect(() => Session.fromEvents(header, [stored(0), unknown])).toThrow(
      expect.objectContaining({ code: 'UNSUPPORTED_FORMAT', message: expect.stringMatching(/newer version/) }),
    );
    const session = Session.fromEvents(header, [stored(0), { ...unknown, ignorable: true }]);
    expect(session.nextSeq).toBe(2);
    expect(session.deriveMessages()).toEqual([]);
  });

  it('refuses a header whose version is ahead of this build as UNSUPPORTED_FORMAT naming a newer version', () => {
    expect(() => Session.fromEvents({ ...header, version: SESSION_FORMAT_VERSION + 1 }, [])).toThrow(
      expect.objectContaining({ code: 'UNSUPPORTED_FORMAT', message: expect.stringMatching(/newer version/) }),
    );
  });

  it('applies the same surface rules as a live append: a stored surface event without surfaceOp is refused', () => {
    const event = {
      seq: 0,
      type: 'user/message',
      time: 1,
      data: { id: 'u', role: 'user', content: [], source: { kind: 'user' } },
    };
    expect(() => Session.fromEvents(header, [event])).toThrow(expect.objectContaining({ code: 'SURFACE_VIOLATION' }));
  });
});
