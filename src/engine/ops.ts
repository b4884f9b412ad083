/**
 * Every op key and compaction id the engine writes with (DESIGN §3, §4.1), one function each.
 * An op key names one append batch; a retried activity finds its own batch by it, so a key
 * must be unique to one batch: it carries the run, the turn and step, the pass of the step
 * (a step is re-entered after an overflow or pressure compaction) and the activity attempt
 * wherever the same step can write the same kind of batch again.
 *
 * Keys of a run start with `<runId>/`: a log whose tail was not written by the current run was
 * written by someone else (see `LogWriter`).
 */
export { repairOp } from '../session/repair.js';

/** Identifies one model step pass: the compaction ids and op keys derive from it. */
export type StepKey = { runId: string; turn: number; step: number; pass: number };

/** The `session/run` marker of a run taking over the session. */
export function runOp(runId: string): string {
  return `${runId}/run`;
}

/** The seed a new session starts from (fork or salvage): written once, before the first run marker. */
export function seedOp(sessionId: string): string {
  return `seed:${sessionId}`;
}

function stepPrefix(key: Omit<StepKey, 'pass'>): string {
  return `${key.runId}/t${key.turn}/s${key.step}`;
}

/**
 * An activity attempt in op keys: its number, or after the step paused (a budget or a long rate
 * limit; the step's activity is scheduled anew and counts attempts from 1 again) `<pauses>.<attempt>`.
 */
export type AttemptKey = number | `${number}.${number}`;

export function attemptKey(attempt: number, pauses: number | undefined): AttemptKey {
  return pauses ? `${pauses}.${attempt}` : attempt;
}

/** Op keys of one model step (and its tool round). */
export const stepOps = {
  /** `turn/start` (step 1) + `step/start` + the user messages entering at this step. */
  start: (key: StepKey) => `${stepPrefix(key)}/start`,
  /** Repair closers for a turn left open by anything else, before this step's turn starts. */
  closeStale: (key: StepKey) => `${stepPrefix(key)}/close-stale`,
  /** A changed `request/header`. */
  header: (key: StepKey) => `${stepPrefix(key)}/p${key.pass}/header`,
  /** The pruning batch of the pressure check. */
  prune: (key: StepKey) => `${stepPrefix(key)}/p${key.pass}/prune`,
  /** A batch of the pressure ladder (`prune`, `escalation-prune`, `stalled`); `prune` is the key above. */
  context: (key: StepKey, suffix: string) => `${stepPrefix(key)}/p${key.pass}/${suffix}`,
  /** A learned context limit (`model/limit`) from an overflow refusal. */
  limit: (key: StepKey, attempt: AttemptKey) => `${stepPrefix(key)}/p${key.pass}/a${attempt}/limit`,
  /** The n-th batch of streamed chunks of one attempt. */
  chunks: (key: StepKey, attempt: AttemptKey, n: number) => `${stepPrefix(key)}/p${key.pass}/a${attempt}/c${n}`,
  /** The `llm/retry` logged when an attempt failed and another follows. */
  retry: (key: StepKey, attempt: AttemptKey) => `${stepPrefix(key)}/p${key.pass}/a${attempt}/retry`,
  /** The reply: `assistant/message`, `tool/call`s, and (without tools) the step and turn end. */
  reply: (key: StepKey) => `${stepPrefix(key)}/reply`,
  /** The interrupted partial reply and closers of a cancelled step. */
  cancel: (key: StepKey) => `${stepPrefix(key)}/cancel`,
  /** The closers of a step whose model call failed for good. */
  error: (key: StepKey) => `${stepPrefix(key)}/error`,
  /** The step's tool results in call order, `step/end` (and `turn/end` at the step bound). */
  results: (key: Omit<StepKey, 'pass'>) => `${stepPrefix(key)}/results`,
  /** Approval requests of the step's calls that need one. */
  approvalRequests: (key: Omit<StepKey, 'pass'>) => `${stepPrefix(key)}/approval-requests`,
  /** A budget breach found before the model call or the tool round, at the n-th check after a pause. */
  budget: (key: Omit<StepKey, 'pass'>, before: 'model' | 'tools', n: number) =>
    `${stepPrefix(key)}/budget/${before}/b${n}`,
  /** One call's answer (approval, denial, expiry) or external result. */
  answer: (key: Omit<StepKey, 'pass'>, callId: string) => `${stepPrefix(key)}/answer/${callId}`,
};

/** The closers of a turn that did not end by itself (cancel, failure). */
export function endTurnOp(runId: string, turn: number): string {
  return `${runId}/t${turn}/end`;
}

/** What a compaction belongs to: a step pass (pressure, overflow) or the n-th manual compaction of a run. */
export type CompactionKey = StepKey | { runId: string; manual: number };

/** What every compaction id of one model step starts with, whatever its pass or round. */
export function stepCompactionPrefix(key: Omit<StepKey, 'pass'>): string {
  return `${key.runId}.t${key.turn}.s${key.step}.`;
}

/**
 * The compaction id: deterministic in its key, so a retried compaction finds its own bracket.
 * The pressure ladder of a step pass adds `.r<n>` for its later rounds.
 */
export function compactionId(key: CompactionKey): string {
  return 'manual' in key ? `${key.runId}.m${key.manual}` : `${stepCompactionPrefix(key)}p${key.pass}`;
}

/** The op key of one batch of compaction `id` (`prune`, `start`, `commit`, `end`). */
export function compactionOp(runId: string, id: string, suffix: string): string {
  return `${runId}/${id}/${suffix}`;
}

/** A caller's note logged between turns (metadata, messages for the next turn), by the note's id. */
export function noteOp(runId: string, noteId: string): string {
  return `${runId}/note/${noteId}`;
}

/** A session setting logged between turns (e.g. a tool allowed for the rest of the session). */
export function settingOp(runId: string, name: string, n: number): string {
  return `${runId}/setting/${name}/${n}`;
}
