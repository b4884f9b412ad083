/**
 * Calls that wait for an answer (DESIGN §5.1): after a reply with tool calls, the calls the
 * policy gates are logged as `tool/approval-request`; answers are logged as they arrive —
 * approvals as `tool/approval` (and `tool/allow` when the person allows the tool for the rest
 * of the session), external results stored whole as artifacts and logged with their answer
 * (`tool/approval` with `result`), then as `tool/result` with origin `external` by the step's
 * results batch.
 */
import { parseToolCallArguments } from '../../model/tool-arguments.js';
import { parseApprovalBody, parseToolResultBody, readInboxEntry } from '../../persistence/index.js';
import { scrubSecrets, type NewEvent, type SessionView } from '../../session/index.js';
import { gateOf } from '../../tools/approval.js';
import type { EngineDeps } from '../deps.js';
import { LogWriter } from '../log-writer.js';
import { stepOps, type StepKey } from '../ops.js';
import type {
  CallAnswer,
  RecordAnswersInput,
  RecordAnswersResult,
  ToolCallRef,
  ToolRunRef,
  WaitingStep,
} from '../types.js';

/** A day: how long a call waits for its answer when the workflow gives no timeout. */
const DEFAULT_ANSWER_TIMEOUT_MS = 24 * 60 * 60_000;

/**
 * Logs an approval request for every call of the step's reply that waits for an answer, once
 * (one batch), and returns the calls annotated with their gates.
 */
export async function requestAnswers(
  deps: EngineDeps,
  writer: LogWriter,
  key: StepKey,
  calls: ToolCallRef[],
  timeoutMs: number | undefined,
): Promise<ToolCallRef[]> {
  const op = stepOps.approvalRequests(key);
  if (writer.session.eventsOfOp(op, writer.fromSeq).length === 0) {
    const expiresAt = deps.now() + (timeoutMs ?? DEFAULT_ANSWER_TIMEOUT_MS);
    const events: NewEvent[] = [];
    for (const call of calls) {
      const logged = writer.session.eventAt(call.callSeq);
      if (logged?.type !== 'tool/call') continue;
      const parsed = parseToolCallArguments(call.name, logged.data.arguments);
      // Unparsable arguments never run: the tool step answers them with an error, no approval needed.
      const gate = !parsed.ok
        ? undefined
        : isTurnTool(writer.session, call.name)
          ? 'external'
          : gateOf(deps.tools.get(call.name), parsed.value, deps.approval, writer.session.allowedTools);
      if (!gate) continue;
      events.push({
        type: 'tool/approval-request',
        time: deps.now(),
        data: {
          turn: key.turn,
          step: key.step,
          callId: call.callId,
          tool: call.name,
          arguments: logged.data.arguments,
          expiresAt,
          kind: gate,
        },
      });
    }
    if (events.length > 0) await writer.append(events, op);
  }
  return annotate(writer.session, calls);
}

/** Whether `name` is one of the tools the caller gave the open turn (its calls wait for the caller's result). */
export function isTurnTool(session: SessionView, name: string): boolean {
  return session.turns.turnTools?.some((tool) => tool.name === name) ?? false;
}

/** The step's calls with the gates, expiries and answers the log holds for them. */
export function annotate(session: SessionView, calls: ToolCallRef[]): ToolCallRef[] {
  return calls.map((call) => {
    const pending = session.turns.pending.get(call.callId);
    if (!pending?.request) return call;
    return {
      ...call,
      gate: pending.request.kind,
      expiresAt: pending.request.expiresAt,
      ...(pending.answer
        ? {
            answered: pending.answer.decision,
            ...(pending.answer.reason !== undefined ? { reason: pending.answer.reason } : {}),
            ...(pending.answer.result !== undefined ? { result: pending.answer.result } : {}),
          }
        : {}),
    };
  });
}

/** The step the log shows waiting for answers, if the open step has a call that waits for one. */
export function waitingStep(session: SessionView): WaitingStep | undefined {
  const turns = session.turns;
  if (turns.openTurn === undefined || turns.openStep === undefined) return undefined;
  const pending = [...turns.pending.values()].filter((p) => p.callSeq !== undefined);
  if (!pending.some((p) => p.request !== undefined)) return undefined;
  const calls = pending.map((p) => ({ callId: p.callId, name: p.name, callSeq: p.callSeq! }));
  return { turn: turns.openTurn, step: turns.openStep, calls: annotate(session, calls) };
}

/**
 * Logs answers that arrived (each once, under its call's op key); an external result is stored
 * whole as an artifact of the session and logged with its answer. An answer to a call that is
 * not waiting, or is answered already, is skipped: the first answer counts. Returns the stored
 * results of the external calls answered, from the log (so a retried call returns the same).
 */
export async function recordAnswers(deps: EngineDeps, input: RecordAnswersInput): Promise<RecordAnswersResult> {
  const writer = await LogWriter.open(deps.store, input.sessionId, input.runId, input.knownHead);
  const key = { runId: input.runId, turn: input.turn, step: input.step };
  const external: ToolRunRef[] = [];
  for (const answer of input.answers) {
    const pending = writer.session.turns.pending.get(answer.callId);
    if (!pending?.request || pending.callSeq === undefined) continue;
    if (!pending.answer) {
      // The answer's inbox entry goes with the batch that logs it.
      await writer.append(
        await answerEvents(deps, input, pending.name, answer),
        stepOps.answer(key, answer.callId),
        answer.ref ? [answer.ref.key] : [],
      );
    }
    const result = writer.session.turns.pending.get(answer.callId)?.answer?.result;
    if (answer.kind === 'external' && result)
      external.push({ callId: answer.callId, callSeq: pending.callSeq, ...result, external: true });
  }
  return { headSeq: writer.session.nextSeq, external };
}

/** The events of one answer: `tool/approval` (with an external call's stored result), and `tool/allow` when asked. */
async function answerEvents(
  deps: EngineDeps,
  input: RecordAnswersInput,
  tool: string,
  answer: CallAnswer,
): Promise<NewEvent[]> {
  const turnStep = { turn: input.turn, step: input.step, callId: answer.callId };
  if (answer.kind === 'external') {
    const { output, by } = answer.ref
      ? await readInboxEntry(deps.store.inbox, input.sessionId, answer.ref, parseToolResultBody)
      : { output: answer.output ?? '', by: answer.by };
    const ref = await deps.store.artifacts.put({
      sessionId: input.sessionId,
      name: `${tool}-${answer.callId}.txt`,
      content: scrubSecrets(output),
    });
    const result = { locator: ref.locator, bytes: ref.bytes, isError: answer.isError };
    return [
      {
        type: 'tool/approval',
        time: deps.now(),
        data: { ...turnStep, decision: 'approve', result, ...(by !== undefined ? { by } : {}) },
      },
    ];
  }
  const {
    reason,
    arguments: edited,
    by,
  } = answer.ref ? await readInboxEntry(deps.store.inbox, input.sessionId, answer.ref, parseApprovalBody) : answer;
  const events: NewEvent[] = [
    {
      type: 'tool/approval',
      time: deps.now(),
      data: {
        ...turnStep,
        decision: answer.decision,
        ...(reason !== undefined ? { reason } : {}),
        ...(edited !== undefined ? { arguments: edited } : {}),
        ...(by !== undefined ? { by } : {}),
      },
    },
  ];
  if (answer.allowForSession && answer.decision === 'approve') {
    events.push({
      type: 'tool/allow',
      time: deps.now(),
      data: { tool, ...(by !== undefined ? { by } : {}) },
    });
  }
  return events;
}
