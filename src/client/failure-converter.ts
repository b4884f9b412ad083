/**
 * The failure converter of session workers and clients (loaded by path, in the workflow sandbox
 * too): a failure's message and stack trace travel as an encoded payload, which the session
 * codec seals (client/session-codec.ts), because an error message may quote what a user sent.
 */
import { DefaultFailureConverter } from '@temporalio/common';

export const failureConverter = new DefaultFailureConverter({ encodeCommonAttributes: true });
