/**
 * The event stream of a streamed chat completion, read from the response body (the `openai`
 * client's own parser copies the rest of its buffer after every event, a cost that grows with the
 * square of a burst's events: BENCHMARKS.md, "The model stream"). The client still sends the
 * request and turns error statuses into its errors; this reads what a 200 answer streams.
 */
import OpenAI from 'openai';
import type { ChatCompletionChunk } from 'openai/resources/chat/completions';

/** One server-sent event: its type (`event:` field) and its `data:` lines joined with newlines. */
export type ServerSentEvent = { event: string | null; data: string };

/**
 * Splits text into server-sent events as the event-stream format defines them: lines end with
 * LF, CRLF or CR; a blank line dispatches the event (if it has data); `:` starts a comment; a
 * field's value loses one leading space; fields other than `event` and `data` are ignored, and
 * an event the stream ends inside is dropped. Linear in the text, however it is split.
 */
export class ServerSentEventDecoder {
  private buffer = '';
  private carriageReturn = false;
  private event: string | null = null;
  private data: string[] = [];

  /** The events completed by `text` (the next piece of the stream). */
  push(text: string): ServerSentEvent[] {
    const events: ServerSentEvent[] = [];
    // What was buffered before holds no line end: the search starts at the new text.
    const from = this.buffer.length;
    this.buffer += this.normalized(text);
    let start = 0;
    for (let end = this.buffer.indexOf('\n', from); end !== -1; end = this.buffer.indexOf('\n', start)) {
      const event = this.line(this.buffer.slice(start, end));
      if (event) events.push(event);
      start = end + 1;
    }
    this.buffer = this.buffer.slice(start);
    return events;
  }

  /** The events completed when the stream ends (a final CR ends its line). */
  end(): ServerSentEvent[] {
    if (!this.carriageReturn) return [];
    this.carriageReturn = false;
    return this.push('\n');
  }

  /** `text` with every line end as LF; a CR at its end waits for the next piece (it may start a CRLF). */
  private normalized(text: string): string {
    let out = text;
    if (this.carriageReturn) {
      out = `\r${out}`;
      this.carriageReturn = false;
    }
    if (!out.includes('\r')) return out;
    if (out.endsWith('\r')) {
      this.carriageReturn = true;
      out = out.slice(0, -1);
    }
    return out.replace(/\r\n?/g, '\n');
  }

  private line(line: string): ServerSentEvent | undefined {
    if (line === '') {
      const event = this.data.length > 0 ? { event: this.event, data: this.data.join('\n') } : undefined;
      this.event = null;
      this.data = [];
      return event;
    }
    if (line.startsWith(':')) return undefined;
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') this.data.push(value);
    else if (field === 'event') this.event = value;
    return undefined;
  }
}

/**
 * The chunks of a streamed chat completion, read from its response body as the client library
 * reads them: up to `data: [DONE]`, each event's data parsed as JSON (an event that is not JSON
 * is the provider's fault, an `OpenAIError`), an event carrying `error`
 * thrown as the provider's `APIError`. A body that stops because `signal` aborted ends quietly
 * (the caller tells why); any other read failure is thrown as it came.
 *
 * Yields the chunks each read of the body completes, as one array (none when a read completes no
 * event): a reply streams about a chunk per token, and each step of an async generator costs its
 * consumer promises and a turn of the microtask queue, so a read's chunks go together. The chunks
 * before a failing event are yielded before it is thrown.
 */
export async function* completionChunks(
  response: Response,
  signal: AbortSignal,
): AsyncGenerator<ChatCompletionChunk[]> {
  if (!response.body) throw new OpenAI.OpenAIError('the model answered a streamed request with no body');
  const decoder = new TextDecoder();
  const events = new ServerSentEventDecoder();
  const parsed = (event: ServerSentEvent): ChatCompletionChunk => {
    let data: unknown;
    try {
      data = JSON.parse(event.data);
    } catch (error) {
      throw new OpenAI.OpenAIError(
        `the model's stream sent an event that is not JSON: ${JSON.stringify(event.data.slice(0, 200))}`,
        { cause: error },
      );
    }
    const failure = (data as { error?: unknown } | null)?.error;
    if (failure) throw new OpenAI.APIError(undefined, failure as object, undefined, response.headers);
    return data as ChatCompletionChunk;
  };
  // Events after `[DONE]` are skipped, not the body: read to its end, the connection can be reused.
  let done = false;
  let failure: unknown;
  const chunksOf = (completed: ServerSentEvent[]): ChatCompletionChunk[] => {
    const chunks: ChatCompletionChunk[] = [];
    for (const event of completed) {
      if (done || event.data.startsWith('[DONE]')) done = true;
      else {
        try {
          chunks.push(parsed(event));
        } catch (error) {
          failure = error;
          break;
        }
      }
    }
    return chunks;
  };
  const batch = function* (chunks: ChatCompletionChunk[]): Generator<ChatCompletionChunk[]> {
    if (chunks.length > 0) yield chunks;
    if (failure !== undefined) throw failure;
  };
  try {
    for await (const bytes of response.body)
      yield* batch(chunksOf(events.push(decoder.decode(bytes, { stream: true }))));
    yield* batch(chunksOf([...events.push(decoder.decode()), ...events.end()]));
  } catch (error) {
    if (signal.aborted) return;
    throw error;
  }
}
