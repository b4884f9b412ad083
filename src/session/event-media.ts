/**
 * Media in logged events (issue 50): which stored media a user message or a tool result holds,
 * and such an event copied into another session with its media's locators naming that session
 * (what a fork's or a salvage's seed does, engine/seed.ts: media are never shared across sessions).
 */
import { mediaLocator } from './media.js';
import type { ContentBlock, StoredMedia } from './messages.js';

type MessageContent = { content: readonly ContentBlock[] };

function mediaIn(blocks: readonly ContentBlock[], found: StoredMedia[]): void {
  for (const block of blocks) {
    if (block.type === 'tool-result') mediaIn(block.content, found);
    else if ((block.type === 'image' || block.type === 'file') && block.source.kind === 'artifact')
      found.push(block.source);
  }
}

/** The message a user/message or tool/result event holds (the events that may hold media). */
function messageOf(event: { type: string; data: unknown }): MessageContent | undefined {
  if (event.type === 'user/message') return event.data as MessageContent;
  if (event.type === 'tool/result') return (event.data as { message: MessageContent }).message;
  return undefined;
}

/** The stored media a logged event's message holds (user messages and tool results; none elsewhere). */
export function eventMedia(event: { type: string; data: unknown }): StoredMedia[] {
  const message = messageOf(event);
  const found: StoredMedia[] = [];
  if (message) mediaIn(message.content, found);
  return found;
}

function rebased(blocks: readonly ContentBlock[], sessionId: string): ContentBlock[] {
  return blocks.map((block) => {
    if (block.type === 'tool-result') return { ...block, content: rebased(block.content, sessionId) };
    if ((block.type !== 'image' && block.type !== 'file') || block.source.kind !== 'artifact') return block;
    const locator = mediaLocator(sessionId, block.source.sha256, block.source.mediaType);
    return { ...block, source: { ...block.source, locator } } as ContentBlock;
  });
}

/**
 * `event` with each stored medium's locator naming session `sessionId` (a copy of another
 * session's event, whose media the new session stored under its own id: media are never shared
 * across sessions). An event without media is returned as it is.
 */
export function withEventMediaOf<E extends { type: string; data: unknown }>(event: E, sessionId: string): E {
  if (eventMedia(event).length === 0) return event;
  if (event.type === 'user/message') {
    const data = event.data as MessageContent;
    return { ...event, data: { ...data, content: rebased(data.content, sessionId) } };
  }
  const data = event.data as { message: MessageContent };
  return {
    ...event,
    data: { ...data, message: { ...data.message, content: rebased(data.message.content, sessionId) } },
  };
}
