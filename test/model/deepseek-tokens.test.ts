import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { encodeOrdinary } from '../../src/model/deepseek-tokens.js';
import { lenmlOrdinary } from '../support/lenml-ordinary.js';

/** lenml's own ordinary encoding, pre-tokenizer and all: what `encodeOrdinary` must equal. */
const lenmlIds = lenmlOrdinary();

/**
 * Characters from every class the pre-tokenizer's regexes and the byte-level map treat apart:
 * ASCII letters, digits, punctuation, spaces, tabs, line ends and controls (the fast path),
 * and Latin-1, accents, combining marks, CJK, kana, other digits, emoji as surrogate pairs and
 * lone surrogates (lenml's path).
 */
const alphabet = [
  ...'abcXYZ019 .,;:!?\'"`~-_()[]{}<>/\\|@#$%^&*+=',
  ' ',
  '  ',
  '\t',
  '\n',
  '\r\n',
  '\r',
  '\u0000',
  '\u001f',
  '\u007f',
  'é',
  'ß',
  'ü',
  'e\u0301',
  '\u00a0',
  '中',
  '文字',
  'ひら',
  'カタ',
  '٣',
  '²',
  '😀',
  '👍🏽',
  '\ud800',
  '\udfff',
  '\u2028',
  '＜｜',
  '<｜end▁of▁sentence｜>',
];
const text = fc.array(fc.constantFrom(...alphabet), { maxLength: 60 }).map((parts) => parts.join(''));

describe('encodeOrdinary', () => {
  it("gives lenml's own ids for text of every character class (ASCII pieces mapped by the fast path, every piece's ids kept and reused)", () => {
    fc.assert(
      fc.property(text, (sample) => {
        expect(encodeOrdinary(sample)).toEqual(lenmlIds(sample));
      }),
      { numRuns: 3000 },
    );
  });

  it("gives lenml's own ids for a long reply, a code block and whitespace runs", () => {
    const prose = 'The session log is the source of truth; every message is derived from it. '.repeat(20);
    const code =
      '```ts\nconst x = await fetch(`http://127.0.0.1:8080/v1/sessions/${id}`);\n\tif (!x.ok) throw x;\n```\n';
    for (const sample of [prose, code, '   \n\n\t  x  ', '12345678901234', 'a'.repeat(5000), `${prose}中文${code}`]) {
      expect(encodeOrdinary(sample)).toEqual(lenmlIds(sample));
    }
    expect(encodeOrdinary('')).toEqual([]);
  });
});
