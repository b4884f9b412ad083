/**
 * A Responses API input list as a transcript (issue 24): what the AI SDK, the Agents SDK and
 * LangChain send when they keep the conversation themselves. System and developer messages are
 * the instructions; earlier output items come back as they were returned (or as
 * `item_reference`s, resolved from the log of the session their id names); reasoning items are
 * left out; function calls without an output in the list are calls the worker ran itself (the
 * client never answers them) and fold away, as they do in the log's transcript (../transcripts.ts).
 */
import type { RouteContext } from '../route-table.js';
import { invalidRequest } from '../openai-errors.js';
import { decodeItemId } from '../turn-stream/ids.js';
import type { ConversationItem } from 'openai/resources/conversations/items';
import { conversationItems } from './items.js';
import { contentText, type InputContentPart, type InputItem } from './schemas.js';
import { userTranscriptMessage, type Transcript, type TranscriptMessage } from '../transcripts.js';
import type { UserPart } from '../../session/media.js';
import {
  checkMessageParts,
  imageDetail,
  imageFromUrl,
  mediaFromData,
  mediaFromReference,
  type ReadMessage,
} from '../media-parts.js';

/** An input message's content part as a caller part: `input_text`, `input_image` or `input_file` (issue 50). */
function inputPartOf(part: InputContentPart, param: string): UserPart {
  switch (part.type) {
    case 'input_text':
      return { type: 'text', text: part.text };
    case 'input_image': {
      const detail = imageDetail(part.detail, `${param}.detail`);
      if ((part.file_id == null) === (part.image_url == null))
        throw invalidRequest(param, `Invalid '${param}': send exactly one of image_url and file_id`, 'invalid_value');
      return part.file_id != null
        ? mediaFromReference(part.file_id, param, { kind: 'image', detail })
        : imageFromUrl(part.image_url, param, detail);
    }
    case 'input_file': {
      if ((part.file_id == null) === (part.file_data == null))
        throw invalidRequest(param, `Invalid '${param}': send exactly one of file_data and file_id`, 'invalid_value');
      const options = { filename: part.filename ?? undefined };
      return part.file_id != null
        ? mediaFromReference(part.file_id, param, { kind: 'file', ...options })
        : mediaFromData(part.file_data, param, options);
    }
  }
}

/**
 * An input message's content (`param`: the message, e.g. `input[0]`) read and checked: its text,
 * and its images and files (each refusal naming its part, `input[0].content[1]`).
 */
export function readInputContent(
  content: string | ReadonlyArray<InputContentPart | { type: string }>,
  param: string,
  maxMediaBytes: number,
): ReadMessage {
  if (typeof content === 'string') return { content: undefined, text: content, mediaKeys: [] };
  const at = (j: number) => `${param}.content[${j}]`;
  const parts = content.map((part, j) =>
    part.type === 'output_text' || part.type === 'refusal'
      ? { type: 'text' as const, text: contentText([part as { text?: string; refusal?: string }]) }
      : inputPartOf(part as InputContentPart, at(j)),
  );
  return checkMessageParts(parts, maxMediaBytes, at);
}

/** The text of a system or developer message: instructions are text, so media in one is refused. */
export function instructionsText(content: string | ReadonlyArray<{ type: string }>, param: string): string {
  if (typeof content !== 'string')
    for (const [j, part] of content.entries())
      if (part.type === 'input_image' || part.type === 'input_file')
        throw invalidRequest(
          `${param}.content[${j}]`,
          "a system or developer message is the conversation's instructions, which are text; send images and files in a user message",
          'unsupported_value',
        );
  return contentText(content as string | Array<{ text?: string }>);
}

/** Whether an input list carries a whole transcript (more than user messages). */
export function isTranscriptInput(input: string | readonly InputItem[]): boolean {
  if (typeof input === 'string') return false;
  return input.some((item) => !(item.type === undefined || item.type === 'message') || item.role !== 'user');
}

type Resolvable = InputItem | ConversationItem;

/** Resolves `item_reference`s from the logs of the sessions the list's item ids name. */
async function resolveReferences(ctx: RouteContext, items: readonly InputItem[]): Promise<Resolvable[]> {
  const references = items.filter((item) => item.type === 'item_reference');
  if (references.length === 0) return [...items];
  const sessions = new Set<string>();
  for (const item of items) {
    const id = (item as { id?: unknown }).id;
    const decoded = typeof id === 'string' ? decodeItemId(id) : undefined;
    if (decoded) sessions.add(decoded.sessionId);
  }
  const known = new Map<string, ConversationItem>();
  for (const sessionId of sessions) {
    if (!(await ctx.client.exists(sessionId))) continue;
    for (const item of conversationItems(sessionId, await ctx.client.events(sessionId, 0)))
      if (item.id !== undefined) known.set(item.id, item);
  }
  return items.map((item, i) => {
    if (item.type !== 'item_reference') return item;
    const found = known.get(item.id);
    if (!found)
      throw invalidRequest(
        `input[${i}].id`,
        `item ${JSON.stringify(item.id)} is not an item of a conversation this gateway holds: send the item itself`,
        'invalid_value',
      );
    return found;
  });
}

/**
 * The transcript an input list holds (`instructions` first among the instructions). Throws a
 * 400 naming the item for a list a model could not take (a tool output answering no call).
 */
export async function responsesTranscript(
  ctx: RouteContext,
  input: readonly InputItem[],
  instructions: string | undefined,
): Promise<Transcript & { sessionHint: string | undefined }> {
  const items = await resolveReferences(ctx, input);
  const system: string[] = instructions !== undefined ? [instructions] : [];
  const messages: TranscriptMessage[] = [];
  const answered = new Set<string>();
  for (const item of items) if (item.type === 'function_call_output') answered.add(item.call_id);
  const lastAssistant = (): Extract<TranscriptMessage, { role: 'assistant' }> | undefined => {
    const last = messages.at(-1);
    return last?.role === 'assistant' ? last : undefined;
  };
  items.forEach((item, i) => {
    switch (item.type) {
      case 'reasoning':
        return;
      case 'function_call': {
        // A call the client does not answer here was the worker's own.
        if (!answered.has(item.call_id)) return;
        const call = { callId: item.call_id, name: item.name, arguments: item.arguments };
        const open = lastAssistant();
        if (open) open.toolCalls.push(call);
        else messages.push({ role: 'assistant', text: '', toolCalls: [call] });
        return;
      }
      case 'function_call_output': {
        const output = item.output;
        messages.push({
          role: 'tool',
          callId: item.call_id,
          output: typeof output === 'string' ? output : contentText(output as Array<{ text?: string }>),
        });
        return;
      }
      default:
        break;
    }
    const message = item as { role?: string; content?: unknown };
    const content = message.content as string | Array<{ type: string }>;
    switch (message.role) {
      case 'system':
      case 'developer':
        system.push(instructionsText(content, `input[${i}]`));
        return;
      case 'user':
        messages.push(userTranscriptMessage(readInputContent(content, `input[${i}]`, ctx.client.maxMediaBytes)));
        return;
      case 'assistant': {
        const text = contentText(message.content as string | Array<{ text?: string }>);
        // One stretch of a turn is one message in the log's transcript: its texts joined.
        const open = lastAssistant();
        if (open && open.toolCalls.length === 0) open.text += text;
        else messages.push({ role: 'assistant', text, toolCalls: [] });
        return;
      }
      default:
        throw invalidRequest(`input[${i}]`, 'an input item this gateway cannot read', 'invalid_value');
    }
  });
  return {
    system: system.length > 0 ? system.join('\n\n') : undefined,
    messages: messages.filter((m) => m.role !== 'assistant' || m.text !== '' || m.toolCalls.length > 0),
    sessionHint: sessionOfItems(input),
  };
}

/** The session the newest output item of the list names by its id (the conversation the client's replies came from). */
function sessionOfItems(items: readonly InputItem[]): string | undefined {
  for (let i = items.length - 1; i >= 0; i--) {
    const id = (items[i] as { id?: unknown }).id;
    const decoded = typeof id === 'string' ? decodeItemId(id) : undefined;
    if (decoded) return decoded.sessionId;
  }
  return undefined;
}
