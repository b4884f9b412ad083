/**
 * Random valid session logs for property tests. A log is generated from a small "program" of
 * actions (shrinks well in fast-check) interpreted by a state machine that only emits events
 * the agent loop could have written: turns and steps nest, an assistant message opens tool
 * calls, each call is logged and/or answered, steps close only when every call is answered,
 * and surface replacements name current nodes. The interpreter also keeps an independent
 * model of the open turn (pending calls, open step), used as the oracle for crash repair.
 */
import fc from 'fast-check';
import {
  SESSION_FORMAT_VERSION,
  Session,
  type StoredEvent,
  type AssistantMessage,
  type ContentBlock,
  type NewEvent,
  type SessionEvent,
  type SessionHeader,
  type StreamChunk,
  type ToolResultMessage,
  type UserMessage,
} from '../../src/session/index.js';

export type Action = { kind: number; a: number; b: number; c: number };

export const ACTION_KINDS = 12;

export const actionArb: fc.Arbitrary<Action> = fc.record({
  kind: fc.nat(ACTION_KINDS - 1),
  a: fc.nat(1000),
  b: fc.nat(1000),
  c: fc.nat(1000),
});

export function programArb(maxLength = 60): fc.Arbitrary<Action[]> {
  return fc.array(actionArb, { maxLength, size: 'max' });
}

export type GenOptions = {
  /** Emit surface replacements at all. */
  replaces: boolean;
  /**
   * Only replace spans that keep every tool call together with its result (what compaction's
   * cut balance guarantees); needed for the pairing property.
   */
  balancedReplaces: boolean;
};

export const ANY_REPLACES: GenOptions = { replaces: true, balancedReplaces: false };
export const BALANCED_REPLACES: GenOptions = { replaces: true, balancedReplaces: true };

export type PendingCall = { callId: string; turn: number; step: number; callSeq?: number };

/** The interpreter's own model of where the log ends (independent of src/session/repair.ts). */
export type OpenState = {
  openTurn: number | undefined;
  openStep: number | undefined;
  /** Unanswered calls of the open step, in call order. */
  pending: PendingCall[];
};

export type GeneratedLog = {
  header: SessionHeader;
  /** The inputs as appended, in order (inputs[i] became seq i). */
  inputs: NewEvent[];
  session: Session;
  open: OpenState;
};

export function testHeader(id = 'prop-session'): SessionHeader {
  return { version: SESSION_FORMAT_VERSION, id, createdAt: 1_700_000_000_000 };
}

const BASE_TIME = 1_700_000_000_000;

const words = ['alpha', 'beta', 'gamma', 'delta', 'ünïcødé', '𝄞 clef', '', 'line\nbreak', '"quoted"', '{json:1}'];
function text(n: number): string {
  return `${words[n % words.length]}-${n}`;
}

/**
 * Interprets `program` into a valid log. `onStep` is called after each action (used to probe
 * the derivation cache at random moments).
 */
export function buildLog(
  program: readonly Action[],
  options: GenOptions,
  onStep?: (session: Session, action: Action) => void,
): GeneratedLog {
  const header = testHeader();
  const session = Session.create(header);
  const inputs: NewEvent[] = [];
  let turn = 0;
  let openTurn = false;
  let stepInTurn = 0;
  let openStep = false;
  let pending: PendingCall[] = [];
  let chunkSeqs: number[] = [];
  let counter = 0;
  const nextId = (prefix: string): string => `${prefix}${counter++}`;

  const append = (input: NewEvent): StoredEvent => {
    const event = session.append(input);
    inputs.push(input);
    return event;
  };

  let repliedInStep = false;
  /** Performs action `kind`; false when it does not apply in the current state. */
  const perform = (kind: number, action: Action): boolean => {
    const { a, b, c } = action;
    // Times jump around (the clock may step back); they are never interpreted.
    const time = BASE_TIME + ((c * 7919) % 100_000) - 50_000;
    switch (kind) {
      case 0:
        if (!openTurn) {
          turn += 1;
          openTurn = true;
          stepInTurn = 0;
          append({ type: 'turn/start', time, data: { turn } });
          return true;
        }
        return false;
      case 1:
        if (openTurn && !openStep) {
          stepInTurn += 1;
          openStep = true;
          chunkSeqs = [];
          repliedInStep = false;
          append({ type: 'step/start', time, data: { turn, step: stepInTurn } });
          return true;
        }
        return false;
      case 2: {
        const message: UserMessage = {
          id: nextId('u'),
          role: 'user',
          content: [{ type: 'text', text: text(a) }],
          source: b % 4 === 0 ? { kind: 'plugin', plugin: 'notes' } : { kind: 'user' },
        };
        append({ type: 'user/message', time, data: message, surfaceOp: 'append' });
        return true;
      }
      case 3:
        if (openStep) {
          const chunks: StreamChunk[] = [
            { kind: 'text-delta', text: text(a) },
            { kind: 'reasoning-delta', text: text(b) },
            { kind: 'tool-call-delta', index: a % 3, id: `d${b}`, name: 'echo', argumentsDelta: '{"x":' },
          ];
          const event = append({
            type: 'assistant/chunk',
            time,
            data: { turn, step: stepInTurn, chunk: chunks[a % chunks.length]! },
          });
          chunkSeqs.push(event.seq);
          return true;
        }
        return false;
      case 4:
        if (openStep && pending.length === 0) {
          const calls = a % 4;
          const emptyReply = calls === 0 && b % 6 === 0;
          const content: ContentBlock[] = [];
          if (!emptyReply) {
            if (b % 3 === 0) content.push({ type: 'reasoning', text: text(b) });
            if (calls === 0 || b % 2 === 0) content.push({ type: 'text', text: text(a + b) });
          }
          const callIds: string[] = [];
          for (let i = 0; i < calls; i++) {
            const id = nextId('call');
            callIds.push(id);
            content.push({
              type: 'tool-call',
              id,
              name: i % 2 === 0 ? 'echo' : 'read',
              arguments: JSON.stringify({ i, n: a }),
            });
          }
          const message: AssistantMessage = {
            id: nextId('a'),
            role: 'assistant',
            content,
            source: { kind: 'model', provider: 'fake', model: 'fake-1' },
          };
          const provenance = c % 3;
          append({
            type: 'assistant/message',
            time,
            data: {
              turn,
              step: stepInTurn,
              message,
              ...(b % 5 === 0 ? { usage: { inputTokens: a, outputTokens: b } } : {}),
              ...(emptyReply ? { finishReason: 'length' } : {}),
            },
            surfaceOp: 'append',
            ...(provenance === 0
              ? { sourceEventSeqs: [...chunkSeqs] }
              : provenance === 1
                ? { sourceEventSeqs: [] }
                : {}),
          });
          chunkSeqs = [];
          repliedInStep = true;
          pending = callIds.map((callId) => ({ callId, turn, step: stepInTurn }));
          return true;
        }
        return false;
      case 5: {
        const unlogged = pending.filter((p) => p.callSeq === undefined);
        if (openStep && unlogged.length > 0) {
          const call = unlogged[a % unlogged.length]!;
          const event = append({
            type: 'tool/call',
            time,
            data: { turn: call.turn, step: call.step, callId: call.callId, name: 'echo', arguments: '{}' },
          });
          call.callSeq = event.seq;
          return true;
        }
        return false;
      }
      case 6:
        if (openStep && pending.length > 0) {
          const index = a % pending.length;
          const call = pending[index]!;
          const message: ToolResultMessage = {
            id: nextId('r'),
            role: 'user',
            content: [
              {
                type: 'tool-result',
                toolCallId: call.callId,
                content: [{ type: 'text', text: text(b).repeat(1 + (b % 4)) }],
                ...(c % 4 === 0 ? { isError: true as const } : {}),
              },
            ],
            source: { kind: 'tool', callId: call.callId },
          };
          append({
            type: 'tool/result',
            time,
            data: {
              turn: call.turn,
              step: call.step,
              message,
              ...(c % 4 === 0 ? { error: { name: 'ToolError', code: 'TOOL_FAILED' } } : {}),
              ...(c % 5 === 1 ? { meta: { artifact: `artifact:x/${call.callId}`, bytes: b } } : {}),
            },
            surfaceOp: 'append',
            ...(call.callSeq !== undefined ? { sourceEventSeqs: [call.callSeq] } : {}),
          });
          pending.splice(index, 1);
          return true;
        }
        return false;
      case 7:
        if (openStep && pending.length === 0) {
          openStep = false;
          append({ type: 'step/end', time, data: { turn, step: stepInTurn } });
          return true;
        }
        return false;
      case 8:
        if (openTurn && !openStep) {
          openTurn = false;
          const reasons = [
            { kind: 'completed' as const },
            { kind: 'aborted' as const, reason: { kind: 'user' as const } },
            { kind: 'error' as const, error: { message: 'boom', code: 'SERVER_ERROR', status: 500 } },
            { kind: 'max-tokens' as const },
          ];
          append({ type: 'turn/end', time, data: { turn, reason: reasons[a % reasons.length]! } });
          return true;
        }
        return false;
      case 9: {
        const choice = a % 4;
        if (choice === 0) {
          append({
            type: 'request/header',
            time,
            data: { header: { provider: 'fake', model: 'fake-1', system: text(b) }, reason: 'initial' },
          });
        } else if (choice === 1) {
          append({ type: 'session/run', time, data: { workflowId: `session/${header.id}`, runId: `run-${b}` } });
        } else if (choice === 2 && openStep) {
          append({
            type: 'llm/retry',
            time,
            data: {
              turn,
              step: stepInTurn,
              attempt: 1 + (b % 3),
              delayMs: b,
              failure: { code: 'RATE_LIMITED', message: '429' },
            },
          });
        } else {
          append({ type: 'session/end-seed', time, data: {} });
        }
        return true;
      }
      case 10:
        return options.replaces && replaceSpan(session, append, action, time, options.balancedReplaces, nextId);
      case 11:
        return options.replaces && rewriteToolResult(session, append, action, time);
      default:
        return false;
    }
  };

  /** The loop's natural next event, used when a drawn action does not apply. */
  const naturalNext = ({ a }: Action): number => {
    if (!openTurn) return 0;
    if (!openStep) return stepInTurn > 0 && a % 3 === 0 ? 8 : 1;
    if (pending.length > 0) return pending.some((p) => p.callSeq === undefined) && a % 2 === 0 ? 5 : 6;
    return repliedInStep ? 7 : 4;
  };

  for (const action of program) {
    if (!perform(action.kind, action)) perform(naturalNext(action), action);
    onStep?.(session, action);
  }
  return {
    header,
    inputs,
    session,
    open: {
      openTurn: openTurn ? turn : undefined,
      openStep: openStep ? stepInTurn : undefined,
      pending: pending.map((p) => ({ ...p })),
    },
  };
}

/** Tool call ids opened by assistant nodes, and answered by tool/result nodes, in `span`. */
function callBalance(session: Session, span: readonly number[]): { calls: Set<string>; results: Set<string> } {
  const calls = new Set<string>();
  const results = new Set<string>();
  for (const seq of span) {
    const event = session.eventAt(seq)!;
    if (event.type === 'assistant/message') {
      for (const block of (event as SessionEvent<'assistant/message'>).data.message.content) {
        if (block.type === 'tool-call') calls.add(block.id);
      }
    } else if (event.type === 'tool/result') {
      results.add((event as SessionEvent<'tool/result'>).data.message.source.callId);
    }
  }
  return { calls, results };
}

function sameSet(x: Set<string>, y: Set<string>): boolean {
  return x.size === y.size && [...x].every((v) => y.has(v));
}

function replaceSpan(
  session: Session,
  append: (input: NewEvent) => StoredEvent,
  { a, b, c }: Action,
  time: number,
  balanced: boolean,
  nextId: (prefix: string) => string,
): boolean {
  const nodes = [...session.surfaceNodes];
  if (nodes.length === 0) return false;
  const i = a % nodes.length;
  const j = i + (b % (nodes.length - i));
  const span = nodes.slice(i, j + 1);
  if (balanced) {
    const { calls, results } = callBalance(session, span);
    if (!sameSet(calls, results)) return false;
  }
  // Compaction-style provenance: the bracket's start event may be listed too.
  const sources = [...span];
  if (c % 2 === 0) {
    const extra = session.nextSeq - 1;
    if (!sources.includes(extra)) sources.unshift(extra);
  }
  if (c % 3 === 2) {
    append({
      type: 'assistant/message',
      time,
      data: {
        turn: 1,
        step: 1,
        message: {
          id: nextId('ra'),
          role: 'assistant',
          content: [{ type: 'text', text: `recap ${a}` }],
          source: { kind: 'model', provider: 'fake', model: 'fake-1' },
        },
      },
      surfaceOp: { op: 'replace', start: span[0]!, end: span[span.length - 1]! },
      sourceEventSeqs: sources,
    });
    return true;
  }
  append({
    type: 'user/message',
    time,
    data: {
      id: nextId('sum'),
      role: 'user',
      content: [{ type: 'text', text: `<compacted-summary>${text(a)}</compacted-summary>` }],
      source: { kind: 'plugin', plugin: 'compact', compactionId: `cmp-${a}-${b}` },
    },
    surfaceOp: { op: 'replace', start: span[0]!, end: span[span.length - 1]! },
    sourceEventSeqs: sources,
  });
  return true;
}

function rewriteToolResult(
  session: Session,
  append: (input: NewEvent) => StoredEvent,
  { a, b }: Action,
  time: number,
): boolean {
  const results = session.surfaceNodes.filter((seq) => session.eventAt(seq)!.type === 'tool/result');
  if (results.length === 0) return false;
  const target = results[a % results.length]!;
  const original = session.eventAt(target) as SessionEvent<'tool/result'>;
  const block = original.data.message.content[0];
  if (b % 2 === 0) {
    append({
      type: 'compaction/prune',
      time,
      data: { shadowedRange: { start: target, end: target }, shadowedSeqs: [target], shadowedTokenCount: 10 + b },
    });
  }
  append({
    type: 'tool/result',
    time,
    data: {
      ...original.data,
      message: {
        ...original.data.message,
        content: [{ ...block, content: [{ type: 'text', text: `[pruned ${b}]` }] }],
      },
    },
    surfaceOp: { op: 'replace', start: target, end: target },
    sourceEventSeqs: b % 2 === 0 ? [session.nextSeq - 1, target] : [target],
  });
  return true;
}

/** Non-surface events to splice into a log (property 9). */
export const nonSurfaceEventArb: fc.Arbitrary<NewEvent> = fc.oneof(
  fc.record({ n: fc.nat(50) }).map(({ n }): NewEvent => ({
    type: 'assistant/chunk',
    time: BASE_TIME + n,
    data: { turn: 1, step: 1, chunk: { kind: 'text-delta', text: text(n) } },
  })),
  fc.nat(50).map((n): NewEvent => ({ type: 'turn/start', time: BASE_TIME - n, data: { turn: 1 + n } })),
  fc.nat(50).map((n): NewEvent => ({
    type: 'turn/end',
    time: BASE_TIME,
    data: { turn: 1 + n, reason: { kind: 'completed' } },
  })),
  fc.nat(50).map((n): NewEvent => ({ type: 'step/start', time: BASE_TIME, data: { turn: 1, step: 1 + n } })),
  fc.nat(50).map((n): NewEvent => ({
    type: 'tool/call',
    time: BASE_TIME,
    data: { turn: 1, step: 1, callId: `x${n}`, name: 'echo', arguments: '{}' },
  })),
  fc.nat(50).map((n): NewEvent => ({
    type: 'request/header',
    time: BASE_TIME,
    data: { header: { provider: 'p', model: `m${n}` }, reason: 'change' },
  })),
  fc.constant<NewEvent>({ type: 'session/end-seed', time: BASE_TIME, data: {} }),
  fc.nat(50).map((n): NewEvent => ({
    type: 'compaction/start',
    time: BASE_TIME,
    data: { compactionId: `c${n}`, turn: null, trigger: 'manual' },
  })),
);

/**
 * Rebuilds `inputs` with `extra[k]` events inserted before original index `k` (and
 * `extra[inputs.length]` at the end), remapping every seq reference (surfaceOp, sources).
 */
export function withInsertedEvents(
  inputs: readonly NewEvent[],
  extra: ReadonlyMap<number, readonly NewEvent[]>,
): NewEvent[] {
  const newSeq: number[] = [];
  let shift = 0;
  for (let k = 0; k < inputs.length; k++) {
    shift += extra.get(k)?.length ?? 0;
    newSeq.push(k + shift);
  }
  const mapSeq = (seq: number): number => newSeq[seq]!;
  const out: NewEvent[] = [];
  for (let k = 0; k <= inputs.length; k++) {
    out.push(...(extra.get(k) ?? []));
    const input = inputs[k];
    if (!input) continue;
    const remapped = { ...input } as NewEvent;
    if (input.surfaceOp !== undefined && input.surfaceOp !== 'append') {
      remapped.surfaceOp = { op: 'replace', start: mapSeq(input.surfaceOp.start), end: mapSeq(input.surfaceOp.end) };
    }
    if (input.sourceEventSeqs !== undefined) remapped.sourceEventSeqs = input.sourceEventSeqs.map(mapSeq);
    out.push(remapped);
  }
  return out;
}

/** True when every nested object/array reachable from `value` is frozen. */
export function isDeepFrozen(value: unknown): boolean {
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const item = stack.pop();
    if (item === null || typeof item !== 'object') continue;
    if (!Object.isFrozen(item)) return false;
    for (const key of Object.keys(item)) stack.push((item as Record<string, unknown>)[key]);
  }
  return true;
}
