/**
 * One model step (DESIGN §5): begin the turn or step and log the messages entering it, log a
 * changed request envelope, climb the pressure ladder (context/pressure.ts: prune, summarise,
 * escalate), then stream the reply into the log (chunks as they arrive, then the message and
 * its tool calls). A retried step finds what it already logged: a logged reply is never
 * requested again, and a compaction bracket it left open is resumed.
 *
 * Failures: a transient model failure with attempts left logs `llm/retry` and rethrows (the
 * caller retries); a context overflow teaches the window it states, climbs the ladder again and
 * calls once more; an internal error (a bug) and any other failure close the turn with the
 * error. A request that cannot fit the window closes the turn with `context_overflow`, naming
 * its parts. A cancel logs the partial reply as interrupted.
 */
import { randomUUID } from 'node:crypto';
import { relieveContext, type ReliefOutcome } from '../../context/pressure.js';
import { ModelCallError, classifyModelError, type ModelFailure } from '../../model/errors.js';
import { replyCost, type ModelReply } from '../../model/provider.js';
import { mediaReader, withMediaReader } from '../media.js';
import { storedMediaOf } from '../../model/request.js';
import { DEFAULT_MEDIA_POLICY, applyMediaPolicy } from '../../context/media-policy.js';
import {
  SessionlogError,
  closersFor,
  hintsForStep,
  jsonEqual,
  turnHintsProblem,
  turnToolsProblem,
  type AskedAgent,
  type AssistantMessage,
  type Message,
  type NewEvent,
  type StreamChunk,
  type RequestHeader,
  type TurnEndReason,
} from '../../session/index.js';
import { requestHeaderFor } from '../agent.js';
import { requestAnswers } from './record-answers.js';
import { overBudget } from '../admission/budget-check.js';
import { paceCall, roughTokens, settlePace } from '../admission/pacing.js';
import { messageContent, readMessages } from '../inbox.js';
import { inlineMessage } from '../oversized.js';
import type { EngineDeps } from '../deps.js';
import { StepInterrupted } from '../errors.js';
import { learnedWindowOf, offerLearnedWindow } from '../admission/learned-limits.js';
import { LogWriter } from '../log-writer.js';
import {
  attemptKey,
  compactionId,
  compactionOp,
  stepCompactionPrefix,
  stepOps,
  type AttemptKey,
  type StepKey,
} from '../ops.js';
import { hasRecallTools } from './compaction.js';
import { loggedStepResult, loggedTurnEnd } from '../outcomes.js';
import { observedModel } from '../telemetry.js';
import type { LiveModelStepResult, ModelStepInput, StepContext } from '../types.js';

/**
 * A provider's refusal of a request over its context window, handed from the call to the step's
 * loop. It never leaves the step (the workflow's `context-overflow` outcome is replay-only).
 */
type Refused = { refused: { code: string; message: string; contextLimit?: number } };

/**
 * A logged reply that asks for tools: the budget is checked before they run, then the calls
 * that need an answer (approval or an external result) are requested, once however often the
 * step is retried.
 */
async function toolRound(
  deps: EngineDeps,
  writer: LogWriter,
  input: ModelStepInput,
  key: StepKey,
  reply: LiveModelStepResult,
): Promise<LiveModelStepResult> {
  const over = await overBudget(deps, writer, input, key, 'tools');
  if (over) return over;
  return {
    ...reply,
    toolCalls: await requestAnswers(deps, writer, key, reply.toolCalls, input.approvalTimeoutMs),
    headSeq: writer.session.nextSeq,
  };
}

export async function modelStep(
  deps: EngineDeps,
  input: ModelStepInput,
  ctx: StepContext,
): Promise<LiveModelStepResult> {
  const key: StepKey = { runId: input.runId, turn: input.turn, step: input.step, pass: input.pass };
  const writer = await LogWriter.open(deps.store, input.sessionId, input.runId, input.knownHead);
  const reply = writer.logged(stepOps.reply(key));
  if (reply.length > 0) {
    const logged = loggedStepResult(writer.session, input.turn, reply, false);
    // A retried step whose reply is logged: its approval requests may not be (requested once either way).
    return logged.toolCalls.length === 0 ? logged : toolRound(deps, writer, input, key, logged);
  }
  for (const op of [stepOps.cancel(key), stepOps.error(key)]) {
    const closed = writer.logged(op);
    if (closed.length > 0) return loggedStepResult(writer.session, input.turn, closed, true);
  }
  await beginStep(deps, writer, input, key);
  const over = await overBudget(deps, writer, input, key, 'model');
  if (over) return over;

  let header: RequestHeader;
  try {
    header = requestHeaderFor(
      deps,
      writer.session.header.agent,
      writer.session.turns.turnTools,
      writer.session.turns.asked,
      hintsForStep(writer.session.turns.turnHints, input.step),
      storedMediaOf(writer.session.deriveMessages()).length > 0,
    );
  } catch (error) {
    return failStep(deps, writer, input, key, classifyModelError(error), error);
  }
  const previous = writer.session.requestHeader;
  if (!previous || !jsonEqual(previous, header)) {
    await writer.append(
      [{ type: 'request/header', time: deps.now(), data: { header, reason: previous ? 'change' : 'initial' } }],
      stepOps.header(key),
    );
  }
  // The step owns context pressure: the ladder before the call, and after a provider's refusal
  // one more climb (against the window it stated) and one more call.
  let relief = deps.context ? await relieve(deps, writer, input, key, header, ctx, 'pressure') : undefined;
  for (let pass = key.pass; ; pass++) {
    const passKey: StepKey = { ...key, pass };
    if (relief?.tooLarge !== undefined) {
      const closed = await closeWithError(deps, writer, input, passKey, {
        code: 'context_overflow',
        message: relief.tooLarge,
      });
      return { ...closed, pressure: pressureRef(relief) };
    }
    const measured = relief?.measurement.totalTokens;
    const result = await streamReply(deps, writer, input, passKey, header, ctx, measured);
    // A provider's overflow refusal never leaves the step: relieved and called once more, or the turn ends.
    if ('refused' in result && deps.context && pass === key.pass) {
      // A window the refusal stated is logged (model/limit) and believed; without one, the window
      // is taken to be below the size the meter gave the refused request.
      const stated = result.refused.contextLimit !== undefined;
      const refusedTokens = stated ? undefined : relief?.measurement.totalTokens;
      relief = await relieve(
        deps,
        writer,
        input,
        { ...passKey, pass: pass + 1 },
        header,
        ctx,
        'context-overflow',
        refusedTokens,
      );
      continue;
    }
    if ('refused' in result) {
      const closed = await closeWithError(deps, writer, input, passKey, {
        code: result.refused.code,
        message: result.refused.message,
      });
      return relief ? { ...closed, pressure: pressureRef(relief) } : closed;
    }
    if (relief && result.replySeq !== null && !result.replayed) {
      const logged = writer.session.eventAt(result.replySeq);
      if (logged?.type === 'assistant/message' && logged.data.usage)
        deps.context?.onUsage?.({ model: header.model, measurement: relief.measurement, usage: logged.data.usage });
    }
    return relief ? { ...result, pressure: pressureRef(relief) } : result;
  }
}

function pressureRef(relief: ReliefOutcome): NonNullable<LiveModelStepResult['pressure']> {
  return { tokens: relief.report.tokens, contextWindow: relief.report.contextWindow, budget: relief.report.budget };
}

/**
 * Climbs the pressure ladder (context/pressure.ts) for this step pass: its appends are the
 * step's own (`…/p<pass>/prune`, …), its compaction ids come from the step key.
 */
async function relieve(
  deps: EngineDeps,
  writer: LogWriter,
  input: ModelStepInput,
  key: StepKey,
  header: RequestHeader,
  ctx: StepContext,
  trigger: 'pressure' | 'context-overflow',
  refusedTokens?: number,
): Promise<ReliefOutcome> {
  const context = deps.context!;
  const learnedWindow = learnedWindowOf(deps, writer.session, header.model);
  const turnStart = writer.session.turns.turns.get(input.turn)?.startSeq ?? writer.session.nextSeq;
  return relieveContext(
    {
      log: {
        get session() {
          return writer.session;
        },
        append: (events, suffix) => writer.append(events, stepOps.context(key, suffix)),
      },
      compactionLog: (id) => ({
        get session() {
          return writer.session;
        },
        append: (events, suffix) => writer.append(events, compactionOp(input.runId, id, suffix)),
      }),
      summarizer: withMediaReader(
        observedModel(deps.model, deps.telemetry, {
          sessionId: input.sessionId,
          turn: input.turn,
          step: input.step,
          purpose: 'summary',
        }),
        mediaReader(deps, input.sessionId),
      ),
      context,
      ...(hasRecallTools(deps) ? { recall: true } : {}),
      now: deps.now,
      signal: ctx.signal,
      heartbeat: () => ctx.heartbeat(),
    },
    {
      header,
      turn: input.turn,
      compactionBase: compactionId(key),
      ownedPrefix: stepCompactionPrefix(key),
      trigger,
      ...(refusedTokens !== undefined ? { refusedTokens } : {}),
      ...(learnedWindow !== undefined ? { learnedWindow } : {}),
      protectFromSeq: turnStart,
      fromSeq: input.knownHead,
      attempt: ctx.attempt,
      maxAttempts: input.maxAttempts,
    },
  );
}

/**
 * Logs `turn/start` (step 1), `step/start` and the entering user messages as one batch. A turn
 * left open by anything else (a crash outside this run, a deleted `turn/end`) is closed first
 * with the usual repair closers, so turn numbering never breaks.
 */
async function beginStep(deps: EngineDeps, writer: LogWriter, input: ModelStepInput, key: StepKey): Promise<void> {
  const turns = writer.session.turns;
  // Begun already: by an earlier attempt, or by an earlier pass of this step (before a compaction).
  if (turns.openTurn === input.turn && turns.lastStep >= input.step) return;
  const events: NewEvent[] = [];
  if (input.step === 1) {
    if (turns.open) {
      await writer.append(
        closersFor(turns, writer.session.storedAt(writer.session.nextSeq - 1), { kind: 'interrupted' }, deps.now()),
        stepOps.closeStale(key),
      );
    }
    if (writer.session.turns.lastTurn !== input.turn - 1) {
      throw new SessionlogError(
        writer.session.turns.lastTurn < input.turn - 1 ? 'LOG_BEHIND' : 'LOG_AHEAD',
        `session ${input.sessionId}: the log's last turn is ${writer.session.turns.lastTurn} but this workflow run is starting turn ${input.turn}; run \`sessionlog sessions resume ${input.sessionId}\` to continue from what the log holds`,
      );
    }
  }
  const entering = await Promise.all(
    (await readMessages(deps.store, input.sessionId, input.entering)).map((m) =>
      inlineMessage(deps, writer.session, m),
    ),
  );
  if (input.step === 1) {
    // The caller's tools for this turn come with the message that starts it (the workflow lets one such message in).
    const tools = entering.find((message) => message.tools !== undefined)?.tools;
    const problem = tools === undefined ? undefined : turnToolsProblem(tools);
    if (problem) throw new SessionlogError('INVALID_ARGUMENT', `the tools sent for turn ${input.turn}: ${problem}`);
    const agent = changedAgent(turns.asked, entering.find((message) => message.agent !== undefined)?.agent);
    const hints = entering.find((message) => message.hints !== undefined)?.hints;
    const hintsProblem = hints === undefined ? undefined : turnHintsProblem(hints);
    if (hintsProblem)
      throw new SessionlogError('INVALID_ARGUMENT', `the request options sent for turn ${input.turn}: ${hintsProblem}`);
    // A model this worker cannot run is refused before the turn is logged: asked for, it would hold for every later turn.
    if (agent?.model !== undefined) {
      try {
        deps.model.model(agent.model);
      } catch (error) {
        throw new SessionlogError(
          'INVALID_ARGUMENT',
          `turn ${input.turn} asks for model ${JSON.stringify(agent.model)}, which this worker cannot run: ${(error as Error).message}`,
        );
      }
    }
    events.push({
      type: 'turn/start',
      time: deps.now(),
      data: {
        turn: input.turn,
        ...(tools ? { tools } : {}),
        ...(agent ? { agent } : {}),
        ...(hints ? { hints } : {}),
      },
    });
  }
  events.push({ type: 'step/start', time: deps.now(), data: { turn: input.turn, step: input.step } });
  for (const message of entering) {
    events.push({
      type: 'user/message',
      time: deps.now(),
      data: { id: message.id, role: 'user', content: messageContent(message), source: { kind: 'user' } },
      surfaceOp: 'append',
    });
  }
  // The messages' inbox entries go in the same commit as the batch that logs them.
  await writer.append(
    events,
    stepOps.start(key),
    input.entering.flatMap((message) => (message.ref ? [message.ref.key] : [])),
  );
}

/** What of `wanted` differs from what callers asked for so far (undefined: nothing). */
function changedAgent(asked: AskedAgent, wanted: AskedAgent | undefined): AskedAgent | undefined {
  if (!wanted) return undefined;
  const changed: AskedAgent = {
    ...(wanted.model !== undefined && wanted.model !== asked.model ? { model: wanted.model } : {}),
    ...(wanted.system !== undefined && wanted.system !== asked.system ? { system: wanted.system } : {}),
  };
  return Object.keys(changed).length > 0 ? changed : undefined;
}

async function streamReply(
  deps: EngineDeps,
  writer: LogWriter,
  input: ModelStepInput,
  key: StepKey,
  header: RequestHeader,
  ctx: StepContext,
  measuredTokens: number | undefined,
): Promise<LiveModelStepResult | Refused> {
  const messages = requestMessages(deps, writer, header);
  const paced = await paceCall(deps, input, () => measuredTokens ?? roughTokens(messages), ctx);
  if (paced && 'failure' in paced) return failStep(deps, writer, input, key, paced.failure, undefined, ctx.attempt);
  const chunkSeqs: number[] = [];
  let batches = 0;
  const alive = setInterval(() => ctx.heartbeat({ chunks: chunkSeqs.length }), deps.heartbeatMs);
  const chunkEvents = (chunks: readonly StreamChunk[]): NewEvent[] =>
    chunks.map((chunk) => ({
      type: 'assistant/chunk',
      time: deps.now(),
      data: { turn: input.turn, step: input.step, chunk },
    }));
  let reply: ModelReply;
  try {
    reply = await observedModel(deps.model, deps.telemetry, {
      sessionId: input.sessionId,
      turn: input.turn,
      step: input.step,
      purpose: 'reply',
    }).stream({
      messages,
      header,
      signal: ctx.signal,
      async onChunks(chunks) {
        for (const event of await writer.append(
          chunkEvents(chunks),
          stepOps.chunks(key, attemptKey(ctx.attempt, input.pauses), batches++),
        ))
          chunkSeqs.push(event.seq);
        ctx.heartbeat({ chunks: chunkSeqs.length });
      },
      // The reply's last chunks are logged in the reply's own append: one commit fewer after the last token.
      holdLastChunks: true,
      readMedia: mediaReader(deps, input.sessionId),
    });
  } catch (error) {
    // Our own log refusing an append is not a model failure.
    if (error instanceof SessionlogError) throw error;
    const failure = classifyModelError(error);
    if (failure.code === 'context_overflow') return refusal(deps, writer, input, key, failure, ctx.attempt);
    return failStep(deps, writer, input, key, failure, error, ctx.attempt);
  } finally {
    clearInterval(alive);
  }
  const message: AssistantMessage = {
    id: randomUUID(),
    role: 'assistant',
    content: reply.content,
    source: { kind: 'model', provider: reply.provider, model: reply.model },
  };
  if (paced) await settlePace(deps, paced, reply.usage);
  if (reply.aborted) return interrupted(deps, writer, input, key, message, chunkSeqs, ctx);
  const calls = reply.content.filter((b) => b.type === 'tool-call');
  const held = chunkEvents(reply.heldChunks ?? []);
  const cost = replyCost(deps.model, reply.model, reply.usage);
  for (let i = 0; i < held.length; i++) chunkSeqs.push(writer.session.nextSeq + i);
  const events: NewEvent[] = [
    ...held,
    {
      type: 'assistant/message',
      time: deps.now(),
      data: {
        turn: input.turn,
        step: input.step,
        message,
        ...(reply.usage ? { usage: reply.usage } : {}),
        ...(cost !== undefined ? { cost } : {}),
        finishReason: reply.finishReason,
      },
      surfaceOp: 'append',
      sourceEventSeqs: chunkSeqs,
    },
  ];
  for (const call of calls) {
    events.push({
      type: 'tool/call',
      time: deps.now(),
      data: { turn: input.turn, step: input.step, callId: call.id, name: call.name, arguments: call.arguments },
    });
  }
  if (calls.length === 0) {
    const reason: TurnEndReason = reply.finishReason === 'length' ? { kind: 'max-tokens' } : { kind: 'completed' };
    events.push({ type: 'step/end', time: deps.now(), data: { turn: input.turn, step: input.step } });
    events.push({ type: 'turn/end', time: deps.now(), data: { turn: input.turn, reason } });
  }
  const stored = await writer.append(events, stepOps.reply(key));
  if (calls.length === 0) deps.onTurnEnded?.(input.sessionId, writer.session.nextSeq - 1);
  const result = { ...loggedStepResult(writer.session, input.turn, stored, false), replayed: false };
  return result.toolCalls.length === 0 ? result : toolRound(deps, writer, input, key, result);
}

/**
 * The derived messages as this step's request carries them: the media policy
 * (context/media-policy.ts) decides which media are sent and which become stand-ins, for the
 * model the header routes to. The meter prices the same messages.
 */
function requestMessages(deps: EngineDeps, writer: LogWriter, header: RequestHeader): Message[] {
  return applyMediaPolicy(
    writer.session.deriveMessages(),
    deps.media ?? DEFAULT_MEDIA_POLICY,
    deps.model.model(header.model).input,
  );
}

/** A cancel asked for by the workflow logs the partial reply as interrupted; any other abort writes nothing. */
async function interrupted(
  deps: EngineDeps,
  writer: LogWriter,
  input: ModelStepInput,
  key: StepKey,
  partial: AssistantMessage,
  chunkSeqs: number[],
  ctx: StepContext,
): Promise<never> {
  if (!ctx.cancelRequested())
    throw new StepInterrupted(false, 'model step abandoned: its run is gone or the worker is stopping');
  const events: NewEvent[] = [
    {
      type: 'assistant/message',
      time: deps.now(),
      data: { turn: input.turn, step: input.step, message: partial, interrupted: true },
      surfaceOp: 'append',
      sourceEventSeqs: chunkSeqs,
    },
    { type: 'step/end', time: deps.now(), data: { turn: input.turn, step: input.step } },
    {
      type: 'turn/end',
      time: deps.now(),
      data: { turn: input.turn, reason: { kind: 'aborted', reason: { kind: 'user' } } },
    },
  ];
  await writer.append(events, stepOps.cancel(key));
  deps.onTurnEnded?.(input.sessionId, writer.session.nextSeq - 1);
  throw new StepInterrupted(true, 'model step cancelled; partial reply logged as interrupted');
}

/**
 * A failed call: retried when transient and attempts remain (after logging `llm/retry`), handed
 * back to the workflow to wait out a long rate limit, otherwise the turn ends with the error. (A
 * call's overflow refusal goes back to the step's loop instead: {@link refusal}.)
 */
async function failStep(
  deps: EngineDeps,
  writer: LogWriter,
  input: ModelStepInput,
  key: StepKey,
  failure: ModelFailure,
  cause: unknown,
  attempt = 1,
): Promise<LiveModelStepResult> {
  // A long wait asked for by the provider (a reset minutes away, a daily quota) is the workflow's
  // to wait out on a durable timer, with nothing running; a short one is the activity retry's.
  const longWait =
    failure.code === 'rate_limit' &&
    failure.retryAfterMs !== undefined &&
    input.pauseAfterMs !== undefined &&
    failure.retryAfterMs >= input.pauseAfterMs;
  if (failure.retryable && (attempt < input.maxAttempts || longWait)) {
    const delayMs = failure.retryAfterMs ?? Math.min(30_000, 1000 * 2 ** (attempt - 1));
    const detail = {
      code: failure.code,
      message: failure.message,
      ...(failure.status !== undefined ? { status: failure.status } : {}),
    };
    await writer.append(
      [
        {
          type: 'llm/retry',
          time: deps.now(),
          data: { turn: input.turn, step: input.step, attempt: attempt + 1, delayMs, failure: detail },
        },
      ],
      stepOps.retry(key, attemptKey(attempt, input.pauses)),
    );
    if (longWait)
      return {
        headSeq: writer.session.nextSeq,
        replySeq: null,
        toolCalls: [],
        outcome: 'rate-limited',
        retryAfterMs: delayMs,
        replayed: false,
      };
    throw new ModelCallError({ ...failure, retryAfterMs: delayMs });
  }
  const error = { code: failure.code, message: failure.message };
  if (failure.code === 'internal') {
    // A bug, not a provider's or the network's failure: one attempt, its cause on the turn and its stack in the log.
    deps.telemetry?.internalError?.({ sessionId: input.sessionId, turn: input.turn, step: input.step }, cause);
    return closeWithError(deps, writer, input, key, { code: 'internal_error', message: failure.message });
  }
  return closeWithError(deps, writer, input, key, {
    ...error,
    ...(failure.status !== undefined ? { status: failure.status } : {}),
  });
}

/** A call's overflow refusal: the window it states is learned, and the refusal goes back to the step's loop. */
async function refusal(
  deps: EngineDeps,
  writer: LogWriter,
  input: ModelStepInput,
  key: StepKey,
  failure: ModelFailure,
  attempt: number,
): Promise<Refused> {
  await learnLimit(deps, writer, key, failure, attemptKey(attempt, input.pauses));
  const { code, message, contextLimit } = failure;
  return { refused: { code, message, ...(contextLimit !== undefined ? { contextLimit } : {}) } };
}

/** Logs the window an overflow refusal states (`model/limit`), unless the session already knows it. */
async function learnLimit(
  deps: EngineDeps,
  writer: LogWriter,
  key: StepKey,
  failure: ModelFailure,
  attempt: AttemptKey,
): Promise<void> {
  const model = writer.session.requestHeader?.model;
  const stated = failure.contextLimit;
  if (model === undefined || stated === undefined || deps.learnLimits === false) return;
  offerLearnedWindow(deps, model, stated);
  if (writer.session.learnedWindow(model) === stated) return;
  const source = failure.status === 413 ? 'http-413' : 'provider-message';
  await writer.append(
    [{ type: 'model/limit', time: deps.now(), data: { model, contextWindow: stated, source } }],
    stepOps.limit(key, attempt),
  );
}

/** Ends the turn with `error`: every open call gets an error result, then the step and the turn end. */
async function closeWithError(
  deps: EngineDeps,
  writer: LogWriter,
  input: ModelStepInput,
  key: StepKey,
  error: { code: string; message: string; status?: number },
): Promise<LiveModelStepResult> {
  const reason: TurnEndReason = { kind: 'error', error };
  const last = writer.session.storedAt(writer.session.nextSeq - 1);
  await writer.append(closersFor(writer.session.turns, last, reason, deps.now()), stepOps.error(key));
  deps.onTurnEnded?.(input.sessionId, writer.session.nextSeq - 1);
  const turnEnd = loggedTurnEnd(writer.session, input.turn);
  return {
    headSeq: writer.session.nextSeq,
    replySeq: turnEnd?.replySeq ?? null,
    toolCalls: [],
    outcome: 'error',
    error: { code: error.code, message: error.message },
    replayed: false,
    ...(turnEnd ? { turnEnd } : {}),
  };
}
