/**
 * The tool half of a step (DESIGN §5): each logged `tool/call` runs as its own attempt with the
 * session's identity (never the model's word for it), its full output is stored as an artifact
 * of that session, and one append then logs the step's results in call order (spilled where
 * large) and closes the step.
 */
import { randomUUID } from 'node:crypto';
import { parseToolCallArguments } from '../../model/tool-arguments.js';
import {
  SessionlogError,
  isSessionlogError,
  scrubSecrets,
  type EventDataMap,
  type MediaBlock,
  type NewEvent,
} from '../../session/index.js';
import { ToolInputError, type ToolContext } from '../../tools/registry.js';
import type { EngineDeps } from '../deps.js';
import { StepInterrupted, ToolAttemptFailed } from '../errors.js';
import { isTurnTool } from './record-answers.js';
import { historyOf } from '../history.js';
import { LogWriter } from '../log-writer.js';
import { stepOps } from '../ops.js';
import { loggedTurnEnd } from '../outcomes.js';
import type {
  AppendToolResultsInput,
  DeniedCall,
  HeadResult,
  RunToolInput,
  StepContext,
  ToolRunRef,
} from '../types.js';

/** What a call came to: its text (stored whole as an artifact), and the images and files it gave (stored media). */
type ToolOutcome = { text: string; isError: boolean; errorCode?: string; media?: MediaBlock[] };

/** Runs the tool call logged at `callSeq`; stores its whole output as an artifact of the session. */
export async function runTool(deps: EngineDeps, input: RunToolInput, ctx: StepContext): Promise<ToolRunRef> {
  const session = await deps.store.session(input.sessionId);
  const call = session.eventAt(input.callSeq);
  if (call?.type !== 'tool/call') {
    throw new SessionlogError(
      'INVALID_ARGUMENT',
      `seq ${input.callSeq} of session ${input.sessionId} is not a tool/call`,
    );
  }
  const { callId, name } = call.data;
  // Arguments a person edited when approving the call replace the model's (both stay logged).
  const edited = session.turns.pending.get(callId)?.answer?.arguments;
  const observer = deps.telemetry?.toolCall({
    sessionId: input.sessionId,
    turn: input.turn,
    step: input.step,
    callId,
    tool: name,
    attempt: ctx.attempt,
  });
  let outcome: ToolOutcome;
  try {
    outcome = await callTool(deps, input, ctx, {
      sessionId: input.sessionId,
      callId,
      name,
      rawArguments: edited ?? call.data.arguments,
      turnTool: isTurnTool(session, name),
    });
  } catch (error) {
    observer?.end({ isError: true, failed: true, errorCode: (error as { code?: string }).code ?? 'TOOL_FAILED' });
    throw error;
  }
  observer?.end({ isError: outcome.isError, ...(outcome.errorCode ? { errorCode: outcome.errorCode } : {}) });
  // A tool that prints a key (an environment dump, an echoed error) must not put it in the log.
  const ref = await deps.store.artifacts.put({
    sessionId: input.sessionId,
    name: `${name}-${callId}.txt`,
    content: scrubSecrets(outcome.text),
  });
  return {
    callId,
    callSeq: input.callSeq,
    locator: ref.locator,
    bytes: ref.bytes,
    isError: outcome.isError,
    ...(outcome.errorCode ? { errorCode: outcome.errorCode } : {}),
    ...(outcome.media && outcome.media.length > 0 ? { media: outcome.media } : {}),
  };
}

async function callTool(
  deps: EngineDeps,
  input: RunToolInput,
  ctx: StepContext,
  call: { sessionId: string; callId: string; name: string; rawArguments: string; turnTool: boolean },
): Promise<ToolOutcome> {
  const tool = deps.tools.get(call.name);
  if (call.turnTool || tool?.external) {
    // Only a call whose arguments are not a JSON object reaches here waiting for nothing: tell the model why.
    const parsed = parseToolCallArguments(call.name, call.rawArguments);
    if (!parsed.ok) return { text: parsed.message, isError: true, errorCode: parsed.code };
    return {
      text: `The tool ${call.name} is run by the caller, not by sessionlog; its result never arrived.`,
      isError: true,
      errorCode: 'TOOL_EXTERNAL',
    };
  }
  if (!tool) {
    return {
      text: `Unknown tool "${call.name}". Available tools: ${deps.tools.names.join(', ') || '(none)'}.`,
      isError: true,
      errorCode: 'TOOL_UNKNOWN',
    };
  }
  // Model output is a boundary: arguments that are not a JSON object go back to the model as an error result.
  const parsed = parseToolCallArguments(call.name, call.rawArguments);
  if (!parsed.ok) return { text: parsed.message, isError: true, errorCode: parsed.code };
  // A later attempt means an earlier one was cut off (the worker died, a heartbeat timed out):
  // a tool that may not run twice is not run again, since the first run may have taken effect.
  if (tool.retryable === false && ctx.attempt > 1) {
    return {
      text: `The call of ${call.name} was interrupted and is not run again: the tool does not say it is idempotent or read-only, so the interrupted call may or may not have taken effect. Check before calling it again.`,
      isError: true,
      errorCode: 'TOOL_NOT_RETRIED',
    };
  }
  const context: ToolContext = {
    sessionId: call.sessionId,
    callId: call.callId,
    artifacts: deps.store.artifacts,
    history: historyOf(deps.store, call.sessionId),
    signal: ctx.signal,
  };
  const alive = setInterval(() => ctx.heartbeat(), deps.heartbeatMs);
  try {
    const output = await tool.run(parsed.value, context);
    const media = output.content?.filter((b): b is MediaBlock => b.type === 'image' || b.type === 'file');
    return {
      text: output.text,
      isError: output.isError === true,
      ...(output.isError === true && output.errorCode ? { errorCode: output.errorCode } : {}),
      ...(media && media.length > 0 ? { media } : {}),
    };
  } catch (error) {
    if (ctx.signal.aborted) throw new StepInterrupted(ctx.cancelRequested(), `tool ${call.name} cancelled`);
    if (error instanceof ToolInputError || isSessionlogError(error))
      return { text: error.message, isError: true, errorCode: error.code };
    if (ctx.attempt < input.maxAttempts && tool.retryable !== false)
      throw new ToolAttemptFailed(`tool ${call.name} failed: ${(error as Error)?.message ?? String(error)}`, {
        cause: error,
      });
    return {
      text: `The tool ${call.name} failed after ${ctx.attempt} attempts: ${(error as Error)?.message ?? String(error)}`,
      isError: true,
      errorCode: 'TOOL_FAILED',
    };
  } finally {
    clearInterval(alive);
  }
}

/** Logs the step's tool results in call order (with spill) and closes the step (and the turn at the step bound). */
export async function appendToolResults(deps: EngineDeps, input: AppendToolResultsInput): Promise<HeadResult> {
  const writer = await LogWriter.open(deps.store, input.sessionId, input.runId, input.knownHead);
  const op = stepOps.results(input);
  if (writer.logged(op).length === 0) {
    const events: NewEvent[] = [];
    for (const denied of input.denied ?? []) {
      // A reason that came through the inbox is known to the log only.
      const reason = denied.reason ?? writer.session.turns.pending.get(denied.callId)?.answer?.reason;
      events.push(deniedResult(deps, input, reason !== undefined ? { ...denied, reason } : denied));
    }
    for (const result of input.results) {
      const full = await deps.store.artifacts.get(input.sessionId, result.locator);
      const call = writer.session.eventAt(result.callSeq);
      const toolName = call?.type === 'tool/call' ? call.data.name : 'unknown';
      const text = deps.shapeToolResult
        ? await deps.shapeToolResult({
            sessionId: input.sessionId,
            callId: result.callId,
            toolName,
            text: full,
            locator: result.locator,
          })
        : full;
      events.push(
        toolResultEvent(
          deps,
          input,
          result,
          text,
          {
            ...(result.errorCode ? { error: { name: 'ToolError', code: result.errorCode } } : {}),
            meta: { locator: result.locator, bytes: result.bytes },
            ...(result.external ? { origin: 'external' as const } : {}),
          },
          result.media,
        ),
      );
    }
    // Results in call order, whoever produced them.
    events.sort((a, b) => (a.sourceEventSeqs?.[0] ?? 0) - (b.sourceEventSeqs?.[0] ?? 0));
    events.push({ type: 'step/end', time: deps.now(), data: { turn: input.turn, step: input.step } });
    if (input.endTurnReason)
      events.push({
        type: 'turn/end',
        time: deps.now(),
        data: { turn: input.turn, reason: { kind: input.endTurnReason } },
      });
    await writer.append(events, op);
    if (input.endTurnReason) deps.onTurnEnded?.(input.sessionId, writer.session.nextSeq - 1);
  }
  const turnEnd = loggedTurnEnd(writer.session, input.turn);
  return { headSeq: writer.session.nextSeq, ...(turnEnd ? { turnEnd } : {}) };
}

/** The error result the model sees for a call that did not run: denied (with the person's reason) or expired. */
function deniedResult(deps: EngineDeps, input: AppendToolResultsInput, denied: DeniedCall): NewEvent {
  const text =
    denied.decision === 'deny'
      ? `The tool call was not run: the user denied it${denied.reason ? `: ${denied.reason}` : '.'}`
      : denied.external
        ? 'The tool is run by the caller, and its result did not arrive before the wait for it expired.'
        : 'The tool call was not run: nobody approved it before its approval request expired. Ask the user before trying again.';
  return toolResultEvent(deps, input, { ...denied, isError: true }, text, {
    error: { name: 'ToolNotApproved', code: denied.decision === 'expire' ? 'TOOL_APPROVAL_EXPIRED' : 'TOOL_DENIED' },
  });
}

/**
 * The `tool/result` of call `call` with `text` as the model's view of it, then its `media` (stored
 * images and files, as references), and `extra` data: error, artifact, origin.
 */
function toolResultEvent(
  deps: EngineDeps,
  input: AppendToolResultsInput,
  call: { callId: string; callSeq: number; isError: boolean },
  text: string,
  extra: Pick<EventDataMap['tool/result'], 'error' | 'meta' | 'origin'>,
  media: readonly MediaBlock[] = [],
): NewEvent {
  return {
    type: 'tool/result',
    time: deps.now(),
    data: {
      turn: input.turn,
      step: input.step,
      message: {
        id: randomUUID(),
        role: 'user',
        content: [
          {
            type: 'tool-result',
            toolCallId: call.callId,
            content: [{ type: 'text', text }, ...media],
            ...(call.isError ? { isError: true as const } : {}),
          },
        ],
        source: { kind: 'tool', callId: call.callId },
      },
      ...extra,
    },
    surfaceOp: 'append',
    sourceEventSeqs: [call.callSeq],
  };
}
