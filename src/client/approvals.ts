/**
 * Answers to tool calls waiting for them (DESIGN §5.1), as `SessionClient` gives them
 * (session-client.ts documents each): approve or deny a call, post an external tool's result,
 * list the calls waiting.
 */
import { inboxKeys, isJsonObjectText, type ApprovalBody, type ToolResultBody } from '../persistence/inbox-entries.js';
import {
  SessionlogError,
  UNREADABLE_LOG_CODES,
  isEventOfType,
  isSessionlogError,
  waitsForAnswer,
  type SessionView,
} from '../session/index.js';
import { approveUpdate, toolResultUpdate, type ApprovalResult, type ToolResultAck } from '../workflows/api.js';
import type { ClientCore } from './core.js';
import { assertMessageId, assertMessageText, assertSessionId, isWellFormed } from './inputs.js';
import type { ApprovalAnswer, PendingApproval } from './session-client.js';

export async function approve(
  core: ClientCore,
  sessionId: string,
  callId: string,
  answer: ApprovalAnswer,
): Promise<ApprovalResult> {
  await core.requireSession(sessionId);
  assertMessageId(callId);
  if (answer.decision !== 'approve' && answer.decision !== 'deny')
    throw new SessionlogError('INVALID_ARGUMENT', 'an approval decision is approve or deny');
  if (answer.reason !== undefined) assertMessageText(answer.reason, core.maxMessageBytes);
  if (answer.arguments !== undefined && (typeof answer.arguments !== 'string' || !isJsonObjectText(answer.arguments)))
    throw new SessionlogError('INVALID_ARGUMENT', 'edited arguments must be the text of a JSON object');
  if (answer.by !== undefined) assertMessageText(answer.by, 1024);
  await requireLoggedCall(core, sessionId, callId);
  const body: ApprovalBody = {
    ...(answer.reason !== undefined ? { reason: answer.reason } : {}),
    ...(answer.arguments !== undefined ? { arguments: answer.arguments } : {}),
    ...(answer.by !== undefined ? { by: answer.by } : {}),
  };
  const text = JSON.stringify(body);
  const ref = text === '{}' ? undefined : await core.putInbox(sessionId, inboxKeys.approval(callId, text), text);
  const result = await core.updateWithStart(approveUpdate, sessionId, {
    args: [
      {
        callId,
        decision: answer.decision,
        ...(answer.allowForSession ? { allowForSession: true } : {}),
        ...(ref ? { ref } : {}),
      },
    ],
  });
  if (ref) await core.store.inbox.remove(sessionId, [ref.key]).catch(() => undefined);
  if (result.reason !== undefined) return result;
  // The reason of the decision that counts is in the log (the workflow never holds it).
  const reason = (await loggedApproval(core, sessionId, callId))?.reason;
  return reason !== undefined ? { ...result, reason } : result;
}

export async function submitToolResult(
  core: ClientCore,
  sessionId: string,
  callId: string,
  output: string,
  options: { isError?: boolean; by?: string } = {},
): Promise<ToolResultAck> {
  await core.requireSession(sessionId);
  assertMessageId(callId);
  if (typeof output !== 'string' || !isWellFormed(output))
    throw new SessionlogError('INVALID_MESSAGE', 'a tool result output must be well-formed text');
  if (Buffer.byteLength(output, 'utf8') > core.maxMessageBytes)
    throw new SessionlogError(
      'MESSAGE_TOO_LARGE',
      `tool output is ${Buffer.byteLength(output, 'utf8')} bytes; the limit is ${core.maxMessageBytes}`,
    );
  if (options.by !== undefined) assertMessageText(options.by, 1024);
  await requireLoggedCall(core, sessionId, callId);
  const body: ToolResultBody = { output, ...(options.by !== undefined ? { by: options.by } : {}) };
  const text = JSON.stringify(body);
  const ref = await core.putInbox(sessionId, inboxKeys.toolResult(callId, text), text);
  const ack = await core.updateWithStart(toolResultUpdate, sessionId, {
    args: [{ callId, ref, ...(options.isError ? { isError: true } : {}) }],
  });
  await core.store.inbox.remove(sessionId, [ref.key]).catch(() => undefined);
  return ack;
}

/**
 * Refuses at once an answer to a call the log has never held. The workflow cannot tell while
 * a model step runs (the step logs its calls before its activity returns, so a caller
 * following the log may answer one the run has not heard of yet) and would hold the answer
 * until the step ends; every call a caller can know of is in the log by then.
 */
async function requireLoggedCall(core: ClientCore, sessionId: string, callId: string): Promise<void> {
  const { events } = await core.store.session(sessionId);
  if (!events.some((event) => isEventOfType(event, 'tool/call') && event.data.callId === callId))
    throw new SessionlogError(
      'UNKNOWN_CALL',
      `no tool call ${callId} was made in session ${sessionId}: answer one its log shows waiting (GET /v1/approvals?status=pending)`,
    );
}

/** The logged approval answer of `callId`, newest first (read from the store). */
async function loggedApproval(
  core: ClientCore,
  sessionId: string,
  callId: string,
): Promise<{ reason?: string } | undefined> {
  const { events } = await core.store.session(sessionId);
  for (let i = events.length - 1; i >= 0; i--) {
    const event = events[i]!;
    if (isEventOfType(event, 'tool/approval') && event.data.callId === callId) return event.data;
  }
  return undefined;
}

export async function pendingApprovals(
  core: ClientCore,
  options: { sessionId?: string } = {},
): Promise<PendingApproval[]> {
  const ids =
    options.sessionId !== undefined ? [options.sessionId] : (await core.store.list(core.scope)).map((h) => h.id);
  const now = Date.now();
  const pending: PendingApproval[] = [];
  for (const id of ids) {
    assertSessionId(id);
    let session: SessionView;
    try {
      session = await core.store.session(id);
    } catch (error) {
      if (options.sessionId === undefined && isSessionlogError(error) && UNREADABLE_LOG_CODES.has(error.code)) continue;
      throw error;
    }
    for (const call of session.turns.pending.values()) {
      if (!waitsForAnswer(call)) continue;
      const request = session.eventAt(call.request.seq);
      if (request?.type !== 'tool/approval-request') continue;
      pending.push({
        sessionId: id,
        callId: call.callId,
        tool: call.name,
        kind: call.request.kind,
        arguments: request.data.arguments,
        turn: call.turn,
        step: call.step,
        requestedAt: request.time,
        ageMs: Math.max(0, now - request.time),
        expiresAt: call.request.expiresAt,
      });
    }
  }
  return pending;
}
