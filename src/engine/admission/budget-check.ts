/**
 * The spend-cap check of a model step (DESIGN §5.3): before the model call, and before the step's
 * tool calls run (and their approvals are asked for). A breach is logged once per check
 * (`budget/breach`, keyed by the step and how often it paused) and handed to the workflow, which
 * pauses the session until the budget is raised; nothing is called meanwhile.
 */
import {
  SessionlogError,
  tenantBreach,
  tenantCapsProblem,
  tenantOf,
  type BudgetBreach,
  type NewEvent,
} from '../../session/index.js';
import type { EngineDeps } from '../deps.js';
import type { LogWriter } from '../log-writer.js';
import { stepOps, type StepKey } from '../ops.js';
import type { LiveModelStepResult, ModelStepInput, StepBreach } from '../types.js';

/** The step's result when a cap is reached before `before` (undefined: within budget). */
export async function overBudget(
  deps: EngineDeps,
  writer: LogWriter,
  input: ModelStepInput,
  key: StepKey,
  before: 'model' | 'tools',
): Promise<LiveModelStepResult | undefined> {
  const op = stepOps.budget(key, before, input.pauses ?? 0);
  let logged = writer.logged(op)[0];
  if (!logged) {
    const breach = writer.session.budget.breach(deps.now(), before) ?? (await tenantCapBreach(deps, writer, before));
    if (!breach) return undefined;
    const event: NewEvent<'budget/breach'> = {
      type: 'budget/breach',
      time: deps.now(),
      data: { turn: input.turn, step: input.step, before, ...breach },
    };
    [logged] = await writer.append([event], op);
  }
  if (logged?.type !== 'budget/breach') return undefined;
  const { turn: _turn, step: _step, ...data } = logged.data as NewEvent<'budget/breach'>['data'];
  const waitMs =
    (data.scope === 'tenant' ? deps.tenantCaps?.(tenantOf(writer.session.header))?.waitMs : undefined) ??
    writer.session.budget.budget?.waitMs;
  const breach: StepBreach = { ...data, seq: logged.seq, ...(waitMs !== undefined ? { waitMs } : {}) };
  return {
    headSeq: writer.session.nextSeq,
    replySeq: null,
    toolCalls: [],
    outcome: 'budget',
    replayed: false,
    breach,
  };
}

/**
 * The breach of the session's tenant's caps, if it has any: what the tenant's sessions spent, as
 * the store sums it (every append adds its batch's spend in its own transaction). Sessions
 * running at once may each pass the check and make one more call: the cap is checked, not
 * reserved.
 */
async function tenantCapBreach(
  deps: EngineDeps,
  writer: LogWriter,
  before: 'model' | 'tools',
): Promise<BudgetBreach | undefined> {
  const tenant = tenantOf(writer.session.header);
  const caps = deps.tenantCaps?.(tenant);
  if (!caps) return undefined;
  // What a caller's lookup answers is checked like the config's table: a broken cap fails the step, loudly.
  const problem = tenantCapsProblem(caps);
  if (problem) throw new SessionlogError('INVALID_ARGUMENT', `the caps of tenant ${tenant}: ${problem}`);
  return tenantBreach(caps, await deps.store.spend.tenant(tenant), before);
}
