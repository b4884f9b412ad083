/**
 * A conversation's items (`GET /openai/v1/conversations/:id/items`): the derived history — what
 * the model is sent next, compaction summaries and pruned tool results included — as
 * Responses API items, in surface order. User messages become `message` items with
 * `input_text` parts (a compaction summary is the user-role message the model gets), each
 * assistant message its `reasoning` and `message` items (with the ids its response used) and a
 * `function_call` item per tool call, each tool result a `function_call_output` item.
 */
import type { ConversationItem } from 'openai/resources/conversations/items';
import { foldSurfaceView, isKnownEvent, type ContentBlock, type StoredEvent } from '../../session/index.js';
import { functionCallItemId, itemTag, messageItemId, reasoningItemId } from '../turn-stream/ids.js';
import { OutputAssembler } from '../turn-stream/output-items.js';

function textOf(blocks: readonly ContentBlock[], type: 'text' | 'reasoning'): string {
  let out = '';
  for (const block of blocks) if (block.type === type) out += block.text;
  return out;
}

/** The conversation items of a whole log (seq 0 first), oldest first. */
export function conversationItems(sessionId: string, events: readonly StoredEvent[]): ConversationItem[] {
  return placedConversationItems(sessionId, events).map(({ item }) => item);
}

/** {@link conversationItems}, each with the seq of the surface node it comes from. */
export function placedConversationItems(
  sessionId: string,
  events: readonly StoredEvent[],
): Array<{ item: ConversationItem; seq: number }> {
  const tag = itemTag(sessionId);
  const assembler = new OutputAssembler(tag);
  for (const event of events) assembler.push(event);
  const placed: Array<{ item: ConversationItem; seq: number }> = [];
  for (const node of foldSurfaceView(events).nodes) {
    const event = events[node.seq];
    if (!event || !isKnownEvent(event)) continue;
    const items: ConversationItem[] = [];
    switch (event.type) {
      case 'user/message':
        items.push({
          id: event.data.id,
          type: 'message',
          role: 'user',
          status: 'completed',
          content: [{ type: 'input_text', text: textOf(event.data.content, 'text') }],
        });
        break;
      case 'assistant/message': {
        const { turn, step, message, interrupted } = event.data;
        const status = interrupted ? 'incomplete' : 'completed';
        const ids = assembler.itemsOfMessage.get(event.seq) ?? {};
        const reasoning = textOf(message.content, 'reasoning');
        if (reasoning.length > 0) {
          items.push({
            id: ids.reasoning ?? reasoningItemId(tag, turn, step, 0),
            type: 'reasoning',
            status,
            summary: [],
            content: [{ type: 'reasoning_text', text: reasoning }],
          });
        }
        const text = textOf(message.content, 'text');
        if (text.length > 0) {
          items.push({
            id: ids.message ?? messageItemId(tag, turn, step, 0),
            type: 'message',
            role: 'assistant',
            status,
            content: [{ type: 'output_text', text, annotations: [], logprobs: [] }],
          });
        }
        let index = 0;
        for (const block of message.content) {
          if (block.type !== 'tool-call') continue;
          items.push({
            id: functionCallItemId(tag, turn, step, index++),
            type: 'function_call',
            status: 'completed',
            call_id: block.id,
            name: block.name,
            arguments: block.arguments,
          });
        }
        break;
      }
      case 'tool/result': {
        const message = event.data.message;
        const block = message.content[0];
        items.push({
          id: message.id,
          type: 'function_call_output',
          status: 'completed',
          call_id: block.toolCallId,
          output: textOf(block.content, 'text'),
        });
        break;
      }
      default:
        break;
    }
    for (const item of items) placed.push({ item, seq: node.seq });
  }
  return placed;
}
