/**
 * Span attribute names shared by every part that makes spans (gateway, client, workflow
 * sandbox, activities, model and tool spans). Plain constants, safe to bundle into workflow code.
 */
/** The session id (OpenTelemetry semantic conventions `session.id`). */
export const SESSION_ID = 'session.id';
/** The turn number within the session. */
export const TURN = 'sessionlog.turn';
/** The step number within the turn. */
export const STEP = 'sessionlog.step';

/**
 * Prefix of a session workflow's id (`session/<sessionId>`). The format is `workflows/api.ts`'s
 * (`workflowIdFor`, `sessionIdOfWorkflow`); telemetry imports nothing of ours (DESIGN §2: it is
 * bundled into workflow code and set up before any other layer), so it reads the id with this
 * copy, the only one in telemetry, held to that format by test/telemetry/workflow-id.test.ts.
 */
export const SESSION_WORKFLOW_PREFIX = 'session/';

/** The session a workflow id names, if it is a session workflow's. */
export function sessionOfWorkflow(workflowId: string | undefined): string | undefined {
  return workflowId?.startsWith(SESSION_WORKFLOW_PREFIX) ? workflowId.slice(SESSION_WORKFLOW_PREFIX.length) : undefined;
}

/** The session id and turn an activity's (or message's) first argument names, read by shape. */
export function sessionTurnOf(arg: unknown): { sessionId?: string; turn?: number } {
  if (typeof arg !== 'object' || arg === null) return {};
  const { sessionId, turn } = arg as { sessionId?: unknown; turn?: unknown };
  return { ...(typeof sessionId === 'string' ? { sessionId } : {}), ...(typeof turn === 'number' ? { turn } : {}) };
}
