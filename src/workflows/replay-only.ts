/**
 * REPLAY-ONLY. Paths the workflow keeps only so that histories of workflows run by workers of
 * earlier versions replay as they ran; this engine never takes them. Delete this file and its
 * two call sites (marked REPLAY-ONLY in session-run.ts) once no such workflow can be open.
 *
 * Model steps of earlier engines handed context pressure back instead of owning it: a step
 * ended `needs-compaction` (the workflow compacted for pressure and called the step again) or
 * `context-overflow` (after a provider's refusal the workflow compacted once and called again;
 * failing that, it ended the turn with `context_overflow`). Today's step climbs its pressure
 * ladder itself (engine/types.ts, `ReplayOnlyStepOutcome`).
 */
import type { EndTurnInput, ModelStepResult, ReplayOnlyStepOutcome, StepOutcome } from '../engine/types.js';
import { runCompaction } from './compaction.js';
import type { RunContext } from './run-context.js';

/** Whether a model step ended in an outcome only steps of earlier engines returned. */
export function isReplayOnlyOutcome(outcome: StepOutcome): outcome is ReplayOnlyStepOutcome {
  return outcome === 'needs-compaction' || outcome === 'context-overflow';
}

/**
 * Runs the compaction such a step asked for; returns whether to call the step again: always
 * after a pressure compaction, and after the first overflow if it compacted something
 * (`overflowCompacted`: the step already had its one overflow compaction).
 */
export async function compactForReplayOnlyOutcome(
  ctx: RunContext,
  outcome: ReplayOnlyStepOutcome,
  overflowCompacted: boolean,
  key: { turn: number; step: number; pass: number },
): Promise<boolean> {
  if (outcome === 'needs-compaction') {
    await runCompaction(ctx, 'pressure', key.turn, key);
    return true;
  }
  if (overflowCompacted) return false;
  return (await runCompaction(ctx, 'context-overflow', key.turn, key)) !== null;
}

/** How a turn whose step still overflowed after its compaction ends. */
export function overflowEndReason(result: ModelStepResult): EndTurnInput['reason'] {
  return { kind: 'error', code: 'context_overflow', message: result.error?.message ?? 'context overflow' };
}
