import proto from '@temporalio/proto';

const { temporal } = proto;
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { workflowIdFor } from '../../src/workflows/api.js';
import { startStack, type Stack } from '../support/stack.js';

let stack: Stack;
beforeAll(async () => {
  stack = await startStack();
});
afterAll(async () => {
  await stack?.close();
});

const MARKER = 'REPLY-TEXT-MARKER';
const filler = 'lorem ipsum dolor sit amet '.repeat(80).slice(0, 2048);

async function runHistoryBytes(sessionId: string): Promise<{ runId: string; bytes: number; text: string }> {
  const handle = stack.temporal.workflow.getHandle(workflowIdFor(sessionId));
  const runId = (await handle.describe()).runId;
  const history = await stack.temporal.workflow.getHandle(workflowIdFor(sessionId), runId).fetchHistory();
  const encoded = temporal.api.history.v1.History.encode(history).finish();
  return { runId, bytes: encoded.length, text: Buffer.from(encoded).toString('latin1') };
}

describe('Temporal history holds references only', () => {
  it('over 50 turns with 2 KB replies, no history payload holds reply text and per-turn growth stays flat', async () => {
    const id = `history-${Date.now()}`;
    let n = 0;
    stack.fake.setMatcher(() => ({ text: `${MARKER}-${n++} ${filler}` }));
    const growth = new Map<number, number>();
    const runTexts: string[] = [];
    for (let turn = 1; turn <= 50; turn++) {
      const measure = turn === 5 || turn === 6 || turn >= 50 - 3;
      const before = measure ? await runHistoryBytes(id).catch(() => undefined) : undefined;
      const reply = await stack.client.send(id, `question ${turn}`);
      expect(reply.text.startsWith(MARKER)).toBe(true);
      if (before) {
        const after = await runHistoryBytes(id);
        if (after.runId === before.runId) growth.set(turn, after.bytes - before.bytes);
      }
      if (turn % 10 === 0 || turn === 50) runTexts.push((await runHistoryBytes(id)).text);
    }
    stack.fake.setMatcher(undefined);
    for (const text of runTexts) expect(text.includes(MARKER)).toBe(false);

    const early = growth.get(5) ?? growth.get(6);
    const late = growth.get(50) ?? growth.get(49) ?? growth.get(48) ?? growth.get(47);
    expect(early).toBeDefined();
    expect(late).toBeDefined();
    expect(Math.abs(late! - early!) / early!).toBeLessThanOrEqual(0.1);
  });
});
