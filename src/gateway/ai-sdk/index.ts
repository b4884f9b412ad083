/**
 * The AI SDK UI message stream API (`/ai-sdk`): its route table (routes.ts). Its errors before
 * a stream starts are JSON in the OpenAI error shape (../openai-errors.ts: the transcript
 * reconciliation, ../transcripts.ts, is shared with that API); once streaming, a failure is an `error` part.
 */
import type { RouteTable } from '../route-table.js';
import { OPENAI_ERRORS, type OpenAiErrorBody } from '../openai-errors.js';
import { AI_SDK_PREFIX, AI_SDK_ROUTES } from './routes.js';

export { AI_SDK_PREFIX, AI_SDK_ROUTES };

/** The AI SDK UI message stream API's table, mounted at `/ai-sdk`. */
export const AI_SDK_TABLE: RouteTable<OpenAiErrorBody> = {
  prefix: AI_SDK_PREFIX,
  routes: AI_SDK_ROUTES,
  errors: OPENAI_ERRORS,
};
