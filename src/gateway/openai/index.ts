/**
 * The OpenAI-compatible API (`/openai/v1`): its route table (routes.ts) in OpenAI's error
 * shape (errors.ts), registered in its own scope so that every error under the prefix leaves
 * in that shape while `/v1` keeps its own.
 */
import type { RouteTable } from '../route-table.js';
import { OPENAI_ERRORS, type OpenAiErrorBody } from '../openai-errors.js';
import { OPENAI_PREFIX, OPENAI_ROUTES } from './routes.js';

export { OPENAI_ERRORS, OPENAI_PREFIX, OPENAI_ROUTES };

/** The OpenAI-compatible API's table, mounted at `/openai/v1`. */
export const OPENAI_TABLE: RouteTable<OpenAiErrorBody> = {
  prefix: OPENAI_PREFIX,
  routes: OPENAI_ROUTES,
  errors: OPENAI_ERRORS,
};
