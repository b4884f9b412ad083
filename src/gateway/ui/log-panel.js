// The log beside the surface: every event, with shadowed ranges, compaction brackets, prunes and spills marked.
import { useMemo, useState } from 'preact/hooks';
import { clip, describeEvent, formatNumber, html, stepKey } from './format.js';

const LOG_ROWS = 400;

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

export function OriginalList({ seqs, events }) {
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

export function LogPanel({ events, surface, actions, expanded, toggle }) {
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
