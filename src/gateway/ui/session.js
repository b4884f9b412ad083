// One session: the timeline of turns, the log beside the surface, the next request's messages,
// the context-pressure plot, pending approvals and a live tail. Every panel is drawn from a
// documented /v1 route; the live tail appends events as they are logged and refreshes the
// folded views (turns, surface, history) after each boundary event.
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { api, documentedRoutes, followEvents, sessionPath } from './api.js';
import { formatNumber, formatPercent, formatTime, html, messageText, stepKey } from './format.js';
import { ArtifactViewer } from './artifact-viewer.js';
import { ContextPlot } from './plot.js';
import { LogPanel } from './log-panel.js';
import { NextRequest } from './next-request.js';
import { TokenGauge, phaseOf } from './sessions.js';
import { Timeline } from './timeline.js';

const CONTEXT_ROUTE = '/v1/sessions/{id}/context';
const BRANCHES_ROUTE = '/v1/sessions/{id}/branches';
const REFRESH_DEBOUNCE_MS = 120;
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
      <${Timeline} view=${data.view} live=${live.current} events=${events.current} openArtifact=${setArtifact} />
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
