/**
 * Learned limits (DESIGN §6): a context overflow refusal that states the provider's window is
 * logged as `model/limit` and caps the budget from then on, for that session (read from its
 * log, so it survives restarts) and, offered to the worker, for every session of that model.
 */
import type { SessionView } from '../../session/index.js';
import type { EngineDeps } from '../deps.js';

/** The smallest window known for `model`: the session's own, else one the worker learned. */
export function learnedWindowOf(deps: EngineDeps, session: SessionView, model: string): number | undefined {
  if (deps.learnLimits === false) return undefined;
  const own = session.learnedWindow(model);
  const worker = deps.learnedWindows?.get(model);
  if (own === undefined) return worker;
  return worker === undefined ? own : Math.min(own, worker);
}

/** Remembers a window the provider stated, for every session of this worker. */
export function offerLearnedWindow(deps: EngineDeps, model: string, contextWindow: number): void {
  const known = deps.learnedWindows?.get(model);
  if (known === undefined || contextWindow < known) deps.learnedWindows?.set(model, contextWindow);
}
