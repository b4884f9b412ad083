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
import { contentText, type InputItem } from './schemas.js';
import type { Transcript, TranscriptMessage } from '../transcripts.js';

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
    const text = contentText(message.content as string | Array<{ text?: string }>);
    switch (message.role) {
      case 'system':
      case 'developer':
        system.push(text);
        return;
      case 'user':
        messages.push({ role: 'user', text });
        return;
      case 'assistant': {
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
