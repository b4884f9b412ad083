/**
 * The session workflow (DESIGN §5): one per session, id `session/<sessionId>`. Wiring only: it
 * makes the run (session-run.ts, the turn loop) and hands each message of api.ts to the part of
 * the run that owns it: the queue (message-queue.ts), the calls' answers (call-answers.ts), the
 * work between turns (between-turns.ts), or the run itself.
 *
 * The handlers are registered in this order on purpose: messages buffered before the run
 * started are delivered as each handler is set, and recorded histories replay in this order.
 */
import { patched, setHandler } from '@temporalio/workflow';
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
  type AnswerOptions,
  type NoteInput,
  type SessionWorkflowInput,
} from './api.js';
import { RUN_SCOPE } from './patches.js';
import { RunScope } from './run-scope.js';
import { SessionRun } from './session-run.js';

export async function sessionWorkflow(input: SessionWorkflowInput): Promise<void> {
  const run = new SessionRun(input);
  const { messages, calls, betweenTurns } = run;
  // The loop and the update handlers run in a scope that keeps nothing per turn (run-scope.ts).
  // Runs recorded before it replay without it: the scope moves when an update's answer is sent.
  const scope = patched(RUN_SCOPE)
    ? new RunScope(() => {
        run.cancel();
        run.close();
      })
    : undefined;
  const inScope = <T>(handler: () => Promise<T>): Promise<T> => (scope ? scope.run(handler) : handler());
  setHandler(userMessageSignal, (message) => messages.receive(message));
  setHandler(sendUpdate, (message) => inScope(() => messages.send(message)), {
    validator: (message) => messages.validate(message),
  });
  setHandler(approveUpdate, (answer) => inScope(() => calls.approve(answer)), {
    validator: (answer) => calls.validateApproval(answer),
  });
  setHandler(toolResultUpdate, (result) => inScope(() => calls.submitToolResult(result)), {
    validator: (result) => calls.validateToolResult(result),
  });
  setHandler(cancelSignal, () => run.cancel());
  setHandler(closeSignal, () => run.close());
  setHandler(statusQuery, () => run.status());
  setHandler(compactUpdate, (options?: AnswerOptions) => inScope(() => betweenTurns.compact(options)), {
    validator: (options?: AnswerOptions) => betweenTurns.validateCompact(options),
  });
  setHandler(
    noteUpdate,
    (note: NoteInput, options?: AnswerOptions) => inScope(() => betweenTurns.note(note, options)),
    {
      validator: (note: NoteInput, options?: AnswerOptions) => betweenTurns.validateNote(note, options),
    },
  );
  setHandler(openedUpdate, () => inScope(() => run.opened()));
  await inScope(() => run.run());
  scope?.endIfCancelled();
}
