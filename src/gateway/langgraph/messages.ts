/**
 * Thread state in LangChain's message format (issue 25): a thread's `values` are
 * `{messages: [...]}`, derived from the session's surface — what the model is sent next, so a
 * compaction summary stands where the turns it summarises were (as a `system` message) and a
 * pruned tool result is its shortened form. Message ids are stable across reads: a user
 * message keeps its logged id, an AI message the id its text streamed under (the Responses
 * API's item id, so a `messages` chunk and the final message match), a tool message
 * `tool_<callId>`. Also the reading of a run's `input.messages`.
 */
import {
  foldSurfaceView,
  isKnownEvent,
  textOf,
  type AssistantMessage,
  type ContentBlock,
  type StoredEvent,
  type TokenUsage,
} from '../../session/index.js';
import { itemTag, messageItemId } from '../turn-stream/ids.js';
import { OutputAssembler } from '../turn-stream/output-items.js';
import { unsupported } from './errors.js';
import type { UserPart } from '../../session/media.js';
import {
  checkMessageParts,
  imageDetail,
  imageFromUrl,
  mediaBlocksOf,
  mediaFromData,
  mediaFromReference,
  type ReadMessage,
} from '../media-parts.js';

/** A message as LangChain serialises it in LangGraph state (`BaseMessage` as a dict). */
export type LangChainMessage = {
  type: 'human' | 'ai' | 'tool' | 'system';
  id: string;
  /** Text; a human message with images or files: LangChain's standard content blocks ({@link humanContent}). */
  content: string | Array<Record<string, unknown>>;
  additional_kwargs: Record<string, unknown>;
  response_metadata: Record<string, unknown>;
  name?: string | null;
  tool_calls?: Array<{ id: string; name: string; args: unknown; type: 'tool_call' }>;
  invalid_tool_calls?: unknown[];
  usage_metadata?: { input_tokens: number; output_tokens: number; total_tokens: number };
  tool_call_id?: string;
  status?: 'success' | 'error';
};

export function argsOf(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return {};
  }
}

function reasoningOf(blocks: readonly ContentBlock[]): string {
  let out = '';
  for (const block of blocks) if (block.type === 'reasoning') out += block.text;
  return out;
}

export function usageMetadataOf(usage: TokenUsage | undefined): LangChainMessage['usage_metadata'] {
  if (!usage) return undefined;
  const input = usage.inputTokens + (usage.cacheReadTokens ?? 0) + (usage.cacheWriteTokens ?? 0);
  return { input_tokens: input, output_tokens: usage.outputTokens, total_tokens: input + usage.outputTokens };
}

/** The id an AI message has in LangGraph state: the item id its text (or else its reasoning) streamed under. */
export function aiMessageId(
  tag: string,
  turn: number,
  step: number,
  ids: { message?: string; reasoning?: string },
): string {
  if (ids.message) return ids.message;
  if (ids.reasoning) return `msg_${ids.reasoning.slice('rs_'.length)}`;
  return messageItemId(tag, turn, step, 0);
}

export function aiMessage(
  id: string,
  message: AssistantMessage,
  extra: { usage?: TokenUsage | undefined; finishReason?: string | undefined },
): LangChainMessage {
  const reasoning = reasoningOf(message.content);
  const usage = usageMetadataOf(extra.usage);
  return {
    type: 'ai',
    id,
    content: textOf(message.content),
    additional_kwargs: reasoning.length > 0 ? { reasoning_content: reasoning } : {},
    response_metadata: {
      ...(message.source.kind === 'model' ? { model_name: message.source.model } : {}),
      ...(extra.finishReason !== undefined ? { finish_reason: extra.finishReason } : {}),
    },
    name: null,
    tool_calls: message.content
      .filter((block) => block.type === 'tool-call')
      .map((block) => ({ id: block.id, name: block.name, args: argsOf(block.arguments), type: 'tool_call' as const })),
    invalid_tool_calls: [],
    ...(usage ? { usage_metadata: usage } : {}),
  };
}

/**
 * A human message's content in LangGraph state: its text as a string, as always, unless it holds
 * media; then LangChain's v1 standard blocks in order: `{type: 'text', text}`, a stored medium as
 * `{type: 'image' | 'file', fileId: <locator>, mimeType}` (the locator is what a run can send
 * back; its bytes are at the native artifact route), a remote image as `{type: 'image', url}`.
 */
export function humanContent(content: readonly ContentBlock[]): LangChainMessage['content'] {
  if (mediaBlocksOf(content).length === 0) return textOf(content);
  return content.flatMap((block): Array<Record<string, unknown>> => {
    switch (block.type) {
      case 'text':
        return [{ type: 'text', text: block.text }];
      case 'image':
      case 'file': {
        const { source } = block;
        const metadata = {
          ...(block.type === 'image' && block.detail !== undefined ? { detail: block.detail } : {}),
          ...(block.type === 'file' && block.filename !== undefined ? { filename: block.filename } : {}),
        };
        return [
          {
            type: block.type,
            ...(source.kind === 'url' ? { url: source.url } : { fileId: source.locator, mimeType: source.mediaType }),
            ...(Object.keys(metadata).length > 0 ? { metadata } : {}),
          },
        ];
      }
      default:
        return [];
    }
  });
}

/** The message a surface event stands for in LangGraph state (`names`: each call id's tool name). */
export function stateMessageOf(
  event: StoredEvent,
  tag: string,
  assembler: OutputAssembler,
  names: ReadonlyMap<string, string>,
): LangChainMessage | undefined {
  if (!isKnownEvent(event)) return undefined;
  switch (event.type) {
    case 'user/message': {
      const { id, content, source } = event.data;
      return {
        type: source.kind === 'plugin' ? 'system' : 'human',
        id,
        content: humanContent(content),
        additional_kwargs: source.kind === 'plugin' ? { sessionlog_source: source.plugin } : {},
        response_metadata: {},
        name: null,
      };
    }
    case 'assistant/message': {
      const { turn, step, message, usage, finishReason } = event.data;
      if (message.content.length === 0) return undefined;
      const id = aiMessageId(tag, turn, step, assembler.itemsOfMessage.get(event.seq) ?? {});
      return aiMessage(id, message, { usage, finishReason });
    }
    case 'tool/result': {
      const block = event.data.message.content[0];
      return {
        type: 'tool',
        id: `tool_${block.toolCallId}`,
        content: textOf(block.content),
        tool_call_id: block.toolCallId,
        name: names.get(block.toolCallId) ?? null,
        status: block.isError || event.data.error ? 'error' : 'success',
        additional_kwargs: {},
        response_metadata: {},
      };
    }
    default:
      return undefined;
  }
}

/** The thread's messages: the surface of `events` (a whole log, seq 0 first) in LangChain's format. */
export function threadMessages(sessionId: string, events: readonly StoredEvent[]): LangChainMessage[] {
  const tag = itemTag(sessionId);
  const assembler = new OutputAssembler(tag);
  const names = new Map<string, string>();
  for (const event of events) {
    assembler.push(event);
    if (isKnownEvent(event) && event.type === 'tool/call') names.set(event.data.callId, event.data.name);
  }
  const out: LangChainMessage[] = [];
  for (const node of foldSurfaceView(events).nodes) {
    const message = stateMessageOf(events[node.seq]!, tag, assembler, names);
    if (message) out.push(message);
  }
  return out;
}

// ---- a run's input ----------------------------------------------------------------------------

const HUMAN_TYPES = new Set(['human', 'user', 'HumanMessage', 'HumanMessageChunk']);

const asString = (value: unknown): string | undefined => (typeof value === 'string' ? value : undefined);

/**
 * One content block of a human message as a caller part, in any shape LangChain sends: text; an
 * OpenAI-style `{type: 'image_url', image_url: {url} | url}`; a v1 standard block `{type:
 * 'image' | 'file', url | data | fileId, mimeType}`; or the older data block `{type, source_type:
 * 'url' | 'base64' | 'id', url | data | id, mime_type}`. A file id is a stored medium's locator.
 */
function contentPartOf(block: unknown, field: string): UserPart {
  if (typeof block === 'string') return { type: 'text', text: block };
  if (typeof block !== 'object' || block === null) throw unsupported(field, 'a content block must be an object');
  const b = block as Record<string, unknown>;
  switch (b.type) {
    case 'text':
      return { type: 'text', text: String(b.text ?? '') };
    case 'image_url': {
      const image = b.image_url;
      const url = typeof image === 'object' && image !== null ? (image as { url?: unknown }).url : image;
      const detail = typeof image === 'object' && image !== null ? (image as { detail?: unknown }).detail : undefined;
      return imageFromUrl(url, field, imageDetail(detail, `${field}.image_url.detail`));
    }
    case 'image':
    case 'file': {
      const kind = b.type;
      const mediaType = asString(b.mimeType) ?? asString(b.mime_type);
      const metadata = (typeof b.metadata === 'object' && b.metadata !== null ? b.metadata : {}) as Record<
        string,
        unknown
      >;
      const filename = asString(metadata.filename) ?? asString(metadata.name) ?? asString(b.filename);
      const detail = kind === 'image' ? imageDetail(metadata.detail ?? b.detail, `${field}.detail`) : undefined;
      const sourceType = asString(b.source_type);
      const id = sourceType === 'id' ? b.id : b.fileId;
      if (id !== undefined) return mediaFromReference(id, field, { kind, filename, detail });
      const url = sourceType === undefined || sourceType === 'url' ? b.url : undefined;
      if (url !== undefined) {
        if (kind === 'image' || (typeof url === 'string' && url.startsWith('data:')))
          return typeof url === 'string' && url.startsWith('data:')
            ? mediaFromData(url, field, { mediaType, filename, detail })
            : imageFromUrl(url, field, detail);
        throw unsupported(field, 'a file is not fetched from a URL: send its data (base64) or a stored file id');
      }
      if (b.data !== undefined && (sourceType === undefined || sourceType === 'base64'))
        return mediaFromData(b.data, field, { mediaType, filename, detail });
      throw unsupported(field, `an ${kind} block needs url, data (base64 with a mime type) or a file id`);
    }
    default:
      throw unsupported(
        field,
        `only text, image and file content is accepted (got a ${String(b.type ?? typeof block)} block)`,
      );
  }
}

/** A human message's content (a string or a list of blocks), read and checked (media refusals name the block). */
function readContent(content: unknown, field: string, maxMediaBytes: number): ReadMessage {
  if (typeof content === 'string') return { content: undefined, text: content, mediaKeys: [] };
  if (!Array.isArray(content)) throw unsupported(field, 'content must be a string or a list of content blocks');
  const at = (j: number) => `${field}[${j}]`;
  return checkMessageParts(
    content.map((block: unknown, j) => contentPartOf(block, at(j))),
    maxMediaBytes,
    at,
  );
}

/**
 * The human messages a run's `input` adds (`{messages: [...]}`, each in any of LangChain's
 * shapes: `{role: 'user'}`, `{type: 'human'}`, a serialised `HumanMessage`, or a bare string),
 * with their images and files (issue 50) checked. Other state keys, and messages of other types
 * (the thread's AI and tool messages come from its log), are a 422 naming them; a bad medium is
 * a 400 naming its block.
 */
export function inputMessages(input: unknown, maxMediaBytes: number): ReadMessage[] {
  if (input === null || input === undefined) return [];
  if (typeof input !== 'object' || Array.isArray(input))
    throw unsupported('input', 'the input must be an object such as {"messages": [{"role": "user", "content": "…"}]}');
  const { messages, ...rest } = input as Record<string, unknown>;
  const other = Object.keys(rest)[0];
  if (other !== undefined)
    throw unsupported(`input.${other}`, "a thread's state has only `messages` (the session's derived history)");
  if (messages === undefined) return [];
  const list = Array.isArray(messages) ? messages : [messages];
  return list.map((message, i) => {
    const field = `input.messages[${i}]`;
    if (typeof message === 'string') return { content: undefined, text: message, mediaKeys: [] };
    if (typeof message !== 'object' || message === null)
      throw unsupported(field, 'a message must be an object or a string');
    const m = message as Record<string, unknown>;
    // LangChain's serialised form: {lc: 1, type: 'constructor', id: [..., 'HumanMessage'], kwargs: {content}}.
    if (m.lc !== undefined && m.type === 'constructor' && Array.isArray(m.id)) {
      const kind = String(m.id.at(-1));
      if (!HUMAN_TYPES.has(kind)) throw unsupported(field, `only human messages can be sent (got a ${kind})`);
      return readContent(
        (m.kwargs as { content?: unknown } | undefined)?.content,
        `${field}.kwargs.content`,
        maxMediaBytes,
      );
    }
    const kind = String(m.type ?? m.role ?? '');
    if (!HUMAN_TYPES.has(kind))
      throw unsupported(
        field,
        `only human (user) messages can be sent (got ${kind === '' ? 'a message without type or role' : `type ${kind}`}); the thread's AI and tool messages come from its log`,
      );
    return readContent(m.content, `${field}.content`, maxMediaBytes);
  });
}
