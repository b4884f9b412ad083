/**
 * The turn and step fold (dsh-spec §1.2, §8.5): which turn and step are open, which tool calls
 * of the open step still wait for a result, and how each turn ended. One fold, used by crash
 * repair (closers), log verification (numbering rules) and the turn engine (outcomes, recent
 * messages).
 */
import {
  isKnownEvent,
  type AskedAgent,
  type ExternalResult,
  type SessionEvent,
  type StoredEvent,
  type ToolSchema,
  type TurnEndReason,
} from './events.js';
import type { TurnHints } from './turn-hints.js';

/** How many user message ids a fold remembers (the workflow's de-duplication window). */
export const RECENT_USER_MESSAGES = 256;

/**
 * A tool call of the open step without a result yet. `callSeq` is set once its `tool/call` is
 * logged; `request` once it waits for an answer (approval or external result); `answer` once
 * an approval answer is logged.
 */
export type PendingCall = {
  callId: string;
  name: string;
  turn: number;
  step: number;
  callSeq?: number;
  request?: { kind: 'approval' | 'external'; expiresAt: number; seq: number };
  answer?: {
    decision: 'approve' | 'deny' | 'expire';
    reason?: string;
    arguments?: string;
    result?: ExternalResult;
    seq: number;
  };
};

/** Whether `call` waits for an answer: its approval or external result was asked for and none is logged. */
export function waitsForAnswer(
  call: PendingCall,
): call is PendingCall & { request: NonNullable<PendingCall['request']> } {
  return call.request !== undefined && call.answer === undefined;
}

/** How a turn ended, from the caller's point of view. */
export type TurnOutcome = 'completed' | 'aborted' | 'error' | 'max-steps' | 'max-tokens' | 'interrupted';

/** The outcome a `turn/end` reason stands for. */
export function turnOutcome(reason: TurnEndReason): TurnOutcome {
  return reason.kind;
}

/** A numbering or balance problem found while folding (reported by `verifyLog`). */
export type TurnProblem = {
  seq: number;
  rule: 'balanced-turns' | 'turn-numbering' | 'balanced-steps' | 'step-numbering';
  message: string;
};

/** One turn as the fold saw it. */
export type TurnRecord = {
  turn: number;
  startSeq: number;
  replySeq: number | null;
  endSeq?: number;
  outcome?: TurnOutcome;
};

/** Events that name the turn and step they belong to. */
type StepScoped = SessionEvent<
  | 'assistant/chunk'
  | 'assistant/message'
  | 'tool/call'
  | 'tool/result'
  | 'llm/retry'
  | 'tool/approval-request'
  | 'tool/approval'
>;

function isStepScoped(event: SessionEvent): event is StepScoped {
  switch (event.type) {
    case 'assistant/chunk':
    case 'tool/call':
    case 'llm/retry':
    case 'tool/approval-request':
    case 'tool/approval':
      return true;
    case 'assistant/message':
    case 'tool/result':
      // A replacement (pruning, compaction) keeps the original's turn and step but is appended later.
      return event.surfaceOp === 'append';
    default:
      return false;
  }
}

/** A read-only view of a fold's state. */
export type TurnState = Readonly<
  Pick<
    TurnFold,
    | 'lastTurn'
    | 'openTurn'
    | 'openStep'
    | 'lastStep'
    | 'pending'
    | 'turnTools'
    | 'turnHints'
    | 'asked'
    | 'turns'
    | 'recentUserMessages'
    | 'open'
  >
>;

export class TurnFold {
  /** The highest turn number started so far (0 before the first turn). */
  lastTurn = 0;
  openTurn: number | undefined;
  openStep: number | undefined;
  /** The highest step started in the open turn. */
  lastStep = 0;
  /** Tool calls of the open step without a result, in call order. */
  pending = new Map<string, PendingCall>();
  /** Function tools the caller runs in the open turn (its `turn/start` `tools`). */
  turnTools: ToolSchema[] | undefined;
  /** The request options of the open turn (its `turn/start` `hints`). */
  turnHints: TurnHints | undefined;
  /** The model and instructions callers asked for (each the last `turn/start` `agent` that named it). */
  asked: AskedAgent = {};
  /** Every turn seen, by number (a turn number repeated by a damaged log keeps its last record). */
  readonly turns = new Map<number, TurnRecord>();
  /** The newest user-sent messages (at most {@link RECENT_USER_MESSAGES}) with the turn each entered. */
  readonly recentUserMessages: Array<{ id: string; turn: number }> = [];

  /** Folds `events` from scratch. */
  static of(events: Iterable<StoredEvent>): TurnFold {
    const fold = new TurnFold();
    for (const event of events) fold.apply(event);
    return fold;
  }

  get open(): boolean {
    return this.openTurn !== undefined;
  }

  /** Folds one event; returns the numbering problems it shows (empty for a healthy log). */
  apply(event: StoredEvent): TurnProblem[] {
    if (!isKnownEvent(event)) return [];
    const problems: TurnProblem[] = [];
    const problem = (rule: TurnProblem['rule'], message: string) => problems.push({ seq: event.seq, rule, message });
    switch (event.type) {
      case 'turn/start': {
        const turn = event.data.turn;
        if (this.openTurn !== undefined)
          problem('balanced-turns', `turn ${turn} starts while turn ${this.openTurn} is open`);
        if (turn !== this.lastTurn + 1) problem('turn-numbering', `turn ${turn} follows turn ${this.lastTurn}`);
        this.openTurn = turn;
        this.lastTurn = Math.max(this.lastTurn, turn);
        this.openStep = undefined;
        this.lastStep = 0;
        this.pending = new Map();
        this.turnTools = event.data.tools;
        this.turnHints = event.data.hints;
        if (event.data.agent) this.asked = { ...this.asked, ...event.data.agent };
        this.turns.set(turn, { turn, startSeq: event.seq, replySeq: null });
        break;
      }
      case 'turn/end': {
        const turn = event.data.turn;
        if (this.openTurn === undefined) problem('balanced-turns', `turn/end of turn ${turn} without an open turn`);
        else if (turn !== this.openTurn)
          problem('turn-numbering', `turn/end names turn ${turn} while turn ${this.openTurn} is open`);
        if (this.openStep !== undefined) problem('balanced-steps', `turn ends while step ${this.openStep} is open`);
        const record = this.turns.get(turn);
        if (record) {
          record.endSeq = event.seq;
          record.outcome = turnOutcome(event.data.reason);
        }
        this.openTurn = undefined;
        this.openStep = undefined;
        this.pending = new Map();
        this.turnTools = undefined;
        this.turnHints = undefined;
        break;
      }
      case 'step/start': {
        const { turn, step } = event.data;
        if (this.openTurn === undefined) problem('balanced-steps', `step ${step} starts outside a turn`);
        else if (turn !== this.openTurn)
          problem('step-numbering', `step/start names turn ${turn} while turn ${this.openTurn} is open`);
        if (this.openStep !== undefined)
          problem('balanced-steps', `step ${step} starts while step ${this.openStep} is open`);
        if (step !== this.lastStep + 1) problem('step-numbering', `step ${step} follows step ${this.lastStep}`);
        this.openStep = step;
        this.lastStep = Math.max(this.lastStep, step);
        this.pending = new Map();
        break;
      }
      case 'step/end': {
        const { turn, step } = event.data;
        if (this.openStep === undefined) problem('balanced-steps', `step/end of step ${step} without an open step`);
        else if (step !== this.openStep || turn !== this.openTurn) {
          problem(
            'step-numbering',
            `step/end names turn ${turn} step ${step} while turn ${this.openTurn} step ${this.openStep} is open`,
          );
        }
        this.openStep = undefined;
        this.pending = new Map();
        break;
      }
      case 'user/message':
        if (event.surfaceOp === 'append' && event.data.source.kind === 'user') {
          this.recentUserMessages.push({ id: event.data.id, turn: this.lastTurn });
          if (this.recentUserMessages.length > RECENT_USER_MESSAGES) this.recentUserMessages.shift();
        }
        break;
      default:
        if (isStepScoped(event)) this.applyStepScoped(event, problem);
        break;
    }
    return problems;
  }

  private applyStepScoped(event: StepScoped, problem: (rule: TurnProblem['rule'], message: string) => void): void {
    const { turn, step } = event.data;
    if (turn !== this.openTurn || step !== this.openStep) {
      problem(
        'step-numbering',
        `${event.type} names turn ${turn} step ${step} while ${this.openTurn === undefined ? 'no turn' : `turn ${this.openTurn} step ${this.openStep ?? '(none)'}`} is open`,
      );
    }
    switch (event.type) {
      case 'assistant/message': {
        const record = this.turns.get(turn);
        if (record) record.replySeq = event.seq;
        for (const block of event.data.message.content) {
          if (block.type === 'tool-call')
            this.pending.set(block.id, { callId: block.id, name: block.name, turn, step });
        }
        break;
      }
      case 'tool/call': {
        const call = this.pending.get(event.data.callId);
        if (call) call.callSeq = event.seq;
        break;
      }
      case 'tool/result':
        this.pending.delete(event.data.message.source.callId);
        break;
      case 'tool/approval-request': {
        const call = this.pending.get(event.data.callId);
        if (call) call.request = { kind: event.data.kind, expiresAt: event.data.expiresAt, seq: event.seq };
        break;
      }
      case 'tool/approval': {
        const call = this.pending.get(event.data.callId);
        if (call && !call.answer) {
          const { decision, reason, arguments: edited, result } = event.data;
          call.answer = {
            decision,
            seq: event.seq,
            ...(reason !== undefined ? { reason } : {}),
            ...(edited !== undefined ? { arguments: edited } : {}),
            ...(result !== undefined ? { result } : {}),
          };
        }
        break;
      }
      default:
        break;
    }
  }
}
