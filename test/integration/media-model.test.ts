/**
 * The model catalogue's media inputs at the client boundary (issue 50), through the real stack
 * (Temporal dev server, SQLite, the offline model): a message with an image for a model that
 * takes none is refused before anything is stored, naming the part (MEDIA_NOT_SUPPORTED), or, by
 * option, sent with a text stand-in; the same image to a model that takes it reaches it.
 */
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SessionClient } from '../../src/client/session-client.js';
import { mediaCheck } from '../../src/compose.js';
import { DEFAULT_MODEL_CATALOGUE } from '../../src/model/catalogue.js';
import { SessionlogError } from '../../src/session/index.js';
import { png } from '../support/media.js';
import { startStack, type Stack } from '../support/stack.js';

let stack: Stack;
beforeAll(async () => {
  stack = await startStack();
}, 60_000);
afterAll(async () => {
  await stack?.close();
});

function clientWith(unsupported: 'refuse' | 'stand-in'): SessionClient {
  return new SessionClient({
    temporal: stack.temporal,
    store: stack.store,
    taskQueue: stack.taskQueue,
    checkMedia: mediaCheck(DEFAULT_MODEL_CATALOGUE, 'fake', unsupported),
  });
}

const picture = png(64, 48);
const sha = createHash('sha256').update(picture).digest('hex');
const content = [
  { type: 'text' as const, text: 'describe the media' },
  { type: 'image' as const, data: picture, mediaType: 'image/png' },
];

describe('media and the model a message goes to', () => {
  it('refuses an image for a session whose model takes none, naming the part; nothing is stored, the session unchanged', async () => {
    const client = clientWith('refuse');
    const { header } = await client.start({ sessionId: 'media-deepseek', agent: { model: 'deepseek-flash' } });
    const before = await client.events(header.id);

    const refused = await client.send(header.id, '', { content }).catch((error: unknown) => error);

    expect(refused).toBeInstanceOf(SessionlogError);
    expect(refused).toMatchObject({ code: 'MEDIA_NOT_SUPPORTED', part: 1 });
    expect((refused as Error).message).toContain('model "deepseek-flash" does not take images');
    expect(await client.events(header.id)).toEqual(before);
    await expect(
      stack.store.artifacts.readMedia(header.id, `artifact:${header.id}/media-${sha}.png`),
    ).rejects.toMatchObject({ code: 'ARTIFACT_NOT_FOUND' });
    expect(stack.fake.chatRequests()).toHaveLength(0);
  });

  it('lets the same message through when it asks for a model that takes images, which describes it', async () => {
    const client = clientWith('refuse');
    const { header } = await client.start({ sessionId: 'media-ask-fake', agent: { model: 'deepseek-flash' } });
    const reply = await client.send(header.id, '', { content, agent: { model: 'fake' } });
    expect(reply.outcome).toBe('completed');
    expect(reply.text).toBe(`image image/png 64x48 sha256=${sha.slice(0, 12)}`);
  });

  it('with SESSIONLOG_MEDIA_UNSUPPORTED=stand-in, sends the model that takes none a stand-in naming the artifact', async () => {
    const client = clientWith('stand-in');
    const { header } = await client.start({ sessionId: 'media-stand-in', agent: { model: 'deepseek-flash' } });
    const reply = await client.send(header.id, '', { content });
    expect(reply.outcome).toBe('completed');
    const sent = JSON.stringify(stack.fake.chatRequests().at(-1));
    expect(sent).toContain(`artifact:${header.id}/media-${sha}.png; not sent: this model does not take images]`);
    expect(sent).not.toContain('image_url');
  });
});
