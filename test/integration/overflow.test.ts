import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { COMPACTION_INSTRUCTION } from '../../src/context/compaction.js';
import type { StoredEvent } from '../../src/session/index.js';
import { BUILTIN_TOOLS } from '../../src/tools/builtin.js';
import { ToolRegistry, type Tool } from '../../src/tools/registry.js';
import { startStack, type Stack } from '../support/stack.js';

const TURNS = 200;
const LIMIT = 3_000;

const dumpTool: Tool = {
  name: 'dump',
  description: 'Return a large text.',
  parameters: { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] },
  async run(args) {
    const n = (args as { n: number }).n;
    return { text: Array.from({ length: 40 }, (_, i) => `row ${n}.${i}: value=${(n * 31 + i) % 97}`).join('\n') };
  },
};

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({
    fake: { contextLimitTokens: LIMIT },
    worker: {
      tools: new ToolRegistry([...BUILTIN_TOOLS, dumpTool]),
      agent: { model: 'fake', system: 'You are a test assistant.', tools: ['dump'] },
      // The catalogue window (128K) is far above the provider's real limit: only overflow recovery can save the session.
      context: { pruner: false },
    },
  });
});
afterAll(async () => {
  await stack?.close();
});

const isSummarizer = (messages: readonly { content?: unknown }[]) =>
  messages.at(-1)?.content === COMPACTION_INSTRUCTION;

describe('overflow recovery', () => {
  it(`a ${TURNS}-turn session with large tool outputs keeps answering under a low provider limit`, async () => {
    const id = `overflow-${Date.now()}`;
    let n = 0;
    stack.fake.setMatcher((request) => {
      const messages = request.body.messages;
      if (isSummarizer(messages)) return { text: `## Summary\n- ${messages.length} messages about dumps` };
      const last = messages.at(-1)!;
      if (last.role === 'user') return { text: 'dumping', toolCalls: [{ name: 'dump', arguments: { n: n++ } }] };
      return { text: 'done' };
    });
    const seen = new Map<number, string>();
    for (let turn = 1; turn <= TURNS; turn++) {
      const reply = await stack.client.send(id, `turn ${turn}`);
      expect(reply.outcome).toBe('completed');
      expect(reply.text).toBe('done');
      if (turn % 25 === 0)
        for (const e of await stack.client.events(id)) if (!seen.has(e.seq)) seen.set(e.seq, JSON.stringify(e));
    }
    const events = await stack.client.events(id);
    for (const [seq, json] of seen) expect(JSON.stringify(events[seq])).toBe(json);
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i));
    const compactions = events.filter((e: StoredEvent) => e.type === 'compaction/summary');
    expect(compactions.length).toBeGreaterThan(5);

    // Every overflowed model request was followed by a request under the limit.
    const main = stack.fake
      .requests()
      .filter(
        (r) =>
          r.path === '/v1/chat/completions' &&
          !isSummarizer((r.body as { messages: { content?: unknown }[] }).messages),
      );
    const overflowed = main.map((r, i) => (r.status === 400 ? i : -1)).filter((i) => i >= 0);
    expect(overflowed.length).toBeGreaterThan(0);
    for (const i of overflowed) expect(main[i + 1]?.status).toBe(200);
  }, 600_000);
});
