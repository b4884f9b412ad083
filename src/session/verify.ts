/**
 * Log invariant checks for `sessionlog sessions verify` and tests: contiguous seqs, balanced
 * turns and steps, tool pairing in the derived history, no live compaction bracket, and a
 * surface that replays.
 */
import type { StoredEvent, SessionEvent, SessionHeader } from './events.js';
import { Session } from './session.js';

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
  let openTurn: number | undefined;
  let lastTurn = 0;
  let openStep: number | undefined;
  let bracket: { id: string; seq: number } | undefined;
  for (const e of events) {
    switch (e.type) {
      case 'turn/start': {
        const turn = (e as SessionEvent<'turn/start'>).data.turn;
        if (openTurn !== undefined) add(e.seq, 'balanced-turns', `turn ${turn} starts while turn ${openTurn} is open`);
        if (turn !== lastTurn + 1) add(e.seq, 'turn-numbering', `turn ${turn} follows turn ${lastTurn}`);
        openTurn = turn;
        lastTurn = turn;
        break;
      }
      case 'turn/end':
        if (openTurn === undefined) add(e.seq, 'balanced-turns', 'turn/end without an open turn');
        if (openStep !== undefined) add(e.seq, 'balanced-steps', `turn ends while step ${openStep} is open`);
        openTurn = undefined;
        openStep = undefined;
        break;
      case 'step/start':
        if (openTurn === undefined) add(e.seq, 'balanced-steps', 'step/start outside a turn');
        if (openStep !== undefined) add(e.seq, 'balanced-steps', `step starts while step ${openStep} is open`);
        openStep = (e as SessionEvent<'step/start'>).data.step;
        break;
      case 'step/end':
        if (openStep === undefined) add(e.seq, 'balanced-steps', 'step/end without an open step');
        openStep = undefined;
        break;
      case 'compaction/start':
        if (bracket) add(e.seq, 'closed-brackets', `compaction starts while ${bracket.id} (seq ${bracket.seq}) is open`);
        bracket = { id: (e as SessionEvent<'compaction/start'>).data.compactionId, seq: e.seq };
        break;
      case 'compaction/end':
        if (!bracket || bracket.id !== (e as SessionEvent<'compaction/end'>).data.compactionId) add(e.seq, 'closed-brackets', 'compaction/end without its start');
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
  if (openTurn !== undefined) add(null, 'balanced-turns', `turn ${openTurn} is still open`);
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
