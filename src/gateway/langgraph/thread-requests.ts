/**
 * LangGraph threads (`/langgraph/threads`): a thread is a session. Created (`if_exists`), read,
 * patched (metadata), deleted (= erased, DESIGN §4.2), searched, copied (= forked), and its
 * state read now, at a checkpoint (the log's length at a turn's end) or as a history; what a
 * thread shows is read from its log (threads.ts).
 */
import { randomUUID } from 'node:crypto';
import type { z } from 'zod';
import type { SessionHeader, StoredEvent } from '../../session/index.js';
import type { RouteContext } from '../route-table.js';
import { LangGraphError, notFound, unsupported } from './errors.js';
import type { createThreadBody, historyBody, patchThreadBody, searchThreadsBody } from './schemas.js';
import {
  checkpoints,
  encodeMetadata,
  matchesMetadata,
  parseCheckpointId,
  threadMetadata,
  threadObject,
  threadState,
} from './threads.js';

export type Thread = { header: SessionHeader; events: StoredEvent[] };

export async function readThread(ctx: RouteContext, id: string): Promise<Thread> {
  if (!(await ctx.client.exists(id))) throw notFound(`thread ${id}`);
  const [header, events] = await Promise.all([ctx.client.header(id), ctx.client.events(id, 0)]);
  return { header, events };
}

export async function threadJson(ctx: RouteContext, thread: Thread) {
  const waiting = await ctx.client.waitingMessages(thread.header.id);
  return threadObject(thread.header, thread.events, waiting.length > 0);
}

/** `GET /threads/:id`: status, metadata, values ({messages} derived from the log) and waiting interrupts. */
export async function getThread(ctx: RouteContext, id: string) {
  return threadJson(ctx, await readThread(ctx, id));
}

/** `POST /threads`: a new session (`if_exists`: "raise", 409, or "do_nothing", the existing thread). */
export async function createThread(ctx: RouteContext, body: z.output<typeof createThreadBody>) {
  if (body.supersteps !== undefined && body.supersteps !== null)
    throw unsupported('supersteps', 'a thread starts empty; send its messages as runs');
  if (body.ttl !== undefined && body.ttl !== null) throw unsupported('ttl', 'threads are kept until deleted (erased)');
  const id = body.thread_id ?? randomUUID();
  if (await ctx.client.exists(id)) {
    if (body.if_exists === 'do_nothing') return threadJson(ctx, await readThread(ctx, id));
    throw new LangGraphError(
      409,
      `thread ${id} already exists (send if_exists: "do_nothing" to get it)`,
      'session_already_exists',
    );
  }
  await ctx.client.create({ sessionId: id });
  const metadata = Object.fromEntries(
    Object.entries(body.metadata ?? {}).filter(([, v]) => v !== undefined && v !== null),
  );
  if (Object.keys(metadata).length > 0) await ctx.client.note(id, { metadata: { values: encodeMetadata(metadata) } });
  return threadJson(ctx, await readThread(ctx, id));
}

/** `POST /threads/search`: threads by metadata, ids and status, newest first by default. */
export async function searchThreads(ctx: RouteContext, body: z.output<typeof searchThreadsBody>) {
  if (body.values && Object.keys(body.values).length > 0)
    throw unsupported('values', 'threads are searched by metadata, ids and status (use GET /v1/search for their text)');
  const ids = body.ids ? new Set(body.ids) : undefined;
  const found: Array<ReturnType<typeof threadObject>> = [];
  for (const header of await ctx.client.list()) {
    if (ids && !ids.has(header.id)) continue;
    let thread: Thread;
    try {
      // The listing gave the header: only the log is read.
      thread = { header, events: await ctx.client.events(header.id, 0) };
    } catch {
      continue; // erased or damaged since it was listed: it does not hide the others.
    }
    if (!matchesMetadata(threadMetadata(thread.events), body.metadata ?? undefined)) continue;
    const json = await threadJson(ctx, thread);
    if (body.status && json.status !== body.status) continue;
    found.push(json);
  }
  const key = body.sort_by ?? 'created_at';
  const sign = (body.sort_order ?? 'desc') === 'asc' ? 1 : -1;
  found.sort((a, b) => sign * String(a[key]).localeCompare(String(b[key])));
  return found.slice(body.offset, body.offset + body.limit);
}

/**
 * `PATCH /threads/:id`: merges metadata into the thread's, logged between turns. Answered at
 * once: while a run goes on the merge is logged when its turn ends, and the answer already shows it.
 */
export async function patchThread(ctx: RouteContext, id: string, body: z.output<typeof patchThreadBody>) {
  if (body.ttl !== undefined && body.ttl !== null) throw unsupported('ttl', 'threads are kept until deleted (erased)');
  const thread = await readThread(ctx, id);
  if (body.metadata) {
    const merged: Record<string, unknown> = { ...threadMetadata(thread.events), ...body.metadata };
    for (const [key, value] of Object.entries(merged)) if (value === null || value === undefined) delete merged[key];
    const noted = await ctx.client.note(id, { metadata: { values: encodeMetadata(merged) } }, { atOnce: true });
    if (noted.applies === 'turn-end') return { ...(await threadJson(ctx, thread)), metadata: merged };
  }
  return threadJson(ctx, await readThread(ctx, id));
}

/** `DELETE /threads/:id`: erases the session. */
export async function deleteThread(ctx: RouteContext, id: string): Promise<void> {
  if (!(await ctx.client.exists(id))) throw notFound(`thread ${id}`);
  await ctx.client.erase(id);
}

/** `POST /threads/:id/copy`: forks the session (the copy shares the history by reference). */
export async function copyThread(ctx: RouteContext, id: string) {
  await readThread(ctx, id);
  const { sessionId } = await ctx.client.fork(id);
  return threadJson(ctx, await readThread(ctx, sessionId));
}

/** `GET /threads/:id/state`: the thread's state now. */
export async function stateNow(ctx: RouteContext, id: string) {
  const { header, events } = await readThread(ctx, id);
  const points = checkpoints(events);
  return threadState(header, events, events.length, points[1]);
}

/** `GET /threads/:id/state/:checkpoint_id`: the thread's state at a checkpoint (seq-<n>: the log's first n events). */
export async function stateAt(ctx: RouteContext, id: string, checkpoint: string) {
  const { header, events } = await readThread(ctx, id);
  const at = parseCheckpointId(checkpoint);
  if (at === undefined || at > events.length) throw notFound(`checkpoint ${checkpoint} of thread ${id}`);
  const parent = checkpoints(events).find((n) => n < at);
  return threadState(header, events, at, parent);
}

/** `POST /threads/:id/state`: refused; the state changes only through runs. */
export function refuseStateUpdate(): never {
  throw unsupported(
    'values',
    "a thread's state is derived from its log and changes only through runs (send a message; DELETE an item through /openai/v1 to hide it)",
  );
}

/** `POST /threads/:id/history`: the thread's states, newest first: now and at the end of each turn. */
export async function stateHistory(ctx: RouteContext, id: string, body: z.output<typeof historyBody>) {
  const { header, events } = await readThread(ctx, id);
  const points = checkpoints(events);
  const beforeId = typeof body.before === 'string' ? body.before : body.before?.checkpoint_id;
  const before = beforeId ? parseCheckpointId(beforeId) : undefined;
  if (beforeId && before === undefined) throw unsupported('before', `"${beforeId}" is not a checkpoint of this thread`);
  const chosen = points.filter((n) => before === undefined || n < before).slice(0, body.limit);
  return chosen.map((n) =>
    threadState(
      header,
      events,
      n,
      points.find((p) => p < n),
    ),
  );
}
