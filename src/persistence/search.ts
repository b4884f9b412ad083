/**
 * Full-text search of a session's whole log (`SessionStore.search`), the part every backend
 * shares: which events carry text and what that text is, the one word splitter that both the
 * indexes and the queries go through, the query's validation, the JSONL scan with its score, and
 * the snippets. Backends own only where the words are kept (SQLite FTS5, a PostgreSQL `tsvector`
 * column, nothing for JSONL) and how candidates are ranked.
 *
 * Words. An event's text is split into words by {@link forEachWord}: runs of letters, digits and
 * combining marks; each Han, Hiragana or Katakana character is a word of its own (those scripts
 * do not separate words with spaces); everything else separates words. A word is folded to lower
 * case without the accents of Latin, Greek and Cyrillic letters ("Café" → "cafe"). Words longer
 * than {@link MAX_WORD_CHARS} are not indexed, and only the first {@link MAX_INDEXED_BYTES} of an
 * event's words are (PostgreSQL refuses a `tsvector` over 1 MB; the same cap everywhere keeps the
 * backends in agreement). Changing any of this changes what the stored indexes hold: it needs a
 * schema version bump that rebuilds them.
 * SQLite and PostgreSQL index the folded words joined by spaces, so their own tokenizers (FTS5
 * `ascii`, the `simple` configuration) see exactly these words and every backend finds the same
 * events for the same log. SQLite's index is contentless: its `erase` derives each row's words
 * again with {@link indexText} to remove them, which is one more reason a change here needs a
 * version that re-indexes.
 *
 * Queries are plain words, never a query language: the query goes through the same splitter, so
 * FTS5 and tsquery syntax in it (`"`, `*`, `OR`, `NEAR(`, `&`, `:*`) is punctuation or an ordinary
 * word. An event matches when it holds every word of the query, in any order.
 */
import { SessionlogError, type SessionView, type StoredEvent } from '../session/index.js';

/** One search result: the event's seq, its relevance (higher is better; the scale is the backend's), and a window of its text. */
export type SearchHit = { seq: number; score: number; snippet: string };

export type SearchOptions = {
  /** How many hits at most, 1..{@link SEARCH_MAX_LIMIT}. Default {@link SEARCH_DEFAULT_LIMIT}. */
  limit?: number;
};

export const SEARCH_DEFAULT_LIMIT = 20;
export const SEARCH_MAX_LIMIT = 100;
/** A snippet is at most this many characters (UTF-16 code units), ellipses included. */
export const SNIPPET_MAX_CHARS = 300;
/** The longest query accepted, in characters. */
export const MAX_QUERY_CHARS = 1000;
/** The most distinct words a query may have (every one must match). */
export const MAX_QUERY_WORDS = 32;
/** Longer words (encoded blobs) are neither indexed nor matchable. */
export const MAX_WORD_CHARS = 128;
/** How many bytes of folded words (UTF-8, separators included) are indexed per event. */
export const MAX_INDEXED_BYTES = 128 * 1024;

/** The event types whose text is searchable. */
export const SEARCHABLE_EVENT_TYPES = [
  'user/message',
  'assistant/message',
  'tool/result',
  'tool/call',
  'compaction/summary',
] as const;
const SEARCHABLE: ReadonlySet<string> = new Set(SEARCHABLE_EVENT_TYPES);

// ---------------------------------------------------------------------------------------------
// The text of an event

/** An event as a backend may hold it before validation (the upgrade backfill reads raw rows). */
type EventLike = { type: string; data: unknown };

function record(value: unknown): Record<string, unknown> | undefined {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : undefined;
}

/**
 * The searchable text of an event, or undefined for an event that carries none: the text and
 * reasoning of a message's content blocks, its tool calls (name and arguments), a tool result's
 * content, a compaction summary, and a `tool/call`'s name and arguments. Tolerates any data shape,
 * because the upgrade backfill reads stored rows the scanner has not validated.
 */
export function searchableText(event: EventLike): string | undefined {
  if (!SEARCHABLE.has(event.type)) return undefined;
  const data = record(event.data);
  if (!data) return '';
  const parts: string[] = [];
  switch (event.type) {
    case 'user/message':
      blocksText(data.content, parts);
      break;
    case 'assistant/message':
    case 'tool/result':
      blocksText(record(data.message)?.content, parts);
      break;
    case 'compaction/summary':
      blocksText(data.summary, parts);
      break;
    case 'tool/call':
      toolCallText(data.name, data.arguments, parts);
      break;
  }
  return parts.join('\n');
}

/** Appends the text of content blocks (walked without recursion: stored data may nest deeply). */
function blocksText(blocks: unknown, parts: string[]): void {
  const pending: unknown[] = [blocks];
  while (pending.length > 0) {
    const next = pending.pop();
    if (Array.isArray(next)) {
      for (let i = next.length - 1; i >= 0; i--) pending.push(next[i]);
      continue;
    }
    const block = record(next);
    if (!block) continue;
    if ((block.type === 'text' || block.type === 'reasoning') && typeof block.text === 'string') parts.push(block.text);
    else if (block.type === 'tool-call') toolCallText(block.name, block.arguments, parts);
    else if (block.type === 'tool-result') pending.push(block.content);
  }
}

/**
 * A tool call's name, then its arguments: decoded when they are JSON, so that escapes (`\n`,
 * `\"`) do not glue words together, as `key: value` lines.
 */
function toolCallText(name: unknown, args: unknown, parts: string[]): void {
  if (typeof name === 'string') parts.push(name);
  if (typeof args !== 'string') return;
  let decoded: unknown;
  try {
    decoded = JSON.parse(args);
  } catch {
    // Not JSON (a model wrote malformed arguments): index the text as written.
    parts.push(args);
    return;
  }
  const pending: Array<{ key: string | undefined; value: unknown }> = [{ key: undefined, value: decoded }];
  while (pending.length > 0) {
    const { key, value } = pending.pop()!;
    if (value !== null && typeof value === 'object') {
      const entries = Array.isArray(value) ? value.map((v) => [key, v] as const) : Object.entries(value);
      for (let i = entries.length - 1; i >= 0; i--) pending.push({ key: entries[i]![0], value: entries[i]![1] });
    } else if (value !== null) {
      parts.push(key === undefined ? String(value) : `${key}: ${String(value)}`);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Words

/** No code unit at or above 0x80 (astral characters are surrogate pairs, so they count too). */
const ASCII_TEXT = /^[^\u0080-\uffff]*$/;
const ASCII_WORD = /[a-z0-9]+/g;
const WORD_RUN = /[\p{L}\p{N}\p{M}]+/gu;
const CJK_CHAR = /[\p{sc=Han}\p{sc=Hiragana}\p{sc=Katakana}]/u;
const CJK_PIECE = /[\p{sc=Han}\p{sc=Hiragana}\p{sc=Katakana}]|[^\p{sc=Han}\p{sc=Hiragana}\p{sc=Katakana}]+/gu;
/** The combining diacritics NFD splits off Latin, Greek and Cyrillic letters (not kana voicing marks or Indic vowel signs). */
const DIACRITICS = /[\u0300-\u036f]+/g;

/** Lower case without accents: "Café" → "cafe", "ÉCOLE" → "ecole"; "で" stays "で". */
function foldWord(raw: string): string {
  return raw.toLowerCase().normalize('NFD').replace(DIACRITICS, '').normalize('NFC');
}

/**
 * Calls `visit(word, start, end)` for every folded word of `text`, in order, with the raw word's
 * offsets in `text`; stops when `visit` returns false. Words of pure ASCII text take a fast path
 * that gives the same words.
 */
export function forEachWord(text: string, visit: (word: string, start: number, end: number) => boolean | void): void {
  if (ASCII_TEXT.test(text)) {
    const lower = text.toLowerCase();
    for (const match of lower.matchAll(ASCII_WORD))
      if (visit(match[0], match.index, match.index + match[0].length) === false) return;
    return;
  }
  for (const run of text.matchAll(WORD_RUN)) {
    const raw = run[0];
    if (!CJK_CHAR.test(raw)) {
      const word = foldWord(raw);
      if (word.length > 0 && visit(word, run.index, run.index + raw.length) === false) return;
      continue;
    }
    for (const piece of raw.matchAll(CJK_PIECE)) {
      const word = foldWord(piece[0]);
      const start = run.index + piece.index;
      if (word.length > 0 && visit(word, start, start + piece[0].length) === false) return;
    }
  }
}

function utf8Length(word: string): number {
  return ASCII_TEXT.test(word) ? word.length : Buffer.byteLength(word, 'utf8');
}

/** The words of `text` that are indexed: folded, at most {@link MAX_WORD_CHARS} long, within {@link MAX_INDEXED_BYTES}. */
export function indexedWords(text: string): string[] {
  const words: string[] = [];
  let bytes = 0;
  if (ASCII_TEXT.test(text)) {
    // The common case, without a callback per word: the same words as forEachWord's ASCII path.
    for (const word of text.toLowerCase().match(ASCII_WORD) ?? []) {
      if (word.length > MAX_WORD_CHARS) continue;
      bytes += word.length + 1;
      if (bytes > MAX_INDEXED_BYTES) break;
      words.push(word);
    }
    return words;
  }
  forEachWord(text, (word) => {
    if (word.length > MAX_WORD_CHARS) return true;
    bytes += utf8Length(word) + 1;
    if (bytes > MAX_INDEXED_BYTES) return false;
    words.push(word);
    return true;
  });
  return words;
}

/**
 * What SQLite and PostgreSQL index for an event: its indexed words joined by spaces ('' when it
 * has none), or undefined for an event type that carries no searchable text.
 */
export function indexText(event: EventLike): string | undefined {
  const text = searchableText(event);
  return text === undefined ? undefined : indexedWords(text).join(' ');
}

// ---------------------------------------------------------------------------------------------
// Queries

/** A validated search request. `words` is empty when the query has no word at all (only punctuation): nothing can match. */
export type SearchRequest = { words: string[]; limit: number };

/**
 * Validates `search(id, query, options)` arguments: a non-empty query of at most
 * {@link MAX_QUERY_CHARS} characters and {@link MAX_QUERY_WORDS} distinct words, and a limit in
 * 1..{@link SEARCH_MAX_LIMIT}. INVALID_ARGUMENT otherwise.
 */
export function parseSearchRequest(query: unknown, options: unknown): SearchRequest {
  if (typeof query === 'string' && query.length > MAX_QUERY_CHARS) {
    throw new SessionlogError(
      'INVALID_ARGUMENT',
      `a search query is at most ${MAX_QUERY_CHARS} characters (got ${query.length}); search for a few distinctive words`,
    );
  }
  if (typeof query !== 'string' || query.trim().length === 0) {
    throw new SessionlogError(
      'INVALID_ARGUMENT',
      `search needs a non-empty query of plain words, got ${JSON.stringify(typeof query === 'string' ? query : typeof query)}`,
    );
  }
  let limit = SEARCH_DEFAULT_LIMIT;
  if (options !== undefined) {
    const given = record(options);
    if (!given) throw new SessionlogError('INVALID_ARGUMENT', 'search options must be an object {limit?}');
    if (given.limit !== undefined) {
      if (
        typeof given.limit !== 'number' ||
        !Number.isSafeInteger(given.limit) ||
        given.limit < 1 ||
        given.limit > SEARCH_MAX_LIMIT
      ) {
        throw new SessionlogError(
          'INVALID_ARGUMENT',
          `search limit must be an integer from 1 to ${SEARCH_MAX_LIMIT}, got ${String(given.limit)}`,
        );
      }
      limit = given.limit;
    }
  }
  const words = new Set<string>();
  forEachWord(query, (word) => void words.add(word));
  if (words.size > MAX_QUERY_WORDS) {
    throw new SessionlogError(
      'INVALID_ARGUMENT',
      `a search query has at most ${MAX_QUERY_WORDS} distinct words (got ${words.size}); every word must match, so keep the few that matter`,
    );
  }
  return { words: [...words], limit };
}

/** Whether any event could match: false for a query without words or with a word too long to be indexed. */
export function searchable(request: SearchRequest): boolean {
  return request.words.length > 0 && request.words.every((word) => word.length <= MAX_WORD_CHARS);
}

/** The FTS5 MATCH expression: every word as a quoted string (an FTS5 literal, never syntax), implicitly AND-ed. */
export function fts5MatchExpression(words: readonly string[]): string {
  return words.map((word) => `"${word.replace(/"/g, '""')}"`).join(' ');
}

// ---------------------------------------------------------------------------------------------
// Ranking and results

/** A ranked candidate before its snippet is made. */
export type RankedSeq = { seq: number; score: number };

/** Best first: higher score, then the later event. */
export function byRank(a: RankedSeq, b: RankedSeq): number {
  return b.score - a.score || b.seq - a.seq;
}

const BM25_K1 = 1.2;
const BM25_B = 0.75;
/** The event length (in words) the JSONL score normalises against; a scan keeps no collection statistics. */
const REFERENCE_WORDS = 100;

/**
 * The JSONL backend's search: a scan of the session's validated copy. Every event that holds every
 * query word scores
 *
 *     score = Σ over query words  tf·(k1 + 1) / (tf + k1·(1 − b + b·n/100))
 *
 * with `tf` the word's count in the event, `n` the event's indexed word count, k1 = 1.2, b = 0.75:
 * BM25's saturating term frequency and length normalisation, against a fixed reference length of
 * 100 words instead of the collection's average, and without BM25's inverse document frequency
 * (every hit holds every word, and a scan keeps no collection statistics).
 */
export function scanSession(session: SessionView, words: readonly string[], limit: number): RankedSeq[] {
  const asciiWords = words.every((word) => ASCII_TEXT.test(word));
  const wanted = new Map(words.map((word, i) => [word, i]));
  const ranked: RankedSeq[] = [];
  for (let seq = 0; seq < session.nextSeq; seq++) {
    const event = session.storedAt(seq);
    const text = event && searchableText(event);
    if (text === undefined) continue;
    let counted: { counts: number[]; length: number } | undefined;
    if (ASCII_TEXT.test(text)) {
      // The words of ASCII text are substrings of its lower case: a cheap necessary condition.
      if (!asciiWords) continue;
      const lower = text.toLowerCase();
      if (!words.every((word) => lower.includes(word))) continue;
      // Short enough that the byte cap cannot cut it: count in place instead of listing the words.
      if (text.length < MAX_INDEXED_BYTES) counted = countAsciiWords(lower, words);
    }
    if (!counted) {
      counted = { counts: new Array<number>(words.length).fill(0), length: 0 };
      for (const word of indexedWords(text)) {
        counted.length += 1;
        const i = wanted.get(word);
        if (i !== undefined) counted.counts[i]! += 1;
      }
    }
    const { counts, length } = counted;
    if (counts.some((tf) => tf === 0)) continue;
    const norm = BM25_K1 * (1 - BM25_B + (BM25_B * length) / REFERENCE_WORDS);
    const score = counts.reduce((sum, tf) => sum + (tf * (BM25_K1 + 1)) / (tf + norm), 0);
    ranked.push({ seq, score });
  }
  return ranked.sort(byRank).slice(0, limit);
}

function isAsciiWordChar(code: number): boolean {
  return (code >= 97 && code <= 122) || (code >= 48 && code <= 57);
}

/**
 * For lower-cased ASCII text under the byte cap: how often each of `words` occurs as a word, and
 * how many indexed words the text has — what counting {@link indexedWords} gives, without
 * allocating them.
 */
function countAsciiWords(lower: string, words: readonly string[]): { counts: number[]; length: number } {
  let length = 0;
  let run = 0;
  for (let i = 0; i <= lower.length; i++) {
    if (i < lower.length && isAsciiWordChar(lower.charCodeAt(i))) {
      run += 1;
      continue;
    }
    if (run > 0 && run <= MAX_WORD_CHARS) length += 1;
    run = 0;
  }
  const counts = words.map((word) => {
    let n = 0;
    for (let at = lower.indexOf(word); at >= 0; at = lower.indexOf(word, at + 1)) {
      if (!isAsciiWordChar(lower.charCodeAt(at - 1)) && !isAsciiWordChar(lower.charCodeAt(at + word.length))) n += 1;
    }
    return n;
  });
  return { counts, length };
}

/** The hits for ranked seqs of `session`, each with its snippet. */
export function searchHits(session: SessionView, ranked: readonly RankedSeq[], words: readonly string[]): SearchHit[] {
  const wanted = new Set(words);
  return ranked.map(({ seq, score }) => {
    const event = session.storedAt(seq) as StoredEvent;
    return { seq, score, snippet: buildSnippet(searchableText(event) ?? '', wanted) };
  });
}

// ---------------------------------------------------------------------------------------------
// Snippets

const ELLIPSIS = '…';
/** How many occurrences a snippet window is chosen among (a huge text repeats its words). */
const MAX_SNIPPET_MATCHES = 2000;

/**
 * A window of at most `max` characters of `text` (whitespace collapsed) that holds as many
 * distinct query words as fit, with some context before the first of them, cut at word
 * boundaries, and "…" where text was left out.
 */
export function buildSnippet(text: string, words: ReadonlySet<string>, max = SNIPPET_MAX_CHARS): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  if (flat.length <= max) return flat;
  const matches: Array<{ word: string; start: number; end: number }> = [];
  forEachWord(flat, (word, start, end) => {
    if (words.has(word)) matches.push({ word, start, end });
    return matches.length < MAX_SNIPPET_MATCHES;
  });
  const budget = max - 2 * ELLIPSIS.length;
  // The window [matches[i].start, matches[j].end) with the most distinct words that fits the budget.
  let best = { from: 0, to: 0, distinct: 0 };
  const inWindow = new Map<string, number>();
  for (let i = 0, j = 0; i < matches.length; i++) {
    while (j < matches.length && matches[j]!.end - matches[i]!.start <= budget) {
      inWindow.set(matches[j]!.word, (inWindow.get(matches[j]!.word) ?? 0) + 1);
      j++;
    }
    if (inWindow.size > best.distinct)
      best = { from: matches[i]!.start, to: matches[j - 1]!.end, distinct: inWindow.size };
    if (j === i) {
      // A single occurrence longer than the budget: j never moved past it.
      j++;
      continue;
    }
    const left = matches[i]!.word;
    const n = inWindow.get(left)! - 1;
    if (n === 0) inWindow.delete(left);
    else inWindow.set(left, n);
  }
  // Spend a third of the slack on context before the matches, the rest after.
  const slack = Math.max(0, budget - (best.to - best.from));
  let start = Math.max(0, best.from - Math.floor(slack / 3));
  let end = Math.min(flat.length, start + budget);
  start = Math.max(0, end - budget);
  if (start > 0) start = snapForward(flat, start, best.from);
  if (end < flat.length) end = snapBack(flat, end, best.to);
  if (isLowSurrogate(flat, start)) start += 1;
  if (isLowSurrogate(flat, end)) end -= 1;
  return `${start > 0 ? ELLIPSIS : ''}${flat.slice(start, end).trim()}${end < flat.length ? ELLIPSIS : ''}`;
}

/** Moves a window start forward to just after a space, unless that would pass `limit` or move far. */
function snapForward(text: string, at: number, limit: number): number {
  const space = text.indexOf(' ', at);
  return space >= 0 && space < limit && space - at <= 20 ? space + 1 : at;
}

/** Moves a window end back to a space, unless that would cut before `limit` or move far. */
function snapBack(text: string, at: number, limit: number): number {
  const space = text.lastIndexOf(' ', at);
  return space >= limit && at - space <= 20 ? space : at;
}

function isLowSurrogate(text: string, at: number): boolean {
  const code = text.charCodeAt(at);
  return code >= 0xdc00 && code <= 0xdfff;
}
