/**
 * Inputs and results of the session activities. Only references cross Temporal: ids, seqs,
 * counts, locators and short status (DESIGN §1.3). The user's message text is the one bounded
 * exception (it enters the log in the step that consumes it).
 */
import type { RecentMessage, UserInput } from '../workflows/api.js';

export type OpenRunInput = { sessionId: string; workflowId: string; runId: string };
export type OpenRunResult = { headSeq: number; lastTurn: number; repaired: number; recent: RecentMessage[] };

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
  /** 0 for the first call of a step; incremented for each retry after a compaction. */
  pass: number;
};

export type ToolCallRef = { callId: string; name: string; callSeq: number };

export type StepOutcome = 'tools' | 'completed' | 'max-tokens' | 'aborted' | 'error' | 'context-overflow' | 'needs-compaction';

export type ModelStepResult = {
  headSeq: number;
  /** Seq of the assistant/message logged by this step (null when none was). */
  replySeq: number | null;
  toolCalls: ToolCallRef[];
  outcome: StepOutcome;
  error?: { code: string; message: string };
  /** True when the reply was found already logged and the model was not called. */
  replayed: boolean;
  /** The measured request before the call, when context management is on. */
  pressure?: { tokens: number; contextWindow: number; budget: number };
};

export type RunToolInput = { sessionId: string; turn: number; step: number; callSeq: number; maxAttempts: number };
export type ToolRunRef = { callId: string; callSeq: number; locator: string; bytes: number; isError: boolean; errorCode?: string };

export type AppendToolResultsInput = {
  sessionId: string;
  runId: string;
  turn: number;
  step: number;
  knownHead: number;
  results: ToolRunRef[];
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

export type HeadResult = { headSeq: number };
