/**
 * `sessionlog chat`: an interactive session in the terminal. Each line is sent as a message;
 * the reply streams from the log (live tail) as it is written, with a spinner until the first
 * token arrives. A tool call that waits for approval is shown with its arguments and answered
 * inline (y / n / a = allow this tool for the rest of the session). Ctrl-C while a reply streams
 * cancels that turn and the chat goes on; at the prompt it leaves (as do /quit and Ctrl-D).
 */
import { randomUUID } from 'node:crypto';
import { createInterface } from 'node:readline';
import type { SessionClient } from '../client/session-client.js';
import { isEventOfType } from '../session/index.js';

const SPINNER = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

/**
 * Lines of the input as an async queue, so a prompt can be asked while a turn runs. On a
 * terminal Ctrl-C arrives as a key, not as a signal: it calls the handler set with
 * `onInterrupt`, or with none set (at the prompt) ends the input.
 */
function lineQueue(input: NodeJS.ReadableStream, output: NodeJS.WritableStream, terminal: boolean) {
  const rl = createInterface({ input, output, terminal });
  let interrupt: (() => void) | undefined;
  rl.on('SIGINT', () => (interrupt ? interrupt() : rl.close()));
  const lines: string[] = [];
  const waiters: Array<(line: string | undefined) => void> = [];
  let closed = false;
  rl.on('line', (line) => {
    const waiter = waiters.shift();
    if (waiter) waiter(line);
    else lines.push(line);
  });
  rl.on('close', () => {
    closed = true;
    for (const waiter of waiters.splice(0)) waiter(undefined);
  });
  return {
    /** Writes `prompt` and resolves with the next line, or undefined at the end of the input. */
    ask(prompt: string): Promise<string | undefined> {
      output.write(prompt);
      const line = lines.shift();
      if (line !== undefined) return Promise.resolve(line);
      if (closed) return Promise.resolve(undefined);
      return new Promise((resolve) => waiters.push(resolve));
    },
    /** What Ctrl-C on a terminal does until the next call (undefined: end the input). */
    onInterrupt(handler: (() => void) | undefined): void {
      interrupt = handler;
    },
    close: () => rl.close(),
  };
}

export async function runChat(
  client: SessionClient,
  options: { sessionId?: string; input?: NodeJS.ReadableStream; output?: NodeJS.WritableStream },
): Promise<void> {
  const output = options.output ?? process.stdout;
  const write = (text: string) => output.write(text);
  const sessionId = options.sessionId ?? `chat-${randomUUID().slice(0, 8)}`;
  await client.start({ sessionId });
  write(`session ${sessionId} — type a message; Ctrl-C while a reply streams cancels it; /quit or Ctrl-D leaves\n`);
  const tty = Boolean((output as { isTTY?: boolean }).isTTY);
  const input = lineQueue(options.input ?? process.stdin, output, tty);
  try {
    for (;;) {
      const raw = await input.ask('you> ');
      if (raw === undefined) break;
      const line = raw.trim();
      if (line === '/quit' || line === '/exit') break;
      if (line === '') continue;
      await chatTurn(client, sessionId, line, { write, tty, ask: input.ask, onInterrupt: input.onInterrupt });
    }
  } finally {
    input.close();
  }
}

/** Sends one message and streams its reply; asks inline for every approval the turn waits on. */
async function chatTurn(
  client: SessionClient,
  sessionId: string,
  text: string,
  io: {
    write(text: string): void;
    tty: boolean;
    ask(prompt: string): Promise<string | undefined>;
    onInterrupt(handler: (() => void) | undefined): void;
  },
): Promise<void> {
  const { write } = io;
  const from = await client.nextSeq(sessionId);
  const follow = new AbortController();
  let first = true;
  let frame = 0;
  let spinner = io.tty ? setInterval(() => write(`\r${SPINNER[frame++ % SPINNER.length]} `), 80) : undefined;
  // Clears the spinner once: a second clear would wipe the start of the streamed reply line.
  const stopSpinner = () => {
    if (spinner) {
      clearInterval(spinner);
      spinner = undefined;
      write('\r  \r');
    }
  };
  // Turns whose end the tail has shown: the tail keeps running until it shows the end of the reply's turn.
  const endedTurns = new Set<number>();
  let onTurnEnd: (() => void) | undefined;
  const streaming = (async () => {
    for await (const event of client.follow(sessionId, from, follow.signal)) {
      if (isEventOfType(event, 'assistant/chunk')) {
        const chunk = event.data.chunk;
        if (chunk.kind !== 'text-delta') continue;
        if (first) {
          stopSpinner();
          write('bot> ');
          first = false;
        }
        write(chunk.text);
      } else if (isEventOfType(event, 'tool/call')) {
        if (first) stopSpinner();
        write(`${first ? '' : '\n'}  [tool ${event.data.name}(${event.data.arguments})]\n`);
        first = true;
      } else if (isEventOfType(event, 'tool/approval-request') && event.data.kind === 'approval') {
        stopSpinner();
        const { callId, tool, arguments: args } = event.data;
        const answer = ((await io.ask(`  approve ${tool}(${args})? [y]es / [n]o / [a]lways for this session: `)) ?? '')
          .trim()
          .toLowerCase();
        const decision =
          answer === 'y' || answer === 'yes' || answer === 'a' || answer === 'always' ? 'approve' : 'deny';
        const result = await client.approve(sessionId, callId, {
          decision,
          allowForSession: answer === 'a' || answer === 'always',
          by: 'chat',
        });
        write(`  ${result.decision === 'approve' ? 'approved' : result.decision === 'deny' ? 'denied' : 'expired'}\n`);
      } else if (isEventOfType(event, 'turn/end')) {
        endedTurns.add(event.data.turn);
        onTurnEnd?.();
      }
    }
  })().catch((error: unknown) => write(`\nerror: ${(error as Error).message}\n`));
  // Ctrl-C cancels this turn: as a key on a terminal, as a signal otherwise.
  const onInterrupt = () => void client.cancel(sessionId).catch(() => undefined);
  io.onInterrupt(onInterrupt);
  process.on('SIGINT', onInterrupt);
  try {
    const reply = await client.send(sessionId, text);
    // The reply is logged, but the tail (polling the store of another process) may not have
    // shown all of it yet: stopping it now would cut the reply short on the screen.
    if (!endedTurns.has(reply.turn)) {
      await Promise.race([
        new Promise<void>((resolve) => {
          onTurnEnd = () => {
            if (endedTurns.has(reply.turn)) resolve();
          };
        }),
        streaming,
      ]);
    }
    stopSpinner();
    if (first) write(`bot> ${reply.text}`);
    write(reply.outcome === 'completed' ? '\n' : `\n(turn ended: ${reply.outcome})\n`);
  } catch (error) {
    stopSpinner();
    write(`\nerror: ${(error as Error).message}\n`);
  } finally {
    process.off('SIGINT', onInterrupt);
    io.onInterrupt(undefined);
    follow.abort();
    await streaming;
  }
}
