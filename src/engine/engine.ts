/**
 * The turn engine (DESIGN §2, §5), free of Temporal: every operation a session workflow runs,
 * each one call here with its inputs and an attempt context. The activities are thin wrappers
 * over these; tests call them directly.
 */
import { recordAnswers } from './answers.js';
import { abandon, compact } from './compaction-step.js';
import type { EngineDeps } from './deps.js';
import { modelStep } from './model-step.js';
import { logNote } from './note.js';
import { openRun } from './run.js';
import { observedStore } from './telemetry.js';
import { asTenant, tenantRetryMs } from './tenant-gate.js';
import { appendToolResults, endTurn, runTool } from './tool-step.js';
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
  ModelStepResult,
  OpenRunInput,
  OpenRunResult,
  RecordAnswersInput,
  RecordAnswersResult,
  RunToolInput,
  StepContext,
  ToolRunRef,
} from './types.js';

export type TurnEngine = {
  openRun(input: OpenRunInput): Promise<OpenRunResult>;
  modelStep(input: ModelStepInput, ctx: StepContext): Promise<ModelStepResult>;
  runTool(input: RunToolInput, ctx: StepContext): Promise<ToolRunRef>;
  recordAnswers(input: RecordAnswersInput): Promise<RecordAnswersResult>;
  appendToolResults(input: AppendToolResultsInput): Promise<HeadResult>;
  endTurn(input: EndTurnInput): Promise<HeadResult>;
  compact(input: CompactInput, ctx: StepContext): Promise<CompactActivityResult>;
  abandonCompaction(input: AbandonCompactionInput): Promise<{ headSeq: number }>;
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
        (): ModelStepResult => ({
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
