/**
 * The media checks (src/session/media.ts, issue 50): what a caller's bytes must be before anything
 * is stored, and how an error names the part it is about.
 */
import { describe, expect, it } from 'vitest';
import {
  SessionlogError,
  assertEventData,
  checkUserParts,
  fastAcceptsEventData,
  dataUrlParts,
  inspectMedia,
  isSessionlogError,
  mediaLocator,
  parseMediaLocator,
  storedMediaProblem,
  type SessionErrorCode,
} from '../../src/session/index.js';
import {
  GIF_1X1,
  PDF_MINIMAL,
  WEBP_LOSSLESS_1X1,
  WEBP_LOSSY_1X1,
  base64,
  jpeg,
  noisyPng,
  png,
  utf8,
  webpExtended,
} from '../support/media.js';
import { parseMessageBody } from '../../src/persistence/index.js';

const MiB = 1024 * 1024;
const SHA = 'a'.repeat(64);

function refusal(attempt: () => unknown): SessionlogError {
  try {
    attempt();
  } catch (error) {
    if (error instanceof SessionlogError) return error;
    throw error;
  }
  throw new Error('did not fail');
}

function expectCode(attempt: () => unknown, code: SessionErrorCode, message?: RegExp): SessionlogError {
  const error = refusal(attempt);
  expect(error.code, error.message).toBe(code);
  if (message) expect(error.message).toMatch(message);
  return error;
}

describe('inspectMedia: the bytes are what they claim', () => {
  it('reads the pixel size of PNG, JPEG, GIF and WebP (lossless, lossy, extended) from their own headers', () => {
    expect(inspectMedia(png(3, 2), 'image/png', MiB)).toEqual({ mediaType: 'image/png', width: 3, height: 2 });
    expect(inspectMedia(jpeg(640, 480), 'image/jpeg', MiB)).toEqual({
      mediaType: 'image/jpeg',
      width: 640,
      height: 480,
    });
    expect(inspectMedia(jpeg(5, 7), 'image/jpg', MiB)).toEqual({ mediaType: 'image/jpeg', width: 5, height: 7 });
    expect(inspectMedia(GIF_1X1, 'image/gif', MiB)).toEqual({ mediaType: 'image/gif', width: 1, height: 1 });
    expect(inspectMedia(WEBP_LOSSLESS_1X1, 'image/webp', MiB)).toEqual({
      mediaType: 'image/webp',
      width: 1,
      height: 1,
    });
    expect(inspectMedia(WEBP_LOSSY_1X1, 'image/webp', MiB)).toEqual({ mediaType: 'image/webp', width: 1, height: 1 });
    expect(inspectMedia(webpExtended(300, 200), 'IMAGE/WEBP', MiB)).toEqual({
      mediaType: 'image/webp',
      width: 300,
      height: 200,
    });
  });

  it('accepts a PDF by its %PDF- header and plain text that is well-formed UTF-8 (charset utf-8 allowed)', () => {
    expect(inspectMedia(PDF_MINIMAL, 'application/pdf', MiB)).toEqual({ mediaType: 'application/pdf' });
    expect(inspectMedia(utf8('grüße 𝄞'), 'text/plain; charset=UTF-8', MiB)).toEqual({ mediaType: 'text/plain' });
  });

  it('refuses a declared type the bytes do not have, naming both', () => {
    expectCode(() => inspectMedia(png(1, 1), 'image/jpeg', MiB), 'INVALID_MEDIA', /declared image\/jpeg.*image\/png/);
    expectCode(() => inspectMedia(jpeg(1, 1), 'image/png', MiB), 'INVALID_MEDIA', /declared image\/png.*image\/jpeg/);
    expectCode(() => inspectMedia(utf8('hello'), 'image/png', MiB), 'INVALID_MEDIA', /not image\/png/);
    expectCode(() => inspectMedia(utf8('hello'), 'application/pdf', MiB), 'INVALID_MEDIA', /%PDF-/);
    expectCode(() => inspectMedia(png(1, 1), 'text/plain', MiB), 'INVALID_MEDIA', /image\/png/);
    expectCode(() => inspectMedia(new Uint8Array([0xff, 0xfe, 0x00]), 'text/plain', MiB), 'INVALID_MEDIA', /UTF-8/);
  });

  it('refuses an unknown or missing type, and a charset other than UTF-8', () => {
    expectCode(() => inspectMedia(png(1, 1), 'image/tiff', MiB), 'UNSUPPORTED_MEDIA_TYPE', /image\/tiff.*image\/png/);
    expectCode(() => inspectMedia(png(1, 1), 'application/octet-stream', MiB), 'UNSUPPORTED_MEDIA_TYPE');
    expectCode(() => inspectMedia(png(1, 1), '', MiB), 'UNSUPPORTED_MEDIA_TYPE');
    expectCode(() => inspectMedia(utf8('x'), 'text/plain; charset=latin1', MiB), 'UNSUPPORTED_MEDIA_TYPE', /UTF-8/);
  });

  it('refuses a truncated image of every kind', () => {
    const cut = (bytes: Uint8Array, keep: number) => bytes.subarray(0, keep);
    const image = png(16, 16);
    for (const keep of [8, 20, 40, image.length - 1])
      expectCode(() => inspectMedia(cut(image, keep), 'image/png', MiB), 'INVALID_MEDIA', /truncated/);
    const photo = jpeg(16, 16);
    for (const keep of [4, 12, 30, photo.length - 2])
      expectCode(() => inspectMedia(cut(photo, keep), 'image/jpeg', MiB), 'INVALID_MEDIA', /truncated/);
    expectCode(() => inspectMedia(cut(GIF_1X1, GIF_1X1.length - 1), 'image/gif', MiB), 'INVALID_MEDIA', /truncated/);
    expectCode(() => inspectMedia(cut(GIF_1X1, 10), 'image/gif', MiB), 'INVALID_MEDIA', /truncated/);
    const webp = webpExtended(10, 10);
    expectCode(() => inspectMedia(cut(webp, webp.length - 3), 'image/webp', MiB), 'INVALID_MEDIA', /truncated/);
    expectCode(() => inspectMedia(cut(WEBP_LOSSY_1X1, 20), 'image/webp', MiB), 'INVALID_MEDIA', /truncated/);
  });

  it('refuses an image whose header says zero pixels', () => {
    expectCode(() => inspectMedia(jpeg(0, 10), 'image/jpeg', MiB), 'INVALID_MEDIA', /0x10/);
  });

  it('refuses bytes over the limit (MEDIA_TOO_LARGE, naming the limit) and empty bytes', () => {
    const image = png(64, 64);
    expectCode(
      () => inspectMedia(image, 'image/png', image.length - 1),
      'MEDIA_TOO_LARGE',
      /SESSIONLOG_MAX_MEDIA_BYTES/,
    );
    expect(inspectMedia(image, 'image/png', image.length).width).toBe(64);
    expectCode(() => inspectMedia(new Uint8Array(), 'image/png', MiB), 'INVALID_MEDIA', /empty/);
  });
});

describe('checkUserParts: a message content checked part by part', () => {
  const limits = { maxBytes: MiB };

  it('accepts text, base64 and byte images, a data URL, an http(s) URL, a file and an artifact reference', () => {
    const image = png(2, 2);
    const parts = checkUserParts(
      [
        { type: 'text', text: 'what is this?' },
        { type: 'image', data: base64(image), mediaType: 'image/png', detail: 'low' },
        { type: 'image', data: image, mediaType: 'image/png' },
        { type: 'image', url: `data:image/png;base64,${base64(image)}` },
        { type: 'image', url: 'https://example.com/cat.png', detail: 'high' },
        { type: 'file', data: base64(PDF_MINIMAL), mediaType: 'application/pdf', filename: 'a.pdf' },
        { type: 'image', artifact: mediaLocator('s', SHA, 'image/png') },
      ],
      limits,
    );
    expect(parts[0]).toEqual({ type: 'text', text: 'what is this?' });
    expect(parts[1]).toMatchObject({
      type: 'image',
      kind: 'bytes',
      mediaType: 'image/png',
      width: 2,
      height: 2,
      detail: 'low',
    });
    expect(Buffer.from((parts[1] as { bytes: Uint8Array }).bytes).equals(Buffer.from(image))).toBe(true);
    expect(parts[2]).toMatchObject({ kind: 'bytes', width: 2 });
    expect(parts[3]).toMatchObject({ kind: 'bytes', mediaType: 'image/png', width: 2 });
    expect(parts[4]).toEqual({ type: 'image', kind: 'url', url: 'https://example.com/cat.png', detail: 'high' });
    expect(parts[5]).toMatchObject({ type: 'file', kind: 'bytes', mediaType: 'application/pdf', filename: 'a.pdf' });
    expect(parts[6]).toEqual({ type: 'image', kind: 'artifact', locator: `artifact:s/media-${SHA}.png` });
  });

  it('names the part: error.part is the index and the message starts with content[i]', () => {
    const error = expectCode(
      () =>
        checkUserParts(
          [
            { type: 'text', text: 'hi' },
            { type: 'image', data: base64(png(1, 1)), mediaType: 'image/gif' },
          ],
          limits,
        ),
      'INVALID_MEDIA',
      /^content\[1\]: .*declared image\/gif/,
    );
    expect(error.part).toBe(1);
  });

  const bad: Array<[string, unknown, SessionErrorCode, RegExp]> = [
    ['a data URL that is not base64', { type: 'image', url: 'data:image/png,%89PNG' }, 'INVALID_MEDIA', /not base64/],
    [
      'base64 with characters outside the alphabet',
      { type: 'image', data: 'iVBO$$$', mediaType: 'image/png' },
      'INVALID_MEDIA',
      /base64/,
    ],
    ['a file: URL', { type: 'image', url: 'file:///etc/passwd' }, 'INVALID_MEDIA', /scheme "file"/],
    ['an ftp URL', { type: 'image', url: 'ftp://example.com/a.png' }, 'INVALID_MEDIA', /scheme "ftp"/],
    ['not a URL', { type: 'image', url: 'cat.png' }, 'INVALID_MEDIA', /not a valid URL/],
    [
      'an unknown type',
      { type: 'image', data: base64(png(1, 1)), mediaType: 'image/bmp' },
      'UNSUPPORTED_MEDIA_TYPE',
      /image\/bmp/,
    ],
    [
      'a mismatched type',
      { type: 'image', data: base64(png(1, 1)), mediaType: 'image/webp' },
      'INVALID_MEDIA',
      /declared image\/webp/,
    ],
    [
      'a truncated image',
      { type: 'image', data: base64(png(4, 4).subarray(0, 30)), mediaType: 'image/png' },
      'INVALID_MEDIA',
      /truncated/,
    ],
    [
      'an oversized image',
      { type: 'image', data: noisyPng(200, 200), mediaType: 'image/png' },
      'MEDIA_TOO_LARGE',
      /limit/,
    ],
    [
      'a PDF as an image part',
      { type: 'image', data: PDF_MINIMAL, mediaType: 'application/pdf' },
      'INVALID_MEDIA',
      /file part/,
    ],
    [
      'an image as a file part',
      { type: 'file', data: png(1, 1), mediaType: 'image/png' },
      'INVALID_MEDIA',
      /image part/,
    ],
    ['a file by URL', { type: 'file', url: 'https://example.com/a.pdf' }, 'INVALID_MEDIA', /not a url/],
    ['a malformed artifact', { type: 'image', artifact: 'artifact:s/tool-1.txt' }, 'INVALID_MEDIA', /stored medium/],
    [
      'an artifact of the wrong kind',
      { type: 'file', artifact: mediaLocator('s', SHA, 'image/png') },
      'INVALID_MEDIA',
      /not an file/,
    ],
    [
      'two sources',
      { type: 'image', url: 'https://e.com/a.png', data: 'AAAA', mediaType: 'image/png' },
      'INVALID_MESSAGE',
      /exactly one/,
    ],
    ['no source', { type: 'image' }, 'INVALID_MESSAGE', /exactly one/],
    ['an unknown part type', { type: 'audio', data: 'AAAA' }, 'INVALID_MESSAGE', /text, image or file/],
    ['a bad detail', { type: 'image', url: 'https://e.com/a.png', detail: 'ultra' }, 'INVALID_MESSAGE', /detail/],
  ];
  for (const [what, part, code, message] of bad) {
    it(`refuses ${what} as ${code}, naming the part`, () => {
      const error = expectCode(
        () => checkUserParts([{ type: 'text', text: 'x' }, part], { maxBytes: 64 * 1024 }),
        code,
        message,
      );
      expect(error.part).toBe(1);
      expect(error.message.startsWith('content[1]: ')).toBe(true);
    });
  }

  it('dataUrlParts splits a base64 data URL and refuses any other', () => {
    expect(dataUrlParts('data:image/png;base64,AAAA')).toEqual({ mediaType: 'image/png', base64: 'AAAA' });
    expect(dataUrlParts('data:text/plain;charset=utf-8;base64,aGk=')).toEqual({
      mediaType: 'text/plain; charset=utf-8',
      base64: 'aGk=',
    });
    expectCode(() => dataUrlParts('data:text/plain,hello'), 'INVALID_MEDIA', /not base64/);
    expectCode(() => dataUrlParts('https://example.com'), 'INVALID_MEDIA', /data:/);
  });
});

describe('stored media locators and shapes', () => {
  it('a locator names the session, the digest and the type', () => {
    const locator = mediaLocator('s-1', SHA, 'image/jpeg');
    expect(locator).toBe(`artifact:s-1/media-${SHA}.jpg`);
    expect(parseMediaLocator(locator)).toEqual({
      sessionId: 's-1',
      sha256: SHA,
      mediaType: 'image/jpeg',
      name: `media-${SHA}.jpg`,
    });
    for (const bad of ['artifact:s/media-abc.png', `artifact:s/media-${SHA}.bmp`, `artifact:../x/media-${SHA}.png`, 42])
      expect(parseMediaLocator(bad)).toBeUndefined();
  });

  it('storedMediaProblem accepts a well-formed image of this session and names what is wrong otherwise', () => {
    const good = {
      kind: 'artifact',
      locator: mediaLocator('s', SHA, 'image/png'),
      mediaType: 'image/png',
      bytes: 10,
      sha256: SHA,
      width: 2,
      height: 3,
    };
    expect(storedMediaProblem(good, 's')).toBeUndefined();
    expect(storedMediaProblem(good, 'other')).toMatch(/not this session/);
    expect(storedMediaProblem({ ...good, width: 0 }, 's')).toMatch(/width/);
    expect(storedMediaProblem({ ...good, height: 1.5 }, 's')).toMatch(/height/);
    expect(storedMediaProblem({ ...good, sha256: 'b'.repeat(64) }, 's')).toMatch(/sha256/);
    expect(storedMediaProblem({ ...good, mediaType: 'image/gif' }, 's')).toMatch(/disagree/);
    expect(storedMediaProblem({ ...good, bytes: 0 }, 's')).toMatch(/bytes/);
    expect(storedMediaProblem({ ...good, data: 'AAAA' }, 's')).toMatch(/unknown field data/);
    const pdf = {
      kind: 'artifact',
      locator: mediaLocator('s', SHA, 'application/pdf'),
      mediaType: 'application/pdf',
      bytes: 10,
      sha256: SHA,
    };
    expect(storedMediaProblem(pdf, 's')).toBeUndefined();
    expect(storedMediaProblem({ ...pdf, width: 3 }, 's')).toMatch(/images only/);
  });

  it('every media error is a refusal a caller is told', () => {
    for (const code of ['INVALID_MEDIA', 'MEDIA_TOO_LARGE', 'UNSUPPORTED_MEDIA_TYPE'] as const)
      expect(isSessionlogError(new SessionlogError(code, 'x'), code)).toBe(true);
  });
});

describe('stored events with media blocks (validate.ts)', () => {
  const image = {
    kind: 'artifact',
    locator: mediaLocator('s', SHA, 'image/png'),
    mediaType: 'image/png',
    bytes: 120,
    sha256: SHA,
    width: 4,
    height: 3,
  };
  const userWith = (...blocks: unknown[]) => ({
    id: 'u1',
    role: 'user',
    content: [{ type: 'text', text: 'look' }, ...blocks],
    source: { kind: 'user' },
  });
  const toolWith = (...blocks: unknown[]) => ({
    turn: 1,
    step: 1,
    message: {
      id: 'r1',
      role: 'user',
      content: [{ type: 'tool-result', toolCallId: 'c1', content: blocks }],
      source: { kind: 'tool', callId: 'c1' },
    },
  });
  const accepted = (type: string, data: unknown) => {
    assertEventData(type, data, 'test');
    expect(fastAcceptsEventData(type, data)).not.toBe(false);
  };
  const refused = (type: string, data: unknown, message: RegExp) => {
    expect(() => assertEventData(type, data, 'test')).toThrow(message);
    expect(fastAcceptsEventData(type, data)).not.toBe(true);
  };

  it('accepts image and file blocks in user messages and tool results, and a log without media as before', () => {
    accepted('user/message', userWith({ type: 'image', source: image, detail: 'auto' }));
    accepted('user/message', userWith({ type: 'image', source: { kind: 'url', url: 'http://example.com/a.png' } }));
    accepted(
      'user/message',
      userWith({
        type: 'file',
        source: {
          ...image,
          locator: mediaLocator('s', SHA, 'text/plain'),
          mediaType: 'text/plain',
          width: undefined,
          height: undefined,
        },
      }),
    );
    accepted('tool/result', toolWith({ type: 'text', text: 'chart' }, { type: 'image', source: image }));
    accepted('user/message', userWith());
  });

  it('refuses media in an assistant message, bytes in a block, and every malformed reference', () => {
    refused(
      'assistant/message',
      {
        turn: 1,
        step: 1,
        message: {
          id: 'a',
          role: 'assistant',
          content: [{ type: 'image', source: image }],
          source: { kind: 'caller' },
        },
      },
      /invalid/,
    );
    refused('user/message', userWith({ type: 'image', source: image, data: 'iVBORw0KGgo=' }), /invalid/);
    refused('user/message', userWith({ type: 'image', source: { ...image, data: 'iVBORw0KGgo=' } }), /invalid/);
    refused('user/message', userWith({ type: 'image', source: { kind: 'url', url: 'file:///etc/passwd' } }), /invalid/);
    refused('user/message', userWith({ type: 'image', source: { ...image, mediaType: 'image/bmp' } }), /invalid/);
    refused('user/message', userWith({ type: 'image', source: { ...image, sha256: 'XYZ' } }), /invalid/);
    refused('user/message', userWith({ type: 'image', source: { ...image, width: 0 } }), /invalid/);
    refused(
      'user/message',
      userWith({ type: 'image', source: { ...image, width: undefined } }),
      /width must be a positive integer/,
    );
    refused('user/message', userWith({ type: 'image', source: { ...image, sha256: 'c'.repeat(64) } }), /sha256/);
    refused('user/message', userWith({ type: 'image', source: { ...image, mediaType: 'image/gif' } }), /disagree/);
    refused(
      'user/message',
      userWith({ type: 'image', source: { ...image, locator: 'artifact:s/tool-1.txt' } }),
      /invalid/,
    );
    refused('tool/result', toolWith({ type: 'file', source: image, filename: '' }), /invalid/);
    refused('tool/result', toolWith({ type: 'image', source: { ...image, bytes: -1 } }), /invalid/);
  });
});

describe('checkUserParts: unknown and misplaced fields', () => {
  it('refuses a field no part has, text on a medium, and mediaType without data, naming the part', () => {
    const limits = { maxBytes: MiB };
    for (const [part, message] of [
      [{ type: 'image', url: 'https://e.com/a.png', width: 4 }, /no field "width"/],
      [{ type: 'text', text: 'x', detail: 'low' }, /only type and text/],
      [{ type: 'image', url: 'https://e.com/a.png', text: 'caption' }, /has no text/],
      [{ type: 'image', url: 'https://e.com/a.png', mediaType: 'image/png' }, /mediaType goes with data/],
    ] as const) {
      const error = expectCode(() => checkUserParts([part], limits), 'INVALID_MESSAGE', message);
      expect(error.part).toBe(0);
    }
  });
});

describe('the inbox entry of a message with media (persistence/inbox-entries.ts)', () => {
  const image = {
    kind: 'artifact',
    locator: mediaLocator('s', SHA, 'image/png'),
    mediaType: 'image/png',
    bytes: 120,
    sha256: SHA,
    width: 4,
    height: 3,
  };

  it('reads an entry written before media exactly as before', () => {
    expect(parseMessageBody({ text: 'hi' })).toEqual({ text: 'hi' });
    expect(parseMessageBody({ text: '  ' })).toMatch(/non-blank text/);
  });

  it('reads the blocks of a message with media, with or without text', () => {
    const content = [
      { type: 'text', text: 'look' },
      { type: 'image', source: image },
    ];
    expect(parseMessageBody({ text: 'look', content })).toEqual({ text: 'look', content });
    expect(parseMessageBody({ text: '', content: [{ type: 'image', source: image }] })).toEqual({
      text: '',
      content: [{ type: 'image', source: image }],
    });
  });

  it('refuses blocks that are not text or media, bytes in a block, or no blocks', () => {
    expect(
      parseMessageBody({ text: 'x', content: [{ type: 'tool-call', id: 'c', name: 'n', arguments: '{}' }] }),
    ).toMatch(/text, image or file/);
    expect(parseMessageBody({ text: 'x', content: [{ type: 'image', source: { ...image, data: 'AAAA' } }] })).toMatch(
      /content invalid/,
    );
    expect(parseMessageBody({ text: 'x', content: [] })).toMatch(/non-empty/);
    expect(parseMessageBody({ text: '', content: [{ type: 'text', text: '' }] })).toMatch(/non-blank text or media/);
  });
});
