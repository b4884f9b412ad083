// The timeline of a session's turns: each turn's steps, streamed replies and tool calls.
import { useState } from 'preact/hooks';
import { clip, formatDuration, formatNumber, formatTime, html, stepKey } from './format.js';
import { MediaBlocks } from './media.js';

/** The logged event of `seq` (the log is read whole from seq 0, so it is at its own index). */
const eventAt = (events, seq) => (events?.[seq]?.seq === seq ? events[seq] : events?.find((e) => e.seq === seq));

/** Long text cut to `chars`, with a link that shows the rest. */
export function ClippedText({ text, chars }) {
  const [all, setAll] = useState(false);
  if (all || text.length <= chars) return html`<div class="text">${text}</div>`;
  return html`<div class="text">
    ${text.slice(0, chars)}…
    <button class="link more" onClick=${() => setAll(true)}>show all ${formatNumber(text.length)} characters</button>
  </div>`;
}

// ---- timeline ------------------------------------------------------------------------------

export function Timeline({ view, live, events, openArtifact }) {
  const known = new Set(view.turns.map((t) => t.turn));
  // Turns the live tail has seen but the folded view has not caught up with yet.
  const pending = [...live.turns.values()].filter((t) => !known.has(t.turn));
  return html` <section class="panel timeline" data-testid="timeline">
    <h2>Turns <span class="muted">${view.activity.turns}</span></h2>
    ${view.turns.length === 0 && pending.length === 0 ? html`<p class="muted">No turns yet. Post a message: <code>POST /v1/sessions/:id/messages</code>.</p>` : null}
    ${view.turns.map((turn) => html`<${Turn} key=${turn.turn} turn=${turn} live=${live} events=${events} openArtifact=${openArtifact} />`)}
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

function Turn({ turn, live, events, openArtifact }) {
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
          <${MediaBlocks} content=${eventAt(events, m.seq)?.data?.content} />
        </div>`,
    )}
    ${turn.steps.map((step) => html`<${Step} key=${step.step} turn=${turn} step=${step} live=${live} events=${events} openArtifact=${openArtifact} />`)}
    ${turn.error ? html`<div class="error" data-testid="turn-error">${turn.error.code}: ${turn.error.message}</div>` : null}
    ${outcome === 'aborted' ? html`<div class="note">cancelled: the partial reply was logged as interrupted</div>` : null}
    ${outcome === 'interrupted' ? html`<div class="note">interrupted: the run stopped mid-turn and a new run closed it from the log</div>` : null}
  </article>`;
}

function Step({ turn, step, live, events, openArtifact }) {
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
    ${step.toolCalls.map((call) => html`<${ToolCall} call=${call} events=${events} openArtifact=${openArtifact} />`)}
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

function ToolCall({ call, events, openArtifact }) {
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
            <${MediaBlocks} content=${eventAt(events, result.seq)?.data?.message?.content} />
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
