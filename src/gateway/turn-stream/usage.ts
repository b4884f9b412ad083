/** A turn's token usage, summed over its model calls as every API reports it. */
import type { TokenUsage } from '../../session/index.js';

/** `total` with `usage` added to each bucket (a new total when there is none yet). */
export function addTokenUsage(total: TokenUsage | undefined, usage: TokenUsage): TokenUsage {
  const sum: TokenUsage = total ?? { inputTokens: 0, outputTokens: 0 };
  sum.inputTokens += usage.inputTokens;
  sum.outputTokens += usage.outputTokens;
  if (usage.cacheReadTokens !== undefined) sum.cacheReadTokens = (sum.cacheReadTokens ?? 0) + usage.cacheReadTokens;
  if (usage.cacheWriteTokens !== undefined) sum.cacheWriteTokens = (sum.cacheWriteTokens ?? 0) + usage.cacheWriteTokens;
  if (usage.reasoningTokens !== undefined) sum.reasoningTokens = (sum.reasoningTokens ?? 0) + usage.reasoningTokens;
  return sum;
}
