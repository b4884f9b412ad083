/**
 * A run's tool options (issue 51). A LangGraph app sets a model's tool choice inside its graph
 * (`bindTools(tools, {tool_choice})`), and per-run settings reach a graph through
 * `config.configurable`; the agent behind this API is no graph, so a run gives them there:
 * `config.configurable.tool_choice` (`auto`, `none`, `required` or LangChain's `any`, a tool's
 * name, or `{type: 'function', function: {name}}`) and `config.configurable.parallel_tool_calls`.
 * They are the request options (hints) of the turn the run starts, so a forced choice holds for
 * its first model step (session/turn-hints.ts). The assistants are fixed, so they carry none.
 */
import type { ToolChoice, TurnHints } from '../../session/index.js';
import { LangGraphError } from './errors.js';

const TOOL_NAME = /^[A-Za-z0-9_-]{1,64}$/;

function invalid(field: string, why: string): LangGraphError {
  return new LangGraphError(422, `config.configurable.${field}: ${why}`, 'invalid_request');
}

function toolChoiceOf(value: unknown): ToolChoice {
  if (value === 'auto' || value === 'none' || value === 'required') return value;
  if (value === 'any') return 'required';
  const named =
    typeof value === 'string'
      ? value
      : typeof value === 'object' && value !== null && (value as { type?: unknown }).type === 'function'
        ? (value as { function?: { name?: unknown } }).function?.name
        : undefined;
  if (typeof named !== 'string' || !TOOL_NAME.test(named))
    throw invalid(
      'tool_choice',
      "send 'auto', 'none', 'required' (or 'any'), a tool's name (1-64 of A-Z a-z 0-9 _ -) or {type: 'function', function: {name}}",
    );
  return { name: named };
}

/** The hints a run's `config.configurable` gives the turn it starts (undefined: none); a bad value is a 422 naming it. */
export function runToolHints(configurable: Record<string, unknown>): TurnHints | undefined {
  const choice = configurable.tool_choice;
  const parallel = configurable.parallel_tool_calls;
  if (parallel !== undefined && parallel !== null && typeof parallel !== 'boolean')
    throw invalid('parallel_tool_calls', 'must be true or false');
  const hints: TurnHints = {
    ...(choice !== undefined && choice !== null ? { toolChoice: toolChoiceOf(choice) } : {}),
    ...(typeof parallel === 'boolean' ? { parallelToolCalls: parallel } : {}),
  };
  return Object.keys(hints).length > 0 ? hints : undefined;
}
