/**
 * A reply on the wire: one `chat.completion` object, or a stream of SSE
 * `chat.completion.chunk`s (word-sized pieces, tool-call arguments in 8-character pieces, the
 * usage chunk when asked for) ending in `[DONE]`, paced by the configured delays and cut short
 * by a `drop_stream` fault or a client that went away.
 */
import type http from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import type { FakeModelConfig, NormalizedReply } from './types.js';

/** What a completion says besides its reply. */
export type Completion = { id: string; created: number; model: string; reply: NormalizedReply; usage: object };

/** The non-streamed answer. */
export function completionObject(c: Completion): object {
  const message: Record<string, unknown> = {
    role: 'assistant',
    content: c.reply.text === '' && c.reply.toolCalls.length > 0 ? null : c.reply.text,
  };
  if (c.reply.reasoning !== '') message.reasoning_content = c.reply.reasoning;
  if (c.reply.toolCalls.length > 0) {
    message.tool_calls = c.reply.toolCalls.map((call) => ({
      id: call.id,
      type: 'function',
      function: { name: call.name, arguments: call.arguments },
    }));
  }
  return {
    id: c.id,
    object: 'chat.completion',
    created: c.created,
    model: c.model,
    choices: [{ index: 0, message, finish_reason: c.reply.finishReason, logprobs: null }],
    usage: c.usage,
  };
}

/**
 * Streams the reply. The delays are read as each chunk goes (a reconfigured server paces the
 * rest of the stream anew); `dropAfter` cuts the connection after that many chunks.
 */
export async function streamReply(
  res: http.ServerResponse,
  signal: AbortSignal,
  pacing: () => Pick<FakeModelConfig, 'firstTokenDelayMs' | 'tokenDelayMs'>,
  s: Completion & { includeUsage: boolean; dropAfter: number | undefined },
): Promise<void> {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
  const chunks = streamChunks(s);
  for (let i = 0; i < chunks.length; i++) {
    if (s.dropAfter !== undefined && i >= s.dropAfter) {
      res.socket?.destroy();
      return;
    }
    const delay = i === 0 ? pacing().firstTokenDelayMs : pacing().tokenDelayMs;
    if (!(await pause(delay, signal))) return;
    // Wait until the chunk is handed to the socket, so a later drop cuts after it, not before.
    await writeAndFlush(res, `data: ${JSON.stringify(chunks[i])}\n\n`, signal);
  }
  if (s.dropAfter !== undefined) {
    res.socket?.destroy();
    return;
  }
  res.end('data: [DONE]\n\n');
}

function streamChunks(s: Completion & { includeUsage: boolean }): object[] {
  const base = { id: s.id, object: 'chat.completion.chunk', created: s.created, model: s.model };
  const choiceChunk = (delta: object, finishReason: string | null = null) => ({
    ...base,
    choices: [{ index: 0, delta, finish_reason: finishReason, logprobs: null }],
  });
  const chunks: object[] = [choiceChunk({ role: 'assistant', content: '' })];
  for (const piece of splitPieces(s.reply.reasoning)) chunks.push(choiceChunk({ reasoning_content: piece }));
  for (const piece of splitPieces(s.reply.text)) chunks.push(choiceChunk({ content: piece }));
  s.reply.toolCalls.forEach((call, index) => {
    chunks.push(
      choiceChunk({
        tool_calls: [{ index, id: call.id, type: 'function', function: { name: call.name, arguments: '' } }],
      }),
    );
    for (const piece of splitArguments(call.arguments))
      chunks.push(choiceChunk({ tool_calls: [{ index, function: { arguments: piece } }] }));
  });
  chunks.push(choiceChunk({}, s.reply.finishReason));
  if (s.includeUsage) chunks.push({ ...base, choices: [], usage: s.usage });
  return chunks;
}

/** Word-sized pieces, so a stream has roughly one chunk per token. */
function splitPieces(text: string): string[] {
  return text === '' ? [] : (text.match(/\s*\S+|\s+/g) ?? [text]);
}

function splitArguments(args: string): string[] {
  const pieces: string[] = [];
  for (let i = 0; i < args.length; i += 8) pieces.push(args.slice(i, i + 8));
  return pieces;
}

/** Waits `ms`; false when the client went away meanwhile. */
export async function pause(ms: number, signal: AbortSignal): Promise<boolean> {
  if (signal.aborted) return false;
  if (ms <= 0) return true;
  try {
    await sleep(ms, undefined, { signal });
    return true;
  } catch {
    // Aborted because the client disconnected: stop producing output.
    return false;
  }
}

/** Writes and resolves once the data reached the socket (or the client went away). */
function writeAndFlush(res: http.ServerResponse, data: string, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const onAbort = () => resolve();
    signal.addEventListener('abort', onAbort, { once: true });
    res.write(data, () => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    });
  });
}

export function waitForAbort(signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
}
