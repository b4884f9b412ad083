/**
 * Built-in tools: `read_artifact` pages through stored (spilled) tool output; `open_media`
 * opens a stored image or file again (offered to a session whose history holds media);
 * `search_history` and `read_history` recall the session's whole log, including what
 * compaction replaced; `calculator` and `word_count` are small examples of how to write a tool
 * (see docs/typescript-api.md, "Write tools").
 */
import { z } from 'zod';
import { ToolInputError, type Tool } from './registry.js';
import { inspectMedia, isImageType, parseMediaLocator } from '../session/media.js';
import type { FileBlock, ImageBlock, StoredMedia } from '../session/index.js';

/** The name of the built-in tool that opens a stored medium again (its stand-in names it). */
export const OPEN_MEDIA_TOOL = 'open_media';

function parseArgs<T>(schema: z.ZodType<T>, args: unknown, tool: string): T {
  const result = schema.safeParse(args);
  if (!result.success) {
    const issue = result.error.issues[0]!;
    throw new ToolInputError(`${tool}: argument ${issue.path.join('.') || '(root)'} ${issue.message}`);
  }
  return result.data;
}

const readArtifactArgs = z.object({
  locator: z.string().min(1),
  offset: z.number().int().nonnegative().default(0),
  limit: z.number().int().positive().max(200_000).default(20_000),
});

/**
 * `read_artifact`: pages through a stored artifact (a spilled tool output or message) by its
 * locator, only within the calling session.
 */
export const readArtifactTool: Tool = {
  name: 'read_artifact',
  description:
    'Read part of a stored artifact (e.g. a tool output that was too large to show inline). Give the locator from the notice, an offset in characters (default 0) and a limit (default 20000).',
  parameters: {
    type: 'object',
    properties: {
      locator: { type: 'string', description: 'The artifact locator, e.g. artifact:session/name' },
      offset: { type: 'integer', minimum: 0 },
      limit: { type: 'integer', minimum: 1, maximum: 200000 },
    },
    required: ['locator'],
    additionalProperties: false,
  },
  async run(args, context) {
    const { locator, offset, limit } = parseArgs(readArtifactArgs, args, 'read_artifact');
    const { text, total } = await context.artifacts.read(context.sessionId, locator, offset, limit);
    const end = offset + text.length;
    const more = end < total ? ` More remains: call again with offset ${end}.` : ' This is the end.';
    return { text: `${text}\n\n(characters ${offset}-${end} of ${total}.${more})` };
  },
};

const openMediaArgs = z.object({
  locator: z.string().min(1).max(1000),
  detail: z.enum(['auto', 'low', 'high']).optional(),
});

/**
 * `open_media`: opens an image or file this session stored before (issue 50) by the locator its
 * stand-in names. The result holds the medium itself, so the request of the current tool round
 * carries it (context/media-policy.ts); only the calling session's media open.
 */
export const openMediaTool: Tool = {
  name: OPEN_MEDIA_TOOL,
  description:
    'Open an image or file of this conversation again. Older images and files are shown as a stand-in like [image image/png 1024x768, 1.0 MiB, artifact:...]; give its artifact locator to see the medium itself. For an image, detail may be low, high or auto.',
  parameters: {
    type: 'object',
    properties: {
      locator: {
        type: 'string',
        description: 'The artifact locator from the stand-in, e.g. artifact:session/media-….png',
      },
      detail: { type: 'string', enum: ['auto', 'low', 'high'] },
    },
    required: ['locator'],
    additionalProperties: false,
  },
  async run(args, context) {
    const { locator, detail } = parseArgs(openMediaArgs, args, OPEN_MEDIA_TOOL);
    const parsed = parseMediaLocator(locator);
    if (!parsed)
      throw new ToolInputError(
        `${OPEN_MEDIA_TOOL}: ${JSON.stringify(locator)} is not a stored medium's locator (artifact:<session>/media-<sha256>.<ext>); copy it from the stand-in`,
      );
    // The store refuses another session's locator (ARTIFACT_FOREIGN) and an unknown one (ARTIFACT_NOT_FOUND).
    const bytes = await context.artifacts.readMedia(context.sessionId, locator);
    const { width, height } = inspectMedia(bytes, parsed.mediaType, Number.POSITIVE_INFINITY);
    const source: StoredMedia = {
      kind: 'artifact',
      locator,
      mediaType: parsed.mediaType,
      bytes: bytes.byteLength,
      sha256: parsed.sha256,
      ...(width !== undefined && height !== undefined ? { width, height } : {}),
    };
    const block: ImageBlock | FileBlock = isImageType(parsed.mediaType)
      ? { type: 'image', source, ...(detail !== undefined ? { detail } : {}) }
      : { type: 'file', source };
    const pixels = width !== undefined && height !== undefined ? ` ${width}x${height}` : '';
    const text = `Opened ${block.type} ${parsed.mediaType}${pixels} (${locator}); it is attached to this result.`;
    return { text, content: [{ type: 'text', text }, block] };
  },
};

const calculatorArgs = z.object({ expression: z.string().min(1).max(1000) });

/** Evaluates + - * / % ^ and parentheses over decimal numbers, without eval. */
export function evaluateArithmetic(expression: string): number {
  const tokens = expression.match(/\d+(?:\.\d+)?(?:e[+-]?\d+)?|[-+*/%^()]|\S/gi) ?? [];
  let pos = 0;
  const peek = (): string | undefined => tokens[pos];
  const next = (): string => {
    const t = tokens[pos++];
    if (t === undefined) throw new ToolInputError('calculator: unexpected end of expression');
    return t;
  };
  const primary = (): number => {
    const t = next();
    if (t === '(') {
      const v = sum();
      if (next() !== ')') throw new ToolInputError('calculator: missing )');
      return v;
    }
    if (t === '-') return -primary();
    if (t === '+') return primary();
    const n = Number(t);
    if (!Number.isFinite(n)) throw new ToolInputError(`calculator: unexpected "${t}"`);
    return n;
  };
  const power = (): number => {
    const base = primary();
    if (peek() === '^') {
      pos++;
      return base ** power();
    }
    return base;
  };
  const product = (): number => {
    let v = power();
    for (let t = peek(); t === '*' || t === '/' || t === '%'; t = peek()) {
      pos++;
      const r = power();
      v = t === '*' ? v * r : t === '/' ? v / r : v % r;
    }
    return v;
  };
  const sum = (): number => {
    let v = product();
    for (let t = peek(); t === '+' || t === '-'; t = peek()) {
      pos++;
      const r = product();
      v = t === '+' ? v + r : v - r;
    }
    return v;
  };
  const value = sum();
  if (pos !== tokens.length) throw new ToolInputError(`calculator: unexpected "${tokens[pos]}"`);
  return value;
}

/** `calculator`: evaluates an arithmetic expression (an example tool). */
export const calculatorTool: Tool = {
  name: 'calculator',
  description: 'Evaluate an arithmetic expression with + - * / % ^ and parentheses.',
  parameters: {
    type: 'object',
    properties: { expression: { type: 'string', description: 'e.g. (2+3)*4' } },
    required: ['expression'],
    additionalProperties: false,
  },
  async run(args) {
    const { expression } = parseArgs(calculatorArgs, args, 'calculator');
    const value = evaluateArithmetic(expression);
    if (!Number.isFinite(value)) return { text: `${expression} has no finite value`, isError: true };
    return { text: String(value) };
  },
};

const wordCountArgs = z.object({ text: z.string() });

/** `word_count`: counts the words, lines and characters of a text (an example tool). */
export const wordCountTool: Tool = {
  name: 'word_count',
  description: 'Count the words, lines and characters of a text.',
  parameters: {
    type: 'object',
    properties: { text: { type: 'string' } },
    required: ['text'],
    additionalProperties: false,
  },
  async run(args) {
    const { text } = parseArgs(wordCountArgs, args, 'word_count');
    const words = text.split(/\s+/).filter((w) => w.length > 0).length;
    const lines = text.length === 0 ? 0 : text.split('\n').length;
    return { text: JSON.stringify({ words, lines, characters: [...text].length }) };
  },
};

const searchHistoryArgs = z.object({
  query: z.string().trim().min(1).max(500),
  limit: z.number().int().positive().max(50).default(10),
});

/** The recall tools compaction advertises: what a summary replaced stays searchable and readable. */
export const RECALL_TOOL_NAMES = ['search_history', 'read_history'] as const;

export const searchHistoryTool: Tool = {
  name: 'search_history',
  description:
    "Search this conversation's whole history by words, including the parts an earlier summary replaced. Every word must appear in a matching event, so use a few distinctive keywords (a name, an id, a term), not a sentence. Returns matching events with their seq, turn, type, a snippet and whether a summary now stands in for them. Read one in full with read_history.",
  parameters: {
    type: 'object',
    properties: {
      query: { type: 'string', description: 'a few keywords, all of which must match' },
      limit: { type: 'integer', minimum: 1, maximum: 50, description: 'at most this many hits (default 10)' },
    },
    required: ['query'],
    additionalProperties: false,
  },
  async run(args, context) {
    const { query, limit } = parseArgs(searchHistoryArgs, args, 'search_history');
    const hits = await context.history.search(query, limit);
    if (hits.length === 0) return { text: `No event of this conversation matches "${query}".` };
    const lines = hits.map(
      (h) => `seq ${h.seq} · turn ${h.turn} · ${h.type}${h.shadowed ? ' · replaced by a summary' : ''}: ${h.snippet}`,
    );
    return {
      text: `${hits.length} match(es) for "${query}", best first:\n${lines.join('\n')}\n\nRead an event in full with read_history {"fromSeq": <seq>, "toSeq": <seq>}.`,
    };
  },
};

/** The most events one read_history call returns (the output is spilled like any tool output beyond that size). */
export const READ_HISTORY_MAX_EVENTS = 200;

const readHistoryArgs = z
  .object({ fromSeq: z.number().int().nonnegative(), toSeq: z.number().int().nonnegative() })
  .refine((a) => a.toSeq >= a.fromSeq, { message: 'toSeq must not be below fromSeq' });

export const readHistoryTool: Tool = {
  name: 'read_history',
  description:
    "Read events of this conversation's log exactly as they were recorded, by seq range (inclusive), including parts an earlier summary replaced. One JSON event per line; at most 200 events per call.",
  parameters: {
    type: 'object',
    properties: {
      fromSeq: { type: 'integer', minimum: 0 },
      toSeq: { type: 'integer', minimum: 0 },
    },
    required: ['fromSeq', 'toSeq'],
    additionalProperties: false,
  },
  async run(args, context) {
    const { fromSeq, toSeq } = parseArgs(readHistoryArgs, args, 'read_history');
    const next = await context.history.nextSeq();
    if (fromSeq >= next) return { text: `This conversation's log ends at seq ${next - 1}.`, isError: true };
    const last = Math.min(toSeq, next - 1, fromSeq + READ_HISTORY_MAX_EVENTS - 1);
    const events = await context.history.read(fromSeq, last);
    const more =
      last < Math.min(toSeq, next - 1) ? `\n(seqs ${fromSeq}-${last} shown; continue with fromSeq ${last + 1})` : '';
    return { text: `${events.map((e) => JSON.stringify(e)).join('\n')}${more}` };
  },
};

/**
 * The tools of the default agent (`sessionlog dev`, `worker`, `serve`): the general-purpose ones.
 * The recall tools (`search_history`, `read_history`) join them wherever compaction runs (engine/agent.ts).
 */
export const DEFAULT_AGENT_TOOLS: readonly string[] = [readArtifactTool.name, calculatorTool.name, wordCountTool.name];

/**
 * The built-in tools: `read_artifact`, `open_media`, `calculator`, `word_count`, and the recall
 * tools `search_history` and `read_history`; the default of `createWorker({ tools })`.
 */
export const BUILTIN_TOOLS: readonly Tool[] = [
  readArtifactTool,
  openMediaTool,
  calculatorTool,
  wordCountTool,
  searchHistoryTool,
  readHistoryTool,
];
