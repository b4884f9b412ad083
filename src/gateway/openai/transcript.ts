/**
 * Stateless transcripts (issue 24): clients that resend the whole conversation each call (Chat
 * Completions, the AI SDK, LangChain, the Agents SDK's tool loop) are reconciled with a
 * session's log by content. A transcript is compared, message by message (by digest), with the
 * messages the log holds; the longest common prefix is reused and only the new tail is logged.
 * A transcript that diverges (an edited message, a regenerated reply) forks the session at the
 * last turn boundary before the divergence; the log itself is never rewritten.
 */
import { createHash } from 'node:crypto';
import {
  hiddenSeqs,
  isKnownEvent,
  type StoredEvent,
  type SuppliedItem,
  type SuppliedToolCall,
} from '../../session/index.js';

/** One message of a transcript as a client sends it (system messages are kept apart: they are instructions). */
export type TranscriptMessage =
  | { role: 'user'; text: string }
  | { role: 'assistant'; text: string; toolCalls: SuppliedToolCall[] }
  | { role: 'tool'; callId: string; output: string };

/** A client's transcript: its instructions (system/developer messages, joined) and its messages in order. */
export type Transcript = { system: string | undefined; messages: TranscriptMessage[] };

/** Tool-call arguments as JSON in one spelling (clients parse and re-serialise them). */
function canonicalArguments(text: string): string {
  try {
    return JSON.stringify(JSON.parse(text) as unknown);
  } catch {
    return text;
  }
}

/** A digest of one message's content: what makes two messages the same message. */
export function messageDigest(message: TranscriptMessage): string {
  const hash = createHash('sha256');
  switch (message.role) {
    case 'user':
      hash.update(`user\0${message.text}`);
      break;
    case 'assistant':
      hash.update(`assistant\0${message.text.trim()}`);
      for (const call of message.toolCalls)
        hash.update(`\0call\0${call.callId}\0${call.name}\0${canonicalArguments(call.arguments)}`);
      break;
    case 'tool':
      hash.update(`tool\0${message.callId}\0${message.output}`);
      break;
  }
  return hash.digest('hex');
}

/**
 * The digest of each prefix of `messages`: `[0]` of none, `[i]` of the first `i` messages. A
 * prefix digest names a transcript point in the transcript index (store `transcripts`).
 */
export function prefixDigests(messages: readonly TranscriptMessage[]): string[] {
  const digests = [createHash('sha256').update('sessionlog-transcript-v1').digest('hex')];
  for (const message of messages)
    digests.push(createHash('sha256').update(digests.at(-1)!).update(messageDigest(message)).digest('hex'));
  return digests;
}

/** A message the log holds, with where it is. */
export type LoggedMessage = {
  message: TranscriptMessage;
  seq: number;
  /** The id it is logged under (a user message's id answers "which turn did this start"). */
  id: string;
  /** The turn it belongs to (user messages: the turn they started; outside a turn: undefined). */
  turn: number | undefined;
};

/** What a session's log says for reconciliation: its messages and where a fork may cut it. */
export type LoggedTranscript = {
  messages: LoggedMessage[];
  /**
   * Fork points: `[seq, kept]` pairs, in order, where the log may be cut (not inside a turn)
   * keeping exactly the first `kept` messages.
   */
  cuts: Array<{ seq: number; kept: number }>;
  /** The open turn, if any, and the calls of its last step still waiting for results. */
  openTurn: number | undefined;
};

const textOfBlocks = (content: ReadonlyArray<{ type: string; text?: string }>): string =>
  content
    .filter((block) => block.type === 'text')
    .map((block) => block.text ?? '')
    .join('');

/**
 * The transcript a log holds as its clients saw it: the user's messages; for each model turn,
 * one assistant message per stretch between the caller's tool rounds (its texts joined, as
 * `output_text` joins them, with the calls the caller was asked to run), then the caller's
 * results; caller-supplied history as it was supplied. Calls the worker ran itself and their
 * results never reached the client, so they are not part of it; compaction and pruning do not
 * change it (they shadow the surface, not the log); messages the caller hid (session/hide.ts)
 * are gone from it.
 */
export function loggedTranscript(events: readonly StoredEvent[]): LoggedTranscript {
  // Messages a caller hid (a deleted item) are not part of it either.
  const hidden = hiddenSeqs(events);
  const messages: LoggedMessage[] = [];
  const cuts: LoggedTranscript['cuts'] = [];
  let openTurn: number | undefined;
  let callerTurn = false;
  // The stretch of a model turn not yet shown: its texts, calls and where its last message is.
  let stretch:
    { texts: string[]; calls: SuppliedToolCall[]; external: Set<string>; seq: number; id: string } | undefined;
  const flush = (turn: number | undefined) => {
    if (!stretch) return;
    const calls = stretch.calls.filter((call) => stretch!.external.has(call.callId));
    const text = stretch.texts.join('');
    if (text !== '' || calls.length > 0)
      messages.push({
        message: { role: 'assistant', text, toolCalls: calls },
        seq: stretch.seq,
        id: stretch.id,
        turn,
      });
    stretch = undefined;
  };
  for (const event of events) {
    if (!isKnownEvent(event)) continue;
    switch (event.type) {
      case 'turn/start':
        // Just before a turn is a place to cut too (before the first one: keeping no message).
        if (event.seq > 0 && cuts.at(-1)?.seq !== event.seq - 1)
          cuts.push({ seq: event.seq - 1, kept: messages.length });
        openTurn = event.data.turn;
        callerTurn = event.data.origin === 'caller';
        break;
      case 'turn/end':
        flush(openTurn);
        openTurn = undefined;
        cuts.push({ seq: event.seq, kept: messages.length });
        break;
      case 'user/message':
        if (event.surfaceOp !== 'append' || event.data.source.kind !== 'user' || hidden.has(event.seq)) break;
        messages.push({
          message: { role: 'user', text: textOfBlocks(event.data.content) },
          seq: event.seq,
          id: event.data.id,
          turn: openTurn,
        });
        if (openTurn === undefined) cuts.push({ seq: event.seq, kept: messages.length });
        break;
      case 'assistant/message': {
        if (event.surfaceOp !== 'append' || hidden.has(event.seq)) break;
        const content = event.data.message.content;
        const calls = content.flatMap((block) =>
          block.type === 'tool-call' ? [{ callId: block.id, name: block.name, arguments: block.arguments }] : [],
        );
        if (callerTurn) {
          messages.push({
            message: { role: 'assistant', text: textOfBlocks(content), toolCalls: calls },
            seq: event.seq,
            id: event.data.message.id,
            turn: event.data.turn,
          });
          break;
        }
        stretch ??= { texts: [], calls: [], external: new Set(), seq: event.seq, id: event.data.message.id };
        stretch.texts.push(textOfBlocks(content));
        stretch.calls.push(...calls);
        stretch.seq = event.seq;
        stretch.id = event.data.message.id;
        break;
      }
      case 'tool/approval-request':
        if (event.data.kind === 'external') stretch?.external.add(event.data.callId);
        break;
      case 'tool/result': {
        if (event.surfaceOp !== 'append') break;
        // A result the worker produced stays inside the stretch; the caller's close it.
        if (!callerTurn && event.data.origin !== 'external') break;
        flush(event.data.turn);
        const block = event.data.message.content[0];
        messages.push({
          message: { role: 'tool', callId: block.toolCallId, output: textOfBlocks(block.content) },
          seq: event.seq,
          id: event.data.message.id,
          turn: event.data.turn,
        });
        break;
      }
      default:
        break;
    }
  }
  // A turn waiting for the caller's results shows the calls it asked for.
  flush(openTurn);
  return { messages, cuts, openTurn };
}

/** How many leading messages two transcripts share. */
export function commonPrefix(a: readonly TranscriptMessage[], b: readonly TranscriptMessage[]): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (messageDigest(a[i]!) !== messageDigest(b[i]!)) return i;
  return n;
}

/** The last fork point that keeps at most `kept` messages (undefined: the log has none). */
export function cutAtOrBefore(logged: LoggedTranscript, kept: number): { seq: number; kept: number } | undefined {
  let best: { seq: number; kept: number } | undefined;
  for (const cut of logged.cuts) if (cut.kept <= kept) best = cut;
  return best;
}

/** The messages `tail` holds as caller-supplied history items, with ids made from `idPrefix`. */
export function suppliedItems(tail: readonly TranscriptMessage[], idPrefix: string): SuppliedItem[] {
  return tail.map((message, i) => {
    const id = `${idPrefix}.${i}`;
    switch (message.role) {
      case 'user':
        return { role: 'user', id, text: message.text };
      case 'assistant':
        return {
          role: 'assistant',
          id,
          ...(message.text !== '' ? { text: message.text } : {}),
          ...(message.toolCalls.length > 0 ? { toolCalls: message.toolCalls } : {}),
        };
      case 'tool':
        return { role: 'tool', id, callId: message.callId, output: message.output };
    }
  });
}
