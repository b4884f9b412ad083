/**
 * Context management soaked on small windows (DESIGN §6, "a session never stops answering
 * because of context"): 300 turns against a provider that refuses requests over 2,500 tokens,
 * and 300 against one at 8,192, with ~450-token replies and, every third turn, a tool result of
 * 3,000 characters. The catalogue's window for the model is far larger: the session learns the
 * provider's limit from its first refusal. Every turn must be answered, the log must verify,
 * every event once written must stay as it was, every compaction bracket must be closed, and at
 * most one request per session may go over the provider's limit. The counts (compactions,
 * stalls, escalations, refusals) are printed for BENCHMARKS.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { COMPACTION_INSTRUCTION } from '../../src/context/compaction.js';
import type { StoredEvent } from '../../src/session/index.js';
import { BUILTIN_TOOLS } from '../../src/tools/builtin.js';
import { ToolRegistry, type Tool } from '../../src/tools/registry.js';
import { startStack, type Stack } from '../support/stack.js';

const TURNS = 300;
const TOOL_EVERY = 3;
const TOOL_RESULT_CHARS = 3_000;

const WORDS = (
  'river stone lantern harbor meadow copper violet signal orchard thunder cobalt ember falcon ' +
  'granite willow cipher quartz saddle beacon harvest marble tundra velvet anchor prairie summit'
).split(' ');

/** About 450 tokens of varied prose for reply `n` (deterministic). */
function replyText(n: number): string {
  const words: string[] = [`Reply ${n}.`];
  for (let i = 0; i < 330; i++) words.push(WORDS[(n * 7 + i * 13 + ((i * i) % 11)) % WORDS.length]!);
  return words.join(' ');
}

/** A page of exactly TOOL_RESULT_CHARS characters for call `n`. */
function pageText(n: number): string {
  let text = `page ${n}:`;
  for (let i = 0; text.length < TOOL_RESULT_CHARS; i++) text += ` ${WORDS[(n + i * 5) % WORDS.length]}-${i}`;
  return text.slice(0, TOOL_RESULT_CHARS);
}

const pageTool: Tool = {
  name: 'fetch_page',
  description: 'Fetch a page of the knowledge base by number.',
  parameters: { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] },
  async run(args) {
    return { text: pageText((args as { n: number }).n) };
  },
};

const SUMMARY = [
  '## Goal',
  '- Keep answering the numbered questions about the knowledge base.',
  '## Decisions',
  '- (none)',
  '## Facts',
  '- Pages were fetched with fetch_page; replies are long prose.',
  '## Files and artifacts',
  '- (none)',
  '## Open tasks',
  '- Answer the next question.',
  '## Current state',
  '- Conversation ongoing.',
].join('\n');

const isSummarizer = (messages: readonly { content?: unknown }[]) =>
  messages.at(-1)?.content === COMPACTION_INSTRUCTION;

type SoakCounts = {
  window: number;
  turns: number;
  answered: number;
  compactions: number;
  stalls: number;
  escalations: number;
  refusals: number;
  modelRequests: number;
  events: number;
};

for (const window of [2_500, 8_192]) {
  describe(`context soak, provider window ${window} tokens`, () => {
    let stack: Stack;
    beforeAll(async () => {
      stack = await startStack({
        fake: { contextLimitTokens: window },
        worker: {
          tools: new ToolRegistry([...BUILTIN_TOOLS, pageTool]),
          agent: { model: 'fake', system: 'You are a patient assistant for a knowledge base.', tools: ['fetch_page'] },
        },
      });
    });
    afterAll(async () => {
      await stack?.close();
    });

    it(`answers ${TURNS} turns with ~450-token replies and a ${TOOL_RESULT_CHARS}-character tool result every ${TOOL_EVERY} turns`, async () => {
      const id = `soak-${window}-${Date.now()}`;
      let replies = 0;
      stack.fake.setMatcher((request) => {
        const messages = request.body.messages;
        if (isSummarizer(messages)) return { text: SUMMARY };
        const last = messages.at(-1)!;
        const question = /question (\d+)/.exec(request.lastUserText)?.[1];
        if (last.role === 'user' && question !== undefined && Number(question) % TOOL_EVERY === 0) {
          return {
            text: 'Let me look that up.',
            toolCalls: [{ name: 'fetch_page', arguments: { n: Number(question) } }],
          };
        }
        return { text: replyText(replies++) };
      });

      const seen = new Map<number, string>();
      let answered = 0;
      for (let turn = 1; turn <= TURNS; turn++) {
        const reply = await stack.client.send(id, `question ${turn}: tell me more.`);
        if (reply.outcome !== 'completed' && process.env.SOAK_DEBUG)
          for (const e of (await stack.client.events(id)).slice(-40))
            console.log(e.seq, e.type, JSON.stringify(e.data).slice(0, 300));
        if (reply.outcome !== 'completed' && process.env.SOAK_DEBUG)
          for (const r of stack.fake.requests().slice(-4)) {
            const body = r.body as { messages: Array<{ role: string; content: unknown }>; tools?: unknown[] };
            console.log(
              'REQ',
              r.status,
              JSON.stringify(body.tools ?? []).length,
              body.messages.map((m) => `${m.role}:${JSON.stringify(m.content).length}`).join(' '),
            );
          }
        expect(reply.outcome, `turn ${turn}: ${JSON.stringify(reply)}`).toBe('completed');
        expect(reply.text).toMatch(/^Reply \d+\./);
        answered += 1;
        if (turn % 50 === 0)
          for (const e of await stack.client.events(id)) if (!seen.has(e.seq)) seen.set(e.seq, JSON.stringify(e));
      }

      const events = await stack.client.events(id);
      // Every event once written is still there, unchanged; seqs are contiguous.
      for (const [seq, json] of seen) expect(JSON.stringify(events[seq])).toBe(json);
      expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i));
      const verified = await stack.client.verify(id);
      expect(verified.violations).toEqual([]);
      // Every compaction bracket that opened was closed.
      const ids = (type: 'compaction/start' | 'compaction/end') =>
        new Set(events.filter((e) => e.type === type).map((e) => (e.data as { compactionId: string }).compactionId));
      const opened = ids('compaction/start');
      const closed = ids('compaction/end');
      expect([...opened].filter((cid) => !closed.has(cid))).toEqual([]);

      const requests = stack.fake.requests().filter((r) => r.path === '/v1/chat/completions');
      const refusals = requests.filter((r) => r.status === 400).length;
      const counts: SoakCounts = {
        window,
        turns: TURNS,
        answered,
        compactions: events.filter((e: StoredEvent) => e.type === 'compaction/summary').length,
        stalls: events.filter((e: StoredEvent) => e.type === 'compaction/stalled').length,
        // Escalated rungs: prunes past the pruner's own threshold, and brackets without a retained tail.
        escalations: events.filter(
          (e: StoredEvent) =>
            (e.type === 'compaction/start' && (e.data as { escalation?: number }).escalation !== undefined) ||
            (e.type === 'compaction/prune' && (e.data as { reason?: string }).reason === 'escalation'),
        ).length,
        refusals,
        modelRequests: requests.length,
        events: events.length,
      };
      console.log(`context soak: ${JSON.stringify(counts)}`);
      expect(answered).toBe(TURNS);
      // The first refusal teaches the window; none after it.
      expect(refusals).toBeLessThanOrEqual(1);
    }, 900_000);
  });
}
