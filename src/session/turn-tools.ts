/**
 * Tools of one turn (DESIGN §5.1): function tools a caller sends with a message for the turn
 * that message starts (the OpenAI-compatible API's per-response `tools`). The caller runs them:
 * the model sees them beside the worker's tools for that turn only, and each call waits, like an
 * external tool's, for the caller's result. They are logged on the turn's `turn/start`, so a
 * retried or resumed turn offers the model exactly the same tools.
 *
 * The check is plain code (no schema library) because the session workflow runs it too.
 */
import type { ToolSchema } from './events.js';

/** At most this many tools per turn. */
export const MAX_TURN_TOOLS = 128;
/** A tool's description, in characters. */
export const MAX_TURN_TOOL_DESCRIPTION = 4096;
/** A tool's JSON Schema as JSON text, in characters. */
export const MAX_TURN_TOOL_PARAMETERS = 64 * 1024;
/** All of a turn's tools as JSON text, in characters (they travel in a workflow message). */
export const MAX_TURN_TOOLS_JSON = 256 * 1024;

const TOOL_NAME = /^[A-Za-z0-9_-]{1,64}$/;

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** What is wrong with `tools` as a turn's tool list, or undefined when it is a valid one. */
export function turnToolsProblem(tools: unknown): string | undefined {
  if (!Array.isArray(tools)) return 'tools must be a list of {name, description, parameters}';
  if (tools.length === 0) return 'tools must hold at least one tool when given';
  if (tools.length > MAX_TURN_TOOLS) return `a turn has at most ${MAX_TURN_TOOLS} tools, got ${tools.length}`;
  const names = new Set<string>();
  let total = 0;
  for (const [i, tool] of tools.entries()) {
    if (!isPlainObject(tool)) return `tools[${i}] must be an object {name, description, parameters}`;
    const extra = Object.keys(tool).filter((key) => !['name', 'description', 'parameters', 'strict'].includes(key));
    if (extra.length > 0) return `tools[${i}] has unknown field ${JSON.stringify(extra[0])}`;
    if (typeof tool.name !== 'string' || !TOOL_NAME.test(tool.name))
      return `tools[${i}].name must be 1-64 characters of A-Z a-z 0-9 _ -`;
    if (names.has(tool.name)) return `tools[${i}].name ${JSON.stringify(tool.name)} is given twice`;
    names.add(tool.name);
    if (typeof tool.description !== 'string' || tool.description.length > MAX_TURN_TOOL_DESCRIPTION) {
      return `tools[${i}].description must be a string of at most ${MAX_TURN_TOOL_DESCRIPTION} characters`;
    }
    if (!isPlainObject(tool.parameters)) return `tools[${i}].parameters must be a JSON Schema object`;
    let text: string;
    try {
      text = JSON.stringify(tool.parameters);
    } catch {
      return `tools[${i}].parameters must be JSON`;
    }
    if (text.length > MAX_TURN_TOOL_PARAMETERS)
      return `tools[${i}].parameters is ${text.length} characters of JSON; the limit is ${MAX_TURN_TOOL_PARAMETERS}`;
    total += text.length + tool.name.length + tool.description.length;
    if (total > MAX_TURN_TOOLS_JSON)
      return `the tools come to more than ${MAX_TURN_TOOLS_JSON} characters of JSON; send fewer or shorter ones`;
    if (tool.strict !== undefined && typeof tool.strict !== 'boolean')
      return `tools[${i}].strict must be true or false`;
  }
  return undefined;
}

/** The names of `turnTools` that are also among `workerTools`, in order. */
export function clashingToolNames(turnTools: readonly ToolSchema[], workerTools: readonly ToolSchema[]): string[] {
  const taken = new Set(workerTools.map((tool) => tool.name));
  return turnTools.filter((tool) => taken.has(tool.name)).map((tool) => tool.name);
}
