/**
 * The turns view (served as `GET /v1/sessions/:id/turns`, drawn by the inspector): a pure fold
 * of a session's log into one summary per turn — the user's messages, each step's reply with
 * its streamed chunks folded in, tool calls with their results, retries, approvals and how the
 * turn ended — plus every model request's token usage and every context-pressure action
 * (compaction bracket, prune), which the inspector plots. Everything comes from logged data;
 * nothing is measured here.
 *
 * Events of types this build does not know are skipped.
 */
import type { BudgetBreach } from './budget.js';
import { isKnownEvent, type StoredEvent, type TurnEndReason } from './events.js';
import type { ContentBlock, TokenUsage } from './messages.js';

/**
 * Tool result text longer than this is cut in the view to its head and tail (a spill notice, at
 * the end, survives); the full output is in its artifact.
 */
export const TOOL_RESULT_VIEW_CHARS = 4_000;
const TOOL_RESULT_VIEW_TAIL_CHARS = 1_000;
export const TOOL_RESULT_VIEW_CUT = '\n[…]\n';

function cutForView(text: string): string {
  if (text.length <= TOOL_RESULT_VIEW_CHARS) return text;
  return (
    text.slice(0, TOOL_RESULT_VIEW_CHARS - TOOL_RESULT_VIEW_TAIL_CHARS) +
    TOOL_RESULT_VIEW_CUT +
    text.slice(-TOOL_RESULT_VIEW_TAIL_CHARS)
  );
}

export type TurnOutcomeKind = TurnEndReason['kind'];

/** Where the session stands, read from its log alone. */
export type SessionPhaseFromLog = 'idle' | 'running' | 'waiting-for-approval' | 'paused';

/** A spend cap the open turn reached (`budget/breach`, the log's last event): the turn waits for a raise. */
export type BudgetPauseView = BudgetBreach & { seq: number; before: 'model' | 'tools' };

export type ActivityView = {
  /** Number of events in the log (= the next seq). */
  events: number;
  /** Number of turns started. */
  turns: number;
  /** Time of the newest event (ms since the epoch), null for an empty log. */
  lastActivity: number | null;
  phase: SessionPhaseFromLog;
  /** The turn that is open, or null. */
  openTurn: number | null;
  /** Prompt tokens of the newest request that reported usage, or null. */
  lastRequestTokens: number | null;
  pendingApprovals: ApprovalRequestView[];
  /** Set when the phase is `paused`: the breach the open turn waits on. */
  pausedOn: BudgetPauseView | null;
};

export type UserMessageView = { seq: number; id: string; step: number; text: string; source: string };

export type ReplyView = {
  /** Seq of the `assistant/message`, or null while the reply is still streaming. */
  seq: number | null;
  text: string;
  reasoning: string;
  /** The `assistant/chunk` seqs folded into this reply. */
  chunkSeqs: number[];
  streaming: boolean;
  interrupted: boolean;
  finishReason: string | null;
  usage: TokenUsage | null;
};

export type ArtifactView = { locator: string; sessionId: string; name: string; bytes: number };

export type ToolResultView = {
  seq: number;
  /** The logged inline text (a spill preview when `spilled`), its middle cut beyond TOOL_RESULT_VIEW_CHARS. */
  text: string;
  /** Length of the logged inline text, in characters. */
  chars: number;
  isError: boolean;
  errorCode: string | null;
  /** Where the full output is stored, when the log names it. */
  artifact: ArtifactView | null;
  /** True when the logged text is a preview shorter than the stored output. */
  spilled: boolean;
};

export type ApprovalRequestView = {
  seq: number;
  turn: number | null;
  callId: string;
  tool: string;
  arguments: string;
  expiresAt: number;
  kind: 'approval' | 'external';
};
export type ApprovalDecisionView = { seq: number; decision: string; reason: string | null };

export type ToolCallView = {
  seq: number;
  callId: string;
  name: string;
  arguments: string;
  approvalRequest: ApprovalRequestView | null;
  approval: ApprovalDecisionView | null;
  result: ToolResultView | null;
};

export type RetryView = {
  seq: number;
  attempt: number;
  delayMs: number;
  failure: { code: string; message: string; status?: number };
};

export type StepView = {
  step: number;
  startSeq: number;
  endSeq: number | null;
  reply: ReplyView | null;
  toolCalls: ToolCallView[];
  retries: RetryView[];
};

export type TurnView = {
  turn: number;
  startSeq: number;
  endSeq: number | null;
  startedAt: number;
  endedAt: number | null;
  /** How the turn ended; null while it is open. */
  outcome: TurnOutcomeKind | null;
  error: { code: string; message: string } | null;
  userMessages: UserMessageView[];
  steps: StepView[];
};

/** One model request of an agent step, with the usage its reply logged. */
export type RequestView = {
  /** 1-based position among the session's requests. */
  index: number;
  /** Seq of the `assistant/message` that answered it. */
  seq: number;
  turn: number;
  step: number;
  time: number;
  /** input + cache read + cache write tokens, or null when no usage was logged. */
  promptTokens: number | null;
  outputTokens: number | null;
};

export type CompactionView = {
  kind: 'compaction';
  compactionId: string;
  trigger: 'pressure' | 'context-overflow' | 'manual';
  turn: number | null;
  startSeq: number;
  summarySeq: number | null;
  replacementSeq: number | null;
  endSeq: number | null;
  shadowedSeqs: number[];
  /** Tokens of the shadowed messages, as priced when the summary was made. */
  shadowedTokens: number | null;
  /** Output tokens the summarizer reported (the summary's size). */
  summaryTokens: number | null;
  error: string | null;
  /** How many requests came before the bracket (it sits between request N and N+1). */
  afterRequest: number;
  /** Prompt tokens of the last request before the bracket and of the first one after it. */
  tokensBefore: number | null;
  tokensAfter: number | null;
};

export type PruneView = {
  kind: 'prune';
  seq: number;
  /** The tool result that was shortened, and its shortened replacement. */
  shadowedSeq: number;
  replacementSeq: number | null;
  shadowedTokens: number;
  turn: number | null;
  afterRequest: number;
};

export type ContextActionView = CompactionView | PruneView;

export type TurnsView = {
  activity: ActivityView;
  turns: TurnView[];
  requests: RequestView[];
  contextActions: ContextActionView[];
};

const LOCATOR = /^artifact:([^/]+)\/([^/]+)$/;

function textOfBlocks(blocks: readonly ContentBlock[], type: 'text' | 'reasoning'): string {
  let out = '';
  for (const block of blocks) if (block.type === type) out += block.text;
  return out;
}

function promptTokensOf(usage: TokenUsage | undefined): number | null {
  if (!usage) return null;
  return usage.inputTokens + (usage.cacheReadTokens ?? 0) + (usage.cacheWriteTokens ?? 0);
}

function utf8Length(text: string): number {
  return new TextEncoder().encode(text).length;
}

function artifactOf(meta: unknown): ArtifactView | null {
  if (typeof meta !== 'object' || meta === null) return null;
  const { locator, bytes } = meta as { locator?: unknown; bytes?: unknown };
  if (typeof locator !== 'string' || typeof bytes !== 'number') return null;
  const match = LOCATOR.exec(locator);
  if (!match) return null;
  return { locator, sessionId: match[1]!, name: match[2]!, bytes };
}

/**
 * Folds `events` (a whole log, seq 0 first) into the turns view. `lastTurns` keeps only the
 * newest N turns in `turns` (the activity, requests and context actions always cover the log).
 */
export function foldTurns(events: readonly StoredEvent[], lastTurns?: number): TurnsView {
  const turns: TurnView[] = [];
  const requests: RequestView[] = [];
  const contextActions: ContextActionView[] = [];
  const compactions = new Map<string, CompactionView>();
  const calls = new Map<string, ToolCallView>();
  const approvalRequests = new Map<string, ApprovalRequestView>();
  const decided = new Set<string>();
  /** Closed brackets whose first following request is not logged yet. */
  let awaitingTokensAfter: CompactionView[] = [];
  let current: TurnView | undefined;
  let step: StepView | undefined;
  let lastRequestTokens: number | null = null;

  const stepFor = (number: number, seq: number): StepView => {
    if (step && step.step === number) return step;
    const found = current?.steps.find((s) => s.step === number);
    if (found) return found;
    // A step whose start is missing (a seeded or repaired log): open it where it is first seen.
    step = { step: number, startSeq: seq, endSeq: null, reply: null, toolCalls: [], retries: [] };
    current?.steps.push(step);
    return step;
  };
  const streamingReply = (target: StepView): ReplyView => {
    target.reply ??= {
      seq: null,
      text: '',
      reasoning: '',
      chunkSeqs: [],
      streaming: true,
      interrupted: false,
      finishReason: null,
      usage: null,
    };
    return target.reply;
  };

  for (const event of events) {
    if (!isKnownEvent(event)) continue;
    switch (event.type) {
      case 'turn/start': {
        const data = event.data;
        current = {
          turn: data.turn,
          startSeq: event.seq,
          endSeq: null,
          startedAt: event.time,
          endedAt: null,
          outcome: null,
          error: null,
          userMessages: [],
          steps: [],
        };
        step = undefined;
        turns.push(current);
        break;
      }
      case 'turn/end': {
        const data = event.data;
        if (current && current.turn === data.turn) {
          current.endSeq = event.seq;
          current.endedAt = event.time;
          current.outcome = data.reason.kind;
          if (data.reason.kind === 'error')
            current.error = { code: data.reason.error.code, message: data.reason.error.message };
          for (const s of current.steps) if (s.reply?.streaming) s.reply.streaming = false;
        }
        current = undefined;
        step = undefined;
        break;
      }
      case 'step/start': {
        const data = event.data;
        if (!current) break;
        step = { step: data.step, startSeq: event.seq, endSeq: null, reply: null, toolCalls: [], retries: [] };
        current.steps.push(step);
        break;
      }
      case 'step/end': {
        const data = event.data;
        if (!current) break;
        const ended = stepFor(data.step, event.seq);
        ended.endSeq = event.seq;
        if (ended.reply?.streaming) ended.reply.streaming = false;
        break;
      }
      case 'user/message': {
        const data = event.data;
        // Compaction checkpoints replace history; they are context actions, not things the user said.
        if (!current || event.surfaceOp !== 'append') break;
        current.userMessages.push({
          seq: event.seq,
          id: data.id,
          step: step?.step ?? 1,
          text: textOfBlocks(data.content, 'text'),
          source: data.source.kind === 'plugin' ? `plugin:${data.source.plugin}` : data.source.kind,
        });
        break;
      }
      case 'assistant/chunk': {
        const data = event.data;
        if (!current) break;
        const reply = streamingReply(stepFor(data.step, event.seq));
        reply.chunkSeqs.push(event.seq);
        if (data.chunk.kind === 'text-delta') reply.text += data.chunk.text;
        else if (data.chunk.kind === 'reasoning-delta') reply.reasoning += data.chunk.text;
        break;
      }
      case 'assistant/message': {
        const data = event.data;
        // A caller's hide (session/hide.ts) is no model request.
        if (data.hides) break;
        const promptTokens = promptTokensOf(data.usage);
        if (promptTokens !== null) lastRequestTokens = promptTokens;
        requests.push({
          index: requests.length + 1,
          seq: event.seq,
          turn: data.turn,
          step: data.step,
          time: event.time,
          promptTokens,
          outputTokens: data.usage?.outputTokens ?? null,
        });
        for (const compaction of awaitingTokensAfter) compaction.tokensAfter = promptTokens;
        awaitingTokensAfter = [];
        if (!current) break;
        const reply = streamingReply(stepFor(data.step, event.seq));
        reply.seq = event.seq;
        reply.text = textOfBlocks(data.message.content, 'text');
        reply.reasoning = textOfBlocks(data.message.content, 'reasoning');
        reply.streaming = false;
        reply.interrupted = data.interrupted === true;
        reply.finishReason = data.finishReason ?? null;
        reply.usage = data.usage ?? null;
        break;
      }
      case 'tool/call': {
        const data = event.data;
        const call: ToolCallView = {
          seq: event.seq,
          callId: data.callId,
          name: data.name,
          arguments: data.arguments,
          approvalRequest: null,
          approval: null,
          result: null,
        };
        calls.set(data.callId, call);
        if (current) stepFor(data.step, event.seq).toolCalls.push(call);
        break;
      }
      case 'tool/result': {
        const data = event.data;
        // A replacement (prune) rewrites what the model sees; the timeline keeps the original.
        if (event.surfaceOp !== 'append') break;
        const block = data.message.content[0];
        const text = textOfBlocks(block.content, 'text');
        const artifact = artifactOf(data.meta);
        const result: ToolResultView = {
          seq: event.seq,
          text: cutForView(text),
          chars: text.length,
          isError: block.isError === true,
          errorCode: data.error?.code ?? null,
          artifact,
          spilled: artifact !== null && utf8Length(text) < artifact.bytes,
        };
        const callId = data.message.source.callId;
        decided.add(callId);
        const call = calls.get(callId);
        if (call) call.result = result;
        else if (current) {
          // A result whose call was never logged (crash repair before the call was recorded).
          stepFor(data.step, event.seq).toolCalls.push({
            seq: event.seq,
            callId,
            name: '',
            arguments: '',
            approvalRequest: null,
            approval: null,
            result,
          });
        }
        break;
      }
      case 'llm/retry': {
        const data = event.data;
        if (current)
          stepFor(data.step, event.seq).retries.push({
            seq: event.seq,
            attempt: data.attempt,
            delayMs: data.delayMs,
            failure: data.failure,
          });
        break;
      }
      case 'compaction/start': {
        const data = event.data;
        const compaction: CompactionView = {
          kind: 'compaction',
          compactionId: data.compactionId,
          trigger: data.trigger,
          turn: data.turn,
          startSeq: event.seq,
          summarySeq: null,
          replacementSeq: null,
          endSeq: null,
          shadowedSeqs: [],
          shadowedTokens: null,
          summaryTokens: null,
          error: null,
          afterRequest: requests.length,
          tokensBefore: requests.at(-1)?.promptTokens ?? null,
          tokensAfter: null,
        };
        compactions.set(data.compactionId, compaction);
        contextActions.push(compaction);
        break;
      }
      case 'compaction/summary': {
        const data = event.data;
        const compaction = compactions.get(data.compactionId);
        if (!compaction) break;
        compaction.summarySeq = event.seq;
        compaction.shadowedSeqs = [...data.shadowedSeqs];
        compaction.shadowedTokens = data.shadowedTokenCount;
        compaction.summaryTokens = data.usage?.outputTokens ?? null;
        // The replacement checkpoint is appended right after the summary, in the same batch.
        const next = events[event.seq + 1];
        if (next?.type === 'user/message' && next.surfaceOp !== undefined && next.surfaceOp !== 'append')
          compaction.replacementSeq = next.seq;
        break;
      }
      case 'compaction/end': {
        const data = event.data;
        const compaction = compactions.get(data.compactionId);
        if (!compaction) break;
        compaction.endSeq = event.seq;
        compaction.error = data.error ?? null;
        awaitingTokensAfter.push(compaction);
        break;
      }
      case 'compaction/prune': {
        const data = event.data;
        const next = events[event.seq + 1];
        contextActions.push({
          kind: 'prune',
          seq: event.seq,
          shadowedSeq: data.shadowedSeqs[0] ?? data.shadowedRange.start,
          replacementSeq: next?.type === 'tool/result' && next.surfaceOp !== 'append' ? next.seq : null,
          shadowedTokens: data.shadowedTokenCount,
          turn: current?.turn ?? null,
          afterRequest: requests.length,
        });
        break;
      }
      case 'tool/approval-request': {
        const data = event.data;
        const request: ApprovalRequestView = {
          seq: event.seq,
          turn: current?.turn ?? null,
          callId: data.callId,
          tool: data.tool,
          arguments: data.arguments,
          expiresAt: data.expiresAt,
          kind: data.kind,
        };
        approvalRequests.set(data.callId, request);
        const call = calls.get(data.callId);
        if (call) call.approvalRequest = request;
        break;
      }
      case 'tool/approval': {
        const data = event.data;
        decided.add(data.callId);
        const call = calls.get(data.callId);
        if (call) call.approval = { seq: event.seq, decision: data.decision, reason: data.reason ?? null };
        break;
      }
      default:
        break;
    }
  }

  const pendingApprovals = [...approvalRequests.values()].filter((r) => !decided.has(r.callId));
  const open = current !== undefined;
  const last = events.at(-1);
  // Nothing is logged while a turn waits on its budget: a breach that is the log's last word holds it.
  let pausedOn: BudgetPauseView | null = null;
  if (open && last && isKnownEvent(last) && last.type === 'budget/breach') {
    const { turn: _turn, step: _step, ...breach } = last.data;
    pausedOn = { ...breach, seq: last.seq };
  }
  const activity: ActivityView = {
    events: events.length,
    turns: turns.length,
    lastActivity: last ? last.time : null,
    phase: pendingApprovals.length > 0 ? 'waiting-for-approval' : pausedOn ? 'paused' : open ? 'running' : 'idle',
    openTurn: current?.turn ?? null,
    lastRequestTokens,
    pendingApprovals,
    pausedOn,
  };
  const shown = lastTurns === undefined ? turns : lastTurns === 0 ? [] : turns.slice(-lastTurns);
  return { activity, turns: shown, requests, contextActions };
}
