/**
 * The op-key grammar (DESIGN §3, §4.1): every op key and compaction id written with, made and
 * read back in this one module. An op key names one append batch; a retried activity finds its
 * own batch by it, so a key must be unique to one batch: it carries the run, the turn and step,
 * the pass of the step (a step is re-entered after an overflow or pressure compaction) and the
 * activity attempt wherever the same step can write the same kind of batch again.
 *
 * Keys of a run start with `<runId>/`: a log whose tail was not written by the current run was
 * written by someone else (see the engine's `LogWriter`). A run id holds no `/`.
 *
 * It lives here, below both the engine (which writes the keys, `engine/ops.ts`) and the gateway
 * (which reads a chunk batch's model call back from its key), because neither may import the
 * other; the stores' own repair batches use it too.
 */

/** Identifies one model step pass: the compaction ids and op keys derive from it. */
export type StepKey = { runId: string; turn: number; step: number; pass: number };

/** A model step, whatever its pass. */
export type StepRef = Omit<StepKey, 'pass'>;

/**
 * An activity attempt in op keys: its number, or after the step paused (a budget or a long rate
 * limit; the step's activity is scheduled anew and counts attempts from 1 again) `<pauses>.<attempt>`.
 */
export type AttemptKey = number | `${number}.${number}`;

/** The batches a step writes once, named by the step alone. */
const STEP_BATCHES = ['start', 'close-stale', 'reply', 'cancel', 'error', 'results', 'approval-requests'] as const;
type StepBatch = (typeof STEP_BATCHES)[number];

/** Every op key, parsed: what kind of batch it names and the parts it is made of. */
export type OpKey =
  /** The `session/run` marker of a run taking over the session. */
  | { kind: 'run'; runId: string }
  /** The seed a new session starts from (fork or salvage): written once, before the first run marker. */
  | { kind: 'seed'; sessionId: string }
  /** The closers of a turn a crash left open, by the head they repair (stores repair on `load`). */
  | { kind: 'repair'; lastSeq: number }
  /** A step's once-only batches ({@link stepOps}). */
  | ({ kind: StepBatch } & StepRef)
  /** A changed `request/header` of a step pass. */
  | ({ kind: 'header' } & StepKey)
  /** A batch of the pressure ladder of a step pass, by its suffix (`prune`, `escalation-prune`, `stalled`). */
  | ({ kind: 'context'; suffix: string } & StepKey)
  /** A learned context limit (`model/limit`) or an `llm/retry` of one attempt. */
  | ({ kind: 'limit' | 'retry'; attempt: AttemptKey } & StepKey)
  /** The n-th batch of streamed chunks of one attempt. */
  | ({ kind: 'chunks'; attempt: AttemptKey; n: number } & StepKey)
  /** A budget breach before the model call or the tool round, at the n-th check after a pause. */
  | ({ kind: 'budget'; before: 'model' | 'tools'; n: number } & StepRef)
  /** One call's answer (approval, denial, expiry) or external result. */
  | ({ kind: 'answer'; callId: string } & StepRef)
  /** The closers of a turn that did not end by itself (cancel, failure). */
  | { kind: 'turn-end'; runId: string; turn: number }
  /** One batch of a compaction bracket (`prune`, `start`, `commit`, `end`). */
  | { kind: 'compaction'; runId: string; compactionId: string; suffix: string }
  /** A caller's note logged between turns, by the note's id. */
  | { kind: 'note'; runId: string; noteId: string }
  /** The n-th change of a session setting logged between turns (e.g. a tool allowed for the session). */
  | { kind: 'setting'; runId: string; name: string; n: number };

function stepPrefix(key: StepRef): string {
  return `${key.runId}/t${key.turn}/s${key.step}`;
}

function passPrefix(key: StepKey): string {
  return `${stepPrefix(key)}/p${key.pass}`;
}

/** The op key `key` names. */
export function formatOpKey(key: OpKey): string {
  switch (key.kind) {
    case 'run':
      return `${key.runId}/run`;
    case 'seed':
      return `seed:${key.sessionId}`;
    case 'repair':
      return `repair:${key.lastSeq}`;
    case 'start':
    case 'close-stale':
    case 'reply':
    case 'cancel':
    case 'error':
    case 'results':
    case 'approval-requests':
      return `${stepPrefix(key)}/${key.kind}`;
    case 'header':
      return `${passPrefix(key)}/header`;
    case 'context':
      return `${passPrefix(key)}/${key.suffix}`;
    case 'limit':
    case 'retry':
      return `${passPrefix(key)}/a${key.attempt}/${key.kind}`;
    case 'chunks':
      return `${modelCallOf(key)}/c${key.n}`;
    case 'budget':
      return `${stepPrefix(key)}/budget/${key.before}/b${key.n}`;
    case 'answer':
      return `${stepPrefix(key)}/answer/${key.callId}`;
    case 'turn-end':
      return `${key.runId}/t${key.turn}/end`;
    case 'compaction':
      return `${key.runId}/${key.compactionId}/${key.suffix}`;
    case 'note':
      return `${key.runId}/note/${key.noteId}`;
    case 'setting':
      return `${key.runId}/setting/${key.name}/${key.n}`;
    default:
      return assertNeverKey(key);
  }
}

function assertNeverKey(key: never): never {
  throw new Error(`unknown op key kind ${JSON.stringify(key)}`);
}

/** What one model call's keys start with: its step pass and attempt (`…/p<pass>/a<attempt>`). */
function modelCallOf(key: StepKey & { attempt: AttemptKey }): string {
  return `${passPrefix(key)}/a${key.attempt}`;
}

const NUMBER = /^(0|[1-9]\d*)$/;
const numberAfter = (prefix: string, segment: string | undefined): number | undefined =>
  segment?.startsWith(prefix) && NUMBER.test(segment.slice(prefix.length))
    ? Number(segment.slice(prefix.length))
    : undefined;
const ATTEMPT = /^a((?:0|[1-9]\d*)(?:\.(?:0|[1-9]\d*))?)$/;

function attemptOf(segment: string | undefined): AttemptKey | undefined {
  const match = segment === undefined ? null : ATTEMPT.exec(segment);
  if (!match) return undefined;
  const text = match[1]!;
  return text.includes('.') ? (text as `${number}.${number}`) : Number(text);
}

function isStepBatch(segment: string): segment is StepBatch {
  return (STEP_BATCHES as readonly string[]).includes(segment);
}

/** The key a stored batch's op names, or undefined for an op this grammar does not make (another writer's). */
export function parseOpKey(op: string): OpKey | undefined {
  if (op.startsWith('seed:')) return op.length > 5 ? { kind: 'seed', sessionId: op.slice(5) } : undefined;
  if (op.startsWith('repair:')) {
    const lastSeq = numberAfter('repair:', op);
    return lastSeq === undefined ? undefined : { kind: 'repair', lastSeq };
  }
  const [runId, second, ...rest] = op.split('/');
  if (!runId || second === undefined) return undefined;
  if (second === 'run') return rest.length === 0 ? { kind: 'run', runId } : undefined;
  if (second === 'note') return rest.length > 0 ? { kind: 'note', runId, noteId: rest.join('/') } : undefined;
  if (second === 'setting') {
    const n = numberAfter('', rest.at(-1));
    return rest.length >= 2 && n !== undefined
      ? { kind: 'setting', runId, name: rest.slice(0, -1).join('/'), n }
      : undefined;
  }
  if (second.startsWith(`${runId}.`))
    return rest.length > 0 ? { kind: 'compaction', runId, compactionId: second, suffix: rest.join('/') } : undefined;
  const turn = numberAfter('t', second);
  if (turn === undefined) return undefined;
  if (rest.length === 1 && rest[0] === 'end') return { kind: 'turn-end', runId, turn };
  const step = numberAfter('s', rest[0]);
  if (step === undefined) return undefined;
  return parseStepOp({ runId, turn, step }, rest.slice(1));
}

/** The part of a step's key after `<runId>/t<turn>/s<step>/`. */
function parseStepOp(ref: StepRef, parts: string[]): OpKey | undefined {
  const [first, second, third] = parts;
  if (first === undefined) return undefined;
  if (parts.length === 1 && isStepBatch(first)) return { kind: first, ...ref };
  if (first === 'answer')
    return parts.length > 1 ? { kind: 'answer', ...ref, callId: parts.slice(1).join('/') } : undefined;
  if (first === 'budget') {
    const n = numberAfter('b', third);
    return parts.length === 3 && (second === 'model' || second === 'tools') && n !== undefined
      ? { kind: 'budget', ...ref, before: second, n }
      : undefined;
  }
  const pass = numberAfter('p', first);
  if (pass === undefined || second === undefined) return undefined;
  const key: StepKey = { ...ref, pass };
  if (parts.length === 2)
    return second === 'header' ? { kind: 'header', ...key } : { kind: 'context', ...key, suffix: second };
  const attempt = attemptOf(second);
  if (attempt === undefined || parts.length !== 3) return undefined;
  if (third === 'limit' || third === 'retry') return { kind: third, ...key, attempt };
  const n = numberAfter('c', third);
  return n === undefined ? undefined : { kind: 'chunks', ...key, attempt, n };
}

/**
 * The model call a chunk batch's op names (`…/p<pass>/a<attempt>`), or undefined when `op` is
 * not a chunk batch's: chunk batches of one call share it, so a different one is a new call. A
 * call's last chunks are written in the reply's own batch (`…/reply`), which names no attempt.
 */
export function modelCallOfChunks(op: string | undefined): string | undefined {
  const key = op === undefined ? undefined : parseOpKey(op);
  return key?.kind === 'chunks' ? modelCallOf(key) : undefined;
}

// ---- the makers the engine writes with ------------------------------------------------------

/** The `session/run` marker of a run taking over the session. */
export function runOp(runId: string): string {
  return formatOpKey({ kind: 'run', runId });
}

/** The seed a new session starts from (fork or salvage): written once, before the first run marker. */
export function seedOp(sessionId: string): string {
  return formatOpKey({ kind: 'seed', sessionId });
}

/** The op key of a repair batch: deterministic in the head it repairs, so a retry is idempotent. */
export function repairOp(lastSeq: number): string {
  return formatOpKey({ kind: 'repair', lastSeq });
}

export function attemptKey(attempt: number, pauses: number | undefined): AttemptKey {
  return pauses ? `${pauses}.${attempt}` : attempt;
}

const stepRef = ({ runId, turn, step }: StepRef): StepRef => ({ runId, turn, step });
const stepPass = ({ runId, turn, step, pass }: StepKey): StepKey => ({ runId, turn, step, pass });

/** Op keys of one model step (and its tool round). */
export const stepOps = {
  /** `turn/start` (step 1) + `step/start` + the user messages entering at this step. */
  start: (key: StepKey) => formatOpKey({ kind: 'start', ...stepRef(key) }),
  /** Repair closers for a turn left open by anything else, before this step's turn starts. */
  closeStale: (key: StepKey) => formatOpKey({ kind: 'close-stale', ...stepRef(key) }),
  /** A changed `request/header`. */
  header: (key: StepKey) => formatOpKey({ kind: 'header', ...stepPass(key) }),
  /** The pruning batch of the pressure check. */
  prune: (key: StepKey) => formatOpKey({ kind: 'context', ...stepPass(key), suffix: 'prune' }),
  /** A batch of the pressure ladder (`prune`, `escalation-prune`, `stalled`); `prune` is the key above. */
  context: (key: StepKey, suffix: string) => formatOpKey({ kind: 'context', ...stepPass(key), suffix }),
  /** A learned context limit (`model/limit`) from an overflow refusal. */
  limit: (key: StepKey, attempt: AttemptKey) => formatOpKey({ kind: 'limit', ...stepPass(key), attempt }),
  /** The n-th batch of streamed chunks of one attempt. */
  chunks: (key: StepKey, attempt: AttemptKey, n: number) =>
    formatOpKey({ kind: 'chunks', ...stepPass(key), attempt, n }),
  /** The `llm/retry` logged when an attempt failed and another follows. */
  retry: (key: StepKey, attempt: AttemptKey) => formatOpKey({ kind: 'retry', ...stepPass(key), attempt }),
  /** The reply: `assistant/message`, `tool/call`s, and (without tools) the step and turn end. */
  reply: (key: StepKey) => formatOpKey({ kind: 'reply', ...stepRef(key) }),
  /** The interrupted partial reply and closers of a cancelled step. */
  cancel: (key: StepKey) => formatOpKey({ kind: 'cancel', ...stepRef(key) }),
  /** The closers of a step whose model call failed for good. */
  error: (key: StepKey) => formatOpKey({ kind: 'error', ...stepRef(key) }),
  /** The step's tool results in call order, `step/end` (and `turn/end` at the step bound). */
  results: (key: StepRef) => formatOpKey({ kind: 'results', ...stepRef(key) }),
  /** Approval requests of the step's calls that need one. */
  approvalRequests: (key: StepRef) => formatOpKey({ kind: 'approval-requests', ...stepRef(key) }),
  /** A budget breach found before the model call or the tool round, at the n-th check after a pause. */
  budget: (key: StepRef, before: 'model' | 'tools', n: number) =>
    formatOpKey({ kind: 'budget', ...stepRef(key), before, n }),
  /** One call's answer (approval, denial, expiry) or external result. */
  answer: (key: StepRef, callId: string) => formatOpKey({ kind: 'answer', ...stepRef(key), callId }),
};

/** The closers of a turn that did not end by itself (cancel, failure). */
export function endTurnOp(runId: string, turn: number): string {
  return formatOpKey({ kind: 'turn-end', runId, turn });
}

/** The op key of one batch of compaction `id` (`prune`, `start`, `commit`, `end`). */
export function compactionOp(runId: string, id: string, suffix: string): string {
  return formatOpKey({ kind: 'compaction', runId, compactionId: id, suffix });
}

/** A caller's note logged between turns (metadata, messages for the next turn), by the note's id. */
export function noteOp(runId: string, noteId: string): string {
  return formatOpKey({ kind: 'note', runId, noteId });
}

/** A session setting logged between turns (e.g. a tool allowed for the rest of the session). */
export function settingOp(runId: string, name: string, n: number): string {
  return formatOpKey({ kind: 'setting', runId, name, n });
}

// ---- compaction ids -------------------------------------------------------------------------

/** What a compaction belongs to: a step pass (pressure, overflow) or the n-th manual compaction of a run. */
export type CompactionKey = StepKey | { runId: string; manual: number };

/** What every compaction id of one model step starts with, whatever its pass or round. */
export function stepCompactionPrefix(key: StepRef): string {
  return `${key.runId}.t${key.turn}.s${key.step}.`;
}

/**
 * The compaction id: deterministic in its key, so a retried compaction finds its own bracket.
 * The pressure ladder of a step pass adds `.r<n>` for its later rounds.
 */
export function compactionId(key: CompactionKey): string {
  return 'manual' in key ? `${key.runId}.m${key.manual}` : `${stepCompactionPrefix(key)}p${key.pass}`;
}
