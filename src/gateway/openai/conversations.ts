/**
 * OpenAI Conversations (`/openai/v1/conversations`): a conversation is a session, its items the
 * history derived from the log (items.ts). Created with its instructions and first messages,
 * items added between turns as caller-supplied history, a message item deleted by a logged
 * replacement that hides it; the log itself keeps everything.
 */
import { randomUUID } from 'node:crypto';
import type { z } from 'zod';
import {
  isKnownEvent,
  suppliedHistoryProblem,
  unhideableReason,
  TurnFold,
  type SessionHeader,
  type StoredEvent,
} from '../../session/index.js';
import { OpenAiError, invalidRequest, notFound } from '../openai-errors.js';
import type { RouteContext } from '../route-table.js';
import { suppliedItems } from '../transcripts.js';
import { newConversationId } from './ids.js';
import { conversationItems, placedConversationItems } from './items.js';
import { instructionsText, responsesTranscript } from './responses-input.js';
import { contentText, type conversationCreateBody, type InputItem, type itemsListQuery } from './schemas.js';

const seconds = (ms: number): number => Math.floor(ms / 1000);

export async function requireConversation(
  ctx: RouteContext,
  id: string,
  param: string | null = null,
): Promise<SessionHeader> {
  if (!(await ctx.client.exists(id))) throw notFound(param, `No conversation found with id '${id}'.`);
  return ctx.client.header(id);
}

/** The conversation's metadata: the last `session/metadata` of the session itself (not of a turn). */
export function conversationMetadata(events: readonly StoredEvent[]): Record<string, string> {
  let metadata: Record<string, string> = {};
  for (const event of events) {
    if (isKnownEvent(event) && event.type === 'session/metadata' && event.data.messageId === undefined)
      metadata = event.data.metadata;
  }
  return metadata;
}

export async function readConversation(ctx: RouteContext, id: string) {
  const header = await requireConversation(ctx, id);
  return conversationOf(header, conversationMetadata(await ctx.client.events(id, 0)));
}

export function conversationOf(header: SessionHeader, metadata: Record<string, string>) {
  return { id: header.id, object: 'conversation' as const, created_at: seconds(header.createdAt), metadata };
}

/** Refuses, before anything is created, a message text the session would refuse (blank, too large). */
export function checkText(ctx: RouteContext, text: string, param: string): void {
  if (text.trim().length === 0) throw invalidRequest(param, 'a message must not be empty or blank', 'empty_message');
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes > ctx.client.maxMessageBytes)
    throw invalidRequest(
      param,
      `the message is ${bytes} bytes; the limit is ${ctx.client.maxMessageBytes} (SESSIONLOG_MAX_MESSAGE_BYTES)`,
      'message_too_large',
    );
}

/** A system or developer message first in a new conversation's items sets its instructions; anything else is a user message. */
function splitInitialItems(items: readonly InputItem[]): {
  system: string | undefined;
  messages: Array<{ text: string; index: number }>;
} {
  let system: string | undefined;
  const messages: Array<{ text: string; index: number }> = [];
  items.forEach((item, i) => {
    if (item.type !== undefined && item.type !== 'message') {
      throw invalidRequest(
        `items[${i}].type`,
        `a new conversation takes messages; ${item.type} items belong in the input of a response (or in POST /conversations/{id}/items)`,
        'unsupported_value',
      );
    }
    const message = item as { role: string; content: string | Array<{ type: string; text?: string }> };
    if (message.role === 'user') {
      // The initial messages are logged by a note, which holds text.
      const media = Array.isArray(message.content)
        ? message.content.findIndex((part) => part.type === 'input_image' || part.type === 'input_file')
        : -1;
      if (media >= 0)
        throw invalidRequest(
          `items[${i}].content[${media}]`,
          "a new conversation's items are logged as text; send images and files in a response's input",
          'unsupported_value',
        );
      messages.push({ text: contentText(message.content), index: i });
    } else if (i === 0 && message.role !== 'assistant') system = instructionsText(message.content, `items[${i}]`);
    else
      throw invalidRequest(
        `items[${i}].role`,
        message.role === 'assistant'
          ? 'assistant messages are added with POST /conversations/{id}/items (logged as caller-supplied history)'
          : `a ${message.role} message sets the conversation's instructions and must come first, once`,
        'unsupported_value',
      );
  });
  return { system, messages };
}

/** A page of conversation items, as OpenAI lists them. */
function itemPage(data: ReadonlyArray<{ id?: string }>, hasMore: boolean) {
  return { object: 'list', data, first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null, has_more: hasMore };
}

/** `POST /conversations`: a new session, its instructions and initial messages from the items. */
export async function createConversation(ctx: RouteContext, body: z.output<typeof conversationCreateBody>) {
  const { system, messages } = splitInitialItems(body?.items ?? []);
  const metadata = body?.metadata ?? {};
  for (const message of messages) checkText(ctx, message.text, `items[${message.index}].content`);
  const header = await ctx.client.create({
    sessionId: newConversationId(),
    ...(system !== undefined ? { agent: { system } } : {}),
  });
  // The initial messages are logged without a turn: the model gets them with the conversation's first response.
  if (messages.length > 0 || Object.keys(metadata).length > 0) {
    await ctx.client.note(header.id, {
      id: 'conversation.create',
      ...(Object.keys(metadata).length > 0 ? { metadata: { values: metadata } } : {}),
      ...(messages.length > 0
        ? { messages: messages.map((message) => ({ id: `${header.id}.item${message.index}`, text: message.text })) }
        : {}),
    });
  }
  return conversationOf(header, metadata);
}

/** `POST /conversations/:id`: replaces the conversation's metadata. */
export async function updateConversation(ctx: RouteContext, id: string, metadata: Record<string, string> | null) {
  const header = await requireConversation(ctx, id);
  // Answered at once: while a turn runs, the metadata is logged when it ends, and this answer
  // already shows it as it will be.
  const noted = await ctx.client.note(id, { metadata: { values: metadata ?? {} } }, { atOnce: true });
  if (noted.applies === 'turn-end') return conversationOf(header, metadata ?? {});
  return readConversation(ctx, id);
}

/** `DELETE /conversations/:id`: erases the session. */
export async function deleteConversation(ctx: RouteContext, id: string) {
  await requireConversation(ctx, id);
  await ctx.client.erase(id);
  return { id, object: 'conversation.deleted', deleted: true };
}

/** `POST /conversations/:id/items`: the items logged as caller-supplied history (user messages as such). */
export async function addConversationItems(ctx: RouteContext, id: string, items: readonly InputItem[]) {
  await requireConversation(ctx, id);
  const transcript = await responsesTranscript(ctx, items, undefined);
  if (transcript.system !== undefined)
    throw invalidRequest(
      'items',
      "system and developer messages are a conversation's instructions: send them as a response's instructions",
      'unsupported_value',
    );
  for (const [i, message] of transcript.messages.entries())
    if (message.role === 'user') checkText(ctx, message.text, `items[${i}]`);
  const events = await ctx.client.events(id, 0);
  const before = conversationItems(id, events).length;
  if (transcript.messages.length > 0) {
    const noteId = `items_${randomUUID().replaceAll('-', '')}`;
    const history = suppliedItems(transcript.messages, noteId, 'items');
    const problem = suppliedHistoryProblem(history);
    if (problem) throw invalidRequest('items', problem, 'invalid_value');
    // Items go between turns; a turn that runs (or waits for tool results) is answered at once, as deleting items is.
    refuseWhileAnswering(id, events, 'add items');
    // At once even in a race with a turn just started: the items are logged when it ends.
    await ctx.client.note(id, { id: noteId, history }, { atOnce: true });
  }
  return itemPage(conversationItems(id, await ctx.client.events(id, 0)).slice(before), false);
}

/** `GET /conversations/:id/items`: a page of the derived history. */
export async function listConversationItems(ctx: RouteContext, id: string, query: z.output<typeof itemsListQuery>) {
  await requireConversation(ctx, id);
  const items = conversationItems(id, await ctx.client.events(id, 0));
  if (query.order !== 'asc') items.reverse();
  let start = 0;
  if (query.after !== undefined) {
    const at = items.findIndex((item) => item.id === query.after);
    if (at < 0) throw invalidRequest('after', `conversation ${id} has no item '${query.after}'`, 'invalid_value');
    start = at + 1;
  }
  const limit = query.limit ?? 20;
  return itemPage(items.slice(start, start + limit), start + limit < items.length);
}

/** `GET /conversations/:id/items/:item_id`: one item of the derived history. */
export async function getConversationItem(ctx: RouteContext, id: string, itemId: string) {
  await requireConversation(ctx, id);
  const item = conversationItems(id, await ctx.client.events(id, 0)).find((i) => i.id === itemId);
  if (!item) throw notFound('item_id', `No item found with id '${itemId}' in conversation ${id}.`);
  return item;
}

/** A 409 `conversation_locked` when a turn of the conversation runs or waits for tool results. */
function refuseWhileAnswering(id: string, events: readonly StoredEvent[], what: string): void {
  const openTurn = TurnFold.of(events).openTurn;
  if (openTurn !== undefined)
    throw new OpenAiError(
      409,
      `conversation ${id} is answering a request (turn ${openTurn} is running or waits for tool results); ${what} once it has finished`,
      { code: 'conversation_locked' },
    );
}

/** `DELETE /conversations/:id/items/:item_id`: hides a message item by a logged replacement (the log keeps it). */
export async function deleteConversationItem(ctx: RouteContext, id: string, itemId: string) {
  const header = await requireConversation(ctx, id);
  const events = await ctx.client.events(id, 0);
  const found = placedConversationItems(id, events).find(({ item }) => item.id === itemId);
  if (!found) throw notFound('item_id', `No item found with id '${itemId}' in conversation ${id}.`);
  if (found.item.type === 'reasoning')
    throw invalidRequest(
      'item_id',
      'a reasoning item goes with the message it preceded: delete that message item',
      'invalid_value',
    );
  const unhideable = unhideableReason(events[found.seq]!);
  if (unhideable !== undefined)
    throw invalidRequest('item_id', `item '${itemId}' cannot be deleted: ${unhideable}`, 'invalid_value');
  refuseWhileAnswering(id, events, 'delete items');
  await ctx.client.note(id, { id: `delete_${found.seq}`, hide: [found.seq] }, { atOnce: true });
  return conversationOf(header, conversationMetadata(events));
}
