/**
 * What full-text search of a session's log indexes: the text an event carries for a person or
 * a model — message text and reasoning, tool-call arguments, tool results, compaction
 * summaries. Every store indexes the same text, so every backend finds the same events.
 */
import { isKnownEvent, type StoredEvent } from './events.js';
import type { ContentBlock } from './messages.js';

function blocksText(blocks: readonly ContentBlock[]): string {
  const parts: string[] = [];
  for (const block of blocks) {
    if (block.type === 'text' || block.type === 'reasoning') parts.push(block.text);
    else if (block.type === 'tool-call') parts.push(`${block.name} ${block.arguments}`);
    else parts.push(blocksText(block.content));
  }
  return parts.join('\n');
}

/** The searchable text of `event`, or undefined for an event that carries none. */
export function searchableText(event: StoredEvent): string | undefined {
  if (!isKnownEvent(event)) return undefined;
  switch (event.type) {
    case 'user/message':
      return blocksText(event.data.content);
    case 'assistant/message':
    case 'tool/result':
      return blocksText(event.data.message.content);
    case 'tool/call':
      return `${event.data.name} ${event.data.arguments}`;
    case 'compaction/summary':
      return blocksText(event.data.summary);
    default:
      return undefined;
  }
}

/** The words of a search query: letters and digits, lower-cased; anything else separates them. */
export function queryTerms(query: string): string[] {
  return [...new Set(query.toLowerCase().match(/[\p{L}\p{N}_]+/gu) ?? [])];
}
