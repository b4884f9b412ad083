/**
 * A worker's MCP servers as one tool source (DESIGN §5.4): each server's tools listed at start
 * and again on `notifications/tools/list_changed`, namespaced by server, offered to every session
 * after the agent's own tools (so each step's tool set is in its logged request header).
 */
import { SessionlogError } from '../../session/index.js';
import type { RunnableTool, ToolRegistry, ToolSource } from '../registry.js';
import type { ResolvedMcpServer } from './config.js';
import { McpConnection, type McpTool } from './connection.js';
import { mcpRunnableTool } from './tools.js';

/** How long a server that could not be listed at start waits before it is asked again. */
const RELIST_INTERVAL_MS = 10_000;

/** The tools of a worker's MCP servers; close it when the worker stops. */
export class McpToolSource implements ToolSource {
  private readonly connections: McpConnection[];
  private readonly byServer = new Map<string, RunnableTool[]>();
  private readonly relists = new Set<NodeJS.Timeout>();
  private started = false;

  private constructor(
    servers: readonly ResolvedMcpServer[],
    private readonly registry: ToolRegistry,
    private readonly setting: string,
  ) {
    this.connections = servers.map((server) => new McpConnection(server, (tools) => this.listed(server, tools)));
  }

  /**
   * Connects to every server in `servers` (the value of `setting`), lists their tools and
   * attaches them to `registry`. A tool whose namespaced name is taken (by a registered tool, or
   * another tool of the same server once its name is cut to 64 characters) fails the start,
   * naming the setting; a server that cannot be reached is warned about and asked again every
   * 10 s, its calls answered with an error result meanwhile.
   */
  static async start(
    servers: readonly ResolvedMcpServer[],
    registry: ToolRegistry,
    setting: string,
  ): Promise<McpToolSource> {
    const source = new McpToolSource(servers, registry, setting);
    try {
      await Promise.all(source.connections.map((connection) => source.listAtStart(connection)));
    } catch (error) {
      await source.close();
      throw error;
    }
    source.started = true;
    registry.attach(source);
    return source;
  }

  get tools(): readonly RunnableTool[] {
    return [...this.byServer.values()].flat();
  }

  /** Closes every connection (stdio servers are ended). */
  async close(): Promise<void> {
    this.registry.detach(this);
    for (const timer of this.relists) clearInterval(timer);
    this.relists.clear();
    await Promise.all(this.connections.map((c) => c.close().catch(() => undefined)));
  }

  private async listAtStart(connection: McpConnection): Promise<void> {
    try {
      await connection.listTools();
    } catch (error) {
      if (error instanceof SessionlogError) throw error;
      process.emitWarning(
        `${this.setting}: ${(error as Error).message}; its tools are listed once it answers (asked every ${RELIST_INTERVAL_MS / 1000} s)`,
      );
      const timer = setInterval(() => {
        connection.listTools().then(
          () => {
            clearInterval(timer);
            this.relists.delete(timer);
          },
          () => undefined,
        );
      }, RELIST_INTERVAL_MS);
      timer.unref();
      this.relists.add(timer);
    }
  }

  /** A fresh tool list of `server`: replaces its tools, refusing (at start) or skipping (later) a name that is taken. */
  private listed(server: ResolvedMcpServer, listing: McpTool[]): void {
    const connection = this.connections.find((c) => c.server === server)!;
    const taken = new Set<string>();
    for (const [name, tools] of this.byServer) if (name !== server.name) for (const t of tools) taken.add(t.name);
    const tools: RunnableTool[] = [];
    for (const mcpTool of listing) {
      const tool = mcpRunnableTool(connection, mcpTool);
      const clash = taken.has(tool.name) || (this.registry.get(tool.name) !== undefined && !this.offers(tool.name));
      if (clash) {
        const problem = `${this.setting}: the tool "${mcpTool.name}" of MCP server "${server.name}" would be named "${tool.name}", which another tool already has; rename the server or drop one of them`;
        if (!this.started) throw new SessionlogError('INVALID_ARGUMENT', problem);
        process.emitWarning(`${problem} (the tool is not offered)`);
        continue;
      }
      taken.add(tool.name);
      tools.push(tool);
    }
    this.byServer.set(server.name, tools);
  }

  private offers(name: string): boolean {
    return this.tools.some((t) => t.name === name);
  }
}
