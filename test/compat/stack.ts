/**
 * The stack every compatibility test runs against: a Temporal dev server (global setup), a
 * worker, the fake model and the real gateway, as test/gateway/openai.test.ts builds it, with a
 * recording proxy in front of the gateway so a test can read what a client library actually
 * sent (method, path, headers, JSON body) and what the gateway answered (status, headers).
 *
 * Gateway option names live only here: when the gateway's options change, this file changes.
 *
 * Set COMPAT_RECORD=<dir> to write every call of a test file to `<dir>/<label>.json` when its
 * stack closes (the ground truth of what each client sends).
 */
import { randomUUID } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { startGateway, type RunningGateway } from '../../src/gateway/index.js';
import type { FakeChatBody, FakeReply } from '../../src/model/fake-server.js';
import { textOf, type Message } from '../../src/session/index.js';
import { startStack, type Stack } from '../support/stack.js';

/** The model the gateway runs when a client names one it cannot run (the fake model, echoing `echo: <last user text>`). */
export const DEFAULT_MODEL = 'fake';
/** The system prompt of a session whose client sent none. */
export const DEFAULT_SYSTEM = 'You are a test assistant.';
/**
 * Any key: the gateway checks none on loopback without a token. One per test file: the key
 * scopes a caller's transcripts, and the files' stacks share one Temporal namespace (each with
 * its own store), so two files sending the same transcript must not name the same session.
 */
export const API_KEY = `sk-compat-${randomUUID()}`;

/** One HTTP exchange between a client library and the gateway, as the proxy saw it. */
export type RecordedCall = {
  method: string;
  /** Path and query, e.g. `/openai/v1/responses`. */
  url: string;
  requestHeaders: Record<string, string>;
  /** Parsed JSON body, else the raw text, else undefined. */
  body: unknown;
  status: number;
  responseHeaders: Record<string, string>;
};

export type CompatStack = {
  stack: Stack;
  gateway: RunningGateway;
  /** What a client library takes as its base URL: the proxy's `/openai/v1`. */
  baseURL: string;
  apiKey: string;
  /** Every call since the stack started (or since {@link clearCalls}), oldest first. */
  calls(): RecordedCall[];
  /** The calls whose path (without query) equals `path` (relative to `/openai/v1`), e.g. `/chat/completions`. */
  callsTo(path: string, method?: string): RecordedCall[];
  clearCalls(): void;
  /** Resets the fake model (matcher, queue, delays) between tests. */
  resetFake(): void;
  close(): Promise<void>;
};

const API_PREFIX = '/openai/v1';

/**
 * Starts the stack for one test file. `label` names the recording written under COMPAT_RECORD.
 */
export async function startCompatStack(label: string): Promise<CompatStack> {
  const stack = await startStack({
    worker: { agent: { model: DEFAULT_MODEL, system: DEFAULT_SYSTEM, tools: ['calculator'] } },
  });
  const gateway = await startGateway({
    client: stack.client,
    host: '127.0.0.1',
    port: 0,
    bodyLimitBytes: 1024 * 1024,
    defaultAgent: { model: DEFAULT_MODEL, system: DEFAULT_SYSTEM },
  });
  const proxy = await startRecordingProxy(gateway.url);
  const all: RecordedCall[] = [];
  let since = 0;
  proxy.onCall((call) => all.push(call));
  const calls = () => all.slice(since);
  return {
    stack,
    gateway,
    baseURL: `${proxy.url}${API_PREFIX}`,
    apiKey: API_KEY,
    calls,
    callsTo: (path, method = 'POST') =>
      calls().filter((c) => c.method === method && c.url.split('?')[0] === `${API_PREFIX}${path}`),
    clearCalls: () => {
      since = all.length;
    },
    resetFake: () => {
      stack.fake.reset();
      stack.fake.setMatcher(undefined);
      stack.fake.configure({ tokenDelayMs: 0, firstTokenDelayMs: 0 });
    },
    async close() {
      const dir = process.env.COMPAT_RECORD;
      if (dir) {
        mkdirSync(dir, { recursive: true });
        writeFileSync(join(dir, `${label}.json`), JSON.stringify(all, null, 2));
      }
      await proxy.close();
      await gateway.close();
      await stack.close();
    },
  };
}

type RecordingProxy = { url: string; onCall(listener: (call: RecordedCall) => void): void; close(): Promise<void> };

/**
 * A pass-through HTTP proxy that records each exchange once its response headers arrive.
 * Streams are piped as they come; a client that hangs up closes the upstream request too, so
 * the gateway sees the disconnect as it would without the proxy.
 */
async function startRecordingProxy(target: string): Promise<RecordingProxy> {
  const upstreamBase = new URL(target);
  const listeners: Array<(call: RecordedCall) => void> = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      const upstream = http.request(
        new URL(req.url ?? '/', upstreamBase),
        { method: req.method, headers: { ...req.headers, host: upstreamBase.host } },
        (answer) => {
          const call: RecordedCall = {
            method: req.method ?? 'GET',
            url: req.url ?? '/',
            requestHeaders: flatHeaders(req.headers),
            body: parseBody(raw),
            status: answer.statusCode ?? 0,
            responseHeaders: flatHeaders(answer.headers),
          };
          for (const listener of listeners) listener(call);
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
        },
      );
      upstream.on('error', (error) => {
        if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' }).end(`proxy: ${error.message}`);
        else res.destroy();
      });
      res.on('close', () => {
        if (!res.writableFinished) upstream.destroy();
      });
      upstream.end(raw);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    onCall: (listener) => listeners.push(listener),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function flatHeaders(headers: http.IncomingHttpHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) continue;
    out[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  return out;
}

function parseBody(raw: Buffer): unknown {
  if (raw.length === 0) return undefined;
  const text = raw.toString('utf8');
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    // Not JSON (a form or a plain body): keep the text as it came.
    void error;
    return text;
  }
}

// ---------------------------------------------------------------------------------------------
// Reading the server side through the native SessionClient

/** The session's derived history, one line per message: `user: hi`, `assistant: echo: hi`, `assistant: call f {"a":1}`, `tool: result`. */
export async function historyLines(compat: CompatStack, sessionId: string): Promise<string[]> {
  return describeMessages(await compat.stack.client.history(sessionId));
}

export function describeMessages(messages: readonly Message[]): string[] {
  const lines: string[] = [];
  for (const message of messages) {
    for (const block of message.content) {
      if (block.type === 'tool-result') lines.push(`tool: ${textOf(block.content)}`);
      if (block.type === 'tool-call') lines.push(`assistant: call ${block.name} ${block.arguments}`);
    }
    const text = textOf(message.content);
    if (text !== '') lines.push(`${message.role}: ${text}`);
  }
  return lines;
}

/** How many turns the session's log holds. */
export async function turnCount(compat: CompatStack, sessionId: string): Promise<number> {
  return (await compat.stack.client.turns(sessionId)).turns.length;
}

/** Every session the store holds, by id. */
export async function sessionIds(compat: CompatStack): Promise<Set<string>> {
  return new Set((await compat.stack.client.list()).map((s) => s.id));
}

/** The sessions created since `before` was taken. */
export async function newSessions(compat: CompatStack, before: ReadonlySet<string>): Promise<string[]> {
  return [...(await sessionIds(compat))].filter((id) => !before.has(id));
}

/** Waits (bounded) until the session's last turn has ended, e.g. after a client aborted its stream. */
export async function waitForTurnEnd(compat: CompatStack, sessionId: string): Promise<void> {
  for (let i = 0; i < 400; i++) {
    const { turns } = await compat.stack.client.turns(sessionId);
    if (turns.length > 0 && turns.at(-1)!.endedAt !== null) return;
    await sleep(50);
  }
  throw new Error(`the last turn of ${sessionId} did not end`);
}

// ---------------------------------------------------------------------------------------------
// Scripting the fake model

/** The function tool every client defines: `get_weather({city})`, which the client runs. */
export const WEATHER_TOOL = {
  name: 'get_weather',
  description: 'The weather in a city.',
  parameters: {
    type: 'object',
    properties: { city: { type: 'string' } },
    required: ['city'],
    additionalProperties: false,
  },
} as const;

/** The question that makes the fake model call get_weather, and the final answer it then gives. */
export const WEATHER_QUESTION = 'What is the weather in Oslo?';
export const weatherAnswer = (toolOutput: string) => `Oslo: ${toolOutput}.`;

/**
 * Scripts the fake model for a tool loop: asked {@link WEATHER_QUESTION} it calls get_weather
 * for Oslo; given the tool's result it answers {@link weatherAnswer}. Anything else is echoed.
 */
export function scriptWeatherTool(compat: CompatStack): void {
  compat.stack.fake.setMatcher(({ body, lastUserText }) => {
    const last = body.messages.at(-1)!;
    if (last.role === 'tool') return { text: weatherAnswer(contentString(last.content)) };
    if (lastUserText === WEATHER_QUESTION)
      return { text: '', toolCalls: [{ id: 'call_weather_1', name: WEATHER_TOOL.name, arguments: { city: 'Oslo' } }] };
    return undefined;
  });
}

/** Scripts a long, slow reply to `trigger` (so a client can drop its stream mid-reply); returns the reply. */
export function scriptLongReply(compat: CompatStack, trigger: string, words = 40, tokenDelayMs = 40): string {
  const text = Array.from({ length: words }, (_, i) => `w${i}`).join(' ');
  compat.stack.fake.setMatcher(({ lastUserText }): FakeReply | undefined =>
    lastUserText === trigger ? { text } : undefined,
  );
  compat.stack.fake.configure({ tokenDelayMs });
  return text;
}

/** The last chat request the fake model received, as `role: text` lines. */
export function lastModelPrompt(compat: CompatStack): string[] {
  const request = compat.stack.fake.chatRequests().at(-1);
  if (!request) return [];
  return request.messages.map((m: FakeChatBody['messages'][number]) => `${m.role}: ${contentString(m.content)}`);
}

function contentString(content: FakeChatBody['messages'][number]['content']): string {
  if (typeof content === 'string') return content;
  if (!content) return '';
  return content.map((part) => part.text ?? '').join('');
}
