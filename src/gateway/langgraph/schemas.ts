/**
 * The request shapes of the LangGraph Agent Server subset (`/langgraph`): path parameters,
 * queries and bodies as `@langchain/langgraph-sdk`'s `Client` sends them. Fields only a
 * LangGraph graph can honour parse here and are refused by name where they are used (422).
 */
import { z } from 'zod';
import { SESSION_ID_PATTERN } from '../../session/index.js';

export const threadId = z.string().regex(SESSION_ID_PATTERN, 'must be a thread (session) id').describe('the thread id');
export const runId = z.string().min(1).max(300).describe('the run id');
export const threadParams = z.strictObject({ thread_id: threadId });
export const runParams = z.strictObject({ thread_id: threadId, run_id: runId });
export const assistantParams = z.strictObject({ assistant_id: z.string().min(1).max(200) });
export const jsonRecord = z.record(z.string(), z.unknown());

export const createThreadBody = z
  .object({
    thread_id: threadId.optional(),
    metadata: jsonRecord.nullish(),
    if_exists: z.enum(['raise', 'do_nothing']).nullish(),
    supersteps: z.unknown().optional(),
    ttl: z.unknown().optional(),
    graph_id: z.string().nullish(),
  })
  .strict();

export const patchThreadBody = z.object({ metadata: jsonRecord.nullish(), ttl: z.unknown().optional() }).strict();

export const searchThreadsBody = z
  .object({
    metadata: jsonRecord.nullish(),
    ids: z.array(threadId).max(1000).nullish(),
    values: jsonRecord.nullish(),
    status: z.enum(['idle', 'busy', 'interrupted', 'error']).nullish(),
    limit: z.number().int().min(1).max(1000).default(10),
    offset: z.number().int().min(0).default(0),
    sort_by: z.enum(['thread_id', 'status', 'created_at', 'updated_at', 'state_updated_at']).nullish(),
    sort_order: z.enum(['asc', 'desc']).nullish(),
    select: z.array(z.string()).nullish(),
    extract: z.unknown().optional(),
  })
  .strict();

export const searchAssistantsBody = z
  .object({
    graph_id: z.string().nullish(),
    name: z.string().nullish(),
    metadata: jsonRecord.nullish(),
    limit: z.number().int().min(1).max(1000).default(10),
    offset: z.number().int().min(0).default(0),
    sort_by: z.string().nullish(),
    sort_order: z.enum(['asc', 'desc']).nullish(),
    select: z.array(z.string()).nullish(),
  })
  .strict();

export const historyBody = z
  .object({
    limit: z.number().int().min(1).max(1000).default(10),
    before: z.union([z.string(), z.object({ checkpoint_id: z.string().nullish() }).passthrough()]).nullish(),
    metadata: jsonRecord.nullish(),
    checkpoint: z.object({ checkpoint_id: z.string().nullish() }).passthrough().nullish(),
    select: z.array(z.string()).nullish(),
  })
  .strict();

export const streamModeField = z.union([z.string(), z.array(z.string())]);

export const runBody = z
  .object({
    assistant_id: z.string().min(1).max(200),
    input: z.unknown().optional(),
    command: z
      .object({ resume: z.unknown().optional(), update: z.unknown().optional(), goto: z.unknown().optional() })
      .strict()
      .nullish(),
    config: z
      .object({
        tags: z.array(z.string()).optional(),
        recursion_limit: z.number().optional(),
        configurable: jsonRecord.optional(),
      })
      .passthrough()
      .nullish(),
    context: z.unknown().optional(),
    metadata: jsonRecord.nullish(),
    stream_mode: streamModeField.nullish(),
    stream_subgraphs: z.boolean().nullish(),
    stream_resumable: z.boolean().nullish(),
    feedback_keys: z.array(z.string()).nullish(),
    interrupt_before: z.union([z.literal('*'), z.array(z.string())]).nullish(),
    interrupt_after: z.union([z.literal('*'), z.array(z.string())]).nullish(),
    checkpoint: z.object({ checkpoint_id: z.string().nullish() }).passthrough().nullish(),
    checkpoint_id: z.string().nullish(),
    checkpoint_during: z.boolean().nullish(),
    durability: z.string().nullish(),
    webhook: z.string().max(2048).nullish(),
    strict_resume: z.boolean().nullish(),
    multitask_strategy: z.enum(['reject', 'enqueue', 'interrupt', 'rollback']).nullish(),
    on_completion: z.enum(['delete', 'keep']).nullish(),
    on_disconnect: z.enum(['cancel', 'continue']).nullish(),
    after_seconds: z.number().nullish(),
    if_not_exists: z.enum(['create', 'reject']).nullish(),
    langsmith_tracer: z.unknown().optional(),
  })
  .strict();
export type RunBody = z.output<typeof runBody>;

export const joinStreamQuery = z
  .object({
    stream_mode: streamModeField.optional(),
    cancel_on_disconnect: z.enum(['0', '1', 'true', 'false']).optional(),
    namespace: z.unknown().optional(),
    checkpoint_id: z.string().optional(),
  })
  .strict();

export const listRunsQuery = z
  .object({
    limit: z.coerce.number().int().min(1).max(1000).default(10),
    offset: z.coerce.number().int().min(0).default(0),
    status: z.enum(['pending', 'running', 'error', 'success', 'timeout', 'interrupted']).optional(),
    select: z.unknown().optional(),
  })
  .strict();

export const cancelQuery = z
  .object({
    wait: z.enum(['0', '1', 'true', 'false']).optional(),
    action: z.enum(['interrupt', 'rollback']).optional(),
    reason: z.string().max(1000).optional(),
  })
  .strict();
