/**
 * One run as the LangGraph Agent Server streams it (issue 25), folded from the session's log.
 * A run is the part of a turn that one request drove: from its input message (or, for a run
 * that resumed an interrupt, from the approval answers it logged) to the turn's end or the next
 * batch of tool calls that wait for the caller, which the run reports as an interrupt.
 *
 * The fold is fed the whole log from seq 0 (it keeps the surface, so `values` frames carry the
 * thread's state as of each point) and produces, per requested stream mode:
 * - `values`: the state `{messages}` when the run starts, after each model reply and each
 *   step's tool results, and with `__interrupt__` when it stops to ask;
 * - `updates`: `{agent: {messages: [ai]}}`, `{tools: {messages: [tool]}}`, `{__interrupt__: [...]}`;
 * - `messages-tuple` (event `messages`): the reply's text and reasoning as `AIMessageChunk`s
 *   (through the Responses API's assembler, so a retried model call never repeats text), the
 *   tool calls when the reply is logged, and each tool message, each with its metadata;
 * - `custom`: every log event of the run, as the native event stream sends it.
 * Each frame's SSE id is `<seq>-<n>` (the log event it came from and its place among that
 * event's frames), so a rejoin with `Last-Event-ID` resumes exactly.
 */
import {
  SurfaceFold,
  isKnownEvent,
  type SessionEvent,
  type StoredEvent,
  type TurnEndReason,
} from '../../session/index.js';
import type { AnswerFold } from '../turn-stream/follow.js';
import { itemTag } from '../turn-stream/ids.js';
import { OutputAssembler, type UnsequencedEvent } from '../turn-stream/output-items.js';
import { MessageAnchor } from '../answer-anchor.js';
import { aiMessage, aiMessageId, argsOf, stateMessageOf, usageMetadataOf, type LangChainMessage } from './messages.js';

/** One SSE frame of a run's stream. */
export type RunFrame = { event: string; data: unknown; id?: string };

export const STREAM_MODES = ['values', 'updates', 'messages-tuple', 'custom'] as const;
export type StreamMode = (typeof STREAM_MODES)[number];

/** Where a run starts: the turn its first input message enters, or the approval answers a resume logged (from `fromSeq`). */
export type RunAnchor = { kind: 'message'; messageId: string } | { kind: 'resume'; turn: number; fromSeq: number };

/** An interrupt as LangGraph reports it: the calls of one batch, in LangChain's human-in-the-loop request shape. */
export type ApprovalInterrupt = {
  id: string;
  value: {
    action_requests: Array<{ id: string; name: string; args: unknown; description: string }>;
    review_configs: Array<{ action_name: string; allowed_decisions: string[] }>;
  };
};

/** A spend cap the turn reached (`budget/breach`): resumed with `{budget: {...}}` (new caps, or null for none). */
export type BudgetInterrupt = {
  id: string;
  value: {
    type: 'budget';
    cap: string;
    scope: 'turn' | 'total' | 'tenant';
    used: number;
    limit: number;
    tool?: string;
    description: string;
  };
};

export type RunInterrupt = ApprovalInterrupt | BudgetInterrupt;

export function isBudgetInterrupt(interrupt: RunInterrupt): interrupt is BudgetInterrupt {
  return 'type' in interrupt.value && interrupt.value.type === 'budget';
}

/** The interrupt a budget breach makes (its id names the breach's seq). */
export function budgetInterruptOf(event: SessionEvent<'budget/breach'>): BudgetInterrupt {
  const { cap, scope, used, limit, tool } = event.data;
  return {
    id: `budget-${event.seq}`,
    value: {
      type: 'budget',
      cap,
      scope,
      used,
      limit,
      ...(tool !== undefined ? { tool } : {}),
      description:
        scope === 'tenant'
          ? `The tenant's ${cap} cap of ${limit} was reached (${used} used by its sessions): the run goes on when the operator raises it (SESSIONLOG_TENANT_CAPS), or cancel the run`
          : `The ${scope} ${cap} cap of ${limit} was reached (${used} used${tool !== undefined ? ` by repeated ${tool} calls` : ''}): resume with {"budget": {...}} to raise it, or cancel the run`,
    },
  };
}

/** The interrupt a batch of approval requests makes. */
export function interruptOf(
  requests: ReadonlyArray<{ callId: string; tool: string; arguments: string; kind: 'approval' | 'external' }>,
): ApprovalInterrupt {
  return {
    id: requests[0]!.callId,
    value: {
      action_requests: requests.map((r) => ({
        id: r.callId,
        name: r.tool,
        args: argsOf(r.arguments),
        description:
          r.kind === 'approval'
            ? `Tool ${r.tool} needs approval before it runs`
            : `Tool ${r.tool} is run by the caller: resume with its output`,
      })),
      review_configs: requests.map((r) => ({
        action_name: r.tool,
        allowed_decisions: r.kind === 'approval' ? ['approve', 'edit', 'reject'] : ['respond'],
      })),
    },
  };
}

/** What a turn's end says of a run that reached it: its status, and the error frame a failure sends. */
export function runEndOf(reason: TurnEndReason): {
  status: 'success' | 'error' | 'interrupted';
  error?: { error: string; message: string };
} {
  switch (reason.kind) {
    case 'completed':
    case 'max-tokens':
    case 'max-steps':
      return { status: 'success' };
    case 'aborted':
      return { status: 'interrupted' };
    case 'error':
      return { status: 'error', error: { error: reason.error.code, message: reason.error.message } };
    case 'interrupted':
      return {
        status: 'error',
        error: {
          error: 'TURN_INTERRUPTED',
          message:
            'the turn was interrupted (its workflow run ended before the turn did) and was closed by crash repair; run it again',
        },
      };
  }
}

export class RunFold implements AnswerFold<RunFrame> {
  private progress: 'queued' | 'running' | 'done' = 'queued';
  private turn: number | undefined;
  /** Finds the turn of a run begun by a message. */
  private readonly messageAnchor: MessageAnchor | undefined;
  private readonly tag: string;
  private readonly assembler: OutputAssembler;
  private readonly surface = new SurfaceFold();
  private readonly events: StoredEvent[] = [];
  private readonly names = new Map<string, string>();
  private readonly modes: ReadonlySet<StreamMode>;
  /** The state changed since the last `values` frame. */
  private dirty = false;
  private waiting: { op: string | undefined; requests: Parameters<typeof interruptOf>[0][number][] } | undefined;
  private frameSeq = -1;
  private frameIndex = 0;
  /** How the run ended (for `runs.wait` and webhooks). */
  outcome:
    | {
        status: 'success' | 'error' | 'interrupted';
        error?: { error: string; message: string };
        interrupt?: RunInterrupt;
      }
    | undefined;

  constructor(readonly context: { sessionId: string; runId: string; anchor: RunAnchor; modes: readonly StreamMode[] }) {
    this.tag = itemTag(context.sessionId);
    this.assembler = new OutputAssembler(this.tag);
    this.modes = new Set(context.modes);
    this.messageAnchor = context.anchor.kind === 'message' ? new MessageAnchor(context.anchor.messageId) : undefined;
  }

  state(): 'queued' | 'running' | 'done' {
    return this.progress;
  }

  awaitingCaller(): boolean {
    return this.waiting !== undefined && this.progress !== 'done';
  }

  /** The thread's messages as of the last event fed. */
  messages(): LangChainMessage[] {
    const out: LangChainMessage[] = [];
    for (const seq of this.surface.nodeList) {
      const message = stateMessageOf(this.events[seq]!, this.tag, this.assembler, this.names);
      if (message) out.push(message);
    }
    return out;
  }

  flush(): RunFrame[] {
    if (!this.waiting || this.progress === 'done') return [];
    const interrupt = interruptOf(this.waiting.requests);
    const out: RunFrame[] = [];
    this.progress = 'done';
    this.outcome = { status: 'interrupted', interrupt };
    if (this.modes.has('updates')) out.push({ event: 'updates', data: { __interrupt__: [interrupt] } });
    if (this.modes.has('values'))
      out.push({ event: 'values', data: { messages: this.messages(), __interrupt__: [interrupt] } });
    return this.framed(out, this.events.length - 1);
  }

  push(event: StoredEvent): RunFrame[] {
    if (this.progress === 'done') return [];
    if (this.waiting && (event.op === undefined || event.op !== this.waiting.op)) return this.flush();
    this.events[event.seq] = event;
    if (!isKnownEvent(event)) return [];
    const out: RunFrame[] = [];
    const anchor = this.context.anchor;
    const surfaceChanged = this.surface.apply(event, (seq) => this.events[seq]) !== undefined;
    const assembled = this.assembler.push(event);
    if (event.type === 'tool/call') this.names.set(event.data.callId, event.data.name);
    if (this.progress === 'queued' && anchor.kind === 'resume' && event.seq >= anchor.fromSeq)
      this.begin(anchor.turn, out);
    const answering = this.messageAnchor?.push(event);
    if (answering !== undefined && this.progress === 'queued') this.begin(answering, out);
    if (surfaceChanged && this.progress === 'running') this.dirty = true;
    const ours = (turn: number) => this.progress === 'running' && turn === this.turn;
    if (this.progress === 'running' && this.modes.has('custom')) out.push({ event: 'custom', data: event });
    switch (event.type) {
      case 'assistant/chunk':
        if (ours(event.data.turn)) this.chunks(assembled, event.data.step, out);
        break;
      case 'assistant/message': {
        const { turn, step, message, usage, finishReason, hides } = event.data;
        if (!ours(turn) || hides) break;
        this.chunks(assembled, step, out);
        const id = aiMessageId(this.tag, turn, step, this.assembler.itemsOfMessage.get(event.seq) ?? {});
        const ai = aiMessage(id, message, { usage, finishReason });
        const calls = ai.tool_calls ?? [];
        if (this.modes.has('messages-tuple') && (calls.length > 0 || usage)) {
          const usageMetadata = usageMetadataOf(usage);
          out.push({
            event: 'messages',
            data: [
              {
                type: 'AIMessageChunk',
                id,
                content: '',
                additional_kwargs: {},
                response_metadata: ai.response_metadata,
                tool_call_chunks: calls.map((call, index) => ({
                  id: call.id,
                  name: call.name,
                  args: JSON.stringify(call.args),
                  index,
                  type: 'tool_call_chunk',
                })),
                tool_calls: calls,
                invalid_tool_calls: [],
                ...(usageMetadata ? { usage_metadata: usageMetadata } : {}),
              },
              this.meta('agent', step),
            ],
          });
        }
        if (message.content.length > 0) {
          if (this.modes.has('updates')) out.push({ event: 'updates', data: { agent: { messages: [ai] } } });
          this.values(out);
        }
        break;
      }
      case 'tool/result': {
        if (!ours(event.data.turn) || event.surfaceOp !== 'append') break;
        const tool = stateMessageOf(event, this.tag, this.assembler, this.names);
        if (!tool) break;
        if (this.modes.has('messages-tuple'))
          out.push({ event: 'messages', data: [tool, this.meta('tools', event.data.step)] });
        if (this.modes.has('updates')) out.push({ event: 'updates', data: { tools: { messages: [tool] } } });
        break;
      }
      case 'tool/approval-request': {
        const { turn, callId, tool, arguments: args, kind } = event.data;
        if (!ours(turn)) break;
        if (!this.waiting) this.waiting = { op: event.op, requests: [] };
        this.waiting.requests.push({ callId, tool, arguments: args, kind });
        break;
      }
      case 'step/end':
        if (ours(event.data.turn)) {
          this.chunks(assembled, event.data.step, out);
          this.values(out);
        }
        break;
      case 'budget/breach':
        // The turn pauses on its spend cap: the run ends as an interrupt that a resume with a new budget answers.
        if (ours(event.data.turn)) {
          const interrupt = budgetInterruptOf(event);
          this.values(out);
          this.progress = 'done';
          this.outcome = { status: 'interrupted', interrupt };
          if (this.modes.has('updates')) out.push({ event: 'updates', data: { __interrupt__: [interrupt] } });
          if (this.modes.has('values'))
            out.push({ event: 'values', data: { messages: this.messages(), __interrupt__: [interrupt] } });
        }
        break;
      case 'turn/end':
        if (ours(event.data.turn)) {
          this.chunks(assembled, undefined, out);
          this.values(out);
          this.progress = 'done';
          this.outcome = runEndOf(event.data.reason);
          if (this.outcome.error) out.push({ event: 'error', data: this.outcome.error });
        }
        break;
      default:
        break;
    }
    return this.framed(out, event.seq);
  }

  private begin(turn: number, out: RunFrame[]): void {
    this.turn = turn;
    this.progress = 'running';
    this.dirty = true;
    this.values(out);
  }

  /** A `values` frame with the state now, when it changed since the last one. */
  private values(out: RunFrame[]): void {
    if (!this.dirty) return;
    this.dirty = false;
    if (this.modes.has('values')) out.push({ event: 'values', data: { messages: this.messages() } });
  }

  private meta(node: 'agent' | 'tools', step: number | undefined): Record<string, unknown> {
    return {
      langgraph_node: node,
      langgraph_step: step ?? 0,
      langgraph_checkpoint_ns: '',
      run_id: this.context.runId,
      thread_id: this.context.sessionId,
      turn: this.turn,
    };
  }

  /** The assembler's text and reasoning deltas as `AIMessageChunk`s under the reply's message id. */
  private chunks(events: readonly UnsequencedEvent[], step: number | undefined, out: RunFrame[]): void {
    if (!this.modes.has('messages-tuple')) return;
    for (const event of events) {
      let id: string;
      let content = '';
      let reasoning: string | undefined;
      if (event.type === 'response.output_text.delta') {
        id = event.item_id;
        content = event.delta;
      } else if (event.type === 'response.reasoning_text.delta') {
        id = `msg_${event.item_id.slice('rs_'.length)}`;
        reasoning = event.delta;
      } else continue;
      out.push({
        event: 'messages',
        data: [
          {
            type: 'AIMessageChunk',
            id,
            content,
            additional_kwargs: reasoning !== undefined ? { reasoning_content: reasoning } : {},
            response_metadata: {},
            tool_call_chunks: [],
            tool_calls: [],
            invalid_tool_calls: [],
          },
          this.meta('agent', step),
        ],
      });
    }
  }

  /** Gives each frame its id: the seq of the event it came from and its place among that event's frames. */
  private framed(frames: RunFrame[], seq: number): RunFrame[] {
    if (seq !== this.frameSeq) {
      this.frameSeq = seq;
      this.frameIndex = 0;
    }
    for (const frame of frames) frame.id = `${seq}-${this.frameIndex++}`;
    return frames;
  }
}

/** Whether frame id `id` comes after `lastEventId` (`<seq>-<n>`); a malformed last id sends everything. */
export function isAfter(id: string, lastEventId: string | undefined): boolean {
  if (lastEventId === undefined) return true;
  const last = /^(\d+)-(\d+)$/.exec(lastEventId);
  const own = /^(-?\d+)-(\d+)$/.exec(id);
  if (!last || !own) return true;
  const [ls, ln, os, on] = [Number(last[1]), Number(last[2]), Number(own[1]), Number(own[2])];
  return os > ls || (os === ls && on > ln);
}

/**
 * What a client that joins a run late missed, coalesced (issue 25): the chunks of one message
 * become one chunk, and only the newest `values` frame stays (each carries the whole state),
 * so a rejoin catches up at once. Each frame keeps the id of the last frame it stands for.
 */
export function coalesceFrames(frames: readonly RunFrame[]): RunFrame[] {
  const lastValues = frames.findLastIndex((frame) => frame.event === 'values');
  const out: RunFrame[] = [];
  for (const [i, frame] of frames.entries()) {
    if (frame.event === 'values' && i !== lastValues) continue;
    const last = out.at(-1);
    if (frame.event === 'messages' && last?.event === 'messages') {
      const [chunk, meta] = frame.data as [Record<string, unknown>, unknown];
      const [lastChunk] = last.data as [Record<string, unknown>, unknown];
      if (
        chunk.type === 'AIMessageChunk' &&
        lastChunk.type === 'AIMessageChunk' &&
        chunk.id === lastChunk.id &&
        (chunk.tool_call_chunks as unknown[]).length === 0 &&
        (lastChunk.tool_call_chunks as unknown[]).length === 0
      ) {
        const reasoning = `${(lastChunk.additional_kwargs as { reasoning_content?: string }).reasoning_content ?? ''}${(chunk.additional_kwargs as { reasoning_content?: string }).reasoning_content ?? ''}`;
        out[out.length - 1] = {
          event: 'messages',
          id: frame.id,
          data: [
            {
              ...lastChunk,
              content: `${lastChunk.content as string}${chunk.content as string}`,
              additional_kwargs: reasoning.length > 0 ? { reasoning_content: reasoning } : {},
            },
            meta,
          ],
        };
        continue;
      }
    }
    out.push(frame);
  }
  return out;
}
