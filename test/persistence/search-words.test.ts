/**
 * The search pieces every backend shares (src/persistence/search.ts): which text of an event is
 * searchable, how text becomes words, how a query is validated, and how snippets are cut.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  MAX_INDEXED_BYTES,
  MAX_WORD_CHARS,
  SNIPPET_MAX_CHARS,
  buildSnippet,
  indexedWords,
  parseSearchRequest,
  scanSession,
  searchableText,
} from '../../src/persistence/search.js';
import { SESSION_FORMAT_VERSION, Session, type NewEvent } from '../../src/session/index.js';

describe('words', () => {
  it('are runs of letters and digits, folded to lower case without accents', () => {
    expect(indexedWords('Hello, WORLD! Café naïve ÉCOLE façade Straße 42nd')).toEqual([
      'hello',
      'world',
      'cafe',
      'naive',
      'ecole',
      'facade',
      'straße',
      '42nd',
    ]);
    expect(indexedWords('src/zoo_keeper-v2.ts:12 user@example.com https://x.org/a?b=c')).toEqual([
      'src',
      'zoo',
      'keeper',
      'v2',
      'ts',
      '12',
      'user',
      'example',
      'com',
      'https',
      'x',
      'org',
      'a',
      'b',
      'c',
    ]);
    expect(indexedWords('Привет МИР Ωmega')).toEqual(['привет', 'мир', 'ωmega']);
  });

  it('make each Han, Hiragana and Katakana character a word of its own, since those scripts do not separate words', () => {
    expect(indexedWords('東京で会議')).toEqual(['東', '京', 'で', '会', '議']);
    expect(indexedWords('abc東京def')).toEqual(['abc', '東', '京', 'def']);
    expect(indexedWords('한국어 문장')).toEqual(['한국어', '문장']);
  });

  it(`leave out words longer than ${MAX_WORD_CHARS} characters and everything past ${MAX_INDEXED_BYTES} bytes`, () => {
    expect(indexedWords(`short ${'x'.repeat(MAX_WORD_CHARS + 1)} ${'y'.repeat(MAX_WORD_CHARS)} end`)).toEqual([
      'short',
      'y'.repeat(MAX_WORD_CHARS),
      'end',
    ]);
    const words = indexedWords('abcdefg '.repeat(20_000));
    expect(words.length).toBe(Math.floor(MAX_INDEXED_BYTES / 8));
    const wide = indexedWords('日本語 '.repeat(50_000));
    expect(wide.reduce((sum, w) => sum + Buffer.byteLength(w) + 1, 0)).toBeLessThanOrEqual(MAX_INDEXED_BYTES);
  });
});

describe('searchable text', () => {
  it('decodes JSON tool-call arguments into key: value lines, and keeps malformed arguments as written', () => {
    const call = (args: string) =>
      searchableText({ type: 'tool/call', data: { turn: 1, step: 1, callId: 'c', name: 'edit', arguments: args } });
    expect(call(JSON.stringify({ path: 'a.ts', text: 'line one\nline "two"', opts: [1, { deep: true }] }))).toBe(
      'edit\npath: a.ts\ntext: line one\nline "two"\nopts: 1\ndeep: true',
    );
    expect(call('{"unterminated": ')).toBe('edit\n{"unterminated": ');
  });

  it('is undefined for events without text, and tolerates stored data of any shape', () => {
    expect(searchableText({ type: 'turn/start', data: { turn: 1 } })).toBeUndefined();
    expect(
      searchableText({ type: 'assistant/chunk', data: { chunk: { kind: 'text-delta', text: 'x' } } }),
    ).toBeUndefined();
    expect(searchableText({ type: 'user/message', data: null })).toBe('');
    expect(searchableText({ type: 'user/message', data: { content: 'not blocks' } })).toBe('');
    expect(
      searchableText({
        type: 'tool/result',
        data: {
          message: {
            content: [
              {
                type: 'tool-result',
                content: [
                  { type: 'text', text: 7 },
                  { type: 'text', text: 'ok' },
                ],
              },
            ],
          },
        },
      }),
    ).toBe('ok');
    let deep: unknown = [{ type: 'text', text: 'bottom' }];
    for (let i = 0; i < 50_000; i++) deep = [{ type: 'tool-result', content: deep }];
    expect(searchableText({ type: 'user/message', data: { content: deep } })).toBe('bottom');
  });
});

describe('queries', () => {
  it('are the distinct words of the query, with the limit defaulted', () => {
    expect(parseSearchRequest('Walrus walrus "plan" OR plan*', undefined)).toEqual({
      words: ['walrus', 'plan', 'or'],
      limit: 20,
    });
    expect(parseSearchRequest('?!', { limit: 3 })).toEqual({ words: [], limit: 3 });
  });
});

describe('the JSONL scan', () => {
  const sessionOf = (texts: readonly string[]): Session => {
    const session = Session.create({ version: SESSION_FORMAT_VERSION, id: 's', createdAt: 0 });
    const events = texts.map((text, i): NewEvent => ({
      type: 'user/message',
      time: 0,
      data: { id: `u${i}`, role: 'user', content: [{ type: 'text', text }], source: { kind: 'user' } },
      surfaceOp: 'append',
    }));
    if (events.length > 0) session.appendBatch(events, 'b');
    return session;
  };

  it('counts ASCII text in place exactly as the general word list does (same hits, same scores)', () => {
    const piece = fc.constantFrom(
      'gecko',
      'Gecko',
      'GECKO',
      'geckos',
      'a',
      'b1',
      'x'.repeat(MAX_WORD_CHARS + 3),
      '-',
      '_',
      '.',
      ' ',
      '\n',
      'gecko-gecko',
      '9gecko',
      'gecko9',
    );
    fc.assert(
      fc.property(
        fc.array(
          fc.array(piece, { maxLength: 30 }).map((p) => p.join('')),
          { maxLength: 12 },
        ),
        (texts) => {
          // An em dash makes the text non-ASCII (the general path) without adding a word.
          for (const words of [['gecko'], ['gecko', 'a'], ['b1']]) {
            expect(scanSession(sessionOf(texts), words, 100)).toEqual(
              scanSession(sessionOf(texts.map((t) => `${t} —`)), words, 100),
            );
          }
        },
      ),
      { numRuns: 200 },
    );
  });
});

describe('snippets', () => {
  it('return short text whole, whitespace collapsed', () => {
    expect(buildSnippet('  a\n\n walrus\tplan ', new Set(['walrus']))).toBe('a walrus plan');
  });

  it('prefer the window holding the most distinct query words', () => {
    const text = `walrus ${'x '.repeat(400)} walrus plan budget ${'y '.repeat(400)} plan`;
    const snippet = buildSnippet(text, new Set(['walrus', 'plan', 'budget']));
    expect(snippet).toContain('walrus plan budget');
    expect(snippet.startsWith('…') && snippet.endsWith('…')).toBe(true);
  });

  it('are at most 300 characters, never split a surrogate pair, and hold a query word the text holds', () => {
    fc.assert(
      fc.property(
        fc.array(fc.string({ unit: 'binary', maxLength: 12 }), { maxLength: 120 }),
        fc.nat(),
        (pieces, pick) => {
          const text = pieces.join(' ');
          const words = indexedWords(text);
          const wanted = words.length > 0 ? new Set([words[pick % words.length]!]) : new Set(['absent']);
          const snippet = buildSnippet(text, wanted);
          expect(snippet.length).toBeLessThanOrEqual(SNIPPET_MAX_CHARS);
          expect(() => encodeURIComponent(snippet)).not.toThrow();
          if (words.length > 0) expect(indexedWords(snippet)).toContain([...wanted][0]);
        },
      ),
      { numRuns: 300 },
    );
  });
});
