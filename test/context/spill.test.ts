/**
 * Spill of oversized tool output (src/context/spill.ts, dsh-spec §6): property 34.
 *
 * Adaptations (DESIGN §4, §6): the tool activity has already stored the full output in the
 * artifact store before `spillText` shapes the inline text, so "the artifact contains the full
 * original text" is covered where the artifact is written (test/conformance store suite,
 * test/integration/context.test.ts pages a spilled result back with read_artifact). The exempt
 * tool is our `read_artifact` (dsh: `read`), and the hint names read_artifact with an offset
 * (UTF-16 units) that continues right after the preview's head. Property 35 (artifact files
 * created exclusively, 0600, in a per-session 0700 directory, unique names) is covered by
 * test/persistence/jsonl.test.ts and the conformance suite; SQLite keeps artifacts in a table
 * inside its 0600 database file.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { SPILL_EXEMPT_TOOLS, spillText, utf8Head, utf8Tail } from '../../src/context/spill.js';

const bytes = (s: string) => Buffer.byteLength(s, 'utf8');
const LOCATOR = 'artifact:s1/echo-call-7.txt';

/** Text of 1-, 2-, 3- and 4-byte UTF-8 characters (the 4-byte ones are surrogate pairs in JS). */
const multiByteTextArb = fc
  .array(fc.constantFrom('a', 'Z', ' ', '\n', 'é', 'ß', '中', '€', '😀', '𝄞'), { maxLength: 2_000, size: 'max' })
  .map((parts) => parts.join(''));

/** Splits a spilled text into its preview and notice (the notice is the last "(Omitted " on). */
function parse(result: string): { preview: string; notice: string; omitted: number; offset: number } {
  const at = result.lastIndexOf('(Omitted ');
  expect(at).toBeGreaterThanOrEqual(0);
  const notice = result.slice(at);
  if (at > 0) expect(result.slice(at - 2, at)).toBe('\n\n');
  const omitted = Number(/^\(Omitted (\d+) bytes\./.exec(notice)![1]);
  const offset = Number(/"offset": (\d+)/.exec(notice)![1]);
  return { preview: at > 0 ? result.slice(0, at - 2) : '', notice, omitted, offset };
}

/**
 * The notice's template, learned from one spilled sample: `noticeFor(n, o)` is the notice that
 * reports n omitted bytes and a read offset o.
 */
const sample = parse(
  spillText({ text: 'x'.repeat(100_000), locator: LOCATOR, toolName: 'echo', maxInlineBytes: 5_000 }),
).notice;
function noticeFor(omitted: number, offset: number): string {
  return sample
    .replace(/^\(Omitted \d+ bytes\./, `(Omitted ${omitted} bytes.`)
    .replace(/"offset": \d+/, `"offset": ${offset}`);
}

describe('utf8Head / utf8Tail', () => {
  it('return the longest prefix / suffix within the byte budget, cut on a code point boundary', () => {
    fc.assert(
      fc.property(multiByteTextArb, fc.nat(400), (text, budget) => {
        const head = utf8Head(text, budget);
        const tail = utf8Tail(text, budget);
        expect(text.startsWith(head)).toBe(true);
        expect(text.endsWith(tail)).toBe(true);
        expect(bytes(head)).toBeLessThanOrEqual(budget);
        expect(bytes(tail)).toBeLessThanOrEqual(budget);
        // Well-formed: no replacement characters from a split sequence, no lone surrogates.
        expect(Buffer.from(head, 'utf8').toString('utf8')).toBe(head);
        expect(Buffer.from(tail, 'utf8').toString('utf8')).toBe(tail);
        // Maximal: the next code point would not fit.
        const rest = [...text.slice(head.length)];
        if (rest.length > 0) expect(bytes(head + rest[0]!)).toBeGreaterThan(budget);
        const before = [...text.slice(0, text.length - tail.length)];
        if (before.length > 0) expect(bytes(before.at(-1)! + tail)).toBeGreaterThan(budget);
      }),
      { numRuns: 500 },
    );
  });
});

describe('spillText', () => {
  it('is unchanged within the cap, else at most cap bytes: head + tail preview, blank line, notice with the exact omitted bytes, locator and read hint (multi-byte text)', () => {
    let spilled = 0;
    fc.assert(
      fc.property(multiByteTextArb, fc.integer({ min: 0, max: 3_000 }), (text, cap) => {
        const result = spillText({ text, locator: LOCATOR, toolName: 'echo', maxInlineBytes: cap });
        if (bytes(text) <= cap) {
          expect(result).toBe(text);
          return;
        }
        if (result === text) {
          // Kept whole only when even the notice alone (no preview, everything omitted) does not fit.
          expect(bytes(noticeFor(bytes(text), 0))).toBeGreaterThan(cap);
          return;
        }
        spilled += 1;
        expect(bytes(result)).toBeLessThanOrEqual(cap);
        const { preview, notice, omitted, offset } = parse(result);
        expect(omitted).toBe(bytes(text) - bytes(preview));
        expect(notice).toBe(noticeFor(omitted, offset));
        expect(notice).toContain(`Full result stored at: ${LOCATOR}.`);
        expect(notice).toContain('read_artifact');
        expect(notice).toContain(`"locator": "${LOCATOR}"`);
        // The preview is a head and a tail of the text; the hint's offset continues after the head.
        const head = preview.slice(0, offset);
        const tail = preview.slice(offset);
        expect(text.startsWith(head)).toBe(true);
        expect(text.endsWith(tail)).toBe(true);
        expect(head.length + tail.length).toBeLessThan(text.length);
        expect(Buffer.from(preview, 'utf8').toString('utf8')).toBe(preview);
      }),
      { numRuns: 500 },
    );
    expect(spilled).toBeGreaterThan(50);
  });

  it('spills at exactly one byte over the cap and not at the cap', () => {
    const cap = 1_000;
    const atCap = 'é'.repeat(cap / 2);
    expect(spillText({ text: atCap, locator: LOCATOR, toolName: 'echo', maxInlineBytes: cap })).toBe(atCap);
    const over = `${atCap}x`;
    const result = spillText({ text: over, locator: LOCATOR, toolName: 'echo', maxInlineBytes: cap });
    expect(result).not.toBe(over);
    expect(bytes(result)).toBeLessThanOrEqual(cap);
    expect(parse(result).omitted).toBe(bytes(over) - bytes(parse(result).preview));
  });

  it('splits the preview budget evenly between head and tail bytes (head gets the odd byte)', () => {
    const text = 'x'.repeat(10_000);
    const result = spillText({ text, locator: LOCATOR, toolName: 'echo', maxInlineBytes: 2_001 });
    const { preview, offset } = parse(result);
    const headBytes = offset;
    const tailBytes = preview.length - offset;
    expect(headBytes - tailBytes === 0 || headBytes - tailBytes === 1).toBe(true);
    expect(bytes(result)).toBeLessThanOrEqual(2_001);
    // The notice was reserved at its largest (omitted = total), so the actual one leaves at most a few bytes unused.
    expect(2_001 - bytes(result)).toBeLessThan(10);
  });

  it('leaves the output of an exempt tool unchanged however large', () => {
    expect([...SPILL_EXEMPT_TOOLS]).toContain('read_artifact');
    const text = 'y'.repeat(50_000);
    expect(spillText({ text, locator: LOCATOR, toolName: 'read_artifact', maxInlineBytes: 100 })).toBe(text);
  });

  it('keeps the original when the notice alone exceeds the cap', () => {
    const text = 'z'.repeat(500);
    expect(spillText({ text, locator: LOCATOR, toolName: 'echo', maxInlineBytes: 50 })).toBe(text);
  });

  it('emits the notice alone, omitting every byte, when the cap admits the notice but no preview', () => {
    const text = 'z'.repeat(5_000);
    const noticeOnly = noticeFor(5_000, 0);
    expect(spillText({ text, locator: LOCATOR, toolName: 'echo', maxInlineBytes: bytes(noticeOnly) })).toBe(noticeOnly);
    expect(spillText({ text, locator: LOCATOR, toolName: 'echo', maxInlineBytes: bytes(noticeOnly) - 1 })).toBe(text);
  });
});
