/**
 * The usage the fake model reports: the prompt as counted with the DeepSeek V3 tokenizer under
 * its chat template, cache hits as the common token prefix with the previous request, and the
 * reply's tokens.
 */
import { countOrdinaryTokens } from '../deepseek-tokens.js';
import type { NormalizedReply } from './types.js';

/** The usage of one completion, as sent. */
export type FakeUsage = ReturnType<typeof usageOf>;

export function commonPrefixLength(a: readonly number[], b: readonly number[]): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}

/** `imageTokens`: the part of `promptTokens` images cost, reported as `prompt_tokens_details.image_tokens` when there are any. */
export function usageOf(promptTokens: number, cacheHit: number, reply: NormalizedReply, imageTokens = 0) {
  const reasoningTokens = countOrdinaryTokens(reply.reasoning);
  let completionTokens = reasoningTokens + countOrdinaryTokens(reply.text);
  for (const call of reply.toolCalls)
    completionTokens += countOrdinaryTokens(call.name) + countOrdinaryTokens(call.arguments);
  return {
    prompt_tokens: promptTokens,
    completion_tokens: completionTokens,
    total_tokens: promptTokens + completionTokens,
    prompt_cache_hit_tokens: cacheHit,
    prompt_cache_miss_tokens: promptTokens - cacheHit,
    prompt_tokens_details: { cached_tokens: cacheHit, ...(imageTokens > 0 ? { image_tokens: imageTokens } : {}) },
    completion_tokens_details: { reasoning_tokens: reasoningTokens },
  };
}
