/**
 * Media through the turn engine (issue 50), without Temporal, against a real SQLite store and the
 * offline model: what reaches the model for an image a user sent (the model describes it), the
 * media policy across turns and the `open_media` tool, a model that takes no images, and the
 * summarizer's request for a range holding images.
 */
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { requestHeaderFor } from '../../src/engine/agent.js';
import type { UserInput } from '../../src/engine/index.js';
import { createOpenAIProvider } from '../../src/model/provider.js';
import { inboxKeys } from '../../src/persistence/index.js';
import type { ContentBlock, StoredMedia } from '../../src/session/index.js';
import { OPEN_MEDIA_TOOL, openMediaTool, readArtifactTool } from '../../src/tools/builtin.js';
import { ToolRegistry } from '../../src/tools/registry.js';
import { useFakeModel } from '../support/fake-model.js';
import { png } from '../support/media.js';
import { catalogueContext, ofType, stepContext, useEngineHarness, type EngineHarness } from './engine-harness.js';

const fake = useFakeModel();
const harness = useEngineHarness(fake);

const picture = png(64, 48);
const sha12 = createHash('sha256').update(picture).digest('hex').slice(0, 12);
const dataUrl = `data:image/png;base64,${Buffer.from(picture).toString('base64')}`;

/** A user message with `picture`, stored and put in the inbox as the client does. */
async function imageMessage(
  h: EngineHarness,
  id: string,
  text: string,
  extra: Record<string, unknown> = {},
): Promise<{ input: UserInput; source: StoredMedia }> {
  const source = await h.store.artifacts.putMedia({
    sessionId: h.sessionId,
    bytes: picture,
    mediaType: 'image/png',
    width: 64,
    height: 48,
  });
  const content: ContentBlock[] = [
    { type: 'text', text },
    { type: 'image', source },
  ];
  const ref = await h.store.inbox.put(h.sessionId, inboxKeys.message(id), JSON.stringify({ text, content, ...extra }));
  return { input: { id, ref }, source };
}

/** One whole turn of text: the message, the model's scripted reply. */
async function textTurn(h: EngineHarness, turn: number, text: string): Promise<void> {
  fake().enqueueReplies({ text: `reply ${turn}` });
  await h.modelStep({ turn, step: 1, entering: [await h.message(`m${turn}`, text)] });
}

function wireText(body: unknown): string {
  return JSON.stringify(body);
}

describe('an image a user sends', () => {
  it('reaches the offline model as a data URL of its stored bytes, which it describes; the log holds the reference only', async () => {
    const h = await harness();
    const { input, source } = await imageMessage(h, 'm1', 'describe the media');

    const result = await h.modelStep({ turn: 1, step: 1, entering: [input] });

    expect(result.outcome).toBe('completed');
    const events = await h.events();
    expect(ofType(events, 'user/message')[0]!.data.content).toEqual([
      { type: 'text', text: 'describe the media' },
      { type: 'image', source },
    ]);
    expect(JSON.stringify(events)).not.toContain(Buffer.from(picture).toString('base64').slice(0, 40));
    expect(ofType(events, 'assistant/message')[0]!.data.message.content).toEqual([
      { type: 'text', text: `image image/png 64x48 sha256=${sha12}` },
    ]);
    const sent = fake().chatRequests()[0]!;
    expect(sent.messages.at(-1)).toEqual({
      role: 'user',
      content: [
        { type: 'text', text: 'describe the media' },
        { type: 'image_url', image_url: { url: dataUrl } },
      ],
    });
    // The reply's usage, logged, counts the image by the tile rule.
    expect(fake().reportedUsage()[0]!.prompt_tokens_details).toMatchObject({ image_tokens: 255 });
  });

  it('a model that takes no images gets a stand-in naming the artifact, never the image', async () => {
    const h = await harness();
    const { input, source } = await imageMessage(h, 'm1', 'what is this?', { agent: { model: 'deepseek-chat' } });
    await h.modelStep({ turn: 1, step: 1, entering: [input] });
    const sent = fake().chatRequests()[0]!;
    expect(sent.model).toBe('deepseek-flash');
    expect(sent.messages.at(-1)).toEqual({
      role: 'user',
      content: `what is this?\n[image image/png 64x48, ${source.bytes} B, ${source.locator}; not sent: this model does not take images]`,
    });
  });
});

describe('the media policy across turns', () => {
  it('sends an image for 3 user turns, then its stand-in; open_media brings it back in the tool round, byte for byte as the log rebuilds it', async () => {
    const h = await harness({ tools: [readArtifactTool, openMediaTool] });
    const { input, source } = await imageMessage(h, 'm1', 'remember this picture');
    fake().enqueueReplies({ text: 'noted' });
    await h.modelStep({ turn: 1, step: 1, entering: [input] });
    await textTurn(h, 2, 'second');
    await textTurn(h, 3, 'third');
    expect(wireText(fake().chatRequests()[2])).toContain(dataUrl);

    fake().enqueueReplies({ toolCalls: [{ name: OPEN_MEDIA_TOOL, arguments: { locator: source.locator } }] });
    const asked = await h.modelStep({ turn: 4, step: 1, entering: [await h.message('m4', 'what was the picture?')] });
    const fourth = fake().chatRequests()[3]!;
    expect(wireText(fourth)).not.toContain(dataUrl);
    expect(fourth.messages[0]).toEqual({
      role: 'user',
      content: `remember this picture\n[image image/png 64x48, ${source.bytes} B, ${source.locator}; open it again with the open_media tool]`,
    });
    expect(asked.toolCalls).toHaveLength(1);

    await h.toolRound(4, 1, asked);
    const [result] = ofType(await h.events(), 'tool/result');
    expect(result!.data.message.content[0].content).toEqual([
      { type: 'text', text: `Opened image image/png 64x48 (${source.locator}); it is attached to this result.` },
      { type: 'image', source },
    ]);
    fake().enqueueReplies({ text: 'a red picture' });
    await h.modelStep({ turn: 4, step: 2 });
    const fifth = fake().chatRequests()[4]!;
    expect(fifth.messages.slice(-2)).toEqual([
      {
        role: 'tool',
        tool_call_id: asked.toolCalls[0]!.callId,
        content: `Opened image image/png 64x48 (${source.locator}); it is attached to this result.`,
      },
      {
        role: 'user',
        content: [
          { type: 'text', text: `The media of tool call ${asked.toolCalls[0]!.callId}:` },
          { type: 'image_url', image_url: { url: dataUrl } },
        ],
      },
    ]);
    // The same log gives the same request: a second step built now from the log (the reply
    // removed from the comparison) is the one the model got, byte for byte.
    const session = await h.store.session(h.sessionId);
    const { applyMediaPolicy, DEFAULT_MEDIA_POLICY } = await import('../../src/context/media-policy.js');
    const { buildChatRequest } = await import('../../src/model/request.js');
    const model = createOpenAIProvider({ baseURL: fake().baseURL, apiKey: 'k' }).model('fake');
    const messages = applyMediaPolicy(session.deriveMessages().slice(0, -1), DEFAULT_MEDIA_POLICY, model.input);
    const rebuilt = buildChatRequest({
      messages,
      header: session.requestHeader!,
      model,
      media: new Map([[source.locator, picture]]),
    });
    expect(JSON.stringify(rebuilt.messages)).toBe(JSON.stringify(fifth.messages));
  });

  it("refuses another session's medium in open_media as an error result the model sees", async () => {
    const h = await harness({ tools: [openMediaTool] });
    const foreign = `artifact:other-session/media-${'a'.repeat(64)}.png`;
    fake().enqueueReplies({ toolCalls: [{ name: OPEN_MEDIA_TOOL, arguments: { locator: foreign } }] });
    const asked = await h.modelStep({ turn: 1, step: 1, entering: [await h.message('m1', 'open it')] });
    await h.toolRound(1, 1, asked);
    const [result] = ofType(await h.events(), 'tool/result');
    expect(result!.data.message.content[0]).toMatchObject({ isError: true });
    expect(JSON.stringify(result!.data.message.content[0].content)).toMatch(/does not belong to session engine-direct/);
  });

  it('offers open_media with the agent tools only where the history holds stored media', () => {
    const deps = {
      model: createOpenAIProvider({ baseURL: 'http://127.0.0.1:9', apiKey: 'k' }),
      tools: new ToolRegistry([readArtifactTool, openMediaTool]),
      agent: { model: 'fake', tools: [readArtifactTool.name] },
    };
    const names = (holdsMedia: boolean) =>
      requestHeaderFor(deps, undefined, undefined, {}, undefined, holdsMedia).tools!.map((tool) => tool.name);
    expect(names(false)).toEqual(['read_artifact']);
    expect(names(true)).toEqual(['read_artifact', 'open_media']);
  });
});

describe('compaction with media', () => {
  it("the summarizer's request carries the images of the range it condenses; the checkpoint stays text", async () => {
    const h = await harness({ context: catalogueContext() });
    const { input } = await imageMessage(h, 'm1', 'here is a chart');
    fake().enqueueReplies({ text: 'a chart of sales' });
    await h.modelStep({ turn: 1, step: 1, entering: [input] });
    for (let turn = 2; turn <= 4; turn++)
      await textTurn(h, turn, `tell me more about the sales in region ${turn}. `.repeat(60));
    fake().enqueueReplies({ text: 'Summary: a sales chart was shown.' });

    const done = await h.engine.compact(
      {
        sessionId: h.sessionId,
        runId: h.runId,
        key: { manual: 1 },
        trigger: 'manual',
        turn: null,
        knownHead: h.head,
        maxAttempts: 1,
      },
      stepContext(),
    );

    expect(done.error).toBeUndefined();
    expect(done.result).not.toBeNull();
    const summarizer = fake().chatRequests().at(-1)!;
    expect(wireText(summarizer)).toContain(dataUrl);
    const [summary] = ofType(await h.events(), 'compaction/summary');
    expect(JSON.stringify(summary!.data)).not.toMatch(/"type":"image"/);
  });
});
