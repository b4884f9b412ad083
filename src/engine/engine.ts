/**
 * The turn engine's front door (DESIGN §2, §5), free of Temporal: every operation a session
 * workflow runs, each one call here with its inputs and an attempt context. The activities are
 * thin wrappers over these; tests call them directly.
 *
 * Where things live: each operation in `ops/`, in a file named after it; what may stop or delay
 * a call (spend caps, pacing, the tenant gate, learned context windows) in `admission/`; the
 * plumbing they share at this folder's root (the fenced log writer, op keys, deps, types,
 * outcomes, errors, inbox reads, telemetry).
 */
import { asTenant, tenantRetryMs } from './admission/tenant-gate.js';
import type { EngineDeps } from './deps.js';
import { abandon, compact } from './ops/compaction.js';
import { endTurn } from './ops/end-turn.js';
import { logNote } from './ops/log-note.js';
import { modelStep } from './ops/model-step.js';
import { openRun } from './ops/open-run.js';
import { recordAnswers } from './ops/record-answers.js';
import { appendToolResults, runTool } from './ops/tool-step.js';
import { observedStore } from './telemetry.js';
import type {
  AbandonCompactionInput,
  AppendToolResultsInput,
  CompactActivityResult,
  CompactInput,
  EndTurnInput,
  HeadResult,
  NoteResult,
  LogNoteInput,
  ModelStepInput,
  LiveModelStepResult,
  OpenRunInput,
  OpenRunResult,
  RecordAnswersInput,
  RecordAnswersResult,
  RunToolInput,
  StepContext,
  ToolRunRef,
} from './types.js';

/** The operations, in the order a session meets them. */
export type TurnEngine = {
  /** A workflow run takes over its session (ops/open-run.ts). */
  openRun(input: OpenRunInput): Promise<OpenRunResult>;
  /** Begin the turn or step, relieve context pressure, call the model, log its reply (ops/model-step.ts). */
  modelStep(input: ModelStepInput, ctx: StepContext): Promise<LiveModelStepResult>;
  /** Run one logged tool call; its output is stored as an artifact (ops/tool-step.ts). */
  runTool(input: RunToolInput, ctx: StepContext): Promise<ToolRunRef>;
  /** Log approvals and external results as they arrive (ops/record-answers.ts). */
  recordAnswers(input: RecordAnswersInput): Promise<RecordAnswersResult>;
  /** Log a step's tool results in call order and close the step (ops/tool-step.ts). */
  appendToolResults(input: AppendToolResultsInput): Promise<HeadResult>;
  /** Close a turn that did not end by itself: cancel, failure (ops/end-turn.ts). */
  endTurn(input: EndTurnInput): Promise<HeadResult>;
  /** Run or resume one compaction bracket (ops/compaction.ts). */
  compact(input: CompactInput, ctx: StepContext): Promise<CompactActivityResult>;
  /** Close a bracket whose compaction gave up (ops/compaction.ts). */
  abandonCompaction(input: AbandonCompactionInput): Promise<{ headSeq: number }>;
  /** Log a caller's note between turns (ops/log-note.ts). */
  logNote(input: LogNoteInput): Promise<NoteResult>;
};

export function createTurnEngine(engineDeps: EngineDeps): TurnEngine {
  const deps = engineDeps.telemetry
    ? { ...engineDeps, store: observedStore(engineDeps.store, engineDeps.telemetry) }
    : engineDeps;
  return {
    openRun: (input) => openRun(deps, input),
    modelStep: (input, ctx) =>
      asTenant(
        deps,
        input.sessionId,
        ctx,
        () => modelStep(deps, input, ctx),
        // The tenant's share of this worker is taken: the slot goes back and the workflow waits a moment.
        (): LiveModelStepResult => ({
          headSeq: input.knownHead,
          replySeq: null,
          toolCalls: [],
          outcome: 'rate-limited',
          replayed: false,
          retryAfterMs: tenantRetryMs(input.pauses ?? 0),
          waitingFor: 'tenant',
        }),
      ),
    runTool: (input, ctx) => runTool(deps, input, ctx),
    recordAnswers: (input) => recordAnswers(deps, input),
    appendToolResults: (input) => appendToolResults(deps, input),
    endTurn: (input) => endTurn(deps, input),
    compact: (input, ctx) => asTenant(deps, input.sessionId, ctx, () => compact(deps, input, ctx)),
    abandonCompaction: (input) => abandon(deps, input),
    logNote: (input) => logNote(deps, input),
  };
}
