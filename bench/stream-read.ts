/**
 * Reading a streamed reply: the CPU a worker spends turning a model's event stream into the
 * reply, ours (`streamCompletion`, src/model/stream.ts) against the `openai` client's own stream
 * (what the naive chat reads with), on the same bytes. Run alone: `npx tsx bench/stream-read.ts`.
 *
 * The fake model server streams a 1,600-character reply (about a chunk per word, as it does in
 * bench/turns.ts) once over HTTP; its body is kept and then served from memory, cut into
 * 16 KiB reads, to both readers in turn, so neither the network nor the server is timed. Ours
 * runs as the engine runs it (chunks coalesced and delivered, the last ones held, the provider's
 * default idle limit of 120 s); the client's is iterated chunk by chunk and the text joined.
 * Process CPU per reply, median of rounds after two warm-up rounds.
 */
import OpenAI from 'openai';
import { startFakeModelServer } from '../src/model/fake-server.js';
import { streamCompletion } from '../src/model/stream.js';
import { fmtMs, machineLine, median, printGrid, printTable } from './support/report.js';

const REPLY_CHARS = 1_600;
const READ_BYTES = 16 * 1024;
const REPLIES_PER_ROUND = 200;
const ROUNDS = 9;
const IDLE_TIMEOUT_MS = 120_000;

const WORDS = 'the session log is the single source of truth and every message a model sees is derived from it'.split(
  ' ',
);

async function recordedBody(): Promise<{ body: Buffer; events: number; text: string }> {
  let text = '';
  for (let i = 0; text.length < REPLY_CHARS; i++) text += `${WORDS[i % WORDS.length]} `;
  const server = await startFakeModelServer({ replies: [{ text }] });
  try {
    const response = await fetch(`${server.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'fake',
        stream: true,
        stream_options: { include_usage: true },
        messages: [{ role: 'user', content: 'hello' }],
      }),
    });
    const body = Buffer.from(await response.arrayBuffer());
    return { body, events: body.toString('utf8').match(/^data: /gm)?.length ?? 0, text };
  } finally {
    await server.close();
  }
}

/** A client whose every request is answered with `body`, from memory, in reads of `READ_BYTES`. */
function replayingClient(body: Buffer): OpenAI {
  const reads: Uint8Array[] = [];
  for (let at = 0; at < body.length; at += READ_BYTES) reads.push(body.subarray(at, at + READ_BYTES));
  const replay = () =>
    new Response(
      new ReadableStream<Uint8Array>({
        start(controller) {
          for (const read of reads) controller.enqueue(read);
          controller.close();
        },
      }),
      { status: 200, headers: { 'content-type': 'text/event-stream' } },
    );
  return new OpenAI({ apiKey: 'bench', baseURL: 'http://127.0.0.1:9/v1', fetch: async () => replay() });
}

const REQUEST = { model: 'fake', messages: [{ role: 'user' as const, content: 'hello' }] };

async function ours(client: OpenAI): Promise<string> {
  const result = await streamCompletion({
    client,
    request: { ...REQUEST, stream: true },
    onChunks: () => undefined,
    holdLastChunks: true,
    idleTimeoutMs: IDLE_TIMEOUT_MS,
  });
  const block = result.content.find((b) => b.type === 'text');
  return block?.type === 'text' ? block.text : '';
}

async function theClients(client: OpenAI): Promise<string> {
  const stream = await client.chat.completions.create({
    ...REQUEST,
    stream: true,
    stream_options: { include_usage: true },
  });
  let text = '';
  for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
  return text;
}

/** Process CPU (user + system) per reply, in ms. */
async function cpuPerReply(read: () => Promise<unknown>): Promise<number> {
  const before = process.cpuUsage();
  for (let i = 0; i < REPLIES_PER_ROUND; i++) await read();
  const used = process.cpuUsage(before);
  return (used.user + used.system) / 1000 / REPLIES_PER_ROUND;
}

async function main(): Promise<void> {
  console.log(`# Reading a streamed reply\n\n${machineLine()}`);
  const { body, events, text } = await recordedBody();
  const client = replayingClient(body);
  const expected = text;
  for (const [name, read] of [
    ['ours', ours],
    ["the openai client's", theClients],
  ] as const) {
    const got = await read(client);
    if (got !== expected) throw new Error(`${name} read ${got.length} characters, not the reply's ${expected.length}`);
  }
  const oursMs: number[] = [];
  const clientMs: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    // Alternately, so the machine's state is shared.
    oursMs.push(await cpuPerReply(() => ours(client)));
    clientMs.push(await cpuPerReply(() => theClients(client)));
  }
  const o = median(oursMs.slice(2));
  const c = median(clientMs.slice(2));
  printGrid(
    `CPU per reply read (${REPLY_CHARS.toLocaleString('en-US')} characters in ${events} events, ${body.length.toLocaleString('en-US')} bytes; median of ${ROUNDS - 2} rounds of ${REPLIES_PER_ROUND})`,
    ['reader', 'CPU per reply', 'each round'],
    [
      ['ours (streamCompletion: chunks coalesced, idle limit)', fmtMs(o), oursMs.map((ms) => ms.toFixed(2)).join(' ')],
      ["the openai client's stream", fmtMs(c), clientMs.map((ms) => ms.toFixed(2)).join(' ')],
    ],
  );
  printTable('Reading a streamed reply', [
    { name: "ours ÷ the openai client's, CPU per reply", value: `${(o / c).toFixed(2)}×` },
  ]);
}

await main();
