/**
 * The agent a session runs: the worker's defaults overridden by the session's own header
 * (model, system prompt, tool set), and the request envelope a model call is made with.
 */
import { responseFormatsOf } from '../model/catalogue.js';
import { takesForcedToolChoice } from '../model/tool-choice.js';
import { ModelCallError, modelFailure } from '../model/errors.js';
import type { ModelPort } from '../model/provider.js';
import {
  clashingToolNames,
  forcesToolCall,
  toolChoiceToolsProblem,
  type AgentSpec,
  type AskedAgent,
  type TurnHints,
  type RequestHeader,
  type ToolSchema,
} from '../session/index.js';
import { OPEN_MEDIA_TOOL, RECALL_TOOL_NAMES } from '../tools/builtin.js';
import type { ToolRegistry } from '../tools/registry.js';

/** How the agent of new sessions is configured (model, system prompt, tool set, limits). */
export type AgentConfig = {
  model: string;
  system?: string;
  tools: string[];
  maxTokens?: number;
  thinking?: boolean;
  reasoningEffort?: string;
};

/**
 * The request envelope for a session started with `spec`, in a turn that adds `turnTools` (the
 * caller's, after the worker's). Resolves the model through the port's catalogue, so an unknown
 * model fails here (UNKNOWN_MODEL), before any call; a turn tool named like one of the worker's
 * fails as a bad request (the model could not tell them apart), and so does a tool choice the
 * request cannot honour (a named tool it does not carry, `required` without tools, a forced
 * choice the model refuses). `hints` are the step's (`hintsForStep`). `holdsMedia`: the
 * session's history holds stored media, so `open_media` joins the tools (its stand-ins name it).
 */
export function requestHeaderFor(
  deps: { model: ModelPort; tools: ToolRegistry; agent: AgentConfig; context?: unknown },
  spec: AgentSpec | undefined,
  turnTools?: readonly ToolSchema[],
  asked: AskedAgent = {},
  hints?: TurnHints,
  holdsMedia = false,
): RequestHeader {
  // What a caller asked for (the last turn that named it) wins over the session's spec and the worker's default.
  const model = asked.model ?? spec?.model ?? deps.agent.model;
  const resolved = deps.model.model(model);
  const format = hints?.responseFormat?.type;
  if (format !== undefined && !responseFormatsOf(resolved).includes(format)) {
    throw new ModelCallError(
      modelFailure(
        'bad_request',
        `model ${JSON.stringify(model)} cannot honour a ${format} response format (it takes: ${responseFormatsOf(resolved).join(', ')})`,
      ),
    );
  }
  const names = [...(spec?.tools ?? deps.agent.tools)];
  // Where compaction runs, what it replaces stays reachable: the recall tools come with it.
  if (deps.context)
    for (const name of RECALL_TOOL_NAMES) if (!names.includes(name) && deps.tools.get(name)) names.push(name);
  // Where the history holds stored media, the older ones are stand-ins: the tool that opens them comes with them.
  if (holdsMedia && !names.includes(OPEN_MEDIA_TOOL) && deps.tools.get(OPEN_MEDIA_TOOL)) names.push(OPEN_MEDIA_TOOL);
  const tools = deps.tools.schemas(names);
  if (turnTools) {
    const clashes = clashingToolNames(turnTools, tools);
    if (clashes.length > 0) {
      throw new ModelCallError(
        modelFailure(
          'bad_request',
          `the tools given for this turn include ${clashes.map((n) => JSON.stringify(n)).join(', ')}, which the worker already has; give the caller's tools other names`,
        ),
      );
    }
    tools.push(...turnTools);
  }
  const choice = hints?.toolChoice;
  const choiceProblem = toolChoiceToolsProblem(
    choice,
    tools.map((tool) => tool.name),
  );
  if (choiceProblem) throw new ModelCallError(modelFailure('bad_request', choiceProblem));
  if (forcesToolCall(choice) && !takesForcedToolChoice(resolved, deps.agent.thinking))
    throw new ModelCallError(
      modelFailure(
        'bad_request',
        `model ${JSON.stringify(model)} cannot be forced to call a tool while it thinks (tool_choice ${JSON.stringify(typeof choice === 'string' ? choice : choice.name)}); send tool_choice 'auto', or turn thinking off`,
      ),
    );
  const system = asked.system ?? spec?.system ?? deps.agent.system;
  return {
    provider: deps.model.provider,
    model,
    ...(system ? { system } : {}),
    ...(tools.length > 0 ? { tools } : {}),
    ...(deps.agent.maxTokens !== undefined ? { maxTokens: deps.agent.maxTokens } : {}),
    ...(deps.agent.reasoningEffort !== undefined ? { reasoningEffort: deps.agent.reasoningEffort } : {}),
    ...(deps.agent.thinking !== undefined ? { thinking: deps.agent.thinking } : {}),
    ...(hints ? { hints } : {}),
  };
}
