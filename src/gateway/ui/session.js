// One session: the timeline of turns, the log beside the surface, the next request's messages,
// the context-pressure plot, pending approvals and a live tail. Every panel is drawn from a
// documented /v1 route; the live tail appends events as they are logged and refreshes the
// folded views (turns, surface, history) after each boundary event.
import { useCallback, useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { api, documentedRoutes, followEvents, sessionPath } from './api.js';
import {
  clip,
  describeEvent,
  formatBudget,
  formatDuration,
  formatNumber,
  formatPercent,
  formatTime,
  html,
  messageText,
} from './format.js';
import { ContextPlot } from './plot.js';
import { TokenGauge, phaseOf } from './sessions.js';

const CONTEXT_ROUTE = '/v1/sessions/{id}/context';
const BRANCHES_ROUTE = '/v1/sessions/{id}/branches';
const REFRESH_DEBOUNCE_MS = 120;
const LOG_ROWS = 400;
const ARTIFACT_PAGE = 20000;

const stepKey = (turn, step) => `${turn}/${step}`;

/** "#3–#5, #9" from seqs in ascending order. */
function seqRanges(seqs) {
  const parts = [];
  let start = null;
  let previous = null;
  for (const seq of seqs) {
    if (previous !== null && seq === previous + 1) {
      previous = seq;
      continue;
    }
    if (start !== null) parts.push(start === previous ? `#${start}` : `#${start}–#${previous}`);
    start = seq;
    previous = seq;
  }
  if (start !== null) parts.push(start === previous ? `#${start}` : `#${start}–#${previous}`);
  return parts.join(', ');
}

/**
 * Indexes of the live log that the folded views may not have caught up with yet: the text
 * streamed so far per step, and the final text of each logged reply.
 */
function emptyLiveIndex() {
  return { streamed: new Map(), final: new Map(), turns: new Map() };
}

function indexEvent(index, event) {
  const data = event.data ?? {};
  if (event.type === 'assistant/chunk' && data.chunk?.kind === 'text-delta') {
    const key = stepKey(data.turn, data.step);
    index.streamed.set(key, (index.streamed.get(key) ?? '') + data.chunk.text);
  } else if (event.type === 'assistant/message') {
    index.final.set(
      stepKey(data.turn, data.step),
      messageText({ content: (data.message?.content ?? []).filter((b) => b.type === 'text') }),
    );
  } else if (event.type === 'turn/start') {
    index.turns.set(data.turn, { turn: data.turn, startSeq: event.seq, steps: new Set(), ended: false });
  } else if (event.type === 'step/start') {
    index.turns.get(data.turn)?.steps.add(data.step);
  } else if (event.type === 'turn/end') {
    const turn = index.turns.get(data.turn);
    if (turn) turn.ended = true;
  }
}

/** The context breakdown as GET /context answers it (`{context: {...}}`). */
function readContext(body) {
  const context = body?.context;
  if (!context) return null;
  const tokens = context.tokens ?? {};
  const kinds = ['system', 'tools', 'user', 'assistant', 'toolResults', 'summaries']
    .map((kind) => ({ kind, tokens: typeof tokens[kind] === 'number' ? tokens[kind] : null }))
    .filter((k) => k.tokens !== null);
  const total = typeof tokens.total === 'number' ? tokens.total : kinds.reduce((sum, k) => sum + k.tokens, 0);
  const messageTokens = new Map();
  for (const m of Array.isArray(context.messages) ? context.messages : []) {
    if (typeof m?.tokens !== 'number') continue;
    if (m.seq !== undefined) messageTokens.set(`seq:${m.seq}`, m.tokens);
  }
  const number = (value) => (typeof value === 'number' ? value : null);
  return {
    kinds,
    total,
    budget: number(context.budget),
    window: number(context.contextWindow),
    nextCompactionAt: number(context.compactAt),
    messageTokens,
  };
}

/**
 * The context budget: exact from /context when the gateway has it, else estimated from the
 * workflow's status (tokens ÷ pressure; the status rounds the pressure).
 */
function budgetOf(context, status) {
  if (context?.budget) return { value: context.budget, approximate: false };
  if (status?.tokens && status?.pressure) return { value: status.tokens / status.pressure, approximate: true };
  return null;
}

export function SessionView({ id }) {
  const [data, setData] = useState(null);
  const [error, setError] = useState(null);
  const [stream, setStream] = useState({ state: 'connecting' });
  const [, setVersion] = useState(0);
  const [expanded, setExpanded] = useState(() => new Set());
  const [artifact, setArtifact] = useState(null);
  const events = useRef([]);
  const live = useRef(emptyLiveIndex());
  const frame = useRef(0);

  const rerender = useCallback(() => {
    if (frame.current) return;
    frame.current = requestAnimationFrame(() => {
      frame.current = 0;
      setVersion((v) => v + 1);
    });
  }, []);

  useEffect(() => {
    let stopped = false;
    let follower;
    let refreshTimer;
    let generation = 0;
    const path = sessionPath(id);

    const readViews = async () => {
      const routes = await documentedRoutes();
      const [detail, turns, surface, history, context, branches] = await Promise.all([
        api(path),
        api(`${path}/turns`),
        api(`${path}/surface`),
        api(`${path}/messages`),
        routes.has(CONTEXT_ROUTE)
          ? api(`${path}/context`).catch((failure) =>
              failure.status === 404 && failure.code === 'NOT_FOUND' ? null : Promise.reject(failure),
            )
          : null,
        routes.has(BRANCHES_ROUTE) ? api(`${path}/branches`) : { branches: [] },
      ]);
      return {
        session: detail.session,
        status: detail.status,
        view: turns,
        surface,
        messages: history.messages,
        context,
        branches: branches.branches,
      };
    };
    const refresh = () => {
      clearTimeout(refreshTimer);
      refreshTimer = setTimeout(async () => {
        const mine = ++generation;
        try {
          const views = await readViews();
          if (!stopped && mine === generation) {
            setData(views);
            setError(null);
          }
        } catch (failure) {
          if (!stopped) setError(failure.message);
        }
      }, REFRESH_DEBOUNCE_MS);
    };

    (async () => {
      try {
        const [views, stored] = await Promise.all([readViews(), api(`${path}/events`)]);
        if (stopped) return;
        events.current = stored.events;
        live.current = emptyLiveIndex();
        for (const event of stored.events) indexEvent(live.current, event);
        setData(views);
        follower = followEvents(id, stored.events.length, {
          onEvent(event) {
            events.current.push(event);
            indexEvent(live.current, event);
            rerender();
            if (event.type !== 'assistant/chunk') refresh();
          },
          onState(state, detail) {
            if (!stopped) setStream({ state, detail });
          },
        });
      } catch (failure) {
        if (!stopped) setError(failure.message);
      }
    })();
    return () => {
      stopped = true;
      clearTimeout(refreshTimer);
      follower?.close();
      if (frame.current) cancelAnimationFrame(frame.current);
    };
  }, [id, rerender]);

  const toggle = useCallback((compactionId) => {
    setExpanded((previous) => {
      const next = new Set(previous);
      if (next.has(compactionId)) next.delete(compactionId);
      else next.add(compactionId);
      return next;
    });
  }, []);

  if (!data) {
    return html`<main class="session">
      ${error ? html`<p class="error" data-testid="load-error">${error}</p>` : html`<p class="muted">Loading ${id}…</p>`}
    </main>`;
  }
  const context = readContext(data.context);
  const status = data.status;
  const budget = budgetOf(context, status);
  const contextWindow = context?.window ?? status?.contextWindow ?? null;
  return html` <main class="session" data-testid="session-view" data-session-id=${id}>
    <${SessionHeader} data=${data} stream=${stream} events=${events.current.length} />
    ${error ? html`<p class="error">${error}</p>` : null}
    <${Approvals} id=${id} pending=${data.view.activity.pendingApprovals} />
    <section class="pressure">
      <div class="panel plot-panel">
        <h2>Context pressure <span class="muted">prompt tokens per model request</span></h2>
        <${ContextPlot}
          requests=${data.view.requests}
          actions=${data.view.contextActions}
          budget=${budget}
          window=${contextWindow}
        />
      </div>
      ${context ? html`<${ContextBreakdown} context=${context} />` : null}
    </section>
    <div class="columns">
      <${Timeline} view=${data.view} live=${live.current} openArtifact=${setArtifact} />
      <${LogPanel}
        events=${events.current}
        surface=${data.surface}
        actions=${data.view.contextActions}
        expanded=${expanded}
        toggle=${toggle}
      />
      <${NextRequest}
        events=${events.current}
        surface=${data.surface}
        messages=${data.messages}
        context=${context}
        status=${status}
        budget=${budget}
        window=${contextWindow}
        actions=${data.view.contextActions}
        expanded=${expanded}
        toggle=${toggle}
      />
    </div>
    ${artifact ? html`<${ArtifactViewer} artifact=${artifact} onClose=${() => setArtifact(null)} />` : null}
  </main>`;
}

function SessionHeader({ data, stream, events }) {
  const { session, status, view, branches } = data;
  const phase = phaseOf(view.activity, status);
  return html` <header class="session-head">
    <h1>${session.id}</h1>
    <span class=${`phase phase-${phase.replace(/[ :]+/g, '-')}`} data-testid="phase">${phase}</span>
    <span class=${`stream stream-${stream.state}`} data-testid="stream-state" title=${stream.detail ?? ''}
      >${stream.state === 'live' ? '● live' : stream.state}</span
    >
    <dl class="facts">
      <div>
        <dt>created</dt>
        <dd>${formatTime(session.createdAt)}</dd>
      </div>
      ${
        view.activity.pausedOn
          ? html`<div data-testid="budget-breach">
              <dt>cap reached</dt>
              <dd>
                ${view.activity.pausedOn.scope} ${view.activity.pausedOn.cap}:
                ${formatNumber(view.activity.pausedOn.used)} of
                ${formatNumber(view.activity.pausedOn.limit)}${
                  view.activity.pausedOn.tool ? ` (${view.activity.pausedOn.tool} repeated)` : ''
                }
              </dd>
            </div>`
          : null
      }
      ${
        session.agent?.model
          ? html`<div>
              <dt>model</dt>
              <dd>${session.agent.model}</dd>
            </div>`
          : null
      }
      ${
        session.parentSession
          ? html`<div>
              <dt>fork of</dt>
              <dd><a href=${`#/sessions/${encodeURIComponent(session.parentSession)}`}>${session.parentSession}</a></dd>
            </div>`
          : null
      }
      ${
        branches?.length > 0
          ? html`<div>
              <dt>branches</dt>
              <dd data-testid="branches">
                ${branches.map(
                  (branch, i) =>
                    html`${i > 0 ? ', ' : ''}<a
                        href=${`#/sessions/${encodeURIComponent(branch.sessionId)}`}
                        data-branch=${branch.sessionId}
                        title=${`forked after seq ${branch.forkedAt}`}
                        >${branch.sessionId}</a
                      >`,
                )}
              </dd>
            </div>`
          : null
      }
      <div>
        <dt>turns</dt>
        <dd data-testid="turn-count">${view.activity.turns}</dd>
      </div>
      <div>
        <dt>events</dt>
        <dd data-testid="event-count" data-count=${events}>${formatNumber(events)}</dd>
      </div>
      <div>
        <dt>workflow</dt>
        <dd>
          ${status ? `${status.phase}, turn ${status.turn}${status.pending ? `, ${status.pending} queued` : ''}` : 'not running'}
        </dd>
      </div>
      <div>
        <dt>tokens</dt>
        <dd>
          <${TokenGauge}
            tokens=${status?.tokens ?? view.activity.lastRequestTokens}
            pressure=${status?.pressure ?? null}
            window=${status?.contextWindow ?? null}
          />
        </dd>
      </div>
      ${
        status?.lastError
          ? html`<div>
              <dt>last error</dt>
              <dd class="error">${status.lastError}</dd>
            </div>`
          : null
      }
    </dl>
  </header>`;
}

function Approvals({ id, pending }) {
  const [answers, setAnswers] = useState({});
  if (pending.length === 0) return null;
  const answer = async (callId, decision) => {
    setAnswers((previous) => ({ ...previous, [callId]: { state: 'sending', decision } }));
    try {
      await api(`${sessionPath(id)}/approvals/${encodeURIComponent(callId)}`, { method: 'POST', body: { decision } });
      setAnswers((previous) => ({ ...previous, [callId]: { state: 'sent', decision } }));
    } catch (failure) {
      const message =
        failure.status === 404 && failure.code === 'NOT_FOUND'
          ? 'this gateway has no approvals API yet'
          : failure.message;
      setAnswers((previous) => ({ ...previous, [callId]: { state: 'failed', decision, message } }));
    }
  };
  return html` <section class="panel approvals" data-testid="approvals">
    <h2>Waiting for approval</h2>
    ${pending.map((request) => {
      const sent = answers[request.callId];
      return html`<div class="approval" data-call-id=${request.callId}>
        <div>
          <code>${request.tool}</code>
          <span class="muted"
            >call ${request.callId} ·
            #${request.seq}${request.expiresAt ? ` · expires ${formatTime(request.expiresAt)}` : ''}</span
          >
        </div>
        <pre>${JSON.stringify(request.arguments, null, 2)}</pre>
        <button
          class="approve"
          disabled=${sent?.state === 'sending'}
          onClick=${() => answer(request.callId, 'approve')}
        >
          Approve
        </button>
        <button class="deny" disabled=${sent?.state === 'sending'} onClick=${() => answer(request.callId, 'deny')}>
          Deny
        </button>
        ${sent?.state === 'sent' ? html`<span class="muted">${sent.decision} sent</span>` : null}
        ${sent?.state === 'failed' ? html`<span class="error">${sent.message}</span>` : null}
      </div>`;
    })}
  </section>`;
}

function ContextBreakdown({ context }) {
  const scale = Math.max(context.total, context.budget ?? 0, 1);
  return html` <div class="panel breakdown" data-testid="context-breakdown">
    <h2>Next request by kind</h2>
    <div class="stack">
      ${context.kinds.map((k) => html`<span class=${`stack-part kind-${k.kind}`} style=${{ width: `${(k.tokens / scale) * 100}%` }} title=${`${k.kind}: ${formatNumber(k.tokens)}`}></span>`)}
    </div>
    <ul class="kinds">
      ${context.kinds.map((k) => html`<li><span class=${`swatch kind-${k.kind}`}></span>${k.kind} <strong>${formatNumber(k.tokens)}</strong></li>`)}
    </ul>
    <p>
      total <strong>${formatNumber(context.total)}</strong>
      ${context.budget ? html` of budget ${formatNumber(context.budget)} (${formatPercent(context.total / context.budget)})` : null}
      ${context.window ? html` · window ${formatNumber(context.window)}` : null}
      ${context.nextCompactionAt ? html` · compacts at ${formatNumber(context.nextCompactionAt)}` : null}
    </p>
  </div>`;
}

/** Long text cut to `chars`, with a link that shows the rest. */
function ClippedText({ text, chars }) {
  const [all, setAll] = useState(false);
  if (all || text.length <= chars) return html`<div class="text">${text}</div>`;
  return html`<div class="text">
    ${text.slice(0, chars)}…
    <button class="link more" onClick=${() => setAll(true)}>show all ${formatNumber(text.length)} characters</button>
  </div>`;
}

// ---- timeline ------------------------------------------------------------------------------

function Timeline({ view, live, openArtifact }) {
  const known = new Set(view.turns.map((t) => t.turn));
  // Turns the live tail has seen but the folded view has not caught up with yet.
  const pending = [...live.turns.values()].filter((t) => !known.has(t.turn));
  return html` <section class="panel timeline" data-testid="timeline">
    <h2>Turns <span class="muted">${view.activity.turns}</span></h2>
    ${view.turns.length === 0 && pending.length === 0 ? html`<p class="muted">No turns yet. Post a message: <code>POST /v1/sessions/:id/messages</code>.</p>` : null}
    ${view.turns.map((turn) => html`<${Turn} key=${turn.turn} turn=${turn} live=${live} openArtifact=${openArtifact} />`)}
    ${pending.map(
      (turn) =>
        html`<article class="turn open" data-testid="turn" data-turn=${turn.turn} data-outcome="open">
          <header>
            <strong>Turn ${turn.turn}</strong> <span class="badge open">${turn.ended ? 'ended' : 'running'}</span>
          </header>
          ${[...turn.steps].map((step) => html`<${Reply} turn=${turn.turn} step=${step} reply=${null} live=${live} />`)}
        </article>`,
    )}
  </section>`;
}

function Turn({ turn, live, openArtifact }) {
  const outcome = turn.outcome ?? 'open';
  return html` <article
    class=${`turn outcome-${outcome}`}
    data-testid="turn"
    data-turn=${turn.turn}
    data-outcome=${outcome}
  >
    <header>
      <strong>Turn ${turn.turn}</strong>
      <span class=${`badge ${outcome}`}>${turn.outcome ?? 'running'}</span>
      <span class="muted"
        >#${turn.startSeq}${turn.endSeq !== null ? `–#${turn.endSeq}` : ''} ·
        ${formatTime(turn.startedAt)}${turn.endedAt ? ` · ${formatDuration(turn.endedAt - turn.startedAt)}` : ''}</span
      >
    </header>
    ${turn.userMessages.map(
      (m) =>
        html`<div class="msg user" data-testid="user-message" data-seq=${m.seq}>
          <div class="msg-head">
            user${m.source !== 'user' ? ` (${m.source})` : ''}${m.step > 1 ? ` · joined at step ${m.step}` : ''}
            <span class="muted">#${m.seq}</span>
          </div>
          <${ClippedText} text=${m.text} chars=${400} />
        </div>`,
    )}
    ${turn.steps.map((step) => html`<${Step} key=${step.step} turn=${turn} step=${step} live=${live} openArtifact=${openArtifact} />`)}
    ${turn.error ? html`<div class="error" data-testid="turn-error">${turn.error.code}: ${turn.error.message}</div>` : null}
    ${outcome === 'aborted' ? html`<div class="note">cancelled: the partial reply was logged as interrupted</div>` : null}
    ${outcome === 'interrupted' ? html`<div class="note">interrupted: the run stopped mid-turn and a new run closed it from the log</div>` : null}
  </article>`;
}

function Step({ turn, step, live, openArtifact }) {
  return html` <div class="step" data-testid="step" data-step=${step.step}>
    ${turn.steps.length > 1 ? html`<div class="step-head">step ${step.step} <span class="muted">#${step.startSeq}</span></div>` : null}
    ${step.retries.map(
      (r) =>
        html`<div class="retry" data-testid="retry">
          retry: attempt ${r.attempt} after ${formatDuration(r.delayMs)} —
          ${r.failure.code}${r.failure.status ? ` (${r.failure.status})` : ''}: ${clip(r.failure.message, 200)}
          <span class="muted">#${r.seq}</span>
        </div>`,
    )}
    ${step.reply || live.streamed.has(stepKey(turn.turn, step.step)) || live.final.has(stepKey(turn.turn, step.step)) ? html`<${Reply} turn=${turn.turn} step=${step.step} reply=${step.reply} live=${live} />` : null}
    ${step.toolCalls.map((call) => html`<${ToolCall} call=${call} openArtifact=${openArtifact} />`)}
  </div>`;
}

function Reply({ turn, step, reply, live }) {
  const key = stepKey(turn, step);
  const logged = reply?.seq !== null && reply?.seq !== undefined;
  const finalText = logged ? reply.text : live.final.get(key);
  const streamedText = live.streamed.get(key) ?? '';
  const streaming = finalText === undefined;
  const text = streaming ? (streamedText.length >= (reply?.text ?? '').length ? streamedText : reply.text) : finalText;
  return html` <div
    class=${`msg assistant${streaming ? ' streaming' : ''}`}
    data-testid="reply"
    data-turn=${turn}
    data-step=${step}
    data-streaming=${streaming ? 'true' : 'false'}
    data-seq=${logged ? reply.seq : ''}
  >
    <div class="msg-head">
      assistant
      ${logged ? html`<span class="muted">#${reply.seq}${reply.chunkSeqs.length > 0 ? ` · ${reply.chunkSeqs.length} chunks folded` : ''}</span>` : html`<span class="muted">streaming…</span>`}
      ${reply?.interrupted ? html`<span class="badge aborted">interrupted</span>` : null}
      ${reply?.finishReason && reply.finishReason !== 'stop' && reply.finishReason !== 'tool_calls' ? html`<span class="badge">${reply.finishReason}</span>` : null}
    </div>
    ${
      reply?.reasoning
        ? html`<details class="reasoning">
            <summary>reasoning (${formatNumber(reply.reasoning.length)} chars)</summary>
            <div class="text">${reply.reasoning}</div>
          </details>`
        : null
    }
    <div class="text" data-testid="reply-text">${text}</div>
    ${reply?.usage ? html`<div class="usage muted">${formatNumber(reply.usage.inputTokens + (reply.usage.cacheReadTokens ?? 0) + (reply.usage.cacheWriteTokens ?? 0))} prompt tokens${reply.usage.cacheReadTokens ? ` (${formatNumber(reply.usage.cacheReadTokens)} cached)` : ''} · ${formatNumber(reply.usage.outputTokens)} output</div>` : null}
  </div>`;
}

function ToolCall({ call, openArtifact }) {
  const result = call.result;
  let args = call.arguments;
  try {
    args = JSON.stringify(JSON.parse(call.arguments));
  } catch {
    // Malformed arguments from the model: show them as the model wrote them.
  }
  // The turns view cuts a long result's middle; its artifact holds all of it.
  const truncated = result && result.chars > result.text.length;
  return html` <div class="tool" data-testid="tool-call" data-call-id=${call.callId}>
    <div class="tool-head">
      <code class="tool-name">${call.name || '(unrecorded call)'}</code><code class="args">${clip(args, 300)}</code>
      <span class="muted">#${call.seq}</span>
    </div>
    ${call.approvalRequest ? html`<div class="note">approval requested${call.approval ? `: ${call.approval.decision}${call.approval.reason ? ` (${call.approval.reason})` : ''}` : ' — waiting'}</div>` : null}
    ${
      result
        ? html`<div
            class=${`tool-result${result.isError ? ' is-error' : ''}`}
            data-testid="tool-result"
            data-seq=${result.seq}
            data-spilled=${result.spilled ? 'true' : 'false'}
          >
            <div class="msg-head">
              result${result.isError ? html` <span class="badge error">error${result.errorCode ? ` ${result.errorCode}` : ''}</span>` : null}${result.spilled ? html` <span class="badge spill">spilled</span>` : null}
              <span class="muted">#${result.seq}</span>
            </div>
            <pre>${result.text}</pre>
            ${
              (result.spilled || truncated) && result.artifact
                ? html`<div class="artifact-line">
                    ${result.spilled ? `preview of ${formatNumber(result.artifact.bytes)} bytes · ` : ''}<a
                      href="#"
                      data-testid="artifact-link"
                      onClick=${(e) => {
                        e.preventDefault();
                        openArtifact(result.artifact);
                      }}
                      >read the full output</a
                    >
                    <span class="muted">${result.artifact.locator}</span>
                  </div>`
                : null
            }
          </div>`
        : html`<div class="muted">running…</div>`
    }
  </div>`;
}

// ---- log beside the surface --------------------------------------------------------------------

function stateOf(event, onSurface, shadowed) {
  if (onSurface.has(event.seq)) return { state: 'surface', label: 'on surface' };
  const by = shadowed.get(event.seq);
  if (by?.kind === 'summary') return { state: 'summary', label: `summarized → #${by.by}` };
  if (by?.kind === 'prune') return { state: 'prune', label: `pruned → #${by.by}` };
  if (by) return { state: 'replace', label: `replaced → #${by.by}` };
  return { state: 'log', label: '' };
}

function EventRow({ event, onSurface, shadowed }) {
  const { state, label } = stateOf(event, onSurface, shadowed);
  return html` <div
    class=${`ev state-${state}`}
    data-testid="log-event"
    data-seq=${event.seq}
    data-type=${event.type}
    data-state=${state}
  >
    <span class="seq">#${event.seq}</span>
    <span class="type">${event.type}</span>
    <span class="desc">${clip(describeEvent(event).replace(/\s+/g, ' '), 90)}</span>
    ${label ? html`<span class=${`state state-${state}`}>${label}</span>` : null}
  </div>`;
}

/** Rows of the log: each run of chunks folded into one row naming the reply it became. */
function logRows(events) {
  const replies = new Map();
  for (const event of events)
    if (event.type === 'assistant/message') replies.set(stepKey(event.data.turn, event.data.step), event.seq);
  const rows = [];
  for (let i = 0; i < events.length; i++) {
    const event = events[i];
    if (event.type !== 'assistant/chunk') {
      rows.push({ kind: 'event', event });
      continue;
    }
    let j = i;
    while (j + 1 < events.length && events[j + 1].type === 'assistant/chunk') j++;
    rows.push({
      kind: 'chunks',
      from: event.seq,
      to: events[j].seq,
      count: j - i + 1,
      reply: replies.get(stepKey(event.data.turn, event.data.step)) ?? null,
    });
    i = j;
  }
  return rows;
}

function OriginalList({ seqs, events }) {
  return html` <div class="originals" data-testid="originals">
    ${seqs.map((seq) => {
      const event = events[seq];
      return html`<div class="original" data-seq=${seq}>
        <span class="seq">#${seq}</span> <span class="type">${event?.type ?? '?'}</span>
        <div class="text">${event ? clip(describeEvent(event), 1200) : ''}</div>
      </div>`;
    })}
  </div>`;
}

function Bracket({ compaction, rows, events, onSurface, shadowed, expanded, toggle }) {
  const open = expanded.has(compaction.compactionId);
  return html` <div
    class=${`bracket${compaction.error ? ' failed' : ''}`}
    data-testid="bracket"
    data-compaction-id=${compaction.compactionId}
    data-trigger=${compaction.trigger}
  >
    <div class="bracket-head">
      <strong>compaction</strong>
      <span class="badge">${compaction.trigger}</span
      >${compaction.turn !== null ? html` <span class="muted">in turn ${compaction.turn}</span>` : null}
      <div class="bracket-facts">
        <span data-testid="bracket-shadowed"
          >shadows ${compaction.shadowedSeqs.length} events:
          ${seqRanges([...compaction.shadowedSeqs].sort((a, b) => a - b))}</span
        >
        ${compaction.shadowedTokens !== null ? html`<span>${formatNumber(compaction.shadowedTokens)} tokens → summary ${formatNumber(compaction.summaryTokens)}</span>` : null}
        <span data-testid="bracket-tokens"
          >request ${formatNumber(compaction.tokensBefore)} → ${formatNumber(compaction.tokensAfter)} tokens</span
        >
        ${compaction.error ? html`<span class="error">failed: ${compaction.error}</span>` : null}
      </div>
      ${
        compaction.shadowedSeqs.length > 0
          ? html`<button class="link" data-testid="toggle-originals" onClick=${() => toggle(compaction.compactionId)}>
              ${open ? 'hide the originals' : `show the ${compaction.shadowedSeqs.length} originals`}
            </button>`
          : null
      }
    </div>
    ${rows.map((row) => html`<${EventRow} event=${row.event} onSurface=${onSurface} shadowed=${shadowed} />`)}
    ${open ? html`<${OriginalList} seqs=${compaction.shadowedSeqs} events=${events} />` : null}
  </div>`;
}

function LogPanel({ events, surface, actions, expanded, toggle }) {
  const [showAll, setShowAll] = useState(false);
  const onSurface = useMemo(() => new Set(surface.nodes.map((n) => n.seq)), [surface]);
  const shadowed = useMemo(() => new Map(surface.shadowed.map((s) => [s.seq, s])), [surface]);
  const brackets = new Map(actions.filter((a) => a.kind === 'compaction').map((a) => [a.startSeq, a]));
  const rows = logRows(events);
  const grouped = [];
  for (let i = 0; i < rows.length; i++) {
    const row = rows[i];
    const compaction = row.kind === 'event' ? brackets.get(row.event.seq) : undefined;
    if (!compaction) {
      grouped.push(row);
      continue;
    }
    const inner = [row];
    const end = compaction.endSeq ?? Number.POSITIVE_INFINITY;
    while (i + 1 < rows.length && rows[i + 1].kind === 'event' && rows[i + 1].event.seq <= end) inner.push(rows[++i]);
    grouped.push({ kind: 'bracket', compaction, rows: inner });
  }
  const shown = showAll ? grouped : grouped.slice(-LOG_ROWS);
  return html` <section class="panel log" data-testid="log">
    <h2>
      Log
      <span class="muted"
        >${formatNumber(events.length)} events · ${formatNumber(surface.nodes.length)} on the surface ·
        ${formatNumber(surface.shadowed.length)} shadowed</span
      >
    </h2>
    ${shown.length < grouped.length ? html`<button class="link" onClick=${() => setShowAll(true)}>show ${grouped.length - shown.length} earlier rows</button>` : null}
    <div class="events">
      ${shown.map((row) => {
        if (row.kind === 'bracket')
          return html`<${Bracket}
            key=${row.compaction.compactionId}
            compaction=${row.compaction}
            rows=${row.rows}
            events=${events}
            onSurface=${onSurface}
            shadowed=${shadowed}
            expanded=${expanded}
            toggle=${toggle}
          />`;
        if (row.kind === 'chunks') {
          return html`<div class="ev chunks" data-testid="log-chunks" data-from=${row.from} data-to=${row.to}>
            <span class="seq">#${row.from}${row.to !== row.from ? `–#${row.to}` : ''}</span
            ><span class="type">assistant/chunk ×${row.count}</span>
            <span class="desc">${row.reply !== null ? `folded into #${row.reply}` : 'streaming…'}</span>
          </div>`;
        }
        return html`<${EventRow}
          key=${row.event.seq}
          event=${row.event}
          onSurface=${onSurface}
          shadowed=${shadowed}
        />`;
      })}
    </div>
  </section>`;
}

// ---- the next request -----------------------------------------------------------------------

function latestHeader(events) {
  for (let i = events.length - 1; i >= 0; i--) if (events[i].type === 'request/header') return events[i].data.header;
  return null;
}

function NextRequest({
  events,
  surface,
  messages,
  context,
  status,
  budget,
  window: contextWindow,
  actions,
  expanded,
  toggle,
}) {
  const header = latestHeader(events);
  const seqById = new Map(surface.nodes.filter((n) => n.messageId !== null).map((n) => [n.messageId, n.seq]));
  const compactions = new Map(actions.filter((a) => a.kind === 'compaction').map((a) => [a.compactionId, a]));
  const total = context?.total ?? status?.tokens ?? null;
  return html` <section class="panel next-request" data-testid="next-request">
    <h2>Next request <span class="muted">${messages.length} messages</span></h2>
    <p class="totals" data-testid="next-request-totals">
      ${total !== null ? html`<strong>${formatNumber(total)}</strong> tokens` : html`<span class="muted">tokens unknown while no workflow runs</span>`}
      ${budget ? html` · budget ${formatBudget(budget)}${total !== null ? ` (${formatPercent(total / budget.value)})` : ''}` : null}
      ${contextWindow ? html` · window ${formatNumber(contextWindow)}` : null}
    </p>
    ${
      header
        ? html`<div class="envelope">
            <div><span class="muted">model</span> ${header.model}</div>
            ${
              header.system
                ? html`<details>
                    <summary>system prompt (${formatNumber(header.system.length)} chars)</summary>
                    <pre>${header.system}</pre>
                  </details>`
                : null
            }
            ${header.tools?.length ? html`<div><span class="muted">tools</span> ${header.tools.map((t) => t.name).join(', ')}</div>` : null}
          </div>`
        : null
    }
    ${messages.map((message, index) => {
      const seq = seqById.get(message.id);
      const tokens = context?.messageTokens.get(`seq:${seq}`);
      const compactionId = message.source?.kind === 'plugin' ? message.source.compactionId : undefined;
      const compaction = compactionId ? compactions.get(compactionId) : undefined;
      const replaced = surface.shadowed.some((s) => s.by === seq && s.kind === 'prune');
      const kind = compaction ? 'summary' : message.content?.[0]?.type === 'tool-result' ? 'tool-result' : message.role;
      return html`<div
        class=${`msg ${message.role} kind-${kind}`}
        data-testid="next-message"
        data-index=${index}
        data-seq=${seq ?? ''}
        data-kind=${kind}
      >
        <div class="msg-head">
          ${kind}${seq !== undefined ? html` <span class="muted">#${seq}</span>` : null}${replaced ? html` <span class="badge prune">pruned</span>` : null}
          ${tokens !== undefined ? html`<span class="tokens" data-testid="message-tokens">${formatNumber(tokens)} tok</span>` : null}
        </div>
        <${ClippedText}
          text=${messageText(message)}
          chars=${kind === 'summary' ? 2000 : kind === 'tool-result' ? 240 : 400}
        />
        ${
          compaction && compaction.shadowedSeqs.length > 0
            ? html`<button class="link" data-testid="toggle-originals" onClick=${() => toggle(compaction.compactionId)}>
                  ${expanded.has(compaction.compactionId) ? 'hide the originals' : `show the ${compaction.shadowedSeqs.length} originals it replaced`}
                </button>
                ${expanded.has(compaction.compactionId) ? html`<${OriginalList} seqs=${compaction.shadowedSeqs} events=${events} />` : null}`
            : null
        }
      </div>`;
    })}
  </section>`;
}

// ---- artifacts ----------------------------------------------------------------------------

function ArtifactViewer({ artifact, onClose }) {
  const [offset, setOffset] = useState(0);
  const [page, setPage] = useState(null);
  const [error, setError] = useState(null);
  useEffect(() => {
    let stopped = false;
    api(
      `${sessionPath(artifact.sessionId)}/artifacts/${encodeURIComponent(artifact.name)}?offset=${offset}&limit=${ARTIFACT_PAGE}`,
    )
      .then((answer) => !stopped && setPage(answer))
      .catch((failure) => !stopped && setError(failure.message));
    return () => {
      stopped = true;
    };
  }, [artifact, offset]);
  return html` <div class="overlay" onClick=${(e) => e.target === e.currentTarget && onClose()}>
    <div class="viewer panel" role="dialog" aria-label="artifact" data-testid="artifact-viewer">
      <header>
        <strong>${artifact.locator}</strong>
        <span class="muted" data-testid="artifact-range"
          >${page ? `characters ${formatNumber(page.offset)}–${formatNumber(page.offset + page.text.length)} of ${formatNumber(page.total)}` : 'loading…'}</span
        >
        <span class="spacer"></span>
        <button disabled=${offset === 0} onClick=${() => setOffset(Math.max(0, offset - ARTIFACT_PAGE))}>
          previous page
        </button>
        <button
          data-testid="artifact-next"
          disabled=${!page || page.offset + page.text.length >= page.total}
          onClick=${() => setOffset(offset + ARTIFACT_PAGE)}
        >
          next page
        </button>
        <button onClick=${onClose}>close</button>
      </header>
      ${error ? html`<p class="error">${error}</p>` : null}
      <pre data-testid="artifact-text">${page?.text ?? ''}</pre>
    </div>
  </div>`;
}
