/** MCP servers as durable tool sources of a worker (DESIGN §5.4). */
export {
  MCP_SERVER_DEFAULTS,
  parseMcpServersJson,
  resolveMcpServers,
  type McpApproval,
  type McpHttpServerConfig,
  type McpServerConfig,
  type McpStdioServerConfig,
  type ResolvedMcpServer,
} from './config.js';
export { McpServerFailure } from './connection.js';
export { McpToolSource } from './source.js';
export { MCP_NAME_SEPARATOR, mcpNeedsApproval, mcpRetryable, mcpToolName } from './tools.js';
