/**
 * Which tool calls wait for an answer before they run (DESIGN §5.1): a person's approval, or
 * the result of an external tool the caller runs. Decided per call from the tool's own rule,
 * the session's allowances (`tool/allow`, logged) and the worker's policy.
 */
import { SessionlogError } from '../session/index.js';
import type { Tool } from './registry.js';

/** The worker's default: approve nothing, everything, or the named tools (`SESSIONLOG_APPROVAL`). */
export type ApprovalPolicy = { mode: 'never' } | { mode: 'always' } | { mode: 'tools'; tools: readonly string[] };

/** What a call waits for before it runs, if anything. */
export type CallGate = 'approval' | 'external';

/** Parses `never`, `always` or `tools:a,b` (the SESSIONLOG_APPROVAL syntax). */
export function parseApprovalPolicy(text: string): ApprovalPolicy {
  if (text === 'never' || text === 'always') return { mode: text };
  const match = /^tools:([A-Za-z0-9_,-]+)$/.exec(text);
  const tools = match?.[1]!.split(',').filter((t) => t.length > 0) ?? [];
  if (!match || tools.length === 0) {
    throw new SessionlogError(
      'INVALID_ARGUMENT',
      `approval policy ${JSON.stringify(text)} is not one of never, always or tools:NAME[,NAME…]`,
    );
  }
  return { mode: 'tools', tools };
}

/**
 * The gate of a call to `tool` with parsed `args`. An external tool always waits for its
 * result; a tool the session allowed never waits; otherwise the tool's rule, else the policy.
 * A rule that throws counts as "needs approval" (fail safe).
 */
export function gateOf(
  tool: Tool | undefined,
  args: unknown,
  policy: ApprovalPolicy,
  allowed: ReadonlySet<string>,
): CallGate | undefined {
  if (!tool) return undefined;
  if (tool.external) return 'external';
  if (allowed.has(tool.name)) return undefined;
  const rule = tool.approval;
  if (rule === 'always') return 'approval';
  if (rule === 'never') return undefined;
  if (typeof rule === 'function') {
    try {
      return rule(args) ? 'approval' : undefined;
    } catch {
      // A rule that cannot decide asks a person rather than run the call unchecked.
      return 'approval';
    }
  }
  if (policy.mode === 'always') return 'approval';
  if (policy.mode === 'tools' && policy.tools.includes(tool.name)) return 'approval';
  return undefined;
}
