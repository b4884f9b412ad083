/**
 * How an MCP server's tool becomes a sessionlog tool (DESIGN §5.4): its namespaced name within the
 * providers' tool-name alphabet and length, and what its annotations decide, by the MCP
 * specification's defaults (readOnlyHint false, destructiveHint true, idempotentHint false).
 */
import { describe, expect, it } from 'vitest';
import { mcpNeedsApproval, mcpRetryable, mcpToolName } from '../../src/tools/mcp/index.js';

const tool = (annotations?: Record<string, boolean>) => ({
  name: 't',
  inputSchema: { type: 'object' as const },
  ...(annotations ? { annotations } : {}),
});

describe('MCP tool names', () => {
  it('namespaces a tool by its server and replaces characters outside A-Z a-z 0-9 _ -', () => {
    expect(mcpToolName('files', 'read_text_file')).toBe('files__read_text_file');
    expect(mcpToolName('everything', 'get-sum')).toBe('everything__get-sum');
    expect(mcpToolName('crm', 'contacts.search/v2')).toBe('crm__contacts_search_v2');
  });

  it('cuts a name over 64 characters and ends it with a digest, so two long names stay apart', () => {
    const a = mcpToolName('server', `${'x'.repeat(70)}a`);
    const b = mcpToolName('server', `${'x'.repeat(70)}b`);
    expect(a).toHaveLength(64);
    expect(b).toHaveLength(64);
    expect(a).not.toBe(b);
    expect(a).toMatch(/^server__x+_[0-9a-f]{8}$/);
  });

  it('keeps a name of exactly 64 characters as it is', () => {
    const name = 'y'.repeat(64 - 'srv__'.length);
    expect(mcpToolName('srv', name)).toBe(`srv__${name}`);
  });
});

describe('MCP tool annotations', () => {
  it('asks for approval unless the tool says it is read-only or not destructive (no annotations: it asks)', () => {
    expect(mcpNeedsApproval(tool(), 'destructive')).toBe(true);
    expect(mcpNeedsApproval(tool({ destructiveHint: true }), 'destructive')).toBe(true);
    expect(mcpNeedsApproval(tool({ readOnlyHint: false }), 'destructive')).toBe(true);
    expect(mcpNeedsApproval(tool({ destructiveHint: false }), 'destructive')).toBe(false);
    expect(mcpNeedsApproval(tool({ readOnlyHint: true }), 'destructive')).toBe(false);
    // readOnlyHint wins: destructiveHint is meaningful only when the tool is not read-only.
    expect(mcpNeedsApproval(tool({ readOnlyHint: true, destructiveHint: true }), 'destructive')).toBe(false);
  });

  it('lets the server setting decide for every tool when it is always or never', () => {
    expect(mcpNeedsApproval(tool({ readOnlyHint: true }), 'always')).toBe(true);
    expect(mcpNeedsApproval(tool(), 'never')).toBe(false);
  });

  it('retries only a tool that says it is read-only or idempotent', () => {
    expect(mcpRetryable(tool())).toBe(false);
    expect(mcpRetryable(tool({ destructiveHint: false }))).toBe(false);
    expect(mcpRetryable(tool({ idempotentHint: true }))).toBe(true);
    expect(mcpRetryable(tool({ readOnlyHint: true }))).toBe(true);
  });
});
