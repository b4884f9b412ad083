/**
 * The MCP servers a worker takes tools from (DESIGN §5.4), as the `mcpServers` worker option and
 * `SESSIONLOG_MCP_SERVERS` name them: a stdio server (`command`, `args`, `env`) or a Streamable
 * HTTP one (`url`, `headers`). Validated once, at worker start, with every problem named by the
 * setting and the field (`SESSIONLOG_MCP_SERVERS[1].command: …`).
 */
import { accessSync, constants, statSync } from 'node:fs';
import { delimiter, isAbsolute, join, resolve } from 'node:path';
import { z } from 'zod';
import { DEFAULT_MAX_MEDIA_BYTES, SessionlogError } from '../../session/index.js';

/**
 * Which calls of a server's tools wait for a person's approval: `destructive` (the default)
 * follows the tool's annotations as the MCP specification defines their defaults (a tool that
 * does not say it is read-only or non-destructive may destroy, so it asks); `always` and `never`
 * decide for every tool of the server.
 */
export type McpApproval = 'destructive' | 'always' | 'never';

type McpServerCommon = {
  /** The namespace of the server's tools (`<name>__<tool>`): 1-32 of A-Z a-z 0-9 _ -, no `__`. */
  name: string;
  /** How long one call may take before it is cancelled and answered with an error result, ms (default 60000). */
  timeoutMs?: number;
  /** Which of its tools' calls wait for approval (default `destructive`). */
  approval?: McpApproval;
  /**
   * The largest image or file of a result that is stored, bytes (default the worker's media limit,
   * `SESSIONLOG_MAX_MEDIA_BYTES`, 20 MiB); a larger one is left out with a note saying so.
   */
  maxMediaBytes?: number;
};

/** A server the worker starts as a child process and talks to over stdin/stdout. */
export type McpStdioServerConfig = McpServerCommon & {
  /** The executable: a name found on PATH, or a path. */
  command: string;
  args?: string[];
  /** Environment of the child, over the MCP SDK's safe defaults (PATH, HOME, …); the worker's own is not passed on. */
  env?: Record<string, string>;
  /** Working directory of the child (default the worker's). */
  cwd?: string;
  url?: never;
};

/** A server reached over MCP's Streamable HTTP transport. */
export type McpHttpServerConfig = McpServerCommon & {
  /** The server's MCP endpoint, `http://` or `https://`. */
  url: string;
  /** Headers sent with every request (an `Authorization` header, say). */
  headers?: Record<string, string>;
  command?: never;
};

/** One MCP server a worker takes tools from. */
export type McpServerConfig = McpStdioServerConfig | McpHttpServerConfig;

/** A server with every default filled in and its command found. */
export type ResolvedMcpServer =
  | {
      kind: 'stdio';
      name: string;
      command: string;
      args: string[];
      env: Record<string, string> | undefined;
      cwd: string | undefined;
      timeoutMs: number;
      approval: McpApproval;
      maxMediaBytes: number;
    }
  | {
      kind: 'http';
      name: string;
      url: URL;
      headers: Record<string, string>;
      timeoutMs: number;
      approval: McpApproval;
      maxMediaBytes: number;
    };

/** The defaults of an MCP server's settings. */
export const MCP_SERVER_DEFAULTS = {
  timeoutMs: 60_000,
  approval: 'destructive',
  maxMediaBytes: DEFAULT_MAX_MEDIA_BYTES,
} as const;

const SERVER_NAME = /^(?!.*__)[A-Za-z0-9_-]{1,32}$/;

const common = {
  name: z
    .string()
    .regex(SERVER_NAME, 'must be 1-32 characters of A-Z a-z 0-9 _ - without "__" (it namespaces the tools)'),
  timeoutMs: z.number().int().min(1).max(3_600_000).optional(),
  approval: z.enum(['destructive', 'always', 'never']).optional(),
  maxMediaBytes: z.number().int().min(1).optional(),
};
const stringMap = z.record(z.string(), z.string());
const stdioSchema = z.strictObject({
  ...common,
  command: z.string().min(1),
  args: z.array(z.string()).optional(),
  env: stringMap.optional(),
  cwd: z.string().min(1).optional(),
});
const httpSchema = z.strictObject({ ...common, url: z.string().min(1), headers: stringMap.optional() });

/**
 * Validates `servers` (the value of `setting`) and fills defaults: each server is stdio or HTTP,
 * names are unique, a command is found (on the child's PATH when it is a bare name), a URL is
 * http(s). Throws INVALID_ARGUMENT naming the setting and field.
 */
export function resolveMcpServers(servers: unknown, setting: string): ResolvedMcpServer[] {
  if (!Array.isArray(servers))
    throw invalid(setting, 'must be an array of servers ({name, command, args?, env?} or {name, url, headers?})');
  const seen = new Set<string>();
  return servers.map((server: unknown, index) => {
    const at = `${setting}[${index}]`;
    const resolved = resolveServer(server, at);
    if (seen.has(resolved.name))
      throw invalid(`${at}.name`, `names the server "${resolved.name}" a second time; server names must be unique`);
    seen.add(resolved.name);
    return resolved;
  });
}

/** Parses `SESSIONLOG_MCP_SERVERS` (a JSON array of servers) and checks it as {@link resolveMcpServers} does. */
export function parseMcpServersJson(text: string, setting: string): McpServerConfig[] {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw invalid(setting, `is not JSON (${(error as Error).message})`);
  }
  resolveMcpServers(value, setting);
  return value as McpServerConfig[];
}

function resolveServer(server: unknown, at: string): ResolvedMcpServer {
  const isObject = typeof server === 'object' && server !== null;
  const hasCommand = isObject && 'command' in server;
  const hasUrl = isObject && 'url' in server;
  if (!isObject || hasCommand === hasUrl)
    throw invalid(at, 'must be an object with either `command` (stdio) or `url` (Streamable HTTP)');
  const parsed = (hasCommand ? stdioSchema : httpSchema).safeParse(server);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const field = issue.path.length > 0 ? `.${issue.path.join('.')}` : '';
    throw invalid(`${at}${field}`, issue.message);
  }
  const value = parsed.data;
  const timeoutMs = value.timeoutMs ?? MCP_SERVER_DEFAULTS.timeoutMs;
  const approval = value.approval ?? MCP_SERVER_DEFAULTS.approval;
  const maxMediaBytes = value.maxMediaBytes ?? MCP_SERVER_DEFAULTS.maxMediaBytes;
  if ('url' in value) {
    let url: URL;
    try {
      url = new URL(value.url);
    } catch {
      throw invalid(`${at}.url`, `${JSON.stringify(value.url)} is not a URL`);
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:')
      throw invalid(`${at}.url`, `${JSON.stringify(value.url)} is not an http(s) URL`);
    return { kind: 'http', name: value.name, url, headers: value.headers ?? {}, timeoutMs, approval, maxMediaBytes };
  }
  const cwd = value.cwd === undefined ? undefined : resolve(value.cwd);
  if (cwd !== undefined && !isDirectory(cwd))
    throw invalid(`${at}.cwd`, `${JSON.stringify(value.cwd)} is not a directory`);
  const command = findCommand(value.command, value.env?.PATH ?? process.env.PATH ?? '', cwd ?? process.cwd());
  if (!command)
    throw invalid(
      `${at}.command`,
      `${JSON.stringify(value.command)} was not found${value.command.includes('/') ? '' : ' on PATH'} or is not executable`,
    );
  return {
    kind: 'stdio',
    name: value.name,
    command,
    args: value.args ?? [],
    env: value.env,
    cwd,
    timeoutMs,
    approval,
    maxMediaBytes,
  };
}

/** The executable `command` names: itself when it is a path, else the first match on `path`. */
function findCommand(command: string, path: string, cwd: string): string | undefined {
  if (command.includes('/')) {
    const file = isAbsolute(command) ? command : resolve(cwd, command);
    return isExecutable(file) ? file : undefined;
  }
  for (const dir of path.split(delimiter)) {
    if (dir === '') continue;
    const file = join(dir, command);
    if (isExecutable(file)) return file;
  }
  return undefined;
}

function isExecutable(file: string): boolean {
  try {
    accessSync(file, constants.X_OK);
    return statSync(file).isFile();
  } catch {
    // Missing or not executable: the caller names the setting.
    return false;
  }
}

function isDirectory(dir: string): boolean {
  try {
    return statSync(dir).isDirectory();
  } catch {
    // Missing: the caller names the setting.
    return false;
  }
}

function invalid(field: string, problem: string): SessionlogError {
  return new SessionlogError('INVALID_ARGUMENT', `${field} ${problem}`);
}
