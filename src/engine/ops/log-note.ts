/**
 * A caller's note logged between turns (DESIGN §8): the session's or a turn's metadata
 * (`session/metadata`, never model-visible), user messages the model gets with the next turn
 * without a turn of their own (a conversation's initial items) and caller-supplied history
 * (session/supplied.ts: a transcript's replies, in caller turns) and hidden messages
 * (session/hide.ts: deleted conversation items), in one batch, once per note id.
 * The workflow runs it only while no turn or compaction writes the log.
 */
import { hideEvents, suppliedHistoryEvents, type NewEvent } from '../../session/index.js';
import type { EngineDeps } from '../deps.js';
import { readNote } from '../inbox.js';
import { LogWriter } from '../log-writer.js';
import { noteOp } from '../ops.js';
import type { LogNoteInput, NoteResult } from '../types.js';

export async function logNote(deps: EngineDeps, input: LogNoteInput): Promise<NoteResult> {
  const writer = await LogWriter.open(deps.store, input.sessionId, input.runId, input.knownHead);
  const op = noteOp(input.runId, input.note.id);
  const result = (): NoteResult => ({ headSeq: writer.session.nextSeq, lastTurn: writer.session.turns.lastTurn });
  if (writer.logged(op).length > 0) return result();
  const events: NewEvent[] = [];
  const { metadata, messages, history, hide } = await readNote(deps.store, input.sessionId, input.note);
  if (metadata) {
    events.push({
      type: 'session/metadata',
      time: deps.now(),
      data: {
        metadata: metadata.values,
        ...(metadata.messageId !== undefined ? { messageId: metadata.messageId } : {}),
      },
    });
  }
  for (const message of messages ?? []) {
    events.push({
      type: 'user/message',
      time: deps.now(),
      data: { id: message.id, role: 'user', content: [{ type: 'text', text: message.text }], source: { kind: 'user' } },
      surfaceOp: 'append',
    });
  }
  if (input.note.budget !== undefined) {
    events.push({
      type: 'session/budget',
      time: deps.now(),
      data: { budget: input.note.budget, ...(input.note.by !== undefined ? { by: input.note.by } : {}) },
    });
  }
  if (history) events.push(...suppliedHistoryEvents(history, writer.session.turns.lastTurn, deps.now()).events);
  if (hide) {
    const session = writer.session;
    events.push(
      ...hideEvents(hide, session.surfaceNodes, (seq) => session.events[seq], session.turns.lastTurn, deps.now()),
    );
  }
  // The note's inbox entry goes with the batch that logs it. A note with nothing to log (metadata
  // only of hidden seqs already off the surface, say) has no batch: its caller removes the entry
  // once the update that carried it returns, as it does for every input.
  if (events.length > 0) await writer.append(events, op, input.note.ref ? [input.note.ref.key] : []);
  return result();
}
