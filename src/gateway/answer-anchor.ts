/**
 * The turn that answers a user message, found while folding a log (shared by the answer folds
 * of the AI SDK stream and the LangGraph run stream): the turn open when the message was
 * logged, or, for a message logged between turns, the next turn to start.
 */
import { isKnownEvent, type StoredEvent } from '../session/index.js';

export class MessageAnchor {
  private openTurn: number | undefined;
  private awaiting = false;
  private found = false;

  constructor(private readonly messageId: string) {}

  /** Feeds the next log event; returns the answering turn on the event that reveals it (once). */
  push(event: StoredEvent): number | undefined {
    if (!isKnownEvent(event)) return undefined;
    switch (event.type) {
      case 'turn/start':
        this.openTurn = event.data.turn;
        if (this.awaiting) {
          this.awaiting = false;
          return this.reveal(event.data.turn);
        }
        return undefined;
      case 'turn/end':
        if (this.openTurn === event.data.turn) this.openTurn = undefined;
        return undefined;
      case 'user/message':
        if (this.found || event.data.id !== this.messageId || event.surfaceOp !== 'append') return undefined;
        if (this.openTurn === undefined) {
          this.awaiting = true;
          return undefined;
        }
        return this.reveal(this.openTurn);
      default:
        return undefined;
    }
  }

  private reveal(turn: number): number {
    this.found = true;
    return turn;
  }
}
