/**
 * The checks of what callers send the workflow, as update validators need them: synchronous,
 * throwing a non-retryable failure with a code to refuse (rejected input never reaches history).
 * These look at the input alone; what depends on the run (a stopped or closing session, the calls
 * waiting) is checked by the class that owns it, after these.
 *
 * What callers send waits in the inbox: the bounds are checked on its reference (the engine
 * checks the text against it). Inputs of builds before the inbox carried their texts inline;
 * they are still checked as they were (marked "before the inbox" below), for messages carried
 * over from such runs.
 */
import { ApplicationFailure } from '@temporalio/workflow';
import type { NoteInput } from '../engine/types.js';
import {
  MAX_TOOLS_JSON,
  NOTE_LIMITS,
  utf8Length,
  type AnswerOptions,
  type ApprovalInput,
  type SessionTunables,
  type ToolResultInput,
  type UserInput,
} from './api.js';

/** Refuses a message whose id or content is out of bounds. */
export function checkMessage(message: UserInput, tunables: SessionTunables): void {
  if (typeof message?.id !== 'string' || message.id.length === 0 || message.id.length > 128) {
    throw ApplicationFailure.nonRetryable('message id must be a string of 1-128 characters', 'INVALID_MESSAGE');
  }
  if (message.ref !== undefined || message.text === undefined) checkRef(message.ref, 'message', tunables);
  else checkInlineMessage(message, tunables);
}

/** Refuses an approval answer that is not one (before the run looks for its call). */
export function checkApproval(input: ApprovalInput, tunables: SessionTunables): void {
  if (
    typeof input?.callId !== 'string' ||
    input.callId.length === 0 ||
    (input.decision !== 'approve' && input.decision !== 'deny')
  ) {
    throw ApplicationFailure.nonRetryable(
      'an approval needs a callId and a decision of approve or deny',
      'INVALID_ARGUMENT',
    );
  }
  if (input.ref !== undefined) checkRef(input.ref, 'approval', tunables);
  if (input.arguments !== undefined && !isJsonObjectText(input.arguments)) {
    throw ApplicationFailure.nonRetryable('edited arguments must be the text of a JSON object', 'INVALID_ARGUMENT');
  }
}

/** Refuses an external result that is not one (before the run looks for its call). */
export function checkToolResult(input: ToolResultInput, tunables: SessionTunables): void {
  if (typeof input?.callId !== 'string' || input.callId.length === 0) {
    throw ApplicationFailure.nonRetryable('a tool result needs a callId', 'INVALID_ARGUMENT');
  }
  if (input.ref !== undefined || typeof input.output !== 'string') checkRef(input.ref, 'tool result', tunables);
  else {
    // Before the inbox: the output came inline.
    const bytes = utf8Length(input.output);
    if (bytes > tunables.maxMessageBytes) {
      throw ApplicationFailure.nonRetryable(
        `tool output is ${bytes} bytes; the limit is ${tunables.maxMessageBytes}`,
        'MESSAGE_TOO_LARGE',
      );
    }
  }
}

/**
 * Refuses a note the session would not log: its content waits in the inbox (the client checked
 * its metadata and messages), so its reference is checked here. `checkNoteMessage` checks each
 * message of a note of a build before the inbox, which carried them inline.
 */
export function checkNote(note: NoteInput, tunables: SessionTunables, checkNoteMessage: (m: UserInput) => void): void {
  if (typeof note?.id !== 'string' || note.id.length === 0 || note.id.length > 128) {
    throw ApplicationFailure.nonRetryable('a note id must be a string of 1-128 characters', 'INVALID_ARGUMENT');
  }
  if (note.ref !== undefined) checkRef(note.ref, 'note', tunables, NOTE_LIMITS.messages);
  else checkInlineNote(note, checkNoteMessage);
  // Its limits are checked by the client and again by the log's validator (session/budget.ts).
  const budget = note.budget as unknown;
  if (budget !== undefined && budget !== null && (typeof budget !== 'object' || Array.isArray(budget)))
    throw ApplicationFailure.nonRetryable("a note's budget must be an object or null", 'INVALID_ARGUMENT');
  if (note.by !== undefined && (typeof note.by !== 'string' || note.by.length > 256))
    throw ApplicationFailure.nonRetryable(
      "a note's `by` must be a string of at most 256 characters",
      'INVALID_ARGUMENT',
    );
}

/** Refuses answer options that are not `{atOnce?: boolean}`. */
export function checkAnswerOptions(options: AnswerOptions | undefined): void {
  if (options === undefined) return;
  if (
    typeof options !== 'object' ||
    options === null ||
    (options.atOnce !== undefined && typeof options.atOnce !== 'boolean')
  )
    throw ApplicationFailure.nonRetryable('answer options are {atOnce?: boolean}', 'INVALID_ARGUMENT');
}

/** Checks an inbox reference's shape and size (the largest message, `maxMessageBytes`, times `scale`). */
function checkRef(ref: UserInput['ref'], what: string, tunables: SessionTunables, scale = 1): void {
  if (
    typeof ref !== 'object' ||
    ref === null ||
    typeof ref.key !== 'string' ||
    ref.key.length === 0 ||
    ref.key.length > 300 ||
    typeof ref.digest !== 'string' ||
    !/^[0-9a-f]{64}$/.test(ref.digest) ||
    !Number.isSafeInteger(ref.bytes) ||
    ref.bytes <= 0
  ) {
    throw ApplicationFailure.nonRetryable(
      `a ${what} names its inbox entry: {key, bytes, digest} (SessionClient writes it)`,
      'INVALID_MESSAGE',
    );
  }
  const limit = tunables.maxMessageBytes * scale + MAX_TOOLS_JSON;
  if (ref.bytes > limit) {
    throw ApplicationFailure.nonRetryable(
      `${what} is ${ref.bytes} bytes; the limit is ${tunables.maxMessageBytes * scale}`,
      'MESSAGE_TOO_LARGE',
    );
  }
}

/** Before the inbox: the checks of a message whose text came inline. */
function checkInlineMessage(message: UserInput, tunables: SessionTunables): void {
  if (typeof message.text !== 'string' || message.text.trim().length === 0) {
    throw ApplicationFailure.nonRetryable('message text must not be empty', 'EMPTY_MESSAGE');
  }
  const bytes = utf8Length(message.text);
  if (bytes > tunables.maxMessageBytes) {
    throw ApplicationFailure.nonRetryable(
      `message is ${bytes} bytes; the limit is ${tunables.maxMessageBytes}`,
      'MESSAGE_TOO_LARGE',
    );
  }
  // Bounds only (the history holds them); the engine checks each tool before the turn is logged.
  if (
    message.tools !== undefined &&
    (!Array.isArray(message.tools) ||
      message.tools.length === 0 ||
      JSON.stringify(message.tools).length > MAX_TOOLS_JSON)
  ) {
    throw ApplicationFailure.nonRetryable(
      `tools must be a non-empty list of at most ${MAX_TOOLS_JSON} characters of JSON`,
      'INVALID_ARGUMENT',
    );
  }
}

/** Before the inbox: the checks of a note whose metadata and messages came inline. */
function checkInlineNote(note: NoteInput, checkNoteMessage: (m: UserInput) => void): void {
  const values = note.metadata?.values;
  if (
    note.metadata &&
    (typeof values !== 'object' || values === null || Object.keys(values).length > NOTE_LIMITS.metadataKeys)
  ) {
    throw ApplicationFailure.nonRetryable(
      `metadata holds at most ${NOTE_LIMITS.metadataKeys} string pairs`,
      'INVALID_ARGUMENT',
    );
  }
  for (const [key, value] of Object.entries(values ?? {})) {
    if (typeof value !== 'string' || key.length > NOTE_LIMITS.keyChars || value.length > NOTE_LIMITS.valueChars) {
      throw ApplicationFailure.nonRetryable(
        `metadata keys are at most ${NOTE_LIMITS.keyChars} and values at most ${NOTE_LIMITS.valueChars} characters of text`,
        'INVALID_ARGUMENT',
      );
    }
  }
  if ((note.messages?.length ?? 0) > NOTE_LIMITS.messages)
    throw ApplicationFailure.nonRetryable(
      `a note carries at most ${NOTE_LIMITS.messages} messages`,
      'INVALID_ARGUMENT',
    );
  for (const message of note.messages ?? []) {
    checkNoteMessage(message);
    if (message.tools !== undefined)
      throw ApplicationFailure.nonRetryable(
        'a note logs messages without starting a turn: its messages take no tools',
        'INVALID_ARGUMENT',
      );
  }
}

function isJsonObjectText(text: string): boolean {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === 'object' && value !== null && !Array.isArray(value);
  } catch {
    // Not JSON at all: refused by the caller.
    return false;
  }
}
