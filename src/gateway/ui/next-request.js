// The derived messages the next model request will carry, and what its context holds.
import { formatBudget, formatNumber, formatPercent, html, messageText } from './format.js';
import { OriginalList } from './log-panel.js';
import { ClippedText } from './timeline.js';

function latestHeader(events) {
  for (let i = events.length - 1; i >= 0; i--) if (events[i].type === 'request/header') return events[i].data.header;
  return null;
}

export function NextRequest({
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
