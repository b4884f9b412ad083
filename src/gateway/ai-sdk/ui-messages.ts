/**
 * What `useChat`'s `DefaultChatTransport` sends (issue 25): `{id, messages, trigger,
 * messageId}` with the AI SDK's UI messages, read as a stateless transcript (the same one the
 * OpenAI-compatible API reconciles with a session's log) plus the answers to tool approvals
 * the last assistant message carries.
 *
 * A UI message is a list of parts. User text parts make a user message; a system message's
 * text is the instructions. An assistant message's text parts join (as the log's transcript
 * joins a turn's texts); the tool parts of tools the caller ran (not `providerExecuted`: those
 * the server ran are the worker's and not part of the transcript) are its calls, and their
 * outputs follow as tool messages, the text after them a new assistant message. Reasoning,
 * step, source and data parts carry nothing a transcript holds. A user message's `file` parts
 * (`{type: 'file', mediaType, url, filename?}`, the url a data URL as `useChat` sends a picked
 * file, or an http(s) URL for an image) are its images and files (issue 50), checked before
 * anything is logged; a refusal names the part (`messages[0].parts[1]`).
 */
import { invalidRequest } from '../openai-errors.js';
import { userTranscriptMessage, type Transcript, type TranscriptMessage } from '../transcripts.js';
import type { UserPart } from '../../session/media.js';
import {
  checkMessageParts,
  imageFromUrl,
  mediaFromData,
  mediaFromReference,
  type ReadMessage,
} from '../media-parts.js';
import type { ChatRequestBody } from './schemas.js';

type FilePart = { type: 'file'; mediaType?: unknown; url?: unknown; filename?: unknown };

/** A UI message's `file` part as a caller part: a data URL (inline bytes), an http(s) image URL, or a stored medium's locator. */
function filePartOf(part: FilePart, param: string): UserPart {
  const url = part.url;
  const mediaType = typeof part.mediaType === 'string' ? part.mediaType : undefined;
  const filename = typeof part.filename === 'string' ? part.filename : undefined;
  if (typeof url === 'string' && url.startsWith('artifact:')) return mediaFromReference(url, param, { filename });
  if (typeof url === 'string' && url.startsWith('data:')) return mediaFromData(url, param, { mediaType, filename });
  if (mediaType !== undefined && !mediaType.toLowerCase().startsWith('image/'))
    throw invalidRequest(
      `${param}.url`,
      `Invalid '${param}.url': a ${mediaType} file is not fetched from a URL; send it as a data URL`,
      'invalid_value',
    );
  return imageFromUrl(url, `${param}.url`);
}

/** A user UI message's text and file parts, read and checked (other parts carry nothing a message holds). */
function readUserParts(
  parts: ReadonlyArray<{ type: string; text?: unknown }>,
  at: string,
  maxMediaBytes: number,
): ReadMessage {
  const read: UserPart[] = [];
  const wire: number[] = [];
  parts.forEach((part, j) => {
    if (part.type === 'text') read.push({ type: 'text', text: String(part.text ?? '') });
    else if (part.type === 'file') read.push(filePartOf(part as FilePart, `${at}.parts[${j}]`));
    else return;
    wire.push(j);
  });
  return checkMessageParts(read, maxMediaBytes, (k) => `${at}.parts[${wire[k]!}]`);
}

/** An answer to a tool approval the stream asked for (`approvalId` is the call id). */
export type ApprovalAnswerPart = { callId: string; approved: boolean; reason?: string };

type ToolPart = {
  type: string;
  toolCallId?: unknown;
  toolName?: unknown;
  state?: unknown;
  input?: unknown;
  output?: unknown;
  errorText?: unknown;
  providerExecuted?: unknown;
  approval?: { id?: unknown; approved?: unknown; reason?: unknown };
};

const isToolPart = (type: string): boolean => type.startsWith('tool-') || type === 'dynamic-tool';

function toolNameOf(part: ToolPart): string {
  return part.type === 'dynamic-tool' ? String(part.toolName ?? '') : part.type.slice('tool-'.length);
}

const asText = (value: unknown): string => (typeof value === 'string' ? value : JSON.stringify(value ?? null));

/** The transcript the UI messages hold, and the approval answers of the last assistant message. */
export function readUiMessages(
  messages: ChatRequestBody['messages'],
  maxMediaBytes: number,
): {
  transcript: Transcript;
  approvals: ApprovalAnswerPart[];
} {
  const system: string[] = [];
  const out: TranscriptMessage[] = [];
  let approvals: ApprovalAnswerPart[] = [];
  messages.forEach((message, i) => {
    const parts = message.parts as Array<{ type: string; text?: unknown }>;
    if (message.role !== 'user')
      parts.forEach((part, j) => {
        if (part.type === 'file')
          throw invalidRequest(
            `messages[${i}].parts[${j}].type`,
            `file parts belong in user messages; a ${message.role} message's are not logged`,
            'unsupported_value',
          );
      });
    const text = (part: { type: string; text?: unknown }) => (part.type === 'text' ? String(part.text ?? '') : '');
    if (message.role === 'system') {
      system.push(parts.map(text).join(''));
      return;
    }
    if (message.role === 'user') {
      out.push(userTranscriptMessage(readUserParts(parts, `messages[${i}]`, maxMediaBytes)));
      return;
    }
    approvals = [];
    let current: Extract<TranscriptMessage, { role: 'assistant' }> = { role: 'assistant', text: '', toolCalls: [] };
    let results: TranscriptMessage[] = [];
    const close = () => {
      if (current.text !== '' || current.toolCalls.length > 0) out.push(current);
      out.push(...results);
      current = { role: 'assistant', text: '', toolCalls: [] };
      results = [];
    };
    for (const part of parts) {
      if (part.type === 'text') {
        // Text after the caller's tool results is the next stretch of the reply.
        if (results.length > 0) close();
        current.text += text(part);
        continue;
      }
      if (!isToolPart(part.type)) continue;
      const tool = part as ToolPart;
      const callId = String(tool.toolCallId ?? '');
      if (tool.state === 'approval-responded' && tool.approval && typeof tool.approval.approved === 'boolean') {
        approvals.push({
          callId,
          approved: tool.approval.approved,
          ...(typeof tool.approval.reason === 'string' ? { reason: tool.approval.reason } : {}),
        });
      }
      if (tool.providerExecuted === true) continue;
      current.toolCalls.push({ callId, name: toolNameOf(tool), arguments: asText(tool.input ?? {}) });
      if (tool.state === 'output-available') results.push({ role: 'tool', callId, output: asText(tool.output) });
      else if (tool.state === 'output-error') results.push({ role: 'tool', callId, output: asText(tool.errorText) });
    }
    close();
  });
  // Only the last message's answers are new: earlier ones were acted on by the requests that carried them.
  if (messages.at(-1)?.role !== 'assistant') approvals = [];
  return { transcript: { system: system.length > 0 ? system.join('\n\n') : undefined, messages: out }, approvals };
}
