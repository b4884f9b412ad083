/**
 * The session workflow (DESIGN §5): one per session, id `session/<sessionId>`. It wires the
 * messages of api.ts to the run (session-run.ts), which owns the state, the activities and the
 * loop: wait for messages, run a turn as model steps and tool rounds, compact when asked,
 * continue as new when the history grows. The conversation lives in the log, written by
 * activities.
 *
 * The handlers are registered in this order on purpose: messages buffered before the run
 * started are delivered as each handler is set, and recorded histories replay in this order.
 */
import { setHandler } from '@temporalio/workflow';
import {
  approveUpdate,
  cancelSignal,
  closeSignal,
  compactUpdate,
  noteUpdate,
  openedUpdate,
  sendUpdate,
  statusQuery,
  toolResultUpdate,
  userMessageSignal,
  type SessionWorkflowInput,
} from './api.js';
import { SessionRun } from './session-run.js';

export async function sessionWorkflow(input: SessionWorkflowInput): Promise<void> {
  const run = new SessionRun(input);
  setHandler(userMessageSignal, (message) => run.receiveMessage(message));
  setHandler(sendUpdate, (message) => run.send(message), { validator: (message) => run.validateMessage(message) });
  setHandler(approveUpdate, (answer) => run.approve(answer), { validator: (answer) => run.validateApproval(answer) });
  setHandler(toolResultUpdate, (result) => run.submitToolResult(result), {
    validator: (result) => run.validateToolResult(result),
  });
  setHandler(cancelSignal, () => run.cancel());
  setHandler(closeSignal, () => run.close());
  setHandler(statusQuery, () => run.status());
  setHandler(compactUpdate, () => run.compact());
  setHandler(noteUpdate, (note) => run.note(note), { validator: (note) => run.validateNote(note) });
  setHandler(openedUpdate, () => run.opened());
  await run.run();
}
