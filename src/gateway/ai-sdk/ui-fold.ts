/**
 * One turn as the AI SDK's UI message stream (issue 25), folded from the session's log: the
 * chunks `useChat`'s `DefaultChatTransport` reads (`start`, `start-step`, text and reasoning
 * parts, tool input and output parts, tool approval requests, `finish-step`, `finish` with the
 * usage as message metadata, errors as `error` parts). The model's text comes through the
 * turn stream's output assembler (turn-stream/output-items.ts), so a model call retried mid-stream never
 * sends text twice. Tools the worker runs are `providerExecuted` parts (their output comes from
 * the server; a resent message's such parts are not the caller's); tools the caller runs
 * (external tools) end the stream with their input, as approvals do, and the next request
 * carries their output or the answer.
 */
import {
  describeBreach,
  isKnownEvent,
  textOf,
  type StoredEvent,
  type TokenUsage,
  type TurnEndReason,
} from '../../session/index.js';
import type { AnswerFold } from '../turn-stream/follow.js';
import { itemTag } from '../turn-stream/ids.js';
import { OutputAssembler, type UnsequencedEvent } from '../turn-stream/output-items.js';
import { addTokenUsage } from '../turn-stream/usage.js';
import { MessageAnchor } from '../answer-anchor.js';

/** One chunk of the UI message stream (`data: <chunk JSON>`). */
export type UiChunk = { type: string } & Record<string, unknown>;

/**
 * Where the answer starts: the turn the user message `messageId` starts, or (a continuation
 * after an approval answer or a caller's tool output) the open turn `turn`, from the first
 * event fed.
 */
export type UiAnchor = { kind: 'message'; messageId: string } | { kind: 'turn'; turn: number };

type ToolState = { name: string; arguments: string; shown: boolean; denied: boolean };

function inputOf(args: string): unknown {
  try {
    return JSON.parse(args) as unknown;
  } catch {
    return args;
  }
}

/** The AI SDK's usage as message metadata. */
function usageMetadata(usage: TokenUsage | undefined) {
  if (!usage) return undefined;
  const cached = usage.cacheReadTokens ?? 0;
  const input = usage.inputTokens + cached + (usage.cacheWriteTokens ?? 0);
  return {
    inputTokens: input,
    outputTokens: usage.outputTokens,
    totalTokens: input + usage.outputTokens,
    cachedInputTokens: cached,
    reasoningTokens: usage.reasoningTokens ?? 0,
  };
}

function endOf(reason: TurnEndReason): UiChunk[] {
  switch (reason.kind) {
    case 'completed':
      return [{ type: 'finish', finishReason: 'stop' }];
    case 'max-tokens':
      return [{ type: 'finish', finishReason: 'length' }];
    case 'max-steps':
      return [{ type: 'finish', finishReason: 'other' }];
    case 'aborted':
      return [{ type: 'abort', reason: 'the turn was cancelled' }];
    case 'error':
      return [
        // errorText is the one field the UI stream has: the code leads it, as the log names it.
        { type: 'error', errorText: `${reason.error.code}: ${reason.error.message}` },
        { type: 'finish', finishReason: 'error' },
      ];
    case 'interrupted':
      return [
        {
          type: 'error',
          errorText:
            'the turn was interrupted (its workflow run ended before the turn did) and was closed by crash repair; send the message again',
        },
        { type: 'finish', finishReason: 'error' },
      ];
  }
}

export class UiMessageFold implements AnswerFold<UiChunk> {
  private progress: 'queued' | 'running' | 'done' = 'queued';
  /** Finds the turn of an answer begun by a message. */
  private readonly messageAnchor: MessageAnchor | undefined;
  /** A step of the open turn has started and not ended (the anchor message is logged inside step 1). */
  private stepOpen = false;
  private turn: number | undefined;
  private readonly assembler: OutputAssembler;
  private readonly tools = new Map<string, ToolState>();
  /** The turn asked the caller (an approval, an external tool): the stream ends after that batch. */
  private waiting: { op: string | undefined } | undefined;
  private usage: TokenUsage | undefined;

  constructor(readonly context: { sessionId: string; anchor: UiAnchor }) {
    this.assembler = new OutputAssembler(itemTag(context.sessionId));
    this.messageAnchor = context.anchor.kind === 'message' ? new MessageAnchor(context.anchor.messageId) : undefined;
  }

  state(): 'queued' | 'running' | 'done' {
    return this.progress;
  }

  awaitingCaller(): boolean {
    return this.waiting !== undefined && this.progress !== 'done';
  }

  flush(): UiChunk[] {
    if (!this.waiting || this.progress === 'done') return [];
    this.progress = 'done';
    return [{ type: 'finish', finishReason: 'tool-calls', ...this.metadata() }];
  }

  push(event: StoredEvent): UiChunk[] {
    if (this.progress === 'done') return [];
    if (this.waiting && (event.op === undefined || event.op !== this.waiting.op)) return this.flush();
    if (!isKnownEvent(event)) return [];
    const out: UiChunk[] = [];
    const anchor = this.context.anchor;
    if (this.progress === 'queued' && anchor.kind === 'turn') this.begin(anchor.turn, out);
    const answering = this.messageAnchor?.push(event);
    if (answering !== undefined && this.progress === 'queued') this.begin(answering, out);
    const ours = (turn: number) => this.progress === 'running' && turn === this.turn;
    switch (event.type) {
      case 'step/start':
        this.stepOpen = true;
        if (ours(event.data.turn)) out.push({ type: 'start-step' });
        break;
      case 'assistant/chunk':
        if (ours(event.data.turn)) this.text(this.assembler.push(event), out);
        break;
      case 'assistant/message':
        if (ours(event.data.turn) && !event.data.hides) {
          this.text(this.assembler.push(event), out);
          if (event.data.usage) this.usage = addTokenUsage(this.usage, event.data.usage);
          for (const block of event.data.message.content)
            if (block.type === 'tool-call') this.noteCall(block.id, block.name, block.arguments);
        }
        break;
      case 'tool/call':
        if (ours(event.data.turn)) this.noteCall(event.data.callId, event.data.name, event.data.arguments);
        break;
      case 'tool/approval-request': {
        const { turn, callId, tool, arguments: args, kind } = event.data;
        if (!ours(turn)) break;
        this.noteCall(callId, tool, args);
        const state = this.toolState(callId);
        if (kind === 'external') {
          // The caller runs it: its input, and the next request carries its output.
          out.push({ type: 'tool-input-available', toolCallId: callId, toolName: state.name, input: inputOf(args) });
          state.shown = true;
        } else {
          this.showInput(callId, state, out);
          out.push({ type: 'tool-approval-request', approvalId: callId, toolCallId: callId });
        }
        this.waiting = { op: event.op };
        break;
      }
      case 'tool/approval': {
        const { turn, callId, decision } = event.data;
        if (!ours(turn) || decision === 'approve') break;
        const state = this.toolState(callId);
        state.denied = true;
        this.showInput(callId, state, out);
        out.push({ type: 'tool-output-denied', toolCallId: callId });
        break;
      }
      case 'tool/result': {
        if (!ours(event.data.turn) || event.surfaceOp !== 'append') break;
        // The caller's own result: it has it already.
        if (event.data.origin === 'external') break;
        const callId = event.data.message.source.callId;
        const state = this.toolState(callId);
        if (state.denied) break;
        this.showInput(callId, state, out);
        const output = textOf(event.data.message.content[0].content);
        out.push(
          event.data.error
            ? { type: 'tool-output-error', toolCallId: callId, errorText: output, providerExecuted: true }
            : { type: 'tool-output-available', toolCallId: callId, output, providerExecuted: true },
        );
        break;
      }
      case 'budget/breach':
        // The turn pauses on its spend cap: the message ends here with the breach as a data
        // part; raised, the rest of the turn reaches the chat with the next request's history.
        if (ours(event.data.turn)) {
          const { turn: _turn, step: _step, ...breach } = event.data;
          this.text(this.assembler.push(event), out);
          if (this.stepOpen) out.push({ type: 'finish-step' });
          out.push({
            type: 'data-budget',
            id: `budget-${event.seq}`,
            data: { paused: 'budget', code: 'budget_exceeded', message: describeBreach(breach), ...breach },
          });
          this.progress = 'done';
          out.push({ type: 'finish', finishReason: 'other', ...this.metadata() });
        }
        break;
      case 'step/end':
        this.stepOpen = false;
        if (ours(event.data.turn)) {
          this.text(this.assembler.push(event), out);
          out.push({ type: 'finish-step' });
        }
        break;
      case 'turn/end':
        if (ours(event.data.turn)) {
          this.text(this.assembler.push(event), out);
          this.progress = 'done';
          const end = endOf(event.data.reason);
          const last = end.at(-1)!;
          if (last.type === 'finish') Object.assign(last, this.metadata());
          out.push(...end);
        }
        break;
      default:
        break;
    }
    return out;
  }

  private begin(turn: number, out: UiChunk[]): void {
    this.turn = turn;
    this.progress = 'running';
    out.push({
      type: 'start',
      messageId: `${this.context.sessionId}.t${turn}`,
      messageMetadata: { sessionId: this.context.sessionId, turn },
    });
    // Begun by its message inside the step it opens: that step's start.
    if (this.stepOpen && this.context.anchor.kind === 'message') out.push({ type: 'start-step' });
  }

  private metadata(): { messageMetadata: Record<string, unknown> } {
    const usage = usageMetadata(this.usage);
    return { messageMetadata: { sessionId: this.context.sessionId, turn: this.turn, ...(usage ? { usage } : {}) } };
  }

  /** A call of this turn, as first seen (its input not shown yet). */
  private noteCall(callId: string, name: string, args: string): void {
    if (!this.tools.has(callId)) this.tools.set(callId, { name, arguments: args, shown: false, denied: false });
  }

  /**
   * What this fold knows of a call. One it never saw called (a continuation after an approval
   * answer starts mid-turn) was shown to the client by the stream that asked about it.
   */
  private toolState(callId: string): ToolState {
    let state = this.tools.get(callId);
    if (!state) {
      state = { name: '', arguments: '{}', shown: true, denied: false };
      this.tools.set(callId, state);
    }
    return state;
  }

  /** A tool the worker runs: its input part, once. */
  private showInput(callId: string, state: ToolState, out: UiChunk[]): void {
    if (state.shown) return;
    state.shown = true;
    out.push({
      type: 'tool-input-available',
      toolCallId: callId,
      toolName: state.name,
      input: inputOf(state.arguments),
      providerExecuted: true,
    });
  }

  /** The assembler's text and reasoning events as UI text and reasoning parts. */
  private text(events: readonly UnsequencedEvent[], out: UiChunk[]): void {
    for (const event of events) {
      switch (event.type) {
        case 'response.output_item.added':
          if (event.item.type === 'message') out.push({ type: 'text-start', id: event.item.id });
          else if (event.item.type === 'reasoning') out.push({ type: 'reasoning-start', id: event.item.id });
          break;
        case 'response.output_text.delta':
          out.push({ type: 'text-delta', id: event.item_id, delta: event.delta });
          break;
        case 'response.reasoning_text.delta':
          out.push({ type: 'reasoning-delta', id: event.item_id, delta: event.delta });
          break;
        case 'response.output_item.done':
          if (event.item.type === 'message') out.push({ type: 'text-end', id: event.item.id });
          else if (event.item.type === 'reasoning') out.push({ type: 'reasoning-end', id: event.item.id! });
          break;
        default:
          break;
      }
    }
  }
}

/**
 * What a client that reconnects missed, coalesced (issue 25): the deltas of one text or
 * reasoning part become one delta, so a resumed stream catches up at once rather than at
 * typing speed.
 */
export function coalesceChunks(chunks: readonly UiChunk[]): UiChunk[] {
  const out: UiChunk[] = [];
  for (const chunk of chunks) {
    const last = out.at(-1);
    if (
      last &&
      (chunk.type === 'text-delta' || chunk.type === 'reasoning-delta') &&
      last.type === chunk.type &&
      last.id === chunk.id
    ) {
      out[out.length - 1] = { ...last, delta: `${last.delta as string}${chunk.delta as string}` };
    } else out.push(chunk);
  }
  return out;
}
