import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  applyMediaPolicy,
  mediaSentMask,
  mediaStandIn,
  resolveMediaPolicy,
  DEFAULT_MEDIA_POLICY,
} from '../../src/context/media-policy.js';
import type { FileBlock, ImageBlock, Message, StoredMedia } from '../../src/session/messages.js';
import { png, PDF_MINIMAL } from '../support/media.js';
import { assistantMessage, toolResultMessage, userMessage } from '../support/model-fixtures.js';

const BOTH = { image: true, file: true };
const NONE = { image: false, file: false };

function stored(bytes: Uint8Array, mediaType: StoredMedia['mediaType'], size?: [number, number]): StoredMedia {
  const sha256 = createHash('sha256').update(bytes).digest('hex');
  const ext = mediaType === 'application/pdf' ? 'pdf' : 'png';
  return {
    kind: 'artifact',
    locator: `artifact:s1/media-${sha256}.${ext}`,
    mediaType,
    bytes: bytes.byteLength,
    sha256,
    ...(size ? { width: size[0], height: size[1] } : {}),
  };
}

function imageMessage(text: string, image: ImageBlock): Message {
  const base = userMessage(text);
  return { ...base, content: [...base.content, image] };
}

const red = png(1024, 768);
const image: ImageBlock = { type: 'image', source: stored(red, 'image/png', [1024, 768]) };

describe('media policy (issue 50)', () => {
  it('sends the media of the last N user turns and stands in for older ones, naming the artifact', () => {
    const messages: Message[] = [];
    for (let turn = 1; turn <= 5; turn++) {
      messages.push(imageMessage(`turn ${turn}`, image));
      messages.push(assistantMessage([{ type: 'text', text: `seen ${turn}` }]));
    }
    const out = applyMediaPolicy(messages, { recentTurns: 3, unsupported: 'refuse' }, BOTH);
    const kinds = out.filter((m) => m.role === 'user').map((m) => m.content.map((b) => b.type).join('+'));
    expect(kinds).toEqual(['text+text', 'text+text', 'text+image', 'text+image', 'text+image']);
    const locator = (image.source as StoredMedia).locator;
    expect(out[0]!.content[1]).toEqual({
      type: 'text',
      text: `\n[image image/png 1024x768, ${(red.byteLength / 1024).toFixed(1)} KiB, ${locator}; open it again with the open_media tool]`,
    });
  });

  it('counts a run of consecutive user messages as one turn', () => {
    const roles = ['user', 'user', 'assistant', 'user', 'assistant', 'user'] as const;
    expect(mediaSentMask(roles, 2)).toEqual([false, false, false, true, false, true]);
    expect(mediaSentMask(roles, 3)).toEqual([true, true, false, true, false, true]);
    expect(mediaSentMask(roles, 0)).toEqual([false, false, false, false, false, false]);
  });

  it('sends the media of the current tool round only: tool results after the last assistant message', () => {
    const roles = ['user', 'assistant', 'tool', 'assistant', 'tool', 'tool'] as const;
    expect(mediaSentMask(roles, 0)).toEqual([false, false, false, false, true, true]);
    const withResult = (callId: string): Message => {
      const result = toolResultMessage(callId, 'opened');
      return {
        ...result,
        content: [{ ...result.content[0], content: [...result.content[0].content, image] }],
      } as Message;
    };
    const messages = [
      userMessage('look'),
      assistantMessage([{ type: 'tool-call', id: 'c1', name: 'open_media', arguments: '{}' }]),
      withResult('c1'),
      assistantMessage([{ type: 'tool-call', id: 'c2', name: 'open_media', arguments: '{}' }]),
      withResult('c2'),
    ];
    const out = applyMediaPolicy(messages, DEFAULT_MEDIA_POLICY, BOTH);
    const inner = (m: Message) => (m.content[0]!.type === 'tool-result' ? m.content[0]!.content : []);
    expect(inner(out[2]!).map((b) => b.type)).toEqual(['text', 'text']);
    expect(inner(out[4]!).map((b) => b.type)).toEqual(['text', 'image']);
  });

  it('is deterministic: the same messages give the same request messages, and a log without media is untouched', () => {
    const messages = [imageMessage('a', image), assistantMessage([{ type: 'text', text: 'b' }]), userMessage('c')];
    const first = applyMediaPolicy(messages, { recentTurns: 1, unsupported: 'refuse' }, BOTH);
    const second = applyMediaPolicy(structuredClone(messages), { recentTurns: 1, unsupported: 'refuse' }, BOTH);
    expect(JSON.stringify(second)).toBe(JSON.stringify(first));
    const plain = [userMessage('a'), assistantMessage([{ type: 'text', text: 'b' }])];
    const same = applyMediaPolicy(plain, DEFAULT_MEDIA_POLICY, BOTH);
    expect(same).toEqual(plain);
    same.forEach((message, i) => expect(message).toBe(plain[i]));
  });

  it('stands in for every medium a model cannot take, whatever its age, saying why', () => {
    const file: FileBlock = { type: 'file', source: stored(PDF_MINIMAL, 'application/pdf'), filename: 'a.pdf' };
    const last = userMessage('both');
    const out = applyMediaPolicy([{ ...last, content: [...last.content, image, file] }], DEFAULT_MEDIA_POLICY, NONE);
    expect(out[0]!.content.map((b) => (b.type === 'text' ? b.text : b.type))).toEqual([
      'both',
      `\n${mediaStandIn(image, 'unsupported').text}`,
      `\n${mediaStandIn(file, 'unsupported').text}`,
    ]);
    expect(mediaStandIn(image, 'unsupported').text).toContain('not sent: this model does not take images');
    expect(mediaStandIn(file, 'older').text).toMatch(/^\[file "a\.pdf" application\/pdf, \d+ B, artifact:s1\/media-/);
  });

  it('stands in for an older remote image by its URL', () => {
    const remote: ImageBlock = { type: 'image', source: { kind: 'url', url: 'https://example.com/cat.png' } };
    expect(mediaStandIn(remote, 'older').text).toBe(
      '[image https://example.com/cat.png; an earlier image, not sent again]',
    );
  });

  it('refuses a negative recentTurns', () => {
    expect(() => resolveMediaPolicy({ recentTurns: -1 })).toThrow(/recentTurns must be a non-negative integer/);
    expect(resolveMediaPolicy({})).toEqual({ recentTurns: 3, unsupported: 'refuse' });
  });
});
