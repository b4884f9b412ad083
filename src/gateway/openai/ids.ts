/**
 * Ids of the OpenAI-compatible API, all derived from the log so they survive any restart:
 *
 * - A conversation id is the session id (`conv_<32 hex>` for sessions created here; any
 *   session id names its conversation).
 * - A response id names one turn of one session by the message that started it:
 *   `resp_` + base64url(`<sessionId>/<anchor>`). The anchor is the id of the user message the
 *   response posted (`msg_<32 hex>`), or `call:<callId>` for a response that answered
 *   external tool calls (the first `function_call_output` of its input). Session ids cannot
 *   contain `/`, so the first `/` separates the two.
 * - Output item ids are those of every API (../turn-stream/ids.ts).
 */
import { randomUUID } from 'node:crypto';
import { isValidSessionId } from '../../session/index.js';
import type { AnswerAnchor } from '../transcripts.js';

/** What starts a response: a user message it posted, or the tool results it submitted (as any answer's). */
export type ResponseAnchor = AnswerAnchor;

export type ResponseRef = { sessionId: string; anchor: ResponseAnchor };

const RESPONSE_PREFIX = 'resp_';
const CALL_ANCHOR = 'call:';

/** A fresh conversation (session) id. */
export function newConversationId(): string {
  return `conv_${randomUUID().replaceAll('-', '')}`;
}

/** A fresh id for a user message a response posts (also its idempotency key). */
export function newMessageId(): string {
  return `msg_${randomUUID().replaceAll('-', '')}`;
}

export function encodeResponseId(ref: ResponseRef): string {
  const anchor = ref.anchor.kind === 'message' ? ref.anchor.messageId : `${CALL_ANCHOR}${ref.anchor.callId}`;
  return RESPONSE_PREFIX + Buffer.from(`${ref.sessionId}/${anchor}`, 'utf8').toString('base64url');
}

/** The session and anchor a response id names, or undefined when it is not one of ours. */
export function decodeResponseId(id: string): ResponseRef | undefined {
  if (!id.startsWith(RESPONSE_PREFIX) || id.length > 1024) return undefined;
  const body = id.slice(RESPONSE_PREFIX.length);
  if (!/^[A-Za-z0-9_-]+$/.test(body)) return undefined;
  const text = Buffer.from(body, 'base64url').toString('utf8');
  // Base64url decoding is lenient; an id must round-trip to be ours.
  if (Buffer.from(text, 'utf8').toString('base64url') !== body) return undefined;
  const slash = text.indexOf('/');
  if (slash < 0) return undefined;
  const sessionId = text.slice(0, slash);
  const anchor = text.slice(slash + 1);
  if (!isValidSessionId(sessionId) || anchor.length === 0 || anchor.length > 200) return undefined;
  if (anchor.startsWith(CALL_ANCHOR))
    return { sessionId, anchor: { kind: 'tool-results', callId: anchor.slice(CALL_ANCHOR.length) } };
  return { sessionId, anchor: { kind: 'message', messageId: anchor } };
}
