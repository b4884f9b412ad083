/**
 * `sessionlog chat`: an interactive session in the terminal. Each line is sent as a message;
 * the reply streams from the log (live tail) as it is written, with a spinner until the first
 * token arrives.
 */
import { randomUUID } from 'node:crypto';
import { createInterface } from 'node:readline';
import type { SessionClient } from '../client/session-client.js';
import { isEventOfType } from '../session/index.js';

const SPINNER = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

export async function runChat(client: SessionClient, options: { sessionId?: string; input?: NodeJS.ReadableStream; output?: NodeJS.WritableStream }): Promise<void> {
  const output = options.output ?? process.stdout;
  const write = (text: string) => output.write(text);
  const sessionId = options.sessionId ?? `chat-${randomUUID().slice(0, 8)}`;
  await client.start({ sessionId });
  write(`session ${sessionId} — type a message, /quit to leave, /cancel while a reply streams is Ctrl-C\n`);
  const rl = createInterface({ input: options.input ?? process.stdin, output, terminal: Boolean((output as { isTTY?: boolean }).isTTY) });
  const tty = Boolean((output as { isTTY?: boolean }).isTTY);
  try {
    rl.setPrompt('you> ');
    rl.prompt();
    for await (const raw of rl) {
      const line = raw.trim();
      if (line === '/quit' || line === '/exit') break;
      if (line === '') {
        rl.prompt();
        continue;
      }
      const from = await client.nextSeq(sessionId);
      const follow = new AbortController();
      let first = true;
      let frame = 0;
      let spinner = tty ? setInterval(() => write(`\r${SPINNER[frame++ % SPINNER.length]} `), 80) : undefined;
      // Clears the spinner once: a second clear would wipe the start of the streamed reply line.
      const stopSpinner = () => {
        if (spinner) {
          clearInterval(spinner);
          spinner = undefined;
          write('\r  \r');
        }
      };
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
            const data = event.data;
            if (first) stopSpinner();
            write(`${first ? '' : '\n'}  [tool ${data.name}(${data.arguments})]\n`);
            first = true;
          }
        }
      })().catch(() => undefined);
      const onInterrupt = () => void client.cancel(sessionId);
      process.on('SIGINT', onInterrupt);
      try {
        const reply = await client.send(sessionId, line);
        stopSpinner();
        if (first) write(`bot> ${reply.text}`);
        write(reply.outcome === 'completed' ? '\n' : `\n(turn ended: ${reply.outcome})\n`);
      } catch (error) {
        stopSpinner();
        write(`\nerror: ${(error as Error).message}\n`);
      } finally {
        process.off('SIGINT', onInterrupt);
        follow.abort();
        await streaming;
      }
      rl.prompt();
    }
  } finally {
    rl.close();
  }
}
