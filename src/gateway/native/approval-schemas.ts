/**
 * Wire schemas of tool approval and external tool results (DESIGN §5.1): the answers a caller
 * posts and the pending calls it lists.
 */
import { z } from 'zod';
import { wellFormedString } from '../wire.js';
import { sessionIdSchema } from './schemas.js';

const callIdSchema = wellFormedString()
  .min(1)
  .max(128)
  .describe('the tool call id (from the tool/approval-request event)');

export const callParams = z.strictObject({ id: sessionIdSchema, callId: callIdSchema });

export const approvalBody = z.strictObject({
  decision: z.enum(['approve', 'deny']),
  reason: wellFormedString().optional().describe('why (logged; the model sees it with a denial)'),
  arguments: wellFormedString()
    .optional()
    .describe('edited arguments, the text of a JSON object: the call runs with them (both are logged)'),
  allowForSession: z.boolean().optional().describe('approve this tool without asking for the rest of the session'),
  by: wellFormedString().max(200).optional().describe('who answered (logged)'),
});

export const toolResultBody = z.strictObject({
  callId: callIdSchema,
  output: wellFormedString().describe('the tool output the model will see'),
  isError: z.boolean().optional(),
  by: wellFormedString().max(200).optional(),
});

export const approvalsQuery = z.strictObject({
  status: z.literal('pending').optional().describe('only calls waiting for an answer (the default and only status)'),
  session: sessionIdSchema.optional().describe('only this session'),
});

export const approvalResponse = z.object({
  callId: z.string(),
  decision: z.enum(['approve', 'deny', 'expire']),
  reason: z.string().optional(),
});
export const toolResultResponse = z.object({ callId: z.string(), accepted: z.literal(true) });
export const approvalsResponse = z.object({
  approvals: z.array(
    z.object({
      sessionId: z.string(),
      callId: z.string(),
      tool: z.string(),
      kind: z.enum(['approval', 'external']),
      arguments: z.string(),
      turn: z.number().int(),
      step: z.number().int(),
      requestedAt: z.number(),
      ageMs: z.number(),
      expiresAt: z.number(),
    }),
  ),
});
