/**
 * LangGraph assistants: this server has one, `agent` (the workers' configured agent), which
 * every run names.
 */
import type { z } from 'zod';
import type { RouteContext } from '../route-table.js';
import { notFound } from './errors.js';
import type { searchAssistantsBody } from './schemas.js';
import { ASSISTANT_ID, matchesMetadata } from './threads.js';

const iso = (ms: number) => new Date(ms).toISOString();

export function assistantObject(ctx: RouteContext) {
  const created = iso(0);
  return {
    assistant_id: ASSISTANT_ID,
    graph_id: ASSISTANT_ID,
    name: ASSISTANT_ID,
    description: `the workers' agent${ctx.defaults.model ? ` (model ${ctx.defaults.model})` : ''}`,
    config: {},
    context: {},
    metadata: { created_by: 'system', ...(ctx.defaults.model ? { model: ctx.defaults.model } : {}) },
    version: 1,
    created_at: created,
    updated_at: created,
  };
}

export function requireAssistant(id: string): void {
  if (id !== ASSISTANT_ID) throw notFound(`assistant ${id} (this server has one assistant, "${ASSISTANT_ID}")`);
}

/** `POST /assistants/search`: the one assistant when it matches, as a page. */
export function searchAssistants(ctx: RouteContext, body: z.output<typeof searchAssistantsBody>) {
  const assistant = assistantObject(ctx);
  const match =
    (!body.graph_id || body.graph_id === assistant.graph_id) &&
    (!body.name || assistant.name.includes(body.name)) &&
    matchesMetadata(assistant.metadata, body.metadata ?? undefined);
  return (match ? [assistant] : []).slice(body.offset, body.offset + body.limit);
}
