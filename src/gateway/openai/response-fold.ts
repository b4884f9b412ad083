/**
 * One response, folded from its session's log: the turn its anchor started (see ids.ts), the
 * output items and stream events of that turn (output-items.ts), its status and usage. Fed the
 * whole log from seq 0 (stored events, then live ones), it is a pure function of the log, so
 * the `sequence_number` of every stream event is the same on every derivation: a client that
 * reconnects with `starting_after=N` gets exactly the events after N, on any gateway, after
 * any crash.
 *
 * The stream of a response: `response.created` and `response.in_progress` when its anchor is
 * logged (a response whose message is still queued has no events yet), the item events as
 * the model's output is logged, and one terminal event when its turn ends:
 *
 * | turn outcome | status | terminal event |
 * |---|---|---|
 * | completed | `completed` | `response.completed` |
 * | max-tokens | `incomplete` (`max_output_tokens`) | `response.incomplete` |
 * | max-steps | `incomplete` (`max_steps`, a sessionlog reason) | `response.incomplete` |
 * | paused on a spend cap (`budget/breach`) | `incomplete` (`budget_exceeded`, a sessionlog reason) | `response.incomplete` |
 * | aborted (cancel) | `cancelled` | `response.incomplete` (the SDK has no cancelled event) |
 * | error | `failed` | `response.failed` |
 * | interrupted (crash repair) | `failed` | `response.failed` |
 */
import type {
  Response,
  ResponseError,
  ResponseStatus,
  ResponseStreamEvent,
  ResponseUsage,
} from 'openai/resources/responses/responses';
import {
  describeBreach,
  isKnownEvent,
  type SessionHeader,
  type StoredEvent,
  type TokenUsage,
  type TurnEndReason,
} from '../../session/index.js';
import type { ResponseAnchor } from './ids.js';
import { itemTag } from '../turn-stream/ids.js';
import { OutputAssembler, type UnsequencedEvent } from '../turn-stream/output-items.js';
import { addTokenUsage } from '../turn-stream/usage.js';

export type ResponseFoldContext = {
  responseId: string;
  sessionId: string;
  anchor: ResponseAnchor;
  header: SessionHeader;
  /** The model and system prompt the workers give a session whose header names none. */
  defaults: { model?: string | undefined; system?: string | undefined };
  /** The response the request named to continue (echoed as `previous_response_id`). */
  previousResponseId?: string;
};

/** Where the response stands: its anchor not logged yet, its turn running, or its turn over. */
export type ResponseProgress = 'queued' | 'running' | 'done';

type Outcome = {
  status: ResponseStatus;
  error: ResponseError | null;
  incomplete: Response.IncompleteDetails | null;
  terminal: 'response.completed' | 'response.incomplete' | 'response.failed';
};

function outcomeOf(reason: TurnEndReason): Outcome {
  switch (reason.kind) {
    case 'completed':
      return { status: 'completed', error: null, incomplete: null, terminal: 'response.completed' };
    case 'max-tokens':
      return {
        status: 'incomplete',
        error: null,
        incomplete: { reason: 'max_output_tokens' },
        terminal: 'response.incomplete',
      };
    case 'max-steps':
      // Not a reason the SDK lists: the turn used up its model steps (SESSIONLOG_MAX_STEPS).
      return {
        status: 'incomplete',
        error: null,
        incomplete: { reason: 'max_steps' } as unknown as Response.IncompleteDetails,
        terminal: 'response.incomplete',
      };
    case 'aborted':
      return { status: 'cancelled', error: null, incomplete: null, terminal: 'response.incomplete' };
    case 'error':
      return {
        status: 'failed',
        error: {
          // The turn's own code where the SDK's list has none for it (budget_exceeded,
          // context_overflow, bad_request…), so the caller learns why, as the log says.
          code: (reason.error.code === 'rate_limit'
            ? 'rate_limit_exceeded'
            : reason.error.code) as ResponseError['code'],
          message: reason.error.message,
        },
        incomplete: null,
        terminal: 'response.failed',
      };
    case 'interrupted':
      return {
        status: 'failed',
        error: {
          code: 'server_error',
          message:
            'the turn was interrupted (its workflow run ended before the turn did) and was closed by crash repair; send the input again',
        },
        incomplete: null,
        terminal: 'response.failed',
      };
  }
}

function usageOf(total: TokenUsage): ResponseUsage {
  const cached = total.cacheReadTokens ?? 0;
  const input = total.inputTokens + cached + (total.cacheWriteTokens ?? 0);
  return {
    input_tokens: input,
    input_tokens_details: { cached_tokens: cached, cache_write_tokens: total.cacheWriteTokens ?? 0 },
    output_tokens: total.outputTokens,
    output_tokens_details: { reasoning_tokens: total.reasoningTokens ?? 0 },
    total_tokens: input + total.outputTokens,
  };
}

/** The concatenated `output_text` of the message items, as the SDK computes `output_text`. */
export function outputTextOf(output: Response['output']): string {
  let text = '';
  for (const item of output) {
    if (item.type !== 'message') continue;
    for (const part of item.content) if (part.type === 'output_text') text += part.text;
  }
  return text;
}

/** Folds a session's log into one response: its stream events, in order and numbered, and its current object. */
export class ResponseTracker {
  private progress: ResponseProgress = 'queued';
  /** The anchor was logged outside any turn: the response is the next turn. */
  private awaitingTurn = false;
  private openTurn: number | undefined;
  private turn: number | undefined;
  private model: string;
  private system: string | null;
  private createdAt: number | null = null;
  private completedAt: number | null = null;
  private outcome: Outcome | undefined;
  private usage: TokenUsage | undefined;
  private metadata: Record<string, string> = {};
  /** The function tools the caller gave the response's turn, and the open turn's (`turn/start` `tools`). */
  private tools: Response['tools'] = [];
  private openTurnTools: Response['tools'] = [];
  private readonly assembler: OutputAssembler;
  private sequence = 0;
  /** The tool calls of the turn's replies: their step and position among the reply's calls. */
  private readonly calls = new Map<string, { step: number; index: number }>();
  /** The turn waits for the caller: the batch (op) of its external calls ends the response. */
  private waitingForCaller: { op: string | undefined; time: number } | undefined;

  constructor(readonly context: ResponseFoldContext) {
    this.assembler = new OutputAssembler(itemTag(context.sessionId));
    this.model = context.header.agent?.model ?? context.defaults.model ?? '';
    this.system = context.header.agent?.system ?? context.defaults.system ?? null;
  }

  state(): ResponseProgress {
    return this.progress;
  }

  /** The number of stream events so far; the last one's `sequence_number` is this minus one. */
  get eventCount(): number {
    return this.sequence;
  }

  /** Feeds the log's next event (seq order, from seq 0); returns the stream events it produced. */
  push(event: StoredEvent): ResponseStreamEvent[] {
    if (this.progress === 'done') return [];
    // The external calls of a step are requested in one batch: the first event after it ends the response.
    if (this.waitingForCaller && (event.op === undefined || event.op !== this.waitingForCaller.op)) return this.flush();
    if (!isKnownEvent(event)) return [];
    const out: UnsequencedEvent[] = [];
    switch (event.type) {
      case 'request/header':
        this.model = event.data.header.model;
        this.system = event.data.header.system ?? null;
        break;
      case 'session/metadata':
        if (
          this.progress === 'queued' &&
          this.context.anchor.kind === 'message' &&
          event.data.messageId === this.context.anchor.messageId
        )
          this.metadata = event.data.metadata;
        break;
      case 'turn/start':
        this.openTurn = event.data.turn;
        this.openTurnTools = (event.data.tools ?? []).map((tool) => ({
          type: 'function' as const,
          name: tool.name,
          description: tool.description,
          parameters: tool.parameters as Record<string, unknown>,
          strict: tool.strict ?? null,
        }));
        if (this.awaitingTurn) {
          this.awaitingTurn = false;
          this.begin(event.data.turn, event.time, out);
        }
        break;
      case 'user/message':
        if (
          this.progress === 'queued' &&
          this.context.anchor.kind === 'message' &&
          event.data.id === this.context.anchor.messageId &&
          event.surfaceOp === 'append'
        ) {
          if (this.openTurn === undefined) this.awaitingTurn = true;
          else this.begin(this.openTurn, event.time, out);
        }
        break;
      case 'tool/result':
        if (
          this.progress === 'queued' &&
          this.context.anchor.kind === 'tool-results' &&
          event.data.origin === 'external' &&
          event.data.message.source.callId === this.context.anchor.callId &&
          this.openTurn !== undefined
        ) {
          this.begin(this.openTurn, event.time, out);
        }
        break;
      case 'assistant/chunk':
        if (this.progress === 'running' && event.data.turn === this.turn) out.push(...this.assembler.push(event));
        break;
      case 'assistant/message':
        if (this.progress === 'running' && event.data.turn === this.turn && !event.data.hides) {
          out.push(...this.assembler.push(event));
          if (event.data.usage) this.addUsage(event.data.usage);
          let index = 0;
          for (const block of event.data.message.content)
            if (block.type === 'tool-call') this.calls.set(block.id, { step: event.data.step, index: index++ });
        }
        break;
      case 'tool/approval-request': {
        const { turn, step, callId, tool, arguments: args, kind } = event.data;
        if (this.progress === 'running' && turn === this.turn && kind === 'external') {
          const index = this.calls.get(callId)?.index ?? this.calls.size;
          this.assembler.functionCall(turn, step, index, { callId, name: tool, arguments: args }, out);
          this.waitingForCaller = { op: event.op, time: event.time };
        }
        break;
      }
      case 'step/end':
        if (this.progress === 'running' && event.data.turn === this.turn) out.push(...this.assembler.push(event));
        break;
      case 'budget/breach':
        // The turn pauses on its spend cap: the response ends here, incomplete. If the cap is
        // raised, the rest of the turn is in the conversation's items and the next response's input.
        if (this.progress === 'running' && event.data.turn === this.turn) {
          this.outcome = {
            status: 'incomplete',
            // Which cap, in the error's words: the incomplete reason alone does not say.
            error: {
              code: 'budget_exceeded' as ResponseError['code'],
              message: `${describeBreach(event.data)}: raise the session's budget to go on`,
            },
            // Not a reason the SDK lists, as `max_steps`.
            incomplete: { reason: 'budget_exceeded' } as unknown as Response.IncompleteDetails,
            terminal: 'response.incomplete',
          };
          this.completedAt = Math.floor(event.time / 1000);
          this.progress = 'done';
          out.push({ type: 'response.incomplete', response: this.snapshot() } as UnsequencedEvent);
        }
        break;
      case 'turn/end':
        if (this.progress === 'running' && event.data.turn === this.turn) {
          out.push(...this.assembler.push(event));
          this.outcome = outcomeOf(event.data.reason);
          this.completedAt = Math.floor(event.time / 1000);
          this.progress = 'done';
          out.push({ type: this.outcome.terminal, response: this.snapshot() } as UnsequencedEvent);
        }
        if (this.openTurn === event.data.turn) this.openTurn = undefined;
        break;
      default:
        break;
    }
    return out.map((e) => ({ ...e, sequence_number: this.sequence++ }) as ResponseStreamEvent);
  }

  /** True while the response has shown calls the caller runs and ends once their batch is known to be whole. */
  awaitingCaller(): boolean {
    return this.waitingForCaller !== undefined && this.progress !== 'done';
  }

  /**
   * Ends a response whose turn waits for the caller, once the batch requesting the calls is
   * known to be complete: the log holds no event after it (a batch is committed whole) or the
   * next event belongs to another batch. The feeder calls this when the log has nothing more.
   */
  flush(): ResponseStreamEvent[] {
    if (!this.waitingForCaller || this.progress === 'done') return [];
    this.outcome = { status: 'completed', error: null, incomplete: null, terminal: 'response.completed' };
    this.completedAt = Math.floor(this.waitingForCaller.time / 1000);
    this.progress = 'done';
    return [{ type: 'response.completed', response: this.snapshot(), sequence_number: this.sequence++ }];
  }

  /**
   * The response object as the log has it now. `queuedAt` (seconds) stands in for the
   * creation time while the anchor is not logged yet.
   */
  snapshot(queuedAt?: number): Response {
    const output = this.assembler.output();
    const status: ResponseStatus = this.outcome?.status ?? (this.progress === 'queued' ? 'queued' : 'in_progress');
    return {
      id: this.context.responseId,
      object: 'response',
      created_at: this.createdAt ?? queuedAt ?? Math.floor(Date.now() / 1000),
      status,
      completed_at: this.completedAt,
      error: this.outcome?.error ?? null,
      incomplete_details: this.outcome?.incomplete ?? null,
      instructions: this.system,
      metadata: { ...this.metadata },
      model: this.model,
      output,
      output_text: outputTextOf(output),
      parallel_tool_calls: true,
      temperature: null,
      top_p: null,
      tool_choice: 'auto',
      tools: [...this.tools],
      conversation: { id: this.context.sessionId },
      previous_response_id: this.context.previousResponseId ?? null,
      text: { format: { type: 'text' } },
      truncation: 'auto',
      max_output_tokens: null,
      ...(this.usage ? { usage: usageOf(this.usage) } : {}),
    };
  }

  private begin(turn: number, time: number, out: UnsequencedEvent[]): void {
    this.turn = turn;
    this.tools = this.openTurnTools;
    this.createdAt = Math.floor(time / 1000);
    this.progress = 'running';
    const response = this.snapshot();
    out.push({ type: 'response.created', response });
    out.push({ type: 'response.in_progress', response: structuredClone(response) });
  }

  private addUsage(usage: TokenUsage): void {
    this.usage = addTokenUsage(this.usage, usage);
  }
}
