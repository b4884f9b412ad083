/**
 * The tool half of a step (DESIGN §5): each logged `tool/call` runs as its own attempt with the
 * session's identity (never the model's word for it), its full output is stored as an artifact
 * of that session, and one append then logs the step's results in call order (spilled where
 * large) and closes the step.
 */
import { randomUUID } from 'node:crypto';
import { parseToolCallArguments } from '../model/tool-arguments.js';
import { SessionlogError, closersFor, isSessionlogError, type NewEvent, type TurnEndReason } from '../session/index.js';
import { ToolInputError, type ToolContext } from '../tools/registry.js';
import type { EngineDeps } from './deps.js';
import { StepInterrupted, ToolAttemptFailed } from './errors.js';
import { LogWriter } from './log-writer.js';
import { endTurnOp, stepOps } from './ops.js';
import { loggedTurnEnd } from './outcomes.js';
import type { AppendToolResultsInput, EndTurnInput, HeadResult, RunToolInput, StepContext, ToolRunRef } from './types.js';

type ToolOutcome = { text: string; isError: boolean; errorCode?: string };

/** Runs the tool call logged at `callSeq`; stores its whole output as an artifact of the session. */
export async function runTool(deps: EngineDeps, input: RunToolInput, ctx: StepContext): Promise<ToolRunRef> {
  const session = await deps.store.session(input.sessionId);
  const call = session.eventAt(input.callSeq);
  if (call?.type !== 'tool/call') {
    throw new SessionlogError('INVALID_ARGUMENT', `seq ${input.callSeq} of session ${input.sessionId} is not a tool/call`);
  }
  const { callId, name } = call.data;
  const observer = deps.telemetry?.toolCall({ sessionId: input.sessionId, turn: input.turn, step: input.step, callId, tool: name, attempt: ctx.attempt });
  let outcome: ToolOutcome;
  try {
    outcome = await callTool(deps, input, ctx, { sessionId: input.sessionId, callId, name, rawArguments: call.data.arguments });
  } catch (error) {
    observer?.end({ isError: true, failed: true, errorCode: (error as { code?: string }).code ?? 'TOOL_FAILED' });
    throw error;
  }
  observer?.end({ isError: outcome.isError, ...(outcome.errorCode ? { errorCode: outcome.errorCode } : {}) });
  const ref = await deps.store.artifacts.put({ sessionId: input.sessionId, name: `${name}-${callId}.txt`, content: outcome.text });
  return { callId, callSeq: input.callSeq, locator: ref.locator, bytes: ref.bytes, isError: outcome.isError, ...(outcome.errorCode ? { errorCode: outcome.errorCode } : {}) };
}

async function callTool(
  deps: EngineDeps,
  input: RunToolInput,
  ctx: StepContext,
  call: { sessionId: string; callId: string; name: string; rawArguments: string },
): Promise<ToolOutcome> {
  const tool = deps.tools.get(call.name);
  if (!tool) {
    return { text: `Unknown tool "${call.name}". Available tools: ${deps.tools.names.join(', ') || '(none)'}.`, isError: true, errorCode: 'TOOL_UNKNOWN' };
  }
  // Model output is a boundary: arguments that are not a JSON object go back to the model as an error result.
  const parsed = parseToolCallArguments(call.name, call.rawArguments);
  if (!parsed.ok) return { text: parsed.message, isError: true, errorCode: parsed.code };
  const context: ToolContext = {
    sessionId: call.sessionId,
    callId: call.callId,
    artifacts: deps.store.artifacts,
    signal: ctx.signal,
  };
  const alive = setInterval(() => ctx.heartbeat(), deps.heartbeatMs);
  try {
    const output = await tool.run(parsed.value, context);
    return { text: output.text, isError: output.isError === true };
  } catch (error) {
    if (ctx.signal.aborted) throw new StepInterrupted(ctx.cancelRequested(), `tool ${call.name} cancelled`);
    if (error instanceof ToolInputError || isSessionlogError(error)) return { text: error.message, isError: true, errorCode: error.code };
    if (ctx.attempt < input.maxAttempts) throw new ToolAttemptFailed(`tool ${call.name} failed: ${(error as Error)?.message ?? String(error)}`, { cause: error });
    return { text: `The tool ${call.name} failed after ${ctx.attempt} attempts: ${(error as Error)?.message ?? String(error)}`, isError: true, errorCode: 'TOOL_FAILED' };
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
    for (const result of input.results) {
      const full = await deps.store.artifacts.get(result.locator);
      const call = writer.session.eventAt(result.callSeq);
      const toolName = call?.type === 'tool/call' ? call.data.name : 'unknown';
      const text = deps.shapeToolResult
        ? await deps.shapeToolResult({ sessionId: input.sessionId, callId: result.callId, toolName, text: full, locator: result.locator })
        : full;
      events.push({
        type: 'tool/result',
        time: deps.now(),
        data: {
          turn: input.turn,
          step: input.step,
          message: {
            id: randomUUID(),
            role: 'user',
            content: [{ type: 'tool-result', toolCallId: result.callId, content: [{ type: 'text', text }], ...(result.isError ? { isError: true as const } : {}) }],
            source: { kind: 'tool', callId: result.callId },
          },
          ...(result.errorCode ? { error: { name: 'ToolError', code: result.errorCode } } : {}),
          meta: { locator: result.locator, bytes: result.bytes },
        },
        surfaceOp: 'append',
        sourceEventSeqs: [result.callSeq],
      });
    }
    events.push({ type: 'step/end', time: deps.now(), data: { turn: input.turn, step: input.step } });
    if (input.endTurnReason) events.push({ type: 'turn/end', time: deps.now(), data: { turn: input.turn, reason: { kind: input.endTurnReason } } });
    await writer.append(events, op);
    if (input.endTurnReason) deps.onTurnEnded?.(input.sessionId);
  }
  const turnEnd = loggedTurnEnd(writer.session, input.turn);
  return { headSeq: writer.session.nextSeq, ...(turnEnd ? { turnEnd } : {}) };
}

/**
 * Closes a turn that did not end by itself (cancel, failure): every open call gets an error
 * result, then the step and the turn end. A no-op when the log shows the turn closed; either
 * way the result is how the log says the turn ended.
 */
export async function endTurn(deps: EngineDeps, input: EndTurnInput): Promise<HeadResult> {
  const writer = await LogWriter.open(deps.store, input.sessionId, input.runId, input.knownHead);
  const reason: TurnEndReason =
    input.reason.kind === 'aborted'
      ? { kind: 'aborted', reason: { kind: 'user' } }
      : { kind: 'error', error: { code: input.reason.code, message: input.reason.message } };
  const closers = closersFor(writer.session.turns, writer.session.storedAt(writer.session.nextSeq - 1), reason, deps.now());
  if (closers.length > 0) {
    await writer.append(closers, endTurnOp(input.runId, input.turn));
    deps.onTurnEnded?.(input.sessionId);
  }
  const turnEnd = loggedTurnEnd(writer.session, input.turn);
  return { headSeq: writer.session.nextSeq, ...(turnEnd ? { turnEnd } : {}) };
}
