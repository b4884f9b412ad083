/**
 * Inputs and results of the turn engine's operations, which are also the activities' inputs
 * and results. Only references cross Temporal: ids, seqs, counts, locators, inbox references and
 * short status (DESIGN §5.2); what callers send waits in the store's inbox until the step that
 * logs it, and the few short texts left (reasons, error messages) are sealed with the session's
 * key on their way to Temporal (client/session-codec.ts).
 */
import type { InboxRef } from '../persistence/index.js';
import type { ExternalResult, ToolSchema } from '../session/events.js';
import type { TurnOutcome } from '../session/turns.js';
import type { Budget, BudgetBreach } from '../session/budget.js';
import type { MediaBlock } from '../session/messages.js';

/**
 * A user message on its way into a turn, as it crosses Temporal (DESIGN §5.2): its id and where
 * its text waits in the store's inbox (`ref`), never the text. `withTools`: it brings function
 * tools the caller runs in the turn it starts (session/turn-tools.ts, in the inbox entry too), or
 * request options of that turn (session/turn-hints.ts), or its caller asked for a turn of its own
 * (a LangGraph run); such a message only ever starts a turn.
 *
 * `text` and `tools` inline are what builds before the inbox sent; a message queued by one of
 * them (carried in a running workflow) is still logged from them.
 */
export type UserInput = {
  id: string;
  ref?: InboxRef;
  withTools?: true;
  /** @deprecated inline text of a message queued before the inbox. */
  text?: string;
  /** @deprecated inline tools of a message queued before the inbox. */
  tools?: ToolSchema[];
};

/**
 * What a caller logs between turns (DESIGN §8): labels of the session or of the turn that will
 * answer a message (`session/metadata`), and user messages the model gets with the next turn
 * without answering them now (a conversation's initial items). `id` names the batch: it is
 * logged once. Its content waits in the inbox (`ref`, a {@link NoteBody}); `metadata` and
 * `messages` inline are what builds before the inbox sent.
 */
export type NoteInput = {
  id: string;
  ref?: InboxRef;
  /** @deprecated inline metadata of a note sent before the inbox. */
  metadata?: { values: Record<string, string>; messageId?: string };
  /** @deprecated inline messages of a note sent before the inbox. */
  messages?: UserInput[];
  /**
   * New spend caps (`null`: none), logged as `session/budget`. Numbers only, so they cross
   * Temporal inline; a note that carries nothing else may be logged while a turn is paused on
   * its budget.
   */
  budget?: Budget | null;
  /** Who set the budget (logged with it). */
  by?: string;
};

export type LogNoteInput = { sessionId: string; runId: string; knownHead: number; note: NoteInput };

/** A logged note: the log's head, and its last turn (a note of caller-supplied history logs turns). */
export type NoteResult = { headSeq: number; lastTurn: number };

/** What an operation learns about the attempt it runs in (an activity's context, or a test's). */
export type StepContext = {
  /** This attempt, 1-based. */
  attempt: number;
  /** Aborts on cancellation, timeout or worker shutdown. */
  signal: AbortSignal;
  heartbeat(details?: unknown): void;
  /** True when the workflow asked for cancellation (not a timeout or shutdown). */
  cancelRequested(): boolean;
};

/** Where a new session's log starts: a copy of another session's prefix. */
export type SeedSpec = { kind: 'fork'; parentId: string; at?: number } | { kind: 'salvage'; parentId: string };

export type OpenRunInput = {
  sessionId: string;
  workflowId: string;
  runId: string;
  /** Seed the (new, empty) session before the run starts. */
  seed?: SeedSpec;
};

/** A message the log already holds, with the result of the turn that consumed it. */
export type RecentMessage = { id: string; turn: number; replySeq: number | null; outcome: TurnOutcome };

/** A step the log shows waiting for answers (approvals, external results): the new run re-enters the wait. */
export type WaitingStep = { turn: number; step: number; calls: ToolCallRef[] };

export type OpenRunResult = {
  headSeq: number;
  lastTurn: number;
  repaired: number;
  recent: RecentMessage[];
  waiting?: WaitingStep;
  /**
   * Inbox entries not (yet) logged: inputs whose signal or update may still arrive, or never
   * will (their client gave up). `verify` lists them; `erase` removes them.
   */
  inboxWaiting?: number;
};

export type ModelStepInput = {
  sessionId: string;
  runId: string;
  turn: number;
  step: number;
  /** The head the workflow last saw; events after it must be this run's own. */
  knownHead: number;
  /** User messages that enter the model's view at this step. */
  entering: UserInput[];
  maxAttempts: number;
  /** 0 for the first call of a step; incremented for each call after a compaction. */
  pass: number;
  /** How long a call waits for its approval or external result before it counts as denied (ms). */
  approvalTimeoutMs?: number;
  /**
   * How many times this step paused so far (a budget breach, a long rate limit): each check after
   * a pause logs its own breach, and the new activity's attempts get their own op keys.
   */
  pauses?: number;
  /** A rate limit whose retry-after is at least this long is handed back (`rate-limited`) for the workflow to wait out. */
  pauseAfterMs?: number;
};

/**
 * A tool call of a step. `gate`: it waits for an answer before it runs — a person's approval,
 * or an external tool's result — until `expiresAt` (epoch ms). `answered`: the approval
 * decision the log already holds (a run resuming a waiting step), with its `reason`.
 */
export type ToolCallRef = {
  callId: string;
  name: string;
  callSeq: number;
  gate?: 'approval' | 'external';
  expiresAt?: number;
  answered?: 'approve' | 'deny' | 'expire';
  /** The reason logged with `answered`, if any. */
  reason?: string;
  /** An external call's accepted result, as logged with its answer. */
  result?: ExternalResult;
};

/**
 * How a model step ends, as this engine hands it back. The step owns context pressure itself: it
 * compacts before the call and, after a provider's overflow refusal, compacts once more and calls
 * again, so an overflow it cannot relieve ends the turn (`error`, code `context_overflow`).
 */
export type LiveStepOutcome =
  | 'tools'
  | 'completed'
  | 'max-tokens'
  | 'aborted'
  | 'error'
  /** A spend cap was reached before the model call or the tool round (`breach`): nothing was called. */
  | 'budget'
  /** The provider asked to wait at least `pauseAfterMs` (`retryAfterMs`): the workflow waits on a timer and calls the step again. */
  | 'rate-limited';

/**
 * REPLAY-ONLY. Outcomes that workers of earlier versions handed back, when the workflow compacted
 * for the step: `needs-compaction` (compact for pressure, call the step again) and
 * `context-overflow` (compact once after a provider's refusal, call again; else end the turn).
 * This engine never returns them (its model step returns a {@link LiveModelStepResult}); they
 * stay in the type only because the histories of workflows those workers ran still hold them,
 * and the workflow serves them on replay as it did then (src/workflows/session-run.ts). Delete
 * them with that replay path.
 */
export type ReplayOnlyStepOutcome = 'context-overflow' | 'needs-compaction';

/** How a model step ended: what this engine returns, and what recorded histories may still hold. */
export type StepOutcome = LiveStepOutcome | ReplayOnlyStepOutcome;

/** How the turn ended, as the log says (set whenever a `turn/end` was logged by the operation). */
export type TurnEndRef = { outcome: TurnOutcome; replySeq: number | null };

export type PressureRef = { tokens: number; contextWindow: number; budget: number };

export type ModelStepResult = {
  headSeq: number;
  /** Seq of the assistant/message logged by this step (null when none was). */
  replySeq: number | null;
  toolCalls: ToolCallRef[];
  outcome: StepOutcome;
  /** `contextLimit`: the window a provider's overflow refusal stated (replay-only `context-overflow` results). */
  error?: { code: string; message: string; contextLimit?: number };
  /** True when the reply was found already logged and the model was not called. */
  replayed: boolean;
  /** Outcome `budget`: the breach as logged (`budget/breach`). */
  breach?: StepBreach;
  /** Outcome `rate-limited`: how long the provider asked to wait (logged as `llm/retry`), or to wait for the tenant. */
  retryAfterMs?: number;
  /** Outcome `rate-limited` with nothing called or logged: the tenant's share of the worker was taken (engine/admission/tenant-gate.ts). */
  waitingFor?: 'tenant';
  /** The measured request before the call, when context management is on. */
  pressure?: PressureRef;
  turnEnd?: TurnEndRef;
};

/** A model step's result as this engine returns it: never a replay-only outcome. */
export type LiveModelStepResult = ModelStepResult & { outcome: LiveStepOutcome };

/** A logged budget breach: the cap, scope, use and limit, where it was checked, and its seq. */
export type StepBreach = BudgetBreach & {
  before: 'model' | 'tools';
  seq: number;
  /** How long the budget in force lets a paused turn wait (absent: the workflow's default). */
  waitMs?: number;
};

export type RunToolInput = { sessionId: string; turn: number; step: number; callSeq: number; maxAttempts: number };
/** A tool's output, stored whole as an artifact. `external`: posted by the caller. */
export type ToolRunRef = {
  callId: string;
  callSeq: number;
  locator: string;
  bytes: number;
  isError: boolean;
  errorCode?: string;
  external?: true;
  /** Images and files the tool gave, stored as media of the session (references, never bytes). */
  media?: MediaBlock[];
};

/** One answer to a waiting call: an approval decision, or an external tool's result. */
export type CallAnswer =
  | {
      callId: string;
      kind: 'approval';
      decision: 'approve' | 'deny' | 'expire';
      allowForSession?: boolean;
      /** Where its reason, edited arguments and author wait in the inbox (an `ApprovalBody`). */
      ref?: InboxRef;
      /** Inline (an expiry's, or an answer sent before the inbox). */
      reason?: string;
      arguments?: string;
      by?: string;
    }
  | {
      callId: string;
      kind: 'external';
      isError: boolean;
      /** Where its output and author wait in the inbox (a `ToolResultBody`). */
      ref?: InboxRef;
      /** Inline (a result sent before the inbox). */
      output?: string;
      by?: string;
    };

export type RecordAnswersInput = {
  sessionId: string;
  runId: string;
  turn: number;
  step: number;
  knownHead: number;
  answers: CallAnswer[];
};

/** What recording answers left: the new head and, for external results, their stored outputs. */
export type RecordAnswersResult = { headSeq: number; external: ToolRunRef[] };

/** A call that does not run: denied by a person, or its wait expired. `external`: it waited for a caller's result, not an approval. */
export type DeniedCall = {
  callId: string;
  callSeq: number;
  decision: 'deny' | 'expire';
  reason?: string;
  external?: true;
};

export type AppendToolResultsInput = {
  sessionId: string;
  runId: string;
  turn: number;
  step: number;
  knownHead: number;
  results: ToolRunRef[];
  /** Calls that did not run (denied, expired): each gets an error result with the reason. */
  denied?: DeniedCall[];
  /** Close the turn in the same batch (the step budget is used up). */
  endTurnReason?: 'max-steps';
};

export type EndTurnInput = {
  sessionId: string;
  runId: string;
  turn: number;
  knownHead: number;
  reason: { kind: 'aborted' } | { kind: 'error'; code: string; message: string };
};

export type HeadResult = { headSeq: number; turnEnd?: TurnEndRef };

/** A compaction as the workflow asks for it: the id's parts, never the id text itself. */
export type CompactInput = {
  sessionId: string;
  runId: string;
  /** The step pass it belongs to, or the n-th manual compaction of the run. */
  key: { turn: number; step: number; pass: number } | { manual: number };
  trigger: 'pressure' | 'context-overflow' | 'manual';
  /** The open turn that owns the bracket; null for a manual compaction between turns. */
  turn: number | null;
  knownHead: number;
  /** The activity's retry budget: the last attempt closes the bracket with an error instead of throwing. */
  maxAttempts: number;
  /** A paced summary whose slot is at least this far away fails as a rate limit with that retry-after (the activity retry waits). */
  pauseAfterMs?: number;
};

export type CompactResultRef = {
  compactionId: string;
  shadowedSeqs: number[];
  tokensBefore: number;
  tokensAfter: number;
};

export type CompactActivityResult = { headSeq: number; result: CompactResultRef | null; error?: string };

export type AbandonCompactionInput = Omit<CompactInput, 'trigger' | 'maxAttempts'> & { error: string };
