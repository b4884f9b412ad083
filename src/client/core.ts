/**
 * What the concerns of `SessionClient` share (session-client.ts): the Temporal client with the
 * session codec, the (tenant-scoped) store, the client's options, and the few steps every
 * concern takes: require a session, write to its inbox, send its workflow an update (starting
 * it if needed), address its workflow.
 */
import { ApplicationFailure, type UpdateDefinition } from '@temporalio/common';
import { Client, WithStartWorkflowOperation, WorkflowUpdateFailedError, type WorkflowHandle } from '@temporalio/client';
import { ALL_TENANTS, tenantScope, type InboxRef, type SessionStore, type TenantScope } from '../persistence/store.js';
import { scopeStore } from '../persistence/tenants.js';
import {
  CALLER_VISIBLE_CODES,
  DEFAULT_MAX_MEDIA_BYTES,
  SessionlogError,
  isSessionErrorCode,
  isSessionlogError,
  type AgentSpec,
  type ContextReport,
  type SessionView,
} from '../session/index.js';
import {
  DEFAULT_TASK_QUEUE,
  DEFAULT_TUNABLES,
  SESSION_WORKFLOW_TYPE,
  workflowIdFor,
  type SeedSpec,
  type SessionTunables,
  type SessionWorkflowInput,
} from '../workflows/api.js';
import type { sessionWorkflow } from '../workflows/session-workflow.js';
import { assertSessionId } from './inputs.js';
import { SessionPayloadCodec } from './session-codec.js';
import type { SessionClientOptions } from './session-client.js';
import { WatchHub } from './watch-hub.js';

/** How long a command waits for a store that refuses writes before it fails with UNAVAILABLE (ms). */
const INBOX_WRITE_WAIT_MS = 30_000;

/**
 * How long an update waits while the server refuses it because the session's workflow task is
 * being retried (a worker crashed mid-task: the task times out, and a replacement worker must
 * start and replay it; on a loaded host, with repeated crashes, that takes well over 30 s).
 */
const TASK_FAILED_WAIT_MS = 120_000;

/** The state one `SessionClient` (one tenant's, or every tenant's) works over, and its shared steps. */
export class ClientCore {
  /** The Temporal client commands go through (sealing session payloads). */
  readonly temporal: Client;
  /** The store reads are served from: the tenant's view of it for a tenant's client. */
  readonly store: SessionStore;
  readonly taskQueue: string;
  readonly tunables: Partial<SessionTunables> | undefined;
  readonly checkAgent: ((agent: AgentSpec) => void) | undefined;
  readonly measure: ((session: SessionView) => ContextReport) | undefined;
  /** Live tails: one store watch per session shared by all of this client's followers. */
  readonly watchHub: WatchHub;
  /** The tenant the client is scoped to; undefined: every tenant. */
  readonly tenant: string | undefined;
  /** What `list` and `erase` reach in the store: the tenant's sessions, or every tenant's. */
  readonly scope: TenantScope;
  /** The options the client was built with (`options.store` is the unscoped store). */
  readonly options: SessionClientOptions;

  constructor(options: SessionClientOptions, tenant: string | undefined) {
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

  /** The largest message text this client's sessions accept (UTF-8 bytes). */
  get maxMessageBytes(): number {
    return this.tunables?.maxMessageBytes ?? DEFAULT_TUNABLES.maxMessageBytes;
  }

  /** The largest medium (image or file) a message or an upload may hold, in bytes (SESSIONLOG_MAX_MEDIA_BYTES). */
  get maxMediaBytes(): number {
    return this.options.media?.maxBytes ?? DEFAULT_MAX_MEDIA_BYTES;
  }

  /** Whether an http(s) image URL is fetched once and stored rather than kept as a URL (SESSIONLOG_FETCH_IMAGE_URLS). */
  get fetchImageUrls(): boolean {
    return this.options.media?.fetchImageUrls ?? false;
  }

  async requireSession(sessionId: string): Promise<void> {
    assertSessionId(sessionId);
    if (!(await this.store.exists(sessionId))) {
      throw new SessionlogError(
        'SESSION_NOT_FOUND',
        `session ${sessionId} does not exist; create it first (POST /v1/sessions or SessionClient.create)`,
      );
    }
  }

  /**
   * Writes `body` to the session's inbox under `key`, waiting out a store that refuses writes
   * for a while (UNAVAILABLE: a lock held, a failover) up to {@link INBOX_WRITE_WAIT_MS}.
   */
  async putInbox(sessionId: string, key: string, body: string): Promise<InboxRef> {
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

  startOptions(sessionId: string, seed?: SeedSpec) {
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
  updateWithStart<Ret, Args extends unknown[]>(
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

  handle(sessionId: string): WorkflowHandle<typeof sessionWorkflow> {
    assertSessionId(sessionId);
    return this.temporal.workflow.getHandle<typeof sessionWorkflow>(workflowIdFor(sessionId));
  }
}

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
 * Retries `fn` while the server refuses an update because the workflow task is being retried.
 * Safe: a refused update was never accepted, and the message id (or the approval's one answer)
 * makes a repeat harmless. Bounded by {@link TASK_FAILED_WAIT_MS}.
 */
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
