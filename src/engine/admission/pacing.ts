/**
 * Pacing a model call under the provider's limits (DESIGN §5.3): before the call, a slot is
 * reserved in the provider key's bucket, which every worker shares through the store
 * (persistence/pacing.ts), and the step sleeps until it (heartbeating). A slot further away
 * than the workflow would have an activity wait (`pauseAfterMs`) is not taken: the step hands
 * back a rate limit with that wait, and the workflow pauses on a timer (`paused: rate_limit`)
 * and calls again. After the call, the tokens it was billed correct the estimate it reserved.
 *
 * The limits are the configured ones, else those the provider stated in its rate-limit headers.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { ModelCallError, modelFailure, type ModelFailure } from '../../model/errors.js';
import type { PaceLimits } from '../../persistence/pacing.js';
import { billedTokens, type Message, type TokenUsage } from '../../session/index.js';
import type { ModelPort } from '../../model/provider.js';
import type { EngineDeps } from '../deps.js';
import type { ModelStepInput, StepContext } from '../types.js';

/** What a worker paces its model calls by: the bucket's key and the limits (absent: what the provider states). */
export type PacingConfig = { key: string; limits?: PaceLimits };

/** What pacing needs of the engine's dependencies. */
export type PacingDeps = Pick<EngineDeps, 'pacing' | 'store' | 'model' | 'now' | 'heartbeatMs'>;

/** The limits in force: configured, or stated by the provider (with the configured burst). */
function limitsOf(deps: PacingDeps): PaceLimits | undefined {
  const pacing = deps.pacing;
  if (!pacing) return undefined;
  if (pacing.limits?.requestsPerMinute !== undefined || pacing.limits?.tokensPerMinute !== undefined)
    return pacing.limits;
  const stated = deps.model.statedLimits?.();
  return stated
    ? { ...stated, ...(pacing.limits?.burstMs !== undefined ? { burstMs: pacing.limits.burstMs } : {}) }
    : undefined;
}

/** A rough count of a request's tokens when it was not measured: four characters a token. */
export function roughTokens(messages: readonly Message[]): number {
  return Math.ceil(JSON.stringify(messages).length / 4);
}

/**
 * Reserves the call's slot and waits for it. Returns the rate limit to hand back when the slot
 * is further away than the step may wait, else what to correct after the call.
 */
export async function paceCall(
  deps: PacingDeps,
  input: Pick<ModelStepInput, 'pauseAfterMs'>,
  estimate: () => number,
  ctx: StepContext,
): Promise<{ failure: ModelFailure } | { reserved: number; limits: PaceLimits } | undefined> {
  const limits = limitsOf(deps);
  if (!limits || !deps.pacing) return undefined;
  const tokens = limits.tokensPerMinute !== undefined ? estimate() : 0;
  const maxWaitMs = input.pauseAfterMs ?? Number.POSITIVE_INFINITY;
  const grant = await deps.store.pacing.reserve(deps.pacing.key, limits, { requests: 1, tokens }, deps.now, maxWaitMs);
  const waitMs = Math.max(0, Math.ceil(grant.startAt - deps.now()));
  if (!grant.taken)
    return {
      failure: modelFailure('rate_limit', `paced: the provider's limits leave the next slot ${waitMs} ms away`, {
        retryAfterMs: waitMs,
      }),
    };
  for (let left = waitMs; left > 0; left = Math.ceil(grant.startAt - deps.now())) {
    await sleep(Math.min(left, deps.heartbeatMs), undefined, { signal: ctx.signal });
    ctx.heartbeat({ pacedMs: waitMs });
  }
  return { reserved: tokens, limits };
}

/** After the call: the tokens billed beyond (or below) the estimate reserved. */
export async function settlePace(
  deps: PacingDeps,
  paced: { reserved: number; limits: PaceLimits },
  usage: TokenUsage | undefined,
): Promise<void> {
  if (!deps.pacing || paced.limits.tokensPerMinute === undefined || !usage) return;
  const delta = billedTokens(usage) - paced.reserved;
  if (delta !== 0) await deps.store.pacing.adjust(deps.pacing.key, paced.limits, delta, deps.now());
}

/**
 * `model` with each call paced in the same bucket (a compaction's summaries): the call waits for
 * its slot, heartbeating; a slot further away than `pauseAfterMs` fails the call as a rate limit
 * with that retry-after, which the compaction's activity retry waits out (its bracket resumes).
 */
export function pacedModel(
  deps: PacingDeps,
  model: ModelPort,
  input: Pick<ModelStepInput, 'pauseAfterMs'>,
  ctx: StepContext,
): ModelPort {
  if (!deps.pacing) return model;
  return {
    provider: model.provider,
    model: (name) => model.model(name),
    async stream(request) {
      const paced = await paceCall(deps, input, () => roughTokens(request.messages), ctx);
      if (paced && 'failure' in paced) throw new ModelCallError(paced.failure);
      const reply = await model.stream(request);
      if (paced) await settlePace(deps, paced, reply.usage);
      return reply;
    },
  };
}
