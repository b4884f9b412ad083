/** `sessionlog sessions …` and `send`: operations on stored sessions through SessionClient. */
import { createWriteStream } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { once } from 'node:events';
import type { SessionClient } from '../client/session-client.js';
import {
  SessionlogError,
  parseHeader,
  tenantOf,
  verifyLog,
  type StoredEvent,
  type Violation,
} from '../session/index.js';
import { clip, describeEvent, messageText, table } from './format.js';

export type Output = { json: boolean; write(text: string): void };

function print(out: Output, human: () => string, data: unknown): void {
  out.write(out.json ? `${JSON.stringify(data, null, 2)}\n` : `${human()}\n`);
}

export async function listSessions(client: SessionClient, out: Output): Promise<void> {
  const rows = await client.list();
  print(
    out,
    () =>
      rows.length === 0
        ? 'no sessions yet'
        : table(
            ['ID', 'TENANT', 'CREATED', 'EVENTS', 'PARENT'],
            rows.map((r) => [
              r.id,
              tenantOf(r),
              new Date(r.createdAt).toISOString(),
              String(r.events),
              r.parentSession ?? '',
            ]),
          ),
    rows,
  );
}

export async function showSession(client: SessionClient, id: string, out: Output): Promise<void> {
  const { header, events, status } = await client.show(id);
  print(
    out,
    () =>
      table(
        ['FIELD', 'VALUE'],
        [
          ['id', header.id],
          ['created', new Date(header.createdAt).toISOString()],
          ['events', String(events)],
          ['parent', header.parentSession ?? ''],
          ['workflow', status ? `${status.phase} (turn ${status.turn}, run ${status.runId})` : 'not running'],
          ['tokens', status?.tokens != null ? `${status.tokens} of ${status.contextWindow}` : ''],
          ['last error', status?.lastError ?? ''],
        ],
      ),
    { header, events, status },
  );
}

export async function showHistory(client: SessionClient, id: string, out: Output): Promise<void> {
  const messages = await client.history(id);
  print(
    out,
    () => messages.map((m) => `[${m.role}${m.source.kind === 'tool' ? ' (tool)' : ''}] ${messageText(m)}`).join('\n\n'),
    messages,
  );
}

export async function showEvents(
  client: SessionClient,
  id: string,
  out: Output,
  options: { from: number; follow: boolean; signal?: AbortSignal },
): Promise<void> {
  const render = (e: Awaited<ReturnType<SessionClient['events']>>[number]) =>
    out.json ? JSON.stringify(e) : `${String(e.seq).padStart(6)}  ${e.type.padEnd(18)} ${describeEvent(e)}`;
  if (!options.follow) {
    for (const e of await client.events(id, options.from)) out.write(`${render(e)}\n`);
    return;
  }
  for await (const e of client.follow(id, options.from, options.signal)) out.write(`${render(e)}\n`);
}

/**
 * Writes the JSONL export: the header line, then one event per line. A torn final batch left out
 * is reported on `warn` (standard error), so the export's own output stays the log.
 */
export async function exportSession(
  client: SessionClient,
  id: string,
  path: string | undefined,
  write: (text: string) => void,
  warn: (text: string) => void,
): Promise<void> {
  const { header, events, tornTail } = await client.export(id);
  if (tornTail)
    warn(
      `warning: session ${id}'s final batch, from seq ${tornTail.fromSeq}, was torn (written only in part: ${tornTail.reason}); the export holds seqs 0-${tornTail.fromSeq - 1} and leaves it out. If the session's workflow saw that batch written, it was damaged after it was committed and the session refuses its next message (CORRUPT_LOG); otherwise the next write removes it from the log.\n`,
    );
  const lines = [JSON.stringify({ type: 'session', ...header }), ...events.map((e) => JSON.stringify(e))];
  if (!path) {
    for (const line of lines) write(`${line}\n`);
    return;
  }
  const stream = createWriteStream(path, { flags: 'wx', mode: 0o600 });
  for (const line of lines) if (!stream.write(`${line}\n`)) await once(stream, 'drain');
  stream.end();
  await once(stream, 'finish');
}

function reportViolations(out: Output, events: number, violations: Violation[], inboxWaiting?: string[]): Violation[] {
  const waiting =
    inboxWaiting && inboxWaiting.length > 0
      ? `\n${inboxWaiting.length} inbox entr${inboxWaiting.length === 1 ? 'y' : 'ies'} not logged (sent, but no update or signal came; erase removes them): ${inboxWaiting.join(', ')}`
      : '';
  print(
    out,
    () =>
      (violations.length === 0
        ? `ok: ${events} events, seqs contiguous, turns balanced, tool calls paired, no open compaction`
        : table(
            ['SEQ', 'RULE', 'PROBLEM'],
            violations.map((v) => [v.seq === null ? '-' : String(v.seq), v.rule, v.message]),
          )) + waiting,
    { ok: violations.length === 0, events, violations, ...(inboxWaiting ? { inboxWaiting } : {}) },
  );
  return violations;
}

/** Verifies a stored session's log as stored (no repair); returns the violations. */
export async function verifySession(client: SessionClient, id: string, out: Output): Promise<Violation[]> {
  const report = await client.verify(id);
  return reportViolations(out, report.events, report.violations, report.inboxWaiting);
}

/** Prints what the session's next request costs, by kind, against its budget and window. */
export async function showContext(client: SessionClient, id: string, out: Output): Promise<void> {
  const c = await client.context(id);
  const pct = (n: number) => `${((n / c.budget) * 100).toFixed(1)}%`;
  print(
    out,
    () =>
      table(
        ['KIND', 'TOKENS'],
        [
          ['system', String(c.tokens.system)],
          ['tools', String(c.tokens.tools)],
          ['user', String(c.tokens.user)],
          ['assistant', String(c.tokens.assistant)],
          ['tool results', String(c.tokens.toolResults)],
          ['summaries', String(c.tokens.summaries)],
          ['total', `${c.tokens.total} (${c.baseline}), ${pct(c.tokens.total)} of the budget`],
          ['budget', `${c.budget} of a ${c.contextWindow}-token window (${c.model})`],
          ['compacts at', `${c.compactAt}`],
        ],
      ),
    c,
  );
}

/** Verifies an exported JSONL file (header line, then one event per line). */
export async function verifyExportFile(path: string, out: Output): Promise<Violation[]> {
  const lines = (await readFile(path, 'utf8')).split('\n').filter((line) => line.length > 0);
  if (lines.length === 0) throw new SessionlogError('INVALID_ARGUMENT', `${path} is empty; expected a header line`);
  const parse = (line: string, n: number): unknown => {
    try {
      return JSON.parse(line) as unknown;
    } catch (error) {
      throw new SessionlogError('CORRUPT_LOG', `${path} line ${n}: not JSON (${(error as Error).message})`);
    }
  };
  const { type, ...header } = parse(lines[0]!, 1) as { type?: unknown };
  if (type !== 'session') throw new SessionlogError('INVALID_ARGUMENT', `${path} line 1 is not a session header`);
  const parsed = parseHeader(header, path);
  const events = lines.slice(1).map((line, i) => parse(line, i + 2)) as StoredEvent[];
  return reportViolations(out, events.length, verifyLog(parsed, events));
}

export async function sendMessage(client: SessionClient, id: string, text: string, out: Output): Promise<void> {
  const reply = await client.send(id, text);
  print(
    out,
    () => (reply.outcome === 'completed' ? reply.text : `${reply.text}\n(turn ${reply.turn} ended: ${reply.outcome})`),
    reply,
  );
}

export async function forkSession(
  client: SessionClient,
  id: string,
  options: { at?: number; childId?: string },
  out: Output,
): Promise<void> {
  const child = await client.fork(id, {
    ...(options.at !== undefined ? { at: options.at } : {}),
    ...(options.childId ? { childId: options.childId } : {}),
  });
  print(out, () => `forked ${id} into ${child.sessionId} (${child.header.seedLength ?? 0} events)`, child);
}

export async function compactSession(client: SessionClient, id: string, out: Output): Promise<void> {
  const result = await client.compact(id);
  print(
    out,
    () =>
      result
        ? `compacted ${result.shadowedSeqs.length} history items: ~${result.tokensBefore} → ~${result.tokensAfter} tokens`
        : 'nothing to compact (or the summary would not be smaller)',
    result,
  );
}

export async function resumeSession(client: SessionClient, id: string, out: Output): Promise<void> {
  const result = await client.resume(id);
  print(
    out,
    () => (result.started ? `resumed ${id} (run ${result.runId})` : `${id} is already running (run ${result.runId})`),
    result,
  );
}

/** Parses a non-negative integer CLI argument or throws a clear error. */
export function seqArgument(value: string, name: string): number {
  if (!/^\d+$/.test(value))
    throw new SessionlogError(
      'INVALID_ARGUMENT',
      `${name} must be a non-negative integer, got ${JSON.stringify(clip(value, 20))}`,
    );
  return Number(value);
}

/** Lists tool calls waiting for an answer (approval or external result). */
export async function listApprovals(client: SessionClient, sessionId: string | undefined, out: Output): Promise<void> {
  const pending = await client.pendingApprovals(sessionId !== undefined ? { sessionId } : {});
  print(
    out,
    () =>
      pending.length === 0
        ? 'no tool calls are waiting for an answer'
        : table(
            ['SESSION', 'CALL', 'TOOL', 'KIND', 'ARGUMENTS', 'AGE', 'EXPIRES'],
            pending.map((p) => [
              p.sessionId,
              p.callId,
              p.tool,
              p.kind,
              clip(p.arguments, 60),
              `${Math.round(p.ageMs / 1000)}s`,
              new Date(p.expiresAt).toISOString(),
            ]),
          ),
    pending,
  );
}

/** Approves or denies a waiting tool call and prints the decision that counts. */
export async function answerApproval(
  client: SessionClient,
  sessionId: string,
  callId: string,
  answer: Parameters<SessionClient['approve']>[2],
  out: Output,
): Promise<void> {
  const result = await client.approve(sessionId, callId, answer);
  print(out, () => `${callId}: ${result.decision}${result.reason ? ` (${result.reason})` : ''}`, result);
}

/** Salvages a damaged session into a new one and says what it kept. */
export async function salvageSession(
  client: SessionClient,
  id: string,
  into: string | undefined,
  out: Output,
): Promise<void> {
  const salvaged = await client.salvage(id, into !== undefined ? { into } : {});
  const at = salvaged.header.salvagedAt;
  print(
    out,
    () =>
      `salvaged ${id} into ${salvaged.sessionId}: kept seqs 0-${(at?.firstBadSeq ?? 1) - 1}${at ? `; the log is damaged at seq ${at.firstBadSeq} (${at.reason})` : ''}`,
    salvaged,
  );
}

/** Erases a session and prints the receipt. */
export async function eraseSession(client: SessionClient, id: string, out: Output): Promise<void> {
  const receipt = await client.erase(id);
  const r = receipt.store.removed;
  print(
    out,
    () =>
      receipt.store.erased || receipt.temporal.deletedRuns > 0
        ? `erased ${id}: ${r.events} events, ${r.artifacts} artifacts, ${r.media} media, ${r.projectionCheckpoints} checkpoints, ${r.inboxEntries} inbox entries, ${r.transcriptEntries} transcript index entries, ${r.sessionKey ? 'its data key (what Temporal held of it can no longer be opened), ' : ''}${receipt.temporal.deletedRuns} workflow histories; the id is refused until ${new Date(receipt.store.tombstoneUntil).toISOString()}`
        : `${id}: nothing left to erase`,
    receipt,
  );
}
