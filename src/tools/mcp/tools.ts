/**
 * An MCP server's tool as a sessionlog tool (DESIGN §5.4): namespaced by its server, asking for
 * approval and retried as its annotations say, its result turned into text, image and file blocks.
 *
 * Annotations are hints (MCP specification, "Tool annotations"), with these defaults when a tool
 * gives none: `readOnlyHint` false, `destructiveHint` true, `idempotentHint` false. So:
 * - approval (server setting `destructive`, the default): a call waits for a person unless the
 *   tool says it is read-only, or says `destructiveHint: false`; a tool without annotations asks.
 * - retries: only a read-only or idempotent tool is called again on a later attempt (the worker
 *   died mid-call); any other tool's interrupted call is answered with an error result, since it
 *   may already have taken effect.
 * A failed call (the server down, dead mid-call, hung past its timeout, answering garbage) is an
 * error result the model reads, never a failed turn.
 */
import { createHash } from 'node:crypto';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import {
  inspectMedia,
  isImageType,
  isMediaType,
  type FileBlock,
  type ImageBlock,
  type JsonValue,
  type TextBlock,
} from '../../session/index.js';
import type { RunnableTool, ToolContext, ToolOutput } from '../registry.js';
import { McpServerFailure, type McpConnection, type McpTool } from './connection.js';

/** The separator between a server's name and its tool's: `<server>__<tool>`. */
export const MCP_NAME_SEPARATOR = '__';
/** The longest tool name providers take. */
const MAX_TOOL_NAME = 64;
/** The most bytes one image or file of a result may have before it is left out with a note. */

type Block = TextBlock | ImageBlock | FileBlock;

/**
 * The name the model sees for `tool` of server `server`: `<server>__<tool>`, characters outside
 * the tool-name alphabet (A-Z a-z 0-9 _ -) replaced by `_`, and a name over 64 characters cut
 * and ended with a digest of the whole, so it stays unique.
 */
export function mcpToolName(server: string, tool: string): string {
  const full = `${server}${MCP_NAME_SEPARATOR}${tool.replace(/[^A-Za-z0-9_-]/g, '_')}`;
  if (full.length <= MAX_TOOL_NAME) return full;
  const digest = createHash('sha256').update(`${server}\0${tool}`).digest('hex').slice(0, 8);
  return `${full.slice(0, MAX_TOOL_NAME - 9)}_${digest}`;
}

/** Whether a call of `tool` waits for approval under its server's `approval` setting. */
export function mcpNeedsApproval(tool: McpTool, setting: McpConnection['server']['approval']): boolean {
  if (setting !== 'destructive') return setting === 'always';
  const hints = tool.annotations ?? {};
  if (hints.readOnlyHint === true) return false;
  return hints.destructiveHint !== false;
}

/** Whether a call of `tool` may run again after an interrupted attempt: it says it is read-only or idempotent. */
export function mcpRetryable(tool: McpTool): boolean {
  return tool.annotations?.readOnlyHint === true || tool.annotations?.idempotentHint === true;
}

/** `tool` of the server behind `connection` as a tool the worker runs. */
export function mcpRunnableTool(connection: McpConnection, tool: McpTool): RunnableTool {
  const server = connection.server;
  const description = [tool.description ?? tool.title ?? tool.annotations?.title ?? '', `(MCP server ${server.name})`]
    .filter((part) => part !== '')
    .join(' ');
  return {
    name: mcpToolName(server.name, tool.name),
    description,
    parameters: tool.inputSchema as JsonValue,
    approval: mcpNeedsApproval(tool, server.approval) ? 'always' : undefined,
    retryable: mcpRetryable(tool),
    async run(args: unknown, context: ToolContext): Promise<ToolOutput> {
      let result: CallToolResult;
      try {
        result = await connection.callTool(tool.name, args as Record<string, unknown>, context.signal);
      } catch (error) {
        if (error instanceof McpServerFailure) return { text: error.message, isError: true, errorCode: error.code };
        throw error;
      }
      const content = await resultBlocks(result, server.maxMediaBytes, context);
      const text = content
        .filter((b): b is TextBlock => b.type === 'text')
        .map((b) => b.text)
        .join('\n');
      return {
        text,
        content,
        ...(result.isError === true ? { isError: true, errorCode: 'MCP_TOOL_ERROR' } : {}),
      };
    },
  };
}

/**
 * The blocks of an MCP tool result: text as text, images and PDF or plain-text files stored as
 * media of the session, and what sessionlog does not store (audio, other types, links) as a short
 * text that says what it was. A result with only structured content gives its JSON as text.
 */
async function resultBlocks(result: CallToolResult, maxBytes: number, context: ToolContext): Promise<Block[]> {
  const blocks: Block[] = [];
  for (const item of result.content ?? []) {
    switch (item.type) {
      case 'text':
        blocks.push({ type: 'text', text: item.text });
        break;
      case 'image':
        blocks.push(await mediaBlock(item.data, item.mimeType, 'image', undefined, maxBytes, context));
        break;
      case 'audio':
        blocks.push(standIn(`audio (${item.mimeType}, ${base64Bytes(item.data)} bytes) is not kept`));
        break;
      case 'resource_link':
        blocks.push({ type: 'text', text: `[resource ${item.uri}${item.name ? ` (${item.name})` : ''}]` });
        break;
      case 'resource': {
        const resource = item.resource;
        if ('text' in resource) blocks.push({ type: 'text', text: resource.text });
        else
          blocks.push(
            await mediaBlock(
              resource.blob,
              resource.mimeType ?? 'application/octet-stream',
              'file',
              resource.uri.split('/').at(-1),
              maxBytes,
              context,
            ),
          );
        break;
      }
      default:
        blocks.push(standIn(`content of type ${JSON.stringify((item as { type?: unknown }).type)} is not kept`));
    }
  }
  if (blocks.length === 0 && result.structuredContent !== undefined)
    blocks.push({ type: 'text', text: JSON.stringify(result.structuredContent) });
  return blocks;
}

/** An image or file of a result stored as a medium of the session, or a note saying why it was not. */
async function mediaBlock(
  base64: string,
  declared: string,
  kind: 'image' | 'file',
  filename: string | undefined,
  maxBytes: number,
  context: ToolContext,
): Promise<Block> {
  const mediaType = declared.toLowerCase().split(';')[0]!.trim();
  if (!isMediaType(mediaType))
    return standIn(
      `${kind} of type ${declared} is not kept (sessionlog stores PNG, JPEG, GIF, WebP, PDF and plain text)`,
    );
  const bytes = Buffer.from(base64, 'base64');
  let checked: ReturnType<typeof inspectMedia>;
  try {
    checked = inspectMedia(bytes, mediaType, maxBytes);
  } catch (error) {
    return standIn(`${kind} was left out: ${(error as Error).message}`);
  }
  const stored = await context.artifacts.putMedia({
    sessionId: context.sessionId,
    bytes,
    mediaType: checked.mediaType,
    ...(checked.width !== undefined ? { width: checked.width } : {}),
    ...(checked.height !== undefined ? { height: checked.height } : {}),
  });
  if (isImageType(checked.mediaType)) return { type: 'image', source: stored };
  return { type: 'file', source: stored, ...(filename ? { filename } : {}) };
}

function standIn(note: string): TextBlock {
  return { type: 'text', text: `[${note}]` };
}

function base64Bytes(base64: string): number {
  return Buffer.byteLength(base64, 'base64');
}
