/**
 * Which media a request carries (DESIGN §6, issue 50): "sent when they matter". A pure,
 * deterministic function of the derived messages, applied before the request is built and
 * metered, so the same log gives the same request byte for byte and the meter prices exactly
 * what is sent.
 *
 * - The media of the last {@link MediaPolicy.recentTurns} user turns are sent. A user turn is a
 *   run of consecutive user messages (tool results and assistant replies end a run), counted
 *   from the newest.
 * - The media of the current tool round are sent: the tool results after the last assistant
 *   message (what the model asked for and has not seen yet, e.g. an `open_media` result).
 * - Every other medium becomes a short text stand-in naming the artifact, which the agent can
 *   open again with the built-in `open_media` tool.
 * - A medium the model cannot take (the catalogue's `input`) always becomes a stand-in saying so.
 *   The boundary refuses such media before a turn (`MEDIA_NOT_SUPPORTED`) unless the option
 *   `SESSIONLOG_MEDIA_UNSUPPORTED=stand-in` asks for this; an older medium met after a change of
 *   model lands here too, so a turn never fails at the provider for it.
 */
import type { ModelInputs } from '../model/catalogue.js';
import type { ContentBlock, MediaBlock, Message, TextBlock } from '../session/index.js';

/** The media policy: how many recent user turns keep their media, and what a model that cannot take a medium gets. */
export type MediaPolicy = {
  /** The media of this many most recent user turns are sent (`SESSIONLOG_MEDIA_RECENT_TURNS`, default 3). */
  recentTurns: number;
  /**
   * A message with media the model cannot take: refused at the boundary (`refuse`, default) or
   * sent with stand-ins (`stand-in`; `SESSIONLOG_MEDIA_UNSUPPORTED`).
   */
  unsupported: 'refuse' | 'stand-in';
};

/** The defaults of {@link MediaPolicy}. */
export const DEFAULT_MEDIA_POLICY: MediaPolicy = Object.freeze({ recentTurns: 3, unsupported: 'refuse' });

/** {@link MediaPolicy} with every default filled in and checked. */
export function resolveMediaPolicy(policy: Partial<MediaPolicy> = {}): MediaPolicy {
  const recentTurns = policy.recentTurns ?? DEFAULT_MEDIA_POLICY.recentTurns;
  if (!Number.isInteger(recentTurns) || recentTurns < 0)
    throw new RangeError(`media policy: recentTurns must be a non-negative integer, got ${recentTurns}`);
  return { recentTurns, unsupported: policy.unsupported ?? DEFAULT_MEDIA_POLICY.unsupported };
}

/** How the policy sees a derived message: a user message, a tool result, or an assistant reply. */
export type MediaRole = 'user' | 'tool' | 'assistant';

/** The role of `message` for the policy. */
export function mediaRoleOf(message: Message): MediaRole {
  if (message.role === 'assistant') return 'assistant';
  return message.source.kind === 'tool' ? 'tool' : 'user';
}

/**
 * For each message (by its role, in history order), whether its media are sent: the user
 * messages of the last `recentTurns` user turns and the tool results after the last assistant
 * message. O(n), from the newest message back.
 */
export function mediaSentMask(roles: readonly MediaRole[], recentTurns: number): boolean[] {
  const sent = new Array<boolean>(roles.length).fill(false);
  let seenAssistant = false;
  let turns = 0;
  let inRun = false;
  for (let i = roles.length - 1; i >= 0; i--) {
    const role = roles[i]!;
    if (role === 'user') {
      if (!inRun) turns++;
      inRun = true;
      sent[i] = turns <= recentTurns;
      continue;
    }
    inRun = false;
    if (role === 'assistant') seenAssistant = true;
    else sent[i] = !seenAssistant;
  }
  return sent;
}

/** Whether `blocks` (or a tool result among them) hold an image or a file. */
export function holdsMedia(blocks: readonly ContentBlock[]): boolean {
  for (const block of blocks) {
    if (block.type === 'image' || block.type === 'file') return true;
    if (block.type === 'tool-result' && holdsMedia(block.content)) return true;
  }
  return false;
}

/** A size for people: bytes, KiB or MiB with one decimal. */
function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / (1024 * 1024)).toFixed(1)} MiB`;
}

/**
 * The text that stands in for a medium not sent: what it is, its size and where it is. `older`:
 * left out by the policy (the agent may open it again); `unsupported`: the model cannot take it.
 */
export function mediaStandIn(block: MediaBlock, reason: 'older' | 'unsupported'): TextBlock {
  const { source } = block;
  let what: string;
  if (source.kind === 'url') {
    what = `image ${source.url}`;
  } else {
    const name = block.type === 'file' && block.filename !== undefined ? ` ${JSON.stringify(block.filename)}` : '';
    const pixels = source.width !== undefined && source.height !== undefined ? ` ${source.width}x${source.height}` : '';
    what = `${block.type}${name} ${source.mediaType}${pixels}, ${formatBytes(source.bytes)}, ${source.locator}`;
  }
  const note =
    reason === 'unsupported'
      ? `not sent: this model does not take ${block.type === 'image' ? 'images' : 'files'}`
      : source.kind === 'url'
        ? 'an earlier image, not sent again'
        : 'open it again with the open_media tool';
  return { type: 'text', text: `[${what}; ${note}]` };
}

/**
 * `blocks` as a request carries them: each medium kept when `sent` and the model takes its kind,
 * else its stand-in (inside tool results too), on a line of its own after other blocks (a
 * message of text blocks goes as one string). The same array when nothing changes.
 */
export function blocksForRequest(blocks: ContentBlock[], sent: boolean, inputs: ModelInputs): ContentBlock[] {
  if (!holdsMedia(blocks)) return blocks;
  const standIn = (block: MediaBlock, reason: 'older' | 'unsupported', index: number): TextBlock => {
    const { text } = mediaStandIn(block, reason);
    return { type: 'text', text: index === 0 ? text : `\n${text}` };
  };
  return blocks.map((block, index): ContentBlock => {
    switch (block.type) {
      case 'image':
      case 'file':
        if (!inputs[block.type]) return standIn(block, 'unsupported', index);
        return sent ? block : standIn(block, 'older', index);
      case 'tool-result':
        return { ...block, content: blocksForRequest(block.content, sent, inputs) };
      default:
        return block;
    }
  });
}

/** `message` as a request carries it (see {@link blocksForRequest}); the same object when it holds no media. */
export function messageForRequest<M extends Message>(message: M, sent: boolean, inputs: ModelInputs): M {
  const content = blocksForRequest(message.content, sent, inputs);
  return content === message.content ? message : ({ ...message, content } as M);
}

/**
 * The derived messages as the request to a model taking `inputs` carries them under `policy`
 * (see the module comment). Messages without media are returned as they are, so a log without
 * media gives exactly the request it gave before media existed.
 */
export function applyMediaPolicy(messages: readonly Message[], policy: MediaPolicy, inputs: ModelInputs): Message[] {
  if (!messages.some((message) => holdsMedia(message.content))) return [...messages];
  const sent = mediaSentMask(messages.map(mediaRoleOf), policy.recentTurns);
  return messages.map((message, i) => messageForRequest(message, sent[i]!, inputs));
}
