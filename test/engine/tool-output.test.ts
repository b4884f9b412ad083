/**
 * What a tool's output may carry besides text, and the tools that must not run twice
 * (src/engine/ops/tool-step.ts, issue 51), called directly without Temporal against a real SQLite
 * store and the offline model: images a tool stored as media are logged after its text in the
 * tool/result (references, never bytes); a tool's error code is logged; a tool marked
 * `retryable: false` is never run again on a later attempt (an earlier one was cut off) and is
 * not retried when it throws, while other tools are.
 */
import { describe, expect, it } from 'vitest';
import { ToolAttemptFailed } from '../../src/engine/errors.js';
import type { RunnableTool } from '../../src/tools/registry.js';
import { useFakeModel } from '../support/fake-model.js';
import { ofType, stepContext, useEngineHarness } from './engine-harness.js';

const fake = useFakeModel();
const harness = useEngineHarness(fake);

/** PNG bytes as a tool would have them (the signature, then anything). */
const PNG = Uint8Array.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 1, 2, 3, 4]);

/** A tool that counts its runs and answers as `answer` says. */
function countingTool(name: string, answer: RunnableTool['run'], extra: Partial<RunnableTool> = {}) {
  const tool = {
    name,
    description: `${name} for tests`,
    parameters: { type: 'object', properties: {} },
    runs: 0,
    async run(args: unknown, context: Parameters<RunnableTool['run']>[1]) {
      tool.runs++;
      return answer(args, context);
    },
    ...extra,
  };
  return tool;
}

/** Logs one call of `name` and returns its seq. */
async function oneCall(h: Awaited<ReturnType<typeof harness>>, name: string, callId: string): Promise<number> {
  fake().enqueueReplies({ toolCalls: [{ id: callId, name, arguments: {} }] });
  const step = await h.modelStep({ turn: 1, step: 1, entering: [await h.message(`m-${callId}`, 'go')] });
  return step.toolCalls[0]!.callSeq;
}

describe('tool output', () => {
  it('logs the images a tool stored after its text, as media references, and its error code', async () => {
    const snap = countingTool('snap', async (_args, context) => {
      const stored = await context.artifacts.putMedia({
        sessionId: context.sessionId,
        bytes: PNG,
        mediaType: 'image/png',
        width: 1,
        height: 1,
      });
      return {
        text: 'here it is',
        isError: true,
        errorCode: 'SNAP_BLURRY',
        content: [
          { type: 'text', text: 'here it is' },
          { type: 'image', source: stored },
        ],
      };
    });
    const h = await harness({ tools: [snap] });
    fake().enqueueReplies({ toolCalls: [{ id: 'call-snap', name: 'snap', arguments: {} }] });
    const step = await h.modelStep({ turn: 1, step: 1, entering: [await h.message('m1', 'take a picture')] });
    await h.toolRound(1, 1, step);
    const result = ofType(await h.events(), 'tool/result')[0]!;
    const block = result.data.message.content[0];
    expect(block.isError).toBe(true);
    expect(result.data.error).toEqual({ name: 'ToolError', code: 'SNAP_BLURRY' });
    expect(block.content).toEqual([
      { type: 'text', text: 'here it is' },
      {
        type: 'image',
        source: expect.objectContaining({ kind: 'artifact', mediaType: 'image/png', bytes: PNG.byteLength }),
      },
    ]);
    const image = block.content[1] as { source: { locator: string } };
    expect(await h.store.artifacts.readMedia(h.sessionId, image.source.locator)).toEqual(PNG);
  });
});

describe('a tool that must not run twice (retryable: false)', () => {
  it('is not run on a later attempt: the call is answered TOOL_NOT_RETRIED', async () => {
    const once = countingTool('once', async () => ({ text: 'ran' }), { retryable: false });
    const h = await harness({ tools: [once] });
    const callSeq = await oneCall(h, 'once', 'call-once');
    const ref = await h.engine.runTool(
      { sessionId: h.sessionId, turn: 1, step: 1, callSeq, maxAttempts: 3 },
      stepContext(2),
    );
    expect(once.runs).toBe(0);
    expect(ref).toMatchObject({ isError: true, errorCode: 'TOOL_NOT_RETRIED' });
    expect(await h.store.artifacts.get(h.sessionId, ref.locator)).toContain('may or may not have taken effect');
  });

  it('that throws is answered with an error result at once, while a tool that may be retried is retried', async () => {
    const fails = () => Promise.reject(new Error('connection reset'));
    const once = countingTool('once', fails, { retryable: false });
    const again = countingTool('again', fails);
    const h = await harness({ tools: [once] });
    const onceSeq = await oneCall(h, 'once', 'call-1');
    const ref = await h.engine.runTool(
      { sessionId: h.sessionId, turn: 1, step: 1, callSeq: onceSeq, maxAttempts: 3 },
      stepContext(1),
    );
    expect(ref).toMatchObject({ isError: true, errorCode: 'TOOL_FAILED' });
    expect(once.runs).toBe(1);
    const other = await harness({ tools: [again] });
    const againSeq = await oneCall(other, 'again', 'call-2');
    await expect(
      other.engine.runTool(
        { sessionId: other.sessionId, turn: 1, step: 1, callSeq: againSeq, maxAttempts: 3 },
        stepContext(1),
      ),
    ).rejects.toBeInstanceOf(ToolAttemptFailed);
    expect(again.runs).toBe(1);
  });
});
