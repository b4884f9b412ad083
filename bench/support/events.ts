/**
 * Realistic session events for the store benchmarks: the shapes the activities append
 * (src/activities/session-activities.ts), with valid surface ops and deterministic text.
 */
import { SESSION_FORMAT_VERSION, type NewEvent, type SessionHeader } from '../../src/session/index.js';

const WORDS = (
  'the a of to and in is that for it as with be on not this by are or from at which but have an they you were ' +
  'function value store event session log append batch turn model token message history surface replay durable ' +
  'workflow activity retry timeout commit write read index query cache checkpoint worker server client stream ' +
  'result error because however therefore first then finally example should would could returns string number'
).split(' ');

/** Deterministic word soup (mulberry32), so every run stores the same bytes. */
export class TextSource {
  private state: number;
  constructor(seed = 42) {
    this.state = seed >>> 0;
  }

  private next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** About `chars` characters of sentence-like text. */
  text(chars: number): string {
    let out = '';
    while (out.length < chars) {
      const word = WORDS[Math.floor(this.next() * WORDS.length)]!;
      out += out.length === 0 ? word[0]!.toUpperCase() + word.slice(1) : this.next() < 0.08 ? `. ${word}` : ` ${word}`;
    }
    return `${out.slice(0, chars - 1)}.`;
  }
}

/** ~400 tokens of English is ~1,600 characters. */
export const ASSISTANT_CHARS = 1_600;

export function benchHeader(id: string): SessionHeader {
  return { version: SESSION_FORMAT_VERSION, id, createdAt: 1_700_000_000_000 };
}

export const turnStart = (turn: number, time: number): NewEvent => ({ type: 'turn/start', time, data: { turn } });
export const turnEnd = (turn: number, time: number): NewEvent => ({
  type: 'turn/end',
  time,
  data: { turn, reason: { kind: 'completed' } },
});
export const stepStart = (turn: number, step: number, time: number): NewEvent => ({
  type: 'step/start',
  time,
  data: { turn, step },
});
export const stepEnd = (turn: number, step: number, time: number): NewEvent => ({
  type: 'step/end',
  time,
  data: { turn, step },
});

export function userMessage(id: string, text: string, time: number): NewEvent {
  return {
    type: 'user/message',
    time,
    data: { id, role: 'user', content: [{ type: 'text', text }], source: { kind: 'user' } },
    surfaceOp: 'append',
  };
}

export function assistantMessage(
  id: string,
  turn: number,
  step: number,
  text: string,
  time: number,
  toolCall?: { id: string; name: string; arguments: string },
): NewEvent {
  return {
    type: 'assistant/message',
    time,
    data: {
      turn,
      step,
      message: {
        id,
        role: 'assistant',
        content: [{ type: 'text', text }, ...(toolCall ? [{ type: 'tool-call' as const, ...toolCall }] : [])],
        source: { kind: 'model', provider: 'deepseek', model: 'deepseek-chat' },
      },
      usage: { inputTokens: 1_200 + turn * 40, outputTokens: 400, cacheReadTokens: 1_150 + turn * 40 },
      finishReason: toolCall ? 'tool_calls' : 'stop',
    },
    surfaceOp: 'append',
  };
}

export function assistantChunk(turn: number, step: number, text: string, time: number): NewEvent {
  return { type: 'assistant/chunk', time, data: { turn, step, chunk: { kind: 'text-delta', text } } };
}

export function toolCall(turn: number, step: number, callId: string, time: number): NewEvent {
  return {
    type: 'tool/call',
    time,
    data: { turn, step, callId, name: 'word_count', arguments: '{"text":"count these words please"}' },
  };
}

export function toolResult(turn: number, step: number, callId: string, text: string, time: number): NewEvent {
  return {
    type: 'tool/result',
    time,
    data: {
      turn,
      step,
      message: {
        id: `r-${callId}`,
        role: 'user',
        content: [{ type: 'tool-result', toolCallId: callId, content: [{ type: 'text', text }] }],
        source: { kind: 'tool', callId },
      },
    },
    surfaceOp: 'append',
  };
}

/**
 * An endless, valid stream of turns as the worker writes them: user message, a model step
 * that streams four coalesced chunks and calls a tool, the tool's result, and a second step
 * that streams the ~400-token answer: {@link REALISTIC_EVENTS_PER_TURN} events, 4 of them surface nodes.
 */
export function* realisticEvents(text = new TextSource()): Generator<NewEvent> {
  let time = 1_700_000_000_000;
  for (let turn = 1; ; turn++) {
    time += 1_000;
    const callId = `call_${turn}`;
    yield turnStart(turn, time);
    yield stepStart(turn, 1, time);
    yield userMessage(`u${turn}`, text.text(160), time);
    for (let i = 0; i < 2; i++) yield assistantChunk(turn, 1, text.text(100), time);
    yield assistantMessage(`a${turn}.1`, turn, 1, text.text(200), time, {
      id: callId,
      name: 'word_count',
      arguments: '{"text":"count these words please"}',
    });
    yield toolCall(turn, 1, callId, time);
    yield stepEnd(turn, 1, time);
    yield stepStart(turn, 2, time);
    yield toolResult(turn, 2, callId, text.text(300), time);
    const answer = text.text(ASSISTANT_CHARS);
    for (let i = 0; i < 4; i++) yield assistantChunk(turn, 2, answer.slice(i * 400, (i + 1) * 400), time);
    yield assistantMessage(`a${turn}.2`, turn, 2, answer, time);
    yield stepEnd(turn, 2, time);
    yield turnEnd(turn, time);
  }
}

/** The first `count` events of `source`, cut into batches of `batchSize`. */
export function takeBatches(source: Iterator<NewEvent>, count: number, batchSize: number): NewEvent[][] {
  const batches: NewEvent[][] = [];
  let batch: NewEvent[] = [];
  for (let i = 0; i < count; i++) {
    batch.push(source.next().value as NewEvent);
    if (batch.length === batchSize) {
      batches.push(batch);
      batch = [];
    }
  }
  if (batch.length > 0) batches.push(batch);
  return batches;
}

/**
 * One turn of a chunk-heavy log: user message, `chunks` uncoalesced text deltas, the
 * ~400-token answer. Two surface nodes; everything else is log-only.
 */
export function chunkHeavyTurn(turn: number, chunks: number, text: TextSource): NewEvent[] {
  const time = 1_700_000_000_000 + turn * 1_000;
  const answer = text.text(ASSISTANT_CHARS);
  const events: NewEvent[] = [
    turnStart(turn, time),
    stepStart(turn, 1, time),
    userMessage(`u${turn}`, text.text(120), time),
  ];
  for (let i = 0; i < chunks; i++)
    events.push(
      assistantChunk(turn, 1, answer.slice((i * 7) % ASSISTANT_CHARS, ((i * 7) % ASSISTANT_CHARS) + 7), time),
    );
  events.push(assistantMessage(`a${turn}`, turn, 1, answer, time), stepEnd(turn, 1, time), turnEnd(turn, time));
  return events;
}

/** Events per turn of {@link realisticEvents} (counted, so the two cannot drift apart). */
export const REALISTIC_EVENTS_PER_TURN = ((): number => {
  let n = 0;
  for (const event of realisticEvents()) {
    n += 1;
    if (event.type === 'turn/end') return n;
  }
  throw new Error('unreachable: realisticEvents is endless');
})();
