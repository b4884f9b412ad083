/**
 * Fast resumption (issue 25): a client that reconnects to a turn in progress, how long until
 * it has caught up with what the log held when it reconnected, and how many bytes that took.
 * The reply is 4,000 tokens from the fake model (one word per token, `--token-delay` ms
 * apart); the client leaves after half of it and reconnects at once, through
 *
 * - the AI SDK UI message stream's resume (`GET /ai-sdk/chat/:id/stream`): the missed text
 *   comes coalesced, one delta per text part;
 * - the OpenAI Responses stream's rejoin from the start (`GET /openai/v1/responses/:id?stream=true`):
 *   the missed deltas coalesced, one per output item (sequence numbers keep growing);
 * - the LangGraph run stream's rejoin (`GET /langgraph/threads/:id/runs/:run/stream`, stream
 *   mode `messages-tuple`): one `AIMessageChunk` for the text so far;
 * - the native event stream from seq 0 with `?coalesce=true`: one `assistant/chunk` per run of chunks.
 *
 * "Caught up": the text received covers every text chunk the log held at the reconnect.
 *
 *   scripts/temporal-dev-server run -- npx tsx bench/resume.ts [--reps 5] [--tokens 4000] [--token-delay 1]
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { SessionClient } from '../src/client/session-client.js';
import { startGateway } from '../src/gateway/index.js';
import { encodeResponseId } from '../src/gateway/openai/ids.js';
import { startFakeModelServer } from '../src/model/fake-server.js';
import { openSqliteStore } from '../src/persistence/index.js';
import { startInProcessStack } from './support/in-process.js';
import { fmtInt, fmtMs, machineLine, median, printGrid } from './support/report.js';

const { values } = parseArgs({
  options: {
    reps: { type: 'string', default: '5' },
    tokens: { type: 'string', default: '4000' },
    'token-delay': { type: 'string', default: '1' },
  },
});
const REPS = Number(values.reps);
const TOKENS = Number(values.tokens);
const TOKEN_DELAY = Number(values['token-delay']);
const REPLY = Array.from({ length: TOKENS }, (_, i) => `w${i}`).join(' ');

/** Reads an SSE body until `done(text so far)`; returns the time it took, the bytes and the text. */
async function readUntil(
  response: Response,
  textOf: (data: unknown) => string,
  done: (text: string) => boolean,
  started: number,
): Promise<{ ms: number; bytes: number; text: string }> {
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  let buffered = '';
  let bytes = 0;
  let text = '';
  for (;;) {
    const { value, done: ended } = await reader.read();
    if (ended) break;
    bytes += value.byteLength;
    buffered += decoder.decode(value, { stream: true });
    const frames = buffered.split('\n\n');
    buffered = frames.pop()!;
    for (const frame of frames) {
      const data = frame.split('\n').find((line) => line.startsWith('data: '));
      if (!data || data === 'data: [DONE]') continue;
      text += textOf(JSON.parse(data.slice(6)) as unknown);
    }
    if (done(text)) {
      const ms = performance.now() - started;
      await reader.cancel();
      return { ms, bytes, text };
    }
  }
  throw new Error('the stream ended before it caught up');
}

/** The id of the session's first user message. */
async function messageIdOf(client: SessionClient, sessionId: string): Promise<string> {
  return ((await client.events(sessionId, 0)).find((e) => e.type === 'user/message')!.data as { id: string }).id;
}

/** The text of the turn's text chunks the log holds now. */
async function loggedText(client: SessionClient, sessionId: string): Promise<string> {
  let text = '';
  for (const event of await client.events(sessionId, 0))
    if (event.type === 'assistant/chunk') {
      const chunk = (event.data as { chunk: { kind: string; text?: string } }).chunk;
      if (chunk.kind === 'text-delta') text += chunk.text ?? '';
    }
  return text;
}

async function main(): Promise<void> {
  const address = process.env.TEMPORAL_ADDRESS;
  if (!address)
    throw new Error('set TEMPORAL_ADDRESS (run: scripts/temporal-dev-server run -- npx tsx bench/resume.ts)');
  Runtime.install({ logger: new DefaultLogger('ERROR') });
  console.log(
    `bench/resume.ts · ${machineLine()} · ${REPS} reps · a ${TOKENS}-token reply, ${TOKEN_DELAY} ms per token, left at half`,
  );
  const dir = mkdtempSync(join(tmpdir(), 'sessionlog-bench-resume-'));
  const store = openSqliteStore(join(dir, 'sessions.db'));
  const fake = await startFakeModelServer({ tokenDelayMs: TOKEN_DELAY, firstTokenDelayMs: 0 });
  fake.setMatcher(({ lastUserText }) => (lastUserText.startsWith('long') ? { text: REPLY } : undefined));
  const stack = await startInProcessStack({ address, store, baseURL: fake.baseURL, name: 'resume' });
  const client = stack.client;
  const gateway = await startGateway({
    client,
    host: '127.0.0.1',
    port: 0,
    bodyLimitBytes: 1024 * 1024,
    defaultAgent: { model: 'fake' },
  });
  const APIS = ['ai-sdk', 'openai', 'langgraph', 'native'] as const;
  const results: Record<(typeof APIS)[number], Array<{ ms: number; bytes: number; missed: number }>> = {
    'ai-sdk': [],
    openai: [],
    langgraph: [],
    native: [],
  };
  try {
    for (let rep = 0; rep < REPS; rep++) {
      for (const api of APIS) {
        const id = `resume-${api}-${rep}-${randomUUID().slice(0, 8)}`;
        const text = `long ${rep}`;
        const post = await fetch(`${gateway.url}/ai-sdk/chat`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({
            id,
            trigger: 'submit-message',
            messages: [{ id: 'u1', role: 'user', parts: [{ type: 'text', text }] }],
          }),
        });
        // The client leaves after half of the reply.
        await readUntil(
          post,
          (chunk) => ((chunk as { type: string }).type === 'text-delta' ? (chunk as { delta: string }).delta : ''),
          (so) => so.length >= REPLY.length / 2,
          performance.now(),
        );
        const missed = (await loggedText(client, id)).length;
        const started = performance.now();
        let response: Response;
        let textOf: (data: unknown) => string;
        if (api === 'ai-sdk') {
          response = await fetch(`${gateway.url}/ai-sdk/chat/${id}/stream`);
          textOf = (chunk) =>
            (chunk as { type: string }).type === 'text-delta' ? (chunk as { delta: string }).delta : '';
        } else if (api === 'openai') {
          const responseId = encodeResponseId({
            sessionId: id,
            anchor: { kind: 'message', messageId: await messageIdOf(client, id) },
          });
          response = await fetch(`${gateway.url}/openai/v1/responses/${responseId}?stream=true`);
          textOf = (event) =>
            (event as { type: string }).type === 'response.output_text.delta' ? (event as { delta: string }).delta : '';
        } else if (api === 'langgraph') {
          // A run's id is the id of the user message its turn starts with.
          const runId = await messageIdOf(client, id);
          response = await fetch(
            `${gateway.url}/langgraph/threads/${id}/runs/${runId}/stream?stream_mode=messages-tuple`,
          );
          textOf = (data) => (Array.isArray(data) ? String((data[0] as { content?: unknown }).content ?? '') : '');
        } else {
          response = await fetch(`${gateway.url}/v1/sessions/${id}/events?coalesce=true`, {
            headers: { accept: 'text/event-stream' },
          });
          textOf = (event) => {
            const e = event as { type: string; data: { chunk?: { kind: string; text?: string } } };
            return e.type === 'assistant/chunk' && e.data.chunk?.kind === 'text-delta' ? (e.data.chunk.text ?? '') : '';
          };
        }
        if (response.status !== 200) throw new Error(`${api} reconnect answered ${response.status}`);
        const caught = await readUntil(response, textOf, (so) => so.length >= missed, started);
        results[api].push({ ms: caught.ms, bytes: caught.bytes, missed });
        // Let the turn finish before the next rep.
        for (let i = 0; i < 600 && (await client.status(id)).phase !== 'idle'; i++)
          await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }
  } finally {
    await gateway.close();
    await stack.close();
    await fake.close();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
  printGrid(
    `Reconnect to caught-up, ${TOKENS}-token reply left at half (median of ${REPS})`,
    ['reconnect through', 'text missed (chars)', 'time to caught up', 'bytes until caught up'],
    APIS.map((api) => [
      {
        'ai-sdk': 'AI SDK resume',
        openai: 'OpenAI rejoin from the start',
        langgraph: 'LangGraph join stream (messages-tuple)',
        native: 'native events ?coalesce=true from seq 0',
      }[api],
      fmtInt(median(results[api].map((r) => r.missed))),
      fmtMs(median(results[api].map((r) => r.ms))),
      fmtInt(median(results[api].map((r) => r.bytes))),
    ]),
  );
}

await main();
