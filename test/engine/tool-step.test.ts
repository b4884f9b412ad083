/**
 * The tool half of a step (src/engine/ops/tool-step.ts), called directly without Temporal against
 * a real SQLite store and the offline model: each logged call runs with its parsed arguments and
 * the step's results are logged in call order whatever order they ran in; arguments that are not
 * JSON never reach the tool and come back to the model as an error result; and the runaway-loop
 * guard stops a turn that asks for the same call again and again, budget or not.
 */
import { describe, expect, it } from 'vitest';
import { DEFAULT_REPEATED_CALLS } from '../../src/session/index.js';
import type { Tool } from '../../src/tools/registry.js';
import { useFakeModel } from '../support/fake-model.js';
import { ofType, useEngineHarness } from './engine-harness.js';

const fake = useFakeModel();
const harness = useEngineHarness(fake);

/** A tool that answers `found <q>` and remembers each query it ran. */
function lookupTool(): Tool & { ran: string[] } {
  const ran: string[] = [];
  return {
    name: 'lookup',
    description: 'Looks a word up.',
    parameters: { type: 'object', properties: { q: { type: 'string' } }, required: ['q'] },
    async run(args) {
      const q = (args as { q: string }).q;
      ran.push(q);
      return { text: `found ${q}` };
    },
    ran,
  };
}

/** The text of each `tool/result` logged, with the call it answers. */
function resultsOf(events: Awaited<ReturnType<Awaited<ReturnType<typeof harness>>['events']>>) {
  return ofType(events, 'tool/result').map((event) => {
    const block = event.data.message.content[0] as {
      toolCallId: string;
      isError?: true;
      content: Array<{ text: string }>;
    };
    return {
      callId: block.toolCallId,
      text: block.content[0]!.text,
      isError: block.isError === true,
      code: event.data.error?.code,
    };
  });
}

describe('a tool round', () => {
  it('runs each call with its arguments and logs the results in call order, though they ran in reverse; the next step sends them in that order', async () => {
    const lookup = lookupTool();
    const h = await harness({ tools: [lookup] });
    fake().enqueueReplies(
      {
        toolCalls: [
          { id: 'call-a', name: 'lookup', arguments: { q: 'alpha' } },
          { id: 'call-b', name: 'lookup', arguments: { q: 'beta' } },
        ],
      },
      { text: 'alpha and beta are found' },
    );

    const step1 = await h.modelStep({ turn: 1, step: 1, entering: [await h.message('m1', 'look up alpha and beta')] });
    expect(step1.outcome).toBe('tools');
    expect(step1.toolCalls.map((call) => call.callId)).toEqual(['call-a', 'call-b']);
    await h.toolRound(1, 1, step1, 'reversed');

    expect(lookup.ran).toEqual(['beta', 'alpha']);
    const events = await h.events();
    expect(resultsOf(events)).toEqual([
      { callId: 'call-a', text: 'found alpha', isError: false, code: undefined },
      { callId: 'call-b', text: 'found beta', isError: false, code: undefined },
    ]);
    const calls = ofType(events, 'tool/call');
    expect(ofType(events, 'tool/result').map((event) => event.sourceEventSeqs)).toEqual(calls.map((c) => [c.seq]));
    expect(events.at(-1)!.type).toBe('step/end');

    const step2 = await h.modelStep({ turn: 1, step: 2 });
    expect(step2.outcome).toBe('completed');
    const sent = fake()
      .chatRequests()[1]!
      .messages.filter((m) => m.role === 'tool');
    expect(sent.map((m) => [m.tool_call_id, m.content])).toEqual([
      ['call-a', 'found alpha'],
      ['call-b', 'found beta'],
    ]);
  });

  it('arguments that are not JSON never reach the tool: the call gets an error result the model can read', async () => {
    const lookup = lookupTool();
    const h = await harness({ tools: [lookup] });
    fake().enqueueReplies({ toolCalls: [{ id: 'call-x', name: 'lookup', arguments: { q: 'alpha' } }] });
    fake().injectFault({ kind: 'malformed_tool_json' });

    const step = await h.modelStep({ turn: 1, step: 1, entering: [await h.message('m1', 'look up alpha')] });
    expect(step.outcome).toBe('tools');
    const [call] = ofType(await h.events(), 'tool/call');
    expect(() => JSON.parse(call!.data.arguments)).toThrow();

    await h.toolRound(1, 1, step);

    expect(lookup.ran).toEqual([]);
    const [result] = resultsOf(await h.events());
    expect(result).toMatchObject({ callId: 'call-x', isError: true, code: 'INVALID_TOOL_ARGUMENTS' });
    expect(result!.text).toMatch(/not valid JSON/);
  });
});

describe('the runaway-loop guard', () => {
  it(`stops a turn of a session with no budget when the same call is asked for ${DEFAULT_REPEATED_CALLS} times: a repeatedCalls breach before the tool round, which does not run`, async () => {
    const lookup = lookupTool();
    const h = await harness({ tools: [lookup] });
    // The model asks for the very same call every time.
    fake().setMatcher(() => ({ toolCalls: [{ name: 'lookup', arguments: { q: 'again' } }] }));

    let step = 1;
    let result = await h.modelStep({ turn: 1, step, entering: [await h.message('m1', 'loop')] });
    while (result.outcome === 'tools' && step < DEFAULT_REPEATED_CALLS + 3) {
      await h.toolRound(1, step, result);
      step += 1;
      result = await h.modelStep({ turn: 1, step });
    }

    const events = await h.events();
    expect(ofType(events, 'session/budget')).toEqual([]);
    expect(result.outcome).toBe('budget');
    expect(step).toBe(DEFAULT_REPEATED_CALLS);
    expect(result.breach).toMatchObject({
      cap: 'repeatedCalls',
      scope: 'turn',
      used: DEFAULT_REPEATED_CALLS,
      limit: DEFAULT_REPEATED_CALLS,
      tool: 'lookup',
      before: 'tools',
    });
    expect(ofType(events, 'budget/breach').map((event) => event.seq)).toEqual([result.breach!.seq]);
    expect(lookup.ran).toHaveLength(DEFAULT_REPEATED_CALLS - 1);
    expect(h.modelCalls()).toBe(DEFAULT_REPEATED_CALLS);
  });
});
