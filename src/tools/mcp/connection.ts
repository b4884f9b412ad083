/**
 * One MCP server as the worker holds it: a client of the official SDK over stdio or Streamable
 * HTTP, connected lazily and again after it is lost (a stdio server that died is started anew by
 * the next call), its tool list kept current through `notifications/tools/list_changed`.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import {
  CallToolResultSchema,
  ErrorCode,
  McpError,
  ToolListChangedNotificationSchema,
  type CallToolResult,
  type Tool as McpTool,
} from '@modelcontextprotocol/sdk/types.js';
import type { ResolvedMcpServer } from './config.js';

export type { McpTool };

/** The client's name and version as servers see them in `initialize`. */
const CLIENT_INFO = { name: 'sessionlog', version: '0.1.0' };
/** How much of a stdio server's stderr is kept to explain its death. */
const STDERR_TAIL_CHARS = 2000;
/** Bound on `initialize` and `tools/list` (a call has the server's own timeout). */
const HANDSHAKE_TIMEOUT_MS = 30_000;

/** Why a call did not get a result from the server: it is down, died, timed out or answered garbage. */
export class McpServerFailure extends Error {
  constructor(
    readonly code: 'MCP_SERVER_UNAVAILABLE' | 'MCP_TIMEOUT' | 'MCP_BAD_RESPONSE' | 'MCP_ERROR',
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'McpServerFailure';
  }
}

/** A connection to one server; `onToolsChanged` hears every fresh tool list (at connect and on list_changed). */
export class McpConnection {
  private client: Client | undefined;
  private connecting: Promise<Client> | undefined;
  private stderrTail = '';
  private closed = false;
  private listedOnce = false;

  constructor(
    readonly server: ResolvedMcpServer,
    private readonly onToolsChanged: (tools: McpTool[]) => void,
  ) {}

  /** Connects if not connected, and lists the server's tools (also handed to `onToolsChanged`). */
  async listTools(): Promise<McpTool[]> {
    const client = await this.connected();
    return this.refreshTools(client);
  }

  /**
   * Calls tool `name` (the server's own name) with `args`. The SDK sends
   * `notifications/cancelled` when `signal` aborts or the server's timeout passes.
   */
  async callTool(name: string, args: Record<string, unknown>, signal: AbortSignal): Promise<CallToolResult> {
    const client = await this.connected();
    try {
      const result = await client.callTool({ name, arguments: args }, CallToolResultSchema, {
        signal,
        timeout: this.server.timeoutMs,
      });
      return result as CallToolResult;
    } catch (error) {
      if (signal.aborted) throw error;
      throw this.failureOf(error, name);
    }
  }

  /** Closes the client (a stdio server's process is ended). */
  async close(): Promise<void> {
    this.closed = true;
    const client = this.client ?? (await this.connecting?.catch(() => undefined));
    this.client = undefined;
    await client?.close();
  }

  private connected(): Promise<Client> {
    if (this.closed) return Promise.reject(new McpServerFailure('MCP_SERVER_UNAVAILABLE', `${this.label} is closed`));
    if (this.client) return Promise.resolve(this.client);
    this.connecting ??= this.connect().finally(() => {
      this.connecting = undefined;
    });
    return this.connecting;
  }

  private async connect(): Promise<Client> {
    const client = new Client(CLIENT_INFO, { capabilities: {} });
    const transport = this.transport();
    client.onclose = () => {
      if (this.client === client) this.client = undefined;
    };
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
      this.refreshTools(client).catch((error: unknown) => {
        process.emitWarning(`${this.label}: listing tools after list_changed failed: ${(error as Error).message}`);
      });
    });
    try {
      await client.connect(transport, { timeout: HANDSHAKE_TIMEOUT_MS });
    } catch (error) {
      await client.close().catch(() => undefined);
      throw new McpServerFailure(
        'MCP_SERVER_UNAVAILABLE',
        `${this.label} could not be reached: ${(error as Error).message}${this.stderrNote()}`,
        { cause: error },
      );
    }
    this.client = client;
    // A server that was restarted may offer other tools than before.
    if (this.listedOnce) void this.refreshTools(client).catch(() => undefined);
    return client;
  }

  private async refreshTools(client: Client): Promise<McpTool[]> {
    const tools: McpTool[] = [];
    let cursor: string | undefined;
    do {
      const page = await client.listTools(cursor ? { cursor } : {}, { timeout: HANDSHAKE_TIMEOUT_MS });
      tools.push(...page.tools);
      cursor = page.nextCursor;
    } while (cursor);
    this.listedOnce = true;
    this.onToolsChanged(tools);
    return tools;
  }

  private transport(): Transport {
    const server = this.server;
    if (server.kind === 'http')
      return new StreamableHTTPClientTransport(server.url, { requestInit: { headers: server.headers } });
    const transport = new StdioClientTransport({
      command: server.command,
      args: server.args,
      ...(server.env ? { env: server.env } : {}),
      ...(server.cwd ? { cwd: server.cwd } : {}),
      stderr: 'pipe',
    });
    this.stderrTail = '';
    transport.stderr?.on('data', (chunk: Buffer) => {
      this.stderrTail = (this.stderrTail + chunk.toString('utf8')).slice(-STDERR_TAIL_CHARS);
    });
    return transport;
  }

  /** The error a failed call reports: the server gone, a timeout, an answer that is not MCP, or the server's own error. */
  private failureOf(error: unknown, tool: string): McpServerFailure {
    const message = (error as Error)?.message ?? String(error);
    if (error instanceof McpError && error.code === (ErrorCode.RequestTimeout as number))
      return new McpServerFailure(
        'MCP_TIMEOUT',
        `${this.label} did not answer the call of ${tool} within ${this.server.timeoutMs} ms; the call was cancelled`,
        { cause: error },
      );
    if (error instanceof McpError && error.code !== (ErrorCode.ConnectionClosed as number))
      return new McpServerFailure('MCP_ERROR', `${this.label} refused the call of ${tool}: ${message}`, {
        cause: error,
      });
    // The SDK checks a result with its zod schema: a validation error carries the schema's `issues`.
    if (Array.isArray((error as { issues?: unknown })?.issues))
      return new McpServerFailure(
        'MCP_BAD_RESPONSE',
        `${this.label} answered the call of ${tool} with something that is not an MCP tool result: ${message}`,
        { cause: error },
      );
    // The connection is gone (a stdio server died, an HTTP server is unreachable): the next call connects anew.
    const lost = this.client;
    this.client = undefined;
    void lost?.close().catch(() => undefined);
    return new McpServerFailure(
      'MCP_SERVER_UNAVAILABLE',
      `${this.label} went away during the call of ${tool} (${message})${this.stderrNote()}; it is started again on the next call`,
      { cause: error },
    );
  }

  private stderrNote(): string {
    const tail = this.stderrTail.trim();
    return tail ? `; its stderr ended: ${tail.slice(-500)}` : '';
  }

  private get label(): string {
    return `MCP server "${this.server.name}"`;
  }
}
