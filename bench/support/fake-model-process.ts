/**
 * The fake model server (src/model/fake-server.ts) in a process of its own, for the peers phase
 * of bench/turns.ts. The fake counts every prompt with the DeepSeek tokenizer to report usage,
 * which costs ~1 s of CPU per request at 100k prompt tokens: in a child process that cost stays
 * out of the worker's CPU figure and off its event loop, as a real provider's prefill would.
 *
 * Every peer gets the same reply for the same turn: ~1,600 characters of deterministic text
 * chosen by the turn number that opens the user's message (`question N: …`).
 */
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { startFakeModelServer, type FakeReplyMatcher } from '../../src/model/fake-server.js';
import { ASSISTANT_CHARS, TextSource } from './events.js';

/** The user message of turn `turn`, the same for every peer. */
export function questionFor(turn: number): string {
  return `question ${turn}: how many words are in this sentence?`;
}

/** The reply the fake model streams for turn `turn`. */
export function replyTextFor(turn: number): string {
  return new TextSource(turn).text(ASSISTANT_CHARS);
}

const matcher: FakeReplyMatcher = ({ lastUserText }) => {
  const turn = /^question (\d+):/.exec(lastUserText)?.[1];
  return turn === undefined ? undefined : { text: replyTextFor(Number(turn)) };
};

export type FakeModelProcess = { baseURL: string; close(): Promise<void> };

/**
 * Starts the fake model server in a child process (the same tsx loader as this one).
 * `tokenDelayMs`: pause between streamed pieces (default 0: the reply streams as fast as the socket takes it).
 */
export async function startFakeModelProcess(options: { tokenDelayMs?: number } = {}): Promise<FakeModelProcess> {
  const child: ChildProcess = fork(fileURLToPath(import.meta.url), ['--serve', String(options.tokenDelayMs ?? 0)], {
    execArgv: process.execArgv,
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const baseURL = await new Promise<string>((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code) =>
      reject(new Error(`the fake model process exited with code ${code} before it listened`)),
    );
    child.once('message', (message) => resolve((message as { baseURL: string }).baseURL));
  });
  child.removeAllListeners('exit');
  return {
    baseURL,
    close: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}

async function serve(tokenDelayMs: number): Promise<void> {
  const fake = await startFakeModelServer({ matcher, tokenDelayMs });
  // The server records every request body (up to ~0.5 MB each here); forget them as we go.
  const forget = setInterval(() => {
    fake.reset();
    fake.setMatcher(matcher);
  }, 2_000);
  const stop = () => {
    clearInterval(forget);
    void fake.close().finally(() => process.exit(0));
  };
  process.on('SIGTERM', stop);
  process.on('disconnect', stop);
  process.send?.({ baseURL: fake.baseURL });
}

if (process.argv[2] === '--serve' && process.send) await serve(Number(process.argv[3] ?? 0));
