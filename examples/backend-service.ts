/**
 * A backend service on sessionlog's TypeScript API: start a session, send a message while
 * streaming the reply's tokens from the live log, then read the derived history.
 *
 * Against a running `sessionlog dev`, from its folder or any folder below it:
 *
 *   npx tsx examples/backend-service.ts "What is 6 times 7?"
 *
 * The Temporal address and the store come from TEMPORAL_ADDRESS / SESSIONLOG_STORE (and the
 * other DESIGN §9 variables), else from the running `sessionlog dev`, found as the CLI finds it
 * (the nearest .sessionlog/dev.json, or SESSIONLOG_HOME's: examples/find-dev.ts).
 * The service needs the same store the workers write to: commands go through Temporal, reads
 * come straight from the store.
 */
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import {
  SessionClient,
  openStore,
  resolveConfig,
  textOf,
  type Message,
  type Reply,
  type SessionEvent,
} from '../src/index.js';
import { findDev } from './find-dev.js';

export type ExampleOptions = {
  /** The user message to send. */
  text?: string;
  /** Continue this session instead of starting a new one. */
  sessionId?: string;
};

export type ExampleResult = {
  sessionId: string;
  /** The reply's text as it streamed from `assistant/chunk` events. */
  streamed: string;
  reply: Reply;
  history: Message[];
};

const DEFAULT_TEXT = 'Hello from a backend service! How many words are in this sentence?';

/**
 * The example itself: everything goes through `client`; `log` receives each output line
 * (`write` receives the streamed tokens, which arrive without line breaks).
 */
export async function runExample(
  client: SessionClient,
  log: (line: string) => void,
  options: ExampleOptions = {},
  write: (text: string) => void = () => undefined,
): Promise<ExampleResult> {
  const text = options.text ?? DEFAULT_TEXT;
  const { sessionId } = await client.start(options.sessionId ? { sessionId: options.sessionId } : {});
  log(`session ${sessionId}`);

  // Tail the log from its current end, so everything the coming turn writes streams in. A turn
  // ends with `turn/end`; this session runs one turn at a time, so the first one after `from`
  // belongs to the message sent below.
  const from = await client.store.nextSeq(sessionId);
  const follow = new AbortController();
  let streamed = '';
  const streaming = (async () => {
    for await (const event of client.follow(sessionId, from, follow.signal)) {
      if (event.type === 'assistant/chunk') {
        const { chunk } = (event as SessionEvent<'assistant/chunk'>).data;
        if (chunk.kind === 'text-delta') {
          streamed += chunk.text;
          write(chunk.text);
        }
      } else if (event.type === 'tool/call') {
        const call = (event as SessionEvent<'tool/call'>).data;
        log(`[tool ${call.name}(${call.arguments})]`);
      } else if (event.type === 'turn/end') {
        return;
      }
    }
  })();

  let reply: Reply;
  try {
    // Resolves when the turn that answers this message has finished: its reply is then stored.
    reply = await client.send(sessionId, text);
  } finally {
    // The turn's events are all stored once send has returned; the abort only matters when
    // send failed, or when the turn ended without a `turn/end` this follow could see.
    const stop = setTimeout(() => follow.abort(), 10_000);
    await streaming;
    clearTimeout(stop);
    follow.abort();
  }
  write('\n');
  log(`turn ${reply.turn} ${reply.outcome}: ${reply.text}`);

  const history = await client.history(sessionId);
  log(`history (${history.length} messages):`);
  for (const message of history) log(`  ${message.role}: ${textOf(message.content)}`);
  return { sessionId, streamed, reply, history };
}

async function main(): Promise<void> {
  const config = resolveConfig(process.env);
  const dev = config.temporalAddress === undefined ? findDev() : undefined;
  const address = config.temporalAddress ?? dev?.temporalAddress;
  if (address === undefined) {
    process.stderr.write(
      'TEMPORAL_ADDRESS is not set and no running `sessionlog dev` was found (no .sessionlog/dev.json here or above, or in SESSIONLOG_HOME): start `sessionlog dev`, or set TEMPORAL_ADDRESS and SESSIONLOG_STORE\n',
    );
    process.exitCode = 2;
    return;
  }
  // An explicit SESSIONLOG_STORE wins; else the dev stack's store; else the default.
  const store = await openStore(process.env.SESSIONLOG_STORE ? config.store : (dev?.store ?? config.store));
  try {
    const client = await SessionClient.connect({
      address,
      namespace: config.namespace,
      store,
      taskQueue: config.taskQueue,
      tunables: config.tunables,
    });
    try {
      const text = process.argv.slice(2).join(' ').trim();
      await runExample(
        client,
        (line) => process.stdout.write(`${line}\n`),
        text ? { text } : {},
        (chunk) => process.stdout.write(chunk),
      );
    } finally {
      await client.temporal.connection.close();
    }
  } finally {
    await store.close();
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  await main();
}
