/**
 * Reading `command.resume` (issue 25): the answers to the tool calls a run stopped for. An
 * interrupt is one batch of calls in LangChain's human-in-the-loop request shape (run-fold.ts
 * `interruptOf`); a resume answers it in any of these forms:
 * - `{decisions: [...]}`: one decision per action request, in order, each
 *   `{type: 'approve'}`, `{type: 'reject', message?}`, `{type: 'edit', edited_action: {name, args}}`
 *   or, for a tool the caller runs, `{type: 'respond', message}` (its output);
 * - an object keyed by interrupt id, each value one of these forms for that interrupt;
 * - one answer for every waiting call: `true`/`false`, `'approve'`/`'reject'`/`'deny'`, a
 *   decision object, `{approved: boolean, reason?}`, or (for calls the caller runs) the output text.
 * A spend cap the turn reached (a budget interrupt) is answered with `{budget: {...}}`: the new
 * caps (session/budget.ts), or `null` for none.
 */
import { budgetProblem, type Budget } from '../../session/index.js';
import { unsupported } from './errors.js';
import { isBudgetInterrupt, type RunInterrupt } from './run-fold.js';

export type ResumeAnswer =
  | { kind: 'approval'; callId: string; decision: 'approve' | 'deny'; reason?: string; arguments?: string }
  | { kind: 'result'; callId: string; output: string }
  | { kind: 'budget'; budget: Budget | null };

type Request = { id: string; name: string; allowed: string[] };

function decisionFor(value: unknown, request: Request, field: string): ResumeAnswer {
  const external = request.allowed.includes('respond');
  if (typeof value === 'string') {
    if (external) return { kind: 'result', callId: request.id, output: value };
    if (value === 'approve' || value === 'approved' || value === 'yes')
      return { kind: 'approval', callId: request.id, decision: 'approve' };
    if (value === 'reject' || value === 'deny' || value === 'denied' || value === 'no')
      return { kind: 'approval', callId: request.id, decision: 'deny' };
    throw unsupported(field, `"${value}" is not an answer to ${request.name}: use approve or reject`);
  }
  if (typeof value === 'boolean') {
    if (external)
      throw unsupported(
        field,
        `${request.name} is run by the caller: resume with its output (a string or {type: "respond", message})`,
      );
    return { kind: 'approval', callId: request.id, decision: value ? 'approve' : 'deny' };
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw unsupported(field, `not an answer to ${request.name}: send a decision such as {"type": "approve"}`);
  const v = value as Record<string, unknown>;
  if (typeof v.approved === 'boolean' && !external)
    return {
      kind: 'approval',
      callId: request.id,
      decision: v.approved ? 'approve' : 'deny',
      ...(typeof v.reason === 'string' ? { reason: v.reason } : {}),
    };
  switch (v.type) {
    case 'approve':
    case 'accept':
      if (external) break;
      return { kind: 'approval', callId: request.id, decision: 'approve' };
    case 'reject':
    case 'deny':
    case 'ignore':
      if (external) break;
      return {
        kind: 'approval',
        callId: request.id,
        decision: 'deny',
        ...(typeof v.message === 'string'
          ? { reason: v.message }
          : typeof v.reason === 'string'
            ? { reason: v.reason }
            : {}),
      };
    case 'edit': {
      if (external) break;
      const action = v.edited_action as { args?: unknown } | undefined;
      const args = action?.args ?? v.args;
      if (typeof args !== 'object' || args === null || Array.isArray(args))
        throw unsupported(
          `${field}.edited_action.args`,
          'an edit carries the arguments the call runs with, as an object',
        );
      return { kind: 'approval', callId: request.id, decision: 'approve', arguments: JSON.stringify(args) };
    }
    case 'respond':
    case 'response':
      if (!external) break;
      if (typeof v.message !== 'string' && typeof v.args !== 'string')
        throw unsupported(`${field}.message`, `the output of ${request.name} must be text`);
      return { kind: 'result', callId: request.id, output: (v.message ?? v.args) as string };
    default:
      if (external && typeof v.output === 'string') return { kind: 'result', callId: request.id, output: v.output };
  }
  throw unsupported(field, `not an answer to ${request.name}: allowed decisions are ${request.allowed.join(', ')}`);
}

/** A budget interrupt is answered with `{budget: {...}}` (new caps) or `{budget: null}` (none). */
function budgetAnswer(value: unknown, field: string): ResumeAnswer {
  if (typeof value !== 'object' || value === null || !('budget' in value))
    throw unsupported(field, 'a spend cap was reached: resume with {"budget": {...}} (new caps) or {"budget": null}');
  const budget = (value as { budget: unknown }).budget;
  if (budget === null) return { kind: 'budget', budget: null };
  const problem = budgetProblem(budget);
  if (problem) throw unsupported(`${field}.budget`, problem);
  return { kind: 'budget', budget: budget as Budget };
}

function answersForInterrupt(value: unknown, interrupt: RunInterrupt, field: string): ResumeAnswer[] {
  if (isBudgetInterrupt(interrupt)) return [budgetAnswer(value, field)];
  const requests: Request[] = interrupt.value.action_requests.map((r, i) => ({
    id: r.id,
    name: r.name,
    allowed: interrupt.value.review_configs[i]?.allowed_decisions ?? [],
  }));
  if (typeof value === 'object' && value !== null && 'decisions' in value) {
    const decisions = (value as { decisions: unknown }).decisions;
    if (!Array.isArray(decisions) || decisions.length !== requests.length)
      throw unsupported(
        `${field}.decisions`,
        `interrupt ${interrupt.id} asks about ${requests.length} call(s); send one decision for each, in order`,
      );
    return requests.map((request, i) => decisionFor(decisions[i], request, `${field}.decisions[${i}]`));
  }
  return requests.map((request) => decisionFor(value, request, field));
}

/** The answers `resume` gives the waiting `interrupts`; a 422 naming what cannot be read. */
export function answersOf(resume: unknown, interrupts: readonly RunInterrupt[]): ResumeAnswer[] {
  const byId = new Map(interrupts.map((interrupt) => [interrupt.id, interrupt]));
  if (typeof resume === 'object' && resume !== null && !Array.isArray(resume)) {
    const keys = Object.keys(resume);
    if (keys.length > 0 && keys.every((key) => byId.has(key)))
      return keys.flatMap((key) =>
        answersForInterrupt((resume as Record<string, unknown>)[key], byId.get(key)!, `command.resume.${key}`),
      );
  }
  return interrupts.flatMap((interrupt) => answersForInterrupt(resume, interrupt, 'command.resume'));
}
