/**
 * A LangGraph run outlives the gateway that started it (issue 25): `@langchain/langgraph-sdk`
 * streams a run through one `sessionlog serve` process, that process is killed (SIGKILL)
 * mid-reply, and a second gateway process joins the run's stream from the last event id the
 * client saw and waits for it: the reply arrives whole, with nothing repeated or lost, because
 * the run is a turn of the durable workflow and its stream is the log's tail.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@langchain/langgraph-sdk';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startFakeModelServer, type FakeModelServer } from '../../src/model/fake-server.js';
import { startCli, type CliProcess } from '../support/cli-process.js';

const dir = mkdtempSync(join(tmpdir(), 'sessionlog-langgraph-kill-'));
const words = Array.from({ length: 400 }, (_, i) => `k${i}`).join(' ');

let fake: FakeModelServer;
let worker: CliProcess;
let first: CliProcess;
let second: CliProcess;

beforeAll(async () => {
  fake = await startFakeModelServer({ model: 'fake', tokenDelayMs: 5 });
  fake.setMatcher(({ lastUserText }) => (lastUserText === 'a long answer' ? { text: words } : undefined));
  const env = {
    SESSIONLOG_STORE: `sqlite:${join(dir, 'sessions.db')}`,
    SESSIONLOG_TASK_QUEUE: `langgraph-kill-${randomUUID()}`,
    SESSIONLOG_MODEL: 'fake',
    OPENAI_API_KEY: 'langgraph-kill-key',
    OPENAI_BASE_URL: fake.baseURL,
    SESSIONLOG_PORT: '0',
  };
  worker = startCli('worker', dir, env);
  first = startCli('serve', dir, env);
  second = startCli('serve', dir, env);
  await worker.waitFor(/(worker on )/);
}, 180_000);

afterAll(async () => {
  await Promise.all([second?.stop(), worker?.stop(), first?.stop()]);
  await fake?.close();
}, 60_000);

it('joins a run on a second gateway after the first was killed mid-reply: the reply arrives whole', async () => {
  const urlA = await first.waitFor(/gateway: (http:\/\/[^/\s]+)\/v1/);
  const urlB = await second.waitFor(/gateway: (http:\/\/[^/\s]+)\/v1/);
  const a = new Client({ apiUrl: `${urlA}/langgraph` });
  const b = new Client({ apiUrl: `${urlB}/langgraph` });
  const thread = await a.threads.create();
  let runId = '';
  let lastId: string | undefined;
  let text = '';
  let failed: unknown;
  try {
    for await (const part of a.runs.stream(thread.thread_id, 'agent', {
      input: { messages: [{ role: 'user', content: 'a long answer' }] },
      streamMode: 'messages-tuple',
    })) {
      if (part.event === 'metadata') runId = (part.data as { run_id: string }).run_id;
      if (part.event === 'messages') {
        text += (part.data as unknown as [{ content: string }])[0].content;
        lastId = (part as unknown as { id?: string }).id;
        if (text.length > 100 && first.alive()) first.proc.kill('SIGKILL');
      }
    }
  } catch (error) {
    failed = error; // the SDK gives up reconnecting to the dead gateway
  }
  expect(first.alive()).toBe(false);
  expect(failed).toBeDefined();
  expect(text.length).toBeGreaterThan(100);
  expect(text.length).toBeLessThan(words.length);

  let rest = '';
  for await (const part of b.runs.joinStream(thread.thread_id, runId, {
    lastEventId: lastId,
    streamMode: 'messages-tuple',
  }))
    if (part.event === 'messages') rest += (part.data as [{ content: string }])[0].content;
  expect(text + rest).toBe(words);
  const values = (await b.runs.join(thread.thread_id, runId)) as { messages: Array<{ type: string; content: string }> };
  expect(values.messages.map((m) => m.type)).toEqual(['human', 'ai']);
  expect(values.messages[1]!.content).toBe(words);
  expect((await b.runs.get(thread.thread_id, runId)).status).toBe('success');
}, 120_000);
