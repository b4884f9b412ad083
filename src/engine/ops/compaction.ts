/**
 * Compaction as an engine operation: the transaction itself lives in src/context; here it gets
 * its ports — the fenced writer with the compaction's op keys, the model as summarizer — and
 * its id, made from the key the workflow gives.
 */
import { mediaReader, withMediaReader } from '../media.js';
import { abandonCompaction, runCompaction } from '../../context/compactor.js';
import type { LogPort } from '../../context/deps.js';
import { SessionlogError } from '../../session/index.js';
import type { EngineDeps } from '../deps.js';
import { LogWriter } from '../log-writer.js';
import { learnedWindowOf } from '../admission/learned-limits.js';
import { compactionId, compactionOp } from '../ops.js';
import { pacedModel } from '../admission/pacing.js';
import { observedModel } from '../telemetry.js';
import { RECALL_TOOL_NAMES } from '../../tools/builtin.js';
import type { AbandonCompactionInput, CompactActivityResult, CompactInput, StepContext } from '../types.js';

/** Whether the session's tools include the recall tools a checkpoint can point to. */
export function hasRecallTools(deps: EngineDeps): boolean {
  return RECALL_TOOL_NAMES.every((name) => deps.tools.get(name) !== undefined);
}

function idOf(input: { runId: string; key: CompactInput['key'] }): string {
  return compactionId({ runId: input.runId, ...input.key });
}

function logPort(writer: LogWriter, runId: string, id: string): LogPort {
  return {
    get session() {
      return writer.session;
    },
    append: (events, suffix) => writer.append(events, compactionOp(runId, id, suffix)),
  };
}

/** Runs (or resumes) one compaction bracket. */
export async function compact(deps: EngineDeps, input: CompactInput, ctx: StepContext): Promise<CompactActivityResult> {
  if (!deps.context)
    throw new SessionlogError('INVALID_ARGUMENT', 'context management is not configured on this worker');
  const writer = await LogWriter.open(deps.store, input.sessionId, input.runId, input.knownHead);
  const id = idOf(input);
  const model = writer.session.requestHeader?.model;
  const learnedWindow = model === undefined ? undefined : learnedWindowOf(deps, writer.session, model);
  const outcome = await runCompaction(
    {
      log: logPort(writer, input.runId, id),
      summarizer: withMediaReader(
        pacedModel(
          deps,
          observedModel(deps.model, deps.telemetry, {
            sessionId: input.sessionId,
            turn: input.turn,
            purpose: 'summary',
          }),
          input,
          ctx,
        ),
        mediaReader(deps, input.sessionId),
      ),
      context: deps.context,
      recall: hasRecallTools(deps),
      now: deps.now,
      signal: ctx.signal,
      heartbeat: () => ctx.heartbeat(),
    },
    {
      compactionId: id,
      trigger: input.trigger,
      turn: input.turn,
      fromSeq: input.knownHead,
      attempt: ctx.attempt,
      maxAttempts: input.maxAttempts,
      ...(learnedWindow !== undefined ? { learnedWindow } : {}),
    },
  );
  return { headSeq: writer.session.nextSeq, ...outcome };
}

/** Closes a bracket whose compaction gave up (timeouts, crashes); a no-op when it is closed or never opened. */
export async function abandon(deps: EngineDeps, input: AbandonCompactionInput): Promise<{ headSeq: number }> {
  const writer = await LogWriter.open(deps.store, input.sessionId, input.runId, input.knownHead);
  const id = idOf(input);
  await abandonCompaction(logPort(writer, input.runId, id), {
    compactionId: id,
    turn: input.turn,
    fromSeq: input.knownHead,
    error: input.error,
    time: deps.now(),
  });
  return { headSeq: writer.session.nextSeq };
}
