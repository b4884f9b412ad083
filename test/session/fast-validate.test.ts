/**
 * The compiled fast path of event payload validation (validate.ts) against zod, the schema it is
 * compiled from: whatever the fast path accepts, zod accepts, for valid payloads of every event
 * type and for thousands of damaged ones; and valid payloads do take the fast path.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  KNOWN_EVENT_TYPES,
  assertEventData,
  countRefinements,
  eventDataSchema,
  fastAcceptsEventData,
  fastCheckedTypes,
  isSessionlogError,
} from '../../src/session/index.js';

const text = (t: string) => ({ type: 'text', text: t });
const model = { kind: 'model', provider: 'fake', model: 'fake-1' };
const SHA = 'ab'.repeat(32);
const IMAGE = {
  kind: 'artifact',
  locator: `artifact:s1/media-${SHA}.png`,
  mediaType: 'image/png',
  bytes: 120,
  sha256: SHA,
  width: 4,
  height: 3,
};
const PDF = {
  kind: 'artifact',
  locator: `artifact:s1/media-${SHA}.pdf`,
  mediaType: 'application/pdf',
  bytes: 300,
  sha256: SHA,
};

/** One valid payload of each known event type (several where a type has branches). */
const VALID: Record<string, unknown[]> = {
  'turn/start': [
    { turn: 1 },
    { turn: 2, agent: { model: 'm', system: 'be brief' }, origin: 'caller' },
    { turn: 3, tools: [{ name: 'echo', description: 'echo', parameters: { type: 'object' } }] },
  ],
  'turn/end': [{ turn: 1, reason: { kind: 'completed' } }],
  'step/start': [{ turn: 1, step: 1 }],
  'step/end': [{ turn: 1, step: 2 }],
  'user/message': [
    { id: 'u1', role: 'user', content: [text('hi')], source: { kind: 'user' } },
    {
      id: 'u2',
      role: 'user',
      content: [
        text('what is in these?'),
        { type: 'image', source: IMAGE, detail: 'low' },
        { type: 'image', source: { kind: 'url', url: 'https://example.com/cat.png' } },
        { type: 'file', source: PDF, filename: 'report.pdf' },
      ],
      source: { kind: 'user' },
    },
  ],
  'assistant/chunk': [{ turn: 1, step: 1, chunk: { kind: 'text-delta', text: 'he' } }],
  'assistant/message': [
    {
      turn: 1,
      step: 1,
      cost: 0.002,
      message: {
        id: 'a1',
        role: 'assistant',
        content: [
          { type: 'reasoning', text: 'hm' },
          text('hello'),
          { type: 'tool-call', id: 'c1', name: 'echo', arguments: '{}' },
        ],
        source: model,
      },
    },
    {
      turn: 1,
      step: 2,
      hides: true,
      message: { id: 'a2', role: 'assistant', content: [], source: { kind: 'caller' } },
    },
  ],
  'tool/call': [{ turn: 1, step: 1, callId: 'c1', name: 'echo', arguments: '{"x":1}' }],
  'tool/result': [
    {
      turn: 1,
      step: 1,
      message: {
        id: 'r1',
        role: 'user',
        content: [{ type: 'tool-result', toolCallId: 'c1', content: [text('out')], isError: true }],
        source: { kind: 'tool', callId: 'c1' },
      },
    },
    {
      turn: 1,
      step: 1,
      message: {
        id: 'r2',
        role: 'user',
        content: [
          { type: 'tool-result', toolCallId: 'c2', content: [text('a chart'), { type: 'image', source: IMAGE }] },
        ],
        source: { kind: 'tool', callId: 'c2' },
      },
    },
  ],
  'request/header': [{ header: { provider: 'fake', model: 'fake-1' }, reason: 'first' }],
  'llm/retry': [{ turn: 1, step: 1, attempt: 2 }],
  'compaction/start': [
    { compactionId: 'k1', turn: null },
    { compactionId: 'k2', turn: 4, trigger: 'manual' },
  ],
  'compaction/summary': [{ compactionId: 'k1', summary: [text('sum')], shadowedSeqs: [1, 2], shadowedTokenCount: 40 }],
  'compaction/end': [
    { compactionId: 'k1', turn: null, tokensBefore: 90, tokensAfter: 30 },
    { compactionId: 'k1', turn: 2, error: 'x' },
  ],
  'compaction/prune': [{ shadowedSeqs: [3], shadowedTokenCount: 7 }],
  'session/end-seed': [{}],
  'session/run': [{ workflowId: 'session/s', runId: 'r' }],
  'tool/approval-request': [
    { turn: 1, step: 1, callId: 'c1', tool: 'rm', arguments: '{}', expiresAt: 1_700_000_000_000, kind: 'approval' },
  ],
  'tool/approval': [
    { turn: 1, step: 1, callId: 'c1', decision: 'deny', reason: 'no' },
    { turn: 1, step: 1, callId: 'c1', decision: 'approve', result: { locator: 'art:1', bytes: 3, isError: false } },
  ],
  'tool/allow': [{ tool: 'rm', by: 'ops' }],
  'session/metadata': [{ metadata: { a: 'b' }, messageId: 'm1' }],
  'model/limit': [{ model: 'm', contextWindow: 8192, source: 'provider' }],
  'compaction/stalled': [
    { compactionId: null, tokensBefore: 9, tokensAfter: 8, budget: 5, threshold: 4, irreducible: 1, reason: 'r' },
  ],
  'session/budget': [{ budget: { total: { modelCalls: 3 } }, by: 'ops' }, { budget: null }],
  'budget/breach': [{ turn: 1, step: 1, before: 'model', scope: 'tenant', cap: 'tokens', used: 10, limit: 5 }],
};

function zodAccepts(type: string, data: unknown): boolean {
  return eventDataSchema(type)!.safeParse(data).success;
}

/** Every path into a JSON value (object keys and array indices), the root as []. */
function pathsOf(value: unknown, prefix: Array<string | number> = []): Array<Array<string | number>> {
  const paths = [prefix];
  if (Array.isArray(value)) value.forEach((item, i) => paths.push(...pathsOf(item, [...prefix, i])));
  else if (value !== null && typeof value === 'object')
    for (const [key, item] of Object.entries(value)) paths.push(...pathsOf(item, [...prefix, key]));
  return paths;
}

type Mutation = { kind: 'set' | 'delete' | 'add'; pick: number; value: unknown };

/** A copy of `data` with one value replaced, one key or item removed, or one key added. */
function mutate(data: unknown, { kind, pick, value }: Mutation): unknown {
  const copy = structuredClone(data);
  const paths = pathsOf(copy);
  const path = paths[pick % paths.length]!;
  if (path.length === 0) return kind === 'set' ? value : copy;
  let parent = copy as Record<string | number, unknown>;
  for (const key of path.slice(0, -1)) parent = parent[key] as Record<string | number, unknown>;
  const last = path[path.length - 1]!;
  if (kind === 'set') parent[last] = value;
  else if (kind === 'delete') {
    if (Array.isArray(parent)) parent.splice(last as number, 1);
    else delete parent[last];
  } else {
    const target = parent[last];
    if (target !== null && typeof target === 'object' && !Array.isArray(target))
      (target as Record<string, unknown>)['extra'] = value;
    else parent[last] = [value];
  }
  return copy;
}

const odd = fc.constantFrom<unknown>('', 'x', 0, -1, 1.5, 2 ** 53, null, true, false, [], {}, [''], { kind: '' });
const mutationArb: fc.Arbitrary<Mutation> = fc.record({
  kind: fc.constantFrom('set', 'delete', 'add'),
  pick: fc.nat(1000),
  value: fc.oneof(odd, fc.jsonValue({ maxDepth: 2 })),
});

describe('compiled event validation', () => {
  it('covers every known type with a valid sample, and every sample takes the fast path', () => {
    expect(Object.keys(VALID).sort()).toEqual([...KNOWN_EVENT_TYPES].sort());
    for (const [type, samples] of Object.entries(VALID))
      for (const data of samples) {
        expect(zodAccepts(type, data), `${type} sample is valid`).toBe(true);
        if (fastCheckedTypes().includes(type)) expect(fastAcceptsEventData(type, data), type).toBe(true);
      }
    // Every type but a shape JSON Schema cannot say is compiled.
    expect(fastCheckedTypes().length).toBe(KNOWN_EVENT_TYPES.size);
  });

  it('never accepts what zod refuses, over damaged payloads of every type', () => {
    let refused = 0;
    const samples = Object.entries(VALID).flatMap(([type, list]) => list.map((data) => ({ type, data })));
    fc.assert(
      fc.property(fc.nat(samples.length - 1), fc.array(mutationArb, { minLength: 1, maxLength: 3 }), (i, mutations) => {
        const { type, data } = samples[i]!;
        const damaged = mutations.reduce(mutate, data);
        const zod = zodAccepts(type, damaged);
        if (!zod) refused++;
        if (fastAcceptsEventData(type, damaged) === true) expect(zod).toBe(true);
        // assertEventData's verdict is zod's either way.
        let threw = false;
        try {
          assertEventData(type, damaged, 'test');
        } catch (error) {
          threw = isSessionlogError(error, 'INVALID_EVENT');
        }
        expect(threw).toBe(!zod);
      }),
      { numRuns: 20_000 },
    );
    // The property is not vacuous: most damage is refused.
    expect(refused).toBeGreaterThan(5000);
  });

  it('counts refinements anywhere in a schema, so a type with one the fast path skips stays on zod', () => {
    const leaf = z.string().refine((v) => v !== 'no');
    const tree: z.ZodType = z.lazy(() => z.array(z.union([leaf, tree])));
    expect(countRefinements(z.object({ a: z.object({ b: leaf.optional() }) }).passthrough())).toBe(1);
    expect(countRefinements(tree)).toBe(1);
    expect(countRefinements(z.object({ a: leaf }).superRefine(() => undefined))).toBe(2);
    // A definition the count cannot walk (a transform) is never compiled.
    expect(countRefinements(z.object({ a: z.string().transform((v) => v.length) }))).toBe(Number.POSITIVE_INFINITY);
  });

  it('refuses through zod with the same message a refinement gives', () => {
    const bad = structuredClone(VALID['tool/result']![0]) as { message: { source: { callId: string } } };
    bad.message.source.callId = 'other';
    expect(fastAcceptsEventData('tool/result', bad)).toBe(false);
    expect(() => assertEventData('tool/result', bad, 'here')).toThrow(/toolCallId must equal source.callId/);
    const hidden = structuredClone(VALID['assistant/message']![0]) as { hides?: true };
    hidden.hides = true;
    expect(() => assertEventData('assistant/message', hidden, 'here')).toThrow(/hides a node has no content/);
  });
});
