/**
 * Wire schemas every API of the gateway shares: the strings a request may carry and how the
 * session id rule is worded in their errors.
 */
import { z } from 'zod';
import { LONE_SURROGATE } from '../client/inputs.js';

/** The DESIGN §3 session id rule, as request errors word it. */
export const SESSION_ID_RULE = "1-128 characters of A-Z a-z 0-9 . _ - not starting with '.'";

/**
 * A string of well-formed UTF-16. A lone surrogate cannot be encoded as UTF-8, so Temporal's
 * gRPC (and any UTF-8 store column) would refuse it deep inside a command; refused here with a
 * 400 instead.
 */
export const wellFormedString = () =>
  z.string().superRefine((value, ctx) => {
    const match = LONE_SURROGATE.exec(value);
    if (match) {
      const unit = match[0].charCodeAt(0).toString(16).toUpperCase();
      ctx.addIssue({
        code: 'custom',
        message: `must be well-formed Unicode: a lone surrogate (\\u${unit}) at index ${match.index} cannot be encoded as UTF-8; send whole characters (surrogate pairs)`,
      });
    }
  });
