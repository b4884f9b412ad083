import { createHash } from 'node:crypto';
import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { DEFAULT_MODEL_CATALOGUE, lookupModel, resolveModelCatalogue } from '../../src/model/catalogue.js';
import { imageTokens, UNKNOWN_IMAGE_TOKENS } from '../../src/model/media-tokens.js';
import { checkMediaSupported } from '../../src/model/media-support.js';
import { createOpenAIProvider } from '../../src/model/provider.js';
import { buildChatRequest, type ChatRequestBody } from '../../src/model/request.js';
import { SESSION_ERRORS } from '../../src/session/errors.js';
import type { FileBlock, ImageBlock, Message, StoredMedia, ToolResultMessage } from '../../src/session/messages.js';
import { useFakeModel } from '../support/fake-model.js';
import { jpeg, png, PDF_MINIMAL, utf8 } from '../support/media.js';
import { assistantMessage, fakeHeader, toolResultMessage, userMessage } from '../support/model-fixtures.js';

const fake = useFakeModel();

const EXT: Record<string, string> = { 'image/png': 'png', 'application/pdf': 'pdf', 'text/plain': 'txt' };
function stored(bytes: Uint8Array, mediaType: StoredMedia['mediaType'], size?: [number, number]): StoredMedia {
  const sha256 = createHash('sha256').update(bytes).digest('hex');
  return {
    kind: 'artifact',
    locator: `artifact:s1/media-${sha256}.${EXT[mediaType]}`,
    mediaType,
    bytes: bytes.byteLength,
    sha256,
    ...(size ? { width: size[0], height: size[1] } : {}),
  };
}
const dataUrl = (type: string, bytes: Uint8Array) => `data:${type};base64,${Buffer.from(bytes).toString('base64')}`;
const sha12 = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex').slice(0, 12);

const picture = png(64, 48);
const image: ImageBlock = { type: 'image', source: stored(picture, 'image/png', [64, 48]), detail: 'high' };
const remote: ImageBlock = {
  type: 'image',
  source: { kind: 'url', url: 'https://example.com/cat.png' },
  detail: 'low',
};
const pdf: FileBlock = { type: 'file', source: stored(PDF_MINIMAL, 'application/pdf'), filename: 'report.pdf' };
const notes = utf8('line one\nline two');
const text: FileBlock = { type: 'file', source: stored(notes, 'text/plain'), filename: 'notes.txt' };
const bytesOf = new Map<string, Uint8Array>([
  [(image.source as StoredMedia).locator, picture],
  [pdf.source.locator, PDF_MINIMAL],
  [text.source.locator, notes],
]);

function withMedia(message: Message, ...media: Array<ImageBlock | FileBlock>): Message {
  return { ...message, content: [...message.content, ...media] } as Message;
}
function resultWithMedia(callId: string, ...media: Array<ImageBlock | FileBlock>): ToolResultMessage {
  const result = toolResultMessage(callId, `result ${callId}`);
  return { ...result, content: [{ ...result.content[0], content: [...result.content[0].content, ...media] }] };
}

describe("OpenAI's image tile rule (issue 50)", () => {
  it('prices the documented examples: 1024x1024 high 765, 2048x4096 high 1105, low 85', () => {
    expect(imageTokens(1024, 1024, 'high')).toBe(765);
    expect(imageTokens(2048, 4096, 'high')).toBe(1105);
    expect(imageTokens(4096, 8192, 'high')).toBe(1105);
    expect(imageTokens(2048, 4096, 'low')).toBe(85);
    expect(imageTokens(512, 512, 'auto')).toBe(255);
    expect(imageTokens(64, 48)).toBe(255);
  });
});

describe('the Chat Completions request for media (issue 50)', () => {
  const model = lookupModel(DEFAULT_MODEL_CATALOGUE, 'fake');

  it('maps a user message with media to text, image_url and file parts, in order', () => {
    const body = buildChatRequest({
      model,
      header: fakeHeader({ system: undefined }),
      messages: [withMedia(userMessage('look'), image, remote, pdf, text)],
      media: bytesOf,
    });
    expect(body.messages).toEqual([
      {
        role: 'user',
        content: [
          { type: 'text', text: 'look' },
          { type: 'image_url', image_url: { url: dataUrl('image/png', picture), detail: 'high' } },
          { type: 'image_url', image_url: { url: 'https://example.com/cat.png', detail: 'low' } },
          { type: 'file', file: { filename: 'report.pdf', file_data: dataUrl('application/pdf', PDF_MINIMAL) } },
          { type: 'text', text: '[file "notes.txt"]\nline one\nline two' },
        ],
      },
    ]);
  });

  it("puts tool results' media in one user message after the round's tool messages (the tool role takes text only)", () => {
    const body = buildChatRequest({
      model,
      header: fakeHeader({ system: undefined }),
      messages: [
        userMessage('open both'),
        assistantMessage([
          { type: 'tool-call', id: 'c1', name: 'open_media', arguments: '{}' },
          { type: 'tool-call', id: 'c2', name: 'open_media', arguments: '{}' },
        ]),
        resultWithMedia('c1', image),
        resultWithMedia('c2', pdf),
        userMessage('and?'),
      ],
      media: bytesOf,
    });
    expect(body.messages.map((m) => m.role)).toEqual(['user', 'assistant', 'tool', 'tool', 'user', 'user', 'user']);
    expect(body.messages[2]).toEqual({ role: 'tool', tool_call_id: 'c1', content: 'result c1' });
    expect(body.messages[4]).toEqual({
      role: 'user',
      content: [
        { type: 'text', text: 'The media of tool call c1:' },
        { type: 'image_url', image_url: { url: dataUrl('image/png', picture), detail: 'high' } },
      ],
    });
    expect((body.messages[5]!.content as Array<{ type: string }>).map((p) => p.type)).toEqual(['text', 'file']);
    expect(body.messages[6]).toEqual({ role: 'user', content: 'and?' });
  });

  it('builds exactly the request it built before media existed for a log without media', () => {
    const messages: Message[] = [
      userMessage('read a.ts'),
      assistantMessage([{ type: 'tool-call', id: 'c1', name: 'read_file', arguments: '{}' }]),
      toolResultMessage('c1', 'export {}'),
      assistantMessage([{ type: 'text', text: 'done' }]),
    ];
    const header = fakeHeader();
    const before: ChatRequestBody['messages'] = [
      { role: 'system', content: 'You are a test assistant.' },
      { role: 'user', content: 'read a.ts' },
      {
        role: 'assistant',
        content: null,
        tool_calls: [{ id: 'c1', type: 'function', function: { name: 'read_file', arguments: '{}' } }],
      },
      { role: 'tool', tool_call_id: 'c1', content: 'export {}' },
      { role: 'assistant', content: 'done' },
    ];
    const plain = buildChatRequest({ model, header, messages });
    expect(JSON.stringify(plain.messages)).toBe(JSON.stringify(before));
    expect(JSON.stringify(buildChatRequest({ model, header, messages, media: new Map() }))).toBe(JSON.stringify(plain));
  });

  it('refuses to build a request whose stored media were not read (a bug of the caller, never a wrong request)', () => {
    expect(() =>
      buildChatRequest({ model, header: fakeHeader(), messages: [withMedia(userMessage('x'), image)] }),
    ).toThrow(/were not read before building the request/);
  });
});

describe('the catalogue says which models take media (issue 50)', () => {
  it('gives deepseek models neither, gpt-4o and the offline model both, a config entry that does not say neither', () => {
    expect(lookupModel(DEFAULT_MODEL_CATALOGUE, 'deepseek-flash').input).toEqual({ image: false, file: false });
    expect(lookupModel(DEFAULT_MODEL_CATALOGUE, 'deepseek-reasoner').input).toEqual({ image: false, file: false });
    expect(lookupModel(DEFAULT_MODEL_CATALOGUE, 'gpt-4o').input).toEqual({ image: true, file: true });
    expect(lookupModel(DEFAULT_MODEL_CATALOGUE, 'fake').input).toEqual({ image: true, file: true });
    const catalogue = resolveModelCatalogue({
      models: {
        local: {
          provider: 'openai',
          contextWindow: 8000,
          maxOutput: 1000,
          tokenizer: 'o200k',
          thinkingParam: false,
          reasoningContent: false,
        },
        vision: {
          provider: 'openai',
          contextWindow: 8000,
          maxOutput: 1000,
          tokenizer: 'o200k',
          thinkingParam: false,
          reasoningContent: false,
          input: { image: true, file: false },
        },
      },
    });
    expect(lookupModel(catalogue, 'local').input).toEqual({ image: false, file: false });
    expect(lookupModel(catalogue, 'vision').input).toEqual({ image: true, file: false });
    expect(() => resolveModelCatalogue({ models: { 'gpt-4o': { input: { image: 'yes' } as never } } })).toThrow(
      /input must be \{image: boolean, file: boolean\}/,
    );
  });

  it('refuses an image for a model without image input with MEDIA_NOT_SUPPORTED naming the model and the part, or lets a stand-in through', () => {
    const deepseek = lookupModel(DEFAULT_MODEL_CATALOGUE, 'deepseek-flash');
    const parts = [{ type: 'text' }, { type: 'image' }];
    let refused: unknown;
    try {
      checkMediaSupported(deepseek, parts, 'refuse');
    } catch (error) {
      refused = error;
    }
    expect(refused).toMatchObject({ code: 'MEDIA_NOT_SUPPORTED', part: 1 });
    expect((refused as Error).message).toMatch(/^content\[1\]: model "deepseek-flash" does not take images/);
    expect(SESSION_ERRORS.MEDIA_NOT_SUPPORTED).toEqual({ class: 'refusal', status: 400 });
    expect(() => checkMediaSupported(deepseek, parts, 'stand-in')).not.toThrow();
    expect(() => checkMediaSupported(lookupModel(DEFAULT_MODEL_CATALOGUE, 'fake'), parts, 'refuse')).not.toThrow();
    expect(() => checkMediaSupported(deepseek, [{ type: 'text' }], 'refuse')).not.toThrow();
  });
});

describe('the offline model receives media (issue 50)', () => {
  const client = () => new OpenAI({ baseURL: fake().baseURL, apiKey: 'k' });

  it('describes the PNG it received and reports its tokens by the tile rule in prompt_tokens', async () => {
    const ask = (content: OpenAI.ChatCompletionContentPart[]) =>
      client().chat.completions.create({ model: 'fake', messages: [{ role: 'user', content }] });
    const textOnly = await ask([{ type: 'text', text: 'describe the media' }]);
    expect(textOnly.choices[0]!.message.content).toBe('no media');
    const reply = await ask([
      { type: 'text', text: 'describe the media' },
      { type: 'image_url', image_url: { url: dataUrl('image/png', picture) } },
    ]);
    expect(reply.choices[0]!.message.content).toBe(`image image/png 64x48 sha256=${sha12(picture)}`);
    expect(reply.usage!.prompt_tokens).toBe(textOnly.usage!.prompt_tokens + imageTokens(64, 48));
    expect(reply.usage!.prompt_tokens_details).toMatchObject({ image_tokens: 255 });
  });

  it('takes a remote image without fetching it (the stated estimate, 85 at low detail) and a PDF file part', async () => {
    const reply = await client().chat.completions.create({
      model: 'fake',
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'Describe the media, please' },
            { type: 'image_url', image_url: { url: 'https://example.com/cat.png' } },
            { type: 'image_url', image_url: { url: 'http://example.com/dog.png', detail: 'low' } },
            { type: 'file', file: { filename: 'report.pdf', file_data: dataUrl('application/pdf', PDF_MINIMAL) } },
          ],
        },
      ],
    });
    expect(reply.choices[0]!.message.content).toBe(
      [
        'image url https://example.com/cat.png',
        'image url http://example.com/dog.png',
        `file application/pdf "report.pdf" ${PDF_MINIMAL.byteLength} bytes sha256=${sha12(PDF_MINIMAL)}`,
      ].join('\n'),
    );
    expect(reply.usage!.prompt_tokens_details).toMatchObject({ image_tokens: UNKNOWN_IMAGE_TOKENS + 85 });
  });

  it('refuses an image whose bytes are not the declared type with a 400 naming the part', async () => {
    const refused = await client()
      .chat.completions.create({
        model: 'fake',
        messages: [
          {
            role: 'user',
            content: [
              { type: 'text', text: 'x' },
              { type: 'image_url', image_url: { url: dataUrl('image/png', jpeg(4, 4)) } },
            ],
          },
        ],
      })
      .catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(OpenAI.BadRequestError);
    expect((refused as Error).message).toMatch(/messages\[0\]\.content\[1\]\.image_url\.url: .*image\/jpeg/);
  });

  it('gets the stored bytes through the model port, read by the caller, and keeps a text-only request a string', async () => {
    const provider = createOpenAIProvider({ baseURL: fake().baseURL, apiKey: 'k' });
    const read: string[] = [];
    const readMedia = async (locator: string) => {
      read.push(locator);
      return bytesOf.get(locator)!;
    };
    const reply = await provider.stream({
      messages: [withMedia(userMessage('describe the media'), image, image)],
      header: fakeHeader(),
      readMedia,
    });
    expect(reply.content).toEqual([
      { type: 'text', text: [1, 2].map(() => `image image/png 64x48 sha256=${sha12(picture)}`).join('\n') },
    ]);
    expect(read).toEqual([(image.source as StoredMedia).locator]);
    await provider.stream({ messages: [userMessage('plain')], header: fakeHeader() });
    expect(fake().chatRequests()[1]!.messages[1]).toEqual({ role: 'user', content: 'plain' });
  });
});
