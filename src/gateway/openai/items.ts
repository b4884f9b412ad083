/**
 * A conversation's items (`GET /openai/v1/conversations/:id/items`): the derived history — what
 * the model is sent next, compaction summaries and pruned tool results included — as
 * Responses API items, in surface order. User messages become `message` items with
 * `input_text` parts (and `input_image` / `input_file` parts for their media; a compaction
 * summary is the user-role message the model gets), each
 * assistant message its `reasoning` and `message` items (with the ids its response used) and a
 * `function_call` item per tool call, each tool result a `function_call_output` item.
 */
import type { ConversationItem } from 'openai/resources/conversations/items';
import type { ResponseInputFile, ResponseInputImage, ResponseInputText } from 'openai/resources/responses/responses';
import { foldSurfaceView, isKnownEvent, type ContentBlock, type StoredEvent } from '../../session/index.js';
import { functionCallItemId, itemTag, messageItemId, reasoningItemId } from '../turn-stream/ids.js';
import { OutputAssembler } from '../turn-stream/output-items.js';
import { mediaBlocksOf } from '../media-parts.js';

function textOf(blocks: readonly ContentBlock[], type: 'text' | 'reasoning'): string {
  let out = '';
  for (const block of blocks) if (block.type === type) out += block.text;
  return out;
}

type UserContentPart = ResponseInputText | ResponseInputImage | ResponseInputFile;

/**
 * A user message's content as Responses input parts: its text as one `input_text` (as always),
 * or, when it holds media (issue 50), its blocks in order, a stored image as `input_image` with
 * `file_id` its locator (what a request can send back; the bytes are at the native artifact
 * route), a remote one with its `image_url`, a stored file as `input_file` with `file_id`.
 */
function userContentParts(content: readonly ContentBlock[]): UserContentPart[] {
  if (mediaBlocksOf(content).length === 0) return [{ type: 'input_text', text: textOf(content, 'text') }];
  return content.flatMap((block): UserContentPart[] => {
    switch (block.type) {
      case 'text':
        return [{ type: 'input_text', text: block.text }];
      case 'image':
        return [
          block.source.kind === 'url'
            ? { type: 'input_image', detail: block.detail ?? 'auto', image_url: block.source.url, file_id: null }
            : { type: 'input_image', detail: block.detail ?? 'auto', image_url: null, file_id: block.source.locator },
        ];
      case 'file':
        return [
          {
            type: 'input_file',
            file_id: block.source.locator,
            ...(block.filename !== undefined ? { filename: block.filename } : {}),
          },
        ];
      default:
        return [];
    }
  });
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
          content: userContentParts(event.data.content),
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
