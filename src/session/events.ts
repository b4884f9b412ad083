/**
 * The event envelope and vocabulary (DESIGN §3, dsh-spec §1). Every fact about a session is
 * one of these events; the model-visible history is derived from the three surface types.
 */
import type { Budget, BudgetBreach } from './budget.js';
import type { JsonValue } from './json.js';
import type { TurnHints } from './turn-hints.js';
import type {
  AssistantMessage,
  StreamChunk,
  TokenUsage,
  ToolResultMessage,
  UserMessage,
  ContentBlock,
} from './messages.js';

/** Where an external call's accepted result is stored (an artifact of the session). */
export type ExternalResult = { locator: string; bytes: number; isError: boolean };

export type SurfaceOp = 'append' | { op: 'replace'; start: number; end: number };

/**
 * Why a turn ended, as its `turn/end` event logs it: completed, aborted, failed (with its error's
 * code and message), cut at the step or token limit, or interrupted by a crash.
 */
export type TurnEndReason =
  | { kind: 'completed' }
  | { kind: 'aborted'; reason: { kind: 'user' | 'disposed' } }
  | { kind: 'error'; error: { message: string; code: string; status?: number; retryAfterMs?: number } }
  | { kind: 'max-tokens' }
  | { kind: 'max-steps' }
  | { kind: 'interrupted' };

/**
 * A tool as the model is told of it. `strict`: the provider holds the model's arguments to the
 * schema exactly (OpenAI's structured outputs; providers without it ignore the flag).
 */
export type ToolSchema = { name: string; description: string; parameters: JsonValue; strict?: boolean };

/** The request envelope a model call is made with (dsh-spec §1.4 `EpochHeader`, simplified). */
export type RequestHeader = {
  provider: string;
  model: string;
  system?: string;
  tools?: ToolSchema[];
  maxTokens?: number;
  reasoningEffort?: string;
  thinking?: boolean;
  /** The turn's request options (session/turn-hints.ts): what is sent, and what was asked and ignored. */
  hints?: TurnHints;
};

/** What a caller asked a session to run with from a turn on: a model name, instructions ('' for none). */
export type AskedAgent = { model?: string; system?: string };

export type ToolErrorInfo = { name: string; code: string };

/**
 * What one compaction bracket may summarise: a head-anchored span that keeps `retainTokens` of the
 * newest history verbatim, never reaches nodes at or after `protectFromSeq` (the current turn's own
 * message), and holds at most `maxRangeTokens` (what one summarizer request can take).
 */
export type CompactionStartSelection = { retainTokens: number; maxRangeTokens: number; protectFromSeq?: number };

/** Payload of every known event type. */
export interface EventDataMap {
  /**
   * `tools`: function tools the caller runs in this turn only (session/turn-tools.ts).
   * `agent`: the model and/or instructions the caller asked for from this turn on (logged when
   * they change; they hold until asked otherwise). `origin: 'caller'`: a turn of caller-supplied
   * history (replies the caller's transcript held, logged as they were, never the model's).
   * `hints`: the request options the caller gave for this turn only (session/turn-hints.ts).
   */
  'turn/start': { turn: number; tools?: ToolSchema[]; agent?: AskedAgent; hints?: TurnHints; origin?: 'caller' };
  'turn/end': { turn: number; reason: TurnEndReason };
  'step/start': { turn: number; step: number };
  'step/end': { turn: number; step: number };
  'user/message': UserMessage;
  'assistant/chunk': { turn: number; step: number; chunk: StreamChunk };
  'assistant/message': {
    turn: number;
    step: number;
    message: AssistantMessage;
    usage?: TokenUsage;
    /** The reply's cost in USD at the prices the worker had for its model (session/usage.ts); absent when none were known. */
    cost?: number;
    finishReason?: string;
    interrupted?: true;
    /**
     * A caller hid the one surface node this event replaces (issue 24: DELETE of a conversation
     * item): the replacement has no content, so the node no longer reaches the model or the
     * conversation's items; the log keeps the hidden event. See session/hide.ts.
     */
    hides?: true;
  };
  'tool/call': { turn: number; step: number; callId: string; name: string; arguments: string };
  'tool/result': {
    turn: number;
    step: number;
    message: ToolResultMessage;
    error?: ToolErrorInfo;
    meta?: JsonValue;
    /**
     * `external`: posted by the caller for an external tool; `caller`: part of caller-supplied
     * history (a transcript's tool message); absent: run by a worker.
     */
    origin?: 'external' | 'caller';
  };
  'request/header': { header: RequestHeader; reason: 'initial' | 'resume' | 'change' };
  'llm/retry': {
    turn: number;
    step: number;
    attempt: number;
    delayMs: number;
    failure: { code: string; message: string; status?: number };
  };
  'compaction/start': {
    compactionId: string;
    turn: number | null;
    trigger: 'pressure' | 'context-overflow' | 'manual';
    /** What the bracket may summarise, so a resumed bracket selects the same span (absent before it was recorded). */
    selection?: CompactionStartSelection;
    /** Set when the pressure ladder escalated (1: retained tail dropped after a hard prune and spill). */
    escalation?: number;
  };
  'compaction/summary': {
    compactionId: string;
    summary: ContentBlock[];
    shadowedRange: { start: number; end: number };
    shadowedSeqs: number[];
    shadowedTokenCount: number;
    provider: string;
    model: string;
    usage?: TokenUsage;
    /** The summarizer call's cost in USD (as an `assistant/message`'s). */
    cost?: number;
    /** The summary's own price in the routed model's tokens (measured, not reported). */
    summaryTokens?: number;
  };
  /** Closes a bracket; `tokensBefore`/`tokensAfter`: the request measured before and after it (absent on an error). */
  'compaction/end': {
    compactionId: string;
    turn: number | null;
    error?: string;
    tokensBefore?: number;
    tokensAfter?: number;
  };
  'compaction/prune': {
    shadowedRange: { start: number; end: number };
    shadowedSeqs: number[];
    shadowedTokenCount: number;
    /** `escalation`: the pressure ladder pruned or spilled harder than the pruner's own threshold. */
    reason?: 'escalation';
  };
  'session/end-seed': Record<string, never>;
  'session/run': { workflowId: string; runId: string };
  /** A tool call that needs an answer before it runs (DESIGN §5.1): an approval, or an external tool's result. */
  'tool/approval-request': {
    turn: number;
    step: number;
    callId: string;
    tool: string;
    /** The call's arguments as the model wrote them (JSON text). */
    arguments: string;
    /** Epoch ms after which an unanswered request counts as denied (`expired`). */
    expiresAt: number;
    /** `approval`: approve or deny; `external`: the caller runs the tool and posts its result. */
    kind: 'approval' | 'external';
  };
  /** The one answer that counts for an approval request. `arguments`: edited arguments the call runs with. */
  'tool/approval': {
    turn: number;
    step: number;
    callId: string;
    decision: 'approve' | 'deny' | 'expire';
    reason?: string;
    arguments?: string;
    by?: string;
    /**
     * An external call's result, stored whole as an artifact of the session: logged the moment
     * it is accepted, so a run that ends before the step's results batch still has it.
     */
    result?: ExternalResult;
  };
  /** A tool allowed without approval for the rest of the session. */
  'tool/allow': { tool: string; by?: string };
  /**
   * The caller's labels (string pairs, never sent to the model), logged between turns:
   * the session's own (replacing earlier ones), or, with `messageId`, those of the turn that
   * answers that user message (an OpenAI response's metadata).
   */
  'session/metadata': { metadata: Record<string, string>; messageId?: string };
  /** The session's spend caps from here on (session/budget.ts); `null` removes them. */
  'session/budget': { budget: Budget | null; by?: string };
  /**
   * A cap reached before a model call or a tool round (session/budget.ts): the session pauses
   * until the budget is raised (a later `session/budget`) or the wait ends the turn.
   */
  'budget/breach': BudgetBreach & { turn: number; step: number; before: 'model' | 'tools' };
  /** A context window the provider stated when it refused a request (learned limit, DESIGN §6). */
  'model/limit': { model: string; contextWindow: number; source: 'provider-message' | 'http-413' };
  /**
   * Automatic compaction stopped: the last one could not restore enough headroom (a circuit
   * breaker read from the log). A manual compaction or a changed budget resets it.
   */
  'compaction/stalled': {
    compactionId: string | null;
    tokensBefore: number;
    tokensAfter: number;
    budget: number;
    threshold: number;
    /** What no compaction can shrink: system prompt, tools and the retained tail. */
    irreducible: number;
    reason: string;
  };
}

/**
 * The type of every event the vocabulary knows (`turn/start`, `assistant/chunk`, `tool/call`, …):
 * the keys of `EventDataMap`.
 */
export type KnownEventType = keyof EventDataMap;
export const KNOWN_EVENT_TYPES: ReadonlySet<string> = new Set<KnownEventType>([
  'turn/start',
  'turn/end',
  'step/start',
  'step/end',
  'user/message',
  'assistant/chunk',
  'assistant/message',
  'tool/call',
  'tool/result',
  'request/header',
  'llm/retry',
  'compaction/start',
  'compaction/summary',
  'compaction/end',
  'compaction/prune',
  'session/end-seed',
  'session/run',
  'tool/approval-request',
  'tool/approval',
  'tool/allow',
  'session/metadata',
  'model/limit',
  'compaction/stalled',
  'session/budget',
  'budget/breach',
]);

export const SURFACE_EVENT_TYPES = ['user/message', 'assistant/message', 'tool/result'] as const;
export type SurfaceEventType = (typeof SURFACE_EVENT_TYPES)[number];
export function isSurfaceType(type: string): type is SurfaceEventType {
  return type === 'user/message' || type === 'assistant/message' || type === 'tool/result';
}

/** A stored event. `op` is the idempotency key of the append batch that wrote it. */
export type SessionEvent<T extends KnownEventType = KnownEventType> = {
  [K in T]: {
    seq: number;
    type: K;
    time: number;
    data: EventDataMap[K];
    surfaceOp?: SurfaceOp;
    sourceEventSeqs?: number[];
    op?: string;
    ignorable?: true;
  };
}[T];

/** An event as handed to `append`: the store assigns `seq` and `op`. */
export type NewEvent<T extends KnownEventType = KnownEventType> = {
  [K in T]: {
    type: K;
    time: number;
    data: EventDataMap[K];
    surfaceOp?: SurfaceOp;
    sourceEventSeqs?: number[];
  };
}[T];

/**
 * An event of a type this build does not know, kept only because its writer marked it
 * `ignorable` (a newer version wrote it, dsh-spec §1.4). It exists at the store boundary:
 * stores return it from reads and exports carry it, but no fold, surface or engine code acts
 * on it (see {@link isKnownEvent}).
 */
export type UnknownEvent = {
  seq: number;
  type: string;
  time: number;
  data: JsonValue;
  surfaceOp?: SurfaceOp;
  sourceEventSeqs?: number[];
  op?: string;
  ignorable: true;
};

/** Any stored event: a known event, or an ignorable one of a type unknown to this build. */
export type StoredEvent = SessionEvent | UnknownEvent;

/** Storage metadata kept outside the log (DESIGN §3). */
export type SessionHeader = {
  version: number;
  id: string;
  createdAt: number;
  parentSession?: string;
  seedLength?: number;
  /** A salvaged session: its seed is the parent's longest valid prefix, which ended at this damaged seq. */
  salvagedAt?: { firstBadSeq: number; reason: string };
  agent?: AgentSpec;
  /** The tenant the session belongs to, set at create and never changed (absent: `default`). */
  tenant?: string;
};

/** What a session was started with: the model, system prompt and tool set. */
export type AgentSpec = { model?: string; system?: string; tools?: string[] };

/** The storage format version this build writes and reads. */
export const SESSION_FORMAT_VERSION = 1;

/** What a new session's header says besides the format version: see {@link SessionHeader}. */
export type NewSessionHeader = Omit<SessionHeader, 'version' | 'tenant'>;

/**
 * A new session's header in the format this build writes: the one place a header is made, by
 * whoever creates the session (a client's create, a run taking over a session nobody created, a
 * fork or a salvage). The tenant is stamped by the tenant's store (persistence/tenants.ts).
 */
export function newSessionHeader(fields: NewSessionHeader): SessionHeader {
  const { id, createdAt, parentSession, seedLength, salvagedAt, agent } = fields;
  return {
    version: SESSION_FORMAT_VERSION,
    id,
    createdAt,
    ...(parentSession !== undefined ? { parentSession } : {}),
    ...(seedLength !== undefined ? { seedLength } : {}),
    ...(salvagedAt !== undefined ? { salvagedAt } : {}),
    ...(agent !== undefined ? { agent } : {}),
  };
}

/** The one narrowing from a stored event to the closed union: false for an unknown (ignorable) type. */
export function isKnownEvent(event: StoredEvent): event is SessionEvent {
  return KNOWN_EVENT_TYPES.has(event.type);
}

/**
 * Narrows a stored event to one type, so its `data` has that type's shape: `isEventOfType(event,
 * 'assistant/chunk')`.
 */
export function isEventOfType<K extends KnownEventType>(
  event: StoredEvent | SessionEvent<K>,
  type: K,
): event is SessionEvent<K> {
  return event.type === type;
}
