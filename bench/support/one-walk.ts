/**
 * Two ways the append path could share one serialisation between its copy and its row, measured
 * by `bench/store.ts` ("Where an append's time goes") against what it does (a frozen copy, then
 * `JSON.stringify` of it for the row). Neither is used by sessionlog: both are slower.
 *
 * - {@link copyWithText}: one walk that builds the frozen copy and the JSON text together.
 * - {@link textThenParse}: `JSON.stringify` of the input first, and the copy parsed back from it.
 *   It skips the lossless checks the append path needs (it would turn -0 into 0, drop undefined,
 *   call `toJSON`), so it is a lower bound of that approach, not a candidate as it stands.
 *
 * The walk also skips the append path's checks of prototypes and hidden keys, so both are timed
 * as cheaper than a real implementation of either would be.
 */
import { deepFreeze } from '../../src/session/index.js';

/** A value the walk does not copy (the append path hands it to `toLosslessJson`). */
const NOT_PLAIN = new Error('not plain JSON');

/** The frozen copy of plain JSON and its JSON text, from one walk. */
export function copyWithText(value: unknown): { copy: unknown; text: string } {
  const parts: string[] = [];
  const copy = walk(value, 0, parts);
  return { copy, text: parts.join('') };
}

function walk(source: unknown, depth: number, out: string[]): unknown {
  if (typeof source === 'number' && (!Number.isFinite(source) || Object.is(source, -0))) throw NOT_PLAIN;
  if (source === null || typeof source !== 'object') {
    if (source !== null && typeof source !== 'string' && typeof source !== 'number' && typeof source !== 'boolean')
      throw NOT_PLAIN;
    out.push(JSON.stringify(source));
    return source;
  }
  if (depth >= 64) throw NOT_PLAIN;
  if (Array.isArray(source)) {
    const array: unknown[] = new Array<unknown>(source.length);
    out.push('[');
    for (let i = 0; i < source.length; i++) {
      if (i > 0) out.push(',');
      array[i] = walk(source[i], depth + 1, out);
    }
    out.push(']');
    return Object.freeze(array);
  }
  const object: Record<string, unknown> = {};
  out.push('{');
  let first = true;
  for (const key of Object.keys(source)) {
    const item = (source as Record<string, unknown>)[key];
    if (item === undefined || key === '__proto__') throw NOT_PLAIN;
    out.push(first ? '' : ',', JSON.stringify(key), ':');
    first = false;
    object[key] = walk(item, depth + 1, out);
  }
  out.push('}');
  return Object.freeze(object);
}

/** The JSON text first, and the frozen copy parsed back from it (no lossless checks). */
export function textThenParse(value: unknown): { copy: unknown; text: string } {
  const text = JSON.stringify(value);
  return { copy: deepFreeze(JSON.parse(text) as unknown), text };
}
