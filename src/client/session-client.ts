/**
 * `SessionClient`: everything a backend service or an operator does with sessions (DESIGN §2,
 * §8). Commands go through Temporal (the session's workflow is the only writer of its log);
 * reads come straight from the store. The gateway and the CLI reach sessions only through it.
 */
import { randomUUID } from 'node:crypto';
import { ApplicationFailure, type UpdateDefinition } from '@temporalio/common';
import {
  Client,
  Connection,
  WithStartWorkflowOperation,
  WorkflowNotFoundError,
  WorkflowUpdateFailedError,
  type WorkflowClientInterceptor,
  type WorkflowHandle,
} from '@temporalio/client';
import { readDerivedHistory } from '../persistence/derived-history.js';
import {
  inboxKeys,
  isJsonObjectText,
  inboxEntriesByLogged,
  type ApprovalBody,
  type MessageBody,
  type NoteBody,
  type ToolResultBody,
} from '../persistence/inbox-entries.js';
import { notFound } from '../persistence/errors.js';
import {
  ALL_TENANTS,
  tenantScope,
  type InboxRef,
  type SessionStore,
  type StoreEraseReceipt,
  type TenantScope,
  type TranscriptEntry,
} from '../persistence/store.js';
import { scopeStore, sessionOwner, type CrossTenantAttempt } from '../persistence/tenants.js';
import type { TenantSpend } from '../persistence/spend.js';

export type { CrossTenantAttempt };
import {
  CALLER_VISIBLE_CODES,
  newSessionHeader,
  SessionlogError,
  UNREADABLE_LOG_CODES,
  foldSurfaceView,
  foldTurns,
  foldUsage,
  emptyTotals,
  addTotals,
  type UsageLedger,
  type UsageTotals,
  isAppendSurfaceEvent,
  isEventOfType,
  isSessionErrorCode,
  isSessionlogError,
  suppliedHistoryProblem,
  textOf,
  hideProblem,
  turnHintsProblem,
  turnToolsProblem,
  verifyLog,
  waitsForAnswer,
  budgetProblem,
  DEFAULT_TENANT,
  type AgentSpec,
  type AskedAgent,
  type Budget,
  type BudgetUse,
  type TenantCaps,
  type TurnHints,
  type SuppliedItem,
  type ContextReport,
  type Message,
  type SessionHeader,
  type SessionView,
  type StoredEvent,
  type SurfaceView,
  type ToolSchema,
  type TurnsView,
  type Violation,
} from '../session/index.js';
import {
  DEFAULT_TASK_QUEUE,
  DEFAULT_TUNABLES,
  NOTE_LIMITS,
  approveUpdate,
  toolResultUpdate,
  SESSION_WORKFLOW_TYPE,
  cancelSignal,
  closeSignal,
  compactUpdate,
  noteUpdate,
  openedUpdate,
  sendUpdate,
  statusQuery,
  userMessageSignal,
  workflowIdFor,
  type ApprovalResult,
  type CompactResult,
  type Deferred,
  type NoteInput,
  type SeedSpec,
  type ToolResultAck,
  type SendResult,
  type SessionStatus,
  type SessionTunables,
  type SessionWorkflowInput,
  type UserInput,
} from '../workflows/api.js';
import type { sessionWorkflow } from '../workflows/session-workflow.js';
import { assertMessageId, assertMessageText, assertNoteMetadata, assertSessionId, isWellFormed } from './inputs.js';
import { eraseWorkflows, type TemporalEraseReceipt } from './erase.js';
import { SessionPayloadCodec } from './session-codec.js';
import { WatchHub } from './watch-hub.js';

/**
 * What a `SessionClient` is built over: a connected Temporal client, the store the workers write
 * to, and the defaults of the sessions it starts (`SessionClient.connect` fills in the Temporal
 * client from an address).
 */
export type SessionClientOptions = {
  /** A connected Temporal client. */
  temporal: Client;
  /** The store the workers write to (reads are served from it). */
  store: SessionStore;
  /** Task queue the session workflows run on; the workers' `taskQueue` (default `sessionlog`). */
  taskQueue?: string;
  /** Workflow tunables for sessions this client starts (each unset field keeps its default). */
  tunables?: Partial<SessionTunables>;
  /**
   * Checks the agent of a new session (e.g. that its model is in the catalogue) and throws
   * SessionlogError `UNKNOWN_MODEL` otherwise. Without it every agent is accepted.
   */
  checkAgent?: (agent: AgentSpec) => void;
  /** Measures a session's next request by kind; what {@link SessionClient.context} answers with. */
  contextReport?: (session: SessionView) => ContextReport;
  /** The budget a new session of each tenant gets when its create names none (SESSIONLOG_TENANT_BUDGETS). */
  tenantBudgets?: Readonly<Record<string, Budget>>;
  /** The caps on what all of a tenant's sessions spend together (SESSIONLOG_TENANT_CAPS): shown beside its spend. */
  tenantCaps?: Readonly<Record<string, TenantCaps>>;
  /** Told of each refused attempt on another tenant's session by a client of {@link SessionClient.forTenant}. */
  onCrossTenant?: (attempt: CrossTenantAttempt) => void;
};

/** How long a command waits for a store that refuses writes before it fails with UNAVAILABLE (ms). */
const INBOX_WRITE_WAIT_MS = 30_000;

/** An answer to a call waiting for approval, as {@link SessionClient.approve} takes it. */
export type ApprovalAnswer = {
  decision: 'approve' | 'deny';
  /** Why (logged, and the model sees a denial's reason). */
  reason?: string;
  /** Edited arguments (a JSON object's text) the call runs with. */
  arguments?: string;
  /** Approve this tool without asking for the rest of the session (logged as `tool/allow`). */
  allowForSession?: boolean;
  /** Who answered (logged). */
  by?: string;
};

/** The answer to {@link SessionClient.send}: the turn, its final reply and that reply's text. */
/**
 * Options of a user message: its idempotency key, the caller's tools for the turn it starts, and
 * the model and/or instructions (`''`: none) the session runs with from that turn on.
 */
export type MessageOptions = {
  id?: string;
  tools?: ToolSchema[];
  agent?: AskedAgent;
  hints?: TurnHints;
  /** Start a turn of its own rather than join a running turn's next step (a LangGraph run, issue 25). */
  ownTurn?: boolean;
};

/** A branch made by an edit or a regeneration: the new session, where it left its parent, and the message that starts its turn. */
export type BranchResult = { sessionId: string; forkedFrom: string; forkedAt: number; messageId: string };

/**
 * The answer to a sent message: the turn, its outcome and its reply's text. A turn that failed
 * (`outcome: 'error'`) names why in `error`, from its `turn/end`: the same code and message the
 * status and the log show.
 */
export type Reply = SendResult & { text: string; messageId: string; error?: { code: string; message: string } };

/** A session as listed: its header and how many events its log holds. */
export type SessionSummary = SessionHeader & { events: number };

/** What `erase` removed, from the store and from Temporal. */
export type EraseReceipt = { sessionId: string; store: StoreEraseReceipt; temporal: TemporalEraseReceipt };

/** A tool call waiting for an answer, as {@link SessionClient.pendingApprovals} lists it. */
export type PendingApproval = {
  sessionId: string;
  callId: string;
  tool: string;
  /** `approval`: approve or deny it; `external`: post the tool's result. */
  kind: 'approval' | 'external';
  /** The call's arguments (JSON text). */
  arguments: string;
  turn: number;
  step: number;
  requestedAt: number;
  ageMs: number;
  expiresAt: number;
};

/** The result of {@link SessionClient.verify}: every problem of the stored log, with its seq. */
/**
 * A session's log as `export` writes it. `tornTail`: a JSONL log whose final batch never
 * finished (a torn write, DESIGN §4.1) is exported without it, and says so.
 */
export type SessionExport = {
  header: SessionHeader;
  events: StoredEvent[];
  tornTail?: { fromSeq: number; reason: string };
};

/**
 * `inboxWaiting`: keys of inbox entries the log does not hold (DESIGN §5.2): inputs whose update
 * or signal has not arrived (yet); `erase` removes them.
 */
export type VerifyReport = { sessionId: string; events: number; violations: Violation[]; inboxWaiting: string[] };

/**
 * `temporal`, or a client on its connection that seals session payloads with their keys in
 * `store` (after any codec of `temporal`'s own). Session payloads are plain JSON values, so the
 * default payload converter is the one they need; the default failure converter opens the
 * sealed failure messages workers send (converters/failure-converter.cjs).
 */
function withSessionCodec(temporal: Client, store: SessionStore): Client {
  const converter = temporal.options.loadedDataConverter;
  if (converter.payloadCodecs.some((codec) => codec instanceof SessionPayloadCodec)) return temporal;
  return new Client({
    connection: temporal.connection,
    namespace: temporal.options.namespace,
    identity: temporal.options.identity,
    interceptors: temporal.options.interceptors,
    dataConverter: {
      payloadCodecs: [...converter.payloadCodecs, new SessionPayloadCodec(store.sessionKeys)],
    },
  });
}

/** Maps a refusal of an update (validator or handler) to a SessionlogError with its code. */
function refusal(error: unknown): unknown {
  if (
    error instanceof WorkflowUpdateFailedError &&
    error.cause instanceof ApplicationFailure &&
    isSessionErrorCode(error.cause.type) &&
    CALLER_VISIBLE_CODES.has(error.cause.type)
  ) {
    return new SessionlogError(error.cause.type, error.cause.message, { cause: error });
  }
  return error;
}

/**
 * How long an update waits while the server refuses it because the session's workflow task is
 * being retried (a worker crashed mid-task: the task times out, and a replacement worker must
 * start and replay it; on a loaded host, with repeated crashes, that takes well over 30 s).
 */
const TASK_FAILED_WAIT_MS = 120_000;

/**
 * Retries `fn` while the server refuses an update because the workflow task is being retried.
 * Safe: a refused update was never accepted, and the message id (or the approval's one answer)
 * makes a repeat harmless. Bounded by {@link TASK_FAILED_WAIT_MS}.
 */
/** Throws INVALID_ARGUMENT naming what is wrong with `budget`. */
function assertBudget(budget: unknown): asserts budget is Budget {
  const problem = budgetProblem(budget);
  if (problem) throw new SessionlogError('INVALID_ARGUMENT', problem);
}

async function retryWhileTaskFails<T>(fn: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + TASK_FAILED_WAIT_MS;
  for (let delay = 100; ; delay = Math.min(delay * 2, 2_000)) {
    try {
      return await fn();
    } catch (error) {
      const message =
        error instanceof Error ? `${error.message} ${(error.cause as Error | undefined)?.message ?? ''}` : '';
      if (!/Workflow Task in failed state/i.test(message) || Date.now() + delay > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, delay));
    }
  }
}

/**
 * The session API for backend services and operators. Each session is one Temporal workflow
 * (id `session/<sessionId>`), the only writer of its append-only log; this client sends it
 * commands and reads the log, the derived history and the transcript from `store`, which must
 * be the store the workers write to.
 *
 * Session ids are 1-128 characters of `A-Z a-z 0-9 . _ -` not starting with `.`; every method
 * that takes one throws SessionlogError `INVALID_SESSION_ID` for anything else, before any
 * workflow is started. The client owns neither the Temporal connection nor the store: close
 * them when done (`client.temporal.connection.close()`, `store.close()`).
 */
export class SessionClient {
  /** The Temporal client commands go through. */
  readonly temporal: Client;
  /** The store reads are served from (the workers' store). */
  readonly store: SessionStore;
  /** Task queue of the session workflows this client starts. */
  readonly taskQueue: string;
  private readonly tunables: Partial<SessionTunables> | undefined;
  private readonly checkAgent: ((agent: AgentSpec) => void) | undefined;
  private readonly measure: ((session: SessionView) => ContextReport) | undefined;
  /** Live tails: one store watch per session shared by all of this client's followers. */
  readonly watchHub: WatchHub;
  /** The tenant this client is scoped to ({@link SessionClient.forTenant}); undefined: every tenant. */
  readonly tenant: string | undefined;
  /** What `list` and `erase` reach in the store: the tenant's sessions, or every tenant's. */
  private readonly scope: TenantScope;
  private readonly options: SessionClientOptions;
  private readonly scoped = new Map<string, SessionClient>();

  /**
   * Builds a client over an existing Temporal client's connection; see {@link SessionClient.connect}
   * to connect as well. Its commands go through a Temporal client of its own on that connection,
   * with the same namespace, identity and interceptors, whose data converter seals every payload
   * of a session workflow with the session's key ({@link SessionPayloadCodec}).
   */
  constructor(options: SessionClientOptions, tenant?: string) {
    this.options = options;
    this.tenant = tenant;
    this.scope = tenant === undefined ? ALL_TENANTS : tenantScope(tenant);
    this.temporal = withSessionCodec(options.temporal, options.store);
    this.store = tenant === undefined ? options.store : scopeStore(options.store, tenant, options.onCrossTenant);
    this.taskQueue = options.taskQueue ?? DEFAULT_TASK_QUEUE;
    this.tunables = options.tunables;
    this.checkAgent = options.checkAgent;
    this.measure = options.contextReport;
    this.watchHub = new WatchHub(this.store);
  }

  /**
   * This client as tenant `tenant` sees the sessions (DESIGN §5.3): it creates sessions of that
   * tenant, lists and sums only that tenant's, and every operation on another tenant's session
   * fails with SESSION_NOT_FOUND, as for a session that does not exist (persistence/tenants.ts).
   * One client per tenant, kept.
   */
  forTenant(tenant: string, onCrossTenant?: (attempt: CrossTenantAttempt) => void): SessionClient {
    if (this.tenant !== undefined) {
      if (tenant === this.tenant) return this;
      throw new SessionlogError(
        'INVALID_ARGUMENT',
        `a client of tenant ${this.tenant} cannot act for tenant ${tenant}`,
      );
    }
    let client = this.scoped.get(tenant);
    if (!client) {
      const options = onCrossTenant ? { ...this.options, onCrossTenant } : this.options;
      this.scoped.set(tenant, (client = new SessionClient(options, tenant)));
    }
    return client;
  }

  /**
   * Connects to the Temporal frontend at `address` (`host:port`) in `namespace` (default
   * `default`) and builds a client over `store`. The connection is the caller's to close:
   * `client.temporal.connection.close()`. `interceptors` are Temporal workflow-client
   * interceptors (tracing's, from src/telemetry).
   */
  static async connect(
    options: Omit<SessionClientOptions, 'temporal'> & {
      address: string;
      namespace?: string;
      interceptors?: WorkflowClientInterceptor[];
    },
  ): Promise<SessionClient> {
    const { address, namespace, interceptors, ...rest } = options;
    const connection = await Connection.connect({ address });
    const temporal = new Client({
      connection,
      namespace: namespace ?? 'default',
      ...(interceptors ? { interceptors: { workflow: interceptors } } : {}),
    });
    return new SessionClient({ ...rest, temporal });
  }

  /** The largest message text this client's sessions accept (UTF-8 bytes). */
  get maxMessageBytes(): number {
    return this.tunables?.maxMessageBytes ?? DEFAULT_TUNABLES.maxMessageBytes;
  }

  // ---- sessions -----------------------------------------------------------------------------

  /**
   * Creates a new session (its header, then its workflow) and returns its header.
   *
   * @param options.sessionId the id to use; a new UUID when omitted.
   * @param options.agent the session's model, system prompt and tools; unset fields fall back
   *   to the worker's `agent`.
   * @throws SessionlogError `SESSION_ALREADY_EXISTS` for a taken id, `UNKNOWN_MODEL` for a model
   *   the catalogue does not know, `SESSION_ERASED` for an id erased within the tombstone period.
   */
  async create(options: { sessionId?: string; agent?: AgentSpec; budget?: Budget } = {}): Promise<SessionHeader> {
    const sessionId = options.sessionId ?? randomUUID();
    assertSessionId(sessionId);
    if (options.agent) this.checkAgent?.(options.agent);
    if (options.budget !== undefined) assertBudget(options.budget);
    const header = newSessionHeader({
      id: sessionId,
      createdAt: Date.now(),
      ...(options.agent ? { agent: options.agent } : {}),
    });
    if (await this.store.exists(sessionId)) {
      throw new SessionlogError(
        'SESSION_ALREADY_EXISTS',
        `session ${sessionId} already exists; pick another id or use the existing session`,
      );
    }
    // Creating the header first makes a taken id a clean conflict even when two callers race.
    await this.store.create(header);
    await this.startWorkflow(sessionId);
    const budget = options.budget ?? this.options.tenantBudgets?.[this.tenant ?? DEFAULT_TENANT];
    if (budget !== undefined) await this.setBudget(sessionId, budget);
    return this.store.header(sessionId);
  }

  /**
   * Makes sure the session exists and its workflow runs: creates it (header, then workflow)
   * when it is new; an existing session keeps its header. Idempotent.
   */
  async start(
    options: { sessionId?: string; agent?: AgentSpec } = {},
  ): Promise<{ sessionId: string; header: SessionHeader }> {
    const sessionId = options.sessionId ?? randomUUID();
    const header = await this.ensureSession(sessionId, options.agent);
    await this.startWorkflow(sessionId);
    return { sessionId, header };
  }

  /** Whether the store holds the session. */
  async exists(sessionId: string): Promise<boolean> {
    assertSessionId(sessionId);
    return this.store.exists(sessionId);
  }

  /** The stored header. @throws SessionlogError `SESSION_NOT_FOUND`. */
  async header(sessionId: string): Promise<SessionHeader> {
    assertSessionId(sessionId);
    return this.store.header(sessionId);
  }

  /** Every stored session with its event count. */
  async list(): Promise<SessionSummary[]> {
    const headers = await this.store.list(this.scope);
    return Promise.all(headers.map(async (h) => ({ ...h, events: await this.store.nextSeq(h.id) })));
  }

  /** One session: its header, event count and, when its workflow runs, the live status. */
  async show(sessionId: string): Promise<{ header: SessionHeader; events: number; status: SessionStatus | null }> {
    const header = await this.header(sessionId);
    const events = await this.store.nextSeq(sessionId);
    return { header, events, status: await this.liveStatus(sessionId) };
  }

  // ---- messages -----------------------------------------------------------------------------

  /**
   * Sends a user message and waits for the turn that answers it (update-with-start: the
   * session's workflow is started if it is not running). Re-sending the same `id` never
   * produces a second answer. The answer is what the log says about that turn.
   *
   * The reply's tokens are in the log while the turn runs: read them with {@link follow}
   * (`assistant/chunk` events) started before this call.
   *
   * @param options.id idempotency key of the message (default: a new UUID).
   * @param options.tools function tools the caller runs, for the turn this message starts only
   *   (a message with tools never joins a running turn): the model sees them beside the worker's
   *   tools, and each call waits for {@link submitToolResult}, as an external tool's does.
   * @throws SessionlogError `EMPTY_MESSAGE`, `MESSAGE_TOO_LARGE`, `INVALID_MESSAGE`,
   *   `INVALID_ARGUMENT` (bad tools) or `SESSION_CLOSED` when the message is refused (it never
   *   reaches the log); `CORRUPT_LOG`, `LOG_BEHIND` or `LOG_AHEAD` (naming the session and seq)
   *   when the session's log stops it. While the store refuses writes the message waits (the
   *   status's `lastError` says so) and the turn is tried again, with backoff up to a minute.
   */
  async send(sessionId: string, text: string, options: MessageOptions = {}): Promise<Reply> {
    const checked = this.checkMessage(sessionId, text, options);
    await this.ensureSession(sessionId);
    const message = await this.deliver(sessionId, checked, options.ownTurn);
    let result: SendResult;
    try {
      result = await this.updateWithStart(sendUpdate, sessionId, { args: [message], updateId: message.id });
    } catch (error) {
      // Refused (or the session stopped): the message is never logged, and its entry goes too.
      // Anything else (Temporal unreachable, a timeout) may still be delivered: the entry stays.
      if (isSessionlogError(error) && error.code !== 'UNAVAILABLE')
        await this.store.inbox.remove(sessionId, [message.ref!.key]).catch(() => undefined);
      throw error;
    }
    // Logged by now: an entry a retried send wrote again is not left behind.
    await this.store.inbox.remove(sessionId, [message.ref!.key]).catch(() => undefined);
    return { ...result, ...(await this.replyText(sessionId, result)) };
  }

  /**
   * Queues a user message and returns at once (signal-with-start). The answer appears in the
   * log; see {@link follow}. The checks `send` makes before Temporal are made here too.
   *
   * @param options.id idempotency key of the message (default: a new UUID).
   * @param options.tools the caller's tools for the turn this message starts (as for {@link send}).
   * @param options.agent the model and/or instructions the session runs with from this turn on.
   * @param options.hints request options of the turn this message starts (session/turn-hints.ts).
   * @returns the message id.
   */
  async post(sessionId: string, text: string, options: MessageOptions = {}): Promise<{ id: string }> {
    const checked = this.checkMessage(sessionId, text, options);
    await this.ensureSession(sessionId);
    const message = await this.deliver(sessionId, checked, options.ownTurn);
    await this.temporal.workflow.signalWithStart(SESSION_WORKFLOW_TYPE, {
      ...this.startOptions(sessionId),
      signal: userMessageSignal,
      signalArgs: [message],
    });
    return { id: message.id };
  }

  // ---- reads --------------------------------------------------------------------------------

  /**
   * The workflow's live status (phase, turn, queue, last error…), from a query.
   *
   * @throws SessionlogError `SESSION_NOT_FOUND` when no run of the session's workflow is open.
   */
  async status(sessionId: string): Promise<SessionStatus> {
    if (this.tenant !== undefined) await this.requireSession(sessionId);
    try {
      return await this.handle(sessionId).query(statusQuery);
    } catch (error) {
      if (error instanceof WorkflowNotFoundError)
        throw new SessionlogError(
          'SESSION_NOT_FOUND',
          `session ${sessionId} has no running workflow; use resume to start one`,
        );
      throw error;
    }
  }

  /** Whether a run of the session's workflow is open (false when it finished or never started). */
  async isRunning(sessionId: string): Promise<boolean> {
    if (this.tenant !== undefined && !(await this.store.exists(sessionId))) return false;
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
  async transcript(sessionId: string): Promise<StoredEvent[]> {
    assertSessionId(sessionId);
    return (await this.store.readFrom(sessionId, 0)).filter(isAppendSurfaceEvent);
  }

  /**
   * Stored events from `fromSeq` on (default 0), at most `limit` of them (default all). Events
   * of types this build does not know are returned as they are.
   */
  async events(sessionId: string, fromSeq = 0, limit?: number): Promise<StoredEvent[]> {
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
  follow(sessionId: string, fromSeq = 0, signal?: AbortSignal): AsyncIterable<StoredEvent> {
    assertSessionId(sessionId);
    return this.watchHub.follow(sessionId, fromSeq, signal);
  }

  /** One summary per turn, folded from the log (the inspector's timeline); `last` keeps only the newest turns. */
  async turns(sessionId: string, last?: number): Promise<TurnsView> {
    assertSessionId(sessionId);
    return foldTurns(await this.store.readFrom(sessionId, 0), last);
  }

  /**
   * The session's cost ledger (issue 26): the provider's token usage and the logged cost of
   * every model reply and compaction summary, per turn, per model and in total; only calls
   * logged within `window` (epoch ms, `from` inclusive, `to` exclusive) when given.
   */
  async usage(sessionId: string, window: { from?: number; to?: number } = {}): Promise<UsageLedger> {
    assertSessionId(sessionId);
    return foldUsage(await this.store.readFrom(sessionId, 0), window);
  }

  /**
   * Usage summed across every stored session (per model and in total), for calls logged within
   * `window`. A session whose log cannot be read (damaged, erased since it was listed) is
   * skipped and named, so it does not hide the others.
   */
  async usageAcross(window: { from?: number; to?: number } = {}): Promise<{
    total: UsageTotals;
    byModel: Record<string, UsageTotals>;
    sessions: number;
    unreadable: string[];
  }> {
    const total = emptyTotals();
    const byModel: Record<string, UsageTotals> = {};
    let sessions = 0;
    const unreadable: string[] = [];
    for (const header of await this.store.list(this.scope)) {
      let ledger: UsageLedger;
      try {
        ledger = foldUsage(await this.store.readFrom(header.id, 0), window);
      } catch {
        unreadable.push(header.id);
        continue;
      }
      if (ledger.total.calls === 0) continue;
      sessions += 1;
      addTotals(total, ledger.total);
      for (const [model, totals] of Object.entries(ledger.byModel))
        addTotals((byModel[model] ??= emptyTotals()), totals);
    }
    return { total, byModel, sessions, unreadable };
  }

  /**
   * What this client's tenant's sessions spent in total, erased ones included, as the store
   * keeps it for the tenant's caps, and the caps (null: none). Null for a client of every tenant.
   */
  async tenantSpend(): Promise<{ spent: TenantSpend; caps: TenantCaps | null } | null> {
    if (this.tenant === undefined) return null;
    return { spent: await this.store.spend.tenant(this.tenant), caps: this.options.tenantCaps?.[this.tenant] ?? null };
  }

  /** Which logged events the next request carries, and what shadowed the others (the inspector's log-beside-surface view). */
  async surface(sessionId: string): Promise<SurfaceView> {
    assertSessionId(sessionId);
    return foldSurfaceView(await this.store.readFrom(sessionId, 0));
  }

  /**
   * A page of one of the session's artifacts (full tool output, spilled text), by the name in
   * its locator: characters `[offset, offset + limit)` and the total length.
   */
  async readArtifact(
    sessionId: string,
    name: string,
    offset: number,
    limit: number,
  ): Promise<{ locator: string; offset: number; text: string; total: number }> {
    assertSessionId(sessionId);
    const locator = `artifact:${sessionId}/${name}`;
    const page = await this.store.artifacts.read(sessionId, locator, offset, limit);
    return { locator, offset, text: page.text, total: page.total };
  }

  /** The stored next seq (= the number of events in the log). */
  async nextSeq(sessionId: string): Promise<number> {
    assertSessionId(sessionId);
    return this.store.nextSeq(sessionId);
  }

  /** Ids of the session's messages delivered and not logged yet (waiting in its inbox, oldest first). */
  async waitingMessages(sessionId: string): Promise<string[]> {
    assertSessionId(sessionId);
    const prefix = inboxKeys.message('');
    return (await this.store.inbox.list(sessionId))
      .filter((entry) => entry.key.startsWith(prefix))
      .map((entry) => entry.key.slice(prefix.length));
  }

  /**
   * The session's export: its header and every stored event, as `sessionlog sessions export`
   * writes them (JSONL: the header line, then one event per line).
   *
   * @throws SessionlogError `CORRUPT_LOG` when the stored log is refused (export salvages nothing; see {@link salvage}).
   */
  async export(sessionId: string): Promise<SessionExport> {
    assertSessionId(sessionId);
    const scan = await this.store.scan(sessionId);
    if (scan.headerProblem || !scan.header || (scan.problem && !scan.problem.torn)) {
      // Refused exactly as a read refuses it (CORRUPT_LOG / UNSUPPORTED_FORMAT, naming the seq).
      return { header: await this.store.header(sessionId), events: await this.store.readFrom(sessionId, 0) };
    }
    const torn = scan.problem?.torn ? { tornTail: { fromSeq: scan.problem.seq, reason: scan.problem.reason } } : {};
    return { header: scan.header, events: [...scan.events], ...torn };
  }

  /** Checks the stored log's invariants as stored (nothing is repaired); every problem with its seq. */
  async verify(sessionId: string): Promise<VerifyReport> {
    assertSessionId(sessionId);
    const scan = await this.store.scan(sessionId);
    const violations = scan.header ? verifyLog(scan.header, scan.events) : [];
    if (scan.headerProblem)
      violations.unshift({ seq: null, rule: 'stored-header', message: scan.headerProblem.reason });
    // A JSONL torn final write is no damage: reads ignore it and the next append removes it.
    if (scan.problem && !scan.problem.torn)
      violations.push({ seq: scan.problem.seq, rule: 'stored-record', message: scan.problem.reason });
    // Inputs written to the inbox whose message the log does not hold: their update or signal
    // may still come, or never will (the caller gave up); `erase` removes them.
    const inboxWaiting = inboxEntriesByLogged(await this.store.inbox.list(sessionId), scan.events).waiting;
    return { sessionId, events: scan.events.length, violations, inboxWaiting };
  }

  /**
   * What the session's next request costs, by kind, against its budget and window.
   *
   * @throws SessionlogError `INVALID_ARGUMENT` when this client was built without a `contextReport`.
   */
  async context(sessionId: string): Promise<ContextReport> {
    assertSessionId(sessionId);
    if (!this.measure)
      throw new SessionlogError(
        'INVALID_ARGUMENT',
        'this SessionClient has no token meter: build it with the contextReport option (the CLI and gateway do)',
      );
    return this.measure(await this.store.session(sessionId));
  }

  /**
   * Logs a note between turns: metadata of the session (replacing its earlier metadata) or, with
   * `metadata.messageId`, of the turn that answers that message; and user messages the model
   * gets with the next turn, without a turn answering them now (a conversation's initial items).
   * Waits until no turn or compaction runs, so it may take as long as the running turn; with
   * `atOnce`, answers at once instead (`applies: 'turn-end'`) and the note is logged when the
   * running turn is over, before the next one starts. Logged once per note id; starts the
   * session's workflow if it is not running.
   *
   * @returns the note's id, the log's head after it (with `applies: 'turn-end'`: before it), and
   *   when it applies.
   * @throws SessionlogError `SESSION_NOT_FOUND`, or `EMPTY_MESSAGE` / `MESSAGE_TOO_LARGE` /
   *   `INVALID_MESSAGE` / `INVALID_ARGUMENT` for what the session would not log.
   */
  async note(
    sessionId: string,
    note: {
      id?: string;
      metadata?: { values: Record<string, string>; messageId?: string };
      messages?: Array<{ id?: string; text: string }>;
      /** Caller-supplied history (session/supplied.ts): logged as it is, in caller turns. */
      history?: SuppliedItem[];
      /**
       * Seqs of surface nodes to hide (session/hide.ts): user messages and assistant messages
       * without tool calls. One off the surface already, or one that cannot be hidden, is left as it is.
       */
      hide?: number[];
    },
    options: { atOnce?: boolean } = {},
  ): Promise<{ id: string; headSeq: number; applies: 'now' | 'turn-end' }> {
    await this.requireSession(sessionId);
    const id = note.id ?? randomUUID();
    assertMessageId(id);
    if (note.metadata) assertNoteMetadata(note.metadata);
    if ((note.messages?.length ?? 0) > NOTE_LIMITS.messages)
      throw new SessionlogError('INVALID_ARGUMENT', `a note carries at most ${NOTE_LIMITS.messages} messages`);
    const messages = (note.messages ?? []).map((m) => {
      const checked = this.checkMessage(sessionId, m.text, m.id === undefined ? {} : { id: m.id });
      return { id: checked.id, text: checked.text };
    });
    if (note.history !== undefined) {
      const problem = suppliedHistoryProblem(note.history);
      if (problem) throw new SessionlogError('INVALID_ARGUMENT', problem);
    }
    if (note.hide !== undefined) {
      const problem = hideProblem(note.hide);
      if (problem) throw new SessionlogError('INVALID_ARGUMENT', problem);
    }
    const body: NoteBody = {
      ...(note.metadata ? { metadata: note.metadata } : {}),
      ...(messages.length > 0 ? { messages } : {}),
      ...(note.history ? { history: note.history } : {}),
      ...(note.hide ? { hide: note.hide } : {}),
    };
    const text = JSON.stringify(body);
    const limit = this.maxMessageBytes * NOTE_LIMITS.messages;
    if (Buffer.byteLength(text) > limit)
      throw new SessionlogError(
        'MESSAGE_TOO_LARGE',
        `the note is ${Buffer.byteLength(text)} bytes; the limit is ${limit}`,
      );
    const ref = await this.putInbox(sessionId, inboxKeys.note(id), text);
    const input: NoteInput = { id, ref };
    const logged = await this.updateWithStart(noteUpdate, sessionId, {
      args: options.atOnce ? [input, { atOnce: true }] : [input],
      updateId: `note/${id}`,
    });
    // Answered at once, the note is not logged yet: the workflow reads its inbox entry when it is.
    if (logged.applies !== 'turn-end') await this.store.inbox.remove(sessionId, [ref.key]).catch(() => undefined);
    return { id, headSeq: logged.headSeq, applies: logged.applies ?? 'now' };
  }

  // ---- spend caps (issue 26) ----------------------------------------------------------------

  /**
   * Sets the session's spend caps (session/budget.ts; `null` removes them), logged as
   * `session/budget`. Between turns it applies from the next model call; a turn paused on its
   * budget (status `paused`, reason `budget`) checks again at once and goes on if the new
   * budget has room. Answers at once either way: while a turn runs (or waits for an approval)
   * the change is logged when nothing runs any more, at the latest when that turn ends.
   *
   * @returns `applies`: `now` (logged; `headSeq` is after it) or `turn-end` (logged once the
   *   running turn is over; `headSeq` is the head before it).
   * @throws SessionlogError `SESSION_NOT_FOUND`, `INVALID_ARGUMENT` naming what is wrong with the budget.
   */
  async setBudget(
    sessionId: string,
    budget: Budget | null,
    options: { by?: string } = {},
  ): Promise<{ headSeq: number; applies: 'now' | 'turn-end' }> {
    await this.requireSession(sessionId);
    if (budget !== null) assertBudget(budget);
    if (options.by !== undefined && (typeof options.by !== 'string' || options.by.length > 256))
      throw new SessionlogError('INVALID_ARGUMENT', '`by` must be a string of at most 256 characters');
    const id = randomUUID();
    const input: NoteInput = { id, budget, ...(options.by !== undefined ? { by: options.by } : {}) };
    const logged = await this.updateWithStart(noteUpdate, sessionId, { args: [input], updateId: `budget/${id}` });
    // A worker of a build before budget changes answered at once answers once it is logged.
    return { headSeq: logged.headSeq, applies: logged.applies ?? 'now' };
  }

  /** The session's budget in force (null: none) and what its current (or last) turn and the whole session used. */
  async budget(sessionId: string): Promise<{ budget: Budget | null; used: { turn: BudgetUse; total: BudgetUse } }> {
    assertSessionId(sessionId);
    const view = (await this.store.session(sessionId)).budget;
    return { budget: view.budget, used: view.used(Date.now()) };
  }

  // ---- the transcript index (stateless clients, issue 24) ----------------------------------

  /** The session (branch) whose transcript equalled the one `digest` names, for callers of `scope`. */
  async findTranscript(scope: string, digest: string): Promise<TranscriptEntry | undefined> {
    return this.store.transcripts.get(scope, digest);
  }

  /** Records that `entry.sessionId`'s transcript at `entry.seq` is the one `digest` names, for callers of `scope`. */
  async recordTranscript(scope: string, digest: string, entry: TranscriptEntry): Promise<void> {
    await this.store.transcripts.put(scope, digest, entry);
  }

  // ---- tool calls waiting for answers (DESIGN §5.1) ------------------------------------------

  /**
   * Answers a tool call waiting for approval. Exactly one answer counts: a second answer (from
   * any client) returns the first decision. Works whether or not the session's workflow runs
   * (a new run re-enters the wait from the log).
   *
   * @throws SessionlogError `UNKNOWN_CALL` when the call is not waiting for approval.
   */
  async approve(sessionId: string, callId: string, answer: ApprovalAnswer): Promise<ApprovalResult> {
    await this.requireSession(sessionId);
    assertMessageId(callId);
    if (answer.decision !== 'approve' && answer.decision !== 'deny')
      throw new SessionlogError('INVALID_ARGUMENT', 'an approval decision is approve or deny');
    if (answer.reason !== undefined) assertMessageText(answer.reason, this.maxMessageBytes);
    if (answer.arguments !== undefined && (typeof answer.arguments !== 'string' || !isJsonObjectText(answer.arguments)))
      throw new SessionlogError('INVALID_ARGUMENT', 'edited arguments must be the text of a JSON object');
    if (answer.by !== undefined) assertMessageText(answer.by, 1024);
    await this.requireLoggedCall(sessionId, callId);
    const body: ApprovalBody = {
      ...(answer.reason !== undefined ? { reason: answer.reason } : {}),
      ...(answer.arguments !== undefined ? { arguments: answer.arguments } : {}),
      ...(answer.by !== undefined ? { by: answer.by } : {}),
    };
    const text = JSON.stringify(body);
    const ref = text === '{}' ? undefined : await this.putInbox(sessionId, inboxKeys.approval(callId, text), text);
    const result = await this.updateWithStart(approveUpdate, sessionId, {
      args: [
        {
          callId,
          decision: answer.decision,
          ...(answer.allowForSession ? { allowForSession: true } : {}),
          ...(ref ? { ref } : {}),
        },
      ],
    });
    if (ref) await this.store.inbox.remove(sessionId, [ref.key]).catch(() => undefined);
    if (result.reason !== undefined) return result;
    // The reason of the decision that counts is in the log (the workflow never holds it).
    const reason = (await this.loggedApproval(sessionId, callId))?.reason;
    return reason !== undefined ? { ...result, reason } : result;
  }

  /**
   * Posts the result of an external tool the caller ran; the turn waiting for it carries on.
   *
   * @throws SessionlogError `UNKNOWN_CALL` when the call is not waiting for a result,
   *   `ALREADY_ANSWERED` when its result was already posted, `MESSAGE_TOO_LARGE` for an output
   *   over the message limit.
   */
  async submitToolResult(
    sessionId: string,
    callId: string,
    output: string,
    options: { isError?: boolean; by?: string } = {},
  ): Promise<ToolResultAck> {
    await this.requireSession(sessionId);
    assertMessageId(callId);
    if (typeof output !== 'string' || !isWellFormed(output))
      throw new SessionlogError('INVALID_MESSAGE', 'a tool result output must be well-formed text');
    if (Buffer.byteLength(output, 'utf8') > this.maxMessageBytes)
      throw new SessionlogError(
        'MESSAGE_TOO_LARGE',
        `tool output is ${Buffer.byteLength(output, 'utf8')} bytes; the limit is ${this.maxMessageBytes}`,
      );
    if (options.by !== undefined) assertMessageText(options.by, 1024);
    await this.requireLoggedCall(sessionId, callId);
    const body: ToolResultBody = { output, ...(options.by !== undefined ? { by: options.by } : {}) };
    const text = JSON.stringify(body);
    const ref = await this.putInbox(sessionId, inboxKeys.toolResult(callId, text), text);
    const ack = await this.updateWithStart(toolResultUpdate, sessionId, {
      args: [{ callId, ref, ...(options.isError ? { isError: true } : {}) }],
    });
    await this.store.inbox.remove(sessionId, [ref.key]).catch(() => undefined);
    return ack;
  }

  /**
   * Refuses at once an answer to a call the log has never held. The workflow cannot tell while
   * a model step runs (the step logs its calls before its activity returns, so a caller
   * following the log may answer one the run has not heard of yet) and would hold the answer
   * until the step ends; every call a caller can know of is in the log by then.
   */
  private async requireLoggedCall(sessionId: string, callId: string): Promise<void> {
    const { events } = await this.store.session(sessionId);
    if (!events.some((event) => isEventOfType(event, 'tool/call') && event.data.callId === callId))
      throw new SessionlogError(
        'UNKNOWN_CALL',
        `no tool call ${callId} was made in session ${sessionId}: answer one its log shows waiting (GET /v1/approvals?status=pending)`,
      );
  }

  /** The logged approval answer of `callId`, newest first (read from the store). */
  private async loggedApproval(sessionId: string, callId: string): Promise<{ reason?: string } | undefined> {
    const { events } = await this.store.session(sessionId);
    for (let i = events.length - 1; i >= 0; i--) {
      const event = events[i]!;
      if (isEventOfType(event, 'tool/approval') && event.data.callId === callId) return event.data;
    }
    return undefined;
  }

  /**
   * Tool calls waiting for an answer (approval or an external result), across every stored
   * session (or one), read from the logs: session, call, tool, arguments, age and expiry.
   * Across sessions, one whose log cannot be read (damaged, from a newer version) or that is
   * gone since it was listed is left out: it does not hide the calls of the others.
   */
  async pendingApprovals(options: { sessionId?: string } = {}): Promise<PendingApproval[]> {
    const ids =
      options.sessionId !== undefined ? [options.sessionId] : (await this.store.list(this.scope)).map((h) => h.id);
    const now = Date.now();
    const pending: PendingApproval[] = [];
    for (const id of ids) {
      assertSessionId(id);
      let session: SessionView;
      try {
        session = await this.store.session(id);
      } catch (error) {
        if (options.sessionId === undefined && isSessionlogError(error) && UNREADABLE_LOG_CODES.has(error.code))
          continue;
        throw error;
      }
      for (const call of session.turns.pending.values()) {
        if (!waitsForAnswer(call)) continue;
        const request = session.eventAt(call.request.seq);
        if (request?.type !== 'tool/approval-request') continue;
        pending.push({
          sessionId: id,
          callId: call.callId,
          tool: call.name,
          kind: call.request.kind,
          arguments: request.data.arguments,
          turn: call.turn,
          step: call.step,
          requestedAt: request.time,
          ageMs: Math.max(0, now - request.time),
          expiresAt: call.request.expiresAt,
        });
      }
    }
    return pending;
  }

  // ---- commands -----------------------------------------------------------------------------

  /**
   * Aborts the running turn; the partial reply is logged as interrupted.
   *
   * @returns whether a cancel reached a running workflow (false when none runs).
   */
  async cancel(sessionId: string): Promise<boolean> {
    if (this.tenant !== undefined) await this.requireSession(sessionId);
    return this.signalIfRunning(sessionId, cancelSignal);
  }

  /**
   * Lets the workflow finish after the current turn. The log stays; `resume` or a new message
   * restarts it.
   *
   * @returns whether the request reached a running workflow.
   */
  async close(sessionId: string): Promise<boolean> {
    if (this.tenant !== undefined) await this.requireSession(sessionId);
    return this.signalIfRunning(sessionId, closeSignal);
  }

  /**
   * Runs a manual compaction: waits until the session is idle, summarises the older history
   * (the log keeps everything; the derived history shows the summary) and returns what it
   * shadowed. Starts the session's workflow if it is not running.
   *
   * With `atOnce`, a compaction asked for while a turn runs answers at once (`{applies:
   * 'turn-end'}`) and runs when the turn is over, before the next one starts.
   *
   * @returns the compaction's id, the shadowed seqs and the token counts before and after, or
   *   null when nothing was compacted (`status()` then reports why in `lastError`).
   * @throws SessionlogError `SESSION_NOT_FOUND` for a session the store does not hold (no workflow is started).
   */
  async compact(sessionId: string): Promise<CompactResult | null>;
  async compact(sessionId: string, options: { atOnce: true }): Promise<CompactResult | null | Deferred>;
  async compact(sessionId: string, options: { atOnce?: boolean } = {}): Promise<CompactResult | null | Deferred> {
    await this.requireSession(sessionId);
    return this.updateWithStart(compactUpdate, sessionId, { args: options.atOnce ? [{ atOnce: true }] : [] });
  }

  /**
   * Starts a new run for a session whose workflow is gone (terminated, reset, history lost):
   * the run repairs an interrupted turn from the log and carries on. No-op when one is running.
   *
   * @returns the run id of the new run, or of the run already open.
   * @throws SessionlogError `SESSION_NOT_FOUND` when the store has no such session.
   */
  async resume(sessionId: string): Promise<{ runId: string; started: boolean }> {
    await this.requireSession(sessionId);
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
   * `session/end-seed`; its header names the parent. The child's own workflow writes the seed.
   *
   * @throws SessionlogError `SESSION_NOT_FOUND` for an unknown parent, `SESSION_ALREADY_EXISTS`
   *   when the child id is taken, `INVALID_BOUNDARY` for a seq outside the parent's log and
   *   `OPEN_TURN` when `at` falls inside a turn.
   */
  async fork(
    sessionId: string,
    options: { childId?: string; at?: number } = {},
  ): Promise<{ sessionId: string; header: SessionHeader }> {
    await this.requireSession(sessionId);
    return this.seed(options.childId ?? randomUUID(), {
      kind: 'fork',
      parentId: sessionId,
      ...(options.at !== undefined ? { at: options.at } : {}),
    });
  }

  /**
   * Edits an earlier user message as a branch (issue 24): a new session forked just before the
   * message (before the turn it started), where `text` takes its place and starts a turn. The
   * session itself is never rewritten; its branches are listed by {@link branches}.
   *
   * @throws SessionlogError `INVALID_ARGUMENT` when `seq` is not a user's message.
   */
  async edit(sessionId: string, seq: number, text: string, options: { childId?: string } = {}): Promise<BranchResult> {
    await this.requireSession(sessionId);
    assertMessageText(text, this.maxMessageBytes);
    const events = await this.events(sessionId, 0);
    const event = events[seq];
    if (!event || !isEventOfType(event, 'user/message') || event.data.source.kind !== 'user')
      throw new SessionlogError(
        'INVALID_ARGUMENT',
        `seq ${seq} of session ${sessionId} is not a message the user sent`,
      );
    const start = turnStartBefore(events, seq);
    return this.branchWith(sessionId, start - 1, text, options.childId, start === seq ? undefined : events[start]);
  }

  /**
   * Regenerates the last turn's reply as a branch (issue 24): a new session forked just before
   * that turn, where its user message (with the turn's tools) starts the turn again.
   *
   * @throws SessionlogError `INVALID_ARGUMENT` when the session has no turn a user's message started.
   */
  async regenerate(sessionId: string, options: { childId?: string } = {}): Promise<BranchResult> {
    await this.requireSession(sessionId);
    const events = await this.events(sessionId, 0);
    for (let i = events.length - 1; i >= 0; i--) {
      const event = events[i]!;
      if (!isEventOfType(event, 'user/message') || event.data.source.kind !== 'user') continue;
      const start = turnStartBefore(events, i);
      if (start === i) continue;
      return this.branchWith(sessionId, start - 1, textOf(event.data.content), options.childId, events[start]);
    }
    throw new SessionlogError('INVALID_ARGUMENT', `session ${sessionId} has no turn started by a user's message`);
  }

  /** The sessions forked from this one (edits, regenerations, forks), oldest first, with where each left it. */
  async branches(sessionId: string): Promise<Array<{ sessionId: string; createdAt: number; forkedAt: number }>> {
    await this.requireSession(sessionId);
    return (await this.store.list(this.scope))
      .filter((header) => header.parentSession === sessionId)
      .sort((a, b) => a.createdAt - b.createdAt)
      .map((header) => ({ sessionId: header.id, createdAt: header.createdAt, forkedAt: (header.seedLength ?? 1) - 1 }));
  }

  private async branchWith(
    parentId: string,
    at: number,
    text: string,
    childId: string | undefined,
    turnStart: StoredEvent | undefined,
  ): Promise<BranchResult> {
    const id = childId ?? randomUUID();
    const child =
      at >= 0
        ? await this.fork(parentId, { childId: id, at })
        : await this.create({ sessionId: id }).then((header) => ({ sessionId: id, header }));
    const tools =
      turnStart && isEventOfType(turnStart, 'turn/start') && turnStart.data.tools ? turnStart.data.tools : undefined;
    const posted = await this.post(child.sessionId, text, tools ? { tools } : {});
    return { sessionId: child.sessionId, forkedFrom: parentId, forkedAt: at, messageId: posted.id };
  }

  /**
   * Salvages a damaged session (DESIGN §4.1): a new session seeded with the longest valid
   * prefix of the damaged log (a turn it leaves open is closed with the repair closers), its
   * header naming the parent and the first bad seq. The damaged session is left untouched.
   */
  async salvage(
    sessionId: string,
    options: { into?: string } = {},
  ): Promise<{ sessionId: string; header: SessionHeader }> {
    await this.requireSession(sessionId);
    return this.seed(options.into ?? randomUUID(), { kind: 'salvage', parentId: sessionId });
  }

  /**
   * Erases a session (DESIGN §4.2): terminates its workflow and deletes every run's history in
   * Temporal, then removes its events, header, artifacts, projection checkpoints, inbox entries
   * and data key from the store; without the key, whatever Temporal may still hold of it (sealed
   * with that key, DESIGN §5.2) cannot be read by anyone. The id is refused (`SESSION_ERASED`) for the store's tombstone period. Forks keep
   * their own data. Erasing twice is harmless: the second receipt lists nothing removed.
   */
  async erase(sessionId: string): Promise<EraseReceipt> {
    assertSessionId(sessionId);
    // Another tenant's session is refused before its workflow is touched (as for no session).
    if (this.tenant !== undefined && (await sessionOwner(this.options.store, this.tenant, sessionId)) === 'foreign') {
      this.options.onCrossTenant?.({ tenant: this.tenant, sessionId, operation: 'erase' });
      throw notFound(sessionId);
    }
    const temporal = await eraseWorkflows(this.temporal, workflowIdFor(sessionId));
    const store = await this.store.erase(sessionId, this.scope);
    // The key is destroyed: this process must not seal anything with its cached copy.
    for (const codec of this.temporal.options.loadedDataConverter.payloadCodecs)
      if (codec instanceof SessionPayloadCodec) codec.forget(sessionId);
    return { sessionId, store, temporal };
  }

  // ---- internals ----------------------------------------------------------------------------

  private checkMessage(sessionId: string, text: string, options: MessageOptions): { id: string } & MessageBody {
    assertSessionId(sessionId);
    assertMessageText(text, this.maxMessageBytes);
    const id = options.id ?? randomUUID();
    assertMessageId(id);
    const problem = options.tools === undefined ? undefined : turnToolsProblem(options.tools);
    if (problem) throw new SessionlogError('INVALID_ARGUMENT', problem);
    const { model, system } = options.agent ?? {};
    if (model !== undefined && (model.length === 0 || model.length > 200))
      throw new SessionlogError('INVALID_ARGUMENT', 'a model name is 1-200 characters');
    if (model !== undefined) this.checkAgent?.({ model });
    const hintsProblem = options.hints === undefined ? undefined : turnHintsProblem(options.hints);
    if (hintsProblem) throw new SessionlogError('INVALID_ARGUMENT', hintsProblem);
    const agent: AskedAgent = {
      ...(model !== undefined ? { model } : {}),
      ...(system !== undefined ? { system } : {}),
    };
    return {
      id,
      text,
      ...(options.tools ? { tools: options.tools } : {}),
      ...(Object.keys(agent).length > 0 ? { agent } : {}),
      ...(options.hints ? { hints: options.hints } : {}),
    };
  }

  /**
   * Writes `body` to the session's inbox under `key`, waiting out a store that refuses writes
   * for a while (UNAVAILABLE: a lock held, a failover) up to {@link INBOX_WRITE_WAIT_MS}.
   */
  private async putInbox(sessionId: string, key: string, body: string): Promise<InboxRef> {
    const deadline = Date.now() + INBOX_WRITE_WAIT_MS;
    for (let delay = 100; ; delay = Math.min(delay * 2, 2_000)) {
      try {
        return await this.store.inbox.put(sessionId, key, body);
      } catch (error) {
        if (!isSessionlogError(error) || error.code !== 'UNAVAILABLE' || Date.now() + delay > deadline) throw error;
        await new Promise((resolve) => setTimeout(resolve, delay));
      }
    }
  }

  /**
   * Writes a message to the session's inbox (DESIGN §5.2) and returns what crosses Temporal:
   * its id and the entry's reference. Writing it again (a retried send) changes nothing; another
   * text under an id still waiting there is INVALID_MESSAGE.
   */
  private async deliver(sessionId: string, message: { id: string } & MessageBody, ownTurn = false): Promise<UserInput> {
    const body: MessageBody = {
      text: message.text,
      ...(message.tools ? { tools: message.tools } : {}),
      ...(message.agent ? { agent: message.agent } : {}),
      ...(message.hints ? { hints: message.hints } : {}),
    };
    const ref = await this.putInbox(sessionId, inboxKeys.message(message.id), JSON.stringify(body));
    // A message with its own tools or request options (or asking for it) starts its own turn.
    return { id: message.id, ref, ...(message.tools || message.hints || ownTurn ? { withTools: true as const } : {}) };
  }

  private async requireSession(sessionId: string): Promise<void> {
    assertSessionId(sessionId);
    if (!(await this.store.exists(sessionId))) {
      throw new SessionlogError(
        'SESSION_NOT_FOUND',
        `session ${sessionId} does not exist; create it first (POST /v1/sessions or SessionClient.create)`,
      );
    }
  }

  /**
   * Registers the session's header in the store if it is new, so reads (events, follow) work
   * as soon as a command returns. Header metadata only: log events are written by the workflow.
   */
  private async ensureSession(sessionId: string, agent?: AgentSpec): Promise<SessionHeader> {
    assertSessionId(sessionId);
    if (await this.store.exists(sessionId)) return this.store.header(sessionId);
    if (agent) this.checkAgent?.(agent);
    const header = newSessionHeader({ id: sessionId, createdAt: Date.now(), ...(agent ? { agent } : {}) });
    try {
      await this.store.create(header);
    } catch (error) {
      // Another client created it concurrently: use the stored header.
      if (!isSessionlogError(error, 'SESSION_ALREADY_EXISTS')) throw error;
    }
    return this.store.header(sessionId);
  }

  private async seed(childId: string, seed: SeedSpec): Promise<{ sessionId: string; header: SessionHeader }> {
    assertSessionId(childId);
    // Any tenant's session takes the id (ids are global): the workflow of another tenant's is never reached.
    if (await this.options.store.exists(childId)) {
      throw new SessionlogError(
        'SESSION_ALREADY_EXISTS',
        `session ${childId} already exists; pick another id for the new session`,
      );
    }
    await this.updateWithStart(openedUpdate, childId, { args: [], seed });
    return { sessionId: childId, header: await this.store.header(childId) };
  }

  private async liveStatus(sessionId: string): Promise<SessionStatus | null> {
    if (!(await this.isRunning(sessionId))) return null;
    try {
      return await this.status(sessionId);
    } catch (error) {
      // The run ended between the two calls: report it as not running.
      if (isSessionlogError(error, 'SESSION_NOT_FOUND')) return null;
      throw error;
    }
  }

  private async signalIfRunning(sessionId: string, signal: typeof cancelSignal | typeof closeSignal): Promise<boolean> {
    await this.requireSession(sessionId);
    if (!(await this.isRunning(sessionId))) return false;
    try {
      await this.handle(sessionId).signal(signal);
      return true;
    } catch (error) {
      // The run ended between the two calls.
      if (error instanceof WorkflowNotFoundError) return false;
      throw error;
    }
  }

  private startWorkflow(sessionId: string) {
    return this.temporal.workflow.start(SESSION_WORKFLOW_TYPE, {
      ...this.startOptions(sessionId),
      workflowIdConflictPolicy: 'USE_EXISTING',
    });
  }

  private startOptions(sessionId: string, seed?: SeedSpec) {
    const input: SessionWorkflowInput = {
      sessionId,
      ...(this.tunables ? { tunables: this.tunables } : {}),
      ...(seed ? { seed } : {}),
    };
    return { workflowId: workflowIdFor(sessionId), taskQueue: this.taskQueue, args: [input] as [SessionWorkflowInput] };
  }

  /**
   * Sends `update` to the session's workflow, starting the workflow if it is not running. A
   * refusal becomes a SessionlogError; a workflow task being retried is waited out.
   */
  private updateWithStart<Ret, Args extends unknown[]>(
    update: UpdateDefinition<Ret, Args>,
    sessionId: string,
    options: { args: Args; updateId?: string; seed?: SeedSpec },
  ): Promise<Ret> {
    const { args, updateId, seed } = options;
    return retryWhileTaskFails(async () => {
      try {
        return await this.temporal.workflow.executeUpdateWithStart(update, {
          args,
          ...(updateId !== undefined ? { updateId } : {}),
          startWorkflowOperation: this.startOperation(sessionId, seed),
        });
      } catch (error) {
        throw refusal(error);
      }
    });
  }

  /** A start-if-needed operation; single-use, so each attempt makes its own. */
  private startOperation(sessionId: string, seed?: SeedSpec): WithStartWorkflowOperation<typeof sessionWorkflow> {
    return new WithStartWorkflowOperation<typeof sessionWorkflow>(SESSION_WORKFLOW_TYPE, {
      ...this.startOptions(sessionId, seed),
      workflowIdConflictPolicy: 'USE_EXISTING',
    });
  }

  private handle(sessionId: string): WorkflowHandle<typeof sessionWorkflow> {
    assertSessionId(sessionId);
    return this.temporal.workflow.getHandle<typeof sessionWorkflow>(workflowIdFor(sessionId));
  }

  /** The text of the turn's final assistant message, as logged. */
  /** The reply of the turn `result` names, read from the log: its text, and why it failed if it did. */
  private async replyText(
    sessionId: string,
    result: SendResult,
  ): Promise<{ text: string; messageId: string; error?: { code: string; message: string } }> {
    const session = await this.store.session(sessionId);
    const record = session.turns.turns.get(result.turn);
    const end = record?.endSeq === undefined ? undefined : session.eventAt(record.endSeq);
    const error =
      end?.type === 'turn/end' && end.data.reason.kind === 'error'
        ? { error: { code: end.data.reason.error.code, message: end.data.reason.error.message } }
        : {};
    const seq = result.replySeq ?? record?.replySeq ?? null;
    const event = seq === null ? undefined : session.eventAt(seq);
    if (event?.type !== 'assistant/message') return { text: '', messageId: '', ...error };
    return { text: textOf(event.data.message.content), messageId: event.data.message.id, ...error };
  }
}

/** The seq of the `turn/start` of the turn `seq` is logged in, or `seq` itself when it is outside a turn. */
function turnStartBefore(events: readonly StoredEvent[], seq: number): number {
  for (let i = seq - 1; i >= 0; i--) {
    const type = events[i]!.type;
    if (type === 'turn/end') return seq;
    if (type === 'turn/start') return i;
  }
  return seq;
}
