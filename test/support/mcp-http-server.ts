/**
 * A Streamable HTTP MCP server on loopback, built with the official SDK's McpServer and
 * StreamableHTTPServerTransport (stateful: one McpServer per MCP session), for tests of MCP tool
 * sources: its tools count their runs, a `hang` tool waits until the client cancels it (and
 * records the cancellation), `slow_*` tools take a while, and `addTool` registers a tool on every
 * connected session, which makes the SDK send `notifications/tools/list_changed`.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest, type CallToolResult, type ToolAnnotations } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';

export type TestMcpServer = {
  url: string;
  /** Runs of each tool (by the server's tool name), counted when the call arrives. */
  runs: Map<string, number>;
  /** Request ids of calls the client cancelled, with the reason the server was given. */
  cancelled: Array<{ tool: string; reason: unknown }>;
  /** Registers tool `name` (answering `text`) on every MCP session, now and later; each connected one is notified. */
  addTool(name: string, text: string): void;
  close(): Promise<void>;
};

type ExtraTool = { name: string; text: string };

/** Starts the server on 127.0.0.1 at a free port. */
export async function startTestMcpServer(options: { slowMs?: number } = {}): Promise<TestMcpServer> {
  const slowMs = options.slowMs ?? 3000;
  const runs = new Map<string, number>();
  const cancelled: TestMcpServer['cancelled'] = [];
  const extraTools: ExtraTool[] = [];
  const servers = new Set<McpServer>();
  const transports = new Map<string, StreamableHTTPServerTransport>();
  const counted = (tool: string) => runs.set(tool, (runs.get(tool) ?? 0) + 1);
  const text = (value: string): CallToolResult => ({ content: [{ type: 'text', text: value }] });

  const slowTool = (server: McpServer, name: string, annotations: ToolAnnotations) =>
    server.registerTool(
      name,
      {
        description: `Waits ${slowMs} ms, then answers with its note.`,
        inputSchema: { note: z.string() },
        annotations,
      },
      async ({ note }, extra) => {
        counted(name);
        await sleep(slowMs, undefined, { signal: extra.signal }).catch(() => undefined);
        return text(`${name} done: ${note}`);
      },
    );

  const buildServer = (): McpServer => {
    const server = new McpServer({ name: 'sessionlog-test-http', version: '1.0.0' });
    server.registerTool(
      'greet',
      {
        description: 'Greets someone.',
        inputSchema: { who: z.string() },
        annotations: { readOnlyHint: true },
      },
      ({ who }) => {
        counted('greet');
        return text(`hello, ${who}`);
      },
    );
    server.registerTool(
      'hang',
      { description: 'Never answers until cancelled.', annotations: { readOnlyHint: true } },
      async (extra) => {
        counted('hang');
        await new Promise<void>((resolve) => extra.signal.addEventListener('abort', () => resolve(), { once: true }));
        cancelled.push({ tool: 'hang', reason: extra.signal.reason });
        return text('cancelled');
      },
    );
    slowTool(server, 'slow_idempotent', { readOnlyHint: false, destructiveHint: false, idempotentHint: true });
    slowTool(server, 'slow_once', { readOnlyHint: false, destructiveHint: false, idempotentHint: false });
    for (const extra of extraTools) registerExtra(server, extra);
    return server;
  };
  const registerExtra = (server: McpServer, extra: ExtraTool) =>
    server.registerTool(
      extra.name,
      { description: `Added later: answers "${extra.text}".`, annotations: { readOnlyHint: true } },
      () => {
        counted(extra.name);
        return text(extra.text);
      },
    );

  const http: Server = createServer((req, res) => {
    void (async () => {
      const body = req.method === 'POST' ? await readJson(req) : undefined;
      const sessionId = req.headers['mcp-session-id'];
      let transport = typeof sessionId === 'string' ? transports.get(sessionId) : undefined;
      if (!transport) {
        if (req.method !== 'POST' || !isInitializeRequest(body)) {
          res.writeHead(typeof sessionId === 'string' ? 404 : 400).end();
          return;
        }
        const created = new StreamableHTTPServerTransport({
          sessionIdGenerator: () => randomUUID(),
          onsessioninitialized: (id) => void transports.set(id, created),
        });
        const server = buildServer();
        servers.add(server);
        created.onclose = () => {
          servers.delete(server);
          if (created.sessionId) transports.delete(created.sessionId);
        };
        await server.connect(created);
        transport = created;
      }
      await transport.handleRequest(req, res, body);
    })().catch((error: unknown) => {
      if (!res.headersSent) res.writeHead(500).end(String(error));
    });
  });
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  const { port } = http.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    runs,
    cancelled,
    addTool(name, value) {
      const extra = { name, text: value };
      extraTools.push(extra);
      for (const server of servers) registerExtra(server, extra);
    },
    async close() {
      await Promise.all([...servers].map((s) => s.close().catch(() => undefined)));
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const raw = Buffer.concat(chunks).toString('utf8');
  return raw === '' ? undefined : JSON.parse(raw);
}
