/**
 * What `SessionClient` reads (session-client.ts documents each): headers, listings, the log and
 * what is folded from it, straight from the store; a session's live status from its workflow.
 */
import { WorkflowNotFoundError } from '@temporalio/client';
import { readDerivedHistory } from '../persistence/derived-history.js';
import { inboxEntriesByLogged, inboxKeys } from '../persistence/inbox-entries.js';
import type { TranscriptEntry } from '../persistence/store.js';
import type { TenantSpend } from '../persistence/spend.js';
import {
  SessionlogError,
  addTotals,
  emptyTotals,
  foldSurfaceView,
  foldTurns,
  foldUsage,
  isAppendSurfaceEvent,
  isSessionlogError,
  verifyLog,
  type Budget,
  type BudgetUse,
  type ContextReport,
  type Message,
  type SessionHeader,
  type StoredEvent,
  type SurfaceView,
  type TenantCaps,
  type TurnsView,
  type UsageLedger,
  type UsageTotals,
} from '../session/index.js';
import { statusQuery, type SessionStatus } from '../workflows/api.js';
import type { ClientCore } from './core.js';
import { assertSessionId } from './inputs.js';
import type { SessionExport, SessionSummary, VerifyReport } from './session-client.js';

export async function exists(core: ClientCore, sessionId: string): Promise<boolean> {
  assertSessionId(sessionId);
  return core.store.exists(sessionId);
}

export async function header(core: ClientCore, sessionId: string): Promise<SessionHeader> {
  assertSessionId(sessionId);
  return core.store.header(sessionId);
}

export async function list(core: ClientCore): Promise<SessionSummary[]> {
  const headers = await core.store.list(core.scope);
  return Promise.all(headers.map(async (h) => ({ ...h, events: await core.store.nextSeq(h.id) })));
}

export async function show(
  core: ClientCore,
  sessionId: string,
): Promise<{ header: SessionHeader; events: number; status: SessionStatus | null }> {
  const stored = await header(core, sessionId);
  const events = await core.store.nextSeq(sessionId);
  return { header: stored, events, status: await liveStatus(core, sessionId) };
}

/** The live status when the session's workflow runs; null when it does not. */
async function liveStatus(core: ClientCore, sessionId: string): Promise<SessionStatus | null> {
  if (!(await isRunning(core, sessionId))) return null;
  try {
    return await status(core, sessionId);
  } catch (error) {
    // The run ended between the two calls: report it as not running.
    if (isSessionlogError(error, 'SESSION_NOT_FOUND')) return null;
    throw error;
  }
}

export async function status(core: ClientCore, sessionId: string): Promise<SessionStatus> {
  if (core.tenant !== undefined) await core.requireSession(sessionId);
  try {
    return await core.handle(sessionId).query(statusQuery);
  } catch (error) {
    if (error instanceof WorkflowNotFoundError)
      throw new SessionlogError(
        'SESSION_NOT_FOUND',
        `session ${sessionId} has no running workflow; use resume to start one`,
      );
    throw error;
  }
}

export async function isRunning(core: ClientCore, sessionId: string): Promise<boolean> {
  if (core.tenant !== undefined && !(await core.store.exists(sessionId))) return false;
  try {
    const description = await core.handle(sessionId).describe();
    return description.status.name === 'RUNNING';
  } catch (error) {
    if (error instanceof WorkflowNotFoundError) return false;
    throw error;
  }
}

export async function history(core: ClientCore, sessionId: string): Promise<Message[]> {
  assertSessionId(sessionId);
  return (await readDerivedHistory(core.store, sessionId)).messages;
}

export async function transcript(core: ClientCore, sessionId: string): Promise<StoredEvent[]> {
  assertSessionId(sessionId);
  return (await core.store.readFrom(sessionId, 0)).filter(isAppendSurfaceEvent);
}

export async function events(core: ClientCore, sessionId: string, fromSeq = 0, limit?: number): Promise<StoredEvent[]> {
  assertSessionId(sessionId);
  return core.store.readFrom(sessionId, fromSeq, limit);
}

export function follow(
  core: ClientCore,
  sessionId: string,
  fromSeq = 0,
  signal?: AbortSignal,
): AsyncIterable<StoredEvent> {
  assertSessionId(sessionId);
  return core.watchHub.follow(sessionId, fromSeq, signal);
}

export async function turns(core: ClientCore, sessionId: string, last?: number): Promise<TurnsView> {
  assertSessionId(sessionId);
  return foldTurns(await core.store.readFrom(sessionId, 0), last);
}

export async function usage(
  core: ClientCore,
  sessionId: string,
  window: { from?: number; to?: number } = {},
): Promise<UsageLedger> {
  assertSessionId(sessionId);
  return foldUsage(await core.store.readFrom(sessionId, 0), window);
}

export async function usageAcross(
  core: ClientCore,
  window: { from?: number; to?: number } = {},
): Promise<{
  total: UsageTotals;
  byModel: Record<string, UsageTotals>;
  sessions: number;
  unreadable: string[];
}> {
  const total = emptyTotals();
  const byModel: Record<string, UsageTotals> = {};
  let sessions = 0;
  const unreadable: string[] = [];
  for (const header of await core.store.list(core.scope)) {
    let ledger: UsageLedger;
    try {
      ledger = foldUsage(await core.store.readFrom(header.id, 0), window);
    } catch {
      unreadable.push(header.id);
      continue;
    }
    if (ledger.total.calls === 0) continue;
    sessions += 1;
    addTotals(total, ledger.total);
    for (const [model, totals] of Object.entries(ledger.byModel)) addTotals((byModel[model] ??= emptyTotals()), totals);
  }
  return { total, byModel, sessions, unreadable };
}

export async function tenantSpend(core: ClientCore): Promise<{ spent: TenantSpend; caps: TenantCaps | null } | null> {
  if (core.tenant === undefined) return null;
  return { spent: await core.store.spend.tenant(core.tenant), caps: core.options.tenantCaps?.[core.tenant] ?? null };
}

export async function surface(core: ClientCore, sessionId: string): Promise<SurfaceView> {
  assertSessionId(sessionId);
  return foldSurfaceView(await core.store.readFrom(sessionId, 0));
}

export async function readArtifact(
  core: ClientCore,
  sessionId: string,
  name: string,
  offset: number,
  limit: number,
): Promise<{ locator: string; offset: number; text: string; total: number }> {
  assertSessionId(sessionId);
  const locator = `artifact:${sessionId}/${name}`;
  const page = await core.store.artifacts.read(sessionId, locator, offset, limit);
  return { locator, offset, text: page.text, total: page.total };
}

export async function nextSeq(core: ClientCore, sessionId: string): Promise<number> {
  assertSessionId(sessionId);
  return core.store.nextSeq(sessionId);
}

export async function waitingMessages(core: ClientCore, sessionId: string): Promise<string[]> {
  assertSessionId(sessionId);
  const prefix = inboxKeys.message('');
  return (await core.store.inbox.list(sessionId))
    .filter((entry) => entry.key.startsWith(prefix))
    .map((entry) => entry.key.slice(prefix.length));
}

/** `SessionClient.export` (`export` is a reserved word). */
export async function exportSession(core: ClientCore, sessionId: string): Promise<SessionExport> {
  assertSessionId(sessionId);
  const scan = await core.store.scan(sessionId);
  if (scan.headerProblem || !scan.header || (scan.problem && !scan.problem.torn)) {
    // Refused exactly as a read refuses it (CORRUPT_LOG / UNSUPPORTED_FORMAT, naming the seq).
    return { header: await core.store.header(sessionId), events: await core.store.readFrom(sessionId, 0) };
  }
  const torn = scan.problem?.torn ? { tornTail: { fromSeq: scan.problem.seq, reason: scan.problem.reason } } : {};
  return { header: scan.header, events: [...scan.events], ...torn };
}

export async function verify(core: ClientCore, sessionId: string): Promise<VerifyReport> {
  assertSessionId(sessionId);
  const scan = await core.store.scan(sessionId);
  const violations = scan.header ? verifyLog(scan.header, scan.events) : [];
  if (scan.headerProblem) violations.unshift({ seq: null, rule: 'stored-header', message: scan.headerProblem.reason });
  // A JSONL torn final write is no damage: reads ignore it and the next append removes it.
  if (scan.problem && !scan.problem.torn)
    violations.push({ seq: scan.problem.seq, rule: 'stored-record', message: scan.problem.reason });
  // Inputs written to the inbox whose message the log does not hold: their update or signal
  // may still come, or never will (the caller gave up); `erase` removes them.
  const inboxWaiting = inboxEntriesByLogged(await core.store.inbox.list(sessionId), scan.events).waiting;
  return { sessionId, events: scan.events.length, violations, inboxWaiting };
}

export async function context(core: ClientCore, sessionId: string): Promise<ContextReport> {
  assertSessionId(sessionId);
  if (!core.measure)
    throw new SessionlogError(
      'INVALID_ARGUMENT',
      'this SessionClient has no token meter: build it with the contextReport option (the CLI and gateway do)',
    );
  return core.measure(await core.store.session(sessionId));
}

export async function budget(
  core: ClientCore,
  sessionId: string,
): Promise<{ budget: Budget | null; used: { turn: BudgetUse; total: BudgetUse } }> {
  assertSessionId(sessionId);
  const view = (await core.store.session(sessionId)).budget;
  return { budget: view.budget, used: view.used(Date.now()) };
}

export async function findTranscript(
  core: ClientCore,
  scope: string,
  digest: string,
): Promise<TranscriptEntry | undefined> {
  return core.store.transcripts.get(scope, digest);
}

export async function recordTranscript(
  core: ClientCore,
  scope: string,
  digest: string,
  entry: TranscriptEntry,
): Promise<void> {
  await core.store.transcripts.put(scope, digest, entry);
}
