/**
 * A session as a LangGraph thread (issue 25), read from its log: its runs (each turn's first
 * user message starts one, each resume of an interrupt through this API another), their
 * statuses, the interrupts waiting for an answer, the thread's status and metadata, and its
 * checkpoints (the log's length at the end of each turn, and now).
 */
import { isKnownEvent, type SessionEvent, type SessionHeader, type StoredEvent } from '../../session/index.js';
import { budgetInterruptOf, interruptOf, runEndOf, type RunInterrupt } from './run-fold.js';
import { threadMessages, type LangChainMessage } from './messages.js';

export const ASSISTANT_ID = 'agent';

/** The `by` of an approval answer a run of this API logged: names the run. */
export const RESUME_BY = 'langgraph:run:';

export type RunStatus = 'pending' | 'running' | 'error' | 'success' | 'timeout' | 'interrupted';

export type RunRecord = {
  runId: string;
  kind: 'message' | 'resume';
  turn: number;
  startSeq: number;
  createdAt: number;
  updatedAt: number;
  status: RunStatus;
};

type Open = RunRecord & { done: boolean };

/** Every run the log holds, oldest first. */
export function threadRuns(events: readonly StoredEvent[]): RunRecord[] {
  const runs: Open[] = [];
  const byTurn = new Map<number, Open[]>();
  let openTurn: number | undefined;
  const firstUser = new Set<number>();
  const add = (runId: string, kind: RunRecord['kind'], turn: number, event: StoredEvent) => {
    const run: Open = {
      runId,
      kind,
      turn,
      startSeq: event.seq,
      createdAt: event.time,
      updatedAt: event.time,
      status: 'running',
      done: false,
    };
    runs.push(run);
    byTurn.set(turn, [...(byTurn.get(turn) ?? []), run]);
  };
  const active = (turn: number) => (byTurn.get(turn) ?? []).filter((run) => !run.done);
  for (const event of events) {
    if (!isKnownEvent(event)) continue;
    switch (event.type) {
      case 'turn/start':
        openTurn = event.data.turn;
        break;
      case 'user/message':
        if (
          openTurn !== undefined &&
          event.surfaceOp === 'append' &&
          event.data.source.kind === 'user' &&
          !firstUser.has(openTurn)
        ) {
          firstUser.add(openTurn);
          add(event.data.id, 'message', openTurn, event);
        }
        break;
      case 'tool/approval': {
        const by = event.data.by;
        if (by === undefined || !by.startsWith(RESUME_BY)) break;
        const runId = by.slice(RESUME_BY.length);
        if (runs.some((run) => run.runId === runId)) break;
        add(runId, 'resume', event.data.turn, event);
        break;
      }
      case 'session/budget': {
        // A resume that raised the budget of a paused turn starts a run there.
        const by = event.data.by;
        if (openTurn === undefined || by === undefined || !by.startsWith(RESUME_BY)) break;
        const runId = by.slice(RESUME_BY.length);
        if (runs.some((run) => run.runId === runId)) break;
        add(runId, 'resume', openTurn, event);
        break;
      }
      case 'budget/breach':
      case 'tool/approval-request':
        for (const run of active(event.data.turn)) {
          run.done = true;
          run.status = 'interrupted';
          run.updatedAt = event.time;
        }
        break;
      case 'turn/end':
        for (const run of active(event.data.turn)) {
          run.done = true;
          run.status = runEndOf(event.data.reason).status;
          run.updatedAt = event.time;
        }
        if (openTurn === event.data.turn) openTurn = undefined;
        break;
      default:
        break;
    }
  }
  return runs.map(({ done: _done, ...run }) => run);
}

/** The interrupts waiting for an answer: the open turn's unanswered approval requests, one interrupt per batch. */
export function pendingInterrupts(events: readonly StoredEvent[]): RunInterrupt[] {
  let openTurn: number | undefined;
  let batches = new Map<
    string,
    Array<{ callId: string; tool: string; arguments: string; kind: 'approval' | 'external' }>
  >();
  const answered = new Set<string>();
  // A breach of the open turn waits until a budget is logged after it (a resume, PATCH) or the turn ends.
  let breach: SessionEvent<'budget/breach'> | undefined;
  for (const event of events) {
    if (!isKnownEvent(event)) continue;
    if (event.type === 'budget/breach' && event.data.turn === openTurn) breach = event;
    else if (event.type === 'session/budget') breach = undefined;
    if (event.type === 'turn/start') {
      openTurn = event.data.turn;
      batches = new Map();
    } else if (event.type === 'turn/end') {
      openTurn = undefined;
      batches = new Map();
      breach = undefined;
    } else if (event.type === 'tool/approval-request' && event.data.turn === openTurn) {
      const key = event.op ?? String(event.seq);
      batches.set(key, [...(batches.get(key) ?? []), event.data]);
    } else if (event.type === 'tool/approval') answered.add(event.data.callId);
  }
  const out: RunInterrupt[] = [];
  for (const requests of batches.values()) {
    const open = requests.filter((r) => !answered.has(r.callId));
    if (open.length > 0) out.push(interruptOf(open));
  }
  if (breach) out.push(budgetInterruptOf(breach));
  return out;
}

/** The thread's status: `interrupted` while a turn waits for answers, `busy` while one runs or input waits, `error` after a failed turn. */
export function threadStatus(
  events: readonly StoredEvent[],
  inputWaiting: boolean,
  interrupts?: readonly RunInterrupt[],
): 'idle' | 'busy' | 'interrupted' | 'error' {
  let open = false;
  let failed = false;
  for (const event of events) {
    if (!isKnownEvent(event)) continue;
    if (event.type === 'turn/start') open = true;
    else if (event.type === 'turn/end') {
      open = false;
      failed = event.data.reason.kind === 'error' || event.data.reason.kind === 'interrupted';
    }
  }
  if (open) return (interrupts ?? pendingInterrupts(events)).length > 0 ? 'interrupted' : 'busy';
  if (inputWaiting) return 'busy';
  return failed ? 'error' : 'idle';
}

// ---- metadata -----------------------------------------------------------------------------------

/** The session/metadata key listing which values were JSON (LangGraph metadata is JSON; a note's is strings). */
const JSON_KEYS = '__json';

/** LangGraph metadata as a note's string pairs. */
export function encodeMetadata(metadata: Record<string, unknown>): Record<string, string> {
  const out: Record<string, string> = {};
  const json: string[] = [];
  for (const [key, value] of Object.entries(metadata)) {
    if (value === undefined) continue;
    if (typeof value === 'string') out[key] = value;
    else {
      out[key] = JSON.stringify(value);
      json.push(key);
    }
  }
  if (json.length > 0) out[JSON_KEYS] = json.join(',');
  return out;
}

export function decodeMetadata(values: Record<string, string>): Record<string, unknown> {
  const json = new Set((values[JSON_KEYS] ?? '').split(',').filter((key) => key !== ''));
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(values)) {
    if (key === JSON_KEYS) continue;
    out[key] = json.has(key) ? (JSON.parse(value) as unknown) : value;
  }
  return out;
}

/** The thread's metadata: the last `session/metadata` of the session itself (not of a turn). */
export function threadMetadata(events: readonly StoredEvent[]): Record<string, unknown> {
  for (let i = events.length - 1; i >= 0; i--) {
    const event = events[i]!;
    if (isKnownEvent(event) && event.type === 'session/metadata' && event.data.messageId === undefined)
      return decodeMetadata(event.data.metadata);
  }
  return {};
}

/** Whether `metadata` holds every pair of `filter` (JSON equality). */
export function matchesMetadata(
  metadata: Record<string, unknown>,
  filter: Record<string, unknown> | undefined,
): boolean {
  if (!filter) return true;
  return Object.entries(filter).every(([key, value]) => JSON.stringify(metadata[key]) === JSON.stringify(value));
}

// ---- the wire objects ---------------------------------------------------------------------------

const iso = (ms: number) => new Date(ms).toISOString();

export function lastTime(header: SessionHeader, events: readonly StoredEvent[]): number {
  return events.at(-1)?.time ?? header.createdAt;
}

/** A checkpoint id: the log's length at that point (`<n>`), so the state of any prefix can be read back. */
export function checkpointId(length: number): string {
  return `seq-${length}`;
}

export function parseCheckpointId(id: string): number | undefined {
  const match = /^seq-(\d{1,12})$/.exec(id);
  return match ? Number(match[1]) : undefined;
}

/** The thread object (`Thread`). */
export function threadObject(header: SessionHeader, events: readonly StoredEvent[], inputWaiting: boolean) {
  const messages = threadMessages(header.id, events);
  const interrupts = pendingInterrupts(events);
  return {
    thread_id: header.id,
    created_at: iso(header.createdAt),
    updated_at: iso(lastTime(header, events)),
    state_updated_at: iso(lastTime(header, events)),
    metadata: threadMetadata(events),
    status: threadStatus(events, inputWaiting, interrupts),
    values: { messages },
    interrupts: Object.fromEntries(interrupts.map((interrupt) => [interrupt.id, [interrupt]])),
    config: {},
    error: null,
  };
}

/** The state of the thread as of its first `length` events (`ThreadState`). */
export function threadState(
  header: SessionHeader,
  events: readonly StoredEvent[],
  length: number,
  parent: number | undefined,
) {
  const prefix = events.slice(0, length);
  const messages: LangChainMessage[] = threadMessages(header.id, prefix);
  const interrupts = pendingInterrupts(prefix);
  const checkpoint = (n: number) => ({
    thread_id: header.id,
    checkpoint_ns: '',
    checkpoint_id: checkpointId(n),
    checkpoint_map: null,
  });
  return {
    values: { messages, ...(interrupts.length > 0 ? { __interrupt__: interrupts } : {}) },
    next: interrupts.length > 0 ? ['tools'] : [],
    checkpoint: checkpoint(length),
    metadata: { source: 'loop', step: length, seq: length, writes: null, parents: {} },
    created_at: iso(prefix.at(-1)?.time ?? header.createdAt),
    parent_checkpoint: parent === undefined ? null : checkpoint(parent),
    tasks: interrupts.map((interrupt) => ({
      id: interrupt.id,
      name: 'tools',
      error: null,
      interrupts: [interrupt],
      checkpoint: null,
      state: null,
    })),
  };
}

/** The thread's checkpoints, newest first: now, and the log's length at the end of each turn. */
export function checkpoints(events: readonly StoredEvent[]): number[] {
  const out = new Set<number>([events.length]);
  for (const event of events) if (isKnownEvent(event) && event.type === 'turn/end') out.add(event.seq + 1);
  return [...out].sort((a, b) => b - a);
}

export function runObject(
  threadId: string,
  run: RunRecord | { runId: string; status: 'pending'; createdAt: number; updatedAt: number },
  metadata: Record<string, unknown> = {},
) {
  return {
    run_id: run.runId,
    thread_id: threadId,
    assistant_id: ASSISTANT_ID,
    created_at: iso(run.createdAt),
    updated_at: iso(run.updatedAt),
    status: run.status,
    metadata,
    multitask_strategy: null,
    kwargs: {},
  };
}
