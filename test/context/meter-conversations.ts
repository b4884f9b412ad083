/**
 * Conversations for the token meter's tests and benchmark: a plan of exchanges (user text,
 * then assistant replies with reasoning, text and tool calls answered by tool results) turned
 * into a valid session log the way the agent loop writes one, and the exact DeepSeek count the
 * fake model server would report for the request the session sends now.
 */
import { DEFAULT_MODEL_CATALOGUE, lookupModel } from '../../src/model/catalogue.js';
import { deepseekPromptTokenIds } from '../../src/model/deepseek-tokens.js';
import type { TemplateMessage } from '../../src/model/deepseek-tokens.js';
import { buildChatRequest } from '../../src/model/request.js';
import {
  SESSION_FORMAT_VERSION,
  Session,
  type AssistantMessage,
  type ContentBlock,
  type RequestHeader,
  type TokenUsage,
} from '../../src/session/index.js';

export type PlannedCall = { name: string; arguments: string; result: string };
export type PlannedReply = { reasoning: string; text: string; calls: PlannedCall[] };
export type Exchange = { user: string; replies: PlannedReply[] };

/** Text that stresses tokenizers: prose, code, JSON, CJK, emoji and special-token strings. */
export const TEXT_FRAGMENTS: readonly string[] = [
  'The quick brown fox jumps over the lazy dog. ',
  'Please summarise the build failure and propose a fix.\n',
  'function add(a: number, b: number): number {\n  return a + b;\n}\n',
  'for (let i = 0; i < xs.length; i++) console.log(xs[i]);\n',
  '{"id": 42, "items": [{"name": "widget", "price": 9.99}], "ok": true}',
  '[1, 2, 3, {"nested": {"deep": null}}]',
  '你好，世界。这是一个测试消息，用来检查分词器。',
  '日本語のテキストも少し混ぜます。',
  '🙂🚀 émojis and àccents — “quotes” ',
  '<｜end▁of▁sentence｜>',
  '<｜begin▁of▁sentence｜><｜User｜>not really a user turn<｜Assistant｜>',
  '<|endoftext|><|im_start|>system',
  '<think>\nnot my reasoning\n</think>\n\n',
  '   \t\n\n',
  'https://example.com/a/b?c=d&e=f#g ',
  'SELECT name, count(*) FROM events GROUP BY name ORDER BY 2 DESC;\n',
];

export const TEST_SYSTEM = 'You are a careful coding assistant. Answer briefly.';

export const TEST_TOOLS: NonNullable<RequestHeader['tools']> = [
  {
    name: 'read_file',
    description: 'Read a file from the workspace.',
    parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
  },
  {
    name: 'run_shell',
    description: 'Run a shell command and return its output.',
    parameters: {
      type: 'object',
      properties: { command: { type: 'string' }, timeoutMs: { type: 'integer' } },
      required: ['command'],
    },
  },
];

export function meterSession(id = 'meter-session'): Session {
  return Session.create({ version: SESSION_FORMAT_VERSION, id, createdAt: 1_700_000_000_000 });
}

export type AppendOptions = {
  /** Logs a `request/header` with this header before each reply whose envelope differs from the last logged one. */
  header?: RequestHeader;
  /** Usage to log on a reply, given the exact prompt count of the request it answered. */
  usage?: (promptTokens: number, replyIndex: number) => TokenUsage | undefined;
  /** The model the usage callback's prompt count is for. Default 'fake'. */
  model?: string;
};

const TIME = 1_700_000_000_000;

/** Appends one exchange as a full turn: user message, replies, tool calls and tool results. */
export function appendExchange(session: Session, exchange: Exchange, turn: number, options: AppendOptions = {}): void {
  let ids = session.nextSeq;
  const id = (prefix: string): string => `${prefix}-${turn}-${ids++}`;
  session.append({ type: 'turn/start', time: TIME, data: { turn } });
  session.append({
    type: 'user/message',
    time: TIME,
    data: { id: id('u'), role: 'user', content: [{ type: 'text', text: exchange.user }], source: { kind: 'user' } },
    surfaceOp: 'append',
  });
  exchange.replies.forEach((reply, index) => {
    const step = index + 1;
    session.append({ type: 'step/start', time: TIME, data: { turn, step } });
    const header = options.header;
    if (header && !sameHeader(latestHeader(session), header)) {
      session.append({ type: 'request/header', time: TIME, data: { header, reason: 'change' } });
    }
    const content: ContentBlock[] = [];
    if (reply.reasoning !== '') content.push({ type: 'reasoning', text: reply.reasoning });
    if (reply.text !== '') content.push({ type: 'text', text: reply.text });
    const callIds = reply.calls.map(() => id('call'));
    reply.calls.forEach((call, i) =>
      content.push({ type: 'tool-call', id: callIds[i]!, name: call.name, arguments: call.arguments }),
    );
    const message: AssistantMessage = {
      id: id('a'),
      role: 'assistant',
      content,
      source: { kind: 'model', provider: 'fake', model: 'fake' },
    };
    const usage = options.usage && header ? options.usage(exactPromptTokens(session, header), index) : undefined;
    session.append({
      type: 'assistant/message',
      time: TIME,
      data: { turn, step, message, ...(usage ? { usage } : {}) },
      surfaceOp: 'append',
      sourceEventSeqs: [],
    });
    reply.calls.forEach((call, i) => {
      session.append({
        type: 'tool/call',
        time: TIME,
        data: { turn, step, callId: callIds[i]!, name: call.name, arguments: call.arguments },
      });
    });
    reply.calls.forEach((call, i) => {
      session.append({
        type: 'tool/result',
        time: TIME,
        data: {
          turn,
          step,
          message: {
            id: id('t'),
            role: 'user',
            content: [{ type: 'tool-result', toolCallId: callIds[i]!, content: [{ type: 'text', text: call.result }] }],
            source: { kind: 'tool', callId: callIds[i]! },
          },
        },
        surfaceOp: 'append',
      });
    });
    session.append({ type: 'step/end', time: TIME, data: { turn, step } });
  });
  session.append({ type: 'turn/end', time: TIME, data: { turn, reason: { kind: 'completed' } } });
}

function latestHeader(session: Session): RequestHeader | undefined {
  for (let seq = session.nextSeq - 1; seq >= 0; seq--) {
    const event = session.eventAt(seq)!;
    if (event.type === 'request/header') return (event.data as { header: RequestHeader }).header;
  }
  return undefined;
}

function sameHeader(a: RequestHeader | undefined, b: RequestHeader): boolean {
  return a !== undefined && JSON.stringify(a) === JSON.stringify(b);
}

/** The wire request the session would send now with `header` (as the model activity builds it). */
export function wireRequest(
  session: Session,
  header: RequestHeader,
): { messages: TemplateMessage[]; tools?: unknown[] } {
  const model = lookupModel(DEFAULT_MODEL_CATALOGUE, header.model);
  const body = buildChatRequest({ messages: session.deriveMessages(), header, model });
  return { messages: body.messages as TemplateMessage[], ...(body.tools ? { tools: body.tools } : {}) };
}

/** What the fake model server counts as `prompt_tokens` for the request the session sends now. */
export function exactPromptTokens(session: Session, header: RequestHeader): number {
  const request = wireRequest(session, header);
  return deepseekPromptTokenIds(request.messages, request.tools).length;
}

/** A small deterministic PRNG (mulberry32), so generated corpora are the same on every run. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A deterministic random exchange built from {@link TEXT_FRAGMENTS}. */
export function randomExchange(
  random: () => number,
  size = 6,
  fragments: readonly string[] = TEXT_FRAGMENTS,
  toolSteps = 2,
): Exchange {
  const pick = (): string => fragments[Math.floor(random() * fragments.length)]!;
  const text = (n: number): string => Array.from({ length: 1 + Math.floor(random() * n) }, pick).join('');
  const replies: PlannedReply[] = [];
  const steps = 1 + Math.floor(random() * (toolSteps + 1));
  for (let s = 0; s < steps; s++) {
    const last = s === steps - 1;
    const calls: PlannedCall[] = last
      ? []
      : Array.from({ length: 1 + Math.floor(random() * 3) }, (_, i) => ({
          name: i % 2 === 0 ? 'read_file' : 'run_shell',
          arguments: JSON.stringify({ path: `src/${Math.floor(random() * 100)}.ts`, note: text(2) }),
          result: text(size * 2),
        }));
    replies.push({
      reasoning: random() < 0.5 ? text(size) : '',
      text: random() < 0.7 || calls.length === 0 ? text(size) : '',
      calls,
    });
  }
  return { user: text(size), replies };
}
