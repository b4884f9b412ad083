/**
 * The context breakdown (DESIGN §6): what the request a session would send now costs, by kind
 * (system, tools, user, assistant, tool results, summaries), against its budget and window,
 * with each derived message's price and the point where compaction runs. Measured with the
 * token meter, so the figures are the ones the pressure policy acts on.
 */
import { lookupModel, type ModelCatalogue } from '../model/catalogue.js';
import {
  deriveEventMessage,
  type ContextMessageKind,
  type ContextReport,
  type RequestHeader,
  type SessionView,
} from '../session/index.js';
import { resolveContextPolicy, type ContextPolicy } from './compaction.js';
import type { TokenMeter } from './meter-types.js';
import { contextLimits } from './deps.js';

export type ContextReporterOptions = {
  meter: TokenMeter;
  catalogue: ModelCatalogue;
  policy?: Partial<ContextPolicy>;
  /** The model of a session that has not logged a request yet and names none (the worker's default agent). */
  defaultModel: string;
};

/** How a surface node counts: a compaction checkpoint is a summary, a tool result its own kind. */
function kindOf(session: SessionView, seq: number): ContextMessageKind {
  const event = session.eventAt(seq);
  if (event?.type === 'tool/result') return 'tool-result';
  if (event?.type === 'assistant/message') return 'assistant';
  if (
    event?.type === 'user/message' &&
    event.data.source.kind === 'plugin' &&
    event.data.source.compactionId !== undefined
  )
    return 'summary';
  return 'user';
}

/** A function that measures a session's next request (what `SessionClient.context` answers with). */
export function createContextReporter(options: ContextReporterOptions): (session: SessionView) => ContextReport {
  const policy = resolveContextPolicy(options.policy);
  const context = {
    meter: options.meter,
    policy,
    contextWindow: (model: string) => lookupModel(options.catalogue, model).contextWindow,
  };
  return (session) => {
    const header: RequestHeader = session.requestHeader ?? {
      provider: 'unknown',
      model: session.header.agent?.model ?? options.defaultModel,
      ...(session.header.agent?.system ? { system: session.header.agent.system } : {}),
    };
    const measurement = options.meter.measure(session, header);
    const { tools: _tools, ...withoutTools } = header;
    const system = options.meter.headerTokens(withoutTools);
    const tokens = {
      system,
      tools: measurement.headerTokens - system,
      user: 0,
      assistant: 0,
      toolResults: 0,
      summaries: 0,
      total: measurement.totalTokens,
    };
    const messages: ContextReport['messages'] = [];
    for (const node of measurement.nodes) {
      const event = session.eventAt(node.seq);
      if (!event || deriveEventMessage(event) === null) continue;
      const kind = kindOf(session, node.seq);
      messages.push({ seq: node.seq, kind, tokens: node.tokens });
      if (kind === 'user') tokens.user += node.tokens;
      else if (kind === 'assistant') tokens.assistant += node.tokens;
      else if (kind === 'tool-result') tokens.toolResults += node.tokens;
      else tokens.summaries += node.tokens;
    }
    // The window the provider stated (model/limit) caps the budget here as it does for the worker.
    const limits = contextLimits(context, header.model, session.learnedWindow(header.model));
    return {
      sessionId: session.id,
      asOfSeq: session.nextSeq - 1,
      model: header.model,
      tokens,
      baseline: measurement.baseline,
      budget: limits.budget,
      contextWindow: limits.contextWindow,
      compactAt: limits.threshold,
      messages,
    };
  };
}
