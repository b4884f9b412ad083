/**
 * The fake model's obedience to a request's tool options, as a provider's: `tool_choice`
 * `required` makes it call a tool even when its script answers in text (the last tool the
 * request lists: sessionlog lists a caller's tools after the worker's), a named tool makes it
 * call that tool (with arguments of its parameters' shape whose strings are the user's last
 * message), `none` makes it answer in text, and `parallel_tool_calls: false` keeps one call
 * per reply. A tool choice without tools, or naming a tool the request does not carry, is refused
 * with a 400 as OpenAI refuses one.
 */
import { invalidRequest } from './http.js';
import { valueOfSchema } from './replies.js';
import type { NormalizedReply } from './types.js';
import type { FakeChatBody } from './wire.js';

/** What the reply needs besides the request: a fresh call id, and the text of an answer without tools. */
export type ToolChoiceContext = { nextCallId: () => string; textReply: () => string; lastUserText: string };

/** Refuses tool options the request cannot carry (a 400 naming the field), before any reply is made. */
export function checkToolOptions(body: FakeChatBody): void {
  const names = (body.tools ?? []).map((tool) => tool.function.name);
  const choice = body.tool_choice;
  if (choice !== undefined && names.length === 0)
    throw invalidRequest('Invalid value for tool_choice: tool_choice is only allowed when tools are specified.');
  if (body.parallel_tool_calls !== undefined && names.length === 0)
    throw invalidRequest('Invalid value for parallel_tool_calls: only allowed when tools are specified.');
  if (typeof choice === 'object' && !names.includes(choice.function.name))
    throw invalidRequest(
      `Invalid value for tool_choice: no function named ${JSON.stringify(choice.function.name)} was specified in the tools parameter.`,
    );
}

/** `reply` as a provider that honours the request's `tool_choice` and `parallel_tool_calls` sends it. */
export function honourToolOptions(reply: NormalizedReply, body: FakeChatBody, ctx: ToolChoiceContext): NormalizedReply {
  const choice = body.tool_choice;
  let result = reply;
  if (choice === 'none' && reply.toolCalls.length > 0)
    result = { ...reply, text: reply.text !== '' ? reply.text : ctx.textReply(), toolCalls: [], finishReason: 'stop' };
  else if (choice === 'required' && reply.toolCalls.length === 0)
    result = forcedCall(reply, body, body.tools!.at(-1)!.function.name, ctx);
  else if (typeof choice === 'object') {
    const named = reply.toolCalls.filter((call) => call.name === choice.function.name);
    result = named.length > 0 ? { ...reply, toolCalls: named } : forcedCall(reply, body, choice.function.name, ctx);
  }
  if (body.parallel_tool_calls === false && result.toolCalls.length > 1)
    result = { ...result, toolCalls: result.toolCalls.slice(0, 1) };
  return result;
}

/** A reply that calls `name` once, with arguments of its parameters' shape made from the user's last message. */
function forcedCall(reply: NormalizedReply, body: FakeChatBody, name: string, ctx: ToolChoiceContext): NormalizedReply {
  const tool = body.tools!.find((t) => t.function.name === name)!;
  const parameters = tool.function.parameters ?? { type: 'object', properties: {} };
  return {
    reasoning: reply.reasoning,
    text: '',
    toolCalls: [
      { id: ctx.nextCallId(), name, arguments: JSON.stringify(valueOfSchema(parameters, ctx.lastUserText, 0)) },
    ],
    finishReason: 'tool_calls',
  };
}
