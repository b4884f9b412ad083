/**
 * The session workflow id has one format (workflows/api.ts: `workflowIdFor` and its parser);
 * telemetry, which imports nothing of ours, reads it with its own copy of the prefix. These
 * tests hold the copy to the format, so a change to one that misses the other fails here.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { SESSION_WORKFLOW_PREFIX, sessionOfWorkflow } from '../../src/telemetry/attributes.js';
import { SESSION_WORKFLOW_ID_PREFIX, sessionIdOfWorkflow, workflowIdFor } from '../../src/workflows/api.js';

const sessionId = fc.stringMatching(/^[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}$/);

describe('the session workflow id', () => {
  it('is read back to its session by the workflow API and by telemetry alike', () => {
    fc.assert(
      fc.property(sessionId, (id) => {
        expect(sessionIdOfWorkflow(workflowIdFor(id))).toBe(id);
        expect(sessionOfWorkflow(workflowIdFor(id))).toBe(id);
      }),
    );
    expect(SESSION_WORKFLOW_PREFIX).toBe(SESSION_WORKFLOW_ID_PREFIX);
  });

  it('names no session when the workflow is not a session workflow', () => {
    for (const workflowId of [undefined, '', 'other/abc', 'sessions/abc', 'abc'])
      expect([sessionIdOfWorkflow(workflowId), sessionOfWorkflow(workflowId)]).toEqual([undefined, undefined]);
  });
});
