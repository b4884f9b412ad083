/**
 * The request shapes of the AI SDK UI message stream (`/ai-sdk`): what `useChat`'s
 * `DefaultChatTransport` sends, `{id, messages, trigger, messageId}` with the AI SDK's UI
 * messages (read as a transcript in ui-messages.ts), and the chat id of a resumed stream.
 */
import { z } from 'zod';
import { SESSION_ID_PATTERN } from '../../session/index.js';
import { SESSION_ID_RULE } from '../wire.js';

const uiPart = z.looseObject({ type: z.string().min(1).max(200) });
const uiMessage = z.looseObject({
  id: z.string().max(300).optional(),
  role: z.enum(['system', 'user', 'assistant']),
  parts: z.array(uiPart).max(10_000),
  metadata: z.unknown().optional(),
});

export const chatRequestBody = z.looseObject({
  id: z
    .string()
    .regex(SESSION_ID_PATTERN, `the chat id is the session id (${SESSION_ID_RULE})`)
    .describe('the chat id: the session'),
  messages: z.array(uiMessage).min(1, 'messages must hold at least one message').max(100_000),
  trigger: z
    .enum(['submit-message', 'regenerate-message'])
    .optional()
    .describe('regenerate-message: a new reply to the last user message (a branch answers it)'),
  messageId: z.string().max(300).nullish(),
});
export type ChatRequestBody = z.output<typeof chatRequestBody>;

export const chatParams = z.strictObject({
  id: z.string().regex(SESSION_ID_PATTERN, `must be a chat (session) id (${SESSION_ID_RULE})`).describe('the chat id'),
});
