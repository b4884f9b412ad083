/**
 * `SessionClient`: everything a backend service or an operator does with sessions (DESIGN §2,
 * §8). Commands go through Temporal (the session's workflow is the only writer of its log);
 * reads come straight from the store. The gateway and the CLI reach sessions only through it.
 *
 * Composition: this file is the public API, a facade. Each method keeps its doc comment here
 * and is one call into the module of its concern, a function over the client's shared
 * {@link ClientCore} (core.ts: the store, the Temporal client, the options, update-with-start,
 * inbox writes): reads.ts (headers, listings, the log and its folds, status), commands.ts
 * (create, messages, notes, budgets, cancel, close, compact, resume), approvals.ts (answers to
 * waiting tool calls), lineage.ts (forks, edits, regenerations, branches, salvage) and erase.ts.
 * The types of the API are declared here too.
 */
import { Client, Connection, type WorkflowClientInterceptor } from '@temporalio/client';
import type { StoreEraseReceipt, SessionStore, TranscriptEntry } from '../persistence/store.js';
import type { CrossTenantAttempt } from '../persistence/tenants.js';
import type { TenantSpend } from '../persistence/spend.js';
import {
  SessionlogError,
  type AgentSpec,
  type AskedAgent,
  type Budget,
  type BudgetUse,
  type ContextReport,
  type Message,
  type SessionHeader,
  type SessionView,
  type StoredEvent,
  type SurfaceView,
  type TenantCaps,
  type ToolSchema,
  type TurnHints,
  type TurnsView,
  type UsageLedger,
  type UsageTotals,
  type UserPart,
  type Violation,
  type MediaType,
  type StoredMedia,
} from '../session/index.js';
import type {
  ApprovalResult,
  CompactResult,
  Deferred,
  SendResult,
  SessionStatus,
  SessionTunables,
  ToolResultAck,
} from '../workflows/api.js';
import * as approvals from './approvals.js';
import * as commands from './commands.js';
import type { SessionNote } from './commands.js';
import { ClientCore } from './core.js';
import { eraseSession, type TemporalEraseReceipt } from './erase.js';
import * as lineage from './lineage.js';
import * as media from './media.js';
import * as reads from './reads.js';
import type { WatchHub } from './watch-hub.js';

export type { CrossTenantAttempt };

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
  /**
   * Checks that the model a message with media goes to takes them (issue 50): called with the
   * model the message asks for, else the session's own (its header's; undefined: the worker's
   * default), and the message's parts; throws SessionlogError `MEDIA_NOT_SUPPORTED` naming the part
   * (compose.ts `mediaCheck`). Without it every medium is accepted (a model that cannot take one
   * gets a text stand-in at request time).
   */
  checkMedia?: (model: string | undefined, parts: readonly { type: string }[]) => void;
  /** Measures a session's next request by kind; what {@link SessionClient.context} answers with. */
  contextReport?: (session: SessionView) => ContextReport;
  /** The budget a new session of each tenant gets when its create names none (SESSIONLOG_TENANT_BUDGETS). */
  tenantBudgets?: Readonly<Record<string, Budget>>;
  /** The caps on what all of a tenant's sessions spend together (SESSIONLOG_TENANT_CAPS): shown beside its spend. */
  tenantCaps?: Readonly<Record<string, TenantCaps>>;
  /** Told of each refused attempt on another tenant's session by a client of {@link SessionClient.forTenant}. */
  onCrossTenant?: (attempt: CrossTenantAttempt) => void;
  /**
   * Media in messages (issue 50): the largest medium in bytes (default 20 MiB,
   * SESSIONLOG_MAX_MEDIA_BYTES), and whether an http(s) image URL is fetched once and stored
   * (default false: it stays a URL the provider is given; SESSIONLOG_FETCH_IMAGE_URLS). A fetch
   * refuses hosts with private, loopback or link-local addresses.
   */
  media?: { maxBytes?: number; fetchImageUrls?: boolean };
};

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
  /**
   * The message's parts, with media (issue 50; session/media.ts `UserPart`): text, images (bytes,
   * base64, a data: or http(s) URL, or an uploaded medium's locator) and files (PDF, plain text).
   * With parts, `text` is `''` or the parts' text joined (or, when no part is text, the message's
   * first text). Every part is checked before anything is stored; an error names the part
   * (`error.part`, message `content[i]: …`).
   */
  content?: UserPart[];
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
 * The result of {@link SessionClient.verify}: every problem of the stored log, with its seq.
 * `inboxWaiting`: keys of inbox entries the log does not hold (DESIGN §5.2): inputs whose update
 * or signal has not arrived (yet); `erase` removes them.
 */
export type VerifyReport = { sessionId: string; events: number; violations: Violation[]; inboxWaiting: string[] };

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
  /** Live tails: one store watch per session shared by all of this client's followers. */
  readonly watchHub: WatchHub;
  /** The tenant this client is scoped to ({@link SessionClient.forTenant}); undefined: every tenant. */
  readonly tenant: string | undefined;
  /** What the concern modules share: the store, the Temporal client, the options (core.ts). */
  private readonly core: ClientCore;
  private readonly scoped = new Map<string, SessionClient>();

  /**
   * Builds a client over an existing Temporal client's connection; see {@link SessionClient.connect}
   * to connect as well. Its commands go through a Temporal client of its own on that connection,
   * with the same namespace, identity and interceptors, whose data converter seals every payload
   * of a session workflow with the session's key ({@link SessionPayloadCodec}).
   */
  constructor(options: SessionClientOptions, tenant?: string) {
    this.core = new ClientCore(options, tenant);
    this.temporal = this.core.temporal;
    this.store = this.core.store;
    this.taskQueue = this.core.taskQueue;
    this.watchHub = this.core.watchHub;
    this.tenant = tenant;
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
      const options = onCrossTenant ? { ...this.core.options, onCrossTenant } : this.core.options;
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
    return this.core.maxMessageBytes;
  }

  /** The largest medium (image or file) this client accepts in a message or an upload, in bytes. */
  get maxMediaBytes(): number {
    return this.core.maxMediaBytes;
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
    return commands.create(this.core, options);
  }

  /**
   * Makes sure the session exists and its workflow runs: creates it (header, then workflow)
   * when it is new; an existing session keeps its header. Idempotent.
   */
  async start(
    options: { sessionId?: string; agent?: AgentSpec } = {},
  ): Promise<{ sessionId: string; header: SessionHeader }> {
    return commands.start(this.core, options);
  }

  /** Whether the store holds the session. */
  async exists(sessionId: string): Promise<boolean> {
    return reads.exists(this.core, sessionId);
  }

  /** The stored header. @throws SessionlogError `SESSION_NOT_FOUND`. */
  async header(sessionId: string): Promise<SessionHeader> {
    return reads.header(this.core, sessionId);
  }

  /** Every stored session with its event count. */
  async list(): Promise<SessionSummary[]> {
    return reads.list(this.core);
  }

  /** One session: its header, event count and, when its workflow runs, the live status. */
  async show(sessionId: string): Promise<{ header: SessionHeader; events: number; status: SessionStatus | null }> {
    return reads.show(this.core, sessionId);
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
   * @param options.content the message's parts with images and files ({@link MessageOptions.content}).
   * @throws SessionlogError `EMPTY_MESSAGE`, `MESSAGE_TOO_LARGE`, `INVALID_MESSAGE`,
   *   `INVALID_ARGUMENT` (bad tools) or `SESSION_CLOSED` when the message is refused (it never
   *   reaches the log); for a bad part `INVALID_MEDIA`, `MEDIA_TOO_LARGE`,
   *   `UNSUPPORTED_MEDIA_TYPE`, `ARTIFACT_FOREIGN` or `ARTIFACT_NOT_FOUND` naming it (`error.part`)
   *   with nothing stored; `CORRUPT_LOG`, `LOG_BEHIND` or `LOG_AHEAD` (naming the session and seq)
   *   when the session's log stops it. While the store refuses writes the message waits (the
   *   status's `lastError` says so) and the turn is tried again, with backoff up to a minute.
   */
  async send(sessionId: string, text: string, options: MessageOptions = {}): Promise<Reply> {
    return commands.send(this.core, sessionId, text, options);
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
    return commands.post(this.core, sessionId, text, options);
  }

  /**
   * Checks and stores a medium in the session (issue 50; creating the session's header if it is
   * new), content-addressed: the same bytes uploaded twice are stored once. Send it in a message
   * as `{type: 'image' | 'file', artifact: locator}`.
   *
   * @throws SessionlogError `INVALID_MEDIA` (the bytes are not of the declared type, an image is
   *   cut short, bad base64), `MEDIA_TOO_LARGE`, `UNSUPPORTED_MEDIA_TYPE`; nothing is stored.
   */
  async uploadMedia(
    sessionId: string,
    upload: { data: Uint8Array | string; mediaType: string; filename?: string },
  ): Promise<StoredMedia> {
    return commands.upload(this.core, sessionId, upload);
  }

  /**
   * A medium the session stored (a locator from a message's image or file block, or an upload):
   * its bytes and type.
   *
   * @throws SessionlogError `ARTIFACT_FOREIGN` for another session's locator, `ARTIFACT_NOT_FOUND`
   *   for an unknown one, `SESSION_NOT_FOUND`.
   */
  async readMedia(sessionId: string, locator: string): Promise<{ bytes: Uint8Array; mediaType: MediaType }> {
    return media.readMedia(this.core, sessionId, locator);
  }

  // ---- reads --------------------------------------------------------------------------------

  /**
   * The workflow's live status (phase, turn, queue, last error…), from a query.
   *
   * @throws SessionlogError `SESSION_NOT_FOUND` when no run of the session's workflow is open.
   */
  async status(sessionId: string): Promise<SessionStatus> {
    return reads.status(this.core, sessionId);
  }

  /** Whether a run of the session's workflow is open (false when it finished or never started). */
  async isRunning(sessionId: string): Promise<boolean> {
    return reads.isRunning(this.core, sessionId);
  }

  /**
   * The derived model history: the messages the model would be sent next, with compacted and
   * pruned ranges replaced as the log says. Read from the store through the projection cache.
   */
  async history(sessionId: string): Promise<Message[]> {
    return reads.history(this.core, sessionId);
  }

  /**
   * The human transcript: every user, assistant and tool message event as it was appended,
   * in log order, including what compaction later shadowed in the derived history.
   */
  async transcript(sessionId: string): Promise<StoredEvent[]> {
    return reads.transcript(this.core, sessionId);
  }

  /**
   * Stored events from `fromSeq` on (default 0), at most `limit` of them (default all). Events
   * of types this build does not know are returned as they are.
   */
  async events(sessionId: string, fromSeq = 0, limit?: number): Promise<StoredEvent[]> {
    return reads.events(this.core, sessionId, fromSeq, limit);
  }

  /**
   * A live tail of the log: stored events from `fromSeq`, then each new one as it is appended,
   * in seq order with none skipped. The iteration ends when `signal` aborts or the store
   * closes; without a signal it never ends on its own. To stream a reply, take
   * `store.nextSeq(sessionId)` before {@link send} and follow from there. All followers of a
   * session share one store watch (see {@link WatchHub}).
   */
  follow(sessionId: string, fromSeq = 0, signal?: AbortSignal): AsyncIterable<StoredEvent> {
    return reads.follow(this.core, sessionId, fromSeq, signal);
  }

  /** One summary per turn, folded from the log (the inspector's timeline); `last` keeps only the newest turns. */
  async turns(sessionId: string, last?: number): Promise<TurnsView> {
    return reads.turns(this.core, sessionId, last);
  }

  /**
   * The session's cost ledger (issue 26): the provider's token usage and the logged cost of
   * every model reply and compaction summary, per turn, per model and in total; only calls
   * logged within `window` (epoch ms, `from` inclusive, `to` exclusive) when given.
   */
  async usage(sessionId: string, window: { from?: number; to?: number } = {}): Promise<UsageLedger> {
    return reads.usage(this.core, sessionId, window);
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
    return reads.usageAcross(this.core, window);
  }

  /**
   * What this client's tenant's sessions spent in total, erased ones included, as the store
   * keeps it for the tenant's caps, and the caps (null: none). Null for a client of every tenant.
   */
  async tenantSpend(): Promise<{ spent: TenantSpend; caps: TenantCaps | null } | null> {
    return reads.tenantSpend(this.core);
  }

  /** Which logged events the next request carries, and what shadowed the others (the inspector's log-beside-surface view). */
  async surface(sessionId: string): Promise<SurfaceView> {
    return reads.surface(this.core, sessionId);
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
    return reads.readArtifact(this.core, sessionId, name, offset, limit);
  }

  /** The stored next seq (= the number of events in the log). */
  async nextSeq(sessionId: string): Promise<number> {
    return reads.nextSeq(this.core, sessionId);
  }

  /** Ids of the session's messages delivered and not logged yet (waiting in its inbox, oldest first). */
  async waitingMessages(sessionId: string): Promise<string[]> {
    return reads.waitingMessages(this.core, sessionId);
  }

  /**
   * The session's export: its header and every stored event, as `sessionlog sessions export`
   * writes them (JSONL: the header line, then one event per line).
   *
   * @throws SessionlogError `CORRUPT_LOG` when the stored log is refused (export salvages nothing; see {@link salvage}).
   */
  async export(sessionId: string): Promise<SessionExport> {
    return reads.exportSession(this.core, sessionId);
  }

  /** Checks the stored log's invariants as stored (nothing is repaired); every problem with its seq. */
  async verify(sessionId: string): Promise<VerifyReport> {
    return reads.verify(this.core, sessionId);
  }

  /**
   * What the session's next request costs, by kind, against its budget and window.
   *
   * @throws SessionlogError `INVALID_ARGUMENT` when this client was built without a `contextReport`.
   */
  async context(sessionId: string): Promise<ContextReport> {
    return reads.context(this.core, sessionId);
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
    note: SessionNote,
    options: { atOnce?: boolean } = {},
  ): Promise<{ id: string; headSeq: number; applies: 'now' | 'turn-end' }> {
    return commands.note(this.core, sessionId, note, options);
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
    return commands.setBudget(this.core, sessionId, budget, options);
  }

  /** The session's budget in force (null: none) and what its current (or last) turn and the whole session used. */
  async budget(sessionId: string): Promise<{ budget: Budget | null; used: { turn: BudgetUse; total: BudgetUse } }> {
    return reads.budget(this.core, sessionId);
  }

  // ---- the transcript index (stateless clients, issue 24) ----------------------------------

  /** The session (branch) whose transcript equalled the one `digest` names, for callers of `scope`. */
  async findTranscript(scope: string, digest: string): Promise<TranscriptEntry | undefined> {
    return reads.findTranscript(this.core, scope, digest);
  }

  /** Records that `entry.sessionId`'s transcript at `entry.seq` is the one `digest` names, for callers of `scope`. */
  async recordTranscript(scope: string, digest: string, entry: TranscriptEntry): Promise<void> {
    return reads.recordTranscript(this.core, scope, digest, entry);
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
    return approvals.approve(this.core, sessionId, callId, answer);
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
    return approvals.submitToolResult(this.core, sessionId, callId, output, options);
  }

  /**
   * Tool calls waiting for an answer (approval or an external result), across every stored
   * session (or one), read from the logs: session, call, tool, arguments, age and expiry.
   * Across sessions, one whose log cannot be read (damaged, from a newer version) or that is
   * gone since it was listed is left out: it does not hide the calls of the others.
   */
  async pendingApprovals(options: { sessionId?: string } = {}): Promise<PendingApproval[]> {
    return approvals.pendingApprovals(this.core, options);
  }

  // ---- commands -----------------------------------------------------------------------------

  /**
   * Aborts the running turn; the partial reply is logged as interrupted.
   *
   * @returns whether a cancel reached a running workflow (false when none runs).
   */
  async cancel(sessionId: string): Promise<boolean> {
    return commands.cancel(this.core, sessionId);
  }

  /**
   * Lets the workflow finish after the current turn. The log stays; `resume` or a new message
   * restarts it.
   *
   * @returns whether the request reached a running workflow.
   */
  async close(sessionId: string): Promise<boolean> {
    return commands.close(this.core, sessionId);
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
    return commands.compact(this.core, sessionId, options);
  }

  /**
   * Starts a new run for a session whose workflow is gone (terminated, reset, history lost):
   * the run repairs an interrupted turn from the log and carries on. No-op when one is running.
   *
   * @returns the run id of the new run, or of the run already open.
   * @throws SessionlogError `SESSION_NOT_FOUND` when the store has no such session.
   */
  async resume(sessionId: string): Promise<{ runId: string; started: boolean }> {
    return commands.resume(this.core, sessionId);
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
    return lineage.fork(this.core, sessionId, options);
  }

  /**
   * Edits an earlier user message as a branch (issue 24): a new session forked just before the
   * message (before the turn it started), where `text` takes its place and starts a turn. The
   * session itself is never rewritten; its branches are listed by {@link branches}.
   *
   * @throws SessionlogError `INVALID_ARGUMENT` when `seq` is not a user's message.
   */
  async edit(sessionId: string, seq: number, text: string, options: { childId?: string } = {}): Promise<BranchResult> {
    return lineage.edit(this.core, sessionId, seq, text, options);
  }

  /**
   * Regenerates the last turn's reply as a branch (issue 24): a new session forked just before
   * that turn, where its user message (with the turn's tools) starts the turn again.
   *
   * @throws SessionlogError `INVALID_ARGUMENT` when the session has no turn a user's message started.
   */
  async regenerate(sessionId: string, options: { childId?: string } = {}): Promise<BranchResult> {
    return lineage.regenerate(this.core, sessionId, options);
  }

  /** The sessions forked from this one (edits, regenerations, forks), oldest first, with where each left it. */
  async branches(sessionId: string): Promise<Array<{ sessionId: string; createdAt: number; forkedAt: number }>> {
    return lineage.branches(this.core, sessionId);
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
    return lineage.salvage(this.core, sessionId, options);
  }

  /**
   * Erases a session (DESIGN §4.2): terminates its workflow and deletes every run's history in
   * Temporal, then removes its events, header, artifacts, projection checkpoints, inbox entries
   * and data key from the store; without the key, whatever Temporal may still hold of it (sealed
   * with that key, DESIGN §5.2) cannot be read by anyone. The id is refused (`SESSION_ERASED`) for the store's tombstone period. Forks keep
   * their own data. Erasing twice is harmless: the second receipt lists nothing removed.
   */
  async erase(sessionId: string): Promise<EraseReceipt> {
    return eraseSession(this.core, sessionId);
  }
}
