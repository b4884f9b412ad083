/**
 * Validation of events that cross a boundary: stored rows being read, and batches handed to a
 * store. Payload shapes of known types are checked with zod; unknown types are refused unless
 * `ignorable` (a newer version wrote them, dsh-spec §1.4).
 */
import { Ajv2020 } from 'ajv/dist/2020.js';
import { z } from 'zod';
import { budgetProblem } from './budget.js';
import { SessionlogError } from './errors.js';
import { KNOWN_EVENT_TYPES, SESSION_FORMAT_VERSION, type StoredEvent, type SessionHeader } from './events.js';
import { TENANT_PATTERN, assertSessionId } from './ids.js';
import { turnToolsProblem } from './turn-tools.js';
import { turnHintsProblem } from './turn-hints.js';
import { MEDIA_TYPES, storedMediaProblem } from './media.js';
import type { MediaType } from './messages.js';

const seqSchema = z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER);
const nonEmpty = z.string().min(1);

const textBlock = z.object({ type: z.literal('text'), text: z.string() }).passthrough();
const reasoningBlock = z.object({ type: z.literal('reasoning'), text: z.string() }).passthrough();
const toolCallBlock = z
  .object({ type: z.literal('tool-call'), id: nonEmpty, name: nonEmpty, arguments: z.string() })
  .passthrough();
type BlockShape = { type: string };
const contentBlock: z.ZodType<BlockShape> = z.lazy(() =>
  z.union([
    textBlock,
    reasoningBlock,
    toolCallBlock,
    z
      .object({
        type: z.literal('tool-result'),
        toolCallId: nonEmpty,
        content: z.array(contentBlock),
        isError: z.literal(true).optional(),
      })
      .passthrough(),
  ]),
);
const content = z.array(contentBlock);

/**
 * Media blocks (issue 50, DESIGN §3), only in user messages and tool results: a stored medium's
 * reference (a locator of the form `artifact:<sessionId>/media-<sha256>.<ext>`, a type sessionlog
 * stores, a positive size, the 64-hex digest, pixel size for images) or an http(s) image URL;
 * never bytes. The shape is strict (no other field); {@link mediaBlocksProblem} checks what one
 * field says about another. The locator is not checked against the log's own session id: a fork's
 * seed keeps its parent's blocks verbatim, and a read of another session's medium is refused
 * where it is read (ARTIFACT_FOREIGN).
 */
const storedMediaSource = z.strictObject({
  kind: z.literal('artifact'),
  locator: z
    .string()
    .regex(/^artifact:[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}\/media-[0-9a-f]{64}\.(png|jpg|gif|webp|pdf|txt)$/),
  mediaType: z.enum(MEDIA_TYPES as [MediaType, ...MediaType[]]),
  bytes: z.number().int().positive().max(Number.MAX_SAFE_INTEGER),
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
  width: z.number().int().positive().max(65_535).optional(),
  height: z.number().int().positive().max(65_535).optional(),
});
const remoteMediaSource = z.strictObject({
  kind: z.literal('url'),
  url: z
    .string()
    .max(8_192)
    .regex(/^[Hh][Tt][Tt][Pp][Ss]?:\/\/\S+$/),
});
const imageBlock = z.strictObject({
  type: z.literal('image'),
  source: z.union([storedMediaSource, remoteMediaSource]),
  detail: z.enum(['auto', 'low', 'high']).optional(),
});
const fileBlock = z.strictObject({
  type: z.literal('file'),
  source: storedMediaSource,
  filename: z.string().min(1).max(255).optional(),
});
/** A block of a user message or a tool result: everything a message may hold, and media. */
const userContentBlock: z.ZodType<BlockShape> = z.lazy(() =>
  z.union([
    textBlock,
    reasoningBlock,
    toolCallBlock,
    imageBlock,
    fileBlock,
    z
      .object({
        type: z.literal('tool-result'),
        toolCallId: nonEmpty,
        content: z.array(userContentBlock),
        isError: z.literal(true).optional(),
      })
      .passthrough(),
  ]),
);
const userContent = z.array(userContentBlock);

// The refinements the shapes below carry, named so the compiled fast path (below) runs the same code.
function toolCallIdMatches(message: { content: [{ toolCallId: string }]; source: { callId: string } }): boolean {
  return message.content[0].toolCallId === message.source.callId;
}
function turnStartToolsProblem(data: { tools?: unknown }): string | undefined {
  return data.tools === undefined ? undefined : turnToolsProblem(data.tools);
}
function turnStartHintsProblem(data: { hints?: unknown }): string | undefined {
  return data.hints === undefined ? undefined : turnHintsProblem(data.hints);
}
function hidesOnlyWithoutContent(data: { hides?: true; message: { content: unknown[] } }): boolean {
  return data.hides === undefined || data.message.content.length === 0;
}
function resultOnlyWhenApproved(data: { result?: unknown; decision: string }): boolean {
  return data.result === undefined || data.decision === 'approve';
}
/**
 * What the media blocks of a message say wrongly about themselves (the strict shape is checked by
 * zod): a stored medium's locator must name its digest and its type's extension, an image must
 * have its pixel size and a file none.
 */
function mediaBlocksProblem(message: { content: readonly unknown[] }): string | undefined {
  for (const block of message.content as ReadonlyArray<{
    type?: unknown;
    source?: { kind?: unknown };
    content?: unknown;
  }>) {
    if (block.type === 'tool-result' && Array.isArray(block.content)) {
      const inner = mediaBlocksProblem({ content: block.content });
      if (inner) return inner;
    }
    if ((block.type !== 'image' && block.type !== 'file') || block.source?.kind !== 'artifact') continue;
    const problem = storedMediaProblem(block.source, undefined);
    if (problem) return `${block.type} block: ${problem}`;
  }
  return undefined;
}
function sessionBudgetProblem(data: { budget?: unknown }): string | undefined {
  return data.budget === null ? undefined : budgetProblem(data.budget);
}

const userMessage = z
  .object({
    id: nonEmpty,
    role: z.literal('user'),
    content: userContent,
    source: z.object({ kind: nonEmpty }).passthrough(),
  })
  .passthrough()
  .superRefine((message, ctx) => {
    const problem = mediaBlocksProblem(message);
    if (problem) ctx.addIssue({ code: 'custom', message: problem, path: ['content'] });
  });
const assistantMessage = z
  .object({
    id: nonEmpty,
    role: z.literal('assistant'),
    content,
    source: z.union([
      z.object({ kind: z.literal('model'), provider: nonEmpty, model: nonEmpty }).passthrough(),
      z.object({ kind: z.literal('caller') }).passthrough(),
    ]),
  })
  .passthrough();
const toolResultMessage = z
  .object({
    id: nonEmpty,
    role: z.literal('user'),
    content: z.tuple([
      z.object({ type: z.literal('tool-result'), toolCallId: nonEmpty, content: userContent }).passthrough(),
    ]),
    source: z.object({ kind: z.literal('tool'), callId: nonEmpty }).passthrough(),
  })
  .passthrough()
  .refine(toolCallIdMatches, { message: 'toolCallId must equal source.callId' })
  .superRefine((message, ctx) => {
    const problem = mediaBlocksProblem(message);
    if (problem) ctx.addIssue({ code: 'custom', message: problem, path: ['content'] });
  });

const turnStep = { turn: z.number().int().positive(), step: z.number().int().positive() };
/** A logged cost in USD: a finite amount, never negative. */
const costSchema = z.number().nonnegative().finite().optional();

const dataSchemas: Record<string, z.ZodType> = {
  'turn/start': z
    .object({
      turn: z.number().int().positive(),
      tools: z.array(z.unknown()).optional(),
      agent: z.object({ model: nonEmpty.optional(), system: z.string().optional() }).passthrough().optional(),
      hints: z.unknown().optional(),
      origin: z.literal('caller').optional(),
    })
    .passthrough()
    .superRefine((data, ctx) => {
      const problem = turnStartToolsProblem(data);
      if (problem) ctx.addIssue({ code: 'custom', message: problem, path: ['tools'] });
      const hintsProblem = turnStartHintsProblem(data);
      if (hintsProblem) ctx.addIssue({ code: 'custom', message: hintsProblem, path: ['hints'] });
    }),
  'turn/end': z
    .object({ turn: z.number().int().positive(), reason: z.object({ kind: nonEmpty }).passthrough() })
    .passthrough(),
  'step/start': z.object(turnStep).passthrough(),
  'step/end': z.object(turnStep).passthrough(),
  'user/message': userMessage,
  'assistant/chunk': z.object({ ...turnStep, chunk: z.object({ kind: nonEmpty }).passthrough() }).passthrough(),
  'assistant/message': z
    .object({ ...turnStep, message: assistantMessage, hides: z.literal(true).optional(), cost: costSchema })
    .passthrough()
    .refine(hidesOnlyWithoutContent, {
      message: 'an assistant/message that hides a node has no content',
    }),
  'tool/call': z.object({ ...turnStep, callId: nonEmpty, name: z.string(), arguments: z.string() }).passthrough(),
  'tool/result': z.object({ ...turnStep, message: toolResultMessage }).passthrough(),
  'request/header': z
    .object({ header: z.object({ provider: nonEmpty, model: nonEmpty }).passthrough(), reason: nonEmpty })
    .passthrough(),
  'llm/retry': z.object({ ...turnStep }).passthrough(),
  'compaction/start': z.object({ compactionId: nonEmpty, turn: z.number().int().positive().nullable() }).passthrough(),
  'compaction/summary': z
    .object({
      compactionId: nonEmpty,
      summary: content,
      shadowedSeqs: z.array(seqSchema).min(1),
      shadowedTokenCount: z.number().int().nonnegative(),
      cost: costSchema,
    })
    .passthrough(),
  'compaction/end': z
    .object({
      compactionId: nonEmpty,
      turn: z.number().int().positive().nullable(),
      error: z.string().optional(),
      tokensBefore: z.number().int().nonnegative().optional(),
      tokensAfter: z.number().int().nonnegative().optional(),
    })
    .passthrough(),
  'compaction/prune': z
    .object({ shadowedSeqs: z.array(seqSchema).min(1), shadowedTokenCount: z.number().int().nonnegative() })
    .passthrough(),
  'session/end-seed': z.object({}).passthrough(),
  'session/run': z.object({ workflowId: nonEmpty, runId: nonEmpty }).passthrough(),
  'tool/approval-request': z
    .object({
      ...turnStep,
      callId: nonEmpty,
      tool: z.string(),
      arguments: z.string(),
      expiresAt: seqSchema,
      kind: z.enum(['approval', 'external']),
    })
    .passthrough(),
  'tool/approval': z
    .object({
      ...turnStep,
      callId: nonEmpty,
      decision: z.enum(['approve', 'deny', 'expire']),
      reason: z.string().optional(),
      arguments: z.string().optional(),
      by: z.string().optional(),
      result: z.object({ locator: nonEmpty, bytes: seqSchema, isError: z.boolean() }).strict().optional(),
    })
    .passthrough()
    .refine(resultOnlyWhenApproved, {
      message: 'only an approved (accepted) answer carries a result',
    }),
  'tool/allow': z.object({ tool: nonEmpty, by: z.string().optional() }).passthrough(),
  'session/metadata': z
    .object({ metadata: z.record(z.string(), z.string()), messageId: nonEmpty.optional() })
    .passthrough(),
  'model/limit': z
    .object({ model: nonEmpty, contextWindow: z.number().int().positive(), source: nonEmpty })
    .passthrough(),
  'compaction/stalled': z
    .object({
      compactionId: nonEmpty.nullable(),
      tokensBefore: z.number().int().nonnegative(),
      tokensAfter: z.number().int().nonnegative(),
      budget: z.number().int().nonnegative(),
      threshold: z.number().int().nonnegative(),
      irreducible: z.number().int().nonnegative(),
      reason: z.string(),
    })
    .passthrough(),
  'session/budget': z
    .object({ budget: z.unknown(), by: z.string().optional() })
    .passthrough()
    .superRefine((data, ctx) => {
      const problem = sessionBudgetProblem(data);
      if (problem) ctx.addIssue({ code: 'custom', message: problem });
    }),
  'budget/breach': z
    .object({
      ...turnStep,
      before: z.enum(['model', 'tools']),
      scope: z.enum(['turn', 'total', 'tenant']),
      cap: z.enum(['tokens', 'costUsd', 'modelCalls', 'toolCalls', 'wallMs', 'repeatedCalls']),
      used: z.number().nonnegative().finite(),
      limit: z.number().nonnegative().finite(),
      tool: nonEmpty.optional(),
    })
    .passthrough(),
};

/**
 * The compiled fast path of {@link assertEventData}: each type's zod shape compiled once into a
 * JSON Schema validator (ajv), plus the refinements zod runs after the shape, which JSON Schema
 * cannot say, as the same named functions. Data it accepts, zod accepts; anything else goes to
 * zod, whose message names the problem. A type whose zod definition holds refinements the fast
 * path does not run (they are counted below) gets no fast path, so a refinement added later can
 * make appends slower but never lets bad data through. On the realistic mix zod's `safeParse`
 * costs 1.0–1.3 µs per event and the compiled check 0.45 µs (BENCHMARKS.md, "Append CPU").
 */
const fastRefinements: Record<string, { count: number; check: (data: never) => boolean }> = {
  'turn/start': {
    count: 1,
    check: (data: { tools?: unknown; hints?: unknown }) =>
      turnStartToolsProblem(data) === undefined && turnStartHintsProblem(data) === undefined,
  },
  'assistant/message': { count: 1, check: hidesOnlyWithoutContent },
  'user/message': {
    count: 1,
    check: (data: { content: readonly unknown[] }) => mediaBlocksProblem(data) === undefined,
  },
  'tool/result': {
    count: 2,
    check: (data: { message: Parameters<typeof toolCallIdMatches>[0] }) =>
      toolCallIdMatches(data.message) && mediaBlocksProblem(data.message) === undefined,
  },
  'tool/approval': { count: 1, check: resultOnlyWhenApproved },
  'session/budget': { count: 1, check: (data: { budget?: unknown }) => sessionBudgetProblem(data) === undefined },
};

/** zod definitions that hold no schema inside them (their own checks are counted by the caller). */
const LEAF_DEFS = new Set(['string', 'number', 'boolean', 'literal', 'enum', 'unknown', 'any', 'null', 'never']);

type ZodDef = {
  type: string;
  checks?: Array<{ _zod: { def: { check: string } } }>;
  shape?: Record<string, z.ZodType>;
  catchall?: z.ZodType;
  element?: z.ZodType;
  options?: z.ZodType[];
  getter?: () => z.ZodType;
  innerType?: z.ZodType;
  items?: z.ZodType[];
  rest?: z.ZodType | null;
  keyType?: z.ZodType;
  valueType?: z.ZodType;
};

/** How many refinements (`refine`, `superRefine`) `schema` runs anywhere inside; Infinity for a definition it cannot walk. */
export function countRefinements(schema: z.ZodType, seen = new Set<z.ZodType>()): number {
  if (seen.has(schema)) return 0;
  seen.add(schema);
  const def = schema._zod.def as unknown as ZodDef;
  let count = (def.checks ?? []).filter((check) => check._zod.def.check === 'custom').length;
  const inner: Array<z.ZodType | null | undefined> = [];
  switch (def.type) {
    case 'object':
      inner.push(...Object.values(def.shape ?? {}), def.catchall);
      break;
    case 'array':
      inner.push(def.element);
      break;
    case 'union':
      inner.push(...(def.options ?? []));
      break;
    case 'lazy':
      inner.push(def.getter?.());
      break;
    case 'optional':
    case 'nullable':
      inner.push(def.innerType);
      break;
    case 'tuple':
      inner.push(...(def.items ?? []), def.rest);
      break;
    case 'record':
      inner.push(def.keyType, def.valueType);
      break;
    default:
      if (!LEAF_DEFS.has(def.type)) return Number.POSITIVE_INFINITY;
  }
  for (const child of inner) if (child) count += countRefinements(child, seen);
  return count;
}

let ajv: Ajv2020 | undefined;
/** Each type's compiled check, made on the type's first use (null: the type has no fast path). */
const fastChecks = new Map<string, ((data: unknown) => boolean) | null>();

function fastCheck(type: string): ((data: unknown) => boolean) | null {
  let check = fastChecks.get(type);
  if (check === undefined) {
    check = compileFastCheck(type);
    fastChecks.set(type, check);
  }
  return check;
}

function compileFastCheck(type: string): ((data: unknown) => boolean) | null {
  const schema = dataSchemas[type];
  if (!schema) return null;
  const refinements = fastRefinements[type] ?? { count: 0, check: () => true };
  if (countRefinements(schema) !== refinements.count) return null;
  let shape: (data: unknown) => boolean;
  try {
    ajv ??= new Ajv2020({ strict: false });
    shape = ajv.compile(z.toJSONSchema(schema, { io: 'input' }));
  } catch {
    // A shape JSON Schema cannot say: this type is checked by zod alone.
    return null;
  }
  const refine = refinements.check as (data: unknown) => boolean;
  return (data) => shape(data) && refine(data);
}

/** The types {@link assertEventData} checks through the compiled fast path (tests compare it with zod). */
export function fastCheckedTypes(): string[] {
  return Object.keys(dataSchemas).filter((type) => fastCheck(type) !== null);
}

/** Whether the compiled fast path accepts `data` as `type`'s payload; undefined for a type it does not cover. */
export function fastAcceptsEventData(type: string, data: unknown): boolean | undefined {
  return fastCheck(type)?.(data);
}

/**
 * What is wrong with the content of a user message a caller sent (the inbox's message body, issue
 * 50): text, image and file blocks only, each of the shape a logged user message holds; undefined
 * when it is well-formed.
 */
export function userContentProblem(content: unknown): string | undefined {
  if (!Array.isArray(content) || content.length === 0) return 'content must be a non-empty list of blocks';
  const index = content.findIndex(
    (block: unknown) =>
      typeof block !== 'object' ||
      block === null ||
      !['text', 'image', 'file'].includes((block as { type?: unknown }).type as string),
  );
  if (index >= 0) return `content[${index}] must be a text, image or file block`;
  const result = userContent.safeParse(content);
  if (!result.success) {
    const issue = result.error.issues[0]!;
    return `content invalid at ${issue.path.join('.') || '(root)'}: ${issue.message}`;
  }
  return mediaBlocksProblem({ content });
}

/** The zod schema of a known type's payload (undefined for an unknown type). */
export function eventDataSchema(type: string): z.ZodType | undefined {
  return dataSchemas[type];
}

const ENVELOPE_KEYS = new Set(['seq', 'type', 'time', 'data', 'surfaceOp', 'sourceEventSeqs', 'op', 'ignorable']);

function invalid(where: string, message: string): SessionlogError {
  return new SessionlogError('INVALID_EVENT', `${where}: ${message}`);
}

/** Checks a known type's payload shape. Throws INVALID_EVENT. */
export function assertEventData(type: string, data: unknown, where: string): void {
  const schema = dataSchemas[type];
  if (!schema || fastCheck(type)?.(data)) return;
  const result = schema.safeParse(data);
  if (!result.success) {
    const issue = result.error.issues[0]!;
    throw invalid(where, `${type} data invalid at ${issue.path.join('.') || '(root)'}: ${issue.message}`);
  }
}

/**
 * Validates one stored event's envelope and payload. `expectedSeq` enforces contiguity.
 * Unknown non-ignorable types are refused as UNSUPPORTED_FORMAT.
 */
export function assertStoredEvent(raw: unknown, expectedSeq: number, sessionId: string): asserts raw is StoredEvent {
  const where = `session ${sessionId} seq ${expectedSeq}`;
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw invalid(where, 'event is not an object');
  const event = raw as Record<string, unknown>;
  for (const key of Object.keys(event))
    if (!ENVELOPE_KEYS.has(key)) throw invalid(where, `unexpected envelope key "${key}"`);
  if (event.seq !== expectedSeq)
    throw invalid(where, `seq is ${String(event.seq)}, expected ${expectedSeq} (gap or duplicate)`);
  if (typeof event.type !== 'string' || event.type.length === 0)
    throw invalid(where, 'type must be a non-empty string');
  if (typeof event.time !== 'number' || !Number.isSafeInteger(event.time))
    throw invalid(where, 'time must be a safe integer');
  if (event.data === undefined) throw invalid(where, 'data is missing');
  if (event.ignorable !== undefined && event.ignorable !== true)
    throw invalid(where, 'ignorable must be true or absent');
  if (event.op !== undefined && (typeof event.op !== 'string' || event.op.length === 0))
    throw invalid(where, 'op must be a non-empty string');
  if (!KNOWN_EVENT_TYPES.has(event.type)) {
    if (event.ignorable === true) return;
    throw new SessionlogError(
      'UNSUPPORTED_FORMAT',
      `${where}: event type "${event.type}" is unknown to this build; the log was probably written by a newer version of sessionlog — upgrade to read it`,
    );
  }
  assertEventData(event.type, event.data, where);
}

const headerSchema = z
  .object({
    version: z.number().int().nonnegative(),
    id: z.string(),
    createdAt: z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER),
    parentSession: z.string().optional(),
    seedLength: z.number().int().nonnegative().optional(),
    salvagedAt: z.object({ firstBadSeq: z.number().int().nonnegative(), reason: z.string() }).strict().optional(),
    agent: z
      .object({ model: z.string().optional(), system: z.string().optional(), tools: z.array(z.string()).optional() })
      .strict()
      .optional(),
    tenant: z.string().regex(TENANT_PATTERN, 'must be a tenant name').optional(),
  })
  .strict();

/**
 * Validates a header read from storage or given to `create`. A version ahead of this build is
 * UNSUPPORTED_FORMAT ("written by a newer version"), never CORRUPT_LOG.
 */
export function parseHeader(raw: unknown, where: string): SessionHeader {
  const version = (raw as { version?: unknown } | null)?.version;
  if (typeof version === 'number' && version > SESSION_FORMAT_VERSION) {
    throw new SessionlogError(
      'UNSUPPORTED_FORMAT',
      `${where}: format version ${version} was written by a newer version of sessionlog (this build reads version ${SESSION_FORMAT_VERSION}); upgrade sessionlog to read it`,
    );
  }
  if (typeof version === 'number' && version < SESSION_FORMAT_VERSION) {
    throw new SessionlogError(
      'UNSUPPORTED_FORMAT',
      `${where}: format version ${version} is older than this build reads and has no upgrade path`,
    );
  }
  const result = headerSchema.safeParse(raw);
  if (!result.success) {
    const issue = result.error.issues[0]!;
    throw new SessionlogError(
      'INVALID_EVENT',
      `${where}: header invalid at ${issue.path.join('.') || '(root)'}: ${issue.message}`,
    );
  }
  assertSessionId(result.data.id);
  if (result.data.parentSession !== undefined) assertSessionId(result.data.parentSession);
  return result.data as SessionHeader;
}
