/**
 * The native API (`/v1` and the probes): its route table (routes.ts) in its error shape
 * (errors.ts), answered through the gateway's own error and not-found handlers.
 */
import type { ErrorBody } from '../errors.js';
import type { RouteTable } from '../route-table.js';
import { NATIVE_ERRORS } from './errors.js';
import { NATIVE_ROUTES } from './routes.js';

export { NATIVE_ERRORS, NATIVE_ROUTES };

/** The native API's table: mounted at the root, so it carries no prefix. */
export const NATIVE_TABLE: RouteTable<ErrorBody> = { prefix: '', routes: NATIVE_ROUTES, errors: NATIVE_ERRORS };
