// The sessions list: every stored session with its activity (from GET /turns?last=0) and its
// workflow's live status (GET /v1/sessions/:id), refreshed every few seconds.
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, sessionPath } from './api.js';
import { formatAgo, formatNumber, formatPercent, formatTime, html } from './format.js';

const REFRESH_MS = 3000;
const MAX_ROWS = 100;
const CONCURRENCY = 4;

/** Runs `task` over `items`, at most CONCURRENCY at a time. */
async function eachLimited(items, task) {
  let index = 0;
  const worker = async () => {
    while (index < items.length) await task(items[index++]);
  };
  await Promise.all(Array.from({ length: Math.min(CONCURRENCY, items.length) }, worker));
}

/** idle / running / waiting for approval / paused, from the log's activity and the workflow's status. */
export function phaseOf(activity, status) {
  if (activity?.phase === 'waiting-for-approval') return 'waiting for approval';
  if (status?.phase === 'paused') {
    if (status.paused?.reason === 'rate_limit') return 'paused: rate limit';
    if (status.paused?.reason === 'tenant') return "paused: the tenant's share is busy";
    return 'paused: budget';
  }
  if (activity?.phase === 'paused') return 'paused: budget';
  if (activity?.phase === 'running') return 'running';
  if (status && ['turn', 'model', 'tools', 'compacting'].includes(status.phase)) return 'running';
  return 'idle';
}

/**
 * The workflow's own phase, shown muted beside {@link phaseOf}'s when it says more: the step a
 * running turn is at (`model`, `tools`, `compacting`, …). Nothing when it only repeats the
 * shown phase (`idle` beside idle, `paused` beside paused: …), or without a status.
 */
export function workflowDetail(phase, status) {
  if (!status || phase.startsWith(status.phase) || ['idle', 'paused'].includes(status.phase)) return null;
  return status.phase;
}

export function TokenGauge({ tokens, pressure, window: contextWindow }) {
  if (tokens === null || tokens === undefined) return html`<span class="muted">–</span>`;
  const ratio = pressure ?? null;
  const level = ratio === null ? '' : ratio >= 0.8 ? 'high' : ratio >= 0.5 ? 'mid' : 'low';
  return html` <span class="gauge" title=${contextWindow ? `window ${formatNumber(contextWindow)} tokens` : ''}>
    <span class="gauge-bar"
      ><span
        class=${`gauge-fill ${level}`}
        style=${{ width: `${Math.min(100, Math.round((ratio ?? 0) * 100))}%` }}
      ></span
    ></span>
    ${formatNumber(tokens)}${ratio !== null ? html` <span class="muted">(${formatPercent(ratio)} of budget)</span>` : null}
  </span>`;
}

export function SessionList() {
  const [sessions, setSessions] = useState(null);
  const [details, setDetails] = useState({});
  const [filter, setFilter] = useState('');
  const [error, setError] = useState(null);
  const [now, setNow] = useState(Date.now());
  const filterRef = useRef(filter);
  filterRef.current = filter;

  useEffect(() => {
    let stopped = false;
    let timer;
    const refresh = async () => {
      try {
        const { sessions: headers } = await api('/v1/sessions');
        if (stopped) return;
        headers.sort((a, b) => b.createdAt - a.createdAt || a.id.localeCompare(b.id));
        setSessions(headers);
        setError(null);
        const visible = headers.filter((s) => s.id.includes(filterRef.current)).slice(0, MAX_ROWS);
        await eachLimited(visible, async (session) => {
          const [turns, detail] = await Promise.all([
            api(`${sessionPath(session.id)}/turns?last=0`),
            api(sessionPath(session.id)),
          ]);
          if (!stopped)
            setDetails((previous) => ({
              ...previous,
              [session.id]: { activity: turns.activity, status: detail.status },
            }));
        });
      } catch (failure) {
        if (!stopped) setError(failure.message);
      } finally {
        if (!stopped) {
          setNow(Date.now());
          timer = setTimeout(refresh, REFRESH_MS);
        }
      }
    };
    void refresh();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, []);

  const shown = (sessions ?? []).filter((s) => s.id.includes(filter));
  return html` <main class="list">
    <header class="list-head">
      <h1>Sessions</h1>
      <input
        type="search"
        placeholder="filter by id"
        data-testid="filter"
        value=${filter}
        onInput=${(e) => setFilter(e.currentTarget.value)}
      />
      <span class="muted">${sessions ? `${shown.length} of ${sessions.length}` : ''}</span>
    </header>
    ${error ? html`<p class="error">${error}</p>` : null}
    ${sessions === null ? html`<p class="muted">Loading…</p>` : null}
    ${sessions !== null && shown.length === 0 ? html`<p class="muted">No sessions${filter ? ` matching “${filter}”` : ''}. Create one with <code>POST /v1/sessions</code>.</p>` : null}
    ${
      shown.length > 0
        ? html`<table class="sessions" data-testid="sessions">
            <thead>
              <tr>
                <th>id</th>
                <th>created</th>
                <th>turns</th>
                <th>events</th>
                <th>tokens</th>
                <th>phase</th>
                <th>last activity</th>
              </tr>
            </thead>
            <tbody>
              ${shown.slice(0, MAX_ROWS).map((session) => {
                const detail = details[session.id];
                const activity = detail?.activity;
                const status = detail?.status;
                const phase = detail ? phaseOf(activity, status) : '…';
                const step = workflowDetail(phase, status);
                return html`<tr data-testid="session-row" data-session-id=${session.id}>
                  <td>
                    <a href=${`#/sessions/${encodeURIComponent(session.id)}`}>${session.id}</a
                    >${session.parentSession ? html` <span class="muted">fork of ${session.parentSession}</span>` : null}
                  </td>
                  <td>${formatTime(session.createdAt)}</td>
                  <td data-field="turns">${formatNumber(activity?.turns)}</td>
                  <td data-field="events">${formatNumber(activity?.events)}</td>
                  <td data-field="tokens">
                    <${TokenGauge}
                      tokens=${status?.tokens ?? activity?.lastRequestTokens ?? null}
                      pressure=${status?.pressure ?? null}
                      window=${status?.contextWindow ?? null}
                    />
                  </td>
                  <td data-field="phase">
                    <span class=${`phase phase-${phase.replace(/[ :]+/g, '-')}`}>${phase}</span
                    >${step ? html` <span class="muted" data-testid="workflow-phase">${step}</span>` : null}
                  </td>
                  <td data-field="last-activity" title=${formatTime(activity?.lastActivity)}>
                    ${formatAgo(activity?.lastActivity, now)}
                  </td>
                </tr>`;
              })}
            </tbody>
          </table>`
        : null
    }
    ${shown.length > MAX_ROWS ? html`<p class="muted">Showing the newest ${MAX_ROWS}; filter by id to find others.</p>` : null}
  </main>`;
}
