/**
 * The session workflow's messages, defined once for the workflow and its clients (DESIGN §5).
 * Everything here crosses Temporal: ids, seqs, counts, inbox references and short status
 * (DESIGN §5.2). What callers send waits in the store's inbox; the few short texts left
 * (approval reasons, error messages) are sealed with the session's key (client/session-codec.ts).
 */
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
import type { NoteInput, SeedSpec, StepBreach, UserInput } from '../engine/types.js';
import type { InboxRef } from '../persistence/store.js';
import type { TurnOutcome } from '../session/turns.js';

export type { NoteInput, UserInput };

/** The reply to `send`: the turn that answered and the seq of its final assistant message. */
export type SendResult = { turn: number; replySeq: number | null; outcome: TurnOutcome };

export type { TurnOutcome };

/**
 * What a compaction did: its id, the seqs its summary shadows, and the request's tokens before and
 * after.
 */
export type CompactResult = { compactionId: string; shadowedSeqs: number[]; tokensBefore: number; tokensAfter: number };

/**
 * What a session's workflow is doing now, as its status reports it (`idle`, a turn's `model` or
 * `tools` step, `waiting` for an answer, `paused`, …).
 */
export type SessionPhase =
  | 'starting'
  | 'idle'
  | 'turn'
  | 'model'
  | 'tools'
  | 'waiting'
  | 'compacting'
  /** The turn waits with nothing running: see `SessionStatus.paused` for why and until when. */
  | 'paused'
  | 'closing'
  | 'closed';

/**
 * Why a turn is paused (`since`/`until`: epoch ms): a spend cap was reached (`budget`: it goes
 * on when the budget is raised, and ends with `budget_exceeded` at `until`), or the provider
 * asked to wait long (`rate_limit`: the model is called again at `until`).
 */
export type SessionPause =
  | { reason: 'budget'; since: number; until: number; breach: StepBreach }
  | { reason: 'rate_limit'; since: number; until: number }
  /** The tenant's share of the worker was taken (engine/tenant-gate.ts): the step is called again at `until`. */
  | { reason: 'tenant'; since: number; until: number };

/**
 * An answer to a call waiting for approval (DESIGN §5.1). Its reason, edited arguments (a JSON
 * object's text the call runs with) and who answered wait in the inbox (`ref`, an
 * `ApprovalBody`); the inline fields are what builds before the inbox sent.
 */
export type ApprovalInput = {
  callId: string;
  decision: 'approve' | 'deny';
  /** Approve this tool without asking for the rest of the session (logged as `tool/allow`). */
  allowForSession?: boolean;
  ref?: InboxRef;
  /** @deprecated inline reason of an answer sent before the inbox. */
  reason?: string;
  /** @deprecated inline edited arguments of an answer sent before the inbox. */
  arguments?: string;
  /** @deprecated inline author of an answer sent before the inbox. */
  by?: string;
};

/**
 * The decision that counts for a call: the first one given (or `expire` when none came in time).
 * `reason`: as logged with it (SessionClient reads it from the log; the workflow never holds it).
 */
export type ApprovalResult = { callId: string; decision: 'approve' | 'deny' | 'expire'; reason?: string };

/**
 * The result of an external tool, posted by the caller that ran it: its output (and who posted
 * it) wait in the inbox (`ref`, a `ToolResultBody`); the inline fields are what builds before
 * the inbox sent.
 */
export type ToolResultInput = {
  callId: string;
  isError?: boolean;
  ref?: InboxRef;
  /** @deprecated inline output of a result sent before the inbox. */
  output?: string;
  /** @deprecated inline author of a result sent before the inbox. */
  by?: string;
};

/** The answer to an external tool's result: accepted for the call it names. */
export type ToolResultAck = { callId: string; accepted: true };

/**
 * A session's live status from its workflow: head seq, turn, phase, why a turn is paused, counts
 * and the last error (`SessionClient.status`, `GET /v1/sessions/:id`).
 */
export type SessionStatus = {
  sessionId: string;
  headSeq: number;
  turn: number;
  phase: SessionPhase;
  pending: number;
  tokens: number | null;
  contextWindow: number | null;
  pressure: number | null;
  lastError?: string;
  /** Set while the phase is `paused`. */
  paused?: SessionPause;
  runId: string;
};

/** Tunables of one session workflow. Every duration is injectable so tests can shrink it. */
export type SessionTunables = {
  /** Bound on model steps (tool rounds + 1) per turn. */
  maxStepsPerTurn: number;
  /** Largest accepted user message, in UTF-8 bytes (at most {@link MAX_MESSAGE_BYTES_LIMIT}). */
  maxMessageBytes: number;
  /** Continue-as-new after this many turns in one run even if Temporal does not suggest it. */
  continueAsNewAfterTurns: number;
  /** End the workflow after this long without input (0 = never). The log stays; it resumes on the next message. */
  idleTimeoutMs: number;
  modelStartToCloseMs: number;
  modelHeartbeatMs: number;
  toolStartToCloseMs: number;
  appendStartToCloseMs: number;
  /**
   * First retry delay of a model step that failed without saying when to retry (a worker that
   * died or stopped heartbeating, a network error); a provider's retry-after wins.
   */
  modelRetryInitialMs: number;
  /** Max attempts of a retryable model failure (429, 5xx, timeout, network) per step. */
  modelMaxAttempts: number;
  toolMaxAttempts: number;
  /** Attempts of a compaction activity; its last attempt closes the bracket with an error rather than throw. */
  compactionMaxAttempts: number;
  /** How long a tool call waits for its approval or external result before it counts as denied (`expired`). */
  approvalTimeoutMs: number;
  /** How long a turn paused on a spend cap waits for the budget to be raised, unless the budget says (`waitMs`). */
  budgetWaitMs: number;
  /**
   * A provider's retry-after at least this long pauses the turn on a workflow timer
   * (`paused: rate_limit`) instead of an activity retry (0: never; every wait is a retry).
   */
  rateLimitPauseMs: number;
  /**
   * How often a turn paused on its tenant's cap (SESSIONLOG_TENANT_CAPS, raised in the workers'
   * config, not by a call) checks the tenant's spend again: this, doubling with each check, to
   * at most 10 minutes.
   */
  tenantRecheckMs: number;
};

/**
 * The defaults of the tunables each session carries (steps per turn, message size, continue-as-new,
 * approval and budget waits, the model activity's heartbeat and attempts).
 */
export const DEFAULT_TUNABLES: SessionTunables = {
  maxStepsPerTurn: 8,
  maxMessageBytes: 8 * 1024 * 1024,
  continueAsNewAfterTurns: 500,
  idleTimeoutMs: 0,
  modelStartToCloseMs: 10 * 60_000,
  modelHeartbeatMs: 30_000,
  toolStartToCloseMs: 5 * 60_000,
  appendStartToCloseMs: 30_000,
  modelRetryInitialMs: 200,
  modelMaxAttempts: 6,
  toolMaxAttempts: 4,
  compactionMaxAttempts: 3,
  approvalTimeoutMs: 24 * 60 * 60_000,
  budgetWaitMs: 24 * 60 * 60_000,
  rateLimitPauseMs: 60_000,
  tenantRecheckMs: 30_000,
};

/** Where a new session's log starts: a copy of another session's prefix (fork, salvage). */
export type { SeedSpec };

/** Workflow input; also what continue-as-new carries (small: no conversation). */
export type SessionWorkflowInput = {
  sessionId: string;
  tunables?: Partial<SessionTunables>;
  /** Seed a new session from another before its first run (never carried across continue-as-new). */
  seed?: SeedSpec;
  /** Carried across continue-as-new. */
  carry?: { headSeq: number; turn: number; queue: UserInput[]; recent: Array<{ id: string; result: SendResult }> };
};

export const userMessageSignal = defineSignal<[UserInput]>('userMessage');
export const cancelSignal = defineSignal('cancel');
export const closeSignal = defineSignal('close');
export const sendUpdate = defineUpdate<SendResult, [UserInput]>('send');
/**
 * One manual compaction, between turns: waits until no turn runs and answers what it compacted;
 * with `atOnce` while a turn runs, answers {@link Deferred} at once and runs when the turn is over.
 */
export const compactUpdate = defineUpdate<CompactResult | null | Deferred, [AnswerOptions?]>('compact');
export const statusQuery = defineQuery<SessionStatus>('status');
/** Answers a call waiting for approval; a second answer returns the first decision. */
export const approveUpdate = defineUpdate<ApprovalResult, [ApprovalInput]>('approve');
/** Posts the result of an external tool the caller ran; refused for a call that is not waiting for one. */
export const toolResultUpdate = defineUpdate<ToolResultAck, [ToolResultInput]>('toolResult');
/** Waits until the run has opened its session (created, seeded, repaired); fails with the reason it could not. */
export const openedUpdate = defineUpdate<{ headSeq: number }, []>('opened');
/**
 * Logs a caller's note between turns (metadata; user messages for the next turn, unanswered
 * until then): waits until no turn or compaction runs, logs it once per note id, answers the head.
 * A note that only changes the budget, and any note sent with `atOnce`, answers at once
 * ({@link NoteAck}).
 */
export const noteUpdate = defineUpdate<NoteAck, [NoteInput, AnswerOptions?]>('note');

/**
 * The answer to a note. `applies`: `now` when it is logged (the head is after it); `turn-end`
 * for a note that arrived while a turn ran (or waited for an approval) and answers at once (a
 * budget change; any note with `atOnce`): it is logged as soon as nothing runs, at the latest
 * when that turn ends and before the next one starts (the head is the one before it). Absent
 * from the answers of builds before budget changes answered at once, which answered once the
 * note was logged.
 */
export type NoteAck = { headSeq: number; applies?: 'now' | 'turn-end' };

/**
 * How a note or a compaction is answered while a turn runs. `atOnce`: at once, with what applies
 * when the turn is over ({@link Deferred}, {@link NoteAck}); without it, once it is done (which
 * may be when a turn waiting for an approval is answered).
 */
export type AnswerOptions = { atOnce?: boolean };

/** The answer to work asked for while a turn runs, with `atOnce`: it runs once nothing runs, before the next turn. */
export type Deferred = { applies: 'turn-end' };

/** The bounds of a caller's note (the client checks them before writing it to the inbox). */
export const NOTE_LIMITS = { metadataKeys: 16, keyChars: 64, valueChars: 512, messages: 20 } as const;

/** A message's tools for its turn, as JSON (session/turn-tools.ts holds the exact per-tool limits, below this). */
export const MAX_TOOLS_JSON = 300 * 1024;

/** The largest message a session may be configured to accept (`maxMessageBytes`), in UTF-8 bytes. */
export const MAX_MESSAGE_BYTES_LIMIT = 32 * 1024 * 1024;

export const SESSION_WORKFLOW_TYPE = 'sessionWorkflow';
/** The task queue session workflows run on unless configured (`SESSIONLOG_TASK_QUEUE`). */
export const DEFAULT_TASK_QUEUE = 'sessionlog';

/**
 * What a session workflow's id starts with: the id is `session/<sessionId>` (DESIGN §5). Made by
 * {@link workflowIdFor} and read back by {@link sessionIdOfWorkflow}, here only; telemetry, which
 * imports nothing of ours, reads it with its own copy (`telemetry/attributes.ts`), held to this
 * one by a test.
 */
export const SESSION_WORKFLOW_ID_PREFIX = 'session/';

/** The id of session `sessionId`'s workflow. */
export function workflowIdFor(sessionId: string): string {
  return `${SESSION_WORKFLOW_ID_PREFIX}${sessionId}`;
}

/** The session a workflow id names, or undefined when it is not a session workflow's. */
export function sessionIdOfWorkflow(workflowId: string | undefined): string | undefined {
  return workflowId?.startsWith(SESSION_WORKFLOW_ID_PREFIX)
    ? workflowId.slice(SESSION_WORKFLOW_ID_PREFIX.length)
    : undefined;
}

/** UTF-8 byte length without Buffer (workflow sandbox safe). */
export function utf8Length(text: string): number {
  let bytes = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x80) bytes += 1;
    else if (c < 0x800) bytes += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length) {
      bytes += 4;
      i++;
    } else bytes += 3;
  }
  return bytes;
}
