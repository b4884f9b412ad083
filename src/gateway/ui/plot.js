// The context-pressure plot: the prompt tokens of every model request (from the usage logged on
// each assistant/message) against the budget and the window, with the compactions, prunes and
// overflows between requests marked. The same data is listed in a table under the chart.
import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import { formatBudget, formatNumber, html } from './format.js';

const MARK_STYLE = {
  compaction: { color: '#7c3aed', label: 'C' },
  overflow: { color: '#dc2626', label: 'O' },
  prune: { color: '#d97706', label: 'P' },
};

/** The marks drawn between requests: one per compaction bracket, prunes grouped per position. */
export function plotMarks(actions) {
  const marks = [];
  const prunes = new Map();
  for (const action of actions) {
    if (action.kind === 'compaction') {
      marks.push({
        kind: action.trigger === 'context-overflow' ? 'overflow' : 'compaction',
        after: action.afterRequest,
        action,
      });
    } else {
      const mark = prunes.get(action.afterRequest) ?? { kind: 'prune', after: action.afterRequest, count: 0 };
      mark.count += 1;
      prunes.set(action.afterRequest, mark);
    }
  }
  return [...marks, ...prunes.values()].sort((a, b) => a.after - b.after);
}

function drawMarks(marks) {
  return (u) => {
    const { ctx } = u;
    const { top, height } = u.bbox;
    ctx.save();
    ctx.font = `${Math.round(11 * devicePixelRatio)}px sans-serif`;
    ctx.textAlign = 'center';
    for (const mark of marks) {
      const style = MARK_STYLE[mark.kind];
      const x = Math.round(u.valToPos(mark.after + 0.5, 'x', true));
      ctx.strokeStyle = style.color;
      ctx.fillStyle = style.color;
      ctx.lineWidth = Math.max(1, devicePixelRatio * (mark.kind === 'prune' ? 1 : 2));
      ctx.setLineDash(mark.kind === 'prune' ? [3 * devicePixelRatio, 3 * devicePixelRatio] : []);
      ctx.beginPath();
      ctx.moveTo(x, top);
      ctx.lineTo(x, top + height);
      ctx.stroke();
      ctx.fillText(
        mark.kind === 'prune' && mark.count > 1 ? `${style.label}×${mark.count}` : style.label,
        x,
        top + 12 * devicePixelRatio,
      );
    }
    ctx.restore();
  };
}

/**
 * The y axis's width: its tick, its gap and its longest label as drawn (uPlot's fixed default
 * clipped labels such as "1,200,000"). Measured in the axis's own font on uPlot's canvas.
 */
function yAxisSize(self, values, axisIndex, cycle) {
  const axis = self.axes[axisIndex];
  // Asked again in the same layout pass: keep the size already given.
  if (cycle > 1) return axis._size;
  let size = axis.ticks.size + axis.gap;
  const longest = (values ?? []).reduce((acc, value) => (String(value).length > acc.length ? String(value) : acc), '');
  if (longest !== '') {
    self.ctx.font = axis.font[0];
    size += self.ctx.measureText(longest).width / (window.devicePixelRatio || 1);
  }
  return Math.ceil(size) + 4;
}

/** `budget` is `{value, approximate}` or null; `window` a token count or null. */
export function ContextPlot({ requests, actions, budget, window: contextWindow }) {
  const target = useRef(null);
  const marks = plotMarks(actions);

  useEffect(() => {
    if (!target.current || requests.length === 0) return undefined;
    const xs = requests.map((r) => r.index);
    const tokens = requests.map((r) => r.promptTokens);
    const highest = Math.max(1, ...tokens.filter((t) => t !== null), budget?.value ?? 0);
    // A 1M window beside a few thousand tokens would flatten the data: draw it only when near.
    const showWindow = contextWindow !== null && contextWindow !== undefined && contextWindow <= highest * 2;
    const top = Math.max(highest, showWindow ? contextWindow : 0) * 1.15;
    const series = [
      { label: 'request' },
      { label: 'prompt tokens', stroke: '#2563eb', width: 2, points: { show: true, size: 7, fill: '#2563eb' } },
    ];
    const data = [xs, tokens];
    if (budget) {
      series.push({ label: 'budget', stroke: '#059669', dash: [6, 4], points: { show: false } });
      data.push(xs.map(() => budget.value));
    }
    if (showWindow) {
      series.push({ label: 'window', stroke: '#6b7280', dash: [2, 4], points: { show: false } });
      data.push(xs.map(() => contextWindow));
    }
    const plot = new uPlot(
      {
        width: Math.max(320, target.current.clientWidth),
        height: 220,
        scales: { x: { time: false, range: [0.5, Math.max(1, xs.length) + 0.5] }, y: { range: [0, top] } },
        axes: [{ label: 'model request', incrs: [1, 2, 5, 10, 20, 50, 100] }, { size: yAxisSize }],
        series,
        legend: { show: false },
        hooks: { draw: [drawMarks(marks)] },
      },
      data,
      target.current,
    );
    return () => plot.destroy();
    // Redrawn when the data changes, not on every render of the page (a budget is a fresh object each time).
  }, [requests, actions, budget?.value, contextWindow]);

  if (requests.length === 0) return html`<p class="muted" data-testid="plot-empty">No model requests yet.</p>`;
  return html` <div class="plot" data-testid="plot" data-points=${requests.length}>
    <div ref=${target} class="plot-canvas"></div>
    <div class="plot-legend">
      ${Object.entries(MARK_STYLE).map(([kind, style]) => html`<span class="mark-key" style=${{ color: style.color }}>${style.label} ${kind}</span>`)}
      ${contextWindow ? html`<span class="muted">window ${formatNumber(contextWindow)}</span>` : null}
      ${budget ? html`<span class="muted">budget ${formatBudget(budget)}</span>` : null}
    </div>
    <details class="plot-data">
      <summary>data: ${requests.length} requests, ${marks.length} marks</summary>
      <table data-testid="plot-points">
        <thead>
          <tr>
            <th>#</th>
            <th>turn</th>
            <th>step</th>
            <th>seq</th>
            <th>prompt tokens</th>
            <th>output tokens</th>
          </tr>
        </thead>
        <tbody>
          ${requests.map(
            (r) =>
              html`<tr data-request=${r.index}>
                <td>${r.index}</td>
                <td>${r.turn}</td>
                <td>${r.step}</td>
                <td>#${r.seq}</td>
                <td>${formatNumber(r.promptTokens)}</td>
                <td>${formatNumber(r.outputTokens)}</td>
              </tr>`,
          )}
        </tbody>
      </table>
      <ul data-testid="plot-marks">
        ${marks.map((m) => html`<li data-kind=${m.kind} data-after=${m.after}>${m.kind} after request ${m.after}${m.count > 1 ? ` (${m.count})` : ''}${m.action ? ` · ${m.action.compactionId}` : ''}</li>`)}
      </ul>
    </details>
  </div>`;
}
