/**
 * Tools as people already write them (DESIGN §5.4), accepted as they are: a sessionlog
 * {@link Tool}, a {@link defineTool} definition, an AI SDK `tool()` (keyed by name in a tool set,
 * as the AI SDK keys them) and a LangChain `tool()` / StructuredTool. {@link toSessionlogTool}
 * turns each into the runnable (or external) tool the registry holds; the shapes are read by
 * duck typing, so neither framework is a dependency of the worker.
 */
import { SessionlogError } from '../session/index.js';
import { isSchemaTool, runnableSchemaTool, toolOutputOf, validatedTool, type SchemaTool } from './define.js';
import type { ApprovalRule, Tool, ToolOutput } from './registry.js';

/**
 * An AI SDK tool (`tool({ description, inputSchema, execute })` from `ai`): `inputSchema` is a
 * zod or other Standard Schema, or the AI SDK's `jsonSchema()` wrapper. Without `execute` it is
 * a tool the caller runs (sessionlog's external tool).
 */
export type AISDKTool = {
  description?: string | ((options: never) => string);
  inputSchema: unknown;
  // Method syntax: the AI SDK's own option and message types stay assignable without importing them.
  execute?(input: never, options: never): unknown;
  needsApproval?: boolean | ((input: never, options: never) => unknown);
  toModelOutput?(options: never): unknown;
  type?: string;
};

/** A LangChain tool (`tool(fn, { name, description, schema })` from `@langchain/core/tools`, or any StructuredTool). */
export type LangChainTool = {
  name: string;
  description: string;
  schema: unknown;
  invoke(input: never, config?: { signal?: AbortSignal }): Promise<unknown>;
};

/** Anything a worker's tools may be given as. An AI SDK tool has no name of its own: give it in a record keyed by name. */
export type ToolLike = Tool | SchemaTool | LangChainTool | AISDKTool;

/**
 * Turns `tool` into a sessionlog {@link Tool}. `key` is its name in a record (the AI SDK's tool
 * set shape); a tool with a name of its own must agree with it. Throws a SessionlogError naming
 * the tool for what cannot work (a schema that cannot become JSON Schema, a provider-executed
 * AI SDK tool, an unknown shape).
 */
export function toSessionlogTool(tool: ToolLike, key?: string): Tool {
  const label = key ?? describeName(tool);
  if (tool === null || typeof tool !== 'object')
    throw new SessionlogError(
      'INVALID_ARGUMENT',
      `tool "${label}" is ${tool === null ? 'null' : typeof tool}, not a tool`,
    );
  const name = ownName(tool, key);
  if (isSchemaTool(tool)) return runnableSchemaTool(tool, name);
  if ('parameters' in tool && ('run' in tool || 'external' in tool)) return tool as Tool;
  if (isLangChainTool(tool)) return fromLangChain(tool, name);
  if ('inputSchema' in tool) return fromAISDK(tool, name);
  throw new SessionlogError(
    'INVALID_ARGUMENT',
    `tool "${name}" is not a tool: pass a sessionlog Tool ({name, description, parameters, run}), a defineTool() result, an AI SDK tool() or a LangChain tool()`,
  );
}

function describeName(tool: unknown): string {
  const name = (tool as { name?: unknown } | null)?.name;
  return typeof name === 'string' ? name : '(unnamed)';
}

/** The tool's name: its own, the record's key, and the two must agree when both exist. */
function ownName(tool: object, key: string | undefined): string {
  const own = (tool as { name?: unknown }).name;
  if (typeof own === 'string' && key !== undefined && own !== key)
    throw new SessionlogError(
      'INVALID_ARGUMENT',
      `tool "${own}" is given under the key "${key}": use its name as the key, or leave the tool out of the record`,
    );
  const name = typeof own === 'string' ? own : key;
  if (name === undefined)
    throw new SessionlogError(
      'INVALID_ARGUMENT',
      'a tool without a name (an AI SDK tool()) must be given in a record keyed by its name, e.g. createWorker({ tools: { weather } })',
    );
  return name;
}

function isLangChainTool(tool: object): tool is LangChainTool {
  const candidate = tool as Partial<LangChainTool>;
  return typeof candidate.invoke === 'function' && typeof candidate.name === 'string' && 'schema' in tool;
}

function fromLangChain(tool: LangChainTool, name: string): Tool {
  return validatedTool({
    name,
    description: tool.description,
    inputSchema: tool.schema,
    // LangChain validates again; it returns the function's result (a ToolMessage only when given a tool call).
    execute: async (args, context) => langChainOutput(await tool.invoke(args as never, { signal: context.signal })),
  });
}

function langChainOutput(value: unknown): ToolOutput {
  if (value !== null && typeof value === 'object' && 'content' in value && 'tool_call_id' in value) {
    const content = (value as { content: unknown }).content;
    return { text: typeof content === 'string' ? content : JSON.stringify(content) };
  }
  return typeof value === 'string' ? { text: value } : { text: JSON.stringify(value) ?? '' };
}

function fromAISDK(tool: AISDKTool, name: string): Tool {
  if (tool.type === 'provider')
    throw new SessionlogError(
      'INVALID_ARGUMENT',
      `tool "${name}" is a provider tool of the AI SDK (run by the model provider), which sessionlog cannot offer`,
    );
  const description =
    typeof tool.description === 'function' ? tool.description({ context: undefined } as never) : tool.description;
  const approval = aiSdkApproval(tool.needsApproval);
  const common = { description: description ?? '', ...(approval !== undefined ? { approval } : {}) };
  if (!tool.execute) {
    // The AI SDK's client-side tool: the caller runs it and posts the result.
    const { parameters } = validatedTool({
      name,
      ...common,
      inputSchema: tool.inputSchema,
      execute: async () => ({ text: '' }),
    });
    return { name, ...common, parameters, external: true };
  }
  return validatedTool({
    name,
    ...common,
    inputSchema: tool.inputSchema,
    async execute(args, context) {
      // The model's messages are in the session's log (context.history), not handed to the tool.
      const options = { toolCallId: context.callId, messages: [], abortSignal: context.signal, context: undefined };
      const output = await lastOutput(tool.execute!(args as never, options as never));
      if (!tool.toModelOutput) return aiSdkOutput(output);
      return modelOutput(await tool.toModelOutput({ toolCallId: context.callId, input: args, output } as never));
    },
  });
}

/** `needsApproval: true | false` as sessionlog's rule; a function decides per call (a promise it returns counts as "ask"). */
function aiSdkApproval(needsApproval: AISDKTool['needsApproval']): ApprovalRule | undefined {
  if (needsApproval === undefined) return undefined;
  if (typeof needsApproval === 'boolean') return needsApproval ? 'always' : 'never';
  return (args) => {
    const decision = needsApproval(args as never, { toolCallId: '', messages: [], context: undefined } as never);
    if (typeof decision !== 'boolean') throw new Error('needsApproval returned a promise; asking a person');
    return decision;
  };
}

/** A streaming `execute` (an async iterable of preliminary results) ends with its final result, as in the AI SDK. */
async function lastOutput(value: unknown): Promise<unknown> {
  const awaited = await value;
  if (awaited === null || typeof awaited !== 'object' || !(Symbol.asyncIterator in awaited)) return awaited;
  let last: unknown;
  for await (const part of awaited as AsyncIterable<unknown>) last = part;
  return last;
}

/** The AI SDK sends a string result as text and anything else as JSON. */
function aiSdkOutput(output: unknown): ToolOutput {
  return typeof output === 'string' ? { text: output } : { text: JSON.stringify(output ?? null) };
}

/** A `toModelOutput` result (`{type: 'text' | 'json' | 'error-text' | 'error-json' | 'content', value}`) as a ToolOutput. */
function modelOutput(output: unknown): ToolOutput {
  const { type, value } = (output ?? {}) as { type?: string; value?: unknown };
  switch (type) {
    case 'text':
      return { text: String(value) };
    case 'error-text':
      return { text: String(value), isError: true };
    case 'json':
      return { text: JSON.stringify(value) };
    case 'error-json':
      return { text: JSON.stringify(value), isError: true };
    case 'content': {
      const parts = Array.isArray(value) ? (value as Array<{ type?: string; text?: string }>) : [];
      return {
        text: parts.map((part) => (part.type === 'text' ? (part.text ?? '') : JSON.stringify(part))).join('\n'),
      };
    }
    default:
      return toolOutputOf(output);
  }
}
