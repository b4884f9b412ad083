/**
 * The model's output as Responses API items, assembled from the log: a fold over
 * `assistant/chunk` and `assistant/message` events that opens a `reasoning` item and a
 * `message` item per step, streams their text as the chunks arrive and closes them with the
 * logged message. It yields the SDK's own stream events (without `sequence_number`), so a
 * response's stream is a pure function of the log, and it fixes the item ids that the
 * response objects and the conversation's items share.
 *
 * A model call that is retried (a worker killed mid-stream, a dropped connection) streams its
 * reply again from the start. The new attempt's chunks (the op of a chunk batch names its
 * attempt) are matched against what was already streamed: text the client has seen is not
 * sent twice, only what goes beyond it. When the new attempt says something else, the item
 * streamed so far is closed as `incomplete` and left out of the final output, and a new item
 * carries the new text.
 */
import type {
  ResponseFunctionToolCall,
  ResponseOutputItem,
  ResponseOutputMessage,
  ResponseOutputText,
  ResponseReasoningItem,
  ResponseStreamEvent,
} from 'openai/resources/responses/responses';
import { isKnownEvent, modelCallOfChunks, type ContentBlock, type StoredEvent } from '../../session/index.js';
import { functionCallItemId, messageItemId, reasoningItemId } from './ids.js';

/** A stream event before the response numbers it. */
export type UnsequencedEvent = ResponseStreamEvent extends infer E
  ? E extends unknown
    ? Omit<E, 'sequence_number'>
    : never
  : never;

/** An output item in stream order; `abandoned` items were replaced by a retried model call's different reply. */
export type OutputEntry = { item: ResponseOutputItem; abandoned: boolean };

type TextKind = 'message' | 'reasoning';
type OpenText = { index: number; id: string; kind: TextKind; emitted: string };
type ItemStatus = 'in_progress' | 'completed' | 'incomplete';

/** The ids of the items a logged assistant message became. */
export type MessageItemIds = { reasoning?: string; message?: string };

/**
 * The model call a chunk batch belongs to, read from its op key (session/op-keys.ts): a
 * different one is a new call. A call's last chunks are written in the reply's own batch (op
 * `…/reply`), which names no attempt: `undefined`. The `assistant/message` of that same batch
 * carries their text.
 */
export function chunkAttemptOf(op: string | undefined): string | undefined {
  return modelCallOfChunks(op);
}

class StepState {
  attempt: string | undefined;
  attemptText = '';
  attemptReasoning = '';
  readonly open: Partial<Record<TextKind, OpenText>> = {};
  readonly opened: Record<TextKind, number> = { message: 0, reasoning: 0 };
  constructor(
    readonly turn: number,
    readonly step: number,
  ) {}
}

function outputText(text: string): ResponseOutputText {
  return { type: 'output_text', text, annotations: [], logprobs: [] };
}

function textsOf(blocks: readonly ContentBlock[]): { reasoning: string; text: string } {
  let reasoning = '';
  let text = '';
  for (const block of blocks) {
    if (block.type === 'text') text += block.text;
    else if (block.type === 'reasoning') reasoning += block.text;
  }
  return { reasoning, text };
}

/** Folds the model's output events into items and their stream events. */
export class OutputAssembler {
  /** Every item opened so far, in stream order (output indexes), abandoned ones included. */
  readonly entries: OutputEntry[] = [];
  /** For each `assistant/message` seq, the ids of the items it became. */
  readonly itemsOfMessage = new Map<number, MessageItemIds>();
  private step: StepState | undefined;

  /** `tag`: the session's part of every item id (ids.ts itemTag). */
  constructor(private readonly tag: string) {}

  /** The output of a finished (or current) response: every item not abandoned. */
  output(): ResponseOutputItem[] {
    return this.entries.filter((e) => !e.abandoned).map((e) => structuredClone(e.item));
  }

  /** Feeds the next log event; returns the stream events it produces. */
  push(event: StoredEvent): UnsequencedEvent[] {
    const out: UnsequencedEvent[] = [];
    if (!isKnownEvent(event)) return out;
    switch (event.type) {
      case 'assistant/chunk': {
        const { turn, step, chunk } = event.data;
        const state = this.stepState(turn, step);
        const attempt = chunkAttemptOf(event.op);
        // Chunks held for the reply's batch: its message, next in the same batch, streams what they add.
        if (attempt === undefined) break;
        if (state.attempt !== attempt) {
          state.attempt = attempt;
          state.attemptText = '';
          state.attemptReasoning = '';
        }
        if (chunk.kind === 'text-delta') {
          state.attemptText += chunk.text;
          this.reconcile(state, 'message', state.attemptText, false, out);
        } else if (chunk.kind === 'reasoning-delta') {
          state.attemptReasoning += chunk.text;
          this.reconcile(state, 'reasoning', state.attemptReasoning, false, out);
        }
        // Tool-call deltas are not streamed: a call becomes an item once the log says who runs it.
        break;
      }
      case 'assistant/message': {
        if (event.data.hides) break;
        const { turn, step, message, interrupted } = event.data;
        const state = this.stepState(turn, step);
        const { reasoning, text } = textsOf(message.content);
        const status: ItemStatus = interrupted ? 'incomplete' : 'completed';
        const ids: MessageItemIds = {};
        this.reconcile(state, 'reasoning', reasoning, true, out);
        const reasoningItem = state.open.reasoning;
        if (reasoningItem) ids.reasoning = this.close(reasoningItem, status, false, out);
        this.reconcile(state, 'message', text, true, out);
        const messageItem = state.open.message;
        if (messageItem) ids.message = this.close(messageItem, status, false, out);
        state.open.reasoning = undefined;
        state.open.message = undefined;
        this.itemsOfMessage.set(event.seq, ids);
        break;
      }
      case 'step/end':
      case 'turn/end':
        // A step that ended without its message (a failed call, a crash repair): what it streamed was never the reply.
        this.abandonOpen(out);
        break;
      default:
        break;
    }
    return out;
  }

  /** Adds a finished `function_call` item (a call the caller runs); returns its output index. */
  functionCall(
    turn: number,
    step: number,
    index: number,
    call: { callId: string; name: string; arguments: string },
    out: UnsequencedEvent[],
  ): number {
    const id = functionCallItemId(this.tag, turn, step, index);
    const item: ResponseFunctionToolCall = {
      id,
      type: 'function_call',
      status: 'in_progress',
      call_id: call.callId,
      name: call.name,
      arguments: '',
    };
    const outputIndex = this.entries.length;
    this.entries.push({ item, abandoned: false });
    out.push({ type: 'response.output_item.added', output_index: outputIndex, item: structuredClone(item) });
    if (call.arguments.length > 0)
      out.push({
        type: 'response.function_call_arguments.delta',
        item_id: id,
        output_index: outputIndex,
        delta: call.arguments,
      });
    out.push({
      type: 'response.function_call_arguments.done',
      item_id: id,
      output_index: outputIndex,
      name: call.name,
      arguments: call.arguments,
    });
    item.arguments = call.arguments;
    item.status = 'completed';
    out.push({ type: 'response.output_item.done', output_index: outputIndex, item: structuredClone(item) });
    return outputIndex;
  }

  private stepState(turn: number, step: number): StepState {
    if (!this.step || this.step.turn !== turn || this.step.step !== step) this.step = new StepState(turn, step);
    return this.step;
  }

  /**
   * Brings the open item of `kind` to `target`: streams what goes beyond what was sent, waits
   * while a new attempt replays text already sent, and replaces the item when the text
   * diverged (or, for the final message, when anything sent is not part of it).
   */
  private reconcile(state: StepState, kind: TextKind, target: string, final: boolean, out: UnsequencedEvent[]): void {
    let open = state.open[kind];
    if (open && !target.startsWith(open.emitted)) {
      if (!final && open.emitted.startsWith(target)) return;
      this.close(open, 'incomplete', true, out);
      state.open[kind] = open = undefined;
    }
    if (target.length === 0) return;
    if (!open) {
      open = this.openText(state, kind, out);
      state.open[kind] = open;
    }
    if (target.length > open.emitted.length) {
      const delta = target.slice(open.emitted.length);
      open.emitted = target;
      const entry = this.entries[open.index]!;
      if (kind === 'message') {
        ((entry.item as ResponseOutputMessage).content[0] as ResponseOutputText).text = target;
        out.push({
          type: 'response.output_text.delta',
          item_id: open.id,
          output_index: open.index,
          content_index: 0,
          delta,
          logprobs: [],
        });
      } else {
        (entry.item as ResponseReasoningItem).content![0]!.text = target;
        out.push({
          type: 'response.reasoning_text.delta',
          item_id: open.id,
          output_index: open.index,
          content_index: 0,
          delta,
        });
      }
    }
  }

  private openText(state: StepState, kind: TextKind, out: UnsequencedEvent[]): OpenText {
    const n = state.opened[kind]++;
    const index = this.entries.length;
    if (kind === 'message') {
      const id = messageItemId(this.tag, state.turn, state.step, n);
      const item: ResponseOutputMessage = {
        id,
        type: 'message',
        role: 'assistant',
        status: 'in_progress',
        content: [],
      };
      out.push({ type: 'response.output_item.added', output_index: index, item: structuredClone(item) });
      out.push({
        type: 'response.content_part.added',
        item_id: id,
        output_index: index,
        content_index: 0,
        part: outputText(''),
      });
      item.content.push(outputText(''));
      this.entries.push({ item, abandoned: false });
      return { index, id, kind, emitted: '' };
    }
    const id = reasoningItemId(this.tag, state.turn, state.step, n);
    const item: ResponseReasoningItem = { id, type: 'reasoning', status: 'in_progress', summary: [], content: [] };
    out.push({ type: 'response.output_item.added', output_index: index, item: structuredClone(item) });
    out.push({
      type: 'response.content_part.added',
      item_id: id,
      output_index: index,
      content_index: 0,
      part: { type: 'reasoning_text', text: '' },
    });
    item.content!.push({ type: 'reasoning_text', text: '' });
    this.entries.push({ item, abandoned: false });
    return { index, id, kind, emitted: '' };
  }

  /** Closes an item with its `.done` events; returns its id. */
  private close(open: OpenText, status: ItemStatus, abandoned: boolean, out: UnsequencedEvent[]): string {
    const entry = this.entries[open.index]!;
    entry.abandoned = abandoned;
    const text = open.emitted;
    if (open.kind === 'message') {
      const item = entry.item as ResponseOutputMessage;
      item.status = status;
      out.push({
        type: 'response.output_text.done',
        item_id: open.id,
        output_index: open.index,
        content_index: 0,
        text,
        logprobs: [],
      });
      out.push({
        type: 'response.content_part.done',
        item_id: open.id,
        output_index: open.index,
        content_index: 0,
        part: outputText(text),
      });
    } else {
      const item = entry.item as ResponseReasoningItem;
      item.status = status;
      out.push({
        type: 'response.reasoning_text.done',
        item_id: open.id,
        output_index: open.index,
        content_index: 0,
        text,
      });
      out.push({
        type: 'response.content_part.done',
        item_id: open.id,
        output_index: open.index,
        content_index: 0,
        part: { type: 'reasoning_text', text },
      });
    }
    out.push({ type: 'response.output_item.done', output_index: open.index, item: structuredClone(entry.item) });
    return open.id;
  }

  private abandonOpen(out: UnsequencedEvent[]): void {
    const state = this.step;
    if (!state) return;
    for (const kind of ['reasoning', 'message'] as const) {
      const open = state.open[kind];
      if (open) this.close(open, 'incomplete', true, out);
      state.open[kind] = undefined;
    }
  }
}
