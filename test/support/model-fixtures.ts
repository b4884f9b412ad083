/** Small builders of derived messages and request headers for model-layer tests. */
import type { RequestHeader } from '../../src/session/events.js';
import type { AssistantMessage, ContentBlock, ToolResultMessage, UserMessage } from '../../src/session/messages.js';

let counter = 0;
const nextId = (prefix: string) => `${prefix}-${++counter}`;

export function userMessage(text: string): UserMessage {
  return { id: nextId('u'), role: 'user', content: [{ type: 'text', text }], source: { kind: 'user' } };
}

export function assistantMessage(content: ContentBlock[], model = 'fake'): AssistantMessage {
  return { id: nextId('a'), role: 'assistant', content, source: { kind: 'model', provider: 'fake', model } };
}

export function toolResultMessage(toolCallId: string, text: string): ToolResultMessage {
  return {
    id: nextId('t'),
    role: 'user',
    content: [{ type: 'tool-result', toolCallId, content: [{ type: 'text', text }] }],
    source: { kind: 'tool', callId: toolCallId },
  };
}

export function fakeHeader(extra: Partial<RequestHeader> = {}): RequestHeader {
  return { provider: 'fake', model: 'fake', system: 'You are a test assistant.', ...extra };
}
