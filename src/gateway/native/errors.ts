/**
 * The native API's error shape: every failure under `/v1` leaves as `{error: {code, message}}`
 * with its status from the gateway's one table (../errors.ts). A request part that does not
 * parse is a 400 naming each bad field by where it was (`body.text`, `query.from`).
 */
import { assertSessionId } from '../../session/index.js';
import { ERROR_STATUS, GatewayError, toErrorResponse, type ErrorBody } from '../errors.js';
import type { ErrorShape } from '../route-table.js';
import { errorResponseSchema } from './schemas.js';

/** How the native API answers everything that goes wrong, and the gateway's answer outside every prefixed API. */
export const NATIVE_ERRORS: ErrorShape<ErrorBody> = {
  component: {
    name: 'Error',
    schema: errorResponseSchema,
    description: `error codes and statuses: ${Object.entries(ERROR_STATUS)
      .sort(([a, x], [b, y]) => x - y || a.localeCompare(b))
      .map(([code, status]) => `${code}=${status}`)
      .join(', ')}`,
  },
  parse(schema, value, where) {
    // The DESIGN §3 id rule at the boundary, with its own code (a traversal-style id is a 400, never a lookup).
    if (where === 'path' && typeof value === 'object' && value !== null && 'id' in value) assertSessionId(value.id);
    const parsed = schema.safeParse(value);
    if (parsed.success) return parsed.data;
    const detail = parsed.error.issues
      .slice(0, 5)
      .map((issue) => `${[where, ...issue.path.map(String)].join('.')}: ${issue.message}`)
      .join('; ');
    throw new GatewayError('INVALID_REQUEST', `${detail}; see GET /v1/openapi.json for the request shapes`);
  },
  toReply: toErrorResponse,
  unknownRoute(method, path, allowed) {
    if (allowed.length > 0)
      return new GatewayError('METHOD_NOT_ALLOWED', `${method} is not allowed on ${path}; use ${allowed.join(', ')}`, {
        allow: allowed.join(', '),
      });
    return new GatewayError('NOT_FOUND', `no route ${method} ${path}; the routes are listed in GET /v1/openapi.json`);
  },
};
