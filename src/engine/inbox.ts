/**
 * What callers sent, read from the store's inbox where the client left it (DESIGN §5.2): the
 * messages entering a step and a note's content, checked against the references that crossed
 * Temporal.
 *
 * An entry is removed by the append that logs it (the batch's `delivered` keys: in its own
 * transaction on SQLite and PostgreSQL, right after it on JSONL), never on its own. What is left
 * behind (a JSONL removal that failed, an entry a retried caller wrote again after its input was
 * logged) is removed when the session's next run opens ({@link removeLogged}).
 */
import type { ContentBlock, SessionView } from '../session/index.js';
import {
  inboxEntriesByLogged,
  parseMessageBody,
  parseNoteBody,
  readInboxEntry,
  type MessageBody,
  type NoteBody,
  type SessionStore,
} from '../persistence/index.js';
import type { NoteInput, UserInput } from './types.js';

/** A message as it is logged: its id, text (and blocks, with media) and (starting a turn) the caller's tools. */
export type EnteringMessage = MessageBody & { id: string };

/**
 * The content a message is logged with: its blocks when it holds media (issue 50: references to
 * media the client stored, never bytes), else its text as one block, as before media.
 */
export function messageContent(message: EnteringMessage): ContentBlock[] {
  return message.content ?? [{ type: 'text', text: message.text }];
}

/** The text (and tools) of each message, from the inbox (or inline, for a message queued before it). */
export async function readMessages(
  store: SessionStore,
  sessionId: string,
  messages: readonly UserInput[],
): Promise<EnteringMessage[]> {
  return Promise.all(
    messages.map(async (message) => {
      if (message.ref === undefined) {
        return {
          id: message.id,
          text: message.text ?? '',
          ...(message.tools !== undefined ? { tools: message.tools } : {}),
        };
      }
      return { id: message.id, ...(await readInboxEntry(store.inbox, sessionId, message.ref, parseMessageBody)) };
    }),
  );
}

/** A note's content, from the inbox (or inline, for a note sent before it). */
export async function readNote(store: SessionStore, sessionId: string, note: NoteInput): Promise<NoteBody> {
  if (note.ref !== undefined) return readInboxEntry(store.inbox, sessionId, note.ref, parseNoteBody);
  return {
    ...(note.metadata ? { metadata: note.metadata } : {}),
    ...(note.messages ? { messages: note.messages.map((m) => ({ id: m.id, text: m.text ?? '' })) } : {}),
  };
}

/**
 * At the start of a run: removes the inbox's entries the log is done with (a message or note it
 * holds, an answer to a call it shows answered or closed: retried inputs, removals that failed,
 * an answer that came second); returns how many entries are left waiting.
 */
export async function removeLogged(store: SessionStore, session: SessionView): Promise<number> {
  const entries = await store.inbox.list(session.header.id);
  if (entries.length === 0) return 0;
  const { logged, waiting } = inboxEntriesByLogged(entries, session.events);
  if (logged.length > 0) await store.inbox.remove(session.header.id, logged);
  return waiting.length;
}
