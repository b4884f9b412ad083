/**
 * The failure converter of session workers (loaded by path: by the worker with `require`, and
 * bundled into the workflow sandbox): a failure's message and stack trace travel as an encoded
 * payload, which the session codec (src/client/session-codec.ts) seals with the session's key,
 * because an error message may quote what a user sent (DESIGN §5.2).
 *
 * CommonJS, so Node 20's `require` loads it whether sessionlog runs from its sources, its build
 * or a bundle.
 */
'use strict';
const { DefaultFailureConverter } = require('@temporalio/common');

exports.failureConverter = new DefaultFailureConverter({ encodeCommonAttributes: true });
