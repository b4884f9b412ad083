/**
 * The tool registry: what the model may call. A tool validates its own arguments (model
 * output is a boundary) and returns plain text; the activity stores the full text as an
 * artifact and logs the result.
 */
import {
  SessionlogError,
  type FileBlock,
  type ImageBlock,
  type JsonValue,
  type StoredEvent,
  type TextBlock,
  type ToolSchema,
} from '../session/index.js';
import type { ArtifactStore } from '../persistence/store.js';
import { toSessionlogTool, type ToolLike } from './adapter.js';

/** A hit of a search over the session's whole log (shadowed ranges included). */
export type HistoryHit = {
  seq: number;
  /** The turn the event belongs to (0 before the first turn). */
  turn: number;
  type: string;
  snippet: string;
  /** True when a compaction summary or a prune now stands in for the event on the surface. */
  shadowed: boolean;
};

/** The calling session's own log, as tools read it (never another session's). */
export type SessionHistory = {
  /** Full-text search over every event's text, best first, at most `limit` hits. */
  search(query: string, limit: number): Promise<HistoryHit[]>;
  /** The stored events `fromSeq..toSeq` (inclusive), exactly as stored. */
  read(fromSeq: number, toSeq: number): Promise<StoredEvent[]>;
  /** The seq the next event gets (the log's length). */
  nextSeq(): Promise<number>;
};

/** What a tool runs with: always the calling session's identity, never one from the model's arguments. */
export type ToolContext = {
  sessionId: string;
  callId: string;
  artifacts: ArtifactStore;
  history: SessionHistory;
  signal: AbortSignal;
};

/**
 * What a tool returns: its text, and `isError` when the model should read it as a failure (with a
 * stable `errorCode` the tool/result logs, when the tool has one). `content`, when given, is the
 * result as blocks: its text blocks are what `text` holds, and its images and files (stored with
 * `context.artifacts.putMedia`) are logged after the text in the `tool/result`.
 */
export type ToolOutput = {
  text: string;
  isError?: boolean;
  errorCode?: string;
  content?: Array<TextBlock | ImageBlock | FileBlock>;
};

/**
 * Whether a call needs a person's approval before it runs (DESIGN §5.1): always, never, or a
 * function of the call's parsed arguments. Unset: the worker's approval policy decides.
 */
export type ApprovalRule = 'always' | 'never' | ((args: unknown) => boolean);

type ToolBase = {
  name: string;
  description: string;
  /** JSON Schema of the arguments object. */
  parameters: JsonValue;
  approval?: ApprovalRule;
};

/** A tool the worker runs. */
export type RunnableTool = ToolBase & {
  /** Runs the tool with already-parsed JSON arguments. Throw a ToolInputError for bad arguments. */
  run(args: unknown, context: ToolContext): Promise<ToolOutput>;
  /**
   * `false`: an attempt that was interrupted (the worker died mid-call) or failed is not run
   * again; the model gets an error result saying the call may or may not have taken effect.
   * Default true (a thrown error is retried while attempts remain).
   */
  retryable?: boolean;
  external?: never;
};

/**
 * Tools that come and go while the worker runs (an MCP server's, DESIGN §5.4): attached to a
 * registry, they are offered to every session after the agent's named tools, in the source's order.
 */
export type ToolSource = { readonly tools: readonly RunnableTool[] };

/** A tool the caller runs (a browser, a backend service): the turn waits for its posted result. */
export type ExternalTool = ToolBase & { external: true; run?: never };

/**
 * A tool the model may call: run by the worker (`run`), or by the caller (`external: true`,
 * answered with `SessionClient.submitToolResult`).
 */
export type Tool = RunnableTool | ExternalTool;

// Its own module, so the tool adapters the registry uses can throw it without an import circle.
export { ToolInputError } from './tool-input-error.js';

/**
 * Tools given together: a list, or a record keyed by tool name (the AI SDK's tool set shape,
 * where an AI SDK `tool()` has no name of its own).
 */
export type ToolCollection = Iterable<ToolLike> | Readonly<Record<string, ToolLike>>;

/**
 * The tools a worker offers, by name (`createWorker({ tools })`); a session's agent picks which of
 * them it uses. Takes sessionlog tools, `defineTool()` tools, AI SDK and LangChain tools
 * (`toSessionlogTool`), from any number of collections; a name given twice, across them too, is refused.
 */
export class ToolRegistry {
  private readonly tools = new Map<string, Tool>();
  private readonly sources: ToolSource[] = [];

  constructor(...collections: ToolCollection[]) {
    for (const collection of collections) this.add(collection);
  }

  /** Registers every tool of `collection`; a record's key is the tool's name. */
  add(collection: ToolCollection): this {
    if (Symbol.iterator in collection) for (const tool of collection as Iterable<ToolLike>) this.register(tool);
    else for (const [key, tool] of Object.entries(collection)) this.register(tool, key);
    return this;
  }

  /** Registers one tool, converted by `toSessionlogTool` (`key`: its name in a record). */
  register(input: ToolLike, key?: string): this {
    const tool = toSessionlogTool(input, key);
    if (!/^[A-Za-z0-9_-]{1,64}$/.test(tool.name))
      throw new SessionlogError(
        'INVALID_ARGUMENT',
        `tool name "${tool.name}" must be 1-64 characters of A-Z a-z 0-9 _ -`,
      );
    if (this.tools.has(tool.name))
      throw new SessionlogError('INVALID_ARGUMENT', `tool "${tool.name}" is registered twice`);
    this.tools.set(tool.name, tool);
    return this;
  }

  /** Offers `source`'s tools (as they are at each request) beside the registered ones. */
  attach(source: ToolSource): this {
    this.sources.push(source);
    return this;
  }

  /** Stops offering `source`'s tools (a stopped worker's MCP servers). */
  detach(source: ToolSource): void {
    const index = this.sources.indexOf(source);
    if (index >= 0) this.sources.splice(index, 1);
  }

  get(name: string): Tool | undefined {
    return this.tools.get(name) ?? this.sourceTools().find((t) => t.name === name);
  }

  get names(): string[] {
    return [...this.tools.keys(), ...this.sourceTools().map((t) => t.name)];
  }

  private sourceTools(): RunnableTool[] {
    return this.sources.flatMap((source) => source.tools);
  }

  /** Schemas in registration order (stable, so the request prefix stays cacheable). */
  schemas(names?: readonly string[]): ToolSchema[] {
    const selected = names
      ? names.map((n) => this.tools.get(n)).filter((t): t is Tool => t !== undefined)
      : [...this.tools.values()];
    selected.push(...this.sourceTools());
    return selected.map((t) => ({ name: t.name, description: t.description, parameters: t.parameters }));
  }
}
