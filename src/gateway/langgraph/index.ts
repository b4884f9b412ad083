/**
 * The LangGraph Agent Server subset (`/langgraph`, issue 25): its route table (routes.ts), in
 * the Agent Server's error shape (errors.ts), so `new Client({apiUrl: '<gateway>/langgraph'})`
 * of `@langchain/langgraph-sdk` works against durable sessions.
 */
import type { RouteTable } from '../route-table.js';
import { LANGGRAPH_ERRORS, type LangGraphErrorBody } from './errors.js';
import { LANGGRAPH_PREFIX, LANGGRAPH_ROUTES } from './routes.js';

export { LANGGRAPH_PREFIX, LANGGRAPH_ROUTES };

export const LANGGRAPH_TABLE: RouteTable<LangGraphErrorBody> = {
  prefix: LANGGRAPH_PREFIX,
  routes: LANGGRAPH_ROUTES,
  errors: LANGGRAPH_ERRORS,
};
