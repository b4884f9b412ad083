/**
 * Model output is a boundary (DESIGN §1.7): tool-call arguments arrive as a string the model
 * wrote and may not be JSON at all. This parses them without throwing.
 */
import type { JsonObject } from '../session/json.js';

export type ToolArgumentsParse =
  { ok: true; value: JsonObject } | { ok: false; code: 'INVALID_TOOL_ARGUMENTS'; message: string };

/** Parses a tool call's arguments; an empty string counts as `{}`. Only JSON objects pass. */
export function parseToolCallArguments(toolName: string, args: string): ToolArgumentsParse {
  if (args.trim() === '') return { ok: true, value: {} };
  let value: unknown;
  try {
    value = JSON.parse(args);
  } catch (error) {
    return {
      ok: false,
      code: 'INVALID_TOOL_ARGUMENTS',
      message: `arguments of tool '${toolName}' are not valid JSON (${(error as Error).message}); send a JSON object`,
    };
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    return {
      ok: false,
      code: 'INVALID_TOOL_ARGUMENTS',
      message: `arguments of tool '${toolName}' must be a JSON object`,
    };
  }
  return { ok: true, value: value as JsonObject };
}
