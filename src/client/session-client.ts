/**
 * `SessionClient`: what backend services use. Commands go through Temporal (the session's
 * workflow is the only writer); reads come straight from the store (DESIGN §2).
 */
import { randomUUID } from 'node:crypto';
import { ApplicationFailure } from '@temporalio/common';
import { Client, Connection, WithStartWorkflowOperation, WorkflowNotFoundError, WorkflowUpdateFailedError, type WorkflowHandle } from '@temporalio/client';
import { readDerivedHistory } from '../persistence/derived-history.js';
import type { SessionStore } from '../persistence/store.js';
import {
  SESSION_FORMAT_VERSION,
  SessionlogError,
  assertSessionId,
  isAppendSurfaceEvent,
  planFork,
  textOf,
  type AgentSpec,
  type AnyEvent,
  type Message,
  type NewEvent,
  type SessionEvent,
  type SessionHeader,
} from '../session/index.js';
import {
  DEFAULT_TASK_QUEUE,
  SESSION_WORKFLOW_TYPE,
  cancelSignal,
  closeSignal,
  compactUpdate,
  sendUpdate,
  statusQuery,
  userMessageSignal,
  workflowIdFor,
  type CompactResult,
  type SendResult,
  type SessionStatus,
  type SessionTunables,
  type SessionWorkflowInput,
} from '../workflows/api.js';
import type { sessionWorkflow } from '../workflows/session-workflow.js';
import { WatchHub } from './watch-hub.js';

export type SessionClientOptions = {
  /** A connected Temporal client. */
  temporal: Client;
  /** The store the workers write to (reads are served from it). */
  store: SessionStore;
  /** Task queue the session workflows run on; the workers' `taskQueue` (default `sessionlog`). */
  taskQueue?: string;
  /** Workflow tunables for sessions this client starts (each unset field keeps its default). */
  tunables?: Partial<SessionTunables>;
};

const REJECTION_CODES = new Set(['INVALID_MESSAGE', 'EMPTY_MESSAGE', 'MESSAGE_TOO_LARGE', 'SESSION_CLOSED']);

/** Maps a validator's rejection of `send` to a SessionlogError with the validator's code. */
function rejectedMessage(error: unknown): unknown {
  if (error instanceof WorkflowUpdateFailedError && error.cause instanceof ApplicationFailure && REJECTION_CODES.has(error.cause.type ?? '')) {
    return new SessionlogError(error.cause.type as 'INVALID_MESSAGE', error.cause.message, { cause: error });
  }
  return error;
}

/**
 * Retries `fn` while the server refuses an update because the workflow task is being retried
 * (a worker crashed mid-task): the same message id makes the retry safe. Bounded: ~30 s.
 */
async function retryWhileTaskFails<T>(fn: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + 30_000;
  for (let delay = 100; ; delay = Math.min(delay * 2, 2_000)) {
    try {
      return await fn();
    } catch (error) {
      const message = error instanceof Error ? `${error.message} ${(error.cause as Error | undefined)?.message ?? ''}` : '';
      if (!/Workflow Task in failed state/i.test(message) || Date.now() + delay > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, delay));
    }
  }
}

/** The answer to {@link SessionClient.send}: the turn, its final reply and that reply's text. */
export type Reply = SendResult & { text: string; messageId: string };

/**
 * The session API for backend services. Each session is one Temporal workflow (id
 * `session/<sessionId>`), the only writer of its append-only log; this client sends it commands
 * (start, send, post, cancel, close, compact, resume) and reads the log, the derived history and
 * the transcript straight from `store`, which must be the store the workers write to.
 *
 * Session ids are 1-128 characters of `A-Z a-z 0-9 . _ -` not starting with `.`; every method
 * that takes one throws SessionlogError `INVALID_SESSION_ID` for anything else. The client
 * owns neither the Temporal connection nor the store: close them when done
 * (`client.temporal.connection.close()`, `store.close()`).
 */
export class SessionClient {
  /** The Temporal client commands go through. */
  readonly temporal: Client;
  /** The store reads are served from (the workers' store). */
  readonly store: SessionStore;
  /** Task queue of the session workflows this client starts. */
  readonly taskQueue: string;
  private readonly tunables: Partial<SessionTunables> | undefined;
  /** Live tails: one store watch per session shared by all of this client's followers. */
  readonly watchHub: WatchHub;

  /** Builds a client over an existing Temporal client; see {@link SessionClient.connect} to connect as well. */
  constructor(options: SessionClientOptions) {
    this.temporal = options.temporal;
    this.store = options.store;
    this.taskQueue = options.taskQueue ?? DEFAULT_TASK_QUEUE;
    this.tunables = options.tunables;
    this.watchHub = new WatchHub(options.store);
  }

  /**
   * Connects to the Temporal frontend at `address` (`host:port`) in `namespace` (default
   * `default`) and builds a client over `store`. The connection is the caller's to close:
   * `client.temporal.connection.close()`.
   */
  static async connect(options: { address: string; namespace?: string; store: SessionStore; taskQueue?: string; tunables?: Partial<SessionTunables> }): Promise<SessionClient> {
    const connection = await Connection.connect({ address: options.address });
    const temporal = new Client({ connection, namespace: options.namespace ?? 'default' });
    return new SessionClient({ temporal, store: options.store, ...(options.taskQueue ? { taskQueue: options.taskQueue } : {}), ...(options.tunables ? { tunables: options.tunables } : {}) });
  }

  /**
   * Registers the session's header in the store if it is new, so reads (events, follow) work
   * as soon as a command returns. Header metadata only: log events are written by the workflow.
   */
  private async ensureSession(sessionId: string, agent?: AgentSpec): Promise<SessionHeader> {
    assertSessionId(sessionId);
    if (await this.store.exists(sessionId)) return this.store.header(sessionId);
    const header: SessionHeader = { version: SESSION_FORMAT_VERSION, id: sessionId, createdAt: Date.now(), ...(agent ? { agent } : {}) };
    try {
      await this.store.create(header);
    } catch (error) {
      // Another client created it concurrently: use the stored header.
      if (!(error instanceof SessionlogError && error.code === 'SESSION_ALREADY_EXISTS')) throw error;
    }
    return this.store.header(sessionId);
  }

  private input(sessionId: string): SessionWorkflowInput {
    return { sessionId, ...(this.tunables ? { tunables: this.tunables } : {}) };
  }

  private startOptions(sessionId: string) {
    return { workflowId: workflowIdFor(sessionId), taskQueue: this.taskQueue, args: [this.input(sessionId)] as [SessionWorkflowInput] };
  }

  private handle(sessionId: string): WorkflowHandle<typeof sessionWorkflow> {
    assertSessionId(sessionId);
    return this.temporal.workflow.getHandle<typeof sessionWorkflow>(workflowIdFor(sessionId));
  }

  /**
   * Creates a session (its header, then its workflow). Idempotent for an existing id with the
   * same agent. Returns the session id (a new UUID when none is given).
   *
   * @param options.sessionId the id to use; a new UUID when omitted.
   * @param options.agent the session's model, system prompt and tools; unset fields fall back
   *   to the worker's `agent`. Only a new session records it: an existing header is kept.
   * @returns the session id and its stored header.
   */
  async start(options: { sessionId?: string; agent?: AgentSpec } = {}): Promise<{ sessionId: string; header: SessionHeader }> {
    const sessionId = options.sessionId ?? randomUUID();
    const header = await this.ensureSession(sessionId, options.agent);
    await this.temporal.workflow.start(SESSION_WORKFLOW_TYPE, { ...this.startOptions(sessionId), workflowIdConflictPolicy: 'USE_EXISTING' });
    return { sessionId, header };
  }

  /**
   * Sends a user message and waits for the turn that answers it (update-with-start: the
   * session's workflow is started if it is not running). Re-sending the same `id` never
   * produces a second answer.
   *
   * The reply's tokens are in the log while the turn runs: read them with {@link follow}
   * (`assistant/chunk` events) started before this call.
   *
   * @param options.id idempotency key of the message (default: a new UUID).
   * @returns the turn, its outcome (`completed`, `aborted`, `error`, …), the final assistant
   *   message's seq, text and id (empty text when the turn ended without one).
   * @throws SessionlogError `EMPTY_MESSAGE`, `MESSAGE_TOO_LARGE`, `INVALID_MESSAGE` or
   *   `SESSION_CLOSED` when the workflow refuses the message (it never reaches the log).
   */
  async send(sessionId: string, text: string, options: { id?: string } = {}): Promise<Reply> {
    await this.ensureSession(sessionId);
    const id = options.id ?? randomUUID();
    const startWorkflowOperation = new WithStartWorkflowOperation<typeof sessionWorkflow>(SESSION_WORKFLOW_TYPE, {
      ...this.startOptions(sessionId),
      workflowIdConflictPolicy: 'USE_EXISTING',
    });
    let attempt = 0;
    const result = await retryWhileTaskFails(async () => {
      // A WithStartWorkflowOperation is single-use: make a fresh one per attempt.
      const operation = attempt++ === 0 ? startWorkflowOperation : new WithStartWorkflowOperation<typeof sessionWorkflow>(SESSION_WORKFLOW_TYPE, { ...this.startOptions(sessionId), workflowIdConflictPolicy: 'USE_EXISTING' });
      try {
        return await this.temporal.workflow.executeUpdateWithStart(sendUpdate, { args: [{ id, text }], updateId: id, startWorkflowOperation: operation });
      } catch (error) {
        throw rejectedMessage(error);
      }
    });
    return { ...result, ...(await this.replyText(sessionId, result)) };
  }

  /**
   * Queues a user message and returns at once (signal-with-start: the session's workflow is
   * started if it is not running). The answer appears in the log; see {@link follow}. Unlike
   * {@link send}, a message the workflow refuses is not reported here.
   *
   * @param options.id idempotency key of the message (default: a new UUID).
   * @returns the message id.
   */
  async post(sessionId: string, text: string, options: { id?: string } = {}): Promise<{ id: string }> {
    await this.ensureSession(sessionId);
    const id = options.id ?? randomUUID();
    await this.temporal.workflow.signalWithStart(SESSION_WORKFLOW_TYPE, {
      ...this.startOptions(sessionId),
      signal: userMessageSignal,
      signalArgs: [{ id, text }],
    });
    return { id };
  }

  /**
   * The workflow's live status (phase, turn, queue, last error…), from a query.
   *
   * @throws SessionlogError `SESSION_NOT_FOUND` when no run of the session's workflow is open.
   */
  async status(sessionId: string): Promise<SessionStatus> {
    try {
      return await this.handle(sessionId).query(statusQuery);
    } catch (error) {
      if (error instanceof WorkflowNotFoundError) throw new SessionlogError('SESSION_NOT_FOUND', `session ${sessionId} has no running workflow; use resume to start one`);
      throw error;
    }
  }

  /** Whether a run of the session's workflow is open (false when it finished or never started). */
  async isRunning(sessionId: string): Promise<boolean> {
    try {
      const description = await this.handle(sessionId).describe();
      return description.status.name === 'RUNNING';
    } catch (error) {
      if (error instanceof WorkflowNotFoundError) return false;
      throw error;
    }
  }

  /**
   * The derived model history: the messages the model would be sent next, with compacted and
   * pruned ranges replaced as the log says. Read from the store through the projection cache.
   */
  async history(sessionId: string): Promise<Message[]> {
    assertSessionId(sessionId);
    return (await readDerivedHistory(this.store, sessionId)).messages;
  }

  /**
   * The human transcript: every user, assistant and tool message event as it was appended,
   * in log order, including what compaction later shadowed in the derived history.
   */
  async transcript(sessionId: string): Promise<AnyEvent[]> {
    assertSessionId(sessionId);
    const events = await this.store.readFrom(sessionId, 0);
    return events.filter(isAppendSurfaceEvent);
  }

  /**
   * Stored events from `fromSeq` on (default 0), at most `limit` of them (default all). Events
   * of types this build does not know are returned as they are.
   */
  async events(sessionId: string, fromSeq = 0, limit?: number): Promise<AnyEvent[]> {
    assertSessionId(sessionId);
    return this.store.readFrom(sessionId, fromSeq, limit);
  }

  /**
   * A live tail of the log: stored events from `fromSeq`, then each new one as it is appended,
   * in seq order with none skipped. The iteration ends when `signal` aborts or the store
   * closes; without a signal it never ends on its own. To stream a reply, take
   * `store.nextSeq(sessionId)` before {@link send} and follow from there. All followers of a
   * session share one store watch (see {@link WatchHub}).
   */
  follow(sessionId: string, fromSeq = 0, signal?: AbortSignal): AsyncIterable<AnyEvent> {
    return this.watchHub.follow(sessionId, fromSeq, signal);
  }

  /**
   * Aborts the running turn; the partial reply is logged as interrupted. No effect when the
   * session is idle. Throws the Temporal client's WorkflowNotFoundError when no run is open.
   */
  async cancel(sessionId: string): Promise<void> {
    await this.handle(sessionId).signal(cancelSignal);
  }

  /**
   * Lets the workflow finish after the current turn. The log stays; `resume` or a new message
   * restarts it. Throws the Temporal client's WorkflowNotFoundError when no run is open.
   */
  async close(sessionId: string): Promise<void> {
    await this.handle(sessionId).signal(closeSignal);
  }

  /**
   * Runs a manual compaction: waits until the session is idle, summarises the older history
   * (the log keeps everything; the derived history shows the summary) and returns what it
   * shadowed. Starts the workflow if it is not running.
   *
   * @returns the compaction's id, the shadowed seqs and the token counts before and after, or
   *   null when nothing was compacted (nothing eligible, or the compaction failed: `status()`
   *   then reports why in `lastError`).
   */
  async compact(sessionId: string): Promise<CompactResult | null> {
    const startWorkflowOperation = new WithStartWorkflowOperation<typeof sessionWorkflow>(SESSION_WORKFLOW_TYPE, {
      ...this.startOptions(sessionId),
      workflowIdConflictPolicy: 'USE_EXISTING',
    });
    return this.temporal.workflow.executeUpdateWithStart(compactUpdate, { args: [], startWorkflowOperation });
  }

  /**
   * Starts a new run for a session whose workflow is gone (terminated, reset, history lost):
   * the run repairs an interrupted turn from the log and carries on. No-op when one is running.
   *
   * @returns the run id of the new run, or of the run already open.
   * @throws SessionlogError `SESSION_NOT_FOUND` when the store has no such session.
   */
  async resume(sessionId: string): Promise<{ runId: string; started: boolean }> {
    assertSessionId(sessionId);
    if (!(await this.store.exists(sessionId))) throw new SessionlogError('SESSION_NOT_FOUND', `session ${sessionId} does not exist in the store`);
    try {
      const description = await this.handle(sessionId).describe();
      if (description.status.name === 'RUNNING') return { runId: description.runId, started: false };
    } catch (error) {
      if (!(error instanceof WorkflowNotFoundError)) throw error;
    }
    const handle = await this.temporal.workflow.start(SESSION_WORKFLOW_TYPE, {
      ...this.startOptions(sessionId),
      workflowIdConflictPolicy: 'USE_EXISTING',
      workflowIdReusePolicy: 'ALLOW_DUPLICATE',
    });
    return { runId: handle.firstExecutionRunId, started: true };
  }

  /**
   * Forks a session into a new one (DESIGN §3 fork and seed): the child's log is a copy of the
   * parent's stored events up to `at` (inclusive; default the last one) followed by one
   * `session/end-seed`, written in one batch with op `fork:<childId>`; its header names the
   * parent. The child's workflow starts on its first message. Fails with SESSION_NOT_FOUND for
   * an unknown parent, SESSION_ALREADY_EXISTS when the child id is taken, INVALID_BOUNDARY for
   * a seq outside the parent's log and OPEN_TURN when `at` falls inside a turn.
   */
  async fork(sessionId: string, options: { childId?: string; at?: number } = {}): Promise<{ sessionId: string; header: SessionHeader }> {
    assertSessionId(sessionId);
    const childId = options.childId ?? randomUUID();
    assertSessionId(childId);
    // Stored events only: a turn the parent is running right now is open, so forking there is OPEN_TURN.
    const source = { header: await this.store.header(sessionId), events: await this.store.readFrom(sessionId, 0) };
    const plan = planFork(source, childId, Date.now(), options.at);
    const batch: NewEvent[] = plan.seed.map(seedEvent);
    if (plan.endSeed) batch.push(plan.endSeed);
    await this.store.create(plan.header);
    await this.store.append(childId, batch, { expectedSeq: 0, op: `fork:${childId}` });
    return { sessionId: childId, header: plan.header };
  }

  private async replyText(sessionId: string, result: SendResult): Promise<{ text: string; messageId: string }> {
    let seq = result.replySeq;
    if (seq === null) {
      // Answered in an earlier run (or interrupted): find the turn's last assistant message.
      const events = await this.store.readFrom(sessionId, 0);
      for (const e of events) {
        if (e.type === 'assistant/message' && (e as SessionEvent<'assistant/message'>).data.turn === result.turn) seq = e.seq;
      }
      if (seq === null) return { text: '', messageId: '' };
    }
    const [event] = await this.store.readFrom(sessionId, seq, 1);
    if (event?.type !== 'assistant/message') return { text: '', messageId: '' };
    const message = (event as SessionEvent<'assistant/message'>).data.message;
    return { text: textOf(message.content), messageId: message.id };
  }
}

/** A stored parent event as a child's seed event: the store re-stamps seq and op. */
function seedEvent(event: AnyEvent): NewEvent {
  const { seq: _seq, op: _op, ...rest } = event as SessionEvent & { op?: string };
  return rest as NewEvent;
}
