/**
 * Images and files through every compatible API (issue 50), with each client library unchanged
 * but for its base URL: the official `openai` 7.x (Chat Completions `image_url` and `file`
 * parts, Responses `input_image`), the AI SDK's `generateText` with an image part (its OpenAI
 * provider, Responses), LangChain's `ChatOpenAI` with a `HumanMessage` holding an image block
 * (OpenAI-style and LangChain's standard block), the LangGraph SDK sending one on a run, and the
 * AI SDK's `AbstractChat` (what `useChat` wraps) sending a file. Each checks that the log's
 * user/message holds an image block whose sha-256 is the bytes sent, and that the offline model
 * received them (asked to "describe the media", it answers one line per part it got). Bad
 * media (a declared type the bytes are not, a data URL that is not base64, an `ftp:` URL) are a
 * 400 naming the part, and nothing is logged.
 */
import { createHash } from 'node:crypto';
import { createOpenAI } from '@ai-sdk/openai';
import { HumanMessage } from '@langchain/core/messages';
import { Client as LangGraphClient } from '@langchain/langgraph-sdk';
import { ChatOpenAI } from '@langchain/openai';
import {
  AbstractChat,
  DefaultChatTransport,
  generateText,
  type ChatInit,
  type ModelMessage,
  type ChatState,
  type ChatStatus,
  type UIMessage,
} from 'ai';
import OpenAI from 'openai-v7';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { isKnownEvent, type ContentBlock, type ImageBlock, type StoredEvent } from '../../src/session/index.js';
import { png } from '../support/media.js';
import { DEFAULT_MODEL, newSessions, sessionIds, startCompatStack, type CompatStack } from './stack.js';

let compat: CompatStack;
let openai: OpenAI;

beforeAll(async () => {
  compat = await startCompatStack('media');
  openai = new OpenAI({ baseURL: compat.baseURL, apiKey: compat.apiKey });
});
afterAll(async () => {
  await compat?.close();
});
beforeEach(() => {
  compat.resetFake();
});

const PICTURE = png(64, 48);
const PICTURE_SHA = createHash('sha256').update(PICTURE).digest('hex');
const base64 = (bytes: Uint8Array) => Buffer.from(bytes).toString('base64');
const PICTURE_URL = `data:image/png;base64,${base64(PICTURE)}`;
/** What the offline model answers "describe the media" with for {@link PICTURE}. */
const PICTURE_LINE = `image image/png 64x48 sha256=${PICTURE_SHA.slice(0, 12)}`;
const DESCRIBE = 'describe the media';

async function userMessages(sessionId: string): Promise<ContentBlock[][]> {
  const events: StoredEvent[] = await compat.stack.client.events(sessionId, 0);
  return events.flatMap((event) => (isKnownEvent(event) && event.type === 'user/message' ? [event.data.content] : []));
}

/** The image blocks of the session's user messages. */
async function loggedImages(sessionId: string): Promise<ImageBlock[]> {
  return (await userMessages(sessionId)).flat().filter((block): block is ImageBlock => block.type === 'image');
}

function expectStoredPicture(image: ImageBlock | undefined): void {
  expect(image?.source).toMatchObject({
    kind: 'artifact',
    mediaType: 'image/png',
    sha256: PICTURE_SHA,
    bytes: PICTURE.byteLength,
    width: 64,
    height: 48,
  });
}

/** The last request's parts the fake model received, as their types. */
function lastModelPartTypes(): string[] {
  const request = compat.stack.fake.chatRequests().at(-1)!;
  const last = request.messages.filter((m) => m.role === 'user').at(-1)!;
  return typeof last.content === 'string' ? ['text'] : (last.content ?? []).map((part) => part.type);
}

/** Sessions made since `before`, and a check that none was. */
async function expectNothingLogged(before: ReadonlySet<string>): Promise<void> {
  expect(await newSessions(compat, before)).toEqual([]);
}

describe('openai 7: chat.completions.create', () => {
  it('takes a user message of a text part and an image_url part (a base64 PNG data URL): the log holds the image, the model gets it', async () => {
    const { data, response } = await openai.chat.completions
      .create({
        model: DEFAULT_MODEL,
        messages: [
          {
            role: 'user',
            content: [
              { type: 'text', text: DESCRIBE },
              { type: 'image_url', image_url: { url: PICTURE_URL, detail: 'low' } },
            ],
          },
        ],
      })
      .withResponse();
    expect(data.choices[0]!.message.content).toContain(PICTURE_LINE);
    const session = response.headers.get('x-session-id')!;
    const [image] = await loggedImages(session);
    expectStoredPicture(image);
    expect(image!.detail).toBe('low');
    expect(lastModelPartTypes()).toEqual(['text', 'image_url']);
  });

  it('continues the transcript that holds the image: the resent picture matches the logged one, one new turn', async () => {
    const first = [
      {
        role: 'user' as const,
        content: [
          { type: 'text' as const, text: 'Here is a picture.' },
          { type: 'image_url' as const, image_url: { url: PICTURE_URL } },
        ],
      },
    ];
    const { data: answer, response } = await openai.chat.completions
      .create({ model: DEFAULT_MODEL, messages: first })
      .withResponse();
    const session = response.headers.get('x-session-id')!;
    const { response: again } = await openai.chat.completions
      .create({
        model: DEFAULT_MODEL,
        messages: [...first, answer.choices[0]!.message, { role: 'user', content: 'What colour is it?' }],
      })
      .withResponse();
    expect(again.headers.get('x-session-id')).toBe(session);
    expect(again.headers.get('x-sessionlog-forked-from')).toBeNull();
    expect((await compat.stack.client.turns(session)).turns).toHaveLength(2);
    expect(await loggedImages(session)).toHaveLength(1);
  });

  it('takes a file part (a PDF as file_data, with its filename) as a file block', async () => {
    const pdf = Buffer.from('%PDF-1.4\n1 0 obj <<>> endobj\ntrailer <<>>\n%%EOF\n');
    const { response } = await openai.chat.completions
      .create({
        model: DEFAULT_MODEL,
        messages: [
          {
            role: 'user',
            content: [
              { type: 'text', text: 'Read this.' },
              {
                type: 'file',
                file: { file_data: `data:application/pdf;base64,${pdf.toString('base64')}`, filename: 'note.pdf' },
              },
            ],
          },
        ],
      })
      .withResponse();
    const [content] = await userMessages(response.headers.get('x-session-id')!);
    expect(content!.find((block) => block.type === 'file')).toMatchObject({
      type: 'file',
      filename: 'note.pdf',
      source: { kind: 'artifact', mediaType: 'application/pdf', bytes: pdf.byteLength },
    });
  });

  it.each([
    ['a declared type the bytes are not', `data:image/jpeg;base64,${base64(PICTURE)}`, 'invalid_media'],
    ['a data URL that is not base64', 'data:image/png,not-base64-at-all', 'invalid_media'],
    ['an ftp: URL', 'ftp://example.com/picture.png', 'invalid_media'],
  ])('refuses %s with a 400 naming the part; nothing is logged', async (_name, url, code) => {
    const before = await sessionIds(compat);
    const error = await openai.chat.completions
      .create({
        model: DEFAULT_MODEL,
        messages: [
          {
            role: 'user',
            content: [
              { type: 'text', text: `look ${url.slice(0, 20)}` },
              { type: 'image_url', image_url: { url } },
            ],
          },
        ],
      })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    expect((error as InstanceType<typeof OpenAI.BadRequestError>).param).toBe('messages[0].content[1]');
    expect((error as InstanceType<typeof OpenAI.BadRequestError>).code).toBe(code);
    await expectNothingLogged(before);
  });
});

describe('openai 7: responses.create', () => {
  it('takes an input_image part: the log holds the image, the model gets it, the conversation items give it back as input_image', async () => {
    const response = await openai.responses.create({
      model: DEFAULT_MODEL,
      input: [
        {
          role: 'user',
          content: [
            { type: 'input_text', text: DESCRIBE },
            { type: 'input_image', image_url: PICTURE_URL, detail: 'auto' },
          ],
        },
      ],
    });
    expect(response.output_text).toContain(PICTURE_LINE);
    const conversation = response.conversation!.id;
    const [image] = await loggedImages(conversation);
    expectStoredPicture(image);
    const items = await openai.conversations.items.list(conversation, { order: 'asc' });
    const user = items.data[0] as unknown as { role: string; content: Array<Record<string, unknown>> };
    expect(user.content).toEqual([
      { type: 'input_text', text: DESCRIBE },
      { type: 'input_image', detail: 'auto', image_url: null, file_id: (image!.source as { locator: string }).locator },
    ]);

    // The item's file_id is a reference a later request can send again: the same stored picture.
    const again = await openai.responses.create({
      model: DEFAULT_MODEL,
      conversation,
      input: [
        {
          role: 'user',
          content: [
            { type: 'input_text', text: DESCRIBE },
            { type: 'input_image', file_id: (image!.source as { locator: string }).locator, detail: 'auto' },
          ],
        },
      ],
    });
    expect(again.output_text).toContain(PICTURE_LINE);
  });

  it("refuses a file_id of another conversation's image with a 400 naming the part; neither conversation changes", async () => {
    const first = await openai.responses.create({
      model: DEFAULT_MODEL,
      input: [{ role: 'user', content: [{ type: 'input_image', image_url: PICTURE_URL, detail: 'auto' }] }],
    });
    const [image] = await loggedImages(first.conversation!.id);
    const other = await openai.conversations.create({});
    const before = await sessionIds(compat);
    // The new conversation's run logs its session/run on its own time: compare the rest.
    const logged = async () => (await compat.stack.client.events(other.id, 0)).filter((e) => e.type !== 'session/run');
    const events = await logged();
    const error = await openai.responses
      .create({
        model: DEFAULT_MODEL,
        conversation: other.id,
        input: [
          {
            role: 'user',
            content: [
              { type: 'input_text', text: 'look' },
              { type: 'input_image', file_id: (image!.source as { locator: string }).locator, detail: 'auto' },
            ],
          },
        ],
      })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    expect((error as InstanceType<typeof OpenAI.BadRequestError>).param).toBe('input[0].content[1]');
    expect((error as InstanceType<typeof OpenAI.BadRequestError>).code).toBe('artifact_foreign');
    expect(await logged()).toEqual(events);
    await expectNothingLogged(before);
  });

  it('refuses an ftp: image URL with a 400 naming the part; nothing is logged', async () => {
    const before = await sessionIds(compat);
    const error = await openai.responses
      .create({
        model: DEFAULT_MODEL,
        input: [
          {
            role: 'user',
            content: [
              { type: 'input_text', text: 'look' },
              { type: 'input_image', image_url: 'ftp://example.com/picture.png', detail: 'auto' },
            ],
          },
        ],
      })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    expect((error as InstanceType<typeof OpenAI.BadRequestError>).param).toBe('input[0].content[1]');
    await expectNothingLogged(before);
  });
});

describe("the AI SDK's generateText (openai provider)", () => {
  it('sends an image part: the log holds the image and the model describes it', async () => {
    const provider = createOpenAI({ baseURL: compat.baseURL, apiKey: compat.apiKey });
    const result = await generateText({
      model: provider(DEFAULT_MODEL),
      system: 'You look at pictures.',
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: DESCRIBE },
            { type: 'image', image: PICTURE, mediaType: 'image/png' },
          ],
        },
      ],
    });
    expect(result.text).toContain(PICTURE_LINE);
    const session = result.response.headers?.['x-session-id'];
    expect(session).toBeTruthy();
    expectStoredPicture((await loggedImages(session!))[0]);
  });

  it('continues with the picture in its history: the same session, one turn more; a PDF file part is a file block', async () => {
    const provider = createOpenAI({ baseURL: compat.baseURL, apiKey: compat.apiKey });
    const pdf = new Uint8Array(Buffer.from('%PDF-1.4\n%%EOF\n'));
    const messages: ModelMessage[] = [
      {
        role: 'user',
        content: [
          { type: 'text', text: 'Here is a picture and a note.' },
          { type: 'image', image: PICTURE, mediaType: 'image/png' },
          { type: 'file', data: pdf, mediaType: 'application/pdf', filename: 'note.pdf' },
        ],
      },
    ];
    const first = await generateText({ model: provider(DEFAULT_MODEL), system: 'You look at pictures.', messages });
    const session = first.response.headers?.['x-session-id'];
    const [content] = await userMessages(session!);
    expect(content!.map((block) => block.type)).toEqual(['text', 'image', 'file']);
    expect(content![2]).toMatchObject({ type: 'file', filename: 'note.pdf', source: { mediaType: 'application/pdf' } });
    messages.push(...first.response.messages, { role: 'user', content: 'And what else?' });
    const second = await generateText({ model: provider(DEFAULT_MODEL), system: 'You look at pictures.', messages });
    expect(second.response.headers?.['x-session-id']).toBe(session);
    expect((await compat.stack.client.turns(session!)).turns).toHaveLength(2);
    expect(await loggedImages(session!)).toHaveLength(1);
  });
});

describe("LangChain's ChatOpenAI", () => {
  it.each([
    ['an image_url block', { type: 'image_url', image_url: { url: PICTURE_URL } }],
    ['a standard image block', { type: 'image', source_type: 'base64', data: base64(PICTURE), mime_type: 'image/png' }],
  ])('sends a HumanMessage holding %s: the model describes the picture, the log holds it', async (_name, block) => {
    const before = await sessionIds(compat);
    const model = new ChatOpenAI({
      model: DEFAULT_MODEL,
      apiKey: compat.apiKey,
      configuration: { baseURL: compat.baseURL },
    });
    const answer = await model.invoke([
      new HumanMessage({ content: [{ type: 'text', text: `${DESCRIBE} (${_name})` }, block as never] }),
    ]);
    expect(String(answer.content)).toContain(PICTURE_LINE);
    const [session] = await newSessions(compat, before);
    expectStoredPicture((await loggedImages(session!))[0]);
  });
});

describe('the LangGraph SDK', () => {
  it('sends an image block on a run: the log holds it, the model describes it, the thread state gives it back as a content block', async () => {
    const client = new LangGraphClient({ apiUrl: `${compat.gateway.url}/langgraph` });
    const thread = await client.threads.create();
    const values = (await client.runs.wait(thread.thread_id, 'agent', {
      input: {
        messages: [
          {
            role: 'user',
            content: [
              { type: 'text', text: DESCRIBE },
              { type: 'image_url', image_url: { url: PICTURE_URL } },
            ],
          },
        ],
      },
    })) as { messages: Array<{ type: string; content: unknown }> };
    expect(String(values.messages.at(-1)!.content)).toContain(PICTURE_LINE);
    const [image] = await loggedImages(thread.thread_id);
    expectStoredPicture(image);
    const state = await client.threads.getState<{ messages: Array<{ type: string; content: unknown }> }>(
      thread.thread_id,
    );
    expect(state.values.messages[0]!.content).toEqual([
      { type: 'text', text: DESCRIBE },
      { type: 'image', fileId: (image!.source as { locator: string }).locator, mimeType: 'image/png' },
    ]);
  });

  it('refuses a declared type the bytes are not, naming the block; the thread logs nothing', async () => {
    const client = new LangGraphClient({ apiUrl: `${compat.gateway.url}/langgraph` });
    const thread = await client.threads.create();
    // The new thread's run logs its session/run on its own time: compare the rest.
    const logged = async () =>
      (await compat.stack.client.events(thread.thread_id, 0)).filter((e) => e.type !== 'session/run');
    const before = await logged();
    const error = await client.runs
      .wait(thread.thread_id, 'agent', {
        input: {
          messages: [
            {
              role: 'user',
              content: [
                { type: 'text', text: 'look' },
                { type: 'image', source_type: 'base64', data: base64(PICTURE), mime_type: 'image/gif' },
              ],
            },
          ],
        },
      })
      .catch((e: unknown) => e);
    expect((error as { status?: number }).status).toBe(400);
    expect(String((error as Error).message)).toContain('input.messages[0].content[1]');
    expect(await logged()).toEqual(before);
  });
});

/** A chat state as a framework keeps it, in a plain array (as test/compat/ai-sdk-ui.test.ts). */
class ArrayState implements ChatState<UIMessage> {
  status: ChatStatus = 'ready';
  error: Error | undefined = undefined;
  messages: UIMessage[] = [];
  pushMessage = (message: UIMessage) => {
    this.messages = [...this.messages, message];
  };
  popMessage = () => {
    this.messages = this.messages.slice(0, -1);
  };
  replaceMessage = (index: number, message: UIMessage) => {
    this.messages = [...this.messages.slice(0, index), message, ...this.messages.slice(index + 1)];
  };
  snapshot = <T>(thing: T): T => structuredClone(thing);
}

class NodeChat extends AbstractChat<UIMessage> {
  constructor(init: Omit<ChatInit<UIMessage>, 'state'>) {
    super({ ...init, state: new ArrayState() });
  }
  override get messages(): UIMessage[] {
    return this.state.messages;
  }
}

describe("the AI SDK UI stream (useChat's AbstractChat over DefaultChatTransport)", () => {
  it('sends a file part: the log holds the image, the model describes it; the next message continues the same session', async () => {
    const chat = new NodeChat({
      id: `media-ui-${Date.now()}`,
      transport: new DefaultChatTransport({ api: `${compat.gateway.url}/ai-sdk/chat` }),
    });
    await chat.sendMessage({
      text: DESCRIBE,
      files: [{ type: 'file', mediaType: 'image/png', filename: 'dot.png', url: PICTURE_URL }],
    });
    expect(
      chat.messages
        .at(-1)!
        .parts.filter((p) => p.type === 'text')
        .map((p) => (p as { text: string }).text)
        .join(''),
    ).toContain(PICTURE_LINE);
    expectStoredPicture((await loggedImages(chat.id))[0]);
    await chat.sendMessage({ text: 'thanks' });
    expect((await compat.stack.client.turns(chat.id)).turns).toHaveLength(2);
    expect(await compat.stack.client.branches(chat.id)).toEqual([]);
  });
});
