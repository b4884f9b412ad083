/**
 * Offline tokenizers per model family (DESIGN §6) and each family's chat-template pricing.
 *
 * A family estimator prices the request *envelope* (system prompt, tool schemas and the fixed
 * template tokens such as DeepSeek's BOS and the final assistant prefix) separately from each
 * message, so that `envelope + Σ message prices` equals the whole request's count and message
 * prices can be cached per surface node. Text is always encoded with the tokenizer's ordinary
 * path: special-token strings in user text are counted as plain text and never throw.
 */
import { createRequire } from 'node:module';
import type { get_encoding as getEncoding, Tiktoken } from 'tiktoken';
import {
  deepseekPromptTokenIds,
  encodeOrdinary,
  wireContentText,
  type TemplateMessage,
} from '../model/deepseek-tokens.js';
import { assertNever } from '../session/messages.js';
import type { TokenizerFamily } from '../model/catalogue.js';

/** What a family estimator needs from a wire request: its messages and tool schemas. */
export type WireRequestParts = {
  messages: readonly TemplateMessage[];
  tools?: readonly unknown[];
};

/**
 * A message's price in isolation, plus what its neighbours need to know: templates that group
 * consecutive tool outputs (DeepSeek) charge the group's brackets once, to its first message.
 */
export type StandalonePrice = {
  tokens: number;
  /** The first wire message is a `tool` output. */
  startsWithTool: boolean;
  /** The last wire message is a `tool` output. */
  endsWithTool: boolean;
};

/** One tokenizer family's pricing of requests. */
export interface FamilyEstimator {
  readonly family: TokenizerFamily;
  /** Ordinary (no special-token parsing) token count of `text`. */
  countText(text: string): number;
  /** Envelope tokens: system messages, tool schemas and the fixed per-request template tokens. */
  envelopeTokens(system: readonly TemplateMessage[], tools: readonly unknown[] | undefined): number;
  /** The price of the wire messages one derived message becomes, as if preceded by a non-tool message. */
  messagePrice(wire: readonly TemplateMessage[]): StandalonePrice;
  /** Tokens saved when a message starting with a tool output follows one ending with a tool output. */
  readonly toolRunDiscount: number;
}

// ---- DeepSeek V3 --------------------------------------------------------------------------

/** BOS before the system text and the `<｜Assistant｜>` generation prompt after the last message. */
const DEEPSEEK_FIXED_TOKENS = 2;
/** `<｜tool▁outputs▁begin｜>` … `<｜tool▁outputs▁end｜>` around a run of tool outputs. */
const DEEPSEEK_TOOL_RUN_BRACKETS = 2;

/**
 * DeepSeek V3 through the same template function the fake server counts with, so the sum of
 * envelope and message prices equals `deepseekPromptTokenIds(request).length` exactly: the
 * template encodes each text segment on its own, so segment counts add up.
 */
export const deepseekEstimator: FamilyEstimator = {
  family: 'deepseek',
  countText: (text) => encodeOrdinary(text).length,
  envelopeTokens: (system, tools) => deepseekPromptTokenIds(system, tools).length,
  messagePrice(wire) {
    if (wire.length === 0) return { tokens: 0, startsWithTool: false, endsWithTool: false };
    return {
      tokens: deepseekPromptTokenIds(wire).length - DEEPSEEK_FIXED_TOKENS,
      startsWithTool: wire[0]!.role === 'tool',
      endsWithTool: wire[wire.length - 1]!.role === 'tool',
    };
  },
  toolRunDiscount: DEEPSEEK_TOOL_RUN_BRACKETS,
};

// ---- OpenAI o200k_base --------------------------------------------------------------------

let o200k: Tiktoken | undefined;
function o200kEncoder(): Tiktoken {
  // One wasm encoder per process: creating one costs ~100 ms and its memory lives outside the JS
  // heap. tiktoken itself is loaded here too, on first use: loading its wasm costs ~16 MiB of RSS
  // that a worker metering only DeepSeek-family models never needs.
  if (o200k === undefined) {
    const { get_encoding } = createRequire(import.meta.url)('tiktoken') as { get_encoding: typeof getEncoding };
    o200k = get_encoding('o200k_base');
  }
  return o200k;
}

/** Frees the wasm `o200k_base` encoder (a later count creates a new one). For tests and shutdown. */
export function disposeTokenizers(): void {
  o200k?.free();
  o200k = undefined;
}

/** `o200k_base` ordinary token count: `<|endoftext|>` and friends are plain text here. */
export function countO200kTokens(text: string): number {
  return text.length === 0 ? 0 : o200kEncoder().encode_ordinary(text).length;
}

/** `<|start|>role<|message|>…<|end|>` per message (OpenAI's published counting recipe). */
const OPENAI_PER_MESSAGE = 4;
/** `<|start|>assistant<|message|>` priming the reply. */
const OPENAI_REPLY_PRIMING = 3;
/** Framing of one tool call inside an assistant message (recipient, channel, constrain markers). */
const OPENAI_PER_TOOL_CALL = 7;
/** The tool namespace wrapper around the tool schemas. */
const OPENAI_TOOLS_WRAPPER = 12;

function openaiWireTokens(message: TemplateMessage): number {
  let tokens = OPENAI_PER_MESSAGE + countO200kTokens(wireContentText(message.content));
  if (message.reasoning_content) tokens += countO200kTokens(message.reasoning_content);
  for (const call of message.tool_calls ?? []) {
    tokens += OPENAI_PER_TOOL_CALL + countO200kTokens(call.function.name) + countO200kTokens(call.function.arguments);
  }
  return tokens;
}

/**
 * OpenAI models through `o200k_base` plus the published per-message overhead. The template
 * overhead of tool schemas is an approximation (OpenAI renders them in an undocumented
 * format), which the usage calibration corrects per model.
 */
export const o200kEstimator: FamilyEstimator = {
  family: 'o200k',
  countText: countO200kTokens,
  envelopeTokens(system, tools) {
    let tokens = OPENAI_REPLY_PRIMING;
    for (const message of system) tokens += openaiWireTokens(message);
    if (tools && tools.length > 0) tokens += OPENAI_TOOLS_WRAPPER + countO200kTokens(JSON.stringify(tools));
    return tokens;
  },
  messagePrice(wire) {
    let tokens = 0;
    for (const message of wire) tokens += openaiWireTokens(message);
    return {
      tokens,
      startsWithTool: wire.length > 0 && wire[0]!.role === 'tool',
      endsWithTool: wire.length > 0 && wire[wire.length - 1]!.role === 'tool',
    };
  },
  toolRunDiscount: 0,
};

/** The estimator for a tokenizer family. */
export function familyEstimator(family: TokenizerFamily): FamilyEstimator {
  switch (family) {
    case 'deepseek':
      return deepseekEstimator;
    case 'o200k':
      return o200kEstimator;
    default:
      return assertNever(family, 'tokenizer family');
  }
}
