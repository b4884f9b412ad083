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
  toolChoice: z
    .union([
      z.enum(['auto', 'none', 'required']),
      z.strictObject({
        type: z.literal('tool'),
        toolName: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'a tool name is 1-64 characters of A-Z a-z 0-9 _ -'),
      }),
    ])
    .optional()
    .describe(
      "the AI SDK's toolChoice for the turn (sent with useChat's body option): a forced choice holds for its first model step (issue 51)",
    ),
  parallelToolCalls: z.boolean().optional().describe('false: at most one tool call per reply in the turn'),
});
export type ChatRequestBody = z.output<typeof chatRequestBody>;

export const chatParams = z.strictObject({
  id: z.string().regex(SESSION_ID_PATTERN, `must be a chat (session) id (${SESSION_ID_RULE})`).describe('the chat id'),
});
