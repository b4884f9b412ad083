/**
 * Log invariant checks for `sessionlog sessions verify`, salvage and tests: contiguous seqs,
 * turn and step balance and numbering, tool pairing in the derived history, no live
 * compaction bracket, and a surface that replays. Every problem is reported with its seq.
 */
import { isKnownEvent, type SessionHeader, type StoredEvent } from './events.js';
import { Session } from './session.js';
import { TurnFold } from './turns.js';

export type Violation = { seq: number | null; rule: string; message: string };

/** Every invariant violation in `events` (empty for a healthy log). Never throws. */
export function verifyLog(header: SessionHeader, events: readonly StoredEvent[]): Violation[] {
  const violations: Violation[] = [];
  const add = (seq: number | null, rule: string, message: string) => violations.push({ seq, rule, message });
  events.forEach((e, i) => {
    if (e.seq !== i) add(e.seq, 'contiguous-seqs', `event at index ${i} has seq ${e.seq}`);
  });
  let session: Session | undefined;
  try {
    session = Session.fromEvents(header, events);
  } catch (error) {
    add(null, 'replay', `the log does not replay: ${(error as Error).message}`);
  }
  const turns = new TurnFold();
  let bracket: { id: string; seq: number } | undefined;
  for (const e of events) {
    for (const problem of turns.apply(e)) add(problem.seq, problem.rule, problem.message);
    if (!isKnownEvent(e)) continue;
    switch (e.type) {
      case 'compaction/start':
        if (bracket)
          add(e.seq, 'closed-brackets', `compaction starts while ${bracket.id} (seq ${bracket.seq}) is open`);
        bracket = { id: e.data.compactionId, seq: e.seq };
        break;
      case 'compaction/end':
        if (!bracket || bracket.id !== e.data.compactionId)
          add(e.seq, 'closed-brackets', 'compaction/end without its start');
        bracket = undefined;
        break;
      case 'session/run':
      case 'session/end-seed':
        // A new run or seed boundary makes an earlier open bracket stale (its owner is gone).
        bracket = undefined;
        break;
      default:
        break;
    }
  }
  if (turns.openTurn !== undefined) add(null, 'balanced-turns', `turn ${turns.openTurn} is still open`);
  if (bracket) add(bracket.seq, 'closed-brackets', `compaction ${bracket.id} is still open`);
  if (session) {
    const calls = new Set<string>();
    for (const message of session.deriveMessages()) {
      for (const block of message.content) {
        if (block.type === 'tool-call') calls.add(block.id);
        if (block.type === 'tool-result' && !calls.has(block.toolCallId)) {
          add(null, 'tool-pairing', `derived history has a result for tool call ${block.toolCallId} without the call`);
        }
      }
    }
  }
  return violations;
}
