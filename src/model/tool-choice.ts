/**
 * Which models a request can force to call a tool (`tool_choice` `required` or a named tool), as
 * the catalogue (catalogue.ts) describes them. DeepSeek refuses a forced choice in thinking mode
 * with a 400 ("Thinking mode does not support this tool_choice"; `auto` and `none` it takes), and
 * its thinking is on unless a request turns it off; `deepseek-reasoner` forces it on.
 */
import type { ResolvedModel } from './catalogue.js';

/** Whether `model` takes a forced tool choice with thinking as the request sets it (`thinking`: the header's, when it says). */
export function takesForcedToolChoice(
  model: Pick<ResolvedModel, 'provider' | 'forcedThinking' | 'thinkingDefault'>,
  thinking: boolean | undefined,
): boolean {
  if (model.provider !== 'deepseek') return true;
  return (model.forcedThinking ?? thinking ?? model.thinkingDefault) === false;
}
