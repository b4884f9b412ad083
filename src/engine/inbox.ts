/**
 * What callers sent, read from the store's inbox where the client left it (DESIGN §5.2): the
 * messages entering a step and a note's content, checked against the references that crossed
 * Temporal; and the removal of entries once the log holds them.
 */
import type { SessionView } from '../session/index.js';
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

/** A message as it is logged: its id, text and (starting a turn) the caller's tools. */
export type EnteringMessage = MessageBody & { id: string };

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
 * Removes entries the log now holds. Best effort: an entry left behind (the store failed here)
 * is removed by the session's next run ({@link removeLogged}) and never logged twice (the log
 * is checked by id first).
 */
export async function removeDelivered(store: SessionStore, sessionId: string, keys: readonly string[]): Promise<void> {
  if (keys.length === 0) return;
  await store.inbox.remove(sessionId, keys).catch(() => undefined);
}

/**
 * At the start of a run: removes the inbox's entries whose message the log already holds
 * (answered retries, removals that failed); returns how many entries are left waiting.
 */
export async function removeLogged(store: SessionStore, session: SessionView): Promise<number> {
  const entries = await store.inbox.list(session.header.id);
  if (entries.length === 0) return 0;
  const { logged, waiting } = inboxEntriesByLogged(entries, session.events);
  if (logged.length > 0) await store.inbox.remove(session.header.id, logged);
  return waiting.length;
}
