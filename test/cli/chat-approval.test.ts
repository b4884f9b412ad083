/**
 * `sessionlog chat` driven through its streams (runChat takes input and output): a tool call
 * that needs approval is shown with its arguments and answered inline with y / n, the answer
 * reaches the log, and the streamed reply line keeps its `bot> ` prefix on a terminal (a
 * fake TTY whose output is rendered the way a terminal draws carriage returns and erases).
 */
import { PassThrough, Writable } from 'node:stream';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { runChat } from '../../src/cli/chat.js';
import type { SessionEvent, StoredEvent } from '../../src/session/index.js';
import { BUILTIN_TOOLS } from '../../src/tools/builtin.js';
import { ToolRegistry, type Tool } from '../../src/tools/registry.js';
import { eventually } from '../support/log-wait.js';
import { startStack, type Stack } from '../support/stack.js';

const runs: unknown[] = [];
const deployTool: Tool = {
  name: 'deploy',
  description: 'Deploys the service to a target.',
  parameters: { type: 'object', properties: { target: { type: 'string' } }, required: ['target'] },
  approval: 'always',
  run(args) {
    runs.push(args);
    return Promise.resolve({ text: `deployed to ${(args as { target: string }).target}` });
  },
};

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({
    worker: {
      tools: new ToolRegistry([...BUILTIN_TOOLS, deployTool]),
      agent: { model: 'fake', system: 'You are a test assistant.', tools: ['deploy'] },
    },
  });
});
afterAll(async () => {
  await stack?.close();
});
beforeEach(() => {
  stack.fake.reset();
  runs.length = 0;
});

/** Collects what chat writes; `isTTY` makes chat draw its spinner as on a terminal. */
class CapturedOutput extends Writable {
  text = '';
  constructor(readonly isTTY: boolean) {
    super();
  }
  readonly columns = 120;
  override _write(chunk: Buffer | string, _encoding: BufferEncoding, done: () => void): void {
    this.text += chunk.toString();
    done();
  }
}

/**
 * What a terminal shows for `raw`: printable characters overwrite the cell under the cursor;
 * `\r` returns to column 0, `\n` starts the next line, and the CSI sequences readline uses
 * (cursor to column, erase in line, cursor moves) act on the grid. Trailing blanks trimmed.
 */
function renderTerminal(raw: string): string[] {
  const rows: string[][] = [[]];
  let row = 0;
  let col = 0;
  const line = () => (rows[row] ??= []);
  for (let i = 0; i < raw.length; i++) {
    const c = raw[i]!;
    if (c === '\r') col = 0;
    else if (c === '\n') {
      row += 1;
      col = 0;
      line();
    } else if (c === '\x1b' && raw[i + 1] === '[') {
      const match = /^\[([0-9;]*)([A-Za-z])/.exec(raw.slice(i + 1));
      if (!match) continue;
      i += match[0].length;
      const n = match[1] === '' ? undefined : Number(match[1]!.split(';')[0]);
      const cells = line();
      switch (match[2]) {
        case 'G':
          col = (n ?? 1) - 1;
          break;
        case 'C':
          col += n ?? 1;
          break;
        case 'D':
          col = Math.max(0, col - (n ?? 1));
          break;
        case 'A':
          row = Math.max(0, row - (n ?? 1));
          break;
        case 'B':
          row += n ?? 1;
          line();
          break;
        case 'K':
          if ((n ?? 0) === 0) cells.length = Math.min(cells.length, col);
          else if (n === 1) for (let k = 0; k <= col && k < cells.length; k++) cells[k] = ' ';
          else cells.length = 0;
          break;
        case 'J':
          rows.length = row + 1;
          cells.length = Math.min(cells.length, col);
          break;
        default:
          break;
      }
    } else {
      const cells = line();
      while (cells.length < col) cells.push(' ');
      cells[col] = c;
      col += 1;
    }
  }
  return rows.map((cells) => cells.join('').trimEnd());
}

/** A chat session on the stack: write lines to it, wait for its output, end it. */
function startChat(sessionId: string, tty: boolean) {
  const input = new PassThrough();
  const output = new CapturedOutput(tty);
  const done = runChat(stack.client, { sessionId, input, output });
  return {
    output,
    type: (line: string) => input.write(`${line}\n`),
    /** Waits until the output written since `from` matches `pattern`; returns where the match ends. */
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
    async quit() {
      input.write('/quit\n');
      await done;
    },
  };
}

let counter = 0;
const newId = (name: string) => `chat-${name}-${Date.now()}-${counter++}`;
const ofType = <K extends StoredEvent['type']>(events: readonly StoredEvent[], type: K) =>
  events.filter((e): e is Extract<StoredEvent, { type: K }> => e.type === type);

describe('sessionlog chat with tool approval', () => {
  it('asks y/n inline showing the arguments; "y" approves in the log and the tool runs', async () => {
    const id = newId('yes');
    stack.fake.enqueueReplies(
      { text: 'Deploying.', toolCalls: [{ id: 'chat-call-1', name: 'deploy', arguments: { target: 'prod' } }] },
      { text: 'deployed, all good' },
    );
    const chat = startChat(id, false);
    let at = await chat.waitFor(/you> /);
    chat.type('deploy to prod');
    at = await chat.waitFor(
      /approve deploy\(\{"target":"prod"\}\)\? \[y\]es \/ \[n\]o \/ \[a\]lways for this session: /,
      at,
    );
    expect(runs).toEqual([]);
    chat.type('y');
    at = await chat.waitFor(/approved\n/, at);
    await chat.waitFor(/you> /, at);
    await chat.quit();

    expect(chat.output.text).toContain('[tool deploy({"target":"prod"})]');
    expect(chat.output.text).toContain('deployed, all good');
    expect(runs).toEqual([{ target: 'prod' }]);
    const approvals = ofType(await stack.client.events(id), 'tool/approval');
    expect(approvals.map((e) => e.data)).toEqual([
      { turn: 1, step: 1, callId: 'chat-call-1', decision: 'approve', by: 'chat' },
    ]);
  });

  it('"n" denies in the log; the tool does not run and the turn still ends', async () => {
    const id = newId('no');
    stack.fake.enqueueReplies(
      { text: 'Deploying.', toolCalls: [{ id: 'chat-call-2', name: 'deploy', arguments: { target: 'prod' } }] },
      { text: 'ok, I will not deploy' },
    );
    const chat = startChat(id, false);
    let at = await chat.waitFor(/you> /);
    chat.type('deploy to prod');
    at = await chat.waitFor(/approve deploy\(\{"target":"prod"\}\)\?.*: /, at);
    chat.type('n');
    at = await chat.waitFor(/denied\n/, at);
    await chat.waitFor(/you> /, at);
    await chat.quit();

    expect(runs).toEqual([]);
    expect(chat.output.text).toContain('ok, I will not deploy');
    const events = await stack.client.events(id);
    expect(ofType(events, 'tool/approval').map((e) => e.data.decision)).toEqual(['deny']);
    expect((ofType(events, 'turn/end')[0] as SessionEvent<'turn/end'>).data.reason).toEqual({ kind: 'completed' });
  });

  it('on a terminal the streamed reply line keeps its "bot> " prefix (the spinner is cleared once, before it)', async () => {
    const id = newId('tty');
    // Slow first token, so the spinner draws; several chunks, so the reply streams.
    stack.fake.configure({ firstTokenDelayMs: 400, tokenDelayMs: 15 });
    stack.fake.enqueueReplies({ text: 'echo: here is a streamed reply in several chunks' });
    const chat = startChat(id, true);
    const at = await chat.waitFor(/you> /);
    chat.type('hello');
    await chat.waitFor(/you> /, at);
    await chat.quit();

    expect(ofType(await stack.client.events(id), 'assistant/chunk').length).toBeGreaterThan(1);
    expect(chat.output.text).toMatch(/[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏]/);
    const screen = renderTerminal(chat.output.text);
    const replyLines = screen.filter((l) => l.includes('here is a streamed reply'));
    expect(replyLines, screen.join('\n')).toEqual(['bot> echo: here is a streamed reply in several chunks']);
  });

  it('on a terminal, an approval then a streamed reply: the prompt shows the arguments and the reply line starts with "bot> "', async () => {
    const id = newId('tty-approval');
    stack.fake.configure({ firstTokenDelayMs: 300, tokenDelayMs: 15 });
    stack.fake.enqueueReplies(
      { text: '', toolCalls: [{ id: 'chat-call-3', name: 'deploy', arguments: { target: 'eu' } }] },
      { text: 'deployed to eu, all good' },
    );
    const chat = startChat(id, true);
    let at = await chat.waitFor(/you> /);
    chat.type('deploy to eu');
    at = await chat.waitFor(/approve deploy\(\{"target":"eu"\}\)\?.*: /, at);
    chat.type('y');
    at = await chat.waitFor(/approved/, at);
    await chat.waitFor(/you> /, at);
    await chat.quit();

    const screen = renderTerminal(chat.output.text);
    expect(
      screen.some((l) => l.includes('approve deploy({"target":"eu"})?')),
      screen.join('\n'),
    ).toBe(true);
    expect(
      screen.filter((l) => l.includes('deployed to eu, all good')),
      screen.join('\n'),
    ).toEqual(['bot> deployed to eu, all good']);
    expect(runs).toEqual([{ target: 'eu' }]);
  });
});
