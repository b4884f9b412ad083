/**
 * Ctrl-C in `sessionlog chat` on a terminal, where it arrives as a key (readline's raw mode),
 * not as a signal: while a reply streams it cancels that turn and the chat goes on; at the
 * prompt it leaves. The banner says so. Driven through runChat's streams with a fake TTY.
 */
import { PassThrough, Writable } from 'node:stream';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { runChat } from '../../src/cli/chat.js';
import type { SessionEvent } from '../../src/session/index.js';
import { eventually } from '../support/log-wait.js';
import { startStack, type Stack } from '../support/stack.js';

let stack: Stack;
beforeAll(async () => {
  stack = await startStack();
});
afterAll(async () => {
  await stack?.close();
});
beforeEach(() => {
  stack.fake.reset();
});

/** A terminal's output: chat draws its spinner and readline its prompt as on a real one. */
class TerminalOutput extends Writable {
  text = '';
  readonly isTTY = true;
  readonly columns = 120;
  override _write(chunk: Buffer | string, _encoding: BufferEncoding, done: () => void): void {
    this.text += chunk.toString();
    done();
  }
}

const CTRL_C = '\x03';
let counter = 0;
const newId = (name: string) => `chat-${name}-${Date.now()}-${counter++}`;

function startChat(sessionId: string) {
  const input = new PassThrough();
  const output = new TerminalOutput();
  let ended = false;
  const done = runChat(stack.client, { sessionId, input, output }).finally(() => (ended = true));
  return {
    output,
    done,
    ended: () => ended,
    press: (keys: string) => input.write(keys),
    waitFor: (pattern: RegExp, from = 0) =>
      eventually(
        async () => {
          const match = pattern.exec(output.text.slice(from));
          return Promise.resolve(match ? from + match.index + match[0].length : undefined);
        },
        60_000,
        20,
      ).catch((error: unknown) => {
        throw new Error(`chat output never matched ${pattern}:\n${JSON.stringify(output.text)}`, { cause: error });
      }),
  };
}

describe('Ctrl-C in sessionlog chat on a terminal', () => {
  it('the banner says Ctrl-C cancels a streaming reply and how to leave', async () => {
    const chat = startChat(newId('banner'));
    await chat.waitFor(/you> /);
    chat.press('/quit\n');
    await chat.done;
    expect(chat.output.text).toContain('Ctrl-C while a reply streams cancels it; /quit or Ctrl-D leaves');
    expect(chat.output.text).not.toContain('/cancel');
  });

  it('while a reply streams cancels that turn (aborted in the log) and the chat goes on', async () => {
    const id = newId('cancel');
    const long = Array.from({ length: 200 }, (_, i) => `word${i}`).join(' ');
    stack.fake.setMatcher(({ lastUserText }) =>
      lastUserText === 'talk a lot' ? { text: long } : { text: `echo: ${lastUserText}` },
    );
    stack.fake.configure({ tokenDelayMs: 50 });
    const chat = startChat(id);
    let at = await chat.waitFor(/you> /);
    chat.press('talk a lot\n');
    at = await chat.waitFor(/bot> word0/, at);
    chat.press(CTRL_C);
    at = await chat.waitFor(/\(turn ended: aborted\)\n/, at);
    at = await chat.waitFor(/you> /, at);
    expect(chat.ended()).toBe(false);
    stack.fake.configure({ tokenDelayMs: 0 });
    chat.press('still here?\n');
    at = await chat.waitFor(/echo: still here\?\n/, at);
    await chat.waitFor(/you> /, at);
    chat.press('/quit\n');
    await chat.done;
    stack.fake.setMatcher(undefined);

    const ends = (await stack.client.events(id))
      .filter((e) => e.type === 'turn/end')
      .map((e) => (e as SessionEvent<'turn/end'>).data.reason);
    expect(ends).toEqual([{ kind: 'aborted', reason: { kind: 'user' } }, { kind: 'completed' }]);
  });

  it('at the prompt leaves the chat', async () => {
    const chat = startChat(newId('leave'));
    await chat.waitFor(/you> /);
    chat.press(CTRL_C);
    await chat.done;
    expect(chat.ended()).toBe(true);
  });
});
