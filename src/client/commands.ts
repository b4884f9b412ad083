/**
 * What `SessionClient` asks of a session's workflow (session-client.ts documents each): create
 * and start it, send and post messages (through its inbox, DESIGN §5.2), log notes and budgets,
 * cancel, close, compact and resume it.
 */
import { randomUUID } from 'node:crypto';
import { WorkflowNotFoundError } from '@temporalio/client';
import { inboxKeys, type MessageBody, type NoteBody } from '../persistence/inbox-entries.js';
import {
  DEFAULT_TENANT,
  SessionlogError,
  budgetProblem,
  checkUserParts,
  decodeBase64,
  hideProblem,
  inspectMedia,
  isSessionlogError,
  newSessionHeader,
  suppliedHistoryProblem,
  textOf,
  turnHintsProblem,
  turnToolsProblem,
  type AgentSpec,
  type AskedAgent,
  type Budget,
  type CheckedPart,
  type SessionHeader,
  type StoredMedia,
  type SuppliedItem,
} from '../session/index.js';
import {
  NOTE_LIMITS,
  SESSION_WORKFLOW_TYPE,
  cancelSignal,
  closeSignal,
  compactUpdate,
  noteUpdate,
  sendUpdate,
  userMessageSignal,
  type CompactResult,
  type Deferred,
  type NoteInput,
  type SendResult,
  type UserInput,
} from '../workflows/api.js';
import type { ClientCore } from './core.js';
import { assertMessageId, assertMessageText, assertNoteMetadata, assertSessionId } from './inputs.js';
import { prepareMedia, storeMedia, uploadMedia, type MediaUpload, type PreparedPart } from './media.js';
import { isRunning } from './reads.js';
import type { MessageOptions, Reply } from './session-client.js';

export async function create(
  core: ClientCore,
  options: { sessionId?: string; agent?: AgentSpec; budget?: Budget } = {},
): Promise<SessionHeader> {
  const sessionId = options.sessionId ?? randomUUID();
  assertSessionId(sessionId);
  if (options.agent) core.checkAgent?.(options.agent);
  if (options.budget !== undefined) assertBudget(options.budget);
  const header = newSessionHeader({
    id: sessionId,
    createdAt: Date.now(),
    ...(options.agent ? { agent: options.agent } : {}),
  });
  if (await core.store.exists(sessionId)) {
    throw new SessionlogError(
      'SESSION_ALREADY_EXISTS',
      `session ${sessionId} already exists; pick another id or use the existing session`,
    );
  }
  // Creating the header first makes a taken id a clean conflict even when two callers race.
  await core.store.create(header);
  await startWorkflow(core, sessionId);
  const budget = options.budget ?? core.options.tenantBudgets?.[core.tenant ?? DEFAULT_TENANT];
  if (budget !== undefined) await setBudget(core, sessionId, budget);
  return core.store.header(sessionId);
}

export async function start(
  core: ClientCore,
  options: { sessionId?: string; agent?: AgentSpec } = {},
): Promise<{ sessionId: string; header: SessionHeader }> {
  const sessionId = options.sessionId ?? randomUUID();
  const header = await ensureSession(core, sessionId, options.agent);
  await startWorkflow(core, sessionId);
  return { sessionId, header };
}

export async function send(
  core: ClientCore,
  sessionId: string,
  text: string,
  options: MessageOptions = {},
): Promise<Reply> {
  const checked = await checkMessageWithMedia(core, sessionId, text, options);
  await ensureSession(core, sessionId);
  const message = await deliver(core, sessionId, await withStoredMedia(core, sessionId, checked), options.ownTurn);
  let result: SendResult;
  try {
    result = await core.updateWithStart(sendUpdate, sessionId, { args: [message], updateId: message.id });
  } catch (error) {
    // Refused (or the session stopped): the message is never logged, and its entry goes too.
    // Anything else (Temporal unreachable, a timeout) may still be delivered: the entry stays.
    if (isSessionlogError(error) && error.code !== 'UNAVAILABLE')
      await core.store.inbox.remove(sessionId, [message.ref!.key]).catch(() => undefined);
    throw error;
  }
  // Logged by now: an entry a retried send wrote again is not left behind.
  await core.store.inbox.remove(sessionId, [message.ref!.key]).catch(() => undefined);
  return { ...result, ...(await replyText(core, sessionId, result)) };
}

export async function post(
  core: ClientCore,
  sessionId: string,
  text: string,
  options: MessageOptions = {},
): Promise<{ id: string }> {
  const checked = await checkMessageWithMedia(core, sessionId, text, options);
  await ensureSession(core, sessionId);
  const message = await deliver(core, sessionId, await withStoredMedia(core, sessionId, checked), options.ownTurn);
  await core.temporal.workflow.signalWithStart(SESSION_WORKFLOW_TYPE, {
    ...core.startOptions(sessionId),
    signal: userMessageSignal,
    signalArgs: [message],
  });
  return { id: message.id };
}

/** What a caller's note logs between turns (`SessionClient.note`). */
export type SessionNote = {
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
};

export async function note(
  core: ClientCore,
  sessionId: string,
  note: SessionNote,
  options: { atOnce?: boolean } = {},
): Promise<{ id: string; headSeq: number; applies: 'now' | 'turn-end' }> {
  await core.requireSession(sessionId);
  const id = note.id ?? randomUUID();
  assertMessageId(id);
  if (note.metadata) assertNoteMetadata(note.metadata);
  if ((note.messages?.length ?? 0) > NOTE_LIMITS.messages)
    throw new SessionlogError('INVALID_ARGUMENT', `a note carries at most ${NOTE_LIMITS.messages} messages`);
  const messages = (note.messages ?? []).map((m) => {
    const checked = checkMessage(core, sessionId, m.text, m.id === undefined ? {} : { id: m.id });
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
  const limit = core.maxMessageBytes * NOTE_LIMITS.messages;
  if (Buffer.byteLength(text) > limit)
    throw new SessionlogError(
      'MESSAGE_TOO_LARGE',
      `the note is ${Buffer.byteLength(text)} bytes; the limit is ${limit}`,
    );
  const ref = await core.putInbox(sessionId, inboxKeys.note(id), text);
  const input: NoteInput = { id, ref };
  const logged = await core.updateWithStart(noteUpdate, sessionId, {
    args: options.atOnce ? [input, { atOnce: true }] : [input],
    updateId: `note/${id}`,
  });
  // Answered at once, the note is not logged yet: the workflow reads its inbox entry when it is.
  if (logged.applies !== 'turn-end') await core.store.inbox.remove(sessionId, [ref.key]).catch(() => undefined);
  return { id, headSeq: logged.headSeq, applies: logged.applies ?? 'now' };
}

export async function setBudget(
  core: ClientCore,
  sessionId: string,
  budget: Budget | null,
  options: { by?: string } = {},
): Promise<{ headSeq: number; applies: 'now' | 'turn-end' }> {
  await core.requireSession(sessionId);
  if (budget !== null) assertBudget(budget);
  if (options.by !== undefined && (typeof options.by !== 'string' || options.by.length > 256))
    throw new SessionlogError('INVALID_ARGUMENT', '`by` must be a string of at most 256 characters');
  const id = randomUUID();
  const input: NoteInput = { id, budget, ...(options.by !== undefined ? { by: options.by } : {}) };
  const logged = await core.updateWithStart(noteUpdate, sessionId, { args: [input], updateId: `budget/${id}` });
  // A worker of a build before budget changes answered at once answers once it is logged.
  return { headSeq: logged.headSeq, applies: logged.applies ?? 'now' };
}

export async function cancel(core: ClientCore, sessionId: string): Promise<boolean> {
  if (core.tenant !== undefined) await core.requireSession(sessionId);
  return signalIfRunning(core, sessionId, cancelSignal);
}

export async function close(core: ClientCore, sessionId: string): Promise<boolean> {
  if (core.tenant !== undefined) await core.requireSession(sessionId);
  return signalIfRunning(core, sessionId, closeSignal);
}

export async function compact(
  core: ClientCore,
  sessionId: string,
  options: { atOnce?: boolean } = {},
): Promise<CompactResult | null | Deferred> {
  await core.requireSession(sessionId);
  return core.updateWithStart(compactUpdate, sessionId, { args: options.atOnce ? [{ atOnce: true }] : [] });
}

export async function resume(core: ClientCore, sessionId: string): Promise<{ runId: string; started: boolean }> {
  await core.requireSession(sessionId);
  try {
    const description = await core.handle(sessionId).describe();
    if (description.status.name === 'RUNNING') return { runId: description.runId, started: false };
  } catch (error) {
    if (!(error instanceof WorkflowNotFoundError)) throw error;
  }
  const handle = await core.temporal.workflow.start(SESSION_WORKFLOW_TYPE, {
    ...core.startOptions(sessionId),
    workflowIdConflictPolicy: 'USE_EXISTING',
    workflowIdReusePolicy: 'ALLOW_DUPLICATE',
  });
  return { runId: handle.firstExecutionRunId, started: true };
}

/** Throws INVALID_ARGUMENT naming what is wrong with `budget`. */
function assertBudget(budget: unknown): asserts budget is Budget {
  const problem = budgetProblem(budget);
  if (problem) throw new SessionlogError('INVALID_ARGUMENT', problem);
}

/** Checks an upload and stores it in the session (its header made if it is new). */
export async function upload(core: ClientCore, sessionId: string, medium: MediaUpload): Promise<StoredMedia> {
  assertSessionId(sessionId);
  if (typeof medium !== 'object' || medium === null)
    throw new SessionlogError('INVALID_MEDIA', 'an upload is {data, mediaType, filename?}');
  // The bytes are checked before the session is made: a refused upload changes nothing.
  inspectUpload(core, medium);
  await ensureSession(core, sessionId);
  return uploadMedia(core, sessionId, medium);
}

function inspectUpload(core: ClientCore, medium: MediaUpload): void {
  const bytes = typeof medium.data === 'string' ? decodeBase64(medium.data) : medium.data;
  if (!(bytes instanceof Uint8Array)) throw new SessionlogError('INVALID_MEDIA', 'data must be bytes or base64 text');
  inspectMedia(bytes, medium.mediaType, core.maxMediaBytes);
}

/** A message checked, with its media read and checked but not stored yet (see media.ts). */
type CheckedMessage = { id: string } & MessageBody & { media?: PreparedPart[] };

/**
 * {@link checkMessage}, and for a message with parts (`options.content`) every part checked
 * and every medium it names read (media.ts `prepareMedia`), nothing written. A message whose
 * parts are all text is sent as its text, as one without parts is.
 */
async function checkMessageWithMedia(
  core: ClientCore,
  sessionId: string,
  text: string,
  options: MessageOptions,
): Promise<CheckedMessage> {
  if (options.content === undefined) return checkMessage(core, sessionId, text, options);
  assertSessionId(sessionId);
  const parts = checkUserParts(options.content, { maxBytes: core.maxMediaBytes });
  const joined = parts.map((part) => (part.type === 'text' ? part.text : '')).join('');
  if (typeof text !== 'string' || (text !== '' && text !== joined && joined !== ''))
    throw new SessionlogError(
      'INVALID_MESSAGE',
      "with content parts, text is '' or the parts' text joined; put the message's text in the parts",
    );
  // Text given beside parts that hold none is the message's first block.
  const all: CheckedPart[] = joined === '' && text.trim() !== '' ? [{ type: 'text', text }, ...parts] : parts;
  const allText = joined !== '' ? joined : text.trim() === '' ? '' : text;
  const hasMedia = all.some((part) => part.type !== 'text');
  const checked = checkMessage(core, sessionId, allText, options, hasMedia);
  if (!hasMedia) return checked;
  // A model that cannot take a part is refused here, naming the caller's part, before anything is stored.
  core.options.checkMedia?.(await messageModel(core, sessionId, options), parts);
  // What the inbox entry holds besides the text: a block per part (~400 bytes for a medium).
  const entryBytes = 2 * Buffer.byteLength(allText, 'utf8') + 512 * all.length;
  if (entryBytes > core.maxMessageBytes)
    throw new SessionlogError(
      'MESSAGE_TOO_LARGE',
      `the message's text and parts take about ${entryBytes} bytes; the limit is ${core.maxMessageBytes}`,
    );
  // The caller's parts are prepared as sent, so an error names the part by the caller's index.
  const prepared = await prepareMedia(core, sessionId, parts);
  return { ...checked, media: all === parts ? prepared : [{ type: 'text', text }, ...prepared] };
}

/** The model a message goes to: the one it asks for, else the session's own; undefined: the worker's default. */
async function messageModel(core: ClientCore, sessionId: string, options: MessageOptions): Promise<string | undefined> {
  if (options.agent?.model !== undefined) return options.agent.model;
  if (!(await core.store.exists(sessionId))) return undefined;
  return (await core.store.header(sessionId)).agent?.model;
}

/** The message with its media stored and its blocks in `content` (a message without media as it is). */
async function withStoredMedia(
  core: ClientCore,
  sessionId: string,
  checked: CheckedMessage,
): Promise<{ id: string } & MessageBody> {
  const { media, ...message } = checked;
  if (media === undefined) return message;
  return { ...message, content: await storeMedia(core, sessionId, media) };
}

/** The checks a message passes before anything reaches Temporal, and what its inbox entry holds. */
function checkMessage(
  core: ClientCore,
  sessionId: string,
  text: string,
  options: MessageOptions,
  hasMedia = false,
): { id: string } & MessageBody {
  assertSessionId(sessionId);
  // A message of media alone has no text.
  if (!(hasMedia && text === '')) assertMessageText(text, core.maxMessageBytes);
  const id = options.id ?? randomUUID();
  assertMessageId(id);
  const problem = options.tools === undefined ? undefined : turnToolsProblem(options.tools);
  if (problem) throw new SessionlogError('INVALID_ARGUMENT', problem);
  const { model, system } = options.agent ?? {};
  if (model !== undefined && (model.length === 0 || model.length > 200))
    throw new SessionlogError('INVALID_ARGUMENT', 'a model name is 1-200 characters');
  if (model !== undefined) core.checkAgent?.({ model });
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
 * Writes a message to the session's inbox (DESIGN §5.2) and returns what crosses Temporal:
 * its id and the entry's reference. Writing it again (a retried send) changes nothing; another
 * text under an id still waiting there is INVALID_MESSAGE.
 */
async function deliver(
  core: ClientCore,
  sessionId: string,
  message: { id: string } & MessageBody,
  ownTurn = false,
): Promise<UserInput> {
  const body: MessageBody = {
    text: message.text,
    ...(message.content ? { content: message.content } : {}),
    ...(message.tools ? { tools: message.tools } : {}),
    ...(message.agent ? { agent: message.agent } : {}),
    ...(message.hints ? { hints: message.hints } : {}),
  };
  const ref = await core.putInbox(sessionId, inboxKeys.message(message.id), JSON.stringify(body));
  // A message with its own tools or request options (or asking for it) starts its own turn.
  return { id: message.id, ref, ...(message.tools || message.hints || ownTurn ? { withTools: true as const } : {}) };
}

/**
 * Registers the session's header in the store if it is new, so reads (events, follow) work
 * as soon as a command returns. Header metadata only: log events are written by the workflow.
 */
async function ensureSession(core: ClientCore, sessionId: string, agent?: AgentSpec): Promise<SessionHeader> {
  assertSessionId(sessionId);
  if (await core.store.exists(sessionId)) return core.store.header(sessionId);
  if (agent) core.checkAgent?.(agent);
  const header = newSessionHeader({ id: sessionId, createdAt: Date.now(), ...(agent ? { agent } : {}) });
  try {
    await core.store.create(header);
  } catch (error) {
    // Another client created it concurrently: use the stored header.
    if (!isSessionlogError(error, 'SESSION_ALREADY_EXISTS')) throw error;
  }
  return core.store.header(sessionId);
}

function startWorkflow(core: ClientCore, sessionId: string) {
  return core.temporal.workflow.start(SESSION_WORKFLOW_TYPE, {
    ...core.startOptions(sessionId),
    workflowIdConflictPolicy: 'USE_EXISTING',
  });
}

async function signalIfRunning(
  core: ClientCore,
  sessionId: string,
  signal: typeof cancelSignal | typeof closeSignal,
): Promise<boolean> {
  await core.requireSession(sessionId);
  if (!(await isRunning(core, sessionId))) return false;
  try {
    await core.handle(sessionId).signal(signal);
    return true;
  } catch (error) {
    // The run ended between the two calls.
    if (error instanceof WorkflowNotFoundError) return false;
    throw error;
  }
}

/** The reply of the turn `result` names, read from the log: its text, and why it failed if it did. */
async function replyText(
  core: ClientCore,
  sessionId: string,
  result: SendResult,
): Promise<{ text: string; messageId: string; error?: { code: string; message: string } }> {
  const session = await core.store.session(sessionId);
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
