/**
 * examples/ai-sdk-tools: an AI SDK app's tools (zod and jsonSchema()), a LangChain tool() and an
 * arktype defineTool run unchanged in a sessionlog worker (real Temporal, the offline model
 * scripted to call them). Arguments are validated before the tools run; arguments that do not
 * match come back to the model as an error result naming the path (issue 51).
 */
import { execFile } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { EXAMPLE_TOOL_NAMES, exampleTools } from '../../examples/ai-sdk-tools/worker.js';
import { isEventOfType, textOf, type StoredEvent } from '../../src/session/index.js';
import { startStack, temporalAddress, type Stack } from '../support/stack.js';

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({
    worker: { tools: exampleTools(), agent: { model: 'fake', tools: EXAMPLE_TOOL_NAMES } },
  });
});
afterAll(async () => {
  await stack?.close();
});
beforeEach(() => {
  stack.fake.reset();
});

let counter = 0;
const newSession = (name: string) => `ai-sdk-tools-${name}-${Date.now()}-${counter++}`;

type ToolResult = { name: string; callId: string; text: string; isError: boolean; code: string | undefined };

/** The session's tool results in call order, each with the name of the tool its call named. */
function toolResults(events: readonly StoredEvent[]): ToolResult[] {
  const names = new Map<string, string>();
  const results: ToolResult[] = [];
  for (const event of events) {
    if (isEventOfType(event, 'tool/call')) names.set(event.data.callId, event.data.name);
    if (isEventOfType(event, 'tool/result')) {
      const block = event.data.message.content[0];
      results.push({
        name: names.get(block.toolCallId) ?? '?',
        callId: block.toolCallId,
        text: textOf(block.content),
        isError: block.isError === true,
        code: event.data.error?.code,
      });
    }
  }
  return results;
}

describe('examples/ai-sdk-tools: framework tools in a sessionlog worker', () => {
  it("offers the model each tool's schema as JSON Schema and runs the tools with validated arguments", async () => {
    const id = newSession('valid');
    stack.fake.enqueueReplies(
      {
        toolCalls: [
          { name: 'getWeather', arguments: { city: 'Oslo' } },
          { name: 'packingList', arguments: { days: 3, cold: true } },
          { name: 'convert_temperature', arguments: { celsius: 4 } },
          { name: 'plan_trip', arguments: { city: 'Lisbon', days: 2 } },
        ],
      },
      { text: 'Pack warm.' },
    );
    const reply = await stack.client.send(id, 'What should I pack for Oslo?');
    expect(reply.text).toBe('Pack warm.');

    const [first] = stack.fake.chatRequests();
    const offered = new Map(first!.tools!.map((t) => [t.function.name, t.function.parameters]));
    // The agent's tools, beside the history tools every session has.
    expect([...offered.keys()]).toEqual(expect.arrayContaining(EXAMPLE_TOOL_NAMES));
    expect(offered.get('getWeather')).toEqual({
      type: 'object',
      properties: {
        city: { type: 'string', description: 'The city, e.g. Oslo' },
        unit: { type: 'string', enum: ['celsius', 'fahrenheit'], default: 'celsius' },
      },
      required: ['city'],
    });
    expect(offered.get('packingList')).toMatchObject({ required: ['days'], additionalProperties: false });
    expect(offered.get('convert_temperature')).toMatchObject({ properties: { celsius: { type: 'number' } } });
    expect(offered.get('plan_trip')).toMatchObject({ required: ['city', 'days'] });

    const results = toolResults(await stack.client.events(id));
    expect(results.map((r) => [r.name, r.isError])).toEqual([
      ['getWeather', false],
      ['packingList', false],
      ['convert_temperature', false],
      ['plan_trip', false],
    ]);
    // zod's default reached execute: the tool got the validated value, with the AI SDK's toolCallId.
    expect(JSON.parse(results[0]!.text)).toEqual({
      city: 'Oslo',
      unit: 'celsius',
      temperature: 4,
      conditions: 'light snow',
      toolCallId: results[0]!.callId,
    });
    expect(results[1]!.text).toBe('3 shirts, 1 trousers, a warm coat');
    expect(results[2]!.text).toBe('4°C is 39.2°F');
    expect(results[3]!.text).toBe('Day 1: explore Lisbon\nDay 2: explore Lisbon');
  });

  it('answers arguments that do not match with an error result naming the path, which the model reads next', async () => {
    const id = newSession('invalid');
    stack.fake.enqueueReplies(
      {
        toolCalls: [
          { name: 'getWeather', arguments: { city: 42 } },
          { name: 'packingList', arguments: { days: 0, extra: 'x' } },
          { name: 'convert_temperature', arguments: { celsius: 'warm' } },
          { name: 'plan_trip', arguments: { city: 'Oslo', days: 20 } },
        ],
      },
      { text: 'Let me fix those.' },
    );
    const reply = await stack.client.send(id, 'Plan it all');
    expect(reply.text).toBe('Let me fix those.');

    const results = toolResults(await stack.client.events(id));
    expect(results.every((r) => r.isError && r.code === 'TOOL_INPUT_INVALID')).toBe(true);
    expect(results.map((r) => r.text)).toEqual([
      "arguments of tool 'getWeather' do not match its input schema: city: Invalid input: expected string, received number",
      "arguments of tool 'packingList' do not match its input schema: extra: is not allowed; days: must be >= 1",
      "arguments of tool 'convert_temperature' do not match its input schema: celsius: Invalid input: expected number, received string",
      "arguments of tool 'plan_trip' do not match its input schema: days: days must be at most 14 (was 20)",
    ]);

    // The next model request carries each error as the call's tool message.
    const second = stack.fake.chatRequests()[1]!;
    const toolMessages = second.messages.filter((m) => m.role === 'tool');
    expect(toolMessages.map((m) => m.content)).toEqual(results.map((r) => r.text));
    expect(toolMessages.map((m) => m.tool_call_id)).toEqual(results.map((r) => r.callId));
  });
});

describe('examples/ai-sdk-tools/worker.ts as a program', () => {
  const scriptPath = fileURLToPath(new URL('../../examples/ai-sdk-tools/worker.ts', import.meta.url));
  const tsxLoader = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;

  it('without a model key, runs a worker on its own queue where the offline model calls each tool once', async () => {
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      TEMPORAL_ADDRESS: temporalAddress(),
      SESSIONLOG_STORE: `sqlite:${join(mkdtempSync(join(tmpdir(), 'sessionlog-ai-sdk-tools-')), 'sessions.db')}`,
    };
    for (const key of ['OPENAI_API_KEY', 'DEEPSEEK_API_KEY', 'OPENAI_BASE_URL', 'SESSIONLOG_MODEL']) delete env[key];
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ['--import', tsxLoader, scriptPath, 'Pack for Oslo'],
      {
        env,
        timeout: 120_000,
      },
    );
    const lines = stdout.trim().split('\n');
    expect(lines.filter((l) => l.startsWith('call ')).map((l) => l.split(' ')[1])).toEqual(EXAMPLE_TOOL_NAMES);
    expect(lines.filter((l) => l.startsWith('result '))).toHaveLength(4);
    expect(stdout).toContain('3 shirts, 1 trousers, a warm coat');
    expect(stdout).toContain('Day 3: explore Oslo');
    expect(lines.at(-1)).toBe('reply (turn 1, completed): Here is what the tools said: 4 results.');
  });
});
