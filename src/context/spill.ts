/**
 * Spill (dsh-spec §6): a tool output larger than the inline cap is logged as a head/tail
 * preview plus a notice naming the exact omitted byte count and the artifact that holds the
 * whole text. The full output is already in the artifact store (the tool activity put it there).
 */

export type SpillInput = { text: string; locator: string; toolName: string; maxInlineBytes: number };

/** Tools whose output is never spilled (reading an artifact must not create another one to read). */
export const SPILL_EXEMPT_TOOLS: ReadonlySet<string> = new Set(['read_artifact']);

function utf8Bytes(text: string): number {
  return Buffer.byteLength(text, 'utf8');
}

/** The longest prefix of `text` within `bytes` UTF-8 bytes, cut on a code point boundary. */
export function utf8Head(text: string, bytes: number): string {
  const buf = Buffer.from(text, 'utf8');
  if (buf.length <= bytes) return text;
  let end = Math.max(0, bytes);
  while (end > 0 && (buf[end]! & 0xc0) === 0x80) end--;
  return buf.subarray(0, end).toString('utf8');
}

/** The longest suffix of `text` within `bytes` UTF-8 bytes, cut on a code point boundary. */
export function utf8Tail(text: string, bytes: number): string {
  const buf = Buffer.from(text, 'utf8');
  if (buf.length <= bytes) return text;
  let start = buf.length - Math.max(0, bytes);
  while (start < buf.length && (buf[start]! & 0xc0) === 0x80) start++;
  return buf.subarray(start).toString('utf8');
}

function notice(omittedBytes: number, locator: string, headChars: number): string {
  return (
    `(Omitted ${omittedBytes} bytes. Full result stored at: ${locator}. ` +
    `Read it with the read_artifact tool: {"locator": "${locator}", "offset": ${headChars}, "limit": 20000} continues after the preview; offset and limit count characters.)`
  );
}

/**
 * The inline text for a tool output: unchanged when within `maxInlineBytes` (or exempt),
 * else preview + blank line + notice, at most `maxInlineBytes` bytes. Returns the original
 * when even the notice does not fit.
 */
export function spillText(input: SpillInput): string {
  const total = utf8Bytes(input.text);
  if (total <= input.maxInlineBytes || SPILL_EXEMPT_TOOLS.has(input.toolName)) return input.text;
  const reserve = utf8Bytes(notice(total, input.locator, input.text.length)) + 2;
  const budget = Math.max(0, input.maxInlineBytes - reserve);
  const head = utf8Head(input.text, Math.ceil(budget / 2));
  const tail = utf8Tail(input.text, Math.floor(budget / 2));
  const omitted = total - utf8Bytes(head) - utf8Bytes(tail);
  const preview = head + tail;
  const text = (preview.length > 0 ? `${preview}\n\n` : '') + notice(omitted, input.locator, head.length);
  return utf8Bytes(text) <= input.maxInlineBytes ? text : input.text;
}
