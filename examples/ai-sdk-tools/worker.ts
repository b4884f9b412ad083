/**
 * An AI SDK app's tools inside a sessionlog worker, unchanged (issue 51): the AI SDK tool set and
 * the LangChain tool of `app-tools.ts` go to `createWorker({ tools })` as they are, beside a
 * tool written with `defineTool` and an arktype schema and the built-in tools. Each tool call
 * the model makes is validated against the tool's schema, logged, and run as a durable activity;
 * arguments that do not match come back to the model as an error result naming the field.
 *
 * Against a running `sessionlog dev` (for its Temporal server and store), from its folder or any
 * folder below it:
 *
 *   npx tsx examples/ai-sdk-tools/worker.ts "What should I pack for 3 days in Oslo?"
 *
 * The worker polls its own task queue (`ai-sdk-tools`, so the dev's worker never runs these
 * sessions), starts a session there, sends the message, prints the tool calls and the reply,
 * and stops. With OPENAI_API_KEY or DEEPSEEK_API_KEY set the configured model decides which tools
 * to call; without one the offline model is scripted to call each tool once.
 */
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { type } from 'arktype';
import {
  BUILTIN_TOOLS,
  SessionClient,
  ToolRegistry,
  createOpenAIProvider,
  createWorker,
  defineTool,
  isEventOfType,
  openStore,
  resolveConfig,
  startFakeModelServer,
  type AgentConfig,
  type ModelPort,
} from '../../src/index.js';
import { findDev } from '../find-dev.js';
import { convertTemperature, tools } from './app-tools.js';

/** A tool written for sessionlog with a schema library other than zod: `execute` gets typed, validated arguments. */
export const planTrip = defineTool({
  name: 'plan_trip',
  description: 'Plan the days of a trip to a city',
  inputSchema: type({ city: 'string > 0', days: '0 < number.integer <= 14' }),
  execute: ({ city, days }) => Array.from({ length: days }, (_, i) => `Day ${i + 1}: explore ${city}`).join('\n'),
});

/** The worker's tools: the built-in ones, the app's AI SDK tool set, its LangChain tool and `plan_trip`. */
export function exampleTools(): ToolRegistry {
  return new ToolRegistry(BUILTIN_TOOLS, tools, [convertTemperature, planTrip]);
}

/** The names a session of this example offers the model. */
export const EXAMPLE_TOOL_NAMES = ['getWeather', 'packingList', 'convert_temperature', 'plan_trip'];

const TASK_QUEUE = 'ai-sdk-tools';

async function main(): Promise<void> {
  const config = resolveConfig(process.env);
  const dev = config.temporalAddress === undefined ? findDev() : undefined;
  const address = config.temporalAddress ?? dev?.temporalAddress;
  if (address === undefined) {
    process.stderr.write(
      'TEMPORAL_ADDRESS is not set and no running `sessionlog dev` was found: start `sessionlog dev`\n',
    );
    process.exitCode = 2;
    return;
  }
  const store = await openStore(process.env.SESSIONLOG_STORE ? config.store : (dev?.store ?? config.store));
  const offline = config.model.offline ? await startFakeModelServer({}) : undefined;
  try {
    let model: ModelPort;
    if (offline) {
      // No key: the offline model calls each tool once, then answers with what they returned.
      offline.setMatcher(({ body }) =>
        body.messages.at(-1)?.role === 'user'
          ? {
              toolCalls: [
                { name: 'getWeather', arguments: '{"city": "Oslo"}' },
                { name: 'packingList', arguments: '{"days": 3, "cold": true}' },
                { name: 'convert_temperature', arguments: '{"celsius": 4}' },
                { name: 'plan_trip', arguments: '{"city": "Oslo", "days": 3}' },
              ],
            }
          : { text: `Here is what the tools said: ${body.messages.filter((m) => m.role === 'tool').length} results.` },
      );
      model = createOpenAIProvider({ baseURL: offline.baseURL, apiKey: 'offline', provider: 'fake' });
    } else {
      model = createOpenAIProvider({
        baseURL: config.model.baseURL!,
        apiKey: config.model.apiKey ?? 'none',
        provider: config.model.provider,
      });
    }
    const agent: AgentConfig = { model: config.model.name, tools: EXAMPLE_TOOL_NAMES };
    const worker = await createWorker({
      address,
      namespace: config.namespace,
      taskQueue: TASK_QUEUE,
      store,
      model,
      agent,
      tools: exampleTools(),
    });
    const running = worker.run();
    const client = await SessionClient.connect({ address, namespace: config.namespace, store, taskQueue: TASK_QUEUE });
    try {
      const text = process.argv.slice(2).join(' ').trim() || 'What should I pack for 3 days in Oslo?';
      const { sessionId } = await client.start({});
      const reply = await client.send(sessionId, text);
      for (const event of await client.events(sessionId)) {
        if (isEventOfType(event, 'tool/call'))
          process.stdout.write(`call ${event.data.name} ${event.data.arguments}\n`);
        if (isEventOfType(event, 'tool/result'))
          process.stdout.write(`result ${JSON.stringify(event.data.message.content)}\n`);
      }
      process.stdout.write(`reply (turn ${reply.turn}, ${reply.outcome}): ${reply.text}\n`);
    } finally {
      await client.temporal.connection.close();
      worker.shutdown();
      await running;
    }
  } finally {
    await offline?.close();
    await store.close();
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  await main();
}
