/**
 * The model stream's own event-stream reader (src/model/stream.ts) against the `openai` client's
 * parser, which it replaces on the hot path: the same bytes, split anywhere, give the same chunks.
 * Then the format's corners the client's parser also handles, and a provider's error event and a
 * non-JSON event over real HTTP.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import fc from 'fast-check';
import OpenAI from 'openai';
import { Stream } from 'openai/streaming';
import { afterEach, describe, expect, it } from 'vitest';
import { classifyModelError } from '../../src/model/errors.js';
import { streamCompletion } from '../../src/model/stream.js';
import { completionChunks, ServerSentEventDecoder } from '../../src/model/event-stream.js';

const encoder = new TextEncoder();

/** A response whose body delivers `pieces` as separate reads. */
function responseOf(pieces: readonly Uint8Array[]): Response {
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      for (const piece of pieces) controller.enqueue(piece);
      controller.close();
    },
  });
  return new Response(body, { headers: { 'content-type': 'text/event-stream' } });
}

/** `bytes` cut at `cuts` (offsets, any order, duplicates allowed). */
function split(bytes: Uint8Array, cuts: readonly number[]): Uint8Array[] {
  const at = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b);
  const pieces: Uint8Array[] = [];
  let from = 0;
  for (const to of [...at, bytes.length]) {
    pieces.push(bytes.slice(from, to));
    from = to;
  }
  return pieces;
}

async function ours(pieces: readonly Uint8Array[]): Promise<unknown[]> {
  const out: unknown[] = [];
  for await (const chunks of completionChunks(responseOf(pieces), new AbortController().signal)) out.push(...chunks);
  return out;
}

async function theClients(pieces: readonly Uint8Array[]): Promise<unknown[]> {
  const out: unknown[] = [];
  for await (const chunk of Stream.fromSSEResponse(responseOf(pieces), new AbortController())) out.push(chunk);
  return out;
}

const deltaEvent = (text: string, lineEnd: string): string =>
  `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', choices: [{ index: 0, delta: { content: text } }] })}${lineEnd}${lineEnd}`;

describe('completionChunks reads a chat completion stream as the openai client does', () => {
  it('gives the same chunks as the client for any stream, cut anywhere (property)', async () => {
    const text = fc.string({
      unit: fc.constantFrom('a', ' ', 'é', '€', '😀', '\n', '"', 'data: ', '\r'),
      maxLength: 12,
    });
    await fc.assert(
      fc.asyncProperty(
        fc.array(text, { minLength: 1, maxLength: 12 }),
        fc.constantFrom('\n', '\r\n'),
        fc.boolean(),
        fc.array(fc.nat(), { maxLength: 12 }),
        async (texts, lineEnd, comments, cuts) => {
          const stream =
            (comments ? `: keep-alive${lineEnd}${lineEnd}` : '') +
            texts.map((t) => deltaEvent(t, lineEnd)).join(comments ? `: ping${lineEnd}` : '') +
            `data: [DONE]${lineEnd}${lineEnd}`;
          const pieces = split(encoder.encode(stream), cuts);
          const expected = await theClients(pieces);
          expect(expected).toHaveLength(texts.length);
          expect(await ours(pieces)).toEqual(expected);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('joins multi-line data, reads the event field, drops comments, other fields and an unfinished event', () => {
    const decoder = new ServerSentEventDecoder();
    const events = [
      ...decoder.push(': comment\nid: 7\nretry: 10\nevent: delta\ndata: {"a":\ndata:1}\n\n'),
      ...decoder.push('data:no-space\r\rdata: x\r'),
      ...decoder.push('\nevent: lonely\n\ndata: unfinished'),
      ...decoder.end(),
    ];
    // The CR ending one piece and the LF beginning the next are one line end: `data: x` belongs
    // to the event named `lonely` (two line ends would have dispatched it alone, unnamed).
    expect(events).toEqual([
      { event: 'delta', data: '{"a":\n1}' },
      { event: null, data: 'no-space' },
      { event: 'lonely', data: 'x' },
    ]);
  });

  it('keeps a line that arrives over many pieces whole', () => {
    const decoder = new ServerSentEventDecoder();
    const line = `data: ${'x'.repeat(5_000)}`;
    const events = [...line].flatMap((char) => decoder.push(char));
    expect(events).toEqual([]);
    expect(decoder.push('\n\n')).toEqual([{ event: null, data: 'x'.repeat(5_000) }]);
  });

  it('treats a lone CR as a line end, also as the very last byte of the stream', () => {
    const decoder = new ServerSentEventDecoder();
    expect(decoder.push('data: 1\r\rdata: 2\r')).toEqual([{ event: null, data: '1' }]);
    expect(decoder.push('\r')).toEqual([]);
    expect(decoder.end()).toEqual([{ event: null, data: '2' }]);
  });

  it('skips what follows [DONE] and reads the body to its end', async () => {
    const pieces = [encoder.encode(`${deltaEvent('a', '\n')}data: [DONE]\n\n${deltaEvent('late', '\n')}`)];
    expect(await ours(pieces)).toEqual(await theClients(pieces));
    expect(await ours(pieces)).toHaveLength(1);
  });
});

describe('a provider stream that fails, over HTTP', () => {
  let server: Server | undefined;
  afterEach(() => new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve())));

  async function streaming(body: string): Promise<OpenAI> {
    server = createServer((_request, response) => {
      response.writeHead(200, { 'content-type': 'text/event-stream' });
      response.end(body);
    });
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    return new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'k', maxRetries: 0 });
  }

  const ask = (client: OpenAI) =>
    streamCompletion({ client, request: { model: 'm', messages: [{ role: 'user', content: 'hi' }], stream: true } });

  it("an error event is the provider's APIError, with the partial text kept", async () => {
    const client = await streaming(
      `${deltaEvent('partial', '\n')}data: ${JSON.stringify({ error: { message: 'overloaded', type: 'server_error' } })}\n\n`,
    );
    const error = await ask(client).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(classifyModelError(error)).toMatchObject({ code: 'server' });
    expect((error as { partial?: unknown }).partial).toEqual({ content: [{ type: 'text', text: 'partial' }] });
    expect((error as Error).cause).toBeInstanceOf(OpenAI.APIError);
  });

  it('an event that is not JSON is a server failure naming what was sent', async () => {
    const client = await streaming(`${deltaEvent('partial', '\n')}data: {not json\n\n`);
    const error = await ask(client).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(classifyModelError(error)).toMatchObject({ code: 'server' });
    expect(classifyModelError(error).message).toContain('{not json');
  });
});
