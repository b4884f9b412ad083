import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { COMPACTION_INSTRUCTION } from '../../src/context/compaction.js';
import { PRUNE_MARKER } from '../../src/context/pruner.js';
import type { FakeChatRequest } from '../../src/model/fake-server.js';
import type { StoredEvent, SessionEvent } from '../../src/session/index.js';
import type { Tool } from '../../src/tools/registry.js';
import { ToolRegistry } from '../../src/tools/registry.js';
import { BUILTIN_TOOLS } from '../../src/tools/builtin.js';
import { startStack, type Stack } from '../support/stack.js';

/** A tool that returns `size` characters of numbered lines (large, prunable output). */
const dumpTool: Tool = {
  name: 'dump',
  description: 'Return a large text.',
  parameters: { type: 'object', properties: { size: { type: 'integer' } }, required: ['size'] },
  async run(args) {
    const size = (args as { size: number }).size;
    let text = '';
    for (let i = 0; text.length < size; i++) text += `line ${i}: ${'x'.repeat(40)}\n`;
    return { text: text.slice(0, size) };
  },
};

const isCompactionRequest = (request: FakeChatRequest) => request.lastUserText === COMPACTION_INSTRUCTION;
const ofType = <K extends StoredEvent['type']>(events: readonly StoredEvent[], type: K) =>
  events.filter((e) => e.type === type) as Array<Extract<StoredEvent, { type: K }>>;

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({
    worker: {
      tools: new ToolRegistry([...BUILTIN_TOOLS, dumpTool]),
      agent: { model: 'fake', system: 'You are a test assistant.', tools: ['read_artifact', 'dump'] },
      spillMaxInlineBytes: 6_000,
      context: {
        policy: { budgetTokens: 6_000, thresholdRatio: 0.8, retainRatio: 0.3 },
        pruner: { thresholdChars: 3_000, headChars: 1_000, tailChars: 500 },
      },
    },
  });
});
afterAll(async () => {
  await stack?.close();
});
/**
 * The scripted model: summarises compaction requests; otherwise answers a user message with a
 * `dump` call of `dumpSize` characters and a tool result with a reply.
 */
let dumpSize = 0;
beforeEach(() => {
  stack.fake.reset();
  dumpSize = 0;
  stack.fake.setMatcher((request) => {
    if (isCompactionRequest(request)) return { text: '## Primary request\n- the user asked for dumps' };
    const last = request.body.messages.at(-1)!;
    if (dumpSize > 0 && last.role === 'user')
      return { text: 'dumping', toolCalls: [{ name: 'dump', arguments: { size: dumpSize } }] };
    if (last.role === 'tool') return { text: `done ${'y'.repeat(400)}` };
    return undefined;
  });
});

describe('context management in a live session', () => {
  it('prunes, spills and compacts under pressure without losing any logged event', async () => {
    const id = `ctx-${Date.now()}`;
    const snapshots = new Map<number, string>();
    dumpSize = 5_000;
    for (let turn = 1; turn <= 8; turn++) {
      const reply = await stack.client.send(id, `turn ${turn}: dump please ${'z'.repeat(600)}`);
      expect(reply.text.startsWith('done')).toBe(true);
      for (const e of await stack.client.events(id)) if (!snapshots.has(e.seq)) snapshots.set(e.seq, JSON.stringify(e));
    }
    const events = await stack.client.events(id);
    // Append-only: every event seen earlier is unchanged.
    for (const [seq, json] of snapshots) expect(JSON.stringify(events[seq])).toBe(json);

    const prunes = ofType(events, 'compaction/prune');
    expect(prunes.length).toBeGreaterThan(0);
    for (const prune of prunes) {
      const next = events[prune.seq + 1] as SessionEvent<'tool/result'>;
      expect(next.type).toBe('tool/result');
      expect(next.surfaceOp).toEqual({
        op: 'replace',
        start: prune.data.shadowedSeqs[0],
        end: prune.data.shadowedSeqs[0],
      });
      const text = next.data.message.content[0].content.map((b) => (b.type === 'text' ? b.text : '')).join('');
      expect(text.includes(PRUNE_MARKER)).toBe(true);
    }

    const starts = ofType(events, 'compaction/start') as SessionEvent<'compaction/start'>[];
    expect(starts.length).toBeGreaterThan(0);
    for (const start of starts) {
      const id = start.data.compactionId;
      const bracket = events.filter(
        (e) =>
          (e.data as { compactionId?: string }).compactionId === id ||
          (e.data as { source?: { compactionId?: string } }).source?.compactionId === id,
      );
      expect(bracket.map((e) => e.type)).toEqual([
        'compaction/start',
        'compaction/summary',
        'user/message',
        'compaction/end',
      ]);
      expect(bracket[2]!.seq).toBe(bracket[1]!.seq + 1);
    }
    // After compaction the first derived message is the framed checkpoint.
    const history = await stack.client.history(id);
    const first = history[0]!;
    expect(first.content[0]!.type === 'text' && first.content[0]!.text.endsWith('<compacted-summary>')).toBe(true);
    // Tool pairing holds in the derived history.
    const callIds = new Set<string>();
    for (const m of history) {
      for (const b of m.content) {
        if (b.type === 'tool-call') callIds.add(b.id);
        if (b.type === 'tool-result') expect(callIds.has(b.toolCallId)).toBe(true);
      }
    }
  });

  it('the summarizer request reuses the system prompt, tools and leading messages of the previous request', async () => {
    const id = `ctx-prefix-${Date.now()}`;
    dumpSize = 2_500;
    for (let turn = 1; turn <= 6; turn++) await stack.client.send(id, `turn ${turn} ${'z'.repeat(800)}`);
    const requests = stack.fake.chatRequests();
    const index = requests.findIndex(
      (r) => (r.messages.at(-1) as { content?: unknown }).content === COMPACTION_INSTRUCTION,
    );
    expect(index).toBeGreaterThan(0);
    const summarizer = requests[index]!;
    const previous = requests[index - 1]!;
    expect(summarizer.tools).toEqual(previous.tools);
    expect(summarizer.messages[0]).toEqual(previous.messages[0]);
    const leading = summarizer.messages.slice(0, -1);
    expect(previous.messages.slice(0, leading.length)).toEqual(leading);
  });

  it('manual compaction through the compact update shadows history and returns what it did', async () => {
    const id = `ctx-manual-${Date.now()}`;
    for (let turn = 1; turn <= 3; turn++)
      await stack.client.send(id, `turn ${turn}: ${'a fairly long message '.repeat(30)}`);
    const result = await stack.client.compact(id);
    expect(result).not.toBeNull();
    expect(result!.shadowedSeqs.length).toBeGreaterThan(0);
    expect(result!.tokensAfter).toBeLessThan(result!.tokensBefore);
    const events = await stack.client.events(id);
    const end = ofType(events, 'compaction/end') as SessionEvent<'compaction/end'>[];
    expect(end.at(-1)!.data.turn).toBeNull();
    const reply = await stack.client.send(id, 'after compaction');
    expect(reply.text).toBe('echo: after compaction');
    const history = await stack.client.history(id);
    expect(history[0]!.source).toMatchObject({ kind: 'plugin', plugin: 'compact', compactionId: result!.compactionId });
  });

  it('spills oversized tool output behind a preview that read_artifact can page through', async () => {
    const id = `ctx-spill-${Date.now()}`;
    let locator = '';
    stack.fake.setMatcher((request) => {
      const last = request.body.messages.at(-1)!;
      if (last.role === 'user') return { text: 'dumping', toolCalls: [{ name: 'dump', arguments: { size: 20_000 } }] };
      const content = String(last.content ?? '');
      const found = /Full result stored at: (\S+)\. Read/.exec(content);
      if (found && !locator) {
        locator = found[1]!;
        return {
          text: 'reading',
          toolCalls: [{ name: 'read_artifact', arguments: { locator, offset: 19_000, limit: 1_000 } }],
        };
      }
      return { text: 'read it' };
    });
    const reply = await stack.client.send(id, 'dump something huge');
    expect(reply.text).toBe('read it');
    const results = ofType(await stack.client.events(id), 'tool/result') as SessionEvent<'tool/result'>[];
    const spilled = results[0]!.data.message.content[0].content[0]!;
    expect(spilled.type === 'text' && Buffer.byteLength(spilled.text) <= 6_000).toBe(true);
    expect(spilled.type === 'text' && /Omitted \d+ bytes/.test(spilled.text)).toBe(true);
    const page = results[1]!.data.message.content[0].content[0]!;
    const full = await stack.store.artifacts.get(id, locator);
    expect(full.length).toBe(20_000);
    expect(page.type === 'text' && page.text.startsWith(full.slice(19_000, 20_000))).toBe(true);
  });
});
